//! `sandbox.use: docker` (contract §13) through the binary: replay cassettes (and the mock
//! LLM server) script bash calls that run in containers of the test image on the daemon at
//! `$DOCKER_HOST`. `.ci/run` starts a daemon of its own and imports the image
//! (`deerflow-test:busybox`: a static busybox); without a daemon that answers, or without
//! the image, the tests that need them print a notice and are skipped.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bollard::query_parameters::ListContainersOptionsBuilder;
use bollard::Docker;
use serde_json::{json, Value};

use super::harness::{cassette, deerflow, workspace, Output, Run};
use crate::support::{MockServer, Reply};

pub(super) const IMAGE: &str = "deerflow-test:busybox";

/// The daemon the tests use, as the binary will find it.
pub(super) fn docker_host() -> String {
    std::env::var("DOCKER_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unix:///var/run/docker.sock".into())
}

/// A client for the test daemon when it answers and has the test image.
pub(super) async fn daemon() -> Option<Docker> {
    let host = docker_host();
    let skip = |why: String| {
        eprintln!("notice: {why}; the docker sandbox tests are skipped");
        None
    };
    let Ok(docker) = Docker::connect_with_host(&host) else {
        return skip(format!("no Docker daemon at {host}"));
    };
    let docker =
        match tokio::time::timeout(Duration::from_secs(5), docker.negotiate_version()).await {
            Ok(Ok(d)) => d,
            _ => return skip(format!("the Docker daemon at {host} does not answer")),
        };
    if docker.inspect_image(IMAGE).await.is_err() {
        return skip(format!(
            "the daemon at {host} has no {IMAGE} image (.ci/run imports it)"
        ));
    }
    Some(docker)
}

/// The names of every container (running or not) whose name starts with `prefix`.
pub(super) async fn containers(docker: &Docker, prefix: &str) -> Vec<String> {
    let opts = ListContainersOptionsBuilder::default().all(true).build();
    let list = docker.list_containers(Some(opts)).await.unwrap();
    list.into_iter()
        .flat_map(|c| c.names.unwrap_or_default())
        .map(|n| n.trim_start_matches('/').to_string())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// A container prefix no other test (or run) uses.
pub(super) fn prefix() -> String {
    format!("dftest-{:08x}", fastrand::u32(..))
}

pub(super) fn bash_calls(commands: &[&str]) -> Value {
    let calls: Vec<Value> = commands
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"tool_calls": [{"id": format!("c{i}"), "name": "bash", "arguments": {"command": c}}]}))
        .chain([json!({"text": "done"})])
        .collect();
    json!({"version": 1, "lead": calls})
}

/// A config in `ws` replaying `script`, with `sandbox: {use: docker, …, EXTRA}`.
pub(super) fn config(ws: &Path, script: Value, prefix: &str, extra: &str) -> PathBuf {
    let c = cassette(ws, script);
    let skills = ws.join("skills-src");
    std::fs::create_dir_all(skills.join("demo")).unwrap();
    std::fs::write(
        skills.join("demo/SKILL.md"),
        "---\nname: demo\ndescription: a demo skill\n---\nSKILL-BODY\n",
    )
    .unwrap();
    let cfg = ws.join("deerflow.yaml");
    std::fs::write(
        &cfg,
        format!(
            "models:\n  - {{name: demo, use: replay, cassette: {}}}\n\
             sandbox: {{use: docker, image: \"{IMAGE}\", container_prefix: {prefix}{extra}}}\n\
             skills: {{path: {}}}\n",
            c.display(),
            skills.display()
        ),
    )
    .unwrap();
    cfg
}

/// `deerflow run --json -c CFG go` in `ws`, on the test daemon, without --allow-bash.
pub(super) fn run(ws: &Path, cfg: &Path, more: &[&str]) -> Run {
    let mut args = vec!["run", "--json", "-c", cfg.to_str().unwrap()];
    args.extend(more);
    args.push("go");
    deerflow(args).cwd(ws).env("DOCKER_HOST", &docker_host())
}

