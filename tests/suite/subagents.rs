//! Sub-agents on replay cassettes: fan-out, failures, timeouts, limits, queueing, ids.

use std::time::Duration;

use serde_json::{json, Value};

use super::harness::{cassette, deerflow, is_terminal, workspace, Output};

fn task(desc: &str) -> Value {
    json!({"name": "task", "arguments": {"description": desc, "prompt": format!("do {desc}"), "subagent_type": "general-purpose"}})
}

fn fan_out(descs: &[&str]) -> Value {
    json!({"tool_calls": descs.iter().map(|d| task(d)).collect::<Vec<_>>(), "usage": {"input_tokens": 100, "output_tokens": 10}})
}

async fn run(c: &std::path::Path, ws: &std::path::Path, extra: &[&str]) -> Output {
    let m = format!("replay:{}", c.display());
    let mut args = vec!["run", "--json", "-m", m.as_str()];
    args.extend_from_slice(extra);
    args.push("go");
    deerflow(args).cwd(ws).json().await
}

fn terminal_types(out: &Output) -> Vec<String> {
    out.events
        .iter()
        .filter(|e| is_terminal(e))
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn fan_out_of_three_completes_and_usage_adds_up() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [fan_out(&["alpha", "beta", "gamma"]), {"text": "all done", "usage": {"input_tokens": 200, "output_tokens": 20}}],
        "default_task": [{"text": "sub result", "usage": {"input_tokens": 50, "output_tokens": 5}}]}),
    );
    let out = run(&c, ws.path(), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(terminal_types(&out), ["task_completed"; 3]);
    assert_eq!(out.of_type("task_started").len(), 3);
    let done = out.completed();
    assert_eq!(
        done["tasks"],
        json!({"total": 3, "completed": 3, "failed": 0, "timed_out": 0, "cancelled": 0, "resumed": 0})
    );
    assert_eq!(done["usage"]["lead"]["total_tokens"], 330);
    assert_eq!(done["usage"]["subagents"]["total_tokens"], 165);
    assert_eq!(done["usage"]["total_tokens"], 495);
    let sub_usage: Vec<_> = out
        .of_type("usage")
        .into_iter()
        .filter(|u| u["caller"] == "subagent:general-purpose")
        .collect();
    assert_eq!(sub_usage.len(), 3);
    assert!(sub_usage.iter().all(|u| u["task_id"].is_string()));
    let results: Vec<_> = out
        .of_type("tool_result")
        .into_iter()
        .filter(|r| r["name"] == "task")
        .collect();
    assert!(results
        .iter()
        .all(|r| r["output"] == "Task Succeeded. Result: sub result"));
    let c0 = out.of_type("task_completed")[0];
    assert_eq!(c0["usage"]["total_tokens"], 55);
    assert_eq!(c0["turns"], 1);
    assert!(c0["stop_reason"].is_null());
    let running = out.of_type("task_running");
    assert_eq!(running.len(), 3);
    assert_eq!(running[0]["message"]["role"], "assistant");
    assert_eq!(running[0]["message_index"], 1);
    assert_eq!(running[0]["usage"]["total_tokens"], 55);
}

#[tokio::test(flavor = "multi_thread")]
async fn one_failed_sub_agent_exits_3() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [fan_out(&["ok", "bad"]), {"text": "summary"}],
        "tasks": {"bad": [{"error": {"status": 500, "message": "sub boom"}}]},
        "default_task": [{"text": "fine"}]}),
    );
    let out = run(&c, ws.path(), &[]).await;
    assert_eq!(out.code, 3, "{}", out.stderr);
    let failed = out.first("task_failed");
    assert!(failed["error"].as_str().unwrap().contains("sub boom"));
    assert_eq!(out.completed()["status"], "completed");
    assert_eq!(out.completed()["tasks"]["failed"], 1);
    let r: Vec<_> = out
        .of_type("tool_result")
        .into_iter()
        .filter(|r| r["status"] == "error")
        .collect();
    assert!(r[0]["output"]
        .as_str()
        .unwrap()
        .starts_with("Task failed. Error: "));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timed_out_sub_agent_exits_4_promptly() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [fan_out(&["slow"]), {"text": "summary"}],
        "tasks": {"slow": [{"text": "late", "delay_ms": 30000}]}}),
    );
    let t0 = std::time::Instant::now();
    let out = run(&c, ws.path(), &["--subagent-timeout", "1s"]).await;
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(out.code, 4, "{}", out.stderr);
    let t = out.first("task_timed_out");
    assert_eq!(t["error"], "Execution timed out after 1 seconds");
    assert_eq!(t["timeout_seconds"], 1.0);
    let r = out
        .of_type("tool_result")
        .into_iter()
        .find(|r| r["name"] == "task")
        .unwrap();
    assert_eq!(
        r["output"],
        "Task timed out. Error: Execution timed out after 1 seconds"
    );
}

