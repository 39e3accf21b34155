//! The Anthropic provider end to end: the built binary against the mock's Messages SSE.

use serde_json::{json, Value};

use super::harness::deerflow;
use super::harness::workspace;
use super::openai_http::{assert_no_key, assert_no_panic, config, run, KEY};
use crate::support::{MockServer, Reply, Rule};

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

/// Where a Messages request carries `cache_control`: `tools[i]`, `system[i]`,
/// `messages[m][b]`.
fn breakpoints(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let marked = |v: &Value| v.get("cache_control") == Some(&json!({"type": "ephemeral"}));
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if marked(tool) {
            out.push(format!("tools[{i}]"));
        }
    }
    for (i, block) in body["system"].as_array().into_iter().flatten().enumerate() {
        if marked(block) {
            out.push(format!("system[{i}]"));
        }
    }
    for (m, msg) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (b, block) in msg["content"].as_array().into_iter().flatten().enumerate() {
            if marked(block) {
                out.push(format!("messages[{m}][{b}]"));
            }
        }
    }
    out
}

/// The request without its cache marks.
fn unmarked(body: &Value) -> Value {
    let text = body
        .to_string()
        .replace(r#","cache_control":{"type":"ephemeral"}"#, "");
    serde_json::from_str(&text).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn prompt_cache_marks_the_prefix_and_cache_tokens_are_counted_and_priced() {
    let server = MockServer::start().await;
    server.push_reply(
        Reply::anthropic_tool_uses(vec![("toolu_1", "ls", json!({"path": "."}))])
            .usage(100, 20)
            .cache(0, 2000),
    );
    server.push_reply(Reply::anthropic_text("done").usage(50, 10).cache(2000, 100));
    let ws = workspace();
    let price = ", price: {input_per_mtok: 3, output_per_mtok: 15, cache_read_per_mtok: 0.3, \
                 cache_write_per_mtok: 3.75}";
    let cfg = config(ws.path(), "anthropic", &server.anthropic_url(), price);
    let out = run(&cfg, ws.path(), "list the files").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let last_tool = reqs[0].body["tools"].as_array().unwrap().len() - 1;
    // Tools, system, and the latest turn; then also the previous call's end.
    assert_eq!(
        breakpoints(&reqs[0].body),
        [
            format!("tools[{last_tool}]"),
            "system[0]".into(),
            "messages[0][0]".into()
        ]
    );
    assert_eq!(
        breakpoints(&reqs[1].body),
        [
            format!("tools[{last_tool}]"),
            "system[0]".into(),
            "messages[0][0]".into(),
            "messages[2][0]".into()
        ]
    );
    assert_eq!(
        reqs[1].body["messages"][2]["content"][0]["type"],
        "tool_result"
    );
    // The second call's prefix is the first call's, byte for byte.
    let (a, b) = (unmarked(&reqs[0].body), unmarked(&reqs[1].body));
    assert_eq!(a["system"], b["system"]);
    assert_eq!(a["tools"], b["tools"]);
    assert_eq!(a["messages"][0], b["messages"][0]);
    // No max_tokens configured: the default for a model of no known family.
    assert_eq!(reqs[0].body["max_tokens"], 32000);

    // §3: input = uncached + cache read + cache write; cache_read_tokens the read part.
    let usage: Vec<_> = out
        .of_type("usage")
        .iter()
        .map(|u| {
            (
                u["input_tokens"].as_u64(),
                u["cache_read_tokens"].as_u64(),
                u["output_tokens"].as_u64(),
            )
        })
        .collect();
    assert_eq!(
        usage,
        [
            (Some(2100), Some(0), Some(20)),
            (Some(2150), Some(2000), Some(10))
        ]
    );
    let done = out.completed();
    assert_eq!(done["usage"]["input_tokens"], 4250);
    // 150 uncached × 3 + 2000 read × 0.3 + 2100 written × 3.75 + 30 out × 15, per million.
    assert_eq!(done["usage"]["cost_usd"], json!(0.009375));
    assert_no_key(&out);
}

#[tokio::test(flavor = "multi_thread")]
async fn prompt_cache_false_sends_no_cache_control() {
    let server = MockServer::start().await;
    server.push_reply(
        Reply::anthropic_tool_uses(vec![("toolu_1", "ls", json!({"path": "."}))]).usage(10, 2),
    );
    server.push_reply(Reply::anthropic_text("done").usage(10, 2));
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "anthropic",
        &server.anthropic_url(),
        ", prompt_cache: false",
    );
    let out = run(&cfg, ws.path(), "list").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    for req in server.requests() {
        assert!(!req.raw_body.contains("cache_control"), "{}", req.raw_body);
        assert!(req.body["system"].is_string());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sub_agents_of_one_type_send_the_same_cached_prefix() {
    let server = MockServer::start().await;
    server.push(
        Rule::body_contains("Task Succeeded").reply(Reply::anthropic_text("all done").usage(5, 1)),
    );
    let task = |i: u32| {
        (
            format!("toolu_t{i}"),
            "task".to_string(),
            json!({"description": format!("part {i}"), "prompt": format!("SUBTASK {i}"),
                   "subagent_type": "general-purpose"}),
        )
    };
    server.push(
        Rule::body_contains("LEADPROMPT")
            .reply(Reply::anthropic_tool_uses(vec![task(1), task(2)]).usage(5, 1)),
    );
    server.push(
        Rule::body_contains("SUBTASK")
            .times(2)
            .reply(Reply::anthropic_text("sub done").usage(5, 1)),
    );
    let ws = workspace();
    let cfg = config(ws.path(), "anthropic", &server.anthropic_url(), "");
    let out = run(&cfg, ws.path(), "LEADPROMPT: split").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["tasks"]["completed"], 2);
    let subs: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.raw_body.contains("SUBTASK") && !r.raw_body.contains("LEADPROMPT"))
        .collect();
    assert_eq!(subs.len(), 2);
    // System prompt and tools, marks included, are the same bytes for both sub-agents.
    let prefix = |r: &crate::support::RecordedRequest| {
        (
            r.body["system"].to_string(),
            r.body["tools"].to_string(),
            breakpoints(&r.body),
        )
    };
    assert_eq!(prefix(&subs[0]), prefix(&subs[1]));
    assert!(subs[0].body["system"][0]["cache_control"].is_object());
    assert!(subs[0].body["tools"].as_array().unwrap().last().unwrap()["cache_control"].is_object());
}

#[tokio::test(flavor = "multi_thread")]
async fn max_tokens_defaults_to_the_model_family_and_the_thinking_budget_is_checked() {
    let server = MockServer::start().await;
    server.push_reply(Reply::anthropic_text("hi").usage(3, 1));
    let ws = workspace();
    let write = |extra: &str| {
        let path = ws.path().join("family.yaml");
        std::fs::write(
            &path,
            format!(
                "models:\n  - name: claude\n    use: anthropic\n    model: claude-sonnet-4-5-20250929\n    \
                 base_url: '{}'\n    api_key: {KEY}\n{extra}",
                server.anthropic_url()
            ),
        )
        .unwrap();
        path
    };
    let cfg = write("");
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(server.requests()[0].body["max_tokens"], 64000);

    // A budget the default limit cannot hold: a config error before any event.
    let cfg = write(
        "    supports_thinking: true\n    when_thinking_enabled:\n      thinking: {type: enabled, budget_tokens: 64000}\n",
    );
    let key = "models[0].when_thinking_enabled.thinking.budget_tokens";
    let check = deerflow(["-c", cfg.to_str().unwrap(), "config", "check"])
        .output()
        .await;
    assert_eq!(check.code, 78, "{}", check.stderr);
    let lines: Vec<&str> = check.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", check.stderr);
    assert!(
        lines[0].contains(key) && lines[0].contains("less than max_tokens (64000"),
        "{}",
        lines[0]
    );
    let out = run(&cfg, ws.path(), "hi").output().await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(out.stderr.contains(key), "{}", out.stderr);
    assert_eq!(server.request_count(), 1);
    // The config is wrong whatever this run's --thinking says.
    let out = deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "--thinking",
        "off",
        "-C",
        ws.path().to_str().unwrap(),
        "hi",
    ])
    .output()
    .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert_eq!(server.request_count(), 1);
}
