//! Contract §12's robustness rules, one regression per defect a hostile user found: output
//! files that are not regular files, absurd durations, a closed stderr.

use std::os::unix::fs::{symlink, FileTypeExt};
use std::os::unix::io::FromRawFd;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::json;

use super::harness::{cassette, deerflow, processes_with, workspace, BIN};

fn answer_cassette(dir: &Path) -> String {
    let c = cassette(dir, json!({"version": 1, "lead": [{"text": "the answer"}]}));
    format!("replay:{}", c.display())
}

#[tokio::test(flavor = "multi_thread")]
async fn output_to_a_fifo_is_written_through_and_the_fifo_stays() {
    let ws = workspace();
    let fifo = ws.path().join("answer.pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let model = answer_cassette(ws.path());
    let out = deerflow([
        "run",
        "-q",
        "-m",
        &model,
        "-o",
        fifo.to_str().unwrap(),
        "go",
    ])
    .cwd(ws.path())
    .text()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(reader.join().unwrap(), "the answer");
    let ft = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(ft.is_fifo(), "the FIFO was replaced");
}

#[tokio::test(flavor = "multi_thread")]
async fn output_through_a_symlink_keeps_the_link() {
    let ws = workspace();
    let real = ws.path().join("real.txt");
    std::fs::write(&real, "old").unwrap();
    let link = ws.path().join("link.txt");
    symlink(&real, &link).unwrap();
    let model = answer_cassette(ws.path());
    let out = deerflow([
        "run",
        "-q",
        "-m",
        &model,
        "-o",
        link.to_str().unwrap(),
        "go",
    ])
    .cwd(ws.path())
    .text()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&real).unwrap(), "the answer");
}

#[tokio::test(flavor = "multi_thread")]
async fn durations_over_a_year_are_usage_errors() {
    for args in [
        ["--timeout", "1e30"],
        ["--subagent-timeout", "18446744073709551615s"],
        ["--timeout", "366d"],
    ] {
        let out = deerflow(["run", "-m", "replay:none.json", args[0], args[1], "go"])
            .text()
            .await;
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(out.stderr.contains("longer than a year"), "{}", out.stderr);
        assert_eq!(out.stdout, "");
    }
}

/// Runs deerflow with a stderr whose reader is gone: every write to it fails (EPIPE).
fn with_closed_stderr(args: &[&str]) -> i32 {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) returns.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just created and are owned here alone.
    let (reader, writer) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    drop(reader);
    let status = Command::new(BIN)
        .args(args)
        .env_clear()
        .env(
            "HOME",
            std::env::temp_dir().join("deerflow-test-home-empty"),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(writer))
        .status()
        .unwrap();
    status.code().unwrap_or(-1)
}

