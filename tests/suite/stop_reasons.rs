//! Stop reasons end to end (contract §10): a response cut at the output limit, a safety
//! stop, and DeerFlow's `safety_finish_reason` section, against the mock's streams.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::harness::Output;
use super::openai_http::{config, run};
use crate::support::{MockServer, Reply};

/// One Anthropic SSE event.
fn event(kind: &str, data: Value) -> String {
    format!("event: {kind}\ndata: {data}\n\n")
}

/// An Anthropic stream: one `write_file` tool_use whose input is `partial_json`, ending
/// with `stop_reason`.
fn anthropic_tool_use(partial_json: &str, stop_reason: &str) -> Reply {
    Reply::raw_sse(vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                   "role": "assistant", "content": [], "model": "m1",
                   "usage": {"input_tokens": 20, "output_tokens": 1}}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": "Writing it."}}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block":
                   {"type": "tool_use", "id": "toolu_W", "name": "write_file", "input": {}}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "input_json_delta", "partial_json": partial_json}}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason},
                   "usage": {"output_tokens": 64}}),
        ),
        event("message_stop", json!({"type": "message_stop"})),
    ])
}

fn warnings(out: &Output) -> Vec<String> {
    out.of_type("warning")
        .iter()
        .map(|w| w["code"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn anthropic_config(ws: &Path, server: &MockServer) -> PathBuf {
    config(ws, "anthropic", &server.anthropic_url(), ", max_tokens: 64")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_anthropic_tool_use_cut_at_max_tokens_is_not_run_and_the_model_is_told() {
    let server = MockServer::start().await;
    server.push_reply(anthropic_tool_use(
        r#"{"path": "big.txt", "content": "the first half of"#,
        "max_tokens",
    ));
    server.push_reply(Reply::anthropic_text("I will write smaller pieces.").usage(30, 5));
    let ws = super::harness::workspace();
    let cfg = anthropic_config(ws.path(), &server);
    let out = run(&cfg, ws.path(), "write a big file").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!ws.path().join("big.txt").exists());
    assert_eq!(warnings(&out), ["output_truncated"]);
    let warning = out.first("warning")["message"].as_str().unwrap();
    assert!(
        warning.contains("max_tokens") && warning.contains("1 tool call(s) cut off"),
        "{warning}"
    );
    // The text of the cut response is kept.
    assert_eq!(out.first("message")["text"], "Writing it.");
    let result = out.first("tool_result");
    assert_eq!(result["call_id"], "toolu_W");
    assert_eq!(result["status"], "error");
    let told = "Tool call arguments were cut off at the output limit; write smaller pieces";
    assert_eq!(result["output"], told);
    let second = &server.requests()[1].body;
    let blocks = second["messages"][2]["content"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "tool_result");
    assert_eq!(blocks[0]["tool_use_id"], "toolu_W");
    assert_eq!(blocks[0]["content"], told);
    assert_eq!(
        out.completed()["final_message"],
        "I will write smaller pieces."
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_anthropic_refusal_runs_none_of_its_tool_uses() {
    let server = MockServer::start().await;
    server.push_reply(anthropic_tool_use(
        r#"{"path": "x.txt", "content": "whole"}"#,
        "refusal",
    ));
    let ws = super::harness::workspace();
    let cfg = anthropic_config(ws.path(), &server);
    let out = run(&cfg, ws.path(), "do it").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!ws.path().join("x.txt").exists());
    assert_eq!(warnings(&out), ["content_filtered"]);
    let warning = out.first("warning")["message"].as_str().unwrap();
    assert!(
        warning.contains("refusal") && warning.contains("1 tool call(s) not run"),
        "{warning}"
    );
    assert!(out.of_type("tool_call").is_empty());
    assert!(out.of_type("tool_result").is_empty());
    assert_eq!(server.request_count(), 1);
    assert_eq!(out.completed()["final_message"], "Writing it.");
}

/// An OpenAI-compatible stream of one whole tool call ending with `finish_reason`.
fn openai_call_then(finish_reason: &str) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "c", "object": "chat.completion.chunk", "model": "m1",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    Reply::raw_sse(vec![
        chunk(
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                   "function": {"name": "write_file", "arguments": "{\"path\": \"x.txt\", \"content\": \"hi\"}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!(finish_reason)),
        "data: [DONE]\n\n".to_string(),
    ])
}

#[tokio::test(flavor = "multi_thread")]
async fn deerflow_s_safety_section_adds_a_gateway_s_finish_reasons() {
    let section = "safety_finish_reason:\n  enabled: true\n  detectors:\n    \
                   - use: deerflow.agents.middlewares.safety_termination_detectors:OpenAICompatibleContentFilterDetector\n      \
                   config:\n        finish_reasons: [content_filter, sensitive, risk_control]\n";
    let server = MockServer::start().await;
    server.push_reply(openai_call_then("risk_control"));
    let ws = super::harness::workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{text}{section}")).unwrap();
    let out = run(&cfg, ws.path(), "go").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(warnings(&out), ["content_filtered"]);
    assert!(out.of_type("tool_call").is_empty());
    assert!(!ws.path().join("x.txt").exists());

    // `enabled: false`: the same response's call runs, without a warning.
    let server = MockServer::start().await;
    server.push_reply(openai_call_then("content_filter"));
    server.push_reply(Reply::text("done"));
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{text}safety_finish_reason: {{enabled: false}}\n"),
    )
    .unwrap();
    let out = run(&cfg, ws.path(), "go").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(warnings(&out).is_empty(), "{:?}", warnings(&out));
    assert_eq!(out.of_type("tool_call").len(), 1);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("x.txt")).unwrap(),
        "hi"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn openrouter_s_error_chunk_after_a_length_stop_is_a_truncated_answer() {
    let path = format!(
        "{}/tests/fixtures/providers/openrouter/length_then_inline_error.sse",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).unwrap();
    let server = MockServer::start().await;
    server.push_reply(Reply::raw_sse(
        text.split_inclusive("\n\n").map(str::to_string).collect(),
    ));
    let ws = super::harness::workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(warnings(&out), ["output_truncated"]);
    assert_eq!(
        out.first("reasoning")["text"],
        "We need to respond to a greeting. The user"
    );
    let usage = out.first("usage");
    assert_eq!(
        (
            usage["input_tokens"].as_u64(),
            usage["output_tokens"].as_u64()
        ),
        (Some(43), Some(10))
    );
    assert_eq!(out.completed()["status"], "completed");
}
