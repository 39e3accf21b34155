//! `--state DIR` end to end (contract §15): runs killed with SIGKILL at random points and
//! resumed, a torn ledger, a corrupt line, two processes on one directory, a ledger written
//! for another run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use super::harness::{cassette, deerflow, workspace, Output, BIN};

const ITEMS: u64 = 12;

fn setup(dir: &Path, delay_ms: u64) -> String {
    let c = cassette(
        dir,
        json!({"version": 1, "default_task": [
            {"text": "done", "usage": {"input_tokens": 5, "output_tokens": 1}, "delay_ms": delay_ms}
        ]}),
    );
    let items: String = (0..ITEMS).map(|i| format!("item {i}\n")).collect();
    std::fs::write(dir.join("items.txt"), items).unwrap();
    format!("replay:{}", c.display())
}

fn args(model: &str) -> Vec<String> {
    [
        "run",
        "--json",
        "-m",
        model,
        "--each",
        "items.txt",
        "--results",
        "out.jsonl",
        "--state",
        "st",
        "--max-concurrent",
        "3",
        "Check {{item}}",
    ]
    .map(String::from)
    .to_vec()
}

/// The ledger's item lines.
fn ledger_items(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("st/ledger.jsonl")).unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["kind"] == "item")
        .collect()
}

fn completed_in_ledger(dir: &Path) -> BTreeMap<u64, usize> {
    let mut m = BTreeMap::new();
    for v in ledger_items(dir) {
        if v["status"] == "completed" {
            *m.entry(v["index"].as_u64().unwrap()).or_default() += 1;
        }
    }
    m
}