#[test]
fn a_closed_stderr_changes_no_exit_code() {
    assert_eq!(
        with_closed_stderr(&["run", "--max-concurrent", "0", "x"]),
        2
    );
    assert_eq!(with_closed_stderr(&["no-such-command"]), 2);
    assert_eq!(with_closed_stderr(&["run", "-m", "openai:gpt-x", "x"]), 78);
    let missing = std::env::temp_dir().join("deerflow-no-such-config.yaml");
    assert_eq!(
        with_closed_stderr(&["-c", missing.to_str().unwrap(), "config", "check"]),
        78
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn prompt_file_dash_reads_stdin_and_endless_prompts_stop_at_16_mib() {
    let ws = workspace();
    let c = cassette(ws.path(), json!({"version": 1, "lead": [{"text": "ok"}]}));
    let model = format!("replay:{}", c.display());
    let out = deerflow(["run", "--json", "-m", &model, "--prompt-file", "-"])
        .cwd(ws.path())
        .stdin("from stdin")
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    // /dev/zero never ends: the read stops past 16 MiB with a usage error.
    for args in [
        vec!["run", "-m", &model, "--prompt-file", "/dev/zero"],
        vec!["run", "-m", &model, "-c", "/dev/null", "-p", "-"],
    ] {
        let mut cmd = std::process::Command::new(BIN);
        cmd.args(&args)
            .current_dir(ws.path())
            .stdin(std::fs::File::open("/dev/zero").unwrap());
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("16 MiB"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_total_below_input_plus_output_does_not_evade_the_budget() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"id": "a", "name": "ls", "arguments": {}}],
             "usage": {"input_tokens": 100, "output_tokens": 50, "total_tokens": 0}},
            {"text": "never reached"}
        ]}),
    );
    let model = format!("replay:{}", c.display());
    let out = deerflow(["run", "--json", "--max-tokens", "120", "-m", &model, "go"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 8, "{}", out.stderr);
    assert_eq!(out.completed()["usage"]["total_tokens"], 150);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_with_a_bom_and_crlf_loads_and_an_endless_one_is_refused() {
    let ws = workspace();
    let c = cassette(ws.path(), json!({"version": 1, "lead": [{"text": "ok"}]}));
    let cfg = ws.path().join("deerflow.yaml");
    let text = format!(
        "\u{feff}models:\r\n  - name: demo\r\n    use: replay\r\n    cassette: {}\r\nsubagents:\r\n  max_concurrent: 2\r\n",
        c.display()
    );
    std::fs::write(&cfg, text).unwrap();
    let out = deerflow(["-c", cfg.to_str().unwrap(), "config", "check"])
        .cwd(ws.path())
        .text()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = deerflow(["run", "--json", "-c", cfg.to_str().unwrap(), "go"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.first("run_started")["max_concurrent"], 2);
    let out = deerflow(["-c", "/dev/zero", "config", "check"])
        .text()
        .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stderr.contains("16 MiB"), "{}", out.stderr);
}

/// `deerflow ARGS > /dev/full`: the exit code and stderr.
fn to_full_disk(args: &[&str], cwd: &Path) -> (i32, String) {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env(
            "HOME",
            std::env::temp_dir().join("deerflow-test-home-empty"),
        )
        .stdin(Stdio::null())
        .stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_full_disk_on_stdout_is_exit_1_with_one_line() {
    let ws = workspace();
    let model = answer_cassette(ws.path());
    for mode in [&["--json"][..], &["-q"][..]] {
        let mut args = vec!["run", "-m", &model];
        args.extend_from_slice(mode);
        args.push("go");
        let (code, stderr) = to_full_disk(&args, ws.path());
        assert_eq!(code, 1, "{mode:?}: {stderr}");
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with("deerflow: cannot write to stdout: No space left")),
            "{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_to_another_origin_is_refused_and_carries_nothing_there() {
    use super::openai_http::{assert_no_key, config, run};
    use crate::support::{MockServer, Reply};
    for provider in ["openai", "anthropic"] {
        let origin = MockServer::start().await;
        let elsewhere = MockServer::start().await;
        elsewhere.push_reply(Reply::text("stolen"));
        let target = format!("{}/v1/chat/completions", elsewhere.url());
        origin.push_reply(Reply::status(307).header("Location", target.clone()));
        let ws = workspace();
        let base = if provider == "openai" {
            origin.url()
        } else {
            origin.anthropic_url()
        };
        let cfg = config(ws.path(), provider, &base, "");
        let out = run(&cfg, ws.path(), "hi").json().await;
        assert_eq!(out.code, 1, "{provider}: {}", out.stderr);
        let err = out.completed()["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(err.contains("another origin"), "{err}");
        assert!(err.contains(&elsewhere.url()), "{err}");
        assert_eq!(
            elsewhere.request_count(),
            0,
            "{provider}: followed the redirect"
        );
        assert_eq!(
            origin.request_count(),
            1,
            "{provider}: a refusal is not retried"
        );
        assert_no_key(&out);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_first_byte_is_bounded_by_the_request_timeout_not_the_idle_timeout() {
    use super::openai_http::{config, run};
    use crate::support::{MockServer, Reply};
    let server = MockServer::start().await;
    // A local server evaluating a long prompt: silence before the response starts.
    server.push_reply(Reply::text("thought about it").delay_ms(1500));
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "openai",
        &server.url(),
        ", stream_idle_timeout: 1",
    );
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["final_message"], "thought about it");
}

/// llama-server sends its headers at once, then nothing while it reads the prompt: that
/// silence is bounded by the request timeout, not `stream_idle_timeout` (no retry); once
/// the body has started, silence trips the idle timeout as before.
#[tokio::test(flavor = "multi_thread")]
async fn silence_after_the_headers_before_the_body_is_not_idle() {
    use super::openai_http::{config, run};
    use crate::support::{MockServer, Reply};
    let server = MockServer::start().await;
    server.push_reply(Reply::text("read it all").usage(5, 5).body_delay_ms(2500));
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "openai",
        &server.url(),
        ", stream_idle_timeout: 1, max_retries: 0",
    );
    let out = run(&cfg, ws.path(), "a long prompt").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["final_message"], "read it all");
    let warnings: Vec<_> = out.of_type("warning");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(server.request_count(), 1);

    // The same pause after the first chunk is idle silence.
    server.push_reply(Reply::text("stalls").usage(5, 5).stall_after_chunks(1));
    let out = run(&cfg, ws.path(), "again").json().await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let err = out.completed()["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        err.contains("no data for 1 s (stream_idle_timeout)"),
        "{err}"
    );
}

/// llama.cpp closes its connection after each streamed answer; the next model call of the
/// run finds its pooled connection closed. That request is sent again at once on a new
/// connection: no `model_retry` warning, no retry counted, no backoff (§12).
#[tokio::test(flavor = "multi_thread")]
async fn a_pooled_connection_the_server_closed_is_resent_silently() {
    use super::openai_http::config;
    use crate::support::{MockServer, Reply};
    let server = MockServer::start().await;
    server.close_reused_connections();
    // The pauses let the client put each answered connection back in its pool (it does so
    // in the background) before the next call; under load a call may still open a new one.
    for id in ["c1", "c2"] {
        let pause = json!({"command": "sleep 0.5"});
        server.push_reply(Reply::tool_calls(vec![(id, "bash", pause)]).usage(5, 5));
    }
    server.push_reply(Reply::text("slept").usage(5, 5));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), ", max_retries: 0");
    let out = deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "--allow-bash",
        "-C",
        ws.path().to_str().unwrap(),
        "sleep twice",
    ])
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["final_message"], "slept");
    let warnings = out.of_type("warning");
    assert!(
        warnings.iter().all(|w| w["code"] != "model_retry"),
        "{warnings:?}"
    );
    // Three calls, and each one the server met with a closed connection went again.
    let closed = server.closed_unanswered();
    assert!(closed >= 1, "no call reused a pooled connection");
    assert_eq!(server.request_count(), 3 + closed);
}

