//! The Anthropic provider end to end: the built binary against the mock's Messages SSE.

use serde_json::{json, Value};

use super::harness::workspace;
use super::openai_http::{assert_no_key, assert_no_panic, config, run, KEY};
use crate::support::{MockServer, Reply};

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_round_trip_with_two_parallel_tool_uses() {
    let server = MockServer::start().await;
    server.push_reply(
        Reply::anthropic_text_and_tools(
            "Let me write both files.",
            vec![
                (
                    "toolu_01A",
                    "write_file",
                    json!({"path": "a.txt", "content": "first"}),
                ),
                (
                    "toolu_01B",
                    "write_file",
                    json!({"path": "b.txt", "content": "second"}),
                ),
            ],
        )
        .usage(100, 40)
        .cache(1000, 200),
    );
    server.push_reply(
        Reply::anthropic_tool_uses(vec![
            ("toolu_02A", "read_file", json!({"path": "a.txt"})),
            ("toolu_02B", "read_file", json!({"path": "b.txt"})),
        ])
        .usage(150, 30)
        .cache(1200, 0),
    );
    server
        .push_reply(Reply::anthropic_text("Both files are written: first, second.").usage(300, 12));
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "anthropic",
        &server.anthropic_url(),
        ", max_tokens: 2048",
    );
    let out = run(&cfg, ws.path(), "write two files").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "first"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("b.txt")).unwrap(),
        "second"
    );

    let started = out.first("run_started");
    assert_eq!(started["model"]["provider"], "anthropic");
    assert_eq!(started["model"]["name"], "mock");
    let texts: Vec<_> = out
        .of_type("message")
        .iter()
        .map(|m| m["text"].clone())
        .collect();
    assert_eq!(
        texts,
        [
            json!("Let me write both files."),
            json!("Both files are written: first, second.")
        ]
    );
    let calls = out.of_type("tool_call");
    assert_eq!(
        calls
            .iter()
            .map(|c| c["call_id"].clone())
            .collect::<Vec<_>>(),
        [
            json!("toolu_01A"),
            json!("toolu_01B"),
            json!("toolu_02A"),
            json!("toolu_02B")
        ]
    );
    assert_eq!(
        calls[1]["arguments"],
        json!({"path": "b.txt", "content": "second"})
    );
    let results = out.of_type("tool_result");
    assert_eq!(results.len(), 4);
    assert!(results.iter().all(|r| r["status"] == "ok"), "{results:?}");

    // Usage per §3: input = input + cache_read + cache_creation, cache_read = read.
    let usages = out.of_type("usage");
    assert_eq!(usages.len(), 3);
    let u = usages[0];
    assert_eq!(
        (
            u["input_tokens"].as_u64(),
            u["output_tokens"].as_u64(),
            u["total_tokens"].as_u64(),
            u["cache_read_tokens"].as_u64()
        ),
        (Some(1300), Some(40), Some(1340), Some(1000))
    );
    let u = usages[1];
    assert_eq!(
        (
            u["input_tokens"].as_u64(),
            u["output_tokens"].as_u64(),
            u["total_tokens"].as_u64(),
            u["cache_read_tokens"].as_u64()
        ),
        (Some(1350), Some(30), Some(1380), Some(1200))
    );
    let u = usages[2];
    assert_eq!(
        (u["input_tokens"].as_u64(), u["output_tokens"].as_u64()),
        (Some(300), Some(12))
    );
    assert!(u["cache_read_tokens"].is_null(), "{u}");
    let done = out.completed();
    assert_eq!(done["status"], "completed");
    assert_eq!(
        done["final_message"],
        "Both files are written: first, second."
    );
    assert_eq!(done["turns"], 3);
    assert_eq!(done["usage"]["input_tokens"], 1300 + 1350 + 300);
    assert_eq!(done["usage"]["output_tokens"], 40 + 30 + 12);
    assert_eq!(
        done["usage"]["by_model"]["mock"]["total_tokens"],
        1340 + 1380 + 312
    );

    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    for req in &reqs {
        assert_eq!(req.method, "POST");
        assert_eq!(req.path, "/v1/messages");
        assert_eq!(req.header("x-api-key"), Some(KEY));
        assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(req.header("authorization"), None);
        assert_eq!(req.body["model"], "m1");
        assert_eq!(req.body["stream"], true);
        assert_eq!(req.body["max_tokens"], 2048);
        // The system prompt is one text block with the prompt-cache mark (on by default).
        assert_eq!(req.body["system"].as_array().map(Vec::len), Some(1));
        assert!(req.body["system"][0]["text"].is_string());
        assert_eq!(
            req.body["system"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        let tools = req.body["tools"].as_array().expect("tools");
        let write = tools
            .iter()
            .find(|t| t["name"] == "write_file")
            .expect("write_file offered");
        assert_eq!(write["input_schema"]["type"], "object");
        assert!(write["input_schema"]["properties"]["content"].is_object());
    }

    // The second request: the assistant turn with text + both tool_use blocks, then ONE
    // user turn with both tool_result blocks, in call order.
    let msgs = reqs[1].body["messages"].as_array().unwrap().clone();
    assert_eq!(msgs.len(), 3, "{msgs:#?}");
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(msgs[1]["role"], "assistant");
    let blocks = msgs[1]["content"].as_array().unwrap();
    assert_eq!(
        blocks[0],
        json!({"type": "text", "text": "Let me write both files."})
    );
    assert_eq!(
        blocks[1],
        json!({"type": "tool_use", "id": "toolu_01A", "name": "write_file",
               "input": {"path": "a.txt", "content": "first"}})
    );
    assert_eq!(blocks[2]["id"], "toolu_01B");
    assert_eq!(
        blocks[2]["input"],
        json!({"path": "b.txt", "content": "second"})
    );
    assert_eq!(msgs[2]["role"], "user");
    let results = msgs[2]["content"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["type"], "tool_result");
    assert_eq!(results[0]["tool_use_id"], "toolu_01A");
    assert_eq!(results[0]["content"], "OK");
    assert_eq!(results[1]["type"], "tool_result");
    assert_eq!(results[1]["tool_use_id"], "toolu_01B");
    assert_eq!(results[1]["content"], "OK");

    // The third request carries the read results under their ids.
    let msgs = reqs[2].body["messages"].as_array().unwrap().clone();
    assert_eq!(msgs.len(), 5, "{msgs:#?}");
    let results = msgs[4]["content"].as_array().unwrap();
    let by_id = |id: &str| -> Value {
        results
            .iter()
            .find(|r| r["tool_use_id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no result for {id}: {results:?}"))
    };
    assert!(by_id("toolu_02A")["content"]
        .as_str()
        .unwrap()
        .contains("first"));
    assert!(by_id("toolu_02B")["content"]
        .as_str()
        .unwrap()
        .contains("second"));
    assert_eq!(results[0]["tool_use_id"], "toolu_02A");
    assert_no_key(&out);
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_mid_stream_error_event_fails_the_run() {
    let server = MockServer::start().await;
    server.push_reply(
        Reply::anthropic_error_event("overloaded_error", "Overloaded: try again shortly")
            .usage(10, 0),
    );
    let ws = workspace();
    // Without retries, so the one overloaded stream decides (it would be retried).
    let cfg = config(
        ws.path(),
        "anthropic",
        &server.anthropic_url(),
        ", max_retries: 0",
    );
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let done = out.completed();
    assert_eq!(done["status"], "failed");
    let err = done["error"].as_str().unwrap();
    assert!(err.contains("Overloaded: try again shortly"), "{err}");
    assert!(err.contains("anthropic"), "{err}");
    assert!(out.of_type("message").is_empty());
    assert_no_key(&out);
    assert_no_panic(&out);
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_http_error_carries_the_api_message() {
    let server = MockServer::start().await;
    server.push_reply(Reply::status(400).body(
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: must be at most 8192"}}"#,
    ));
    let ws = workspace();
    let cfg = config(ws.path(), "anthropic", &server.anthropic_url(), "");
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let err = out.completed()["error"].as_str().unwrap().to_string();
    assert!(
        err.contains("400") && err.contains("max_tokens: must be at most 8192"),
        "{err}"
    );
    assert_eq!(server.request_count(), 1);
    // Without max_tokens in the config the client still sends the required field.
    assert!(server.requests()[0].body["max_tokens"].as_u64().is_some());
    assert_no_key(&out);
}
