//! `--output-schema FILE` (contract §11) end to end: the answer is checked and retried on
//! replay cassettes, the schema reaches OpenAI as `response_format` and every lead's system
//! prompt, and a schema that does not compile stops the run before it starts.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::harness::{cassette, deerflow, workspace, Output};
use super::openai_http::{config, run};
use crate::support::{MockServer, Reply};

/// Strict-mode compatible: closed objects, every property required.
fn strict_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["pass", "fail"]},
            "reasons": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["verdict", "reasons"],
        "additionalProperties": false
    })
}

fn write_schema(dir: &Path, schema: &Value) -> PathBuf {
    let p = dir.join("verdict.schema.json");
    std::fs::write(&p, schema.to_string()).unwrap();
    p
}

/// A lead that answers with `answers`, one per turn.
fn answers(dir: &Path, answers: &[&str]) -> String {
    let lead: Vec<Value> = answers
        .iter()
        .map(|a| json!({"text": a, "usage": {"input_tokens": 10, "output_tokens": 5}}))
        .collect();
    format!(
        "replay:{}",
        cassette(dir, json!({"version": 1, "lead": lead})).display()
    )
}

/// `deerflow run --json --output-schema SCHEMA -m MODEL [extra…] PROMPT` in `ws`.
async fn run_json(ws: &Path, model: &str, extra: &[&str]) -> Output {
    let schema = write_schema(ws, &strict_schema());
    let mut args = vec![
        "run",
        "--json",
        "--output-schema",
        schema.to_str().unwrap(),
        "-m",
        model,
    ];
    args.extend_from_slice(extra);
    args.push("judge it");
    deerflow(args).cwd(ws).json().await
}

fn schema_retries(out: &Output) -> Vec<&Value> {
    out.of_type("warning")
        .into_iter()
        .filter(|w| w["code"] == "schema_retry")
        .collect()
}

