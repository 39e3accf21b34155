//! Long histories and large outputs (contract §10) through the binary: summarization on a
//! trigger and on a provider's context overflow, the delegation ledger, compaction inside a
//! sub-agent, and large tool results stored outside the workspace.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::harness::{cassette, deerflow, workspace, Output};
use crate::support::{MockServer, RecordedRequest, Reply, Rule};

/// What the built-in summary instruction says (the summary request is recognised by it).
const SUMMARY_ASK: &str = "summarizing the earlier part";

fn config(dir: &Path, server: &MockServer, extra: &str) -> PathBuf {
    let p = dir.join("deerflow.yaml");
    let yaml = format!(
        "models:\n  - {{name: lead, use: openai, model: m-lead, base_url: '{url}', api_key: sk-test}}\n{extra}",
        url = server.url()
    );
    std::fs::write(&p, yaml).unwrap();
    p
}

async fn run(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["run", "--json"];
    args.extend_from_slice(extra);
    args.push("LEADPROMPT: do the work");
    deerflow(args).cwd(dir).json().await
}

fn messages(r: &RecordedRequest) -> Vec<Value> {
    r.body["messages"].as_array().cloned().unwrap_or_default()
}

fn is_summary(r: &RecordedRequest) -> bool {
    r.raw_body.contains(SUMMARY_ASK)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trigger_compaction_sends_the_summary_with_the_next_request() {
    let server = MockServer::start().await;
    let ws = workspace();
    config(
        ws.path(),
        &server,
        "summarization:\n  trigger: [{type: tokens, value: 1000}]\n  keep: {type: messages, value: 2}\n",
    );
    server.push(
        Rule::body_contains(SUMMARY_ASK).reply(Reply::text("SUMMARY-OF-EARLIER").usage(300, 20)),
    );
    server.push(Rule::body_contains("SUMMARY-OF-EARLIER").reply(Reply::text("done").usage(400, 5)));
    server.push(Rule::any().reply(Reply::tool_calls(vec![("c1", "ls", json!({}))]).usage(500, 10)));
    server
        .push(Rule::any().reply(Reply::tool_calls(vec![("c2", "ls", json!({}))]).usage(1200, 10)));
    let out = run(ws.path(), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let c = out.first("context_compacted");
    assert_eq!(c["messages_before"], 5);
    assert_eq!(c["messages_after"], 4);
    assert_eq!(c["input_tokens_before"], 1200);
    assert_eq!(c["reason"], "trigger");
    assert!(c.get("task_id").is_none());
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    // The summary call offers no tools.
    assert!(is_summary(&reqs[2]) && reqs[2].body.get("tools").is_none());
    let last = messages(&reqs[3]);
    let roles: Vec<&str> = last.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "user", "assistant", "tool"]);
    assert_eq!(last[1]["content"], "LEADPROMPT: do the work");
    assert!(last[2]["content"]
        .as_str()
        .unwrap()
        .contains("SUMMARY-OF-EARLIER"));
    assert_eq!(last[3]["tool_calls"][0]["id"], "c2");
    assert_eq!(last[4]["tool_call_id"], "c2");
    // The summary call is the lead's: a usage event, counted in the totals, not a turn.
    let usage = out.of_type("usage");
    assert_eq!(usage.len(), 4);
    assert_eq!(usage[2]["caller"], "lead");
    assert_eq!(usage[2]["input_tokens"], 300);
    let done = out.completed();
    assert_eq!(done["turns"], 3);
    assert_eq!(done["usage"]["input_tokens"], 500 + 1200 + 300 + 400);
    assert_eq!(done["usage"]["lead"]["total_tokens"], 2400 + 45);
}

