//! Operator logs (contract §1): `DEERFLOW_LOG`/`RUST_LOG` set the level; every line is one
//! line on stderr carrying the trace id; at debug a run says what it asked of whom and how
//! long it took, and never shows a secret.

use serde_json::json;

use super::harness::{cassette, deerflow, workspace};
use super::openai_http::{assert_no_key, config, run};
use crate::support::{MockServer, Reply};

fn lines_with<'a>(stderr: &'a str, needle: &str) -> Vec<&'a str> {
    stderr.lines().filter(|l| l.contains(needle)).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn debug_names_each_model_request_retry_and_tool_call() {
    let server = MockServer::start().await;
    server.push_reply(Reply::status(503).body(r#"{"error":{"message":"busy"}}"#));
    server.push_reply(Reply::tool_calls(vec![("c1", "ls", json!({"path": "."}))]).usage(3, 1));
    server.push_reply(Reply::text("done").usage(5, 1));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), ", max_retries: 1");
    let out = run(&cfg, ws.path(), "hi")
        .env("DEERFLOW_LOG", "debug")
        .output()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_no_key(&out);
    for l in out.stderr.lines() {
        assert!(l.starts_with("[trace="), "a line without the trace id: {l}");
    }
    let requests = lines_with(&out.stderr, "DEBUG model request ");
    assert_eq!(requests.len(), 3, "{}", out.stderr);
    for l in &requests {
        for field in ["provider=openai", "model=m1", "bytes=", "ms=", "url="] {
            assert!(l.contains(field), "{field} missing: {l}");
        }
    }
    assert!(requests[0].contains("status=503"), "{}", requests[0]);
    assert!(requests[1].contains("status=200"), "{}", requests[1]);
    let retry = lines_with(&out.stderr, "model attempt failed");
    assert_eq!(retry.len(), 1, "{}", out.stderr);
    assert!(retry[0].contains("decision=retry"), "{}", retry[0]);
    let tools = lines_with(&out.stderr, "DEBUG tool call ");
    assert_eq!(tools.len(), 1, "{}", out.stderr);
    assert!(
        tools[0].contains("tool=ls") && tools[0].contains("status=ok"),
        "{}",
        tools[0]
    );
    assert_eq!(
        lines_with(&out.stderr, "DEBUG model call ").len(),
        2,
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_level_comes_from_the_environment() {
    let server = MockServer::start().await;
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    // Warn by default: a normal run prints nothing on stderr in --json mode.
    server.push_reply(Reply::text("done").usage(1, 1));
    let out = run(&cfg, ws.path(), "hi").output().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("DEBUG"), "{}", out.stderr);
    // RUST_LOG when DEERFLOW_LOG is unset; a bad directive is named once, the rest applies.
    server.push_reply(Reply::text("done").usage(1, 1));
    let out = run(&cfg, ws.path(), "hi")
        .env("RUST_LOG", "debug,=[")
        .output()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        lines_with(&out.stderr, "WARN ignoring log directive").len(),
        1,
        "{}",
        out.stderr
    );
    assert_eq!(
        lines_with(&out.stderr, "DEBUG model request ").len(),
        1,
        "{}",
        out.stderr
    );
    // DEERFLOW_LOG wins over RUST_LOG.
    server.push_reply(Reply::text("done").usage(1, 1));
    let out = run(&cfg, ws.path(), "hi")
        .env("RUST_LOG", "debug")
        .env("DEERFLOW_LOG", "warn")
        .output()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("DEBUG"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn debug_names_each_command_with_its_sandbox_and_end() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"id": "b1", "name": "bash", "arguments": {"command": "echo hi; exit 3"}}]},
            {"text": "done"}]}),
    );
    let out = deerflow([
        "run",
        "--json",
        "--allow-bash",
        "-C",
        ws.path().to_str().unwrap(),
        "-m",
        &format!("replay:{}", c.display()),
        "go",
    ])
    .env("DEERFLOW_LOG", "debug")
    .output()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let commands = lines_with(&out.stderr, "DEBUG command ");
    assert_eq!(commands.len(), 1, "{}", out.stderr);
    for field in [
        "sandbox=local",
        "command=\"echo hi; exit 3\"",
        "end=exited code=3",
        "ms=",
    ] {
        assert!(
            commands[0].contains(field),
            "{field} missing: {}",
            commands[0]
        );
    }
}