const VALID: &str = r#"{"verdict": "pass", "reasons": ["tests green"]}"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_valid_answer_is_the_final_message_and_final_output() {
    let ws = workspace();
    let out = run_json(ws.path(), &answers(ws.path(), &[VALID]), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let done = out.completed();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["final_message"], VALID);
    assert_eq!(
        done["final_output"],
        json!({"verdict": "pass", "reasons": ["tests green"]})
    );
    assert_eq!(done["turns"], 1);
    assert!(schema_retries(&out).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_answer_is_unwrapped() {
    let ws = workspace();
    let fenced = format!("```json\n{VALID}\n```");
    let out = run_json(ws.path(), &answers(ws.path(), &[&fenced]), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The model's own text is reported as it was; the run's answer is the JSON alone.
    assert_eq!(out.first("message")["text"], fenced);
    assert_eq!(out.completed()["final_message"], VALID);
    assert_eq!(out.completed()["final_output"]["verdict"], "pass");
    assert!(schema_retries(&out).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_answer_is_retried_once_then_accepted() {
    let ws = workspace();
    let wrong = r#"{"verdict": "maybe", "reasons": []}"#;
    let out = run_json(ws.path(), &answers(ws.path(), &[wrong, VALID]), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let retries = schema_retries(&out);
    assert_eq!(retries.len(), 1, "{:?}", out.events);
    let msg = retries[0]["message"].as_str().unwrap();
    assert!(
        msg.contains("retry 1 of 2: /verdict: ") && msg.contains("\"maybe\""),
        "{msg}"
    );
    let done = out.completed();
    assert_eq!(done["turns"], 2, "the retry is a turn");
    assert_eq!(done["final_message"], VALID);
    assert_eq!(done["final_output"]["reasons"], json!(["tests green"]));
    // The warning comes between the two answers.
    let types = out.types();
    let warning = types.iter().position(|t| t == "warning").unwrap();
    let messages: Vec<usize> = types
        .iter()
        .enumerate()
        .filter(|(_, t)| *t == "message")
        .map(|(i, _)| i)
        .collect();
    assert!(messages[0] < warning && warning < messages[1], "{types:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn three_invalid_answers_fail_the_run_naming_the_first_violation() {
    let ws = workspace();
    let model = answers(
        ws.path(),
        &["Looks fine to me.", r#"{"verdict": "pass"}"#, "[]"],
    );
    let out = run_json(ws.path(), &model, &[]).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let done = out.completed();
    assert_eq!(done["status"], "failed");
    assert!(done["final_message"].is_null());
    assert!(done["final_output"].is_null());
    let error = done["error"].as_str().unwrap();
    assert!(
        error.starts_with(
            "the final answer does not match the output schema after 2 retries: (root): []"
        ) && error.contains("not of type \"object\""),
        "{error}"
    );
    assert_eq!(done["turns"], 3);
    assert_eq!(schema_retries(&out).len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn retries_count_against_max_turns() {
    let ws = workspace();
    let model = answers(ws.path(), &["nope", "still nope"]);
    let out = run_json(ws.path(), &model, &["--max-turns", "2"]).await;
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert_eq!(out.completed()["status"], "max_turns");
    assert_eq!(schema_retries(&out).len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn sub_agents_answer_in_prose_as_before() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
            "lead": [
                {"tool_calls": [{"id": "t1", "name": "task", "arguments": {
                    "description": "check it", "prompt": "check", "subagent_type": "general-purpose"}}]},
                {"text": VALID}
            ],
            "tasks": {"check it": [{"text": "All checks pass, no JSON here."}]}}),
    );
    let out = run_json(ws.path(), &format!("replay:{}", c.display()), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.first("task_completed")["result"],
        "All checks pass, no JSON here."
    );
    assert!(schema_retries(&out).is_empty());
    assert_eq!(out.completed()["final_output"]["verdict"], "pass");
}

#[tokio::test(flavor = "multi_thread")]
async fn plain_mode_prints_the_json_and_o_writes_it() {
    let ws = workspace();
    let schema = write_schema(ws.path(), &strict_schema());
    let model = answers(ws.path(), &[&format!("```\n{VALID}\n```")]);
    let last = ws.path().join("answer.json");
    let out = deerflow([
        "run",
        "--output-schema",
        schema.to_str().unwrap(),
        "-m",
        &model,
        "-o",
        last.to_str().unwrap(),
        "judge it",
    ])
    .cwd(ws.path())
    .output()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, format!("{VALID}\n"));
    let parsed: Value = serde_json::from_str(&out.stdout).expect("stdout is JSON");
    assert_eq!(parsed["verdict"], "pass");
    assert_eq!(std::fs::read_to_string(&last).unwrap(), VALID);
}

#[tokio::test(flavor = "multi_thread")]
async fn o_is_not_written_when_the_answer_never_validates() {
    let ws = workspace();
    let schema = write_schema(ws.path(), &strict_schema());
    let model = answers(ws.path(), &["a", "b", "c"]);
    let last = ws.path().join("answer.json");
    let out = deerflow([
        "run",
        "--output-schema",
        schema.to_str().unwrap(),
        "-m",
        &model,
        "-o",
        last.to_str().unwrap(),
        "judge it",
    ])
    .cwd(ws.path())
    .output()
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(out.stdout, "");
    assert!(!last.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schema_that_does_not_compile_is_a_usage_error_before_the_run() {
    let ws = workspace();
    let model = answers(ws.path(), &[VALID]);
    let cases: [(&str, &str, &str); 4] = [
        ("not-json.json", "{\"type\": ", "is not JSON"),
        (
            "bad-type.json",
            r#"{"type": "object", "properties": {"a": {"type": "text"}}}"#,
            "is not a valid JSON Schema (draft 2020-12): at /properties/a/type: ",
        ),
        (
            "remote.json",
            r#"{"$ref": "https://example.com/verdict.json"}"#,
            "is not a valid JSON Schema (draft 2020-12): $ref https://example.com/verdict.json \
             is outside the file",
        ),
        ("missing.json", "", "cannot be read"),
    ];
    for (name, body, why) in cases {
        let path = ws.path().join(name);
        if !body.is_empty() {
            std::fs::write(&path, body).unwrap();
        }
        let out = deerflow([
            "run",
            "--json",
            "--output-schema",
            path.to_str().unwrap(),
            "-m",
            &model,
            "judge it",
        ])
        .cwd(ws.path())
        .output()
        .await;
        assert_eq!(out.code, 2, "{name}: {}", out.stderr);
        assert_eq!(out.stdout, "", "{name}: no events");
        assert_eq!(out.stderr.lines().count(), 1, "{name}: {}", out.stderr);
        assert!(
            out.stderr.starts_with(&format!(
                "deerflow: usage error: --output-schema {} {why}",
                path.display()
            )),
            "{name}: {}",
            out.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_usage_error_in_the_schema_outranks_a_config_error() {
    let ws = workspace();
    let bad = ws.path().join("bad.json");
    std::fs::write(&bad, "[]").unwrap();
    let out = deerflow([
        "run",
        "--output-schema",
        bad.to_str().unwrap(),
        "-m",
        "no-such-model",
        "x",
    ])
    .cwd(ws.path())
    .output()
    .await;
    assert_eq!(out.code, 2, "{}", out.stderr);
}

/// The chat request's system prompt.
fn system_prompt(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_gets_the_schema_as_response_format_strict_when_it_can_be() {
    let open = json!({"type": "object", "properties": {"verdict": {"type": "string"}}});
    for (schema, strict) in [(strict_schema(), true), (open, false)] {
        let server = MockServer::start().await;
        server.push_reply(Reply::text("not json").usage(10, 2));
        server.push_reply(Reply::text(VALID).usage(20, 5));
        let ws = workspace();
        let cfg = config(ws.path(), "openai", &server.url(), "");
        let path = write_schema(ws.path(), &schema);
        let out = deerflow([
            "-c",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-C",
            ws.path().to_str().unwrap(),
            "--output-schema",
            path.to_str().unwrap(),
            "judge it",
        ])
        .json()
        .await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(schema_retries(&out).len(), 1);
        let reqs = server.requests();
        assert_eq!(reqs.len(), 2);
        for req in &reqs {
            assert_eq!(
                req.body["response_format"],
                json!({"type": "json_schema", "json_schema": {
                    "name": "verdict_schema", "schema": schema, "strict": strict}}),
            );
            assert!(
                system_prompt(&req.body).contains(&schema.to_string()),
                "the lead is told too"
            );
        }
        // The retry carries the model's answer and what is wrong with it.
        let messages = reqs[1].body["messages"].as_array().unwrap();
        let n = messages.len();
        assert_eq!(messages[n - 2]["content"], "not json");
        let feedback = messages[n - 1]["content"].as_str().unwrap();
        assert!(
            feedback.contains("- (root): the answer is not one JSON value"),
            "{feedback}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_schema_openai_gets_no_response_format() {
    let server = MockServer::start().await;
    server.push_reply(Reply::text("plain prose").usage(10, 2));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run(&cfg, ws.path(), "hi").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let req = &server.requests()[0];
    assert!(req.body.get("response_format").is_none());
    assert!(!system_prompt(&req.body).contains("Final answer format"));
    assert!(out.completed()["final_output"].is_null());
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_is_told_in_the_system_prompt() {
    let server = MockServer::start().await;
    server.push_reply(Reply::anthropic_text(VALID).usage(10, 5));
    let ws = workspace();
    let cfg = config(ws.path(), "anthropic", &server.anthropic_url(), "");
    let path = write_schema(ws.path(), &strict_schema());
    let out = deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-C",
        ws.path().to_str().unwrap(),
        "--output-schema",
        path.to_str().unwrap(),
        "judge it",
    ])
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["final_output"]["verdict"], "pass");
    let body = &server.requests()[0].body;
    // One text block, marked for the prompt cache.
    let system = body["system"][0]["text"].as_str().unwrap();
    assert!(system.contains("## Final answer format"), "{system}");
    assert!(system.contains(&strict_schema().to_string()), "{system}");
    assert!(body.get("response_format").is_none());
}