/// With no config, `--set models[0].KEY=VALUE` edits the model `-m PROVIDER:NAME` names;
/// with a config that has no entry for it, the run says the `--set` missed it.
#[tokio::test(flavor = "multi_thread")]
async fn set_on_models_0_reaches_the_model_named_by_provider() {
    use super::openai_http::config;
    use crate::support::{MockServer, Reply};
    let server = MockServer::start().await;
    server.push_reply(Reply::text("cold").usage(3, 2));
    server.push_reply(Reply::text("configured").usage(3, 2));
    let ws = workspace();
    let args = |extra: &[&str]| {
        let mut a: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        a.extend(
            [
                "run",
                "--json",
                "-m",
                "openai:m1",
                "--set",
                "models[0].temperature=0",
                "hi",
            ]
            .map(String::from),
        );
        a
    };
    let out = deerflow(args(&[]))
        .cwd(ws.path())
        .env("OPENAI_BASE_URL", &server.url())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["final_message"], "cold");
    let body = &server.requests()[0].body;
    assert_eq!(body["model"], "m1");
    assert_eq!(body["temperature"], 0.0, "{body}");
    assert!(out.of_type("warning").is_empty(), "{}", out.stdout);

    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "openai", &server.url(), "");
    let out = deerflow(args(&["-c", cfg.to_str().unwrap()]))
        .cwd(ws.path())
        .env("OPENAI_BASE_URL", &server.url())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let body = &server.requests()[1].body;
    assert!(body.get("temperature").is_none(), "{body}");
    let warning = out.first("warning");
    assert_eq!(warning["code"], "config_ignored");
    let text = warning["message"].as_str().unwrap();
    assert!(
        text.contains("--set models[0].temperature") && text.contains("'openai:m1'"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bash_never_sees_a_credential() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"id": "e", "name": "bash", "arguments": {"command": "env | sort"}}]},
            {"text": "done"}
        ]}),
    );
    let cfg = ws.path().join("deerflow.yaml");
    std::fs::write(
        &cfg,
        format!(
            "models:\n  - {{name: demo, use: replay, cassette: {}}}\n  - {{name: other, use: openai, model: x, api_key: $MY_LLM}}\nsandbox:\n  bash_env_passthrough: [GIT_ASKPASS_TOKEN]\n",
            c.display()
        ),
    )
    .unwrap();
    let out = deerflow([
        "run",
        "--json",
        "--allow-bash",
        "-c",
        cfg.to_str().unwrap(),
        "go",
    ])
    .cwd(ws.path())
    .env("OPENAI_API_KEY", "sk-very-secret")
    .env("MY_LLM", "llm-secret-value")
    .env("db_password", "hunter2")
    .env("GIT_ASKPASS_TOKEN", "allowed-through")
    .env("PLAIN_SETTING", "visible")
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let env_out = out.first("tool_result")["output"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(env_out.contains("PLAIN_SETTING=visible"), "{env_out}");
    assert!(
        env_out.contains("GIT_ASKPASS_TOKEN=allowed-through"),
        "{env_out}"
    );
    for secret in ["sk-very-secret", "llm-secret-value", "hunter2"] {
        assert!(!out.stdout.contains(secret), "{secret} leaked: {env_out}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_urls_keys_and_references_are_config_errors_before_the_run() {
    let ws = workspace();
    let check = |entry: &str| {
        let cfg = ws.path().join("bad.yaml");
        std::fs::write(
            &cfg,
            format!("models:\n  - {{name: m, use: openai, model: x, {entry}}}\n"),
        )
        .unwrap();
        cfg
    };
    for (entry, says) in [
        (
            "base_url: 'file:///etc/passwd', api_key: k",
            "not an http(s) URL",
        ),
        (
            "base_url: 'localhost:8080/v1', api_key: k",
            "not an http(s) URL",
        ),
        ("api_key: '${OPENAI_API_KEY}'", "whole $NAME reference"),
        ("api_key: '$HOME/key'", "whole $NAME reference"),
    ] {
        let cfg = check(entry);
        let out = deerflow(["-c", cfg.to_str().unwrap(), "config", "check"])
            .cwd(ws.path())
            .text()
            .await;
        assert_eq!(out.code, 78, "{entry}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{entry}: {}", out.stderr);
        let out = deerflow(["run", "--json", "-c", cfg.to_str().unwrap(), "go"])
            .cwd(ws.path())
            .text()
            .await;
        assert_eq!(out.code, 78, "{entry}: {}", out.stderr);
        assert_eq!(out.stdout, "", "no events before a config error");
    }
    let out = deerflow(["run", "--json", "-m", "openai:gpt-x", "go"])
        .env("OPENAI_API_KEY", "sk-abc\r\nX-Injected: 1")
        .text()
        .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stderr.contains("control characters"), "{}", out.stderr);
    assert!(!out.stderr.contains("sk-abc"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn config_show_redacts_credentials_inside_urls() {
    let ws = workspace();
    let cfg = ws.path().join("c.yaml");
    std::fs::write(
        &cfg,
        "models:\n  - {name: m, use: openai, model: x, api_key: k, base_url: 'https://bob:hunter2@gw.example/v1'}\n",
    )
    .unwrap();
    for args in [vec!["config", "show"], vec!["config", "show", "--json"]] {
        let mut all = vec!["-c", cfg.to_str().unwrap()];
        all.extend(args);
        let out = deerflow(all).cwd(ws.path()).text().await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(!out.stdout.contains("hunter2"), "{}", out.stdout);
        assert!(out.stdout.contains("gw.example"), "{}", out.stdout);
    }
}

/// What a run did, per agent (the lead and each task, in their own order: tasks interleave
/// differently from run to run), without what differs between two runs (times, ids of the
/// run, the cassette's path).
fn story(
    out: &super::harness::Output,
) -> std::collections::BTreeMap<String, Vec<serde_json::Value>> {
    let mut by_agent: std::collections::BTreeMap<String, Vec<serde_json::Value>> =
        Default::default();
    for e in &out.events {
        if e["type"] == "run_started" {
            continue;
        }
        let mut e = e.clone();
        let o = e.as_object_mut().unwrap();
        for k in ["ts", "run_id", "duration_ms", "seq", "model"] {
            o.remove(k);
        }
        if let Some(u) = o.get_mut("usage").and_then(|u| u.as_object_mut()) {
            u.remove("by_model");
        }
        // A task's terminal event and the lead's result for it belong to the task.
        let agent = o
            .get("task_id")
            .or_else(|| o.get("call_id").filter(|_| o["name"] == "task"))
            .and_then(|v| v.as_str())
            .unwrap_or("lead")
            .to_string();
        by_agent.entry(agent).or_default().push(e);
    }
    by_agent
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_run_replays_the_same() {
    let ws = workspace();
    let task = |prompt: &str| json!({"name": "task", "arguments": {"description": "same label", "prompt": prompt, "subagent_type": "general-purpose"}});
    let c = cassette(
        ws.path(),
        json!({"version": 1,
            "lead": [
                {"tool_calls": [task("one"), task("two"),
                    {"id": "bad", "name": "read_file", "arguments": "{\"path\": broken"}]},
                {"text": "done"}
            ],
            "default_task": [{"text": "the same for everyone"}]
        }),
    );
    // The two tasks answer differently: one by a scripted failure through their task ids.
    let mut script: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&c).unwrap()).unwrap();
    script["tasks"] = json!({"call_1_2": [{"error": {"status": 503, "message": "overloaded"}}]});
    std::fs::write(&c, script.to_string()).unwrap();
    let rec = ws.path().join("recorded.json");
    let model = format!("replay:{}", c.display());
    let first = deerflow([
        "run",
        "--json",
        "-m",
        &model,
        "--record",
        rec.to_str().unwrap(),
        "go",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(first.code, 3, "one task failed: {}", first.stderr);
    let recorded = std::fs::read_to_string(&rec).unwrap();
    assert!(
        recorded.contains("{\\\"path\\\": broken"),
        "broken arguments as sent: {recorded}"
    );
    let replayed_model = format!("replay:{}", rec.display());
    let second = deerflow(["run", "--json", "-m", &replayed_model, "go"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(second.code, 3, "{}", second.stderr);
    assert_eq!(story(&first), story(&second));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deeply_nested_config_is_refused_at_once() {
    let ws = workspace();
    let cfg = ws.path().join("deep.yaml");
    let depth = 40_000;
    std::fs::write(
        &cfg,
        format!("models: {}{}", "[".repeat(depth), "]".repeat(depth)),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = deerflow(["-c", cfg.to_str().unwrap(), "config", "check"])
        .cwd(ws.path())
        .text()
        .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr.contains("nested more than 128 levels"),
        "{}",
        out.stderr
    );
    assert!(
        started.elapsed().as_secs() < 2,
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn debug_logs_carry_the_trace_id() {
    let ws = workspace();
    let servers = ws.path().join("mcp.json");
    std::fs::write(
        &servers,
        r#"{"mcpServers": {"noisy": {"command": "sh", "args": ["-c", "echo from-the-server >&2; sleep 5"], "session_init_timeout": 1}}}"#,
    )
    .unwrap();
    let out = deerflow(["mcp", "list", "--mcp-config", servers.to_str().unwrap()])
        .cwd(ws.path())
        .env("DEERFLOW_LOG", "debug")
        .text()
        .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let logged: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("from-the-server"))
        .collect();
    assert!(!logged.is_empty(), "{}", out.stderr);
    for l in logged {
        assert!(l.starts_with("[trace="), "{l}");
        assert!(l.contains(" DEBUG "), "{l}");
    }
}

fn gone_soon(marker: &str) -> Vec<String> {
    for _ in 0..40 {
        if processes_with(marker).is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    processes_with(marker)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_detached_daemon_does_not_outlive_the_run() {
    let ws = workspace();
    let marker = format!("{}", 700_000 + fastrand::u32(0..99_999));
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"id": "d", "name": "bash", "arguments": {"command": format!("setsid sleep {marker} > /dev/null 2>&1 < /dev/null & echo started")}}]},
            {"text": "done"}
        ]}),
    );
    let model = format!("replay:{}", c.display());
    let out = deerflow(["run", "--json", "--allow-bash", "-m", &model, "go"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        gone_soon(&marker),
        Vec::<String>::new(),
        "the daemon survived the run"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_deerflow_takes_its_commands_with_it() {
    let ws = workspace();
    let marker = format!("{}", 600_000 + fastrand::u32(0..99_999));
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"id": "s", "name": "bash", "arguments": {"command": format!("sleep {marker}")}}]},
            {"text": "done"}
        ]}),
    );
    let model = format!("replay:{}", c.display());
    let mut child = deerflow(["run", "--json", "--allow-bash", "-m", &model, "go"])
        .cwd(ws.path())
        .command()
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if !processes_with(&marker).is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        !processes_with(&marker).is_empty(),
        "the command never started"
    );
    child.start_kill().unwrap();
    let _ = child.wait().await;
    assert_eq!(
        gone_soon(&marker),
        Vec::<String>::new(),
        "the command outlived kill -9"
    );
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Tasks of the fan-out that outgrows the event queue: 6000 sub-agents answering 4 KB each,
/// a ~70 MB stream.
const BIG_FAN_OUT: usize = 6000;

