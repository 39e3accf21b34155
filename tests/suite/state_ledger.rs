//! What the `--state` ledger holds (contract §15): every model response of the run — the
//! lead's, each sub-agent's, each `--each` item's — on disk before its events; `--record`
//! with `--state` writing every response the run used, taken from the ledger or live; a
//! ledger without sub-agents' responses (an earlier deerflow's) still resuming; a ledger
//! that cannot be written failing the run.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;

use super::harness::{cassette, deerflow, workspace};
use crate::support::{MockServer, Reply, Rule};

pub(super) fn config(dir: &Path, server: &MockServer) {
    let yaml = format!(
        "models:\n  - {{name: lead, use: openai, model: m-lead, base_url: '{}', api_key: sk-test}}\n",
        server.url()
    );
    std::fs::write(dir.join("deerflow.yaml"), yaml).unwrap();
}

pub(super) fn ledger_lines(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("st/ledger.jsonl")).unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The ledger's responses of `agent` (`lead`, or a task id).
fn responses_of(lines: &[Value], agent: &str) -> usize {
    lines
        .iter()
        .filter(|l| match agent {
            "lead" => l["kind"] == "response",
            id => l["kind"] == "task_response" && l["task_id"] == id,
        })
        .count()
}

/// Runs deerflow with `args` in `dir`, reading its events as they come: when a `usage`
/// event (one per model response) or the terminal event of an item or a lead's task is
/// read, the ledger must already hold what it reports. Returns the events and the exit code.
async fn run_watching_the_ledger(dir: &Path, args: &[&str]) -> (Vec<Value>, i32) {
    let mut child = deerflow(args).cwd(dir).command().spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut events = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        let e: Value = serde_json::from_str(&line).unwrap();
        if e["type"] == "usage" {
            let agent = e["task_id"].as_str().unwrap_or("lead").to_string();
            let n = seen.entry(agent.clone()).or_default();
            *n += 1;
            let held = responses_of(&ledger_lines(dir), &agent);
            assert!(
                held >= *n,
                "response {n} of {agent} reported before the ledger held it ({held})"
            );
        }
        let ended = [
            "task_completed",
            "task_failed",
            "task_timed_out",
            "task_cancelled",
        ];
        let kind = e["type"].as_str().unwrap_or_default();
        if ended.contains(&kind) && e.get("resumed").is_none() {
            // An item's end, or a lead task's.
            let held = ledger_lines(dir)
                .iter()
                .any(|l| match e["item_index"].as_u64() {
                    Some(i) => l["kind"] == "item" && l["index"] == i,
                    None => l["kind"] == "task" && l["task_id"] == e["task_id"],
                });
            assert!(held, "{e} was reported before the ledger held it");
        }
        events.push(e);
    }
    let code = child.wait().await.unwrap().code().unwrap_or(-1);
    (events, code)
}

