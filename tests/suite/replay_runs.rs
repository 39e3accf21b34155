//! The lead agent end to end on replay cassettes: answers, tools, limits, stdin, outputs.

use serde_json::json;

use super::harness::{cassette, deerflow, workspace};

fn model_arg(p: &std::path::Path) -> String {
    format!("replay:{}", p.display())
}

#[tokio::test(flavor = "multi_thread")]
async fn text_only_answer_completes_with_exit_0() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [{"text": "hello there", "usage": {"input_tokens": 12, "output_tokens": 3}}]}),
    );
    let out = deerflow(["run", "--json", "-m", &model_arg(&c), "say hi"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.types(),
        ["run_started", "usage", "message", "run_completed"]
    );
    let started = out.first("run_started");
    assert_eq!(started["schema_version"], 1);
    assert_eq!(started["model"]["provider"], "replay");
    assert_eq!(started["model"]["name"], model_arg(&c));
    assert_eq!(out.first("message")["text"], "hello there");
    let u = out.first("usage");
    assert_eq!(
        (
            u["caller"].as_str(),
            u["input_tokens"].as_u64(),
            u["total_tokens"].as_u64(),
            u["reported"].as_bool()
        ),
        (Some("lead"), Some(12), Some(15), Some(true))
    );
    let done = out.completed();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["final_message"], "hello there");
    assert_eq!(done["turns"], 1);
    assert_eq!(done["usage"]["total_tokens"], 15);
    assert_eq!(done["usage"]["lead"]["input_tokens"], 12);
    assert_eq!(done["usage"]["by_model"][model_arg(&c)]["output_tokens"], 3);
    assert!(done["usage"]["cost_usd"].is_null());
    assert!(done["error"].is_null());
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_round_trip_writes_and_reads_a_file() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "notes/a.txt", "content": "alpha\nbeta\n"}}]},
            {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "notes/a.txt", "start_line": 2, "end_line": 2}}]},
            {"tool_calls": [{"id": "p1", "name": "present_files", "arguments": {"filepaths": ["notes/a.txt"]}}]},
            {"text": "done"}
        ]}),
    );
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &model_arg(&c),
        "-C",
        ws.path().to_str().unwrap(),
        "write it",
    ])
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes/a.txt")).unwrap(),
        "alpha\nbeta\n"
    );
    let results = out.of_type("tool_result");
    assert_eq!(results[0]["call_id"], "w1");
    assert_eq!(results[0]["output"], "OK");
    assert_eq!(results[0]["status"], "ok");
    assert!(results[1]["output"].as_str().unwrap().contains("beta"));
    assert!(!results[1]["output"].as_str().unwrap().contains("alpha"));
    let calls = out.of_type("tool_call");
    assert_eq!(calls[0]["arguments"]["path"], "notes/a.txt");
    assert_eq!(out.completed()["artifacts"], json!(["notes/a.txt"]));
    assert_eq!(out.completed()["turns"], 4);
    // Unreported usage is reported as such and adds nothing.
    assert_eq!(out.of_type("usage")[0]["reported"], false);
    assert!(out.of_type("usage")[0]["input_tokens"].is_null());
    assert_eq!(out.completed()["usage"]["total_tokens"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn max_turns_drops_the_last_tool_calls_and_exits_7() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"name": "ls", "arguments": {}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "never.txt", "content": "x"}}]},
        ]}),
    );
    let out = deerflow([
        "run",
        "--json",
        "--max-turns",
        "2",
        "-m",
        &model_arg(&c),
        "loop",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert_eq!(out.completed()["status"], "max_turns");
    assert_eq!(
        out.of_type("tool_call").len(),
        1,
        "the last response's calls are dropped"
    );
    assert!(!ws.path().join("never.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn clarification_ends_the_run_with_exit_6() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"name": "ask_clarification", "arguments": {"question": "Which file?", "options": ["a", "b"]}}]},
        ]}),
    );
    let out = deerflow(["run", "--json", "-m", &model_arg(&c), "edit the file"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 6, "{}", out.stderr);
    let q = out.first("clarification_requested");
    assert_eq!(q["question"], "Which file?");
    assert_eq!(q["options"], json!(["a", "b"]));
    assert_eq!(out.completed()["status"], "needs_clarification");
    assert_eq!(out.completed()["final_message"], "Which file?");
}

