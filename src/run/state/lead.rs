//! Resuming a run without `--each` (contract §15): the lead's recorded responses are
//! replayed in order, with no model call, for as long as every tool result fed back equals
//! the recorded one. Read-only tools (and those acting on the run itself: `present_files`,
//! `ask_clarification`, `view_image`) run again and are compared; other tools recorded as
//! finished are not run again; a `task` asked the same as a completed one of the ledger
//! returns its result. At the first difference, or past the end of the record, the run goes
//! on live, and what it does from there is recorded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;

use super::ledger::{TaskAsked, ToolEnd};
use super::tasks::ledger_error;
use super::{DoneTask, StateDir};
use crate::model::providers::replay::{from_response, to_response, RecordLog, ScriptedResponse};
use crate::model::{
    AgentId, CallContext, CallPurpose, ChatModel, ChatRequest, ModelError, ModelLimits,
    ModelResponse, ToolArgs, ToolCall, ToolSpec,
};
use crate::subagent::item::Resumed;
use crate::subagent::Scheduler;
use crate::tools::task_end::{TaskEnd, TaskStatus};
use crate::tools::{Concurrency, Tool, ToolBox, ToolContext, ToolOutput};

/// Tools run again and compared: those whose result depends only on the workspace, and
/// those whose effect is on this run itself (the artifacts it lists, the question that
/// ends it, the image its next request shows), which a recorded result would not have.
const RUN_AGAIN: [&str; 7] = [
    "ls",
    "read_file",
    "glob",
    "grep",
    "present_files",
    "ask_clarification",
    "view_image",
];

/// The lead's replay from the ledger, shared by its model and its tools.
pub struct LeadReplay {
    state: Arc<StateDir>,
    responses: Mutex<Vec<Option<serde_json::Value>>>,
    tools: Mutex<HashMap<String, ToolEnd>>,
    /// Completed tasks of the ledger.
    tasks: Mutex<Vec<DoneTask>>,
    /// The calls of the responses replayed: only they may take a recorded result (a live
    /// response may reuse an id, a replay model's are derived from the turn).
    replayed_calls: Mutex<std::collections::HashSet<String>>,
    /// Every call of a replayed response (its events say `resumed`).
    replayed_ids: Mutex<std::collections::HashSet<String>>,
    /// Whether the lead's last response was replayed.
    last_replayed: AtomicBool,
    /// Set at the first difference or past the end of the record; never cleared.
    live: AtomicBool,
    replayed: AtomicU32,
    resumed_tasks: AtomicU32,
    record: Option<Arc<RecordLog>>,
    scheduler: Option<Arc<Scheduler>>,
}

impl LeadReplay {
    pub fn new(
        state: Arc<StateDir>,
        record: Option<Arc<RecordLog>>,
        scheduler: Option<Arc<Scheduler>>,
    ) -> Arc<Self> {
        let lead = state.take_lead();
        Arc::new(Self {
            state,
            responses: Mutex::new(lead.responses.into_iter().map(Some).collect()),
            tools: Mutex::new(lead.tools),
            tasks: Mutex::new(lead.tasks),
            replayed_calls: Mutex::default(),
            replayed_ids: Mutex::default(),
            last_replayed: AtomicBool::new(false),
            live: AtomicBool::new(false),
            replayed: AtomicU32::new(0),
            resumed_tasks: AtomicU32::new(0),
            record,
            scheduler,
        })
    }

    /// The lead's model, answering from the record while it holds.
    pub fn model(self: &Arc<Self>, inner: Arc<dyn ChatModel>) -> Arc<dyn ChatModel> {
        Arc::new(LedgerModel {
            inner,
            replay: self.clone(),
        })
    }

    /// The lead's tools, each answering from or compared with the record.
    pub fn tools(self: &Arc<Self>, tools: ToolBox) -> ToolBox {
        tools
            .into_iter()
            .map(|inner| {
                Arc::new(LedgerTool {
                    inner,
                    replay: self.clone(),
                }) as Arc<dyn Tool>
            })
            .collect()
    }