fn results(out: &Output) -> Vec<String> {
    out.of_type("tool_result")
        .iter()
        .map(|e| e["output"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn docker_bash_sees_the_virtual_paths_and_nothing_of_the_host() {
    let Some(docker) = daemon().await else { return };
    let ws = workspace();
    std::fs::create_dir(ws.path().join("data")).unwrap();
    std::fs::write(ws.path().join("data/d.txt"), "MOUNTED-DATA\n").unwrap();
    let p = prefix();
    let commands = [
        "pwd; env | sort",
        "echo made > /mnt/user-data/outputs/report.txt && echo ws > here.txt \
         && cat /mnt/skills/demo/SKILL.md /mnt/data/d.txt; touch /mnt/skills/x /mnt/data/x",
        "cat /proc/net/dev",
    ];
    let cfg = config(
        ws.path(),
        bash_calls(&commands),
        &p,
        ", environment: {FOO: bar, FROM_HOST: $DF_DOCKER_TEST_VAR}, \
         mounts: [{host_path: data, container_path: /mnt/data, read_only: true}]",
    );
    let out = run(ws.path(), &cfg, &[])
        .env("DF_DOCKER_TEST_VAR", "passed-through")
        .env("SECRET_TOKEN", "host-secret-value")
        .env("OPENAI_API_KEY", "sk-host-key")
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.first("run_started")["sandbox"],
        json!({"use": "docker", "image": IMAGE})
    );
    let r = results(&out);
    assert_eq!(r.len(), 3, "{r:#?}");
    // The workspace is the working directory; the environment is the configured one.
    assert!(r[0].starts_with("/mnt/user-data/workspace\n"), "{}", r[0]);
    assert!(r[0].contains("\nFOO=bar\n"), "{}", r[0]);
    assert!(r[0].contains("\nFROM_HOST=passed-through\n"), "{}", r[0]);
    for host_only in [
        "SECRET_TOKEN",
        "host-secret-value",
        "sk-host-key",
        "DF_DOCKER_TEST_VAR",
    ] {
        assert!(!r[0].contains(host_only), "{host_only} leaked: {}", r[0]);
    }
    // Outputs, the workspace, skills and the extra mount where §13 puts them.
    assert_eq!(
        std::fs::read_to_string(ws.path().join("outputs/report.txt")).unwrap(),
        "made\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("here.txt")).unwrap(),
        "ws\n"
    );
    assert!(r[1].contains("SKILL-BODY"), "{}", r[1]);
    assert!(r[1].contains("MOUNTED-DATA"), "{}", r[1]);
    assert!(
        r[1].matches("Read-only file system").count() == 2,
        "skills and the read-only mount are read-only: {}",
        r[1]
    );
    assert!(!ws.path().join("skills-src/x").exists());
    assert!(!ws.path().join("data/x").exists());
    // No network but loopback.
    assert!(r[2].contains("lo:"), "{}", r[2]);
    assert_eq!(r[2].lines().count(), 3, "only lo: {}", r[2]);
    assert!(containers(&docker, &p).await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_timeout_kills_the_process_inside_the_container() {
    let Some(docker) = daemon().await else { return };
    let ws = workspace();
    let p = prefix();
    let commands = [
        "echo started; sleep 601 & sleep 602",
        "ps -o args | grep 'sleep 60[12]' || echo none-left",
    ];
    let cfg = config(
        ws.path(),
        bash_calls(&commands),
        &p,
        ", bash_command_timeout: 2",
    );
    let started = Instant::now();
    let out = run(ws.path(), &cfg, &[]).json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = results(&out);
    assert!(
        r[0].starts_with("Error: command timed out after 2 seconds\nstarted"),
        "{}",
        r[0]
    );
    assert_eq!(r[1], "none-left\n", "the timed-out group lives on");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(containers(&docker, &p).await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_container_is_removed_after_a_failure_a_run_timeout_and_the_budget() {
    let Some(docker) = daemon().await else { return };
    let ws = workspace();
    let p = prefix();
    let failing = json!({"version": 1, "lead": [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]},
        {"error": {"status": 400, "message": "bad request"}}]});
    let cfg = config(ws.path(), failing, &p, "");
    let out = run(ws.path(), &cfg, &[]).json().await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(results(&out), ["hi\n"]);
    assert!(containers(&docker, &p).await.is_empty(), "after a failure");

    let cfg = config(ws.path(), bash_calls(&["sleep 603"]), &p, "");
    let started = Instant::now();
    let out = run(ws.path(), &cfg, &["--timeout", "2"]).json().await;
    assert_eq!(out.code, 124, "{}", out.stderr);
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(containers(&docker, &p).await.is_empty(), "after --timeout");

    let spend = json!({"version": 1, "lead": [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}],
         "usage": {"input_tokens": 90, "output_tokens": 10}},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo again"}}],
         "usage": {"input_tokens": 90, "output_tokens": 10}},
        {"text": "never"}]});
    let cfg = config(ws.path(), spend, &p, "");
    let out = run(ws.path(), &cfg, &["--max-tokens", "150"]).json().await;
    assert_eq!(out.code, 8, "{}", out.stderr);
    assert_eq!(results(&out), ["hi\n"]);
    assert!(containers(&docker, &p).await.is_empty(), "after the budget");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_or_sigint_mid_command_removes_the_container() {
    let Some(docker) = daemon().await else { return };
    for (signal, code) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        let ws = workspace();
        let p = prefix();
        let cfg = config(ws.path(), bash_calls(&["touch started; sleep 604"]), &p, "");
        let mut cmd = run(ws.path(), &cfg, &[]).command();
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = cmd.spawn().expect("spawn deerflow");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ws.path().join("started").exists() {
            assert!(Instant::now() < deadline, "the command never started");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let running = containers(&docker, &p).await;
        assert_eq!(running.len(), 1, "{running:?}");
        assert!(running[0].starts_with(&format!("{p}-")), "{running:?}");
        let pid = child.id().expect("running") as i32;
        let signalled = Instant::now();
        // SAFETY: kill only sends a signal to the child this test spawned.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .expect("deerflow did not stop")
            .unwrap();
        assert_eq!(status.code(), Some(code));
        assert!(
            signalled.elapsed() < Duration::from_secs(3),
            "{:?}",
            signalled.elapsed()
        );
        assert!(
            containers(&docker, &p).await.is_empty(),
            "after signal {signal}"
        );
    }
}

/// Two parallel sub-agents: each writes its container's hostname and checks, with a lock
/// directory in the shared workspace, whether the other one runs at the same time.
fn two_sub_agents() -> Value {
    let sub = |name: &str| {
        let cmd = format!(
            "hostname > host-{name}.txt; if mkdir lock 2>/dev/null; then sleep 2; rmdir lock; \
             echo alone > seen-{name}.txt; else echo overlap > seen-{name}.txt; fi"
        );
        json!([{"tool_calls": [{"name": "bash", "arguments": {"command": cmd}}]}, {"text": name}])
    };
    let task = |d: &str| json!({"name": "task", "arguments": {"description": d, "prompt": "p", "subagent_type": "bash"}});
    json!({"version": 1,
        "lead": [{"tool_calls": [task("a"), task("b")]},
                 {"tool_calls": [{"name": "bash", "arguments": {"command": "hostname > host-lead.txt"}}]},
                 {"text": "done"}],
        "tasks": {"a": sub("a"), "b": sub("b")}})
}

fn hosts(ws: &Path) -> [String; 3] {
    ["lead", "a", "b"].map(|n| std::fs::read_to_string(ws.join(format!("host-{n}.txt"))).unwrap())
}

/// What each sub-agent saw of the other, sorted.
fn seen(ws: &Path) -> Vec<String> {
    let mut r: Vec<String> = ["a", "b"]
        .iter()
        .map(|n| {
            let text = std::fs::read_to_string(ws.join(format!("seen-{n}.txt"))).unwrap();
            text.trim().to_string()
        })
        .collect();
    r.sort();
    r
}

#[tokio::test(flavor = "multi_thread")]
async fn per_task_sub_agents_get_their_own_containers_and_replicas_bound_them() {
    let Some(docker) = daemon().await else { return };
    let ws = workspace();
    let p = prefix();
    let cfg = config(
        ws.path(),
        two_sub_agents(),
        &p,
        ", per_task: true, replicas: 1",
    );
    let out = run(ws.path(), &cfg, &[]).json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let [lead, a, b] = hosts(ws.path());
    assert!(lead != a && lead != b && a != b, "{lead} {a} {b}");
    // One replica: the second sub-agent waited for the first one's container to go.
    assert_eq!(seen(ws.path()), ["alone", "alone"]);
    assert!(containers(&docker, &p).await.is_empty());

    // Two replicas: they ran side by side (so the bound above is what serialized them).
    let cfg = config(
        ws.path(),
        two_sub_agents(),
        &p,
        ", per_task: true, replicas: 2",
    );
    let out = run(ws.path(), &cfg, &[]).json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(seen(ws.path()), ["alone", "overlap"]);
    let [lead, a, b] = hosts(ws.path());
    assert!(lead != a && lead != b && a != b, "{lead} {a} {b}");
    assert!(containers(&docker, &p).await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn without_per_task_every_agent_shares_the_run_container() {
    let Some(docker) = daemon().await else { return };
    let ws = workspace();
    let p = prefix();
    let cfg = config(ws.path(), two_sub_agents(), &p, "");
    let out = run(ws.path(), &cfg, &[]).json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let [lead, a, b] = hosts(ws.path());
    assert!(lead == a && a == b, "{lead} {a} {b}");
    assert!(containers(&docker, &p).await.is_empty());
}

/// A docker config for the mock LLM server, which must never be called.
fn mock_config(ws: &Path, url: &str, image: &str, host: &str) -> (PathBuf, Run) {
    let cfg = super::openai_http::config(ws, "openai", url, ", max_retries: 0");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!("sandbox: {{use: docker, image: \"{image}\"}}\n"));
    std::fs::write(&cfg, text).unwrap();
    let run = deerflow(["run", "-c", cfg.to_str().unwrap(), "go"])
        .cwd(ws)
        .env("DOCKER_HOST", host);
    (cfg, run)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_daemon_fails_the_run_before_the_first_model_call() {
    let server = MockServer::start().await;
    server.push_reply(Reply::text("never"));
    let ws = workspace();
    let host = format!("unix://{}/no-daemon.sock", ws.path().display());
    let (cfg, human) = mock_config(ws.path(), &server.url(), IMAGE, &host);
    let out = human.output().await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("cannot reach the Docker daemon"))
            .count(),
        1,
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(&host), "{}", out.stderr);
    let json = deerflow(["run", "--json", "-c", cfg.to_str().unwrap(), "go"])
        .cwd(ws.path())
        .env("DOCKER_HOST", &host)
        .json()
        .await;
    assert_eq!(json.code, 1);
    let done = json.completed();
    assert_eq!(done["status"], "failed");
    let error = done["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!(
            "docker sandbox: cannot reach the Docker daemon at {host}"
        )),
        "{error}"
    );
    assert_eq!(server.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_that_cannot_be_had_fails_the_run_before_the_first_model_call() {
    let Some(_docker) = daemon().await else {
        return;
    };
    let server = MockServer::start().await;
    server.push_reply(Reply::text("never"));
    let ws = workspace();
    let image = format!("deerflow-test:missing-{:08x}", fastrand::u32(..));
    let (cfg, _) = mock_config(ws.path(), &server.url(), &image, &docker_host());
    let out = deerflow(["run", "--json", "-c", cfg.to_str().unwrap(), "go"])
        .cwd(ws.path())
        .env("DOCKER_HOST", &docker_host())
        .json()
        .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let error = out.completed()["error"].as_str().unwrap().to_string();
    assert!(
        error.starts_with(&format!("docker sandbox: cannot pull image {image}: ")),
        "{error}"
    );
    assert!(!error.contains('\n'));
    assert_eq!(server.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_config_show_and_check_name_the_docker_sandbox() {
    let ws = workspace();
    let cfg = ws.path().join("deerflow.yaml");
    std::fs::write(
        &cfg,
        format!(
            "sandbox:\n  use: deerflow.community.aio_sandbox:AioSandboxProvider\n  image: {IMAGE}\n  \
             environment: {{FROM_HOST: $DF_DOCKER_SHOW_VAR, LITERAL: plain-secret}}\n  port: 8080\n"
        ),
    )
    .unwrap();
    let c = cfg.to_str().unwrap();
    let out = deerflow(["agents", "--json", "-c", c]).text().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let list: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(list[0]["sandbox"], json!({"use": "docker", "image": IMAGE}));
    // bash is offered without --allow-bash: the container is the boundary.
    let gp = list
        .iter()
        .find(|a| a["name"] == "general-purpose")
        .unwrap();
    assert!(
        gp["tools"].as_array().unwrap().contains(&json!("bash")),
        "{gp}"
    );
    let table = deerflow(["agents", "-c", c]).text().await;
    let row = table
        .stdout
        .lines()
        .find(|l| l.starts_with("general-purpose"))
        .unwrap_or_default();
    assert!(
        row.trim_end().ends_with(&format!("docker ({IMAGE})")),
        "{}",
        table.stdout
    );

    let shown = deerflow(["config", "show", "--json", "-c", c])
        .env("DF_DOCKER_SHOW_VAR", "the-value")
        .text()
        .await;
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let v: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(v["sandbox"]["use"], "docker");
    assert_eq!(v["sandbox"]["image"], IMAGE);
    assert_eq!(v["sandbox"]["container_prefix"], "deerflow-sandbox");
    assert_eq!(v["sandbox"]["replicas"], 3);
    assert_eq!(
        v["sandbox"]["environment"],
        json!({"FROM_HOST": "$DF_DOCKER_SHOW_VAR", "LITERAL": "***"})
    );
    assert!(!shown.stdout.contains("the-value") && !shown.stdout.contains("plain-secret"));

    // An unset variable for the container and a missing image are configuration errors.
    let check = deerflow(["config", "check", "--json", "-c", c])
        .text()
        .await;
    assert_eq!(check.code, 78, "{}", check.stdout);
    assert!(
        check.stdout.contains(
            "sandbox.environment.FROM_HOST: environment variable DF_DOCKER_SHOW_VAR is not set"
        ),
        "{}",
        check.stdout
    );
    std::fs::write(&cfg, "sandbox: {use: docker}\n").unwrap();
    let check = deerflow(["config", "check", "--json", "-c", c])
        .text()
        .await;
    assert_eq!(check.code, 78, "{}", check.stdout);
    assert!(
        check
            .stdout
            .contains("sandbox.image: required with sandbox.use: docker"),
        "{}",
        check.stdout
    );
    let run = deerflow(["run", "--json", "-c", c, "go"]).output().await;
    assert_eq!(run.code, 78, "{}", run.stderr);
    assert!(run.events.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn replicas_and_prefix_are_checked() {
    let ws = workspace();
    let cfg = ws.path().join("deerflow.yaml");
    std::fs::write(
        &cfg,
        "sandbox: {use: docker, image: x, replicas: 0, container_prefix: '-bad', \
         mounts: [{host_path: /tmp, container_path: rel}]}\n",
    )
    .unwrap();
    let check = deerflow(["config", "check", "--json", "-c", cfg.to_str().unwrap()])
        .text()
        .await;
    assert_eq!(check.code, 78, "{}", check.stdout);
    let v: Value = serde_json::from_str(&check.stdout).unwrap();
    let problems = v["problems"].to_string();
    for want in [
        "sandbox.replicas: expected at least 1",
        "sandbox.container_prefix:",
        "sandbox.mounts[0].container_path:",
    ] {
        assert!(problems.contains(want), "{want}: {problems}");
    }
    // Outside docker, the docker-only keys are named as ignored.
    std::fs::write(&cfg, "sandbox: {use: local, image: x}\n").unwrap();
    let check = deerflow(["config", "check", "--json", "-c", cfg.to_str().unwrap()])
        .text()
        .await;
    assert_eq!(check.code, 0, "{}", check.stdout);
    assert!(
        check
            .stdout
            .contains("sandbox.image is used only with sandbox.use: docker"),
        "{}",
        check.stdout
    );
}

/// §12's `$` rules hold for the container's environment: only a whole `$NAME` is a
/// reference; `${VAR}`, `$VAR-x` and a lone `$` are configuration errors naming the key, in
/// `config check` and before a run starts (no daemon is needed to find them).
#[tokio::test(flavor = "multi_thread")]
async fn half_written_environment_references_are_configuration_errors() {
    let ws = workspace();
    let cfg = ws.path().join("deerflow.yaml");
    std::fs::write(
        &cfg,
        "models:\n  - {name: demo, use: replay, cassette: none.json}\n\
         sandbox:\n  use: docker\n  image: x\n  environment:\n    BRACED: '${HOME}'\n    \
         SUFFIXED: $HOME-x\n    LONE: $\n    WHOLE: $HOME\n    PLAIN: a$b\n",
    )
    .unwrap();
    let c = cfg.to_str().unwrap();
    let check = deerflow(["config", "check", "--json", "-c", c])
        .text()
        .await;
    assert_eq!(check.code, 78, "{}", check.stdout);
    let v: Value = serde_json::from_str(&check.stdout).unwrap();
    let problems: Vec<String> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(problems.len(), 3, "{problems:?}");
    for key in ["BRACED", "SUFFIXED", "LONE"] {
        let want = format!(
            "sandbox.environment.{key}: a value starting with $ must be a whole $NAME reference"
        );
        assert!(
            problems.iter().any(|p| p.starts_with(&want)),
            "{key}: {problems:?}"
        );
    }
    let out = deerflow(["run", "--json", "-c", c, "go"])
        .cwd(ws.path())
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .output()
        .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.events.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr.contains("sandbox.environment.BRACED"),
        "{}",
        out.stderr
    );
}

/// A minimal registry (the v2 API, plain HTTP on 127.0.0.1, which the daemon treats as
/// insecure by default) serving one image: a static busybox as `sh`. Counts manifest
/// requests, so a test can tell whether the image was pulled.
struct Registry {
    port: u16,
    manifests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

fn sha256_of(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    format!("sha256:{}", text.split_whitespace().next().unwrap())
}

async fn registry(dir: &Path) -> Option<Registry> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let busybox = Path::new("/bin/busybox");
    // Alone in an image, busybox must be the static build (ldd fails on those).
    let dynamic = std::process::Command::new("ldd")
        .arg(busybox)
        .output()
        .is_ok_and(|o| o.status.success());
    if !busybox.is_file() || dynamic {
        eprintln!(
            "notice: no static /bin/busybox (busybox-static); the image pull test is skipped"
        );
        return None;
    }
    let root = dir.join("rootfs");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy(busybox, root.join("bin/busybox")).unwrap();
    for applet in ["sh", "echo", "cat"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
    }
    let tar = dir.join("layer.tar");
    let ok = std::process::Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let gz = dir.join("layer.tar.gz");
    let ok = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "gzip -n -c '{}' > '{}'",
            tar.display(),
            gz.display()
        ))
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let config = json!({"architecture": arch, "os": "linux",
        "config": {"Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [sha256_of(&tar)]}})
    .to_string();
    let config_path = dir.join("config.json");
    std::fs::write(&config_path, &config).unwrap();
    let layer = std::fs::read(&gz).unwrap();
    let (config_digest, layer_digest) = (sha256_of(&config_path), sha256_of(&gz));
    let manifest = json!({"schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                   "size": config.len(), "digest": config_digest},
        "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                    "size": layer.len(), "digest": layer_digest}]})
    .to_string();
    let manifest_path = dir.join("manifest.json");
    std::fs::write(&manifest_path, &manifest).unwrap();
    let manifest_digest = sha256_of(&manifest_path);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let manifests = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = manifests.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let (config, layer, manifest) = (config.clone(), layer.clone(), manifest.clone());
            let (config_digest, layer_digest, manifest_digest) = (
                config_digest.clone(),
                layer_digest.clone(),
                manifest_digest.clone(),
            );
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                    // The daemon tries TLS first; closing at once makes it fall back to HTTP
                    // without waiting for its handshake timeout.
                    if head.len() > 65536 || head.first() == Some(&0x16) {
                        return;
                    }
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let mut words = text.split_whitespace();
                let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
                let (status, ctype, body, digest): (&str, &str, Vec<u8>, Option<&str>) =
                    if path == "/v2/" {
                        ("200 OK", "application/json", b"{}".to_vec(), None)
                    } else if path.contains("/manifests/") {
                        if method == "GET" {
                            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                        (
                            "200 OK",
                            "application/vnd.docker.distribution.manifest.v2+json",
                            manifest.into_bytes(),
                            Some(&manifest_digest),
                        )
                    } else if path.ends_with(&config_digest) {
                        (
                            "200 OK",
                            "application/octet-stream",
                            config.into_bytes(),
                            Some(&config_digest),
                        )
                    } else if path.ends_with(&layer_digest) {
                        (
                            "200 OK",
                            "application/octet-stream",
                            layer,
                            Some(&layer_digest),
                        )
                    } else {
                        ("404 Not Found", "application/json", b"{}".to_vec(), None)
                    };
                let mut reply = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
                     Docker-Distribution-API-Version: registry/2.0\r\nConnection: close\r\n",
                    body.len()
                );
                if let Some(d) = digest {
                    reply.push_str(&format!("Docker-Content-Digest: {d}\r\n"));
                }
                reply.push_str("\r\n");
                let mut bytes = reply.into_bytes();
                if method != "HEAD" {
                    bytes.extend_from_slice(&body);
                }
                let _ = conn.write_all(&bytes).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    Some(Registry { port, manifests })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_image_is_pulled_once() {
    let Some(docker) = daemon().await else { return };
    let ws = workspace();
    let files = tempfile::tempdir().unwrap();
    let Some(reg) = registry(files.path()).await else {
        return;
    };
    let image = format!(
        "127.0.0.1:{}/deerflow-pull-test:v{:08x}",
        reg.port,
        fastrand::u32(..)
    );
    let p = prefix();
    let write = |ws: &Path| {
        let cfg = config(ws, bash_calls(&["echo pulled-and-ran"]), &p, "");
        let text = std::fs::read_to_string(&cfg)
            .unwrap()
            .replace(&format!("\"{IMAGE}\""), &format!("\"{image}\""));
        std::fs::write(&cfg, text).unwrap();
        cfg
    };
    let cfg = write(ws.path());
    let out = run(ws.path(), &cfg, &[]).json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(results(&out), ["pulled-and-ran\n"]);
    let pulls = reg.manifests.load(std::sync::atomic::Ordering::SeqCst);
    assert!(pulls >= 1, "the image was not pulled");
    // Present now: the next run does not pull it again.
    let out = run(ws.path(), &cfg, &[]).json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        reg.manifests.load(std::sync::atomic::Ordering::SeqCst),
        pulls
    );
    assert!(containers(&docker, &p).await.is_empty());
    let _ = docker
        .remove_image(
            &image,
            None::<bollard::query_parameters::RemoveImageOptions>,
            None,
        )
        .await;
}
