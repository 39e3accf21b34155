//! Models that think (contract §10): what the request bodies carry, checked on the requests
//! the mock server recorded.

use std::path::Path;

use serde_json::json;

use super::harness::{check_stream, deerflow, workspace};
use super::openai_http::KEY;
use crate::support::{MockServer, Reply};

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