/// The binary running that fan-out with `--json`, stdout piped and stderr discarded.
fn spawn_big_fan_out(ws: &Path) -> tokio::process::Child {
    let calls: Vec<_> = (0..BIG_FAN_OUT)
        .map(|i| json!({"name": "task", "arguments": {"description": format!("t{i}"), "prompt": "go", "subagent_type": "general-purpose"}}))
        .collect();
    let c = cassette(
        ws,
        json!({"version": 1, "lead": [{"tool_calls": calls}, {"text": "all done"}],
               "default_task": [{"text": "y".repeat(4000)}]}),
    );
    let m = format!("replay:{}", c.display());
    let n = BIG_FAN_OUT.to_string();
    let mut cmd = deerflow([
        "run",
        "--json",
        "--max-tasks",
        &n,
        "--max-concurrent",
        "64",
        "-m",
        &m,
        "go",
    ])
    .cwd(ws)
    .command();
    cmd.stderr(Stdio::null());
    cmd.spawn().expect("spawn")
}

/// §12: the event queue has back-pressure. A reader that stops reading holds the run back
/// (memory stays flat instead of growing with every event), and once it reads again every
/// line arrives, in order, and the run completes.
#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_reader_holds_the_run_back_and_loses_nothing() {
    use tokio::io::AsyncReadExt;
    let ws = workspace();
    let mut child = spawn_big_fan_out(ws.path());
    let pid = child.id().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let early = rss_kib(pid);
    tokio::time::sleep(std::time::Duration::from_millis(2000)).await;
    let late = rss_kib(pid);
    // The whole stream is ~70 MB: queued without bound it all sits in memory by now (over
    // 130 MiB); held back, the run stops at the queue's bound and stays there.
    assert!(
        late < 90 * 1024 && late < early + 12 * 1024,
        "memory grew from {early} KiB to {late} KiB while stdout was not read"
    );
    let mut text = String::new();
    stdout.read_to_string(&mut text).await.unwrap();
    let status = child.wait().await.unwrap();
    assert_eq!(status.code(), Some(0));
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let out = super::harness::Output {
        code: 0,
        stdout: text,
        stderr: String::new(),
        events,
    };
    super::harness::check_stream(&out);
    assert_eq!(out.completed()["tasks"]["completed"], BIG_FAN_OUT);
}

