//! Provider-opaque content a response carries (reasoning text, thinking blocks with their
//! signatures) goes back unchanged on the agent's next request, through the whole run.

use serde_json::{json, Value};

use super::harness::workspace;
use super::openai_http::{config, run};
use crate::support::{MockServer, Reply};

/// A recorded provider stream from tests/fixtures.
fn capture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/providers/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_thinking_goes_back_before_its_tool_use() {
    let server = MockServer::start().await;
    server.push_reply(Reply::raw_sse(vec![capture(
        "anthropic/thinking_then_tool_use.sse",
    )]));
    server.push_reply(Reply::anthropic_text("Version 1."));
    let ws = workspace();
    let cfg = config(ws.path(), "anthropic", &server.anthropic_url(), "");
    let out = run(&cfg, ws.path(), "which version?").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);

    let second = &server.requests()[1].body;
    let assistant = &second["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    let thinking = &assistant["content"][0];
    assert_eq!(thinking["type"], "thinking");
    assert!(thinking["thinking"]
        .as_str()
        .unwrap()
        .starts_with("The user wants me to:\n1. Use the fixed_version tool"));
    assert_eq!(thinking["signature"].as_str().map(str::len), Some(524));
    assert_eq!(
        assistant["content"][1],
        json!({"type": "tool_use", "id": "toolu_01825dXWLSoJwCst1qTsiWdb",
               "name": "fixed_version", "input": {}})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_reasoning_content_goes_back_on_the_assistant_message() {
    let server = MockServer::start().await;
    server.push_reply(Reply::raw_sse(vec![capture(
        "deepseek/reasoning_then_tool_call.sse",
    )]));
    server.push_reply(Reply::text("It is today."));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "what date is it?").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);

    let second = &server.requests()[1].body;
    let assistant: &Value = &second["messages"][2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["reasoning_content"],
        "Let me get the current date."
    );
    assert_eq!(
        assistant["tool_calls"][0]["id"],
        "call_00_tz6Vq4aG59EtpFCVbpoY3635"
    );
}
