//! Tests of the mock LLM server itself, driven with a plain reqwest client.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::support::{MockServer, Reply, Rule};

/// reqwest's `json` feature is not enabled in this crate, so JSON bodies are set by hand.
trait WithJson {
    fn with_json(self, body: &Value) -> Self;
}

impl WithJson for reqwest::RequestBuilder {
    fn with_json(self, body: &Value) -> Self {
        self.header("content-type", "application/json")
            .body(body.to_string())
    }
}

fn client() -> reqwest::Client {
    // No proxy: a proxy from the environment must not intercept 127.0.0.1.
    reqwest::Client::builder().no_proxy().build().unwrap()
}

async fn post(url: &str, body: Value) -> reqwest::Response {
    client()
        .post(url)
        .with_json(&body)
        .send()
        .await
        .expect("request sent")
}

async fn chat(server: &MockServer, body: Value) -> reqwest::Response {
    post(&format!("{}/chat/completions", server.url()), body).await
}

async fn text_of(server: &MockServer, marker: &str) -> String {
    chat(
        server,
        json!({"model": "m", "messages": [{"role": "user", "content": marker}]}),
    )
    .await
    .text()
    .await
    .unwrap()
}

/// The `data:` payloads of an SSE body: JSON values, with `[DONE]` as a JSON string.
fn data_lines(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap_or_else(|_| Value::String(d.to_string())))
        .collect()
}

/// `(event name, data)` pairs of an Anthropic-style SSE body.
fn events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let name = block
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or("");
            let data = block
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or("null");
            (name.to_string(), serde_json::from_str(data).unwrap())
        })
        .collect()
}

/// The concatenated text content of an OpenAI stream.
fn openai_text(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect()
}

fn text_reply(body: &str) -> String {
    openai_text(&data_lines(body))
}

