//! The OpenAI Responses API (`use_responses_api: true`) end to end: the built binary
//! against the mock's `/responses` SSE and the recorded streams in tests/fixtures,
//! checked through the `--json` event stream and the request bodies the mock received.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::harness::{deerflow, workspace, Output};
use super::openai_http::{assert_no_key, assert_no_panic, run, KEY};
use crate::support::{MockServer, RecordedRequest, Reply, Rule};

/// A config whose one model, `mock`, talks to the Responses API at `url`; `extra` is
/// appended to the model's flow mapping.
fn config(dir: &Path, url: &str, model: &str, extra: &str) -> PathBuf {
    let path = dir.join("config.yaml");
    let text = format!(
        "models:\n  - {{name: mock, use: openai, model: {model}, base_url: \"{url}\", api_key: {KEY}, \
         use_responses_api: true{extra}}}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
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

fn input(req: &RecordedRequest) -> Vec<Value> {
    req.body["input"].as_array().cloned().unwrap_or_default()
}

/// Every request went to `/v1/responses`, statelessly.
fn assert_stateless(server: &MockServer) {
    for req in server.requests() {
        assert_eq!(req.path, "/v1/responses");
        assert_eq!(req.body["store"], json!(false), "{}", req.raw_body);
        assert_eq!(req.body["stream"], json!(true));
        assert!(req.body.get("previous_response_id").is_none());
        assert!(req.body.get("messages").is_none());
        assert_eq!(
            req.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
    }
}

/// Each `function_call_output` follows the `function_call` with its `call_id`.
fn assert_paired(items: &[Value]) {
    for (i, item) in items.iter().enumerate() {
        if item["type"] == "function_call_output" {
            let id = &item["call_id"];
            assert!(
                items[..i]
                    .iter()
                    .any(|c| c["type"] == "function_call" && c["call_id"] == *id),
                "output {id} without its call: {items:#?}"
            );
        }
    }
}

fn types_of(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|i| match i["type"].as_str() {
            Some(t) => t.to_string(),
            None => format!("message:{}", i["role"].as_str().unwrap_or("?")),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_round_trip_with_the_lead_and_a_sub_agent() {
    let server = MockServer::start().await;
    server.push(
        Rule::body_contains("Task Succeeded")
            .reply(Reply::text("The sub-agent wrote it.").usage(300, 9)),
    );
    server.push(
        Rule::body_contains("LEADPROMPT").reply(
            Reply::tool_calls(vec![(
                "call_task",
                "task",
                json!({"description": "write", "prompt": "SUBTASK: write a.txt", "subagent_type": "general-purpose"}),
            )])
            .usage(200, 30),
        ),
    );
    server.push(
        Rule::body_contains("SUBTASK")
            .reply(
                Reply::text_and_tools(
                    "Writing.",
                    vec![(
                        "call_w",
                        "write_file",
                        json!({"path": "a.txt", "content": "from the sub-agent"}),
                    )],
                )
                .responses_reasoning("The sub-agent plans.", "gAAAA-SUB==")
                .usage(100, 20),
            )
            .times(1),
    );
    server.push(Rule::body_contains("SUBTASK").reply(Reply::text("Done: a.txt").usage(150, 5)));
    let ws = workspace();
    let cfg = config(ws.path(), &server.url(), "gpt-4.1", "");
    let out = run(&cfg, ws.path(), "LEADPROMPT: delegate").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_no_key(&out);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "from the sub-agent"
    );
    assert_eq!(out.first("run_started")["model"]["provider"], "openai");
    assert_eq!(out.first("tool_call")["call_id"], "call_task");
    let running = out.of_type("task_running");
    assert_eq!(running[0]["message"]["text"], "Writing.");
    assert_eq!(running[0]["message"]["tool_calls"][0]["id"], "call_w");
    assert_eq!(running[0]["message"]["reasoning"], "The sub-agent plans.");
    // A sub-agent's reasoning is no `reasoning` event of the lead.
    assert!(out.of_type("reasoning").is_empty());
    assert_eq!(running[1]["message"]["status"], "ok");
    assert_eq!(out.first("task_completed")["result"], "Done: a.txt");
    assert_eq!(out.completed()["final_message"], "The sub-agent wrote it.");
    assert_eq!(out.of_type("usage").len(), 4);
    assert_eq!(out.completed()["usage"]["input_tokens"], 750);

    assert_eq!(server.request_count(), 4);
    assert_eq!(server.unmatched_count(), 0);
    assert_stateless(&server);
    let requests = server.requests();
    // The sub-agent's second call carries its whole history: the task, its text and call,
    // the call's output.
    let sub = requests
        .iter()
        .filter(|r| r.raw_body.contains("SUBTASK") && !r.raw_body.contains("LEADPROMPT"))
        .nth(1)
        .unwrap();
    let items = input(sub);
    assert_eq!(
        types_of(&items),
        [
            "message:user",
            "reasoning",
            "message:assistant",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(items[1]["encrypted_content"], "gAAAA-SUB==");
    assert_eq!(
        items[2],
        json!({"role": "assistant", "content": [{"type": "output_text", "text": "Writing."}],
               "id": "msg_mock_1_1"})
    );
    assert_eq!(
        items[3],
        json!({"type": "function_call", "call_id": "call_w", "name": "write_file",
               "arguments": json!({"path": "a.txt", "content": "from the sub-agent"}).to_string()})
    );
    assert_paired(&items);
    // The lead's last call: its task call and the task's result.
    let lead = requests.last().unwrap();
    let items = input(lead);
    assert_eq!(
        types_of(&items),
        ["message:user", "function_call", "function_call_output"]
    );
    assert_eq!(items[1]["call_id"], "call_task");
    assert!(items[2]["output"]
        .as_str()
        .unwrap()
        .contains("Task Succeeded"));
    // Tools are function tools, not strict (most have optional parameters).
    let tools = lead.body["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "task"));
    assert!(tools
        .iter()
        .all(|t| t["type"] == "function" && t["strict"] == false && t["parameters"].is_object()));
}

#[tokio::test(flavor = "multi_thread")]
async fn reasoning_becomes_events_and_goes_back_unchanged_in_the_exact_request_body() {
    let server = MockServer::start().await;
    let args = json!({"path": "plan.txt", "content": "step 1"});
    server.push_reply(
        Reply::tool_calls(vec![("call_1", "write_file", args.clone())])
            .responses_reasoning("Plan: write the file.", "gAAAA-ENCRYPTED-1==")
            .usage(50, 30)
            .cached(20),
    );
    server.push_reply(
        Reply::text("Written.")
            .responses_reasoning("Check: it is written.", "gAAAA-ENCRYPTED-2==")
            .usage(90, 10)
            .cached(40),
    );
    let ws = workspace();
    let cfg = config(
        ws.path(),
        &server.url(),
        "gpt-5-mini",
        ", supports_thinking: true, reasoning_effort: low, max_tokens: 2000, temperature: 0.2",
    );
    let out = run(&cfg, ws.path(), "write the plan").json().await;
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
    assert_eq!(reasoning[0]["text"], "Plan: write the file.");
    assert_eq!(reasoning[1]["text"], "Check: it is written.");
    let usage = out.of_type("usage");
    let u = |i: usize| {
        (
            usage[i]["input_tokens"].as_u64(),
            usage[i]["output_tokens"].as_u64(),
            usage[i]["total_tokens"].as_u64(),
            usage[i]["cache_read_tokens"].as_u64(),
        )
    };
    assert_eq!(u(0), (Some(50), Some(30), Some(80), Some(20)));
    assert_eq!(u(1), (Some(90), Some(10), Some(100), Some(40)));

    assert_stateless(&server);
    let requests = server.requests();
    let first = &requests[0].body;
    let second = &requests[1].body;
    let instructions = first["instructions"].clone();
    assert!(instructions.as_str().is_some_and(|s| !s.is_empty()));
    let tools = first["tools"].clone();
    let result = &second["input"][3]["output"];
    assert!(result.is_string(), "{second}");
    assert_eq!(
        *second,
        json!({
            "model": "gpt-5-mini",
            "instructions": instructions,
            "input": [
                {"role": "user", "content": "write the plan"},
                // The reasoning item as the API sent it, byte for byte.
                {"id": "rs_mock_0_0", "type": "reasoning",
                 "summary": [{"type": "summary_text", "text": "Plan: write the file."}],
                 "encrypted_content": "gAAAA-ENCRYPTED-1=="},
                {"type": "function_call", "call_id": "call_1", "name": "write_file",
                 "arguments": args.to_string()},
                {"type": "function_call_output", "call_id": "call_1", "output": result},
            ],
            "tools": tools,
            "stream": true,
            "store": false,
            "max_output_tokens": 2000,
            // gpt-5 is a reasoning model: no temperature.
            "reasoning": {"effort": "low", "summary": "auto"},
            "include": ["reasoning.encrypted_content"],
        })
    );
    assert_eq!(
        first["input"],
        json!([{"role": "user", "content": "write the plan"}])
    );
    assert!(requests[1]
        .raw_body
        .contains(r#""encrypted_content":"gAAAA-ENCRYPTED-1==""#));
}

#[tokio::test(flavor = "multi_thread")]
async fn recorded_streams_give_their_usage_cached_tokens_and_reasoning() {
    let server = MockServer::start().await;
    server.push_reply(Reply::raw_sse(fixture(
        "openai/responses_cached_tokens.sse",
    )));
    let ws = workspace();
    let cfg = config(ws.path(), &server.url(), "gpt-4o", "");
    let out = run(&cfg, ws.path(), "count").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.first("message")["text"], "2, 3, 4");
    let u = out.first("usage");
    assert_eq!(
        (
            u["input_tokens"].as_u64(),
            u["output_tokens"].as_u64(),
            u["total_tokens"].as_u64(),
            u["cache_read_tokens"].as_u64(),
            u["reported"].as_bool()
        ),
        (Some(1515), Some(8), Some(1523), Some(1390), Some(true))
    );

    server.push_reply(Reply::raw_sse(fixture(
        "openai/responses_reasoning_summary.sse",
    )));
    let cfg = config(ws.path(), &server.url(), "o4-mini", "");
    let out = run(&cfg, ws.path(), "1 + x = 10?").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.types(),
        [
            "run_started",
            "usage",
            "reasoning",
            "message",
            "run_completed"
        ]
    );
    let summary = out.first("reasoning")["text"].as_str().unwrap().to_string();
    assert!(summary.starts_with("**Solving for the number**"));
    assert_eq!(summary.chars().count(), 399);
    assert_eq!(
        out.completed()["final_message"],
        "The number is 9, since 1 + x = 10 ⇒ x = 10 − 1 = 9."
    );
    let u = out.first("usage");
    assert_eq!(
        (u["input_tokens"].as_u64(), u["output_tokens"].as_u64()),
        (Some(20), Some(166))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_response_is_retried_when_it_is_the_servers_trouble() {
    let server = MockServer::start().await;
    server.push_reply(Reply::responses_failed(
        "server_error",
        "The server had an error while processing your request.",
    ));
    server.push_reply(Reply::text("recovered").usage(5, 1));
    let ws = workspace();
    let cfg = config(ws.path(), &server.url(), "gpt-4.1", "");
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let warning = out.first("warning");
    assert_eq!(warning["code"], "model_retry");
    assert_eq!(warning["attempt"], 1);
    assert!(warning["status"].is_null());
    assert!(warning["message"]
        .as_str()
        .unwrap()
        .contains("server_error: The server had an error"));
    assert_eq!(out.completed()["final_message"], "recovered");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_response_of_the_requests_own_making_is_reported_at_once() {
    for reply in [
        Reply::responses_failed("invalid_prompt", "Invalid prompt: flagged."),
        Reply::responses_error_event("invalid_prompt", "Invalid prompt: flagged."),
    ] {
        let server = MockServer::start().await;
        server.push_reply(reply);
        server.push_reply(Reply::text("must not be used"));
        let ws = workspace();
        let cfg = config(ws.path(), &server.url(), "gpt-4.1", "");
        let out = run(&cfg, ws.path(), "hi").json().await;
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert_no_panic(&out);
        assert!(out.of_type("warning").is_empty());
        let done = out.completed();
        assert_eq!(done["status"], "failed");
        let error = done["error"].as_str().unwrap();
        assert!(
            error.contains("invalid_prompt: Invalid prompt: flagged."),
            "{error}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(server.request_count(), 1);
    }
}

/// A response cut at `max_output_tokens` while writing a call's arguments.
fn cut_call_stream() -> Vec<String> {
    let events = [
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"id": "fc_1", "type": "function_call", "status": "in_progress",
                        "arguments": "", "call_id": "call_cut", "name": "write_file"}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
               "output_index": 0, "delta": "{\"path\": \"big.txt\", \"content\": \"aaa"}),
        json!({"type": "response.incomplete", "response": {
            "id": "resp_cut", "object": "response", "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"}, "output": [],
            "usage": {"input_tokens": 10, "output_tokens": 64, "total_tokens": 74}}}),
    ];
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_incomplete_response_is_output_truncated_or_content_filtered() {
    let server = MockServer::start().await;
    server.push_reply(
        Reply::text("A partial answer")
            .responses_incomplete("max_output_tokens")
            .usage(10, 64),
    );
    let ws = workspace();
    let cfg = config(ws.path(), &server.url(), "gpt-4.1", ", max_tokens: 64");
    let out = run(&cfg, ws.path(), "write a lot").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.first("warning")["code"], "output_truncated");
    assert_eq!(out.completed()["final_message"], "A partial answer");
    assert_eq!(server.last_request().unwrap().body["max_output_tokens"], 64);

    // A call cut mid-arguments is not run; the model is told why.
    server.push_reply(Reply::raw_sse(cut_call_stream()));
    server.push_reply(Reply::text("I will write smaller pieces."));
    let out = run(&cfg, ws.path(), "write a big file").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.first("warning")["code"], "output_truncated");
    assert!(!ws.path().join("big.txt").exists());
    let result = out.first("tool_result");
    assert_eq!(result["status"], "error");
    let items = input(&server.last_request().unwrap());
    let output = items
        .iter()
        .find(|i| i["type"] == "function_call_output")
        .unwrap();
    assert_eq!(output["call_id"], "call_cut");
    assert!(output["output"]
        .as_str()
        .unwrap()
        .contains("cut off at the output limit"));
    // The cut arguments go back as they were sent.
    let call = items.iter().find(|i| i["type"] == "function_call").unwrap();
    assert_eq!(
        call["arguments"],
        "{\"path\": \"big.txt\", \"content\": \"aaa"
    );

    // A safety stop: its calls are not run.
    let before = server.request_count();
    server.push_reply(
        Reply::tool_calls(vec![(
            "call_f",
            "write_file",
            json!({"path": "f.txt", "content": "x"}),
        )])
        .responses_incomplete("content_filter"),
    );
    let out = run(&cfg, ws.path(), "do it").json().await;
    assert_eq!(out.first("warning")["code"], "content_filtered");
    assert!(out.of_type("tool_call").is_empty());
    assert!(!ws.path().join("f.txt").exists());
    assert_eq!(server.request_count(), before + 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_responses_run_replays_offline_with_the_same_events() {
    let server = MockServer::start().await;
    server.push_reply(
        Reply::tool_calls(vec![("call_1", "ls", json!({"path": "."}))])
            .responses_reasoning("Look first.", "gAAAA-REC==")
            .usage(40, 12)
            .cached(8),
    );
    server.push_reply(
        Reply::text("Nothing here.")
            .responses_reasoning("Empty.", "gAAAA-REC-2==")
            .usage(60, 4),
    );
    let ws = workspace();
    // The config and the tape live outside the workspace `ls` lists.
    let side = workspace();
    let cfg = config(
        side.path(),
        &server.url(),
        "o3",
        ", supports_thinking: true",
    );
    let tape = side.path().join("tape.json");
    let recorded = deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "--record",
        tape.to_str().unwrap(),
        "-C",
        ws.path().to_str().unwrap(),
        "what is here?",
    ])
    .json()
    .await;
    assert_eq!(recorded.code, 0, "{}", recorded.stderr);
    let cassette: Value = serde_json::from_str(&std::fs::read_to_string(&tape).unwrap()).unwrap();
    assert_eq!(
        cassette["lead"][0]["reasoning_blocks"][0]["encrypted_content"],
        "gAAAA-REC=="
    );
    let replayed = deerflow([
        "run",
        "--json",
        "-m",
        &format!("replay:{}", tape.display()),
        "-C",
        ws.path().to_str().unwrap(),
        "what is here?",
    ])
    .json()
    .await;
    assert_eq!(replayed.code, 0, "{}", replayed.stderr);
    assert_eq!(replayed.types(), recorded.types());
    let strip = |out: &Output| -> Vec<Value> {
        out.events
            .iter()
            .filter(|e| e["type"] != "run_started" && e["type"] != "run_completed")
            .map(|e| {
                let mut e = e.clone();
                for k in ["seq", "ts", "run_id", "duration_ms", "model"] {
                    e.as_object_mut().unwrap().remove(k);
                }
                e
            })
            .collect()
    };
    assert_eq!(strip(&replayed), strip(&recorded));
    assert_eq!(replayed.of_type("reasoning").len(), 2);
    assert_eq!(
        replayed.completed()["final_message"],
        recorded.completed()["final_message"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_output_schema_goes_as_the_text_format() {
    let server = MockServer::start().await;
    server.push_reply(Reply::text(r#"{"verdict": "pass"}"#));
    let ws = workspace();
    let schema = json!({"type": "object", "properties": {"verdict": {"type": "string"}},
                        "required": ["verdict"], "additionalProperties": false});
    let schema_file = ws.path().join("s.json");
    std::fs::write(&schema_file, schema.to_string()).unwrap();
    let cfg = config(ws.path(), &server.url(), "gpt-4.1", "");
    let out = deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "--output-schema",
        schema_file.to_str().unwrap(),
        "-C",
        ws.path().to_str().unwrap(),
        "judge",
    ])
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["final_output"], json!({"verdict": "pass"}));
    let body = server.last_request().unwrap().body;
    assert_eq!(body["text"]["format"]["type"], "json_schema");
    assert_eq!(body["text"]["format"]["schema"], schema);
    assert_eq!(body["text"]["format"]["strict"], true);
    assert!(body.get("response_format").is_none());
}

/// DeerFlow's own example entry, uncommented, reads as it is and talks to `/responses`.
#[tokio::test(flavor = "multi_thread")]
async fn deerflows_example_entry_uses_the_responses_api() {
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/deerflow/config.example.yaml"
    ))
    .unwrap();
    let at = example.find("  # - name: gpt-5-responses\n").unwrap();
    let entry: String = example[at..]
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(|l| format!("  {}\n", l.trim_start().trim_start_matches("# ")))
        .collect();
    assert!(entry.contains("output_version: responses/v1"), "{entry}");
    let server = MockServer::start().await;
    server.push_reply(Reply::text("hello from gpt-5").usage(3, 2));
    let ws = workspace();
    let cfg = ws.path().join("config.yaml");
    std::fs::write(&cfg, format!("models:\n{entry}")).unwrap();
    let check = deerflow(["-c", cfg.to_str().unwrap(), "config", "check"])
        .env("OPENAI_API_KEY", KEY)
        .text()
        .await;
    assert_eq!(check.code, 0, "{}", check.stderr);
    let out = deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-C",
        ws.path().to_str().unwrap(),
        "hi",
    ])
    .env("OPENAI_API_KEY", KEY)
    .env("OPENAI_BASE_URL", &server.url())
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["final_message"], "hello from gpt-5");
    // Only `display_name` and `supports_vision` are DeerFlow keys deerflow does not read.
    let ignored: Vec<&Value> = out
        .of_type("warning")
        .into_iter()
        .filter(|w| w["code"] == "config_ignored")
        .collect();
    let said = ignored
        .iter()
        .map(|w| w["message"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        !said.contains("use_responses_api") && !said.contains("output_version"),
        "{said}"
    );
    let req = server.last_request().unwrap();
    assert_eq!(req.path, "/v1/responses");
    assert_eq!(req.body["model"], "gpt-5");
    assert_eq!(req.body["include"], json!(["reasoning.encrypted_content"]));
}

/// The mock itself: one scripted OpenAI reply speaks Chat Completions or the Responses API
/// by the path it answers, with sequence numbers and SSE names like the real stream.
#[tokio::test(flavor = "multi_thread")]
async fn the_mock_speaks_the_api_of_the_path() {
    let server = MockServer::start().await;
    let reply = || Reply::text_and_tools("hi", vec![("c1", "ls", json!({"path": "."}))]);
    server.push_reply(reply().usage(7, 3).cached(2));
    server.push_reply(reply());
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let post = |path: &str| {
        client
            .post(format!("{}{path}", server.url()))
            .header("content-type", "application/json")
            .body(json!({"model": "m"}).to_string())
            .send()
    };
    let body = post("/responses").await.unwrap().text().await.unwrap();
    let events: Vec<(String, Value)> = body
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (name, data) = e.split_once('\n').unwrap();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            (name.strip_prefix("event: ").unwrap().to_string(), data)
        })
        .collect();
    for (i, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], json!(name));
        assert_eq!(data["sequence_number"], i);
    }
    let (_, last) = events.last().unwrap();
    assert_eq!(last["type"], "response.completed");
    assert_eq!(last["response"]["output"][0]["content"][0]["text"], "hi");
    assert_eq!(last["response"]["output"][1]["call_id"], "c1");
    assert_eq!(
        last["response"]["usage"]["input_tokens_details"]["cached_tokens"],
        2
    );
    let arguments: String = events
        .iter()
        .filter(|(n, _)| n == "response.function_call_arguments.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(arguments, json!({"path": "."}).to_string());
    let chat = post("/chat/completions")
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        chat.contains("\"object\":\"chat.completion.chunk\""),
        "{chat}"
    );
    assert!(chat.ends_with("data: [DONE]\n\n"));
}
