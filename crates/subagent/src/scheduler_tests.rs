//! The scheduler's admission and queue order, and what the task tool answers the lead for
//! each way a sub-agent can end — without a binary or a provider.

use deerflow_model::ToolCall;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::record::{EndHook, Ended, TaskRecord};
use super::scheduler::{Admission, Scheduler, SchedulerLimits};
use super::state::TaskState;
use super::task_tool::TaskTool;
use super::{SubagentSetup, SubagentType};
use deerflow_agent::guards::{Budget, LoopLimits};
use deerflow_agent::testing::{call, calls, text, Capture, Script};
use deerflow_agent::{RunControl, RunShared};
use deerflow_events::usage::Ledger;
use deerflow_events::{Envelope, Event, EventSink, EventWriter, WarningCode};
use deerflow_model::{ChatModel, ModelError, ModelResponse};
use deerflow_tools::registry::ToolRegistry;
use deerflow_tools::task_end::TaskStatus;
use deerflow_tools::{SandboxLimits, Tool, ToolContext, ToolStatus};
use deerflow_workspace::Workspace;

fn kind(max_turns: u32) -> Arc<SubagentType> {
    Arc::new(SubagentType {
        name: "general-purpose".into(),
        source: "built-in",
        description: "does things".into(),
        system_prompt: "help".into(),
        tools: None,
        disallowed_tools: vec![],
        skills: None,
        model: "m".into(),
        max_turns,
        timeout_seconds: 30.0,
    })
}

struct Fixture {
    sched: Arc<Scheduler>,
    ctx: ToolContext,
    events: EventSink,
    seen: Arc<Mutex<Vec<Envelope>>>,
    _writer: EventWriter,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn new(
        script: Vec<Result<ModelResponse, ModelError>>,
        max_concurrent: u32,
        max_tasks: u32,
        max_turns: u32,
    ) -> Self {
        Self::hooked(script, max_concurrent, max_tasks, max_turns, None)
    }

    /// With `end_hook` told of every task's end.
    fn hooked(
        script: Vec<Result<ModelResponse, ModelError>>,
        max_concurrent: u32,
        max_tasks: u32,
        max_turns: u32,
        end_hook: Option<Arc<dyn EndHook>>,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Arc::new(Workspace::new(dir.path(), None).unwrap());
        let limits = Arc::new(SandboxLimits::default());
        let model: Arc<dyn ChatModel> = Arc::new(Script::new(script));
        let setup = Arc::new(SubagentSetup {
            types: vec![kind(max_turns)],
            models: HashMap::from([("m".to_string(), model)]),
            vision: Default::default(),
            skills: vec![],
        });
        let control = Arc::new(RunControl::new(None));
        let shared = Arc::new(RunShared {
            ledger: Arc::new(Ledger::new(HashMap::new())),
            budget: Budget::new(None),
            loop_limits: LoopLimits::default(),
            control: control.clone(),
            context: Arc::new(deerflow_agent::KeepAll),
            stops: Default::default(),
        });
        let (events, writer, seen) = Capture::start();
        let sched = Scheduler::new(
            setup,
            shared,
            events.clone(),
            SchedulerLimits {
                workspace: workspace.clone(),
                limits: limits.clone(),
                tools: Arc::new(ToolRegistry::builtin(false)),
                max_concurrent,
                max_tasks,
                output_schema: None,
                item_images: Vec::new(),
                end_hook,
            },
        );
        let ctx = ToolContext {
            workspace,
            limits,
            cancel: control.cancel.clone(),
        };
        Self {
            sched,
            ctx,
            events,
            seen,
            _writer: writer,
            _dir: dir,
        }
    }

    /// The events so far as (type, task id, detail): a marker sent last is seen last.
    /// The `task_*` events as (type, task id), in order.
    async fn task_events(&mut self) -> Vec<(String, String)> {
        self.events()
            .await
            .into_iter()
            .filter(|(t, ..)| t.starts_with("task_"))
            .map(|(t, id, _)| (t, id))
            .collect()
    }