    /// Lead responses taken from the ledger.
    pub fn replayed(&self) -> u32 {
        self.replayed.load(Ordering::Relaxed)
    }

    /// Tasks taken from the ledger.
    pub fn resumed_tasks(&self) -> u32 {
        self.resumed_tasks.load(Ordering::Relaxed)
    }

    fn is_live(&self) -> bool {
        self.live.load(Ordering::SeqCst)
    }

    fn go_live(&self, why: &str) {
        if !self.live.swap(true, Ordering::SeqCst) {
            tracing::debug!(why, "the resumed lead goes on live");
        }
    }

    /// The recorded response for `turn`, while the replay holds.
    fn next(&self, turn: usize) -> Option<ScriptedResponse> {
        if self.is_live() {
            return None;
        }
        let taken = lock(&self.responses).get_mut(turn).and_then(Option::take);
        let parsed = taken.and_then(|v| serde_json::from_value(v).ok());
        if parsed.is_none() {
            self.go_live("past the end of the record");
        }
        parsed
    }

    /// The recorded result of call `id` of a replayed response. A difference found in
    /// one of its results sends the next model call live; its other calls still take
    /// theirs (what they did is done).
    fn recorded(&self, id: &str) -> Option<ToolEnd> {
        if !lock(&self.replayed_calls).remove(id) {
            return None;
        }
        lock(&self.tools).remove(id)
    }

    /// A completed task of the ledger asked the same, taken. The task tool trims the
    /// description (a task's own line holds it trimmed, its call's `tool` line as asked).
    fn completed_task(&self, args: &TaskArgs) -> Option<DoneTask> {
        let mut g = lock(&self.tasks);
        let at = g.iter().position(|d| {
            let t = &d.asked;
            t.description.trim() == args.description.trim()
                && t.prompt == args.prompt
                && t.subagent_type == args.subagent_type
        })?;
        Some(g.remove(at))
    }

    /// Records a result, on disk when this returns; a write error is the run's failure
    /// (the model call after it fails).
    async fn keep(&self, call: &ToolCall, name: &str, out: &ToolOutput, task: Option<TaskAsked>) {
        let end = ToolEnd {
            call_id: call.id.clone(),
            name: name.to_string(),
            ok: out.status == crate::events::ToolStatus::Ok,
            output: out.text().into_owned(),
            task,
        };
        let _ = self.state.tool_ended(end).await;
    }
}

impl crate::agent::ResumeMarks for LeadReplay {
    fn response(&self) -> bool {
        self.last_replayed.load(Ordering::SeqCst)
    }

    fn call(&self, id: &str) -> bool {
        lock(&self.replayed_ids).contains(id)
    }

    fn replays(&self, turn: usize) -> bool {
        !self.is_live() && lock(&self.responses).get(turn).is_some_and(Option::is_some)
    }
}

struct LedgerModel {
    inner: Arc<dyn ChatModel>,
    replay: Arc<LeadReplay>,
}

impl ChatModel for LedgerModel {
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let lead_turn = req.agent == AgentId::Lead && req.purpose != CallPurpose::Summary;
            if !lead_turn {
                return self.inner.complete(req, ctx).await;
            }
            if let Some(failure) = self.replay.state.failure() {
                return Err(ledger_error(failure));
            }
            if let Some(scripted) = self.replay.next(req.turn) {
                if let Some(log) = &self.replay.record {
                    log.push(AgentId::Lead, req.turn, scripted.clone());
                }
                self.replay.replayed.fetch_add(1, Ordering::Relaxed);
                let ids = scripted.tool_calls.iter().filter_map(|c| c.id.clone());
                let ids: Vec<String> = ids.collect();
                lock(&self.replay.replayed_calls).extend(ids.iter().cloned());
                lock(&self.replay.replayed_ids).extend(ids);
                self.replay.last_replayed.store(true, Ordering::SeqCst);
                // Its usage is reported `resumed` and counted by no one (`account`).
                return Ok(to_response(scripted, req));
            }
            self.replay.last_replayed.store(false, Ordering::SeqCst);
            // A live response may reuse a replayed id (a replay model derives them from
            // the turn): from here on none is a replayed call.
            lock(&self.replay.replayed_ids).clear();
            let result = self.inner.complete(req, ctx).await;
            if let Ok(r) = &result {
                self.replay
                    .state
                    .lead_response(req.turn, &from_response(r))
                    .await
                    .map_err(ledger_error)?;
            }
            result
        })
    }

    fn limits(&self) -> ModelLimits {
        self.inner.limits()
    }
}

