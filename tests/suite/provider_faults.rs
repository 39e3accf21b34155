//! Provider faults end to end: broken streams, stalls, error bodies, capped Retry-After and
//! invalid tool-call arguments, each driven through the built binary against the mock.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use super::harness::{check_stream, workspace, Output};
use super::openai_http::{assert_no_key, assert_no_panic, config, llama, run};
use crate::support::{MockServer, Reply, Rule};

/// One OpenAI SSE chunk with this delta.
fn delta(delta: Value, finish: Value) -> String {
    let chunk = json!({
        "id": "chatcmpl-fault", "object": "chat.completion.chunk", "model": "m1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {chunk}\n\n")
}

/// A failed run's error text, after the checks every failure shares.
fn failed(out: &Output) -> String {
    assert_eq!(
        out.code, 1,
        "stderr: {}\nstdout: {}",
        out.stderr, out.stdout
    );
    let done = out.completed();
    assert_eq!(done["status"], "failed");
    assert_eq!(done["exit_code"], 1);
    assert_no_panic(out);
    assert_no_key(out);
    done["error"].as_str().expect("error text").to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_sse_json_fails_with_a_clear_error() {
    let server = MockServer::start().await;
    server.push_reply(Reply::raw_sse(vec![
        delta(json!({"role": "assistant", "content": null}), Value::Null),
        "data: {not json\n\n".to_string(),
        "data: [DONE]\n\n".to_string(),
    ]));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "hi").json().await;
    let err = failed(&out);
    assert!(err.contains("malformed JSON"), "{err}");
    assert!(err.contains("{not json"), "{err}");
    // A broken stream is not retried.
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn mid_stream_disconnect_fails_cleanly() {
    let server = MockServer::start().await;
    server.push_reply(
        Reply::text("a long answer that never finishes")
            .usage(5, 5)
            .disconnect_after_chunks(2),
    );
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), ", max_retries: 0");
    let out = run(&cfg, ws.path(), "hi").json().await;
    let err = failed(&out);
    assert!(
        err.contains("stream ended before the response was complete"),
        "{err}"
    );
    assert!(out.of_type("message").is_empty(), "a partial answer leaked");
}