    async fn events(&mut self) -> Vec<(String, String, Value)> {
        self.events
            .emit(Event::warning(WarningCode::ConfigIgnored, "end_of_test"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let seen = self.seen.lock().unwrap().clone();
            if let Some(end) = seen.iter().position(
                |e| matches!(&e.event, Event::Warning { message, .. } if message == "end_of_test"),
            ) {
                self.seen.lock().unwrap().clear();
                return seen[..end]
                    .iter()
                    .map(|e| summary(&e.event, e.task_id.as_deref()))
                    .collect();
            }
            assert!(std::time::Instant::now() < deadline, "events never arrived");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    async fn task(&self, id: &str, description: &str, kind: &str) -> (ToolStatus, String) {
        let tool = TaskTool::new(self.sched.clone());
        let args = json!({"description": description, "prompt": "do it", "subagent_type": kind});
        let out = tool.call(&ToolCall::new(id, "task", args), &self.ctx).await;
        // Every answer carries the task's end as data, agreeing with its text.
        let end = out.task_end.clone().expect("a task answer without its end");
        assert_eq!(
            end.status == TaskStatus::Completed,
            out.status == ToolStatus::Ok
        );
        assert!(out.text().ends_with(&end.detail), "{end:?}");
        (out.status, out.text().into_owned())
    }
}

fn summary(e: &Event, task_id: Option<&str>) -> (String, String, Value) {
    let v = serde_json::to_value(e).unwrap();
    let id = v["task_id"]
        .as_str()
        .or(task_id)
        .unwrap_or_default()
        .to_string();
    let detail = match e {
        Event::TaskQueued { position, .. } => json!(position),
        Event::TaskFailed { stop_reason, .. } | Event::TaskCompleted { stop_reason, .. } => {
            json!(stop_reason)
        }
        Event::Warning { code, .. } => json!(code),
        _ => Value::Null,
    };
    (e.type_name().to_string(), id, detail)
}

fn rec(id: &str) -> Arc<TaskRecord> {
    Arc::new(TaskRecord::new(id, id, "p", kind(5)))
}

#[tokio::test]
async fn tasks_start_up_to_the_limit_then_queue_in_order() {
    let mut f = Fixture::new(vec![], 2, 4, 5);
    let recs: Vec<_> = ["a", "b", "c", "d"]
        .iter()
        .map(|id| f.sched.accept(id, id, "p", kind(5)).unwrap())
        .collect();
    assert!(
        f.sched.accept("e", "e", "p", kind(5)).is_none(),
        "past max_tasks"
    );
    let admissions: Vec<_> = recs.iter().map(|r| f.sched.admit(r)).collect();
    let positions: Vec<Option<u32>> = admissions
        .iter()
        .map(|a| match a {
            Admission::Now => None,
            Admission::Queued { position, .. } => Some(*position),
        })
        .collect();
    assert_eq!(positions, [None, None, Some(1), Some(2)]);
    // `c` is handed the first free slot; `d` was cancelled while queued and is skipped.
    assert_eq!(recs[3].cancel(&f.events, "gone").status, ToolStatus::Error);
    f.sched.release();
    f.sched.release();
    use futures_util::FutureExt;
    assert_eq!(
        recs[2].slot_answer().now_or_never(),
        Some(true),
        "c got its slot"
    );
    assert_eq!(recs[3].slot_answer().now_or_never(), None, "d was skipped");
    let counts = f.sched.counts();
    assert_eq!((counts.total, counts.cancelled), (4, 1));
    let expect = [
        ("task_started", "a"),
        ("task_started", "b"),
        ("task_queued", "c"),
        ("task_queued", "d"),
        ("task_cancelled", "d"),
        ("task_started", "c"),
    ];
    assert_eq!(
        f.task_events().await,
        expect.map(|(t, id)| (t.to_string(), id.to_string()))
    );
}

#[tokio::test]
async fn a_terminal_state_is_reported_once() {
    let (events, writer, seen) = Capture::start();
    let r = rec("t");
    assert!(r.start(&events));
    assert_eq!(
        r.complete(&events, "fine".into(), None).text(),
        "Task Succeeded. Result: fine"
    );
    let late = r.time_out(&events);
    assert_eq!(
        late.text(),
        "Task completed. Error: the task had already ended"
    );
    // The end it carries is the one the task had.
    assert_eq!(late.task_end.map(|e| e.status), Some(TaskStatus::Completed));
    assert_eq!(r.state.get(), TaskState::Completed);
    drop(events);
    writer.finish(|| false).await;
    let types: Vec<&str> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|e| e.event.type_name())
        .collect();
    assert_eq!(types, ["task_started", "task_completed"]);
}

#[tokio::test]
async fn the_lead_reads_how_each_task_ended() {
    let mut f = Fixture::new(
        vec![
            text("all good"),
            Err(ModelError::Script("provider down".into())),
        ],
        1,
        3,
        5,
    );
    assert_eq!(
        f.task("t1", "first", "general-purpose").await,
        (ToolStatus::Ok, "Task Succeeded. Result: all good".into())
    );
    assert_eq!(
        f.task("t2", "second", "general-purpose").await,
        (
            ToolStatus::Error,
            "Task failed. Error: provider down".into()
        )
    );
    // Ended tasks are forgotten; their outcomes still count.
    assert_eq!(f.sched.live_tasks(), 0);
    let c = f.sched.counts();
    assert_eq!((c.total, c.completed, c.failed), (2, 1, 1));
    let (status, msg) = f.task("t3", "third", "reviewer").await;
    assert_eq!(status, ToolStatus::Error);
    assert_eq!(
        msg,
        "Task failed. Error: Unknown subagent type 'reviewer'. Available: general-purpose"
    );
    let events = f.events().await;
    let terminal: Vec<(String, String)> = events
        .iter()
        .filter(|(t, ..)| t == "task_completed" || t == "task_failed" || t == "warning")
        .map(|(t, id, d)| {
            (
                t.clone(),
                if t == "warning" {
                    d.to_string()
                } else {
                    id.clone()
                },
            )
        })
        .collect();
    assert_eq!(
        terminal,
        [
            ("task_completed".to_string(), "t1".to_string()),
            ("task_failed".into(), "t2".into()),
            ("warning".into(), "\"unknown_subagent_type\"".into()),
        ]
    );
}

#[tokio::test]
async fn an_empty_prompt_is_refused_and_no_task() {
    let f = Fixture::new(vec![text("never")], 1, 2, 5);
    let tool = TaskTool::new(f.sched.clone());
    let args = json!({"description": "d", "prompt": "  \n", "subagent_type": "general-purpose"});
    let out = tool.call(&ToolCall::new("t1", "task", args), &f.ctx).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out
        .text()
        .starts_with("Task failed. Error: the prompt is empty"));
    assert_eq!(f.sched.counts().total, 0);
}

#[tokio::test]
async fn past_the_task_limit_a_call_is_refused_and_no_task() {
    let mut f = Fixture::new(vec![text("one")], 1, 1, 5);
    assert_eq!(
        f.task("t1", "first", "general-purpose").await.0,
        ToolStatus::Ok
    );
    let (status, msg) = f.task("t2", "second", "general-purpose").await;
    assert_eq!(status, ToolStatus::Error);
    assert!(
        msg.starts_with("Task failed. Error: task limit reached"),
        "{msg}"
    );
    assert_eq!(f.sched.counts().total, 1);
    assert!(f
        .events()
        .await
        .iter()
        .any(|(t, _, d)| t == "warning" && d == &json!("task_limit")));
}

#[tokio::test]
async fn a_sub_agent_out_of_turns_without_text_fails_turn_capped() {
    let mut f = Fixture::new(vec![calls(vec![call("x", "hi")], None)], 1, 2, 1);
    let (status, msg) = f.task("t1", "capped", "general-purpose").await;
    assert_eq!(status, ToolStatus::Error);
    assert_eq!(msg, "Task failed. Error: Reached max_turns=1");
    let failed: Vec<Value> = f
        .events()
        .await
        .into_iter()
        .filter(|(t, ..)| t == "task_failed")
        .map(|(.., d)| d)
        .collect();
    assert_eq!(failed, [json!("turn_capped")]);
}

#[tokio::test]
async fn a_cancelled_run_cancels_a_queued_task_without_starting_it() {
    let mut f = Fixture::new(vec![], 1, 2, 5);
    let holder = f.sched.accept("busy", "busy", "p", kind(5)).unwrap();
    assert!(matches!(f.sched.admit(&holder), Admission::Now));
    f.ctx.cancel.cancel();
    let (status, msg) = f.task("t1", "waits", "general-purpose").await;
    assert_eq!(status, ToolStatus::Error);
    assert_eq!(msg, "Task cancelled. Error: Run cancelled");
    let started: Vec<String> = f
        .events()
        .await
        .into_iter()
        .filter(|(t, ..)| t == "task_started")
        .map(|(_, id, _)| id)
        .collect();
    assert_eq!(started, ["busy"]);
}

#[tokio::test]
async fn a_run_stopping_wakes_its_queued_tasks_and_they_cancel_themselves() {
    let mut f = Fixture::new(vec![], 1, 3, 5);
    let holder = f.sched.accept("busy", "busy", "p", kind(5)).unwrap();
    assert!(matches!(f.sched.admit(&holder), Admission::Now));
    let stop = async {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        f.ctx.cancel.cancel();
    };
    let ((s1, m1), (s2, _), ()) = tokio::join!(
        f.task("t1", "waits", "general-purpose"),
        f.task("t2", "waits too", "general-purpose"),
        stop
    );
    assert_eq!((s1, s2), (ToolStatus::Error, ToolStatus::Error));
    assert_eq!(m1, "Task cancelled. Error: Run cancelled");
    let expect = [
        ("task_started", "busy"),
        ("task_queued", "t1"),
        ("task_queued", "t2"),
        ("task_cancelled", "t1"),
        ("task_cancelled", "t2"),
    ];
    assert_eq!(
        f.task_events().await,
        expect.map(|(t, id)| (t.to_string(), id.to_string()))
    );
}

/// A task's id, description and prompt, with how it ended.
type HeardEnd = (String, String, String, TaskStatus, String);

/// Records each end it hears and hands back a gate.
#[derive(Default)]
struct Heard(Mutex<Vec<HeardEnd>>);

impl EndHook for Heard {
    fn ended(&self, rec: &TaskRecord, end: &Ended<'_>) -> Option<deerflow_events::Gate> {
        let what = (
            rec.id().to_string(),
            rec.description().to_string(),
            rec.prompt().to_string(),
            end.status,
            end.text.to_string(),
        );
        self.0.lock().unwrap().push(what);
        Some(deerflow_events::Gate::new(|| {}))
    }
}

/// The scheduler's end hook hears every task it accepts — a lead's `task` call as an
/// item would be — and the terminal event waits at the gate it returns.
#[tokio::test]
async fn the_end_hook_hears_every_task_and_its_terminal_event_waits_at_its_gate() {
    let heard = Arc::new(Heard::default());
    let script = vec![text("all good"), Err(ModelError::Script("down".into()))];
    let hook: Arc<dyn EndHook> = heard.clone();
    let f = Fixture::hooked(script, 1, 3, 5, Some(hook));
    f.task("t1", " first ", "general-purpose").await;
    f.task("t2", "second", "general-purpose").await;
    let got = heard.0.lock().unwrap().clone();
    let expect = [
        ("t1", "first", TaskStatus::Completed, "all good"),
        ("t2", "second", TaskStatus::Failed, "down"),
    ];
    let expect: Vec<_> = expect
        .iter()
        .map(|(id, d, s, t)| {
            (
                id.to_string(),
                d.to_string(),
                "do it".into(),
                *s,
                t.to_string(),
            )
        })
        .collect();
    assert_eq!(got, expect);
    f.events
        .emit(Event::warning(WarningCode::ConfigIgnored, "end_of_test"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let gated = loop {
        let seen = f.seen.lock().unwrap().clone();
        if seen
            .iter()
            .any(|e| matches!(&e.event, Event::Warning { message, .. } if message == "end_of_test"))
        {
            let ends = seen.iter().filter(|e| {
                matches!(
                    e.event,
                    Event::TaskCompleted { .. } | Event::TaskFailed { .. }
                )
            });
            break ends.map(|e| e.gate.is_some()).collect::<Vec<_>>();
        }
        assert!(std::time::Instant::now() < deadline, "events never arrived");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    };
    assert_eq!(gated, [true, true]);
}
