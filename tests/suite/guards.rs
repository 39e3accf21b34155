//! The token budget and loop detection (contract §4), on replay cassettes.

use serde_json::{json, Value};

use super::harness::{cassette, deerflow, workspace, Output};

fn task(desc: &str) -> Value {
    json!({"name": "task", "arguments": {"description": desc, "prompt": format!("do {desc}"), "subagent_type": "general-purpose"}})
}

fn usage(input: u64, output: u64) -> Value {
    json!({"input_tokens": input, "output_tokens": output})
}

fn ls(path: &str) -> Value {
    json!({"name": "ls", "arguments": {"path": path}})
}

async fn run(body: Value, extra: &[&str]) -> Output {
    let ws = workspace();
    let c = cassette(ws.path(), body);
    let m = format!("replay:{}", c.display());
    let mut args = vec!["run", "--json", "-m", m.as_str()];
    args.extend_from_slice(extra);
    args.push("go");
    deerflow(args).cwd(ws.path()).json().await
}

fn warnings(out: &Output, code: &str) -> Vec<Value> {
    out.of_type("warning")
        .into_iter()
        .filter(|w| w["code"] == code)
        .cloned()
        .collect()
}

fn tool_calls(out: &Output) -> Vec<Value> {
    out.of_type("tool_call").into_iter().cloned().collect()
}

// ---- token budget ----

