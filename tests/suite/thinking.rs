//! Models that think (contract §10): what the request bodies carry, checked on the requests
//! the mock server recorded.

use std::path::Path;

use serde_json::json;

use super::harness::{check_stream, deerflow, workspace};
use super::openai_http::KEY;
use crate::support::{MockServer, Reply, Rule};

/// One OpenAI-compatible model, `o3-mini`, that supports thinking.
fn thinking_config(dir: &Path, base_url: &str) -> std::path::PathBuf {
    let path = dir.join("config.yaml");
    let text = format!(
        "models:\n  - name: mock\n    use: openai\n    model: o3-mini\n    base_url: \"{base_url}\"\n    api_key: {KEY}\n    \
         max_tokens: 512\n    temperature: 0.2\n    supports_thinking: true\n    \
         when_thinking_enabled: {{extra_body: {{thinking: {{type: enabled}}}}, reasoning_effort: high}}\n    \
         when_thinking_disabled: {{extra_body: {{thinking: {{type: disabled}}}}}}\n    \
         extra_body: {{user: deerflow-test}}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn thinking_maps_and_reasoning_model_rules_shape_the_request_body() {
    let server = MockServer::start().await;
    let ws = workspace();
    let cfg = thinking_config(ws.path(), &server.url());
    for (flag, kind) in [
        (None, "enabled"),
        (Some("on"), "enabled"),
        (Some("off"), "disabled"),
    ] {
        server.push_reply(Reply::text("ok"));
        let mut args = vec!["-c", cfg.to_str().unwrap(), "run", "--json"];
        if let Some(flag) = flag {
            args.extend(["--thinking", flag]);
        }
        args.extend(["-C", ws.path().to_str().unwrap(), "hi"]);
        let out = deerflow(args).output().await;
        check_stream(&out);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let body = server.last_request().unwrap().body;
        assert_eq!(body["thinking"], json!({"type": kind}), "{flag:?}");
        assert_eq!(body["user"], "deerflow-test");
        // o3-mini is a reasoning model: no `max_tokens`, no `temperature`.
        assert_eq!(body["max_completion_tokens"], 512);
        assert!(body.get("max_tokens").is_none() && body.get("temperature").is_none());
        assert_eq!(body.get("reasoning_effort").is_some(), kind == "enabled");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_thinking_value_is_a_usage_error() {
    let out = deerflow(["run", "--thinking", "maybe", "hi"])
        .output()
        .await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stdout.is_empty());
}

/// A recorded provider stream from tests/fixtures, cut into SSE events.
fn fixture(rel: &str) -> Vec<String> {
    let path = format!(
        "{}/tests/fixtures/providers/{rel}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.split_inclusive("\n\n").map(str::to_string).collect()
}

fn mock_config(dir: &Path, url: &str) -> std::path::PathBuf {
    let path = dir.join("config.yaml");
    std::fs::write(
        &path,
        format!("models:\n  - {{name: ds, use: openai, model: deepseek-v4-flash, base_url: \"{url}\", api_key: {KEY}}}\n"),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn the_leads_reasoning_becomes_reasoning_events_and_goes_back_to_the_model() {
    let server = MockServer::start().await;
    server.push_reply(Reply::raw_sse(fixture(
        "deepseek/reasoning_then_tool_call.sse",
    )));
    server.push_reply(Reply::raw_sse(fixture("deepseek/reasoner_text.sse")));
    let ws = workspace();
    let cfg = mock_config(ws.path(), &server.url());
    let out = deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-C",
        ws.path().to_str().unwrap(),
        "what is the date?",
    ])
    .output()
    .await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.types(),
        [
            "run_started",
            "usage",
            "reasoning",
            "tool_call",
            "tool_result",
            "usage",
            "reasoning",
            "message",
            "run_completed"
        ]
    );
    let reasoning = out.of_type("reasoning");
    assert_eq!(reasoning[0]["text"], "Let me get the current date.");
    assert_eq!(reasoning[1]["text"].as_str().unwrap().chars().count(), 882);
    assert_eq!(
        out.first("message")["text"],
        "Hello there! 😊 How can I help you today?"
    );
    // Reasoning tokens are output tokens: DeepSeek counts them in completion_tokens.
    let usage = out.of_type("usage");
    assert_eq!(usage[1]["output_tokens"], 212);
    // DeepSeek wants the reasoning back on the earlier assistant message.
    let second = &server.requests()[1].body;
    let assistant = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    assert_eq!(
        assistant["reasoning_content"],
        "Let me get the current date."
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sub_agents_reasoning_is_a_field_of_its_task_running_message() {
    let server = MockServer::start().await;
    server.push(Rule::body_contains("Task Succeeded").reply(Reply::text("final")));
    server.push(Rule::body_contains("LEADPROMPT").reply(Reply::tool_calls(vec![(
        "call_1",
        "task",
        json!({"description": "greet", "prompt": "SUBTASK: say hello", "subagent_type": "general-purpose"}),
    )])));
    server.push(
        Rule::body_contains("SUBTASK").reply(Reply::raw_sse(fixture("deepseek/reasoner_text.sse"))),
    );
    let ws = workspace();
    let cfg = mock_config(ws.path(), &server.url());
    let out = deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-C",
        ws.path().to_str().unwrap(),
        "LEADPROMPT: delegate",
    ])
    .output()
    .await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Only the lead's reasoning is a `reasoning` event; the lead gave none here.
    assert!(out.of_type("reasoning").is_empty());
    let running = out.of_type("task_running");
    assert_eq!(running.len(), 1, "{running:?}");
    let message = &running[0]["message"];
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["text"], "Hello there! 😊 How can I help you today?");
    assert_eq!(message["reasoning"].as_str().unwrap().chars().count(), 882);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_without_reasoning_has_no_reasoning_field() {
    let server = MockServer::start().await;
    server.push(Rule::body_contains("Task Succeeded").reply(Reply::text("final")));
    server.push(Rule::body_contains("LEADPROMPT").reply(Reply::tool_calls(vec![(
        "call_1",
        "task",
        json!({"description": "greet", "prompt": "SUBTASK: say hello", "subagent_type": "general-purpose"}),
    )])));
    server.push(Rule::body_contains("SUBTASK").reply(Reply::text("hello")));
    let ws = workspace();
    let cfg = mock_config(ws.path(), &server.url());
    let out = deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-C",
        ws.path().to_str().unwrap(),
        "LEADPROMPT: delegate",
    ])
    .output()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let running = out.of_type("task_running");
    assert!(running[0]["message"].get("reasoning").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_response_cut_at_the_output_limit_warns_and_keeps_its_text() {
    let server = MockServer::start().await;
    server.push_reply(Reply::raw_sse(fixture("vllm/chat_length.sse")));
    let ws = workspace();
    let cfg = mock_config(ws.path(), &server.url());
    let out = deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-C",
        ws.path().to_str().unwrap(),
        "hi",
    ])
    .output()
    .await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let warning = out.first("warning");
    assert_eq!(warning["code"], "output_truncated");
    let message = out.first("message")["text"].as_str().unwrap().to_string();
    assert!(!message.is_empty());
    assert_eq!(out.completed()["final_message"], message.as_str());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_thinking_run_replays_offline_with_the_same_events() {
    let server = MockServer::start().await;
    server.push_reply(Reply::raw_sse(fixture(
        "deepseek/reasoning_then_tool_call.sse",
    )));
    server.push_reply(Reply::raw_sse(fixture("vllm/chat_length.sse")));
    let ws = workspace();
    let cfg = mock_config(ws.path(), &server.url());
    let tape = ws.path().join("tape.json");
    let recorded = deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "--record",
        tape.to_str().unwrap(),
        "-C",
        ws.path().to_str().unwrap(),
        "what is the date?",
    ])
    .output()
    .await;
    assert_eq!(recorded.code, 0, "{}", recorded.stderr);
    let replayed = deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-m",
        &format!("replay:{}", tape.display()),
        "-C",
        ws.path().to_str().unwrap(),
        "what is the date?",
    ])
    .output()
    .await;
    check_stream(&replayed);
    assert_eq!(replayed.code, 0, "{}", replayed.stderr);
    assert_eq!(replayed.types(), recorded.types());
    assert_eq!(
        replayed.first("reasoning")["text"],
        "Let me get the current date."
    );
    assert_eq!(replayed.first("warning")["code"], "output_truncated");
    assert_eq!(
        replayed.completed()["final_message"],
        recorded.completed()["final_message"]
    );
}