/// A stream that breaks off before its response is whole is retried (nothing of it was
/// emitted yet), like a connection error: the run completes on the next attempt.
#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_stream_is_retried_before_anything_was_emitted() {
    let server = MockServer::start().await;
    server.push_reply(
        Reply::text("a long answer that never finishes")
            .usage(5, 5)
            .disconnect_after_chunks(2),
    );
    server.push_reply(
        Reply::text("stalls half way")
            .usage(5, 5)
            .stall_after_chunks(2),
    );
    server.push_reply(Reply::text("whole at last").usage(5, 5));
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "openai",
        &server.url(),
        ", stream_idle_timeout: 1",
    );
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["final_message"], "whole at last");
    let retries: Vec<&Value> = out
        .of_type("warning")
        .into_iter()
        .filter(|w| w["code"] == "model_retry")
        .collect();
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert!(retries[0]["status"].is_null());
    assert_eq!(out.of_type("message").len(), 1, "no partial answer leaked");
    assert_eq!(server.request_count(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn mid_stream_reset_fails_cleanly() {
    let server = MockServer::start().await;
    server.push_reply(
        Reply::text("a long answer that never finishes")
            .usage(5, 5)
            .reset_after_chunks(2),
    );
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), ", max_retries: 0");
    let out = run(&cfg, ws.path(), "hi").json().await;
    let err = failed(&out);
    let lower = err.to_lowercase();
    assert!(
        lower.contains("connection lost mid-stream") || lower.contains("reset"),
        "{err}"
    );
    assert!(out.of_type("message").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_mid_stream_disconnect_fails_cleanly() {
    let server = MockServer::start().await;
    server.push_reply(
        Reply::anthropic_text("never finished")
            .usage(5, 5)
            .disconnect_after_chunks(3),
    );
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "anthropic",
        &server.anthropic_url(),
        ", max_retries: 0",
    );
    let out = run(&cfg, ws.path(), "hi").json().await;
    let err = failed(&out);
    assert!(
        err.contains("stream ended before the response was complete"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn stalled_stream_hits_the_idle_timeout() {
    let server = MockServer::start().await;
    server.push_reply(
        Reply::text("stalls half way")
            .usage(5, 5)
            .stall_after_chunks(2),
    );
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "openai",
        &server.url(),
        ", stream_idle_timeout: 1, max_retries: 0",
    );
    let start = Instant::now();
    let out = run(&cfg, ws.path(), "hi").json().await;
    let took = start.elapsed();
    let err = failed(&out);
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(took >= Duration::from_millis(900), "took {took:?}");
    assert!(err.contains("no data for 1 s"), "{err}");
    assert!(err.contains("stream_idle_timeout"), "{err}");
    assert!(err.contains("timed out"), "{err}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn llama_context_overflow_400_is_reported() {
    let raw = llama!("error_context_overflow.txt");
    let (head, body) = raw.split_once("\r\n\r\n").expect("head and body");
    let status: u16 = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    assert_eq!(status, 400);
    let server = MockServer::start().await;
    server.push_reply(Reply::status(status).body(body.trim_end()));
    server.push_reply(Reply::text("must not be used"));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "a very long prompt").json().await;
    let err = failed(&out);
    assert!(err.contains("exceeds the available context size"), "{err}");
    assert!(err.contains("400"), "{err}");
    assert!(out.of_type("warning").is_empty());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn html_502_body_becomes_a_short_text_excerpt() {
    let filler = "<p>lorem ipsum dolor sit amet</p>\n".repeat(200);
    let html = format!(
        "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title>\
         <style>body {{ color: red }}</style></head>\n<body>\n<center><h1>502 Bad Gateway</h1></center>\n\
         <hr><center>nginx/1.25.3</center>\n{filler}</body></html>\n"
    );
    let server = MockServer::start().await;
    server.push(
        Rule::any()
            .always()
            .reply(Reply::status(502).html_body(html)),
    );
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), ", max_retries: 0");
    let out = run(&cfg, ws.path(), "hi").json().await;
    let err = failed(&out);
    assert!(err.contains("502"), "{err}");
    assert!(err.contains("Bad Gateway"), "{err}");
    // Neither tags nor the contents of <style> reach the message.
    for tag in [
        "<html",
        "<h1>",
        "</center>",
        "<!DOCTYPE",
        "<p>",
        "color: red",
        "{",
    ] {
        assert!(!err.contains(tag), "raw HTML {tag} in: {err}");
    }
    assert!(
        err.chars().count() < 400,
        "not an excerpt: {} chars",
        err.len()
    );
    assert!(!err.contains('\n'), "{err:?}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn retry_after_is_capped_and_sigterm_ends_the_wait() {
    let server = MockServer::start().await;
    server.push(
        Rule::any().always().reply(
            Reply::status(429)
                .body(r#"{"error":{"message":"come back in an hour"}}"#)
                .header("Retry-After", "3600"),
        ),
    );
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let mut child = run(&cfg, ws.path(), "hi")
        .command()
        .spawn()
        .expect("spawn deerflow");
    let pid = child.id().expect("pid") as libc::pid_t;
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut stderr = child.stderr.take().unwrap();
    let stderr_task = tokio::spawn(async move {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s).await;
        s
    });

    // Read events until the retry warning shows up.
    let mut text = String::new();
    let warning: Value = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let mut line = String::new();
            let n = stdout.read_line(&mut line).await.unwrap();
            assert!(n > 0, "stdout ended before a warning:\n{text}");
            text.push_str(&line);
            let e: Value = serde_json::from_str(&line).unwrap();
            // The 429's `rate_limited` (§15) comes first.
            if e["type"] == "warning" && e["code"] != "rate_limited" {
                return e;
            }
        }
    })
    .await
    .expect("no model_retry warning within 10 s");
    assert_eq!(warning["code"], "model_retry");
    assert_eq!(warning["attempt"], 1);
    assert_eq!(warning["status"], 429);
    assert_eq!(warning["delay_ms"], 60_000, "{warning}");

    let sent = Instant::now();
    // SAFETY: plain kill(2) on the child we spawned and still own.
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .expect("deerflow did not stop within 5 s of SIGTERM")
        .unwrap();
    let took = sent.elapsed();
    stdout.read_to_string(&mut text).await.unwrap();
    let stderr = stderr_task.await.unwrap();
    let code = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        128 + status.signal().unwrap_or(0)
    });
    let events = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
        .collect();
    let out = Output {
        code,
        stdout: text,
        stderr,
        events,
    };
    assert_eq!(out.code, 143, "{}", out.stderr);
    assert!(took < Duration::from_secs(2), "took {took:?} after SIGTERM");
    check_stream(&out);
    let done = out.completed();
    assert_eq!(done["type"], "run_completed");
    assert_eq!(done["exit_code"], 143);
    assert_eq!(done["status"], "cancelled");
    assert_eq!(
        server.request_count(),
        1,
        "no retry before the 60 s wait ends"
    );
    assert_no_panic(&out);
    assert_no_key(&out);
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_tool_call_arguments_go_back_as_a_tool_error() {
    let server = MockServer::start().await;
    server.push_reply(Reply::raw_sse(vec![
        delta(json!({"role": "assistant", "content": null}), Value::Null),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_bad", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\":"}}]}),
            Value::Null,
        ),
        delta(json!({}), json!("tool_calls")),
        "data: [DONE]\n\n".to_string(),
    ]));
    server.push_reply(Reply::text("Sorry, let me fix that.").usage(20, 5));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "read something").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let call = out.first("tool_call");
    assert_eq!(call["call_id"], "call_bad");
    assert_eq!(call["name"], "read_file");
    assert!(call["arguments"].is_object(), "{call}");
    let result = out.first("tool_result");
    assert_eq!(result["call_id"], "call_bad");
    assert_eq!(result["status"], "error");
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"),
        "{result}"
    );
    assert_eq!(out.first("message")["text"], "Sorry, let me fix that.");
    assert_eq!(out.completed()["status"], "completed");

    // The model saw its own raw arguments and the error under its call id.
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    let assistant = &msgs[msgs.len() - 2];
    assert_eq!(assistant["tool_calls"][0]["id"], "call_bad");
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        "{\"path\":"
    );
    let tool = &msgs[msgs.len() - 1];
    assert_eq!(tool["role"], "tool");
    assert_eq!(tool["tool_call_id"], "call_bad");
    assert!(
        tool["content"].as_str().unwrap().contains("not valid JSON"),
        "{tool}"
    );
    assert_no_panic(&out);
}