#[tokio::test(flavor = "multi_thread")]
async fn prompt_from_stdin_and_empty_stdin() {
    let ws = workspace();
    let c = cassette(ws.path(), json!({"version": 1, "lead": [{"text": "ok"}]}));
    let out = deerflow(["run", "--json", "-m", &model_arg(&c)])
        .cwd(ws.path())
        .stdin("from stdin\n")
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let dash = deerflow(["run", "--json", "-m", &model_arg(&c), "-"])
        .cwd(ws.path())
        .stdin("dash prompt")
        .json()
        .await;
    assert_eq!(dash.code, 0, "{}", dash.stderr);
    let empty = deerflow(["run", "--json", "-m", &model_arg(&c)])
        .cwd(ws.path())
        .stdin("")
        .output()
        .await;
    assert_eq!(empty.code, 2);
    assert!(empty.stdout.is_empty());
    assert_eq!(empty.stderr.lines().count(), 1, "{}", empty.stderr);
    let blank = deerflow(["run", "--json", "-m", &model_arg(&c), "   "])
        .cwd(ws.path())
        .output()
        .await;
    assert_eq!(blank.code, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_given_prompt_never_reads_stdin() {
    let ws = workspace();
    let c = cassette(ws.path(), json!({"version": 1, "lead": [{"text": "ok"}]}));
    // stdin is a pipe that is never written or closed: reading it would hang.
    let mut cmd = deerflow(["run", "--json", "-m", &model_arg(&c), "given"])
        .cwd(ws.path())
        .command();
    cmd.stdin(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let out = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("blocked on stdin")
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn human_mode_prints_the_answer_on_stdout_and_writes_output_file() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [{"text": "the answer", "usage": {"input_tokens": 5, "output_tokens": 2}}]}),
    );
    let last = ws.path().join("last.txt");
    let out = deerflow([
        "run",
        "-m",
        &model_arg(&c),
        "-o",
        last.to_str().unwrap(),
        "q",
    ])
    .cwd(ws.path())
    .output()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "the answer\n");
    assert!(
        out.stderr.contains("completed") && out.stderr.contains("7 tokens"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read_to_string(&last).unwrap(), "the answer");
    let quiet = deerflow(["run", "-q", "-m", &model_arg(&c), "q"])
        .cwd(ws.path())
        .output()
        .await;
    assert_eq!(quiet.stderr, "");
}