/// The lead fans out two tasks; each sub-agent lists the workspace, then answers; the lead
/// answers: six model calls.
fn two_tasks(server: &MockServer) {
    server.push(Rule::body_contains("Task Succeeded").reply(Reply::text("final").usage(10, 2)));
    server.push(
        Rule::when(|r| {
            r.raw_body.contains("SUBTASK")
                && !r.raw_body.contains("LEADPROMPT")
                && r.raw_body.contains(r#""role":"tool""#)
        })
        .times(2)
        .reply(Reply::text("sub done").usage(7, 3)),
    );
    let calls = (1..=2)
        .map(|i| {
            let args = json!({"description": format!("part {i}"),
                "prompt": format!("SUBTASK {i}"), "subagent_type": "general-purpose"});
            (format!("call_{i}"), "task".to_string(), args)
        })
        .collect();
    server.push(Rule::body_contains("LEADPROMPT").reply(Reply::tool_calls(calls).usage(100, 20)));
    server.push(
        Rule::body_contains("SUBTASK")
            .times(2)
            .reply(Reply::tool_calls(vec![("ls_1", "ls", json!({}))]).usage(5, 1)),
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_response_of_the_lead_and_its_sub_agents_is_in_the_ledger_before_its_events() {
    let server = MockServer::start().await;
    let ws = workspace();
    let dir = ws.path();
    config(dir, &server);
    two_tasks(&server);
    let args = [
        "run",
        "--json",
        "--state",
        "st",
        "LEADPROMPT: split the work",
    ];
    let (events, code) = run_watching_the_ledger(dir, &args).await;
    assert_eq!(code, 0, "{events:?}");
    let lines = ledger_lines(dir);
    let responses = lines
        .iter()
        .filter(|l| l["kind"] == "response" || l["kind"] == "task_response")
        .count();
    assert_eq!(server.request_count(), 6);
    assert_eq!(responses, server.request_count(), "{lines:#?}");
    assert_eq!(responses_of(&lines, "lead"), 2);
    for (id, part) in [("call_1", "part 1"), ("call_2", "part 2")] {
        let mine: Vec<&Value> = lines
            .iter()
            .filter(|l| l["kind"] == "task_response" && l["task_id"] == id)
            .collect();
        let turns: Vec<&Value> = mine.iter().map(|l| &l["turn"]).collect();
        assert_eq!(turns, [0, 1], "{id}");
        assert!(mine.iter().all(|l| l["description"] == part));
        // The cassette's form: a replay reads it as it is.
        assert_eq!(mine[0]["response"]["tool_calls"][0]["name"], "ls");
        assert_eq!(mine[1]["response"]["text"], "sub done");
        assert_eq!(mine[1]["response"]["usage"]["total_tokens"], 10);
        // Its end, with what a resume matches it by.
        let end: Vec<&Value> = lines
            .iter()
            .filter(|l| l["kind"] == "task" && l["task_id"] == id)
            .collect();
        assert_eq!(end.len(), 1, "{id}");
        assert_eq!(end[0]["status"], "completed");
        assert_eq!(end[0]["text"], "sub done");
        assert_eq!(end[0]["description"], part);
        assert_eq!(end[0]["prompt"], part.replace("part", "SUBTASK"));
        assert_eq!(end[0]["subagent_type"], "general-purpose");
        assert_eq!(end[0]["turns"], 2);
        assert_eq!(end[0]["usage"]["total_tokens"], 16);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_item_response_is_in_the_ledger_before_its_events() {
    let server = MockServer::start().await;
    let ws = workspace();
    let dir = ws.path();
    config(dir, &server);
    server.push(
        Rule::body_contains("Check")
            .always()
            .reply(Reply::text("ok").usage(5, 1).delay_ms(10)),
    );
    let items: String = (0..24).map(|i| format!("item {i}\n")).collect();
    std::fs::write(dir.join("items.txt"), items).unwrap();
    let args = [
        "run",
        "--json",
        "--each",
        "items.txt",
        "--state",
        "st",
        "--max-concurrent",
        "6",
        "Check {{item}}",
    ];
    let (events, code) = run_watching_the_ledger(dir, &args).await;
    assert_eq!(code, 0, "{events:?}");
    let lines = ledger_lines(dir);
    let responses: Vec<&Value> = lines
        .iter()
        .filter(|l| l["kind"] == "task_response")
        .collect();
    assert_eq!(server.request_count(), 24);
    assert_eq!(responses.len(), server.request_count());
    for i in 0..24 {
        let id = format!("item-{i}");
        assert_eq!(responses_of(&lines, &id), 1, "{id}");
        let r = responses
            .iter()
            .find(|l| l["task_id"] == id.as_str())
            .unwrap();
        assert_eq!(r["description"], format!("item {i}"));
        assert_eq!(r["response"]["text"], "ok");
    }
}

/// A lead that delegates two tasks (one of two turns) and answers.
fn lead_script() -> Value {
    let task = |d: &str| {
        json!({"name": "task", "arguments":
        {"description": d, "prompt": format!("do {d}"), "subagent_type": "general-purpose"}})
    };
    json!({"version": 1,
    "lead": [{"tool_calls": [task("one"), task("two")]}, {"text": "final"}],
    "tasks": {
        "one": [{"tool_calls": [{"name": "ls", "arguments": {}}]}, {"text": "1"}],
        "two": [{"text": "2", "usage": {"input_tokens": 3, "output_tokens": 1}}]
    }})
}

fn fail_every_call() -> Value {
    let no = json!({"error": {"status": 500, "message": "called"}});
    json!({"version": 1, "lead": [no, no, no], "default_task": [no, no]})
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Resumed, the run makes no model call, yet `--record` writes every response it used —
/// the sub-agents' too — and that cassette replays the whole run.
#[tokio::test(flavor = "multi_thread")]
async fn record_with_state_writes_every_response_used_sub_agents_included() {
    let ws = workspace();
    let dir = ws.path();
    let c = cassette(dir, lead_script());
    let model = format!("replay:{}", c.display());
    let state = ["--state", "st"];
    let run = |more: Vec<&str>| {
        let mut a = vec!["run", "--json", "-m", &model];
        a.extend(more);
        a.push("go");
        deerflow(a.into_iter().map(String::from).collect::<Vec<_>>())
            .cwd(dir)
            .json()
    };
    let first = run(state.to_vec()).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    std::fs::write(&c, fail_every_call().to_string()).unwrap();
    let again = run([&state[..], &["--record", "rec.json"]].concat()).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    // Every call would fail: the lead's responses are replayed, no sub-agent runs.
    assert!(again.of_type("task_running").is_empty());
    assert_eq!(again.completed()["usage"]["total_tokens"], 0);
    assert_eq!(again.completed()["tasks"]["resumed"], 2);
    let rec = read_json(&dir.join("rec.json"));
    assert_eq!(rec["lead"].as_array().unwrap().len(), 2, "{rec}");
    assert_eq!(rec["tasks"]["one"].as_array().unwrap().len(), 2, "{rec}");
    assert_eq!(rec["tasks"]["one"][1]["text"], "1");
    assert_eq!(rec["tasks"]["two"][0]["text"], "2");
    assert_eq!(rec["tasks"]["two"][0]["usage"]["total_tokens"], 4);
    // The recorded cassette is the whole run: replayed without the ledger, it completes.
    let replayed = deerflow(["run", "--json", "-m", "replay:rec.json", "go"])
        .cwd(dir)
        .json()
        .await;
    assert_eq!(replayed.code, 0, "{}", replayed.stderr);
    assert_eq!(replayed.completed()["final_message"], "final");
    assert_eq!(replayed.completed()["tasks"]["completed"], 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn record_with_state_writes_the_responses_of_resumed_items() {
    let ws = workspace();
    let dir = ws.path();
    std::fs::write(dir.join("items.txt"), "a\nb\nc\n").unwrap();
    let c = cassette(
        dir,
        json!({"version": 1, "tasks": {"item 1": [{"text": "B"}]}, "default_task": [{"text": "x"}]}),
    );
    let model = format!("replay:{}", c.display());
    let each = |more: &[&str]| {
        let mut a = vec!["run", "--json", "-m", model.as_str(), "--each", "items.txt"];
        a.extend_from_slice(more);
        a.push("Do {{item}}");
        deerflow(a.into_iter().map(String::from).collect::<Vec<_>>())
            .cwd(dir)
            .json()
    };
    assert_eq!(each(&["--state", "st"]).await.code, 0);
    std::fs::write(&c, fail_every_call().to_string()).unwrap();
    let again = each(&["--state", "st", "--record", "rec.json"]).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.completed()["tasks"]["resumed"], 3);
    let rec = read_json(&dir.join("rec.json"));
    assert_eq!(rec["tasks"]["item 0"][0]["text"], "x", "{rec}");
    assert_eq!(rec["tasks"]["item 1"][0]["text"], "B", "{rec}");
    assert_eq!(rec["tasks"]["item 2"][0]["text"], "x", "{rec}");
}

/// Ledgers written before sub-agents' responses and lead tasks' ends were recorded have
/// none of those lines (a task is held by its call's `tool` line only): they resume as
/// they did.
#[tokio::test(flavor = "multi_thread")]
async fn a_ledger_without_sub_agent_responses_still_resumes() {
    let ws = workspace();
    let dir = ws.path();
    let c = cassette(dir, lead_script());
    let model = format!("replay:{}", c.display());
    let args = ["run", "--json", "-m", &model, "--state", "st", "go"];
    assert_eq!(deerflow(args).cwd(dir).json().await.code, 0);
    let ledger = dir.join("st/ledger.jsonl");
    assert!(std::fs::read_to_string(&ledger)
        .unwrap()
        .contains(r#"{"kind":"task","#));
    strip_task_responses(&ledger);
    std::fs::write(&c, fail_every_call().to_string()).unwrap();
    let again = deerflow(args).cwd(dir).json().await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.completed()["final_message"], "final");
    assert_eq!(again.completed()["tasks"]["resumed"], 2);
    assert!(again.of_type("task_running").is_empty(), "no sub-agent ran");
    // The same for an `--each` ledger: its items resume, with --record too.
    std::fs::write(dir.join("items.txt"), "a\nb\n").unwrap();
    let c2 = cassette(dir, json!({"version": 1, "default_task": [{"text": "x"}]}));
    let each_model = format!("replay:{}", c2.display());
    let each = [
        "run",
        "--json",
        "-m",
        &each_model,
        "--each",
        "items.txt",
        "--state",
        "st2",
        "Do {{item}}",
    ];
    assert_eq!(deerflow(each).cwd(dir).json().await.code, 0);
    strip_task_responses(&dir.join("st2/ledger.jsonl"));
    std::fs::write(&c2, fail_every_call().to_string()).unwrap();
    let again = deerflow([&each[..], &["--record", "rec.json"]].concat())
        .cwd(dir)
        .json()
        .await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.completed()["tasks"]["resumed"], 2);
}

fn strip_task_responses(ledger: &Path) {
    let text = std::fs::read_to_string(ledger).unwrap();
    assert!(text.contains(r#""kind":"task_response""#));
    let newer = |l: &str| {
        l.starts_with(r#"{"kind":"task_response""#) || l.starts_with(r#"{"kind":"task","#)
    };
    let old: String = text
        .lines()
        .filter(|l| !newer(l))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(ledger, old).unwrap();
}

/// A ledger that cannot be written (here: past the file size limit) fails the run with
/// exit 1 naming it; what reached the disk resumes.
#[tokio::test(flavor = "multi_thread")]
async fn a_ledger_write_error_fails_the_run_and_what_was_written_resumes() {
    let ws = workspace();
    let dir = ws.path();
    let items: String = (0..40).map(|i| format!("item {i}\n")).collect();
    std::fs::write(dir.join("items.txt"), items).unwrap();
    let c = cassette(
        dir,
        json!({"version": 1, "default_task": [{"text": "ok", "delay_ms": 5}]}),
    );
    let model = format!("replay:{}", c.display());
    let args = [
        "run",
        "--json",
        "-m",
        &model,
        "--each",
        "items.txt",
        "--state",
        "st",
        "--max-concurrent",
        "2",
        "Do {{item}}",
    ];
    let mut cmd = deerflow(args).cwd(dir).command();
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 4096,
                rlim_max: 4096,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
            // EFBIG from write(2) instead of the signal's default (a core dump).
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let out = cmd.output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let end: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(out.status.code(), Some(1), "{end}");
    assert_eq!(end["type"], "run_completed");
    assert_eq!(end["status"], "failed");
    let error = end["error"].as_str().unwrap();
    assert!(
        error.contains("--state st") && error.contains("cannot write the ledger"),
        "{error}"
    );
    let done_before = ledger_lines(dir)
        .iter()
        .filter(|l| l["kind"] == "item" && l["status"] == "completed")
        .count();
    assert!(done_before > 0 && done_before < 40, "{done_before}");
    let again = deerflow(args).cwd(dir).json().await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.completed()["tasks"]["completed"], 40);
    assert_eq!(again.completed()["tasks"]["resumed"], done_before as u64);
}