/// Each line is on stdout as soon as the run has done what was ready, not held until more
/// events come: `task_started` is readable while the sub-agent still waits for its model.
#[tokio::test(flavor = "multi_thread")]
async fn events_reach_stdout_while_a_sub_agent_still_waits() {
    use tokio::io::AsyncBufReadExt;
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [fan_out(&["slow"]), {"text": "summary"}],
        "tasks": {"slow": [{"text": "late", "delay_ms": 5000}]}}),
    );
    let m = format!("replay:{}", c.display());
    let mut child = deerflow(["run", "--json", "-m", m.as_str(), "go"])
        .cwd(ws.path())
        .command()
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        let e: Value = serde_json::from_str(&line).unwrap();
        seen.push(e["type"].as_str().unwrap_or_default().to_string());
        if e["type"] == "task_started" {
            break;
        }
    }
    assert_eq!(
        seen.last().map(String::as_str),
        Some("task_started"),
        "{seen:?}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "task_started came at {:?}, with the sub-agent's answer",
        t0.elapsed()
    );
    let _ = child.kill().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn failure_beats_timeout_in_the_exit_code() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [fan_out(&["slow", "bad"]), {"text": "summary"}],
        "tasks": {"slow": [{"text": "late", "delay_ms": 30000}], "bad": [{"error": {"status": 400, "message": "nope"}}]}}),
    );
    let out = run(&c, ws.path(), &["--subagent-timeout", "1s"]).await;
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert_eq!(out.completed()["tasks"]["timed_out"], 1);
    assert_eq!(out.completed()["tasks"]["failed"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn max_tasks_refuses_further_calls_with_a_warning() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [fan_out(&["a", "b", "c"]), {"text": "summary"}],
        "default_task": [{"text": "fine"}]}),
    );
    let out = run(&c, ws.path(), &["--max-tasks", "2"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.of_type("task_started").len(), 2);
    let w: Vec<_> = out
        .of_type("warning")
        .into_iter()
        .filter(|w| w["code"] == "task_limit")
        .collect();
    assert_eq!(w.len(), 1);
    assert_eq!(out.completed()["tasks"]["total"], 2);
    let refused = out
        .of_type("tool_result")
        .into_iter()
        .filter(|r| r["status"] == "error")
        .count();
    assert_eq!(refused, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_type_is_a_tool_error_not_a_task() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [{"tool_calls": [{"name": "task", "arguments": {"description": "x", "prompt": "p", "subagent_type": "wizard"}}]}, {"text": "ok"}]}),
    );
    let out = run(&c, ws.path(), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.first("warning")["code"], "unknown_subagent_type");
    let r = out.first("tool_result");
    assert_eq!(
        r["output"],
        "Task failed. Error: Unknown subagent type 'wizard'. Available: general-purpose"
    );
    assert_eq!(out.completed()["tasks"]["total"], 0);
    // The bash type exists only with host bash allowed.
    let out = run(&c, ws.path(), &["--allow-bash"]).await;
    assert_eq!(
        out.first("tool_result")["output"],
        "Task failed. Error: Unknown subagent type 'wizard'. Available: general-purpose, bash"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn repeated_tool_call_ids_get_distinct_task_ids() {
    let ws = workspace();
    let mut call = task("one");
    call["id"] = json!("dup");
    let mut call2 = task("two");
    call2["id"] = json!("dup");
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [{"tool_calls": [call, call2]}, {"text": "ok"}], "default_task": [{"text": "fine"}]}),
    );
    let out = run(&c, ws.path(), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let ids: Vec<_> = out
        .of_type("task_started")
        .iter()
        .map(|e| e["task_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["dup", "dup-2"]);
    // The lead's own events use the same unique ids, so results pair with their tasks.
    let calls: Vec<_> = out
        .of_type("tool_call")
        .iter()
        .map(|e| e["call_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(calls, ["dup", "dup-2"]);
    let mut results: Vec<_> = out
        .of_type("tool_result")
        .iter()
        .map(|e| e["call_id"].as_str().unwrap().to_string())
        .collect();
    results.sort();
    assert_eq!(results, ["dup", "dup-2"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn excess_tasks_queue_in_order_with_positions() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [fan_out(&["t1", "t2", "t3", "t4", "t5"]), {"text": "ok"}],
        "default_task": [{"text": "fine", "delay_ms": 100}]}),
    );
    let out = run(&c, ws.path(), &["--max-concurrent", "2"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let queued: Vec<_> = out
        .of_type("task_queued")
        .iter()
        .map(|e| {
            (
                e["description"].as_str().unwrap().to_string(),
                e["position"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        queued,
        [
            ("t3".to_string(), 1),
            ("t4".to_string(), 2),
            ("t5".to_string(), 3)
        ]
    );
    let started: Vec<_> = out
        .of_type("task_started")
        .iter()
        .map(|e| e["description"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(started, ["t1", "t2", "t3", "t4", "t5"]);
    // Never more than two running at once, by the event stream.
    let mut running = 0i32;
    for e in &out.events {
        if e["type"] == "task_started" {
            running += 1;
            assert!(running <= 2);
        } else if is_terminal(e) {
            running -= 1;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn run_timeout_cancels_queued_tasks_without_starting_them() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [fan_out(&["a", "b", "c"]), {"text": "never"}],
        "default_task": [{"text": "late", "delay_ms": 30000}]}),
    );
    let t0 = std::time::Instant::now();
    let out = run(&c, ws.path(), &["--max-concurrent", "1", "--timeout", "1s"]).await;
    assert!(t0.elapsed() < Duration::from_secs(8));
    assert_eq!(out.code, 124, "{}", out.stderr);
    assert_eq!(out.completed()["status"], "timed_out");
    assert_eq!(out.of_type("task_started").len(), 1);
    let cancelled = out.of_type("task_cancelled");
    assert_eq!(cancelled.len(), 3);
    assert!(cancelled
        .iter()
        .all(|e| e["error"] == "Run timed out after 1 seconds"));
    assert_eq!(out.completed()["tasks"]["cancelled"], 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn no_subagents_removes_the_task_tool() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [fan_out(&["a"]), {"text": "ok"}]}),
    );
    let out = run(&c, ws.path(), &["--no-subagents"]).await;
    assert_eq!(out.first("run_started")["subagents_enabled"], false);
    assert!(out.first("tool_result")["output"]
        .as_str()
        .unwrap()
        .contains("unknown tool 'task'"));
}

#[tokio::test(flavor = "multi_thread")]
async fn turn_capped_sub_agent_completes_with_its_last_text() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [fan_out(&["cap", "nocap"]), {"text": "ok"}],
        "tasks": {"cap": [{"text": "partial", "tool_calls": [{"name": "ls"}]}, {"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}],
                  "nocap": [{"tool_calls": [{"name": "ls"}]}, {"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}]}}),
    );
    let cfg = ws.path().join("deerflow.yaml");
    std::fs::write(
        &cfg,
        "subagents:\n  agents:\n    general-purpose: {max_turns: 2}\n",
    )
    .unwrap();
    let out = run(&c, ws.path(), &[]).await;
    assert_eq!(out.code, 3, "{}", out.stderr);
    let done = out.first("task_completed");
    assert_eq!(done["result"], "partial");
    assert_eq!(done["stop_reason"], "turn_capped");
    let failed = out.first("task_failed");
    assert_eq!(failed["error"], "Reached max_turns=2");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_call_missing_an_argument_fails_in_the_task_result_format() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [{"tool_calls": [{"name": "task", "arguments": {"description": "x", "subagent_type": "general-purpose"}}]}, {"text": "ok"}]}),
    );
    let out = run(&c, ws.path(), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.first("tool_result")["output"],
        "Task failed. Error: missing required string argument 'prompt'"
    );
    assert_eq!(out.completed()["tasks"]["total"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_fan_out_in_one_response_runs_every_task() {
    let ws = workspace();
    let names: Vec<String> = (0..300).map(|i| format!("t{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [fan_out(&refs), {"text": "ok"}],
        "default_task": [{"text": "r", "usage": {"input_tokens": 1, "output_tokens": 1}}]}),
    );
    let out = run(
        &c,
        ws.path(),
        &["--max-tasks", "1000", "--max-concurrent", "64"],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["tasks"]["completed"], 300);
    assert_eq!(out.completed()["usage"]["subagents"]["total_tokens"], 600);
    assert!(
        out.of_type("warning").is_empty(),
        "{:?}",
        out.of_type("warning")
    );
    // Tasks that finish while the rest are still being accepted free their slots, so how
    // many have to wait varies; never more than 64 run at once.
    assert!(out.of_type("task_queued").len() <= 300 - 64);
    let mut running = 0i32;
    for e in &out.events {
        if e["type"] == "task_started" {
            running += 1;
            assert!(running <= 64);
        } else if is_terminal(e) {
            running -= 1;
        }
    }
}