/// §8 with §12's back-pressure: while every worker waits on a full event queue (the reader
/// stalled), SIGTERM still ends the run within 2 s, with 143.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_ends_a_run_held_back_by_a_full_event_queue() {
    let ws = workspace();
    let mut child = spawn_big_fan_out(ws.path());
    let _stalled = child.stdout.take();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    // SAFETY: kill only sends a signal to the child we spawned.
    assert_eq!(
        unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) },
        0
    );
    let sent = std::time::Instant::now();
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait())
        .await
        .expect("deerflow hung on a full event queue")
        .unwrap();
    assert!(
        sent.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(status.code(), Some(143));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_output_file_that_cannot_be_written_fails_the_run() {
    let ws = workspace();
    let model = answer_cassette(ws.path());
    for flag in ["-o", "--record"] {
        let out = deerflow(["run", "--json", "-m", &model, flag, "/dev/full", "go"])
            .cwd(ws.path())
            .json()
            .await;
        assert_eq!(out.code, 1, "{flag}: {}", out.stderr);
        let done = out.completed();
        assert_eq!(done["status"], "failed", "{done}");
        assert!(
            done["error"]
                .as_str()
                .unwrap()
                .contains("/dev/full: No space left"),
            "{done}"
        );
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(
            out.stderr.starts_with("deerflow: cannot write "),
            "{}",
            out.stderr
        );
    }
    let human = deerflow(["run", "-q", "-m", &model, "-o", "/dev/full", "go"])
        .cwd(ws.path())
        .text()
        .await;
    assert_eq!(human.code, 1, "{}", human.stderr);
    assert!(
        human.stderr.contains("/dev/full: No space left"),
        "{}",
        human.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_output_file_is_whole_when_run_completed_is_read() {
    use tokio::io::AsyncBufReadExt;
    let ws = workspace();
    let model = answer_cassette(ws.path());
    let answer = ws.path().join("answer.txt");
    for round in 0..3 {
        std::fs::write(&answer, format!("previous {round}")).unwrap();
        let run = deerflow([
            "run",
            "--json",
            "-m",
            &model,
            "-o",
            answer.to_str().unwrap(),
            "go",
        ])
        .cwd(ws.path());
        let mut child = run.command().spawn().unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut seen = false;
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("\"type\":\"run_completed\"") {
                // Read at this very moment, before deerflow has exited.
                assert_eq!(std::fs::read_to_string(&answer).unwrap(), "the answer");
                seen = true;
            }
        }
        assert!(seen);
        assert_eq!(child.wait().await.unwrap().code(), Some(0));
    }
}

#[test]
fn output_to_dev_stdout_appends_to_the_log_stdout_appends_to() {
    let ws = workspace();
    let model = answer_cassette(ws.path());
    let log = ws.path().join("ci.log");
    for flag in ["-o", "--record"] {
        std::fs::write(&log, "before the run\n").unwrap();
        let append = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        let status = Command::new(BIN)
            .args(["run", "--json", "-m", &model, flag, "/dev/stdout", "go"])
            .current_dir(ws.path())
            .env_clear()
            .env(
                "HOME",
                std::env::temp_dir().join("deerflow-test-home-empty"),
            )
            .stdin(Stdio::null())
            .stdout(append)
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(0), "{flag}");
        let mut append = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        std::io::Write::write_all(&mut append, b"\nafter the run\n").unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(
            text.starts_with("before the run\n{\"type\":\"run_started\""),
            "{flag}: {text}"
        );
        assert!(text.ends_with("\nafter the run\n"), "{flag}: {text}");
        let completed = text
            .find("\"type\":\"run_completed\"")
            .expect("the stream is kept");
        let tail = &text[completed..];
        let written = if flag == "-o" {
            "\nthe answer"
        } else {
            "\"lead\""
        };
        assert!(
            tail.contains(written),
            "{flag}: the output follows the stream: {text}"
        );
    }
}

#[test]
fn printing_commands_on_a_full_disk_are_exit_1_with_one_line() {
    let ws = workspace();
    for args in [
        &["schema"][..],
        &["--help"],
        &["run", "--help"],
        &["--version"],
        &["man"],
        &["completions", "bash"],
        &["agents"],
    ] {
        let (code, stderr) = to_full_disk(args, ws.path());
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("deerflow: cannot write to stdout: No space left"),
            "{args:?}: {stderr}"
        );
    }
}