#[tokio::test(flavor = "multi_thread")]
async fn rules_apply_in_order_and_run_out() {
    let server = MockServer::start().await;
    server.push(Rule::any().times(2).reply(Reply::text("first")));
    server.push(Rule::any().reply(Reply::text("second")));
    assert_eq!(server.unused_rules(), 2);

    assert_eq!(text_reply(&text_of(&server, "a").await), "first");
    assert_eq!(text_reply(&text_of(&server, "b").await), "first");
    assert_eq!(text_reply(&text_of(&server, "c").await), "second");

    let resp = chat(&server, json!({"messages": []})).await;
    assert_eq!(resp.status().as_u16(), 500);
    let err: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert!(err["error"]["message"]
        .as_str()
        .unwrap()
        .contains("mock: no rule matched"));
    assert_eq!(
        server.request_count(),
        4,
        "unmatched requests are recorded too"
    );
    assert_eq!(server.unmatched_count(), 1);
    assert_eq!(server.unused_rules(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn always_rules_never_run_out() {
    let server = MockServer::start().await;
    server.push(Rule::any().always().reply(Reply::text("again")));
    for _ in 0..5 {
        assert_eq!(text_reply(&text_of(&server, "x").await), "again");
    }
    assert_eq!(server.unused_rules(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn matchers_route_by_body_path_and_predicate() {
    let server = MockServer::start().await;
    server.push(
        Rule::body_contains("ALPHA")
            .times(2)
            .reply(Reply::text("alpha")),
    );
    server.push(Rule::body_contains("BETA").reply(Reply::text("beta")));
    server.push(Rule::path_contains("/v1/messages").reply(Reply::anthropic_text("anthropic")));
    server.push(Rule::when(|req| req.header("x-special").is_some()).reply(Reply::text("special")));

    assert_eq!(text_reply(&text_of(&server, "BETA").await), "beta");
    assert_eq!(text_reply(&text_of(&server, "ALPHA").await), "alpha");
    assert_eq!(text_reply(&text_of(&server, "ALPHA").await), "alpha");

    let url = format!("{}/v1/messages", server.anthropic_url());
    let body = post(&url, json!({"model": "claude"}))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(events(&body)[0].0, "message_start");

    let resp = client()
        .post(format!("{}/chat/completions", server.url()))
        .header("X-Special", "1")
        .with_json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(text_reply(&resp.text().await.unwrap()), "special");
    assert_eq!(server.unmatched_count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn status_reply_carries_headers_and_body() {
    let server = MockServer::start().await;
    server.push(
        Rule::any().reply(
            Reply::status(429)
                .header("Retry-After", "1")
                .body(r#"{"error":{"message":"slow down"}}"#),
        ),
    );
    server.push(Rule::any().reply(Reply::status(502).html_body("<html>bad gateway</html>")));

    let resp = chat(&server, json!({})).await;
    assert_eq!(resp.status().as_u16(), 429);
    assert_eq!(resp.headers()["retry-after"], "1");
    assert_eq!(resp.headers()["content-type"], "application/json");
    let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(body["error"]["message"], "slow down");

    let resp = chat(&server, json!({})).await;
    assert_eq!(resp.status().as_u16(), 502);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert_eq!(resp.text().await.unwrap(), "<html>bad gateway</html>");
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_text_stream_has_the_real_shape() {
    let server = MockServer::start().await;
    server.push(Rule::any().reply(Reply::text("hello world").usage(10, 5).cached(3)));
    let resp = chat(&server, json!({"model": "gpt-x", "stream": true})).await;
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let chunks = data_lines(&resp.text().await.unwrap());

    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": null})
    );
    assert_eq!(chunks[0]["model"], "gpt-x", "the request's model is echoed");
    assert_eq!(chunks[0]["object"], "chat.completion.chunk");
    let content_deltas = chunks
        .iter()
        .filter(|c| c["choices"][0]["delta"]["content"].is_string())
        .count();
    assert!(
        (2..=3).contains(&content_deltas),
        "text arrives in pieces: {content_deltas}"
    );
    assert_eq!(openai_text(&chunks), "hello world");

    let n = chunks.len();
    assert_eq!(chunks[n - 3]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks[n - 2]["choices"], json!([]));
    assert_eq!(
        chunks[n - 2]["usage"],
        json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
               "prompt_tokens_details": {"cached_tokens": 3}})
    );
    assert_eq!(chunks[n - 1], "[DONE]");
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_stream_without_usage_has_no_usage_chunk() {
    let server = MockServer::start().await;
    server.push(Rule::any().reply(Reply::text("hi")));
    let chunks = data_lines(&chat(&server, json!({})).await.text().await.unwrap());
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    assert_eq!(
        chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
        "stop"
    );
    assert_eq!(chunks[chunks.len() - 1], "[DONE]");
}

/// Reassembles streamed tool calls into `(id, name, arguments JSON)` by index.
fn openai_calls(chunks: &[Value]) -> Vec<(String, String, Value)> {
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for chunk in chunks {
        let Some(deltas) = chunk["choices"][0]["delta"]["tool_calls"].as_array() else {
            continue;
        };
        for d in deltas {
            let index = d["index"].as_u64().unwrap() as usize;
            if let Some(id) = d["id"].as_str() {
                assert_eq!(index, calls.len(), "a call's first delta introduces it");
                let name = d["function"]["name"].as_str().unwrap().to_string();
                calls.push((id.to_string(), name, String::new()));
            }
            calls[index].2 += d["function"]["arguments"].as_str().unwrap_or("");
        }
    }
    calls
        .into_iter()
        .map(|(id, name, args)| (id, name, serde_json::from_str(&args).unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_tool_calls_stream_in_fragments() {
    let server = MockServer::start().await;
    let args = json!({"path": "src/main.rs", "limit": 20});
    server.push(Rule::any().reply(Reply::tool_calls(vec![
        ("call_1", "read_file", args.clone()),
        ("call_2", "ls", json!({})),
    ])));
    server.push(Rule::any().reply(Reply::text_and_tools(
        "let me look",
        vec![("call_3", "grep", json!({"q": "x"}))],
    )));

    let chunks = data_lines(&chat(&server, json!({})).await.text().await.unwrap());
    let fragments = chunks
        .iter()
        .filter(|c| c["choices"][0]["delta"]["tool_calls"][0]["index"] == 0)
        .count();
    assert!(fragments >= 3, "arguments are split over several deltas");
    assert_eq!(
        openai_calls(&chunks),
        vec![
            ("call_1".into(), "read_file".into(), args),
            ("call_2".into(), "ls".into(), json!({})),
        ]
    );
    assert_eq!(
        chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
        "tool_calls"
    );

    let chunks = data_lines(&chat(&server, json!({})).await.text().await.unwrap());
    assert_eq!(openai_text(&chunks), "let me look");
    assert_eq!(
        openai_calls(&chunks),
        vec![("call_3".into(), "grep".into(), json!({"q": "x"}))]
    );
    assert_eq!(
        chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
        "tool_calls"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_text_stream_has_the_real_shape() {
    let server = MockServer::start().await;
    server.push(Rule::any().reply(Reply::anthropic_text("hi there, friend").usage(10, 5)));
    let url = format!("{}/v1/messages", server.anthropic_url());
    let resp = post(&url, json!({"model": "claude-x"})).await;
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let evs = events(&resp.text().await.unwrap());
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[..3], ["message_start", "ping", "content_block_start"]);
    assert_eq!(
        names[names.len() - 3..],
        ["content_block_stop", "message_delta", "message_stop"]
    );

    let start = &evs[0].1["message"];
    assert_eq!(start["model"], "claude-x");
    assert_eq!(start["usage"]["input_tokens"], 10);
    assert!(start["usage"].get("cache_read_input_tokens").is_none());
    let text: String = evs
        .iter()
        .filter_map(|(_, d)| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "hi there, friend");
    assert!(
        names
            .iter()
            .filter(|n| **n == "content_block_delta")
            .count()
            >= 2
    );
    let delta = &evs[evs.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(delta["usage"]["output_tokens"], 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_tool_uses_stream_partial_json() {
    let server = MockServer::start().await;
    server.push(
        Rule::any().reply(
            Reply::anthropic_tool_uses(vec![
                ("toolu_1", "ls", json!({})),
                ("toolu_2", "read_file", json!({"path": "a"})),
            ])
            .usage(7, 3)
            .cache(3, 2),
        ),
    );
    let url = format!("{}/v1/messages", server.anthropic_url());
    let evs = events(&post(&url, json!({})).await.text().await.unwrap());

    let usage = &evs[0].1["message"]["usage"];
    assert_eq!(usage["cache_read_input_tokens"], 3);
    assert_eq!(usage["cache_creation_input_tokens"], 2);

    let mut blocks: Vec<(String, String, String)> = Vec::new();
    for (name, data) in &evs {
        match name.as_str() {
            "content_block_start" => {
                let block = &data["content_block"];
                assert_eq!(block["type"], "tool_use");
                assert_eq!(data["index"], blocks.len());
                let id = block["id"].as_str().unwrap().to_string();
                blocks.push((id, block["name"].as_str().unwrap().into(), String::new()));
            }
            "content_block_delta" => {
                assert_eq!(data["delta"]["type"], "input_json_delta");
                let i = data["index"].as_u64().unwrap() as usize;
                blocks[i].2 += data["delta"]["partial_json"].as_str().unwrap();
            }
            _ => {}
        }
    }
    let parsed: Vec<(String, String, Value)> = blocks
        .into_iter()
        .map(|(id, name, json)| (id, name, serde_json::from_str(&json).unwrap()))
        .collect();
    assert_eq!(
        parsed,
        vec![
            ("toolu_1".into(), "ls".into(), json!({})),
            ("toolu_2".into(), "read_file".into(), json!({"path": "a"})),
        ]
    );
    assert_eq!(evs[evs.len() - 2].1["delta"]["stop_reason"], "tool_use");
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_error_event_follows_message_start() {
    let server = MockServer::start().await;
    server.push(Rule::any().reply(Reply::anthropic_error_event(
        "overloaded_error",
        "Overloaded",
    )));
    let url = format!("{}/v1/messages", server.anthropic_url());
    let evs = events(&post(&url, json!({})).await.text().await.unwrap());
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[0].0, "message_start");
    assert_eq!(evs[1].0, "error");
    assert_eq!(
        evs[1].1["error"],
        json!({"type": "overloaded_error", "message": "Overloaded"})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn raw_sse_is_verbatim_and_paced() {
    let server = MockServer::start().await;
    let raw = vec!["data: {\"a\":", "1}\n\n", "data: [DONE]\n\n"];
    server.push(Rule::any().reply(Reply::raw_sse(raw.clone()).chunk_delay_ms(50)));
    let started = Instant::now();
    let body = chat(&server, json!({})).await.text().await.unwrap();
    assert_eq!(body, raw.concat());
    assert!(
        started.elapsed() >= Duration::from_millis(100),
        "two gaps of 50 ms"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn delay_holds_the_response_headers() {
    let server = MockServer::start().await;
    server.push(Rule::any().reply(Reply::text("late").delay_ms(300)));
    let started = Instant::now();
    let resp = chat(&server, json!({})).await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(text_reply(&resp.text().await.unwrap()), "late");
}

#[tokio::test(flavor = "multi_thread")]
async fn disconnect_mid_stream_ends_early_without_done() {
    let server = MockServer::start().await;
    server.push(Rule::any().reply(Reply::text("partial answer here").disconnect_after_chunks(2)));
    server.push(Rule::any().reply(Reply::text("partial answer here").reset_after_chunks(2)));

    // Clean close: whatever the client makes of it, it never sees the end of the stream.
    let body: String = chat(&server, json!({}))
        .await
        .text()
        .await
        .unwrap_or_default();
    assert!(data_lines(&body).len() <= 2);
    assert!(!body.contains("[DONE]") && !body.contains("finish_reason\":\"stop"));

    // Reset: the client gets a read error.
    let mut stream = chat(&server, json!({})).await.bytes_stream();
    let mut failed = false;
    while let Some(item) = stream.next().await {
        if item.is_err() {
            failed = true;
            break;
        }
    }
    assert!(failed, "a reset connection surfaces as an error");
}

#[tokio::test(flavor = "multi_thread")]
async fn stall_keeps_the_socket_open_until_the_client_leaves() {
    let server = MockServer::start().await;
    server.push(Rule::any().reply(Reply::text("never finished").stall_after_chunks(1)));
    let mut stream = chat(&server, json!({})).await.bytes_stream();
    let first = stream.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("\"role\":\"assistant\""));
    let next = tokio::time::timeout(Duration::from_millis(300), stream.next()).await;
    assert!(next.is_err(), "nothing arrives after the stall point");
    assert_eq!(server.in_flight(), 1);

    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.in_flight() > 0 {
        assert!(
            Instant::now() < deadline,
            "the server notices the client left"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn gate_blocks_until_opened() {
    let server = MockServer::start().await;
    let gate = server.gate();
    server.push(Rule::any().reply(Reply::text("released").wait_for(&gate)));
    let url = format!("{}/chat/completions", server.url());
    let pending = tokio::spawn(async move { post(&url, json!({})).await.text().await.unwrap() });

    server.wait_for_requests(1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!pending.is_finished(), "the reply waits for the gate");
    assert_eq!(gate.waiting(), 1);

    gate.open();
    assert_eq!(text_reply(&pending.await.unwrap()), "released");
    assert_eq!(gate.waiting(), 0);
    assert!(gate.is_open());
}

#[tokio::test(flavor = "multi_thread")]
async fn max_in_flight_counts_concurrent_requests() {
    let server = MockServer::start().await;
    let gate = server.gate();
    server.push(
        Rule::any()
            .times(5)
            .reply(Reply::text("ok").wait_for(&gate)),
    );
    let url = format!("{}/chat/completions", server.url());
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { post(&url, json!({})).await.text().await.unwrap() })
        })
        .collect();

    let deadline = Instant::now() + Duration::from_secs(10);
    while gate.waiting() < 5 {
        assert!(Instant::now() < deadline, "all five reach the gate");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(server.in_flight(), 5);
    gate.open();
    for task in tasks {
        assert_eq!(text_reply(&task.await.unwrap()), "ok");
    }
    assert_eq!(server.max_in_flight(), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn request_log_has_headers_and_parsed_bodies() {
    let server = MockServer::start().await;
    server.push(Rule::any().always().reply(Reply::text("ok")));
    let before = Instant::now();
    client()
        .post(format!("{}/chat/completions", server.url()))
        .header("Authorization", "Bearer sk-test")
        .with_json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    client()
        .post(format!("{}/v1/messages", server.anthropic_url()))
        .body("not json")
        .send()
        .await
        .unwrap();

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let first = &reqs[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/v1/chat/completions");
    assert_eq!(first.header("authorization"), Some("Bearer sk-test"));
    assert!(first
        .headers
        .iter()
        .any(|(k, v)| k == "authorization" && v == "Bearer sk-test"));
    assert_eq!(first.body["messages"][0]["content"], "hi");
    assert!(first.raw_body.contains("\"model\":\"m\""));
    assert!(first.at >= before);
    assert_eq!(reqs[1].path, "/v1/messages");
    assert_eq!(reqs[1].body, Value::Null);
    assert_eq!(reqs[1].raw_body, "not json");
    assert_eq!(server.last_request().unwrap().raw_body, "not json");
}

#[tokio::test(flavor = "multi_thread")]
async fn serves_hundreds_of_concurrent_connections() {
    let server = MockServer::start().await;
    server.push(
        Rule::any()
            .always()
            .reply(Reply::text("hi there").chunk_delay_ms(20)),
    );
    let url = format!("{}/chat/completions", server.url());
    let tasks: Vec<_> = (0..300)
        .map(|i| {
            let url = url.clone();
            tokio::spawn(async move { post(&url, json!({"i": i})).await.text().await.unwrap() })
        })
        .collect();
    for task in tasks {
        assert_eq!(text_reply(&task.await.unwrap()), "hi there");
    }
    assert_eq!(server.request_count(), 300);
    assert!(server.max_in_flight() > 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn early_client_disconnects_do_not_hurt_the_server() {
    let server = MockServer::start().await;
    server.push(
        Rule::any()
            .always()
            .reply(Reply::text("slow").chunk_delay_ms(100)),
    );
    // Connect and hang up without a request, and hang up halfway through a body.
    drop(tokio::net::TcpStream::connect(server.addr()).await.unwrap());
    {
        use tokio::io::AsyncWriteExt;
        let mut s = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
        s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 100\r\n\r\n{")
            .await
            .unwrap();
    }
    // Abandon a response mid-stream.
    let mut stream = chat(&server, json!({})).await.bytes_stream();
    stream.next().await.unwrap().unwrap();
    drop(stream);

    assert_eq!(text_reply(&text_of(&server, "still alive").await), "slow");
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_server_closes_the_port_and_open_connections() {
    let server = MockServer::start().await;
    server.push(Rule::any().reply(Reply::text("stuck").stall_after_chunks(1)));
    let addr = server.addr();
    let mut stream = chat(&server, json!({})).await.bytes_stream();
    stream.next().await.unwrap().unwrap();
    drop(server);

    // The stalled connection is aborted with the server: the client sees EOF or an error.
    let rest = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
    assert!(
        matches!(rest, Ok(None | Some(Err(_)))),
        "stalled stream ends on drop"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "the listener goes away after drop"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
