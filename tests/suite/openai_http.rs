//! The OpenAI-compatible provider end to end: the built binary against the scripted mock
//! server (and verbatim llama-server captures), checked through its `--json` event stream
//! and the requests the mock recorded.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::harness::{check_stream, deerflow, workspace, Output, Run};
use crate::support::{MockServer, RecordedRequest, Reply};

pub const KEY: &str = "sk-test-SECRET";

/// Writes `config.yaml` into `dir` with one model named `mock` and returns its path.
/// `extra` is appended to the model's flow mapping (`", max_retries: 0"`).
pub fn config(dir: &Path, provider: &str, base_url: &str, extra: &str) -> PathBuf {
    let path = dir.join("config.yaml");
    let text = format!(
        "models:\n  - {{name: mock, use: {provider}, model: m1, base_url: \"{base_url}\", api_key: {KEY}{extra}}}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `deerflow -c CONFIG run --json -C WS PROMPT`.
pub fn run(cfg: &Path, ws: &Path, prompt: &str) -> Run {
    deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-C",
        ws.to_str().unwrap(),
        prompt,
    ])
}

/// The key must never leak, whatever happened.
pub fn assert_no_key(out: &Output) {
    assert!(!out.stdout.contains(KEY), "key in stdout:\n{}", out.stdout);
    assert!(!out.stderr.contains(KEY), "key in stderr:\n{}", out.stderr);
}

/// No panic message on stderr.
pub fn assert_no_panic(out: &Output) {
    assert!(
        !out.stderr.contains("panicked"),
        "panic in stderr:\n{}",
        out.stderr
    );
}

/// The `messages` of a recorded chat request.
fn messages(req: &RecordedRequest) -> Vec<Value> {
    req.body["messages"].as_array().cloned().unwrap_or_default()
}

/// Reads a llama-server capture from tests/fixtures.
macro_rules! llama {
    ($name:literal) => {
        std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/llama-server/",
            $name
        ))
        .expect("fixture")
    };
}
pub(crate) use llama;

