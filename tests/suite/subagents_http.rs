//! Sub-agents against the mock LLM server: run-wide concurrency measured at the server,
//! context isolation, per-type models and tool allow-lists, and child-process cleanup.

use std::path::Path;

use serde_json::{json, Value};

use super::harness::{cassette, deerflow, processes_with, workspace, Output};
use crate::support::{MockServer, RecordedRequest, Reply, Rule};

fn config(dir: &Path, server: &MockServer, extra: &str) -> std::path::PathBuf {
    let p = dir.join("deerflow.yaml");
    let yaml = format!(
        "models:\n  - {{name: lead, use: openai, model: m-lead, base_url: '{url}', api_key: sk-test}}\n  - {{name: other, use: openai, model: m-sub, base_url: '{url}', api_key: sk-test}}\n{extra}",
        url = server.url()
    );
    std::fs::write(&p, yaml).unwrap();
    p
}

fn task_call(i: usize, kind: &str) -> (String, String, Value) {
    (
        format!("call_{i}"),
        "task".to_string(),
        json!({"description": format!("part {i}"), "prompt": format!("SUBTASK {i}: do part {i}"), "subagent_type": kind}),
    )
}

fn tool_names(r: &RecordedRequest) -> Vec<String> {
    r.body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn is_sub(r: &RecordedRequest) -> bool {
    r.raw_body.contains("SUBTASK") && !r.raw_body.contains("LEADPROMPT")
}

/// The lead fans out `n` tasks of `kind`, each sub-agent answers after `delay_ms`, the lead
/// then answers.
async fn fan_out(server: &MockServer, n: usize, kind: &str, delay_ms: u64) {
    server.push(
        Rule::body_contains("Task Succeeded").reply(Reply::text("final answer").usage(10, 2)),
    );
    let calls = (1..=n).map(|i| task_call(i, kind)).collect();
    server.push(Rule::body_contains("LEADPROMPT").reply(Reply::tool_calls(calls).usage(100, 20)));
    server.push(
        Rule::body_contains("SUBTASK")
            .times(n)
            .reply(Reply::text("sub done").usage(7, 3).delay_ms(delay_ms)),
    );
}

async fn run(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["run", "--json"];
    args.extend_from_slice(extra);
    args.push("LEADPROMPT: split the work");
    deerflow(args).cwd(dir).json().await
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrency_at_the_server_never_exceeds_the_limit() {
    let server = MockServer::start().await;
    let ws = workspace();
    config(ws.path(), &server, "");
    fan_out(&server, 8, "general-purpose", 300).await;
    let out = run(ws.path(), &["--max-concurrent", "2"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["tasks"]["completed"], 8);
    // Lead requests are sequential with the tasks, so the peak is the sub-agents' own.
    assert_eq!(server.max_in_flight(), 2);
    let subs: Vec<_> = server.requests().into_iter().filter(is_sub).collect();
    assert_eq!(subs.len(), 8);
    // Queued tasks start in the order the model made the calls.
    let order: Vec<String> = out
        .of_type("task_started")
        .iter()
        .map(|e| e["task_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        order,
        (1..=8).map(|i| format!("call_{i}")).collect::<Vec<_>>()
    );
    assert_eq!(out.completed()["usage"]["subagents"]["total_tokens"], 80);
    assert_eq!(
        out.completed()["usage"]["by_model"]["lead"]["total_tokens"],
        80 + 120 + 12
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sub_agent_sees_only_its_prompt_and_never_the_task_tool() {
    let server = MockServer::start().await;
    let ws = workspace();
    config(ws.path(), &server, "");
    fan_out(&server, 1, "general-purpose", 0).await;
    let out = run(ws.path(), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let reqs = server.requests();
    let lead = reqs
        .iter()
        .find(|r| r.raw_body.contains("LEADPROMPT"))
        .unwrap();
    assert!(tool_names(lead).contains(&"task".to_string()));
    let sub = reqs.iter().find(|r| is_sub(r)).unwrap();
    let names = tool_names(sub);
    for banned in ["task", "ask_clarification", "present_files"] {
        assert!(!names.contains(&banned.to_string()), "{names:?}");
    }
    assert!(names.contains(&"read_file".to_string()));
    let msgs = sub.body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert_eq!(msgs[0]["role"], "system");
    assert_eq!(msgs[1]["role"], "user");
    assert_eq!(msgs[1]["content"], "SUBTASK 1: do part 1");
    let system = msgs[0]["content"].as_str().unwrap();
    assert!(
        system.contains("## Summary") && system.contains("## Findings"),
        "general-purpose asks for a structured report"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn per_type_model_override_reaches_the_server() {
    let server = MockServer::start().await;
    let ws = workspace();
    config(
        ws.path(),
        &server,
        "subagents:\n  agents:\n    general-purpose: {model: other}\n",
    );
    fan_out(&server, 2, "general-purpose", 0).await;
    let out = run(ws.path(), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    for r in server.requests() {
        let expected = if is_sub(&r) { "m-sub" } else { "m-lead" };
        assert_eq!(r.body["model"], expected);
    }
    assert!(out
        .of_type("task_started")
        .iter()
        .all(|e| e["model"] == "other"));
    let by_model = &out.completed()["usage"]["by_model"];
    assert_eq!(by_model["other"]["total_tokens"], 20);
    assert_eq!(by_model["lead"]["total_tokens"], 132);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_custom_types_allow_list_is_what_its_requests_offer() {
    let server = MockServer::start().await;
    let ws = workspace();
    let extra = "subagents:\n  custom_agents:\n    reviewer:\n      description: Reviews things\n      system_prompt: You are REVIEWER.\n      tools: [read_file, grep, task, present_files]\n      max_turns: 7\n";
    config(ws.path(), &server, extra);
    fan_out(&server, 1, "reviewer", 0).await;
    let out = run(ws.path(), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let sub = server.requests().into_iter().find(is_sub).unwrap();
    assert_eq!(tool_names(&sub), ["read_file", "grep"]);
    assert!(sub.body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .starts_with("You are REVIEWER."));
    let started = out.first("task_started");
    assert_eq!(
        (
            started["subagent_type"].as_str(),
            started["max_turns"].as_u64(),
            started["timeout_seconds"].as_f64()
        ),
        (Some("reviewer"), Some(7), Some(900.0))
    );
    assert_eq!(
        out.first("run_started")["subagent_types"],
        json!(["general-purpose", "reviewer"])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timed_out_sub_agents_child_process_is_killed() {
    let ws = workspace();
    let marker = format!("{}", 900_000 + fastrand::u32(0..99_999));
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [{"tool_calls": [{"name": "task", "arguments": {"description": "sleepy", "prompt": "sleep", "subagent_type": "bash"}}]}, {"text": "ok"}],
        "tasks": {"sleepy": [{"tool_calls": [{"name": "bash", "arguments": {"command": format!("sleep {marker} & sleep {marker}")}}]}]}}),
    );
    let m = format!("replay:{}", c.display());
    let out = deerflow([
        "run",
        "--json",
        "--allow-bash",
        "--subagent-timeout",
        "1s",
        "-m",
        &m,
        "go",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert_eq!(
        out.first("task_timed_out")["error"],
        "Execution timed out after 1 seconds"
    );
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(
        processes_with(&format!("sleep {marker}")),
        Vec::<String>::new()
    );
}