#[tokio::test(flavor = "multi_thread")]
async fn scripted_provider_error_fails_the_run_with_exit_1() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [{"error": {"status": 500, "message": "boom"}}]}),
    );
    let out = deerflow(["run", "--json", "-m", &model_arg(&c), "q"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 1);
    assert_eq!(out.completed()["status"], "failed");
    assert!(out.completed()["error"].as_str().unwrap().contains("boom"));
    let past = cassette(
        ws.path(),
        json!({"version": 1, "lead": [{"tool_calls": [{"name": "ls"}]}]}),
    );
    let out = deerflow(["run", "--json", "-m", &model_arg(&past), "q"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 1);
    let err = out.completed()["error"].as_str().unwrap();
    assert!(
        err.contains(past.to_str().unwrap()) && err.contains("lead") && err.contains("turn 2"),
        "{err}"
    );
    // Turns count model calls, the failed one included.
    assert_eq!(out.completed()["turns"], 2);
}

/// A `delay_ms` over one year is a malformed cassette: a configuration error (78) before
/// any event, like a cassette that is not valid JSON.
#[tokio::test(flavor = "multi_thread")]
async fn a_cassette_delay_over_one_year_is_a_configuration_error() {
    let ws = workspace();
    let bad_delay = json!({"version": 1, "lead": [{"text": "a", "delay_ms": u64::MAX}]});
    for body in [
        bad_delay.to_string(),
        r#"{"version": 1, "lead": ["#.to_string(),
    ] {
        let c = ws.path().join("bad.json");
        std::fs::write(&c, body).unwrap();
        let out = deerflow(["run", "--json", "-m", &model_arg(&c), "q"])
            .cwd(ws.path())
            .output()
            .await;
        assert_eq!(out.code, 78, "{}", out.stderr);
        assert_eq!(out.stdout, "", "no event");
        assert!(out.stderr.contains("cassette"), "{}", out.stderr);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn closed_stdout_exits_141_without_a_panic() {
    use tokio::io::AsyncBufReadExt;
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"name": "ls"}], "delay_ms": 300},
            {"tool_calls": [{"name": "ls", "arguments": {"path": "."}}], "delay_ms": 300},
            {"text": "done", "delay_ms": 300}
        ]}),
    );
    let mut child = deerflow(["run", "--json", "-m", &model_arg(&c), "q"])
        .cwd(ws.path())
        .command()
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let first = lines.next_line().await.unwrap().unwrap();
    assert!(first.contains("run_started"));
    drop(lines);
    let out = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn record_writes_a_cassette_that_replays_the_same_run() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"id": "c1", "name": "ls"}], "usage": {"input_tokens": 3, "output_tokens": 1}},
            {"text": "fin", "usage": {"input_tokens": 4, "output_tokens": 2}}
        ]}),
    );
    let rec = ws.path().join("rec.json");
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &model_arg(&c),
        "--record",
        rec.to_str().unwrap(),
        "q",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.code, 0);
    let again = deerflow(["run", "--json", "-m", &model_arg(&rec), "q"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.completed()["final_message"], "fin");
    assert_eq!(again.completed()["usage"]["total_tokens"], 10);
    assert_eq!(again.first("tool_call")["call_id"], "c1");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_reader_still_gets_run_completed() {
    use tokio::io::AsyncReadExt;
    let ws = workspace();
    // A big final answer fills the pipe; the reader only starts after 3 s.
    let big = "x".repeat(2_000_000);
    let c = cassette(ws.path(), json!({"version": 1, "lead": [{"text": big}]}));
    let mut child = deerflow(["run", "--json", "-m", &model_arg(&c), "q"])
        .cwd(ws.path())
        .command()
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let mut text = String::new();
    stdout.read_to_string(&mut text).await.unwrap();
    let status = child.wait().await.unwrap();
    assert_eq!(status.code(), Some(0));
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "run_completed");
    assert_eq!(last["final_message"].as_str().unwrap().len(), 2_000_000);
}

