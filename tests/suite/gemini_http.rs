//! The Gemini provider end to end: the built binary against the mock's
//! `streamGenerateContent` SSE, checked through its `--json` events and the requests the
//! mock recorded.

use std::path::Path;

use serde_json::{json, Value};

use super::harness::{check_stream, deerflow, workspace, Output};
use super::openai_http::{assert_no_key, assert_no_panic, config, run, KEY};
use crate::support::{MockServer, RecordedRequest, Reply, Rule};

const STREAM_PATH: &str = "/v1beta/models/m1:streamGenerateContent?alt=sse";

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/providers/gemini/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// Every request went to the stream endpoint with the key in its header only.
fn assert_key_only_in_header(requests: &[RecordedRequest]) {
    assert!(!requests.is_empty());
    for r in requests {
        assert_eq!(r.method, "POST");
        assert!(r.path.starts_with("/v1beta/models/"), "{}", r.path);
        assert!(
            r.path.ends_with(":streamGenerateContent?alt=sse"),
            "{}",
            r.path
        );
        assert!(!r.path.contains(KEY), "{}", r.path);
        assert!(!r.raw_body.contains(KEY));
        assert_eq!(r.header("x-goog-api-key"), Some(KEY));
        for (name, value) in &r.headers {
            assert!(name == "x-goog-api-key" || !value.contains(KEY), "{name}");
        }
    }
}

/// Keys of JSON Schema that Gemini's `parameters` refuses.
fn assert_gemini_schema(schema: &Value, at: &str) {
    let Some(obj) = schema.as_object() else {
        panic!("{at}: {schema}")
    };
    for key in obj.keys() {
        assert!(
            ![
                "$schema",
                "$ref",
                "$defs",
                "additionalProperties",
                "title",
                "default",
                "examples",
                "oneOf",
                "allOf",
                "const",
            ]
            .contains(&key.as_str()),
            "{at}.{key}: {schema}"
        );
    }
    if let Some(t) = obj.get("type") {
        assert!(t.is_string(), "{at}: {t}");
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            assert_gemini_schema(sub, &format!("{at}.{name}"));
        }
    }
    if let Some(items) = obj.get("items") {
        assert_gemini_schema(items, &format!("{at}[]"));
    }
}