/// The body of the llama.cpp 400 recorded in tests/fixtures.
fn llama_overflow_body() -> String {
    let raw = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/llama-server/error_context_overflow.txt"
    ))
    .unwrap();
    raw.split("\r\n\r\n").nth(1).unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_llama_cpp_overflow_is_compacted_and_retried_once() {
    let server = MockServer::start().await;
    let ws = workspace();
    config(ws.path(), &server, "");
    server.push(Rule::body_contains(SUMMARY_ASK).reply(Reply::text("SHORTER").usage(50, 5)));
    server.push(Rule::body_contains("SHORTER").reply(Reply::text("recovered").usage(60, 5)));
    server
        .push(Rule::any().reply(Reply::tool_calls(vec![("c1", "ls", json!({}))]).usage(3000, 10)));
    server.push(Rule::any().reply(Reply::status(400).body(llama_overflow_body())));
    let out = run(ws.path(), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["final_message"], "recovered");
    let c = out.first("context_compacted");
    assert_eq!(c["reason"], "overflow");
    assert_eq!(c["messages_before"], 3);
    assert_eq!(c["messages_after"], 2);
    assert_eq!(c["input_tokens_before"], 3000);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    let retry = messages(&reqs[3]);
    assert_eq!(retry.len(), 3, "system, task, summary: {retry:?}");
    // No retry warning: a 400 is not retried by the provider layer.
    assert!(out
        .of_type("warning")
        .iter()
        .all(|w| w["code"] != "model_retry"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_overflow_fails_the_run_with_a_clear_error() {
    let server = MockServer::start().await;
    let ws = workspace();
    config(ws.path(), &server, "");
    server.push(Rule::body_contains(SUMMARY_ASK).reply(Reply::text("SHORTER")));
    server.push(Rule::any().reply(Reply::tool_calls(vec![("c1", "ls", json!({}))])));
    server.push(
        Rule::any()
            .times(2)
            .reply(Reply::status(400).body(llama_overflow_body())),
    );
    let out = run(ws.path(), &[]).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let done = out.completed();
    assert_eq!(done["status"], "failed");
    let err = done["error"].as_str().unwrap();
    assert!(
        err.contains("even after summarizing")
            && err.contains("exceeds the available context size"),
        "{err}"
    );
    assert_eq!(server.request_count(), 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_leads_summary_keeps_the_tasks_it_delegated() {
    let server = MockServer::start().await;
    let ws = workspace();
    config(
        ws.path(),
        &server,
        "summarization:\n  trigger: {type: messages, value: 5}\n  keep: {type: messages, value: 0}\n",
    );
    server.push(Rule::body_contains(SUMMARY_ASK).reply(Reply::text("LEAD-SUMMARY")));
    server.push(Rule::body_contains("LEAD-SUMMARY").reply(Reply::text("final")));
    for i in 1..=3 {
        server.push(
            Rule::body_contains(format!("SUBTASK {i}"))
                .reply(Reply::text(format!("RESULT {i} first line\nsecond line"))),
        );
    }
    let calls: Vec<_> = (1..=3)
        .map(|i| {
            (
                format!("t{i}"),
                "task".to_string(),
                json!({"description": format!("part {i}"), "prompt": format!("SUBTASK {i}: do it"), "subagent_type": "general-purpose"}),
            )
        })
        .collect();
    server.push(Rule::body_contains("LEADPROMPT").reply(Reply::tool_calls(calls)));
    let out = run(ws.path(), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["tasks"]["completed"], 3);
    assert_eq!(out.of_type("context_compacted").len(), 1);
    let last = server.last_request().unwrap();
    let msgs = messages(&last);
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    let summary = msgs[2]["content"].as_str().unwrap();
    assert!(summary.contains("LEAD-SUMMARY"), "{summary}");
    assert!(summary.contains("do not delegate them again"), "{summary}");
    for i in 1..=3 {
        let line = format!(
            "- description: \"part {i}\"; subagent_type: general-purpose; status: completed; result: RESULT {i} first line"
        );
        assert!(summary.contains(&line), "{line} not in {summary}");
    }
    assert!(!summary.contains("second line"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sub_agents_compaction_carries_its_task_id() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
            "lead": [{"tool_calls": [{"id": "t1", "name": "task", "arguments": {"description": "look", "prompt": "look around", "subagent_type": "general-purpose"}}]},
                     {"text": "final"}],
            "default_task": [{"tool_calls": [{"name": "ls"}]}, {"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}, {"text": "sub done"}]}),
    );
    let cfg = ws.path().join("deerflow.yaml");
    std::fs::write(
        &cfg,
        format!(
            "models: [{{name: r, use: replay, cassette: '{}'}}]\nsummarization:\n  trigger: [{{type: messages, value: 5}}]\n  keep: {{type: messages, value: 2}}\n",
            c.display()
        ),
    )
    .unwrap();
    let out = run(ws.path(), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let compacted = out.of_type("context_compacted");
    assert_eq!(compacted.len(), 1, "{compacted:?}");
    assert_eq!(compacted[0]["task_id"], "t1");
    assert_eq!(compacted[0]["messages_before"], 5);
    assert_eq!(compacted[0]["messages_after"], 4);
    assert_eq!(compacted[0]["input_tokens_before"], Value::Null);
    assert_eq!(out.completed()["tasks"]["completed"], 1);
    // Replay writes its own summary: the script was not used up by it.
    assert_eq!(out.first("task_completed")["result"], "sub done");
    assert_eq!(out.first("task_completed")["turns"], 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_tool_result_is_stored_outside_the_workspace_and_readable() {
    let server = MockServer::start().await;
    let ws = workspace();
    let tmp = tempfile::tempdir().unwrap();
    config(ws.path(), &server, "");
    let steps = [
        Reply::tool_calls(vec![("c1", "bash", json!({"command": "seq 1 3000"}))]),
        Reply::tool_calls(vec![
            (
                "c2",
                "read_file",
                json!({"path": "/mnt/tool-results/c1.txt", "start_line": 2995, "end_line": 2996}),
            ),
            (
                "c3",
                "grep",
                json!({"pattern": "^2999$", "path": "/mnt/tool-results"}),
            ),
            (
                "c4",
                "write_file",
                json!({"path": "/mnt/tool-results/c1.txt", "content": "x"}),
            ),
        ]),
        Reply::text("done"),
    ];
    for s in steps {
        server.push(Rule::any().reply(s));
    }
    let out = deerflow(["run", "--json", "--allow-bash", "LEADPROMPT: count"])
        .cwd(ws.path())
        .env("TMPDIR", tmp.path().to_str().unwrap())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    // The model got the head, the tail and the path; the event stays within 2000 chars.
    let seen = messages(&reqs[1]);
    let stored = seen.last().unwrap()["content"].as_str().unwrap();
    assert!(stored.contains("/mnt/tool-results/c1.txt"), "{stored}");
    assert!(stored.starts_with("[deerflow]") && stored.contains("\n1\n2\n"));
    assert!(stored.trim_end().ends_with("2999\n3000"), "{stored}");
    assert!(stored.len() < 4000, "{}", stored.len());
    let first = out.first("tool_result");
    assert_eq!(first["call_id"], "c1");
    assert!(first["output"].as_str().unwrap().chars().count() <= 2000);
    assert_eq!(first["truncated"], true);
    // read_file and grep read it back; a write is refused.
    let results = out.of_type("tool_result");
    let by_id = |id: &str| {
        results
            .iter()
            .find(|r| r["call_id"] == id)
            .unwrap_or_else(|| panic!("{id}"))
    };
    assert_eq!(by_id("c2")["status"], "ok");
    assert!(by_id("c2")["output"]
        .as_str()
        .unwrap()
        .contains("2995\n2996"));
    assert!(
        by_id("c3")["output"]
            .as_str()
            .unwrap()
            .contains("/mnt/tool-results/c1.txt:2999: 2999"),
        "{}",
        by_id("c3")["output"]
    );
    assert_eq!(by_id("c4")["status"], "error");
    assert!(by_id("c4")["output"]
        .as_str()
        .unwrap()
        .contains("read-only"));
    // Nothing was written into the workspace, and the stored results went with the run.
    let names: Vec<_> = std::fs::read_dir(ws.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["deerflow.yaml"]);
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn exempt_tools_and_a_disabled_section_keep_results_inline() {
    let server = MockServer::start().await;
    let ws = workspace();
    std::fs::write(ws.path().join("big.txt"), "line\n".repeat(5000)).unwrap();
    config(
        ws.path(),
        &server,
        "tool_output: {externalize_min_chars: 100}\nsummarization: {enabled: false}\n",
    );
    server.push(Rule::any().reply(Reply::tool_calls(vec![(
        "c1",
        "read_file",
        json!({"path": "big.txt"}),
    )])));
    server.push(Rule::any().reply(Reply::text("done")));
    let out = run(ws.path(), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let seen = messages(&server.requests()[1]);
    let content = seen.last().unwrap()["content"].as_str().unwrap();
    assert!(
        !content.contains("/mnt/tool-results"),
        "read_file is exempt"
    );
    assert!(content.len() >= 20_000);
}

#[tokio::test(flavor = "multi_thread")]
async fn model_name_writes_the_summary_and_its_failure_falls_back_to_the_agents_model() {
    for cheap_fails in [false, true] {
        let server = MockServer::start().await;
        let ws = workspace();
        config(
            ws.path(),
            &server,
            &format!(
                "  - {{name: cheap, use: openai, model: m-cheap, base_url: '{}', api_key: sk-test}}\n\
                 summarization:\n  model_name: cheap\n  trigger: [{{type: messages, value: 3}}]\n  keep: {{type: messages, value: 0}}\n",
                server.url()
            ),
        );
        let is_cheap = |r: &RecordedRequest| r.body["model"] == "m-cheap";
        if cheap_fails {
            server.push(Rule::when(is_cheap).reply(Reply::status(400)));
        } else {
            server.push(Rule::when(is_cheap).reply(Reply::text("CHEAP-SUMMARY").usage(70, 7)));
        }
        server
            .push(Rule::body_contains(SUMMARY_ASK).reply(Reply::text("OWN-SUMMARY").usage(80, 8)));
        server.push(Rule::body_contains("-SUMMARY").reply(Reply::text("done").usage(5, 1)));
        server
            .push(Rule::any().reply(Reply::tool_calls(vec![("c1", "ls", json!({}))]).usage(10, 1)));
        let out = run(ws.path(), &[]).await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        let reqs = server.requests();
        let cheap: Vec<_> = reqs.iter().filter(|r| is_cheap(r)).collect();
        assert_eq!(cheap.len(), 1);
        assert!(is_summary(cheap[0]) && cheap[0].body.get("tools").is_none());
        let usage = out.of_type("usage");
        let by_model = &out.completed()["usage"]["by_model"];
        if cheap_fails {
            assert!(messages(reqs.last().unwrap())[2]["content"]
                .as_str()
                .unwrap()
                .contains("OWN-SUMMARY"));
            assert_eq!(usage[1]["model"], "lead");
            assert_eq!(usage[1]["input_tokens"], 80);
            assert!(by_model.get("cheap").is_none(), "{by_model}");
        } else {
            assert!(messages(reqs.last().unwrap())[2]["content"]
                .as_str()
                .unwrap()
                .contains("CHEAP-SUMMARY"));
            // The summary model's usage is the lead's call, attributed to that model.
            assert_eq!(usage[1]["caller"], "lead");
            assert_eq!(usage[1]["model"], "cheap");
            assert_eq!(by_model["cheap"]["total_tokens"], 77);
            assert_eq!(
                out.completed()["usage"]["lead"]["total_tokens"],
                11 + 77 + 6
            );
        }
        assert_eq!(out.completed()["turns"], 2);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fraction_trigger_reads_the_models_context_window() {
    for (window, compacts) in [(Some(1000), true), (None, false)] {
        let server = MockServer::start().await;
        let ws = workspace();
        let p = ws.path().join("deerflow.yaml");
        let window = window.map_or(String::new(), |w| format!(", context_window: {w}"));
        std::fs::write(
            &p,
            format!(
                "models:\n  - {{name: lead, use: openai, model: m, base_url: '{}', api_key: sk-test{window}}}\n\
                 summarization:\n  trigger: [{{type: fraction, value: 0.5}}]\n  keep: {{type: messages, value: 0}}\n",
                server.url()
            ),
        )
        .unwrap();
        server.push(Rule::body_contains(SUMMARY_ASK).reply(Reply::text("SUM")));
        server.push(
            Rule::any().reply(Reply::tool_calls(vec![("c1", "ls", json!({}))]).usage(600, 5)),
        );
        server.push(Rule::any().reply(Reply::text("done").usage(100, 5)));
        let out = run(ws.path(), &[]).await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(
            out.of_type("context_compacted").len(),
            usize::from(compacts),
            "{window}"
        );
        assert_eq!(server.requests().iter().any(is_summary), compacts);
    }
}