/// Turn 1 (ls) uses 600 tokens, turn 2's tool calls bring the run to 1000.
fn lead_over_budget() -> Value {
    json!({"version": 1, "lead": [
        {"tool_calls": [ls(".")], "usage": usage(500, 100)},
        {"tool_calls": [ls("src"), task("never")], "usage": usage(350, 50)},
        {"text": "never"}]})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lead_response_reaching_the_budget_drops_its_tool_calls_and_exits_8() {
    let out = run(lead_over_budget(), &["--max-tokens", "1000"]).await;
    assert_eq!(out.code, 8, "{}", out.stderr);
    let done = out.completed();
    assert_eq!(done["status"], "budget_exceeded");
    assert_eq!(done["usage"]["total_tokens"], 1000);
    assert_eq!(done["turns"], 2);
    let calls = tool_calls(&out);
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(calls[0]["arguments"]["path"], ".");
    assert!(out.of_type("task_started").is_empty());
    // 60% then 100% in one step: the one budget warning still comes, with the crossing.
    assert_eq!(warnings(&out, "budget").len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_budget_from_config_works_the_same() {
    let ws = workspace();
    let c = cassette(ws.path(), lead_over_budget());
    std::fs::write(
        ws.path().join("deerflow.yaml"),
        "token_budget: {enabled: true, max_tokens: 1000}\n",
    )
    .unwrap();
    let m = format!("replay:{}", c.display());
    let out = deerflow(["run", "--json", "-m", &m, "go"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 8, "{}", out.stderr);
    assert_eq!(out.completed()["status"], "budget_exceeded");
    assert_eq!(tool_calls(&out).len(), 1);
    // Disabled in config: the same cassette runs to its end.
    std::fs::write(
        ws.path().join("deerflow.yaml"),
        "token_budget: {enabled: false, max_tokens: 1000}\n",
    )
    .unwrap();
    let out = deerflow(["run", "--json", "-m", &m, "go"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.completed()["status"], "completed", "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sub_agent_reaching_the_budget_cancels_the_others_and_exits_8() {
    let out = run(
        json!({"version": 1,
        "lead": [{"tool_calls": [task("hungry"), task("slow1"), task("slow2")], "usage": usage(100, 0)}, {"text": "never"}],
        "tasks": {"hungry": [{"tool_calls": [ls(".")], "usage": usage(900, 100), "delay_ms": 200}, {"text": "never"}]},
        "default_task": [{"text": "late", "delay_ms": 30000}]}),
        &["--max-tokens", "1000"],
    )
    .await;
    assert_eq!(out.code, 8, "{}", out.stderr);
    let done = out.completed();
    assert_eq!(done["status"], "budget_exceeded");
    assert_eq!(done["tasks"]["cancelled"], 3);
    let cancelled = out.of_type("task_cancelled");
    assert_eq!(cancelled.len(), 3);
    assert!(
        cancelled
            .iter()
            .all(|e| e["error"] == "Token budget exceeded"),
        "{cancelled:#?}"
    );
    let hungry = cancelled
        .iter()
        .find(|e| e["task_id"] == out.of_type("task_started")[0]["task_id"])
        .unwrap();
    assert_eq!(hungry["usage"]["total_tokens"], 1000);
    // The hungry sub-agent's tool call was dropped: its one message carries no calls.
    let running: Vec<_> = out
        .of_type("task_running")
        .into_iter()
        .filter(|e| e["task_id"] == hungry["task_id"])
        .collect();
    assert_eq!(running.len(), 1, "{running:#?}");
    assert_eq!(running[0]["message"]["tool_calls"], json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_leads_final_answer_may_reach_the_budget() {
    let out = run(
        json!({"version": 1, "lead": [
            {"tool_calls": [ls(".")], "usage": usage(400, 50)},
            {"tool_calls": [ls("a")], "usage": usage(350, 50)},
            {"text": "the answer", "usage": usage(400, 100)}]}),
        &["--max-tokens", "1000"],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let done = out.completed();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["final_message"], "the answer");
    assert_eq!(done["usage"]["total_tokens"], 1350);
    // 450 (45%), 850 (85%: the warning), 1350: once only.
    let w = warnings(&out, "budget");
    assert_eq!(w.len(), 1, "{w:#?}");
    let at = out
        .events
        .iter()
        .position(|e| e["code"] == "budget")
        .unwrap();
    let second_usage = out
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["type"] == "usage")
        .nth(1)
        .unwrap()
        .0;
    assert!(
        at > second_usage,
        "the warning follows the response that crossed 80%"
    );
    assert_eq!(tool_calls(&out).len(), 2);
}

// ---- loop detection ----

#[tokio::test(flavor = "multi_thread")]
async fn a_looping_lead_is_warned_then_stopped_then_answers() {
    let mut lead: Vec<Value> = (0..5).map(|_| json!({"tool_calls": [ls(".")]})).collect();
    lead.push(json!({"text": "final after loop", "tool_calls": [ls(".")]}));
    let out = run(json!({"version": 1, "lead": lead}), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let done = out.completed();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["final_message"], "final after loop");
    assert_eq!(done["turns"], 6);
    let w = warnings(&out, "loop_detected");
    assert_eq!(w.len(), 2, "{w:#?}");
    // The 3rd response warns (after its usage), the 5th stops: its calls never show.
    let usage_at: Vec<usize> = out
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["type"] == "usage")
        .map(|(i, _)| i)
        .collect();
    let warn_at: Vec<usize> = out
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["code"] == "loop_detected")
        .map(|(i, _)| i)
        .collect();
    assert!(usage_at[2] < warn_at[0] && warn_at[0] < usage_at[3]);
    assert!(usage_at[4] < warn_at[1] && warn_at[1] < usage_at[5]);
    assert_eq!(tool_calls(&out).len(), 4);
    assert_eq!(out.of_type("tool_result").len(), 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_looping_sub_agent_is_loop_capped() {
    let mut script: Vec<Value> = (0..5).map(|_| json!({"tool_calls": [ls(".")]})).collect();
    script.push(json!({"text": "sub gave up"}));
    let out = run(
        json!({"version": 1,
        "lead": [{"tool_calls": [task("loopy")]}, {"text": "done"}],
        "tasks": {"loopy": script}}),
        &[],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let t = out.first("task_completed");
    assert_eq!(t["stop_reason"], "loop_capped");
    assert_eq!(t["result"], "sub gave up");
    assert_eq!(t["turns"], 6);
    let w = warnings(&out, "loop_detected");
    assert_eq!(w.len(), 2);
    assert!(w.iter().all(|w| w["task_id"] == t["task_id"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn loop_detection_can_be_disabled() {
    let mut lead: Vec<Value> = (0..7).map(|_| json!({"tool_calls": [ls(".")]})).collect();
    lead.push(json!({"text": "done"}));
    let out = run(
        json!({"version": 1, "lead": lead}),
        &["--set", "loop_detection.enabled=false"],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(warnings(&out, "loop_detected").is_empty());
    assert_eq!(tool_calls(&out).len(), 7);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_per_tool_frequency_limit_stops_varied_calls() {
    let lead = json!([
        {"tool_calls": [ls("a")]},
        {"tool_calls": [ls("b")]},
        {"tool_calls": [ls("c")]},
        {"text": "enough"}
    ]);
    let out = run(
        json!({"version": 1, "lead": lead}),
        &["--set", "loop_detection.tool_freq_hard_limit=3"],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["final_message"], "enough");
    let w = warnings(&out, "loop_detected");
    assert_eq!(w.len(), 1, "{w:#?}");
    assert!(w[0]["message"].as_str().unwrap().contains("'ls'"));
    let paths: Vec<_> = tool_calls(&out)
        .iter()
        .map(|c| c["arguments"]["path"].clone())
        .collect();
    assert_eq!(paths, [json!("a"), json!("b")]);
}

// ---- panics (debug builds have a test hook: DEERFLOW_DEBUG_PANIC=CALLER) ----

#[cfg(debug_assertions)]
#[tokio::test(flavor = "multi_thread")]
async fn a_panic_in_the_lead_still_ends_with_run_completed_and_exit_1() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [{"tool_calls": [ls(".")], "usage": usage(10, 1)}, {"text": "never"}]}),
    );
    let m = format!("replay:{}", c.display());
    let out = deerflow(["run", "--json", "-m", &m, "go"])
        .cwd(ws.path())
        .env("DEERFLOW_DEBUG_PANIC", "lead")
        .json()
        .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let done = out.completed();
    assert_eq!(done["status"], "failed");
    let error = done["error"].as_str().unwrap();
    assert!(error.contains("panic"), "{error}");
    assert_eq!(done["usage"]["total_tokens"], 11);
}

#[cfg(debug_assertions)]
#[tokio::test(flavor = "multi_thread")]
async fn a_panic_in_a_sub_agent_fails_only_that_task() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [{"tool_calls": [task("one"), task("two")]}, {"text": "summary"}],
        "default_task": [{"text": "fine"}]}),
    );
    let m = format!("replay:{}", c.display());
    // One slot: the second task runs only if the panicked one gave its slot back.
    let out = deerflow(["run", "--json", "--max-concurrent", "1", "-m", &m, "go"])
        .cwd(ws.path())
        .env("DEERFLOW_DEBUG_PANIC", "subagent:general-purpose")
        .json()
        .await;
    assert_eq!(out.code, 3, "{}", out.stderr);
    let done = out.completed();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["tasks"]["failed"], 2);
    let failed = out.of_type("task_failed");
    assert!(failed
        .iter()
        .all(|e| e["error"] == "internal error: the sub-agent panicked"));
}

/// Six `present_files` calls with different paths are six different calls, not a loop (the
/// tool's loop key is all its arguments); the same call six times is stopped.
#[tokio::test(flavor = "multi_thread")]
async fn calls_with_different_arguments_are_not_repeats_whatever_the_tool() {
    let present = |path: &str| json!({"name": "present_files", "arguments": {"filepaths": [path]}});
    let script = |paths: Vec<String>| {
        let mut lead: Vec<Value> = paths
            .iter()
            .map(|p| json!({"tool_calls": [present(p)]}))
            .collect();
        lead.push(json!({"text": "done"}));
        json!({"version": 1, "lead": lead})
    };
    let different = script((0..6).map(|i| format!("out/{i}.md")).collect());
    let out = run(different, &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(warnings(&out, "loop_detected").is_empty());
    assert_eq!(tool_calls(&out).len(), 6);

    let same = script(vec!["out/a.md".to_string(); 6]);
    let out = run(same, &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        warnings(&out, "loop_detected").len(),
        2,
        "a warning, then the stop"
    );
    assert_eq!(
        tool_calls(&out).len(),
        4,
        "the fifth repeat's call is dropped"
    );
}