#[tokio::test(flavor = "multi_thread")]
async fn human_mode_notices_a_closed_stdout_while_waiting_for_the_model() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [{"text": "late", "delay_ms": 20000}]}),
    );
    let t0 = std::time::Instant::now();
    let mut child = deerflow(["run", "-m", &model_arg(&c), "q"])
        .cwd(ws.path())
        .command()
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait())
        .await
        .expect("run went on")
        .unwrap();
    assert_eq!(status.code(), Some(141));
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t0.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn output_files_that_cannot_be_written_are_usage_errors_before_the_run() {
    let ws = workspace();
    let c = cassette(ws.path(), json!({"version": 1, "lead": [{"text": "ok"}]}));
    let dir = ws.path().to_str().unwrap().to_string();
    let missing = ws.path().join("no/such/dir/out.txt");
    for args in [
        vec!["-o", dir.as_str()],
        vec!["--record", missing.to_str().unwrap()],
    ] {
        let mut all = vec!["run", "--json", "-m"];
        let m = model_arg(&c);
        all.push(&m);
        all.extend(args.iter().copied());
        all.push("q");
        let out = deerflow(all).cwd(ws.path()).output().await;
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(out.stdout.is_empty());
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_written_and_presented_in_one_response_is_an_artifact() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [
        {"tool_calls": [
            {"name": "present_files", "arguments": {"filepaths": ["out/report.md", "never-written.md"]}},
            {"name": "write_file", "arguments": {"path": "out/report.md", "content": "# r\n"}}]},
        {"text": "done"}]}),
    );
    let out = deerflow(["run", "--json", "-m", &model_arg(&c), "q"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["artifacts"], json!(["out/report.md"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn prompt_from_a_file_and_the_prompt_flag_reach_the_model() {
    use crate::support::{MockServer, Reply, Rule};
    let server = MockServer::start().await;
    server.push(Rule::any().times(2).reply(Reply::text("ok")));
    let ws = workspace();
    let file = ws.path().join("task.txt");
    std::fs::write(&file, "FILE PROMPT\n").unwrap();
    let env = |r: super::harness::Run| {
        r.env("OPENAI_BASE_URL", &server.url())
            .env("OPENAI_API_KEY", "sk-test")
    };
    let from_file = env(deerflow([
        "run",
        "--json",
        "-m",
        "openai:m",
        "--prompt-file",
        file.to_str().unwrap(),
    ]))
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(from_file.code, 0, "{}", from_file.stderr);
    let flag = env(deerflow([
        "run",
        "--json",
        "-m",
        "openai:m",
        "-p",
        "FLAG PROMPT",
    ]))
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(flag.code, 0, "{}", flag.stderr);
    let users: Vec<String> = server
        .requests()
        .iter()
        .map(|r| {
            r.body["messages"][1]["content"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(users, ["FILE PROMPT\n", "FLAG PROMPT"]);
    let c = cassette(ws.path(), json!({"version": 1, "lead": [{"text": "ok"}]}));
    let m = model_arg(&c);
    let missing = deerflow([
        "run",
        "--json",
        "-m",
        &m,
        "--prompt-file",
        "/nonexistent/task.txt",
    ])
    .cwd(ws.path())
    .output()
    .await;
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(missing.stdout.is_empty());
    let both = deerflow(["run", "--json", "-m", &m, "-p", "a", "b"])
        .cwd(ws.path())
        .output()
        .await;
    assert_eq!(both.code, 2, "{}", both.stderr);
    assert_eq!(both.stderr.lines().count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn run_started_names_the_sandbox_and_run_completed_has_a_null_final_output() {
    let ws = workspace();
    let c = cassette(ws.path(), json!({"version": 1, "lead": [{"text": "ok"}]}));
    let out = deerflow(["run", "--json", "-m", &model_arg(&c), "go"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let started = out.first("run_started");
    assert_eq!(started["sandbox"], json!({"use": "local", "image": null}));
    let line = out.stdout.lines().next().unwrap();
    assert!(
        line.ends_with(r#","sandbox":{"use":"local","image":null}}"#),
        "{line}"
    );
    let done = out.completed();
    assert!(done.get("final_output").is_some_and(|v| v.is_null()));

    // DeerFlow's class path for the local sandbox is reported normalised.
    let cfg = ws.path().join("deerflow.yaml");
    std::fs::write(
        &cfg,
        "sandbox:\n  use: deerflow.sandbox.local:LocalSandboxProvider\n",
    )
    .unwrap();
    let out = deerflow(["run", "--json", "-c", cfg.to_str().unwrap()])
        .env("DEERFLOW_MODEL", &model_arg(&c))
        .stdin("go")
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.first("run_started")["sandbox"]["use"], "local");
}

/// `-o /dev/stdout` to a reader that has gone is the stream's closed stdout, not a failed
/// write: exit 141 and no line about the answer file (§8), in human and --json mode.
#[tokio::test(flavor = "multi_thread")]
async fn o_dev_stdout_to_a_closed_pipe_ends_quietly_with_141() {
    let ws = workspace();
    let c = cassette(ws.path(), json!({"version": 1, "lead": [{"text": "done"}]}));
    for json_flag in [None, Some("--json")] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut args = vec!["run", "-m", &*Box::leak(model_arg(&c).into_boxed_str())];
        args.extend(json_flag);
        args.extend(["-o", "/dev/stdout", "q"]);
        let out = deerflow(args)
            .cwd(ws.path())
            .command()
            .stdout(std::process::Stdio::from(writer))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
            .wait_with_output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "{json_flag:?}: {stderr}");
        assert!(!stderr.contains("cannot write"), "{json_flag:?}: {stderr}");
    }
}