/// A model that pretty-prints its arguments: they are carried as compact text, so the
/// `tool_call` event stays one NDJSON line and the model gets back the same JSON, compact.
#[tokio::test(flavor = "multi_thread")]
async fn multi_line_tool_call_arguments_stay_one_event_line() {
    let server = MockServer::start().await;
    server.push_reply(Reply::raw_sse(vec![
        delta(json!({"role": "assistant", "content": null}), Value::Null),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_ml", "type": "function",
                "function": {"name": "ls", "arguments": "{\n  \"path\" : \".\",\r\n\t\"note\": \"a  b\"\n}\n"}}]}),
            Value::Null,
        ),
        delta(json!({}), json!("tool_calls")),
        "data: [DONE]\n\n".to_string(),
    ]));
    server.push_reply(Reply::text("done").usage(20, 5));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "list").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains("\"type\":\"tool_call\""))
        .expect("a tool_call line");
    let event: Value = serde_json::from_str(line).unwrap();
    assert_eq!(event["arguments"], json!({"path": ".", "note": "a  b"}));
    assert!(
        line.contains(r#""arguments":{"path":".","note":"a  b"}"#),
        "{line}"
    );
    assert_eq!(out.first("tool_result")["status"], "ok");
    let reqs = server.requests();
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(
        msgs[msgs.len() - 2]["tool_calls"][0]["function"]["arguments"],
        r#"{"path":".","note":"a  b"}"#
    );
    assert_no_panic(&out);
}