struct LedgerTool {
    inner: Arc<dyn Tool>,
    replay: Arc<LeadReplay>,
}

#[derive(serde::Deserialize)]
struct TaskArgs {
    #[serde(default)]
    description: String,
    #[serde(default)]
    prompt: String,
    #[serde(default)]
    subagent_type: String,
}

impl LedgerTool {
    async fn task(&self, call: &ToolCall, ctx: &ToolContext) -> ToolOutput {
        let args: Option<TaskArgs> = serde_json::from_str(call.arguments.as_str()).ok();
        if let Some(out) = args.as_ref().and_then(|a| self.resume_task(call, a)) {
            return out;
        }
        let recorded = self.replay.recorded(&call.id);
        let out = self.inner.call(call, ctx).await;
        self.compare(recorded.as_ref(), &out);
        let asked = match (&args, &out.task_end) {
            (Some(a), Some(end)) if end.status == TaskStatus::Completed => Some(TaskAsked {
                description: a.description.clone(),
                prompt: a.prompt.clone(),
                subagent_type: a.subagent_type.clone(),
                result: end.detail.clone(),
            }),
            _ => None,
        };
        self.replay.keep(call, "task", &out, asked).await;
        out
    }

    /// A completed task of the ledger asked the same: reported `resumed`, not run.
    fn resume_task(&self, call: &ToolCall, args: &TaskArgs) -> Option<ToolOutput> {
        let sched = self.replay.scheduler.as_ref()?;
        let kind = sched.find_type(&args.subagent_type)?;
        let done = self.replay.completed_task(args)?;
        lock(&self.replay.tools).remove(&call.id);
        if let Some(log) = &self.replay.record {
            let agent = AgentId::Task {
                description: args.description.clone(),
                task_id: call.id.clone(),
            };
            super::tasks::record_resumed(log, &self.replay.state, &done.ran_as, agent);
        }
        let r = Resumed {
            result: &done.asked.result,
            usage: done.usage,
            turns: done.turns,
            duration_ms: done.duration_ms,
        };
        sched.resume_task(&call.id, None, &args.description, &kind, r);
        self.replay.resumed_tasks.fetch_add(1, Ordering::Relaxed);
        Some(TaskEnd::new(TaskStatus::Completed, done.asked.result).into_output())
    }

    /// A result that differs from the recorded one ends the replay.
    fn compare(&self, recorded: Option<&ToolEnd>, out: &ToolOutput) {
        if let Some(r) = recorded {
            let ok = out.status == crate::events::ToolStatus::Ok;
            if r.ok != ok || r.output != out.text() {
                self.replay
                    .go_live("a tool result differs from the recorded one");
            }
        }
    }
}

impl Tool for LedgerTool {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn spec(&self) -> ToolSpec {
        self.inner.spec()
    }

    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let name = self.inner.name();
            if name == "task" {
                return self.task(call, ctx).await;
            }
            let recorded = self.replay.recorded(&call.id);
            match recorded {
                // Finished in an earlier run: its effect is done, its result stands.
                Some(r) if !RUN_AGAIN.contains(&name) => {
                    if r.ok {
                        ToolOutput::ok(r.output)
                    } else {
                        ToolOutput::error(r.output)
                    }
                }
                recorded => {
                    let out = self.inner.call(call, ctx).await;
                    self.compare(recorded.as_ref(), &out);
                    self.replay.keep(call, name, &out, None).await;
                    out
                }
            }
        })
    }

    fn concurrency(&self, call: &ToolCall) -> Concurrency {
        self.inner.concurrency(call)
    }

    fn loop_key(&self, args: &ToolArgs) -> u64 {
        self.inner.loop_key(args)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