/// The events a (possibly killed) run got out, whole lines only.
fn events_of(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Runs one attempt; `kill_after` kills it with SIGKILL then. Returns its events and
/// whether it ran to its end.
fn attempt(dir: &Path, model: &str, kill_after: Option<Duration>) -> (Vec<Value>, Option<i32>) {
    let out_path = dir.join("events.out");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = std::process::Command::new(BIN)
        .args(args(model))
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let code = match kill_after {
        Some(t) => {
            std::thread::sleep(t);
            let _ = child.kill();
            let status = child.wait().unwrap();
            status.code()
        }
        None => child.wait().unwrap().code(),
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap();
    (events_of(&stdout), code)
}

/// Kills an `--each` run at random points (50 seeds), then lets it finish: every item ends
/// completed exactly once in the ledger, no item completed before a run starts is started
/// again (sent to the model) by it, and the last run's results file is whole, in order.
#[test]
fn killed_at_random_points_and_resumed_every_item_completes_once() {
    for seed in 0..50u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let ws = workspace();
        let dir = ws.path();
        let model = setup(dir, 15);
        let kills = 1 + rng.usize(0..2);
        let mut runs = Vec::new();
        for k in 0..=kills {
            let done_before: BTreeSet<u64> = completed_in_ledger(dir).into_keys().collect();
            let kill = (k < kills).then(|| Duration::from_millis(rng.u64(0..120)));
            let (events, code) = attempt(dir, &model, kill);
            for e in &events {
                if e["type"] == "task_started" && e.get("resumed").is_none() {
                    let i = e["item_index"].as_u64().unwrap();
                    assert!(
                        !done_before.contains(&i),
                        "seed {seed}: item {i} ran again after it completed"
                    );
                }
                if e["type"] == "task_started" && e["resumed"] == true {
                    let i = e["item_index"].as_u64().unwrap();
                    assert!(
                        done_before.contains(&i),
                        "seed {seed}: {i} resumed from nothing"
                    );
                }
            }
            runs.push((events, code));
        }
        let (last, code) = runs.last().unwrap();
        assert_eq!(*code, Some(0), "seed {seed}");
        let done = completed_in_ledger(dir);
        assert_eq!(done.len() as u64, ITEMS, "seed {seed}: {done:?}");
        assert!(done.values().all(|n| *n == 1), "seed {seed}: {done:?}");
        let end = last.iter().find(|e| e["type"] == "run_completed").unwrap();
        assert_eq!(end["tasks"]["completed"], ITEMS, "seed {seed}");
        let resumed = last
            .iter()
            .filter(|e| e["type"] == "task_completed" && e["resumed"] == true)
            .count();
        assert_eq!(end["tasks"]["resumed"], resumed as u64, "seed {seed}");
        let lines: Vec<Value> = std::fs::read_to_string(dir.join("out.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let idx: Vec<u64> = lines.iter().map(|l| l["index"].as_u64().unwrap()).collect();
        assert_eq!(idx, (0..ITEMS).collect::<Vec<_>>(), "seed {seed}");
        assert!(lines
            .iter()
            .all(|l| l["status"] == "completed" && l["result"] == "done"));
        for l in &lines {
            let was_resumed = last.iter().any(|e| {
                e["type"] == "task_completed"
                    && e["item_index"] == l["index"]
                    && e["resumed"] == true
            });
            assert_eq!(l["resumed"], was_resumed, "seed {seed}: {l}");
        }
    }
}

async fn complete_run(dir: &Path, model: &str) -> Output {
    deerflow(args(model)).cwd(dir).json().await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_completed_run_resumed_runs_nothing_and_a_torn_last_line_is_ignored() {
    let ws = workspace();
    let model = setup(ws.path(), 0);
    let first = complete_run(ws.path(), &model).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(first.completed()["tasks"]["resumed"], 0);
    // A write cut short by a kill: half a line, no newline.
    let ledger = ws.path().join("st/ledger.jsonl");
    let mut text = std::fs::read_to_string(&ledger).unwrap();
    text.push_str(r#"{"kind":"item","index":3,"cont"#);
    std::fs::write(&ledger, text).unwrap();
    let again = complete_run(ws.path(), &model).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    let end = again.completed();
    assert_eq!(end["tasks"]["resumed"], ITEMS);
    assert_eq!(end["tasks"]["completed"], ITEMS);
    assert_eq!(
        end["usage"]["total_tokens"], 0,
        "resumed usage is not this run's"
    );
    assert!(again.of_type("usage").is_empty(), "no model call");
    for t in ["task_started", "task_completed"] {
        assert!(again.of_type(t).iter().all(|e| e["resumed"] == true));
    }
    let warning = again
        .of_type("warning")
        .into_iter()
        .find(|w| w["code"] == "resumed")
        .expect("a resumed warning");
    assert!(
        warning["message"].as_str().unwrap().contains("12 item"),
        "{warning}"
    );
    // The torn tail was cut before appending: the ledger reads whole.
    assert_eq!(completed_in_ledger(ws.path()).len() as u64, ITEMS);
    assert!(std::fs::read_to_string(&ledger).unwrap().ends_with('\n'));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_line_that_is_not_the_last_is_a_usage_error_naming_it() {
    let ws = workspace();
    let model = setup(ws.path(), 0);
    assert_eq!(complete_run(ws.path(), &model).await.code, 0);
    let ledger = ws.path().join("st/ledger.jsonl");
    let text = std::fs::read_to_string(&ledger).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{not json";
    std::fs::write(&ledger, lines.join("\n") + "\n").unwrap();
    let out = deerflow(args(&model)).cwd(ws.path()).output().await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.events.is_empty());
    assert!(out.stderr.contains("line 3 is corrupt"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_ledger_written_for_another_prompt_or_shard_is_a_usage_error_naming_it() {
    let ws = workspace();
    let model = setup(ws.path(), 0);
    assert_eq!(complete_run(ws.path(), &model).await.code, 0);
    let mut other = args(&model);
    *other.last_mut().unwrap() = "Translate {{item}}".into();
    let out = deerflow(&other).cwd(ws.path()).output().await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stdout.is_empty());
    assert!(out.stderr.contains("another template"), "{}", out.stderr);
    assert!(out.stderr.contains("Check {{item}}"), "{}", out.stderr);
    let mut sharded = args(&model);
    sharded.splice(1..1, ["--shard".to_string(), "1/2".to_string()]);
    let out = deerflow(&sharded).cwd(ws.path()).output().await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("--shard (none), not --shard 1/2"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_directory_in_use_by_a_live_deerflow_is_refused_naming_its_pid() {
    let ws = workspace();
    let model = setup(ws.path(), 3000);
    let first = deerflow(args(&model)).cwd(ws.path());
    let mut child = first.command().spawn().unwrap();
    let pid = child.id().unwrap();
    let lock = ws.path().join("st/lock");
    let mut waited = 0;
    while !std::fs::read_to_string(&lock).is_ok_and(|s| s.contains("pid")) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += 1;
        assert!(waited < 500, "the first run never took the lock");
    }
    let second = deerflow(args(&model)).cwd(ws.path()).output().await;
    assert_eq!(second.code, 2, "{}", second.stderr);
    assert!(second.events.is_empty());
    assert!(
        second.stderr.contains(&format!("pid {pid}")),
        "{}",
        second.stderr
    );
    assert!(second.stderr.contains("host "), "{}", second.stderr);
    // Killed, its lock goes with it: the next run resumes.
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let quick = json!({"version": 1, "default_task": [{"text": "done"}]});
    std::fs::write(model.trim_start_matches("replay:"), quick.to_string()).unwrap();
    let third = complete_run(ws.path(), &model).await;
    assert_eq!(third.code, 0, "{}", third.stderr);
}

/// A lead that reads a file, appends to another, delegates a task and answers.
fn lead_script() -> Value {
    json!({"version": 1, "lead": [
        {"tool_calls": [
            {"name": "read_file", "arguments": {"path": "a.txt"}},
            {"name": "write_file", "arguments": {"path": "out.txt", "content": "x", "append": true}}
        ], "usage": {"input_tokens": 10, "output_tokens": 2}},
        {"tool_calls": [{"name": "task", "arguments":
            {"description": "count", "prompt": "count it", "subagent_type": "general-purpose"}}]},
        {"text": "final", "usage": {"input_tokens": 10, "output_tokens": 2}}
    ], "default_task": [{"text": "42"}]})
}

async fn lead_run(dir: &Path, model: &str) -> Output {
    lead_run_with(dir, model, &[]).await
}

async fn lead_run_with(dir: &Path, model: &str, more: &[&str]) -> Output {
    let mut a = vec!["run", "--json", "-m", model, "-C", "ws", "--state", "st"];
    a.extend_from_slice(more);
    a.push("go");
    deerflow(a).cwd(dir).json().await
}

/// Model calls a run made: each would have failed against the emptied cassette.
fn fail_every_call() -> Value {
    let no = json!({"error": {"status": 500, "message": "called"}});
    json!({"version": 1, "lead": [no, no, no], "default_task": [no]})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_completed_lead_run_resumed_makes_no_model_call_and_reruns_no_write() {
    let ws = workspace();
    let dir = ws.path();
    std::fs::create_dir(dir.join("ws")).unwrap();
    std::fs::write(dir.join("ws/a.txt"), "hello\n").unwrap();
    let c = cassette(dir, lead_script());
    let model = format!("replay:{}", c.display());
    let first = lead_run(dir, &model).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(first.completed()["usage"]["total_tokens"], 24);
    std::fs::write(&c, fail_every_call().to_string()).unwrap();
    let again = lead_run_with(dir, &model, &["--record", "rec.json"]).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    let end = again.completed();
    assert_eq!(end["final_message"], "final");
    for t in ["message", "tool_call", "tool_result"] {
        assert!(!again.of_type(t).is_empty(), "{t}");
        assert!(again.of_type(t).iter().all(|e| e["resumed"] == true), "{t}");
    }
    // --record holds the responses the run used, replayed ones included.
    let rec: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("rec.json")).unwrap()).unwrap();
    assert_eq!(rec["lead"].as_array().unwrap().len(), 3, "{rec}");
    assert_eq!(rec["lead"][2]["text"], "final");
    assert_eq!(end["usage"]["total_tokens"], 0);
    assert_eq!(end["tasks"]["resumed"], 1);
    assert_eq!(end["tasks"]["completed"], 1);
    // write_file was recorded as finished: not run again.
    assert_eq!(
        std::fs::read_to_string(dir.join("ws/out.txt")).unwrap(),
        "x"
    );
    let done = again.first("task_completed");
    assert_eq!(done["resumed"], true);
    assert_eq!(done["result"], "42");
    let result = again
        .of_type("tool_result")
        .into_iter()
        .find(|r| r["name"] == "task")
        .unwrap()
        .clone();
    assert_eq!(result["output"], "Task Succeeded. Result: 42");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_read_only_result_makes_the_lead_go_live_from_there() {
    let ws = workspace();
    let dir = ws.path();
    std::fs::create_dir(dir.join("ws")).unwrap();
    std::fs::write(dir.join("ws/a.txt"), "hello\n").unwrap();
    let c = cassette(dir, lead_script());
    let model = format!("replay:{}", c.display());
    assert_eq!(lead_run(dir, &model).await.code, 0);
    std::fs::write(dir.join("ws/a.txt"), "changed\n").unwrap();
    // Turn 0 must come from the ledger (the cassette's would fail); turns 1 and 2 live.
    let mut script = lead_script();
    script["lead"][0] = json!({"error": {"status": 500, "message": "turn 0 was asked"}});
    script["lead"][2]["text"] = json!("live answer");
    std::fs::write(&c, script.to_string()).unwrap();
    let again = lead_run(dir, &model).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    let end = again.completed();
    assert_eq!(end["final_message"], "live answer");
    let calls = again.of_type("tool_call");
    assert_eq!(calls[0]["resumed"], true, "turn 0 was replayed");
    assert_eq!(calls[1]["resumed"], true, "turn 0 was replayed");
    assert!(
        calls[2].get("resumed").is_none(),
        "turn 1 is live: {}",
        calls[2]
    );
    assert!(again.first("message").get("resumed").is_none());
    // The live final answer's usage is this run's.
    assert_eq!(end["usage"]["total_tokens"], 12);
    assert_eq!(
        std::fs::read_to_string(dir.join("ws/out.txt")).unwrap(),
        "x"
    );
    // Run a third time: the new record replays whole, the live answer included.
    std::fs::write(&c, fail_every_call().to_string()).unwrap();
    let third = lead_run(dir, &model).await;
    assert_eq!(third.code, 0, "{}", third.stderr);
    assert_eq!(third.completed()["final_message"], "live answer");
}