#[tokio::test(flavor = "multi_thread")]
async fn openai_text_answer_reports_exact_usage() {
    let server = MockServer::start().await;
    server.push_reply(
        Reply::text("Hello from the mock.")
            .usage(120, 7)
            .cached(100),
    );
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let start = Instant::now();
    let out = run(&cfg, ws.path(), "say hi").output().await;
    let wall = start.elapsed();
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The process exits promptly after `run_completed` (it once lingered 2 s waiting for
    // an event sink the sub-agent scheduler still held).
    let run_ms = out.completed()["duration_ms"].as_u64().unwrap();
    assert!(
        wall < Duration::from_millis(run_ms + 1000),
        "exited {wall:?} after start, run took {run_ms} ms"
    );
    assert_eq!(
        out.types(),
        ["run_started", "usage", "message", "run_completed"]
    );
    let started = out.first("run_started");
    assert_eq!(started["model"]["name"], "mock");
    assert_eq!(started["model"]["provider"], "openai");
    assert_eq!(started["model"]["model"], "m1");
    assert_eq!(out.first("message")["text"], "Hello from the mock.");
    let u = out.first("usage");
    assert_eq!(u["caller"], "lead");
    assert_eq!(u["model"], "mock");
    assert_eq!(u["input_tokens"], 120);
    assert_eq!(u["output_tokens"], 7);
    assert_eq!(u["total_tokens"], 127);
    assert_eq!(u["cache_read_tokens"], 100);
    assert_eq!(u["reported"], true);
    let done = out.completed();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["final_message"], "Hello from the mock.");
    assert_eq!(done["turns"], 1);
    let usage = &done["usage"];
    assert_eq!(
        (
            usage["input_tokens"].as_u64(),
            usage["output_tokens"].as_u64(),
            usage["total_tokens"].as_u64()
        ),
        (Some(120), Some(7), Some(127))
    );
    assert_eq!(usage["lead"]["total_tokens"], 127);
    assert_eq!(usage["subagents"]["total_tokens"], 0);
    let by_model = usage["by_model"].as_object().unwrap();
    assert_eq!(by_model.keys().collect::<Vec<_>>(), ["mock"]);
    assert_eq!(by_model["mock"]["input_tokens"], 120);
    assert_eq!(by_model["mock"]["output_tokens"], 7);
    assert_eq!(server.request_count(), 1);
    assert_eq!(server.requests()[0].path, "/v1/chat/completions");
    assert_no_key(&out);
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_model_named_by_provider_prefix_from_env() {
    let server = MockServer::start().await;
    server.push_reply(Reply::text("env works").usage(3, 2));
    let ws = workspace();
    let out = deerflow([
        "run",
        "--json",
        "--model",
        "openai:m1",
        "-C",
        ws.path().to_str().unwrap(),
        "hi",
    ])
    .env("OPENAI_BASE_URL", &server.url())
    .env("OPENAI_API_KEY", KEY)
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.first("message")["text"], "env works");
    assert_eq!(out.first("usage")["model"], "openai:m1");
    assert_eq!(
        out.completed()["usage"]["by_model"]["openai:m1"]["total_tokens"],
        5
    );
    let req = server.last_request().unwrap();
    assert_eq!(req.body["model"], "m1");
    assert_eq!(req.header("authorization"), Some("Bearer sk-test-SECRET"));
    assert_no_key(&out);
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_tool_round_trip_sends_calls_and_results_back() {
    let server = MockServer::start().await;
    server.push_reply(
        Reply::tool_calls(vec![(
            "call_w1",
            "write_file",
            json!({"path": "out/a.txt", "content": "alpha\nbeta\n"}),
        )])
        .usage(50, 10),
    );
    server.push_reply(
        Reply::tool_calls(vec![("call_r1", "read_file", json!({"path": "out/a.txt"}))])
            .usage(70, 8),
    );
    server.push_reply(Reply::text("The file says alpha, beta.").usage(90, 6));
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "openai",
        &server.url(),
        ", max_tokens: 321, temperature: 0.25",
    );
    let out = run(&cfg, ws.path(), "write then read").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out/a.txt")).unwrap(),
        "alpha\nbeta\n"
    );
    let calls = out.of_type("tool_call");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["call_id"], "call_w1");
    assert_eq!(calls[0]["name"], "write_file");
    assert_eq!(
        calls[0]["arguments"],
        json!({"path": "out/a.txt", "content": "alpha\nbeta\n"})
    );
    let results = out.of_type("tool_result");
    assert_eq!(results.len(), 2);
    assert_eq!(
        (&results[0]["call_id"], &results[0]["status"]),
        (&json!("call_w1"), &json!("ok"))
    );
    assert_eq!(results[1]["call_id"], "call_r1");
    assert!(
        results[1]["output"].as_str().unwrap().contains("beta"),
        "{}",
        results[1]
    );
    assert_eq!(out.completed()["turns"], 3);
    assert_eq!(out.completed()["usage"]["total_tokens"], 60 + 78 + 96);
    assert_eq!(
        out.completed()["usage"]["by_model"]["mock"]["input_tokens"],
        210
    );

    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    for req in &reqs {
        assert_eq!(req.method, "POST");
        assert_eq!(req.path, "/v1/chat/completions");
        assert_eq!(req.header("authorization"), Some("Bearer sk-test-SECRET"));
        assert_eq!(req.body["model"], "m1");
        assert_eq!(req.body["stream"], true);
        assert_eq!(req.body["stream_options"]["include_usage"], true);
        assert_eq!(req.body["max_tokens"], 321);
        assert_eq!(req.body["temperature"], 0.25);
        let tools = req.body["tools"].as_array().expect("tools");
        let find = |name: &str| {
            tools
                .iter()
                .find(|t| t["function"]["name"] == name)
                .unwrap_or_else(|| panic!("no tool {name} in {tools:?}"))
        };
        for name in ["write_file", "read_file", "ls"] {
            let t = find(name);
            assert_eq!(t["type"], "function");
            assert_eq!(t["function"]["parameters"]["type"], "object");
        }
        let write = &find("write_file")["function"]["parameters"];
        assert!(write["properties"]["path"].is_object(), "{write}");
        assert!(write["properties"]["content"].is_object(), "{write}");
    }

    // The second request carries the first exchange: the assistant's call and its result.
    let msgs = messages(&reqs[1]);
    let user = msgs.iter().position(|m| m["role"] == "user").unwrap();
    assert!(msgs[user]["content"]
        .as_str()
        .unwrap()
        .contains("write then read"));
    let assistant = &msgs[user + 1];
    assert_eq!(assistant["role"], "assistant");
    let call = &assistant["tool_calls"][0];
    assert_eq!(call["id"], "call_w1");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "write_file");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        args,
        json!({"path": "out/a.txt", "content": "alpha\nbeta\n"})
    );
    let tool = &msgs[user + 2];
    assert_eq!(tool["role"], "tool");
    assert_eq!(tool["tool_call_id"], "call_w1");
    assert_eq!(tool["content"], "OK");
    assert_eq!(msgs.len(), user + 3, "{msgs:#?}");

    // The third request carries read_file's output under its call id.
    let msgs = messages(&reqs[2]);
    let tool = msgs.last().unwrap();
    assert_eq!(tool["role"], "tool");
    assert_eq!(tool["tool_call_id"], "call_r1");
    assert!(
        tool["content"].as_str().unwrap().contains("alpha\nbeta"),
        "{tool}"
    );
    assert_no_key(&out);
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_429_with_retry_after_is_retried_once() {
    let server = MockServer::start().await;
    server.push_reply(
        Reply::status(429)
            .body(r#"{"error":{"message":"Rate limit reached, slow down"}}"#)
            .header("Retry-After", "1"),
    );
    server.push_reply(Reply::text("after the wait").usage(5, 5));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let warnings = out.of_type("warning");
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    // The 429 halves the model's requests in flight (one, so 1) and pauses its calls (§15).
    assert_eq!(warnings[0]["code"], "rate_limited");
    assert_eq!(
        (&warnings[0]["model"], &warnings[0]["concurrency"]),
        (&serde_json::json!("mock"), &serde_json::json!(1))
    );
    let w = warnings[1];
    assert_eq!(w["code"], "model_retry");
    assert_eq!(w["attempt"], 1);
    assert_eq!(w["delay_ms"], 1000);
    assert_eq!(w["status"], 429);
    assert!(w["message"].as_str().unwrap().contains("slow down"), "{w}");
    assert_eq!(out.first("message")["text"], "after the wait");
    assert_eq!(out.completed()["status"], "completed");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at.duration_since(reqs[0].at);
    assert!(gap >= Duration::from_millis(950), "retried after {gap:?}");
    assert!(gap < Duration::from_secs(3), "retried after {gap:?}");
    // The same request body both times.
    assert_eq!(reqs[0].body, reqs[1].body);
    assert_no_key(&out);
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_400_is_not_retried() {
    let server = MockServer::start().await;
    server.push_reply(Reply::status(400).body(
        r#"{"error":{"message":"Invalid 'messages': bad role","type":"invalid_request_error"}}"#,
    ));
    server.push_reply(Reply::text("must not be used"));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.of_type("warning").is_empty());
    let done = out.completed();
    assert_eq!(done["status"], "failed");
    let err = done["error"].as_str().unwrap();
    assert!(err.contains("400"), "{err}");
    assert!(err.contains("Invalid 'messages': bad role"), "{err}");
    // Give a (wrong) retry time to show up before counting.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.request_count(), 1);
    assert_no_key(&out);
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_persistent_500_fails_after_three_retries() {
    let server = MockServer::start().await;
    server.push(
        crate::support::Rule::any()
            .always()
            .reply(Reply::status(500).body(r#"{"error":{"message":"upstream exploded"}}"#)),
    );
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let start = Instant::now();
    let out = run(&cfg, ws.path(), "hi").json().await;
    let took = start.elapsed();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(server.request_count(), 4);
    let warnings = out.of_type("warning");
    assert_eq!(
        warnings
            .iter()
            .map(|w| w["attempt"].clone())
            .collect::<Vec<_>>(),
        [json!(1), json!(2), json!(3)]
    );
    for w in &warnings {
        assert_eq!(w["code"], "model_retry");
        assert_eq!(w["status"], 500);
        assert!(w["delay_ms"].as_u64().unwrap() <= 2500, "{w}");
    }
    let done = out.completed();
    assert_eq!(done["status"], "failed");
    assert_eq!(done["exit_code"], 1);
    let err = done["error"].as_str().unwrap();
    assert!(
        err.contains("500") && err.contains("upstream exploded"),
        "{err}"
    );
    assert!(out.of_type("message").is_empty());
    assert_no_key(&out);
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_connection_refused_fails_fast_with_null_status() {
    // Bind and drop: nothing listens on that port afterwards.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "openai",
        &format!("http://127.0.0.1:{port}/v1"),
        "",
    );
    let start = Instant::now();
    let out = run(&cfg, ws.path(), "hi").json().await;
    let took = start.elapsed();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let warnings = out.of_type("warning");
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    for w in &warnings {
        assert_eq!(w["code"], "model_retry");
        assert!(w["status"].is_null(), "{w}");
        assert!(w.get("status").is_some(), "status must be present: {w}");
    }
    let done = out.completed();
    assert_eq!(done["status"], "failed");
    let err = done["error"].as_str().unwrap();
    assert!(err.contains(&port.to_string()), "{err}");
    assert!(err.to_lowercase().contains("refused"), "{err}");
    assert_no_key(&out);
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_api_key_never_printed() {
    // A server that echoes the key back in its error, as some proxies do.
    let server = MockServer::start().await;
    server.push_reply(Reply::status(401).body(format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY}. Check it."}}}}"#
    )));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let err = out.completed()["error"].as_str().unwrap().to_string();
    assert!(err.contains("Incorrect API key provided"), "{err}");
    assert_no_key(&out);
    // The server did receive the key.
    assert_eq!(
        server.last_request().unwrap().header("authorization"),
        Some("Bearer sk-test-SECRET")
    );

    // Logs at the most verbose level must not show it either, on success or failure.
    server.push_reply(Reply::text("fine").usage(1, 1));
    server.push_reply(Reply::status(403).body(format!(
        r#"{{"error":{{"message":"key {KEY} is not allowed"}}}}"#
    )));
    for expected in [0, 1] {
        let out = run(&cfg, ws.path(), "hi")
            .env("RUST_LOG", "trace")
            .env("DEERFLOW_LOG", "trace")
            .output()
            .await;
        assert_eq!(out.code, expected, "{}", out.stderr);
        assert_no_key(&out);
    }

    for args in [
        vec!["config", "show"],
        vec!["config", "show", "--json"],
        vec!["config", "check"],
        vec!["config", "check", "--json"],
        vec!["agents", "--json"],
    ] {
        let mut full = vec!["-c", cfg.to_str().unwrap()];
        full.extend(args.iter().copied());
        // Not `.output()`: that parses `{` lines as events, and these print other JSON.
        let out = deerflow(full)
            .env("RUST_LOG", "trace")
            .command()
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stdout.contains(KEY), "{args:?} stdout:\n{stdout}");
        assert!(!stderr.contains(KEY), "{args:?} stderr:\n{stderr}");
        if args[1] == "show" {
            assert!(stdout.contains("m1"), "{args:?}: {stdout}");
            assert!(stdout.contains("api_key"), "{args:?}: {stdout}");
        }
    }
}

// ---- llama-server captures served verbatim ----

/// Splits a capture into its SSE events, each written separately.
fn sse_chunks(text: &str) -> Vec<String> {
    text.split_inclusive("\n\n").map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn llama_toolcall_echo_stream_then_followup() {
    let server = MockServer::start().await;
    server.push_reply(Reply::raw_sse(sse_chunks(&llama!(
        "toolcall_echo_stream.sse.txt"
    ))));
    server.push_reply(Reply::raw_sse(sse_chunks(&llama!(
        "tool_result_followup.sse.txt"
    ))));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "what time is it?").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let call = out.first("tool_call");
    assert_eq!(call["call_id"], "HKIG0oOYmg5tdF8nmwDrcoeGs4YuJ6uG");
    assert_eq!(call["name"], "get_time");
    assert_eq!(call["arguments"], json!({}));
    let result = out.first("tool_result");
    assert_eq!(result["call_id"], "HKIG0oOYmg5tdF8nmwDrcoeGs4YuJ6uG");
    assert_eq!(result["status"], "error");
    let usages = out.of_type("usage");
    assert_eq!(usages.len(), 2);
    let u = usages[0];
    assert_eq!(
        (
            u["input_tokens"].as_u64(),
            u["output_tokens"].as_u64(),
            u["total_tokens"].as_u64(),
            u["cache_read_tokens"].as_u64()
        ),
        (Some(216), Some(26), Some(242), Some(215))
    );
    let u = usages[1];
    assert_eq!(
        (
            u["input_tokens"].as_u64(),
            u["output_tokens"].as_u64(),
            u["total_tokens"].as_u64(),
            u["cache_read_tokens"].as_u64()
        ),
        (Some(238), Some(18), Some(256), Some(174))
    );
    assert_eq!(
        out.first("message")["text"],
        "<tool_response>\n12:34\n</tool_response>"
    );
    let done = out.completed();
    assert_eq!(
        done["final_message"],
        "<tool_response>\n12:34\n</tool_response>"
    );
    assert_eq!(done["usage"]["total_tokens"], 242 + 256);
    // The error result went back under the server's call id.
    let msgs = messages(&server.requests()[1]);
    let assistant = &msgs[msgs.len() - 2];
    assert_eq!(
        assistant["tool_calls"][0]["id"],
        "HKIG0oOYmg5tdF8nmwDrcoeGs4YuJ6uG"
    );
    assert_eq!(assistant["tool_calls"][0]["function"]["arguments"], "{}");
    let tool = msgs.last().unwrap();
    assert_eq!(tool["role"], "tool");
    assert_eq!(tool["tool_call_id"], "HKIG0oOYmg5tdF8nmwDrcoeGs4YuJ6uG");
    assert!(
        tool["content"].as_str().unwrap().contains("get_time"),
        "{tool}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn llama_toolcall_args_stream_runs_read_file() {
    let server = MockServer::start().await;
    server.push_reply(Reply::raw_sse(sse_chunks(&llama!(
        "toolcall_args_stream.sse.txt"
    ))));
    server.push_reply(Reply::raw_sse(sse_chunks(&llama!(
        "chat_stream_usage.sse.txt"
    ))));
    let ws = workspace();
    std::fs::create_dir_all(ws.path().join("src")).unwrap();
    std::fs::write(
        ws.path().join("src/main.rs"),
        "fn main() { println!(\"hi\"); }\n",
    )
    .unwrap();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "read main").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let call = out.first("tool_call");
    assert_eq!(call["call_id"], "CI14PD3wfNqhlR5idWlW7fYaLyNXikDw");
    assert_eq!(call["name"], "read_file");
    assert_eq!(call["arguments"], json!({"path": "src/main.rs"}));
    let result = out.first("tool_result");
    assert_eq!(result["status"], "ok");
    assert!(
        result["output"].as_str().unwrap().contains("println!"),
        "{result}"
    );
    let usages = out.of_type("usage");
    assert_eq!(
        (
            usages[0]["input_tokens"].as_u64(),
            usages[0]["output_tokens"].as_u64(),
            usages[0]["total_tokens"].as_u64(),
            usages[0]["cache_read_tokens"].as_u64()
        ),
        (Some(239), Some(35), Some(274), Some(76))
    );
    assert_eq!(
        (
            usages[1]["input_tokens"].as_u64(),
            usages[1]["output_tokens"].as_u64(),
            usages[1]["total_tokens"].as_u64(),
            usages[1]["cache_read_tokens"].as_u64()
        ),
        (Some(38), Some(8), Some(46), Some(5))
    );
    assert_eq!(out.first("message")["text"], "I'm glad you're here!");
    assert_eq!(out.completed()["usage"]["total_tokens"], 274 + 46);
    let tool = messages(&server.requests()[1]).last().cloned().unwrap();
    assert_eq!(tool["tool_call_id"], "CI14PD3wfNqhlR5idWlW7fYaLyNXikDw");
    assert!(tool["content"].as_str().unwrap().contains("println!"));
}

#[tokio::test(flavor = "multi_thread")]
async fn llama_chat_stream_without_usage_reports_none() {
    let server = MockServer::start().await;
    server.push_reply(Reply::raw_sse(sse_chunks(&llama!(
        "chat_stream_nousage.sse.txt"
    ))));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.first("message")["text"],
        "I'm glad you're here. I'm glad you're here. What can"
    );
    let u = out.first("usage");
    assert_eq!(u["reported"], false);
    for k in [
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cache_read_tokens",
    ] {
        assert!(u[k].is_null(), "{k}: {u}");
    }
    let done = out.completed();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["usage"]["total_tokens"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn llama_nonstream_json_answer_is_accepted() {
    // A server that ignores `stream: true` and answers application/json.
    let server = MockServer::start().await;
    server.push_reply(Reply::json(
        serde_json::from_str(&llama!("chat_nonstream.json.txt")).unwrap(),
    ));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.first("message")["text"], "Hello, hello, hello!");
    let u = out.first("usage");
    assert_eq!(
        (
            u["input_tokens"].as_u64(),
            u["output_tokens"].as_u64(),
            u["total_tokens"].as_u64(),
            u["cache_read_tokens"].as_u64()
        ),
        (Some(26), Some(7), Some(33), Some(0))
    );
}

/// A usage count that is no non-negative integer is unreported for that field (`null`),
/// and a usage object without one valid count is no report at all (§12).
#[tokio::test(flavor = "multi_thread")]
async fn invalid_usage_counts_are_null_and_an_all_invalid_usage_is_unreported() {
    let server = MockServer::start().await;
    let call = json!({"index": 0, "id": "c1", "type": "function",
                      "function": {"name": "ls", "arguments": "{}"}});
    let first = json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]},
                                     "finish_reason": "tool_calls"}],
                       "usage": {"prompt_tokens": -5, "completion_tokens": 3}});
    let second = json!({"choices": [{"index": 0, "delta": {"content": "done"},
                                      "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": -5, "completion_tokens": 2.5,
                                  "total_tokens": "many"}});
    for chunk in [first, second] {
        server.push_reply(Reply::raw_sse(vec![
            format!("data: {chunk}\n\n"),
            "data: [DONE]\n\n".to_string(),
        ]));
    }
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let usages = out.of_type("usage");
    let fields = |u: &Value| {
        (
            u["input_tokens"].clone(),
            u["output_tokens"].clone(),
            u["total_tokens"].clone(),
            u["reported"].clone(),
        )
    };
    assert_eq!(
        fields(usages[0]),
        (Value::Null, json!(3), json!(3), json!(true))
    );
    assert_eq!(
        fields(usages[1]),
        (Value::Null, Value::Null, Value::Null, json!(false))
    );
    let total = &out.completed()["usage"];
    assert_eq!(
        (
            &total["input_tokens"],
            &total["output_tokens"],
            &total["total_tokens"]
        ),
        (&json!(0), &json!(3), &json!(3))
    );
}
