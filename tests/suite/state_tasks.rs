//! A lead run's tasks in the `--state` ledger (contract §15): each task's end is on disk
//! before its terminal event, so a run killed the moment it reports a completed task
//! resumes without running that task again; a ledger written before those lines (the
//! task held by its call's `tool` line only) still resumes, and a task both lines hold is
//! taken once.

use std::path::Path;

use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;

use super::harness::{cassette, deerflow, workspace};
use super::state_ledger::{config, ledger_lines};
use crate::support::{MockServer, Reply, Rule};

/// The lead delegates one task; once it returns, the lead answers.
fn one_task(server: &MockServer, answer: Reply) {
    server.push(Rule::body_contains("Task Succeeded").reply(answer));
    server.push(
        Rule::when(|r| r.raw_body.contains("SUBTASK") && !r.raw_body.contains("LEADPROMPT"))
            .always()
            .reply(Reply::text("sub done").usage(7, 3)),
    );
    let args = json!({"description": "part", "prompt": "SUBTASK: count",
        "subagent_type": "general-purpose"});
    let calls = vec![("call_1", "task", args)];
    server.push(Rule::body_contains("LEADPROMPT").reply(Reply::tool_calls(calls).usage(100, 20)));
}

fn sub_agent_calls(server: &MockServer) -> usize {
    let sent = server.requests();
    let sub = sent
        .iter()
        .filter(|r| r.raw_body.contains("SUBTASK") && !r.raw_body.contains("LEADPROMPT"));
    sub.count()
}

/// Whether the ledger holds task `id` as completed, by either line that can say so.
fn completed_in_ledger(dir: &Path, id: &str) -> bool {
    ledger_lines(dir).iter().any(|l| {
        (l["kind"] == "task" && l["task_id"] == id && l["status"] == "completed")
            || (l["kind"] == "tool" && l["call_id"] == id && l["task"].is_object())
    })
}

const ARGS: [&str; 5] = ["run", "--json", "--state", "st", "LEADPROMPT: delegate"];

/// The sub-agent completes while the lead's next model call hangs; the run is killed
/// (SIGKILL) the moment its `task_completed` is read. The ledger holds that task, and the
/// resumed run takes it from there: not sent to the model again, reported `resumed`.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_killed_as_it_reports_a_completed_task_does_not_run_it_again() {
    let first = MockServer::start().await;
    let ws = workspace();
    let dir = ws.path();
    config(dir, &first);
    let hang = first.gate();
    one_task(&first, Reply::text("never").wait_for(&hang));
    let mut child = deerflow(ARGS).cwd(dir).command().spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut reported = false;
    while let Some(line) = lines.next_line().await.unwrap() {
        if line.contains(r#""type":"task_completed""#) {
            // At once: what the ledger holds now is all a resume gets.
            child.start_kill().unwrap();
            reported = true;
            break;
        }
    }
    child.wait().await.unwrap();
    assert!(reported, "the task never completed");
    assert_eq!(sub_agent_calls(&first), 1);
    assert!(
        completed_in_ledger(dir, "call_1"),
        "task_completed was out before the ledger held it: {:#?}",
        ledger_lines(dir)
    );
    drop(first);
    let second = MockServer::start().await;
    config(dir, &second);
    one_task(&second, Reply::text("final").usage(10, 2));
    let again = deerflow(ARGS).cwd(dir).json().await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(sub_agent_calls(&second), 0, "the task was sent again");
    let done = again.first("task_completed");
    assert_eq!(done["resumed"], true);
    assert_eq!(done["result"], "sub done");
    // The recorded usage and turns are reported, not counted in this run's.
    assert_eq!(done["usage"]["total_tokens"], 10);
    assert_eq!(done["turns"], 1);
    let end = again.completed();
    assert_eq!(end["final_message"], "final");
    assert_eq!(end["tasks"]["resumed"], 1);
    assert_eq!(end["tasks"]["completed"], 1);
    assert_eq!(end["usage"]["total_tokens"], 12);
}

/// A lead that delegates `x` and answers.
fn delegating(then: Value) -> Value {
    let task = json!({"name": "task", "arguments":
        {"description": "x", "prompt": "do x", "subagent_type": "general-purpose"}});
    json!({"version": 1, "lead": [{"tool_calls": [task]}, then],
        "default_task": [{"text": "42"}]})
}

fn called() -> Value {
    json!({"error": {"status": 500, "message": "called"}})
}

/// Both lines of a task (its own and its call's `tool` line) are one task: taken once.
/// The resumed lead replays its first delegation of `x`, then, live, delegates `x` again:
/// that one runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_task_held_by_both_its_lines_is_taken_once() {
    let ws = workspace();
    let dir = ws.path();
    let c = cassette(dir, delegating(called()));
    let model = format!("replay:{}", c.display());
    let args = ["run", "--json", "-m", &model, "--state", "st", "go"];
    let first = deerflow(args).cwd(dir).json().await;
    assert_eq!(first.code, 1, "{}", first.stderr);
    let lines = ledger_lines(dir);
    assert!(lines.iter().any(|l| l["kind"] == "task"), "{lines:#?}");
    assert!(lines.iter().any(|l| l["kind"] == "tool"), "{lines:#?}");
    let again_x = json!({"tool_calls": [{"name": "task", "arguments":
        {"description": "x", "prompt": "do x", "subagent_type": "general-purpose"}}]});
    let mut script = delegating(again_x);
    script["lead"][0] = called();
    script["lead"]
        .as_array_mut()
        .unwrap()
        .push(json!({"text": "final"}));
    script["default_task"] = json!([{"text": "fresh"}]);
    std::fs::write(&c, script.to_string()).unwrap();
    let again = deerflow(args).cwd(dir).json().await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    let ends: Vec<(Value, bool)> = again
        .of_type("task_completed")
        .iter()
        .map(|e| (e["result"].clone(), e["resumed"] == true))
        .collect();
    assert_eq!(ends, [(json!("42"), true), (json!("fresh"), false)]);
    assert_eq!(again.completed()["tasks"]["resumed"], 1);
    assert_eq!(again.completed()["tasks"]["completed"], 2);
}