fn declarations(r: &RecordedRequest) -> Vec<Value> {
    r.body["tools"][0]["functionDeclarations"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn is_sub(r: &RecordedRequest) -> bool {
    r.raw_body.contains("SUBTASK") && !r.raw_body.contains("LEADPROMPT")
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_round_trip_with_a_sub_agent_sends_signatures_back() {
    let server = MockServer::start().await;
    let task = json!({"description": "write the file", "prompt": "SUBTASK: write hello to out.txt",
                      "subagent_type": "general-purpose"});
    server.push(
        Rule::when(|r| r.raw_body.contains("LEADPROMPT") && !r.raw_body.contains("Task Succeeded"))
            .reply(
                Reply::gemini_calls(vec![("", "task", task.clone())])
                    .gemini_thought("I should delegate this.")
                    .gemini_signature("LEAD-SIG/1+==")
                    .usage(100, 20)
                    .gemini_thoughts_tokens(30),
            ),
    );
    server.push(
        Rule::body_contains("Task Succeeded")
            .reply(Reply::gemini_text("All done.").usage(200, 5).cached(150)),
    );
    server.push(
        Rule::when(|r| is_sub(r) && !r.raw_body.contains("functionResponse")).reply(
            Reply::gemini_calls(vec![(
                "",
                "write_file",
                json!({"path": "out.txt", "content": "hello"}),
            )])
            .gemini_thought("Writing it.")
            .gemini_signature("SUB-SIG/2")
            .usage(50, 10),
        ),
    );
    server.push(
        Rule::when(|r| is_sub(r) && r.raw_body.contains("functionResponse"))
            .reply(Reply::gemini_text("wrote it").usage(60, 3)),
    );
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "gemini",
        &server.gemini_url(),
        ", supports_thinking: true",
    );
    let out = run(&cfg, ws.path(), "LEADPROMPT: get the file written")
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_no_key(&out);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out.txt")).unwrap(),
        "hello"
    );
    assert_eq!(out.first("run_started")["model"]["provider"], "gemini");
    assert_eq!(out.completed()["final_message"], "All done.");
    assert_eq!(out.first("reasoning")["text"], "I should delegate this.");

    // A made-up call id names the task, as a provider's id would.
    let call = out.first("tool_call");
    assert_eq!(call["name"], "task");
    assert_eq!(call["arguments"], task);
    let call_id = call["call_id"].as_str().unwrap();
    assert!(call_id.starts_with("call_"), "{call_id}");
    assert_eq!(out.first("task_started")["task_id"], call_id);
    let sub_assistant = out
        .of_type("task_running")
        .into_iter()
        .find(|e| e["message"]["role"] == "assistant")
        .unwrap()
        .clone();
    assert_eq!(
        sub_assistant["message"]["tool_calls"][0]["name"],
        "write_file"
    );
    assert_eq!(sub_assistant["message"]["reasoning"], "Writing it.");

    // Usage: thoughts count as output, the cached part is reported.
    let usage: Vec<(Value, Value, Value, Value, Value)> = out
        .of_type("usage")
        .iter()
        .map(|u| {
            (
                u["caller"].clone(),
                u["input_tokens"].clone(),
                u["output_tokens"].clone(),
                u["total_tokens"].clone(),
                u["cache_read_tokens"].clone(),
            )
        })
        .collect();
    let sub = json!("subagent:general-purpose");
    assert_eq!(
        usage,
        [
            (
                json!("lead"),
                json!(100),
                json!(50),
                json!(150),
                Value::Null
            ),
            (sub.clone(), json!(50), json!(10), json!(60), Value::Null),
            (sub, json!(60), json!(3), json!(63), Value::Null),
            (json!("lead"), json!(200), json!(5), json!(205), json!(150)),
        ]
    );
    assert_eq!(out.completed()["usage"]["total_tokens"], 478);

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert_key_only_in_header(&requests);
    assert!(requests.iter().all(|r| r.path == STREAM_PATH));
    let lead: Vec<&RecordedRequest> = requests.iter().filter(|r| !is_sub(r)).collect();
    let subs: Vec<&RecordedRequest> = requests.iter().filter(|r| is_sub(r)).collect();
    assert_eq!((lead.len(), subs.len()), (2, 2));

    // Thinking is on: thought summaries are asked for.
    assert_eq!(
        lead[0].body["generationConfig"]["thinkingConfig"],
        json!({"includeThoughts": true})
    );
    let names: Vec<String> = declarations(lead[0])
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        names.iter().any(|n| n == "task") && names.iter().any(|n| n == "read_file"),
        "{names:?}"
    );
    for r in &requests {
        for d in declarations(r) {
            if let Some(p) = d.get("parameters") {
                assert_gemini_schema(p, d["name"].as_str().unwrap());
            }
        }
    }
    assert!(lead[0].body["systemInstruction"]["parts"][0]["text"]
        .as_str()
        .is_some_and(|t| !t.is_empty()));

    // The second lead request: the call with its signature, byte for byte, then the
    // response by name (no id: the API gave none).
    let contents = &lead[1].body["contents"];
    assert_eq!(contents[0]["role"], "user");
    assert_eq!(
        contents[1],
        json!({"role": "model", "parts": [
            {"functionCall": {"name": "task", "args": task}, "thoughtSignature": "LEAD-SIG/1+=="},
        ]})
    );
    assert!(lead[1]
        .raw_body
        .contains(r#""thoughtSignature":"LEAD-SIG/1+==""#));
    let response = &contents[2]["parts"][0]["functionResponse"];
    assert_eq!(contents[2]["role"], "user");
    assert_eq!(response["name"], "task");
    assert!(response.get("id").is_none());
    assert!(response["response"]["result"]
        .as_str()
        .unwrap()
        .starts_with("Task Succeeded. Result: wrote it"));

    // The sub-agent's own second request carries its own signature back.
    let sub_contents = &subs[1].body["contents"];
    assert_eq!(sub_contents[1]["parts"][0]["thoughtSignature"], "SUB-SIG/2");
    assert_eq!(
        sub_contents[2]["parts"][0]["functionResponse"],
        json!({"name": "write_file", "response": {"result": "OK"}})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_3_call_ids_are_kept_and_parallel_responses_answer_them() {
    let server = MockServer::start().await;
    server.push(
        Rule::when(|r| !r.raw_body.contains("functionResponse")).reply(
            Reply::gemini_calls(vec![
                ("id-b", "read_file", json!({"path": "b.txt"})),
                ("id-a", "read_file", json!({"path": "a.txt"})),
            ])
            .gemini_signature("SIG"),
        ),
    );
    server.push(Rule::any().reply(Reply::gemini_text("a and b")));
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "A").unwrap();
    std::fs::write(ws.path().join("b.txt"), "B").unwrap();
    let cfg = config(ws.path(), "gemini", &server.gemini_url(), "");
    let out = run(&cfg, ws.path(), "read both").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let ids: Vec<&str> = out
        .of_type("tool_call")
        .iter()
        .map(|c| c["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["id-b", "id-a"]);
    let second = &server.requests()[1].body["contents"];
    assert_eq!(
        second[1]["parts"],
        json!([
            {"functionCall": {"name": "read_file", "args": {"path": "b.txt"}, "id": "id-b"},
             "thoughtSignature": "SIG"},
            {"functionCall": {"name": "read_file", "args": {"path": "a.txt"}, "id": "id-a"}},
        ])
    );
    let results: Vec<(&str, &str)> = second[2]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let r = &p["functionResponse"];
            (
                r["id"].as_str().unwrap(),
                r["response"]["result"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(results, [("id-b", "B"), ("id-a", "A")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_429_is_retried_and_max_tokens_is_reported() {
    let server = MockServer::start().await;
    server.push_reply(Reply::status(429).body(fixture("error_429_resource_exhausted.json")));
    server.push_reply(Reply::raw_sse(vec![fixture("stream_max_tokens.sse")]));
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "gemini",
        &server.gemini_url(),
        ", max_tokens: 50",
    );
    let out = run(&cfg, ws.path(), "list every US state").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut warnings = out.of_type("warning");
    // The 429's `rate_limited` (§15) is not what this test is about.
    warnings.retain(|w| w["code"] != "rate_limited");
    assert_eq!(warnings[0]["code"], "model_retry");
    assert_eq!(warnings[0]["status"], 429);
    assert!(warnings[0]["message"]
        .as_str()
        .unwrap()
        .contains("Resource exhausted. Please try again later."));
    assert_eq!(warnings[1]["code"], "output_truncated");
    assert!(warnings[1]["message"]
        .as_str()
        .unwrap()
        .contains("MAX_TOKENS"));
    assert_eq!(out.completed()["final_message"], "Here are all 50 U.S.");
    let usage = out.first("usage");
    assert_eq!(
        (
            &usage["input_tokens"],
            &usage["output_tokens"],
            &usage["total_tokens"]
        ),
        (&json!(9), &json!(48), &json!(57))
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_key_only_in_header(&requests);
    assert_eq!(requests[1].body["generationConfig"]["maxOutputTokens"], 50);
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_safety_stops_run_no_calls() {
    let server = MockServer::start().await;
    server.push(
        Rule::when(|r| !r.raw_body.contains("functionResponse")).reply(
            Reply::gemini_calls(vec![(
                "",
                "write_file",
                json!({"path": "bad.txt", "content": "x"}),
            )])
            .gemini_finish("SAFETY")
            .usage(20, 4),
        ),
    );
    let ws = workspace();
    let cfg = config(ws.path(), "gemini", &server.gemini_url(), "");
    let out = run(&cfg, ws.path(), "do it").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.of_type("tool_call").is_empty());
    assert!(!ws.path().join("bad.txt").exists());
    let warning = out.first("warning");
    assert_eq!(warning["code"], "content_filtered");
    assert!(warning["message"].as_str().unwrap().contains("SAFETY"));
    assert_eq!(server.request_count(), 1);

    // A prompt refused before any candidate is a safety stop too.
    let server = MockServer::start().await;
    server.push_reply(Reply::gemini_blocked("PROHIBITED_CONTENT").usage(12, 0));
    let cfg = config(ws.path(), "gemini", &server.gemini_url(), "");
    let out = run(&cfg, ws.path(), "do it").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.first("warning")["code"], "content_filtered");
    assert_eq!(out.first("usage")["input_tokens"], 12);
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_400_is_final_and_the_key_never_shown() {
    let server = MockServer::start().await;
    let body = json!({"error": {"code": 400,
        "message": format!("API key not valid: {KEY}.\nPlease pass a valid API key."),
        "status": "INVALID_ARGUMENT"}});
    server.push(
        Rule::any()
            .always()
            .reply(Reply::status(400).body(body.to_string())),
    );
    let ws = workspace();
    let cfg = config(ws.path(), "gemini", &server.gemini_url(), "");
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_no_key(&out);
    assert_no_panic(&out);
    assert_eq!(server.request_count(), 1);
    let error = out.completed()["error"].as_str().unwrap();
    assert!(
        error.contains("gemini returned HTTP 400: API key not valid: [redacted]."),
        "{error}"
    );
    assert!(out.of_type("warning").is_empty());
}

fn deerflow_entry(dir: &Path) -> std::path::PathBuf {
    // DeerFlow's config.example.yaml entry, uncommented as it is.
    let text = "models:
  - name: gemini-2.5-pro
    display_name: Gemini 2.5 Pro
    use: langchain_google_genai:ChatGoogleGenerativeAI
    model: gemini-2.5-pro
    gemini_api_key: $GEMINI_API_KEY
    timeout: 600.0
    max_retries: 2
    max_tokens: 8192
    context_window: 1048576
    supports_vision: true
";
    let path = dir.join("config.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn deerflow_s_gemini_entry_checks_and_runs() {
    let server = MockServer::start().await;
    server.push_reply(Reply::gemini_text("Hello from Gemini.").usage(7, 4));
    let ws = workspace();
    let cfg = deerflow_entry(ws.path());
    let cfg_arg = cfg.to_str().unwrap();

    let check = deerflow(["-c", cfg_arg, "config", "check"])
        .env("GEMINI_API_KEY", KEY)
        .text()
        .await;
    assert_eq!(check.code, 0, "{}{}", check.stdout, check.stderr);
    assert!(!check.stderr.contains("not supported"), "{}", check.stderr);
    // `supports_vision` is read (contract §14), not ignored.
    assert!(
        !check.stderr.contains("supports_vision"),
        "{}",
        check.stderr
    );
    // Without its key: a warning, and the check still passes.
    let unset = deerflow(["-c", cfg_arg, "config", "check"]).text().await;
    assert_eq!(unset.code, 0, "{}", unset.stderr);
    assert!(unset.stderr.contains("GEMINI_API_KEY"), "{}", unset.stderr);

    let out = deerflow([
        "-c",
        cfg_arg,
        "run",
        "--json",
        "-C",
        ws.path().to_str().unwrap(),
        "hi",
    ])
    .env("GEMINI_API_KEY", KEY)
    .env("GEMINI_BASE_URL", &server.gemini_url())
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_no_key(&out);
    let model = &out.first("run_started")["model"];
    assert_eq!(
        (&model["name"], &model["provider"], &model["model"]),
        (
            &json!("gemini-2.5-pro"),
            &json!("gemini"),
            &json!("gemini-2.5-pro")
        )
    );
    assert_eq!(out.completed()["final_message"], "Hello from Gemini.");
    let requests = server.requests();
    assert_key_only_in_header(&requests);
    assert_eq!(
        requests[0].path,
        "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        requests[0].body["generationConfig"]["maxOutputTokens"],
        8192
    );
    // Not a thinking model as configured: no thinking config.
    assert!(requests[0].body["generationConfig"]
        .get("thinkingConfig")
        .is_none());

    // The hosted API without a key is a configuration error before the run.
    let missing = deerflow([
        "-c",
        cfg_arg,
        "run",
        "--json",
        "-C",
        ws.path().to_str().unwrap(),
        "hi",
    ])
    .output()
    .await;
    assert_eq!(missing.code, 78, "{}", missing.stderr);
    assert!(missing.stdout.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_model_from_the_command_line_reads_the_environment() {
    let server = MockServer::start().await;
    server.push_reply(Reply::gemini_text("ok").usage(1, 1));
    let ws = workspace();
    let ws_arg = ws.path().to_str().unwrap();
    let out = deerflow([
        "run",
        "--json",
        "-m",
        "gemini:gemini-2.5-flash",
        "-C",
        ws_arg,
        "hi",
    ])
    .env("GEMINI_API_KEY", KEY)
    .env(
        "GEMINI_BASE_URL",
        &format!("{}/v1beta/", server.gemini_url()),
    )
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.first("run_started")["model"]["name"],
        "gemini:gemini-2.5-flash"
    );
    assert_eq!(
        server.requests()[0].path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_key_only_in_header(&server.requests());
    // The hosted default needs the key.
    let out = deerflow([
        "run",
        "--json",
        "-m",
        "gemini:gemini-2.5-flash",
        "-C",
        ws_arg,
        "hi",
    ])
    .output()
    .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stderr.contains("GEMINI_API_KEY"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_gemini_run_keeps_its_signatures_and_replays() {
    let server = MockServer::start().await;
    server.push(
        Rule::when(|r| !r.raw_body.contains("functionResponse")).reply(
            Reply::gemini_calls(vec![(
                "",
                "write_file",
                json!({"path": "note.txt", "content": "hi"}),
            )])
            .gemini_thought("Plan: write.")
            .gemini_signature("REC-SIG-1"),
        ),
    );
    server.push(
        Rule::any().reply(
            Reply::gemini_text("Written.")
                .gemini_signature("REC-SIG-2")
                .usage(30, 2),
        ),
    );
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "gemini",
        &server.gemini_url(),
        ", supports_thinking: true",
    );
    let tape = ws.path().join("tape.json");
    let ws_arg = ws.path().to_str().unwrap();
    let cfg_arg = cfg.to_str().unwrap();
    let recorded = deerflow([
        "-c",
        cfg_arg,
        "run",
        "--json",
        "--record",
        tape.to_str().unwrap(),
        "-C",
        ws_arg,
        "note",
    ])
    .json()
    .await;
    assert_eq!(recorded.code, 0, "{}", recorded.stderr);
    let cassette: Value = serde_json::from_str(&std::fs::read_to_string(&tape).unwrap()).unwrap();
    let lead = &cassette["lead"];
    assert_eq!(
        lead[0]["tool_calls"][0]["extra"],
        json!({"thoughtSignature": "REC-SIG-1"})
    );
    assert_eq!(lead[0]["reasoning"], "Plan: write.");
    assert_eq!(
        lead[1]["reasoning_blocks"],
        json!([
            {"type": "gemini_part", "part": {"text": "Written."}},
            {"type": "gemini_part", "part": {"text": "", "thoughtSignature": "REC-SIG-2"}},
        ])
    );
    // What went back to the API on the second call.
    assert_eq!(
        server.requests()[1].body["contents"][1]["parts"][0]["thoughtSignature"],
        "REC-SIG-1"
    );

    std::fs::remove_file(ws.path().join("note.txt")).unwrap();
    let replayed: Output = deerflow([
        "run",
        "--json",
        "-m",
        &format!("replay:{}", tape.display()),
        "-C",
        ws_arg,
        "note",
    ])
    .output()
    .await;
    check_stream(&replayed);
    assert_eq!(replayed.code, 0, "{}", replayed.stderr);
    assert_eq!(replayed.types(), recorded.types());
    assert_eq!(replayed.first("reasoning")["text"], "Plan: write.");
    assert_eq!(
        replayed.first("tool_call")["call_id"],
        recorded.first("tool_call")["call_id"]
    );
    assert_eq!(replayed.completed()["final_message"], "Written.");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("note.txt")).unwrap(),
        "hi"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_3_gets_the_output_schema_natively() {
    let server = MockServer::start().await;
    server.push_reply(Reply::gemini_text("{\"n\": 3}").usage(5, 3));
    let ws = workspace();
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}},
                        "required": ["n"], "additionalProperties": false});
    let schema_file = ws.path().join("answer.json");
    std::fs::write(&schema_file, schema.to_string()).unwrap();
    let cfg = ws.path().join("config.yaml");
    std::fs::write(
        &cfg,
        format!(
            "models:\n  - {{name: g3, use: gemini, model: gemini-3-flash-preview, base_url: '{}', api_key: {KEY}}}\n",
            server.gemini_url()
        ),
    )
    .unwrap();
    let out = deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "--output-schema",
        schema_file.to_str().unwrap(),
        "-C",
        ws.path().to_str().unwrap(),
        "count",
    ])
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["final_output"], json!({"n": 3}));
    let generation = &server.requests()[0].body["generationConfig"];
    assert_eq!(generation["responseMimeType"], "application/json");
    // The schema as the file holds it: responseJsonSchema takes JSON Schema.
    assert_eq!(generation["responseJsonSchema"], schema);
}
