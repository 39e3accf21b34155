//! The `task` tool: validates a delegation, hands it to the scheduler, runs the sub-agent
//! (the same agent loop as the lead) and answers the lead with the result text.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::record::TaskRecord;
use super::scheduler::{Admission, Scheduler};
use super::state::TaskState;
use deerflow_agent::final_answer::schema_violation;
use deerflow_agent::observer::{cap_chars, EVENT_OUTPUT_MAX_CHARS};
use deerflow_agent::{run_agent, Agent, AgentEnd, Observer};
use deerflow_events::{Event, EventSink, TaskMessage, TaskToolCall, WarningCode};
use deerflow_model::{AgentId, BoxFuture, ToolCall, ToolSpec};
use deerflow_tools::args::{parse, schema_for};
use deerflow_tools::task_end::{TaskEnd, TaskStatus};
use deerflow_tools::{Concurrency, Tool, ToolContext, ToolOutput};
use deerflow_workspace::task_mark::TaskMark;

/// After a timeout cancels a sub-agent, how long it may take to stop its tools.
const TIMEOUT_GRACE: Duration = Duration::from_millis(500);

pub struct TaskTool {
    scheduler: Arc<Scheduler>,
}

impl TaskTool {
    pub fn new(scheduler: Arc<Scheduler>) -> Self {
        Self { scheduler }
    }
}

/// `task`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskArgs {
    /// A 3-5 word label for the sub-task.
    pub description: String,
    /// The complete, self-contained instruction: goal, relevant files, constraints, and the
    /// form of the answer. The sub-agent sees nothing else.
    pub prompt: String,
    /// Which kind of sub-agent runs the task.
    pub subagent_type: String,
}

/// The schema of [`TaskArgs`], with the run's sub-agent types as `subagent_type`'s choices.
fn task_parameters(names: Vec<String>) -> Value {
    let mut schema = schema_for::<TaskArgs>();
    if let Some(kind) = schema.pointer_mut("/properties/subagent_type") {
        if let Some(kind) = kind.as_object_mut() {
            // After "type", where a reader of the request looks for it.
            let description = kind.remove("description");
            kind.insert("enum".into(), json!(names));
            if let Some(d) = description {
                kind.insert("description".into(), d);
            }
        }
    }
    schema
}

impl Tool for TaskTool {
    fn concurrency(&self, _call: &ToolCall) -> Concurrency {
        Concurrency::Shared
    }

    fn name(&self) -> &str {
        "task"
    }

    fn spec(&self) -> ToolSpec {
        let names = self.scheduler.setup.type_names();
        let listed: Vec<String> = self
            .scheduler
            .setup
            .types
            .iter()
            .map(|t| format!("{}: {}", t.name, t.description))
            .collect();
        ToolSpec {
            name: "task".into(),
            description: format!(
                "Delegate a self-contained sub-task to a sub-agent that works in the same workspace and \
                 reports back. Several task calls in one response run in parallel. Types: {}",
                listed.join("; ")
            ),
            parameters: task_parameters(names),
        }
    }

    /// Validation, the task limit and admission happen before the future is returned, so
    /// calls of one response are accepted and queued in the order the model made them.
    fn call<'a>(&'a self, call: &'a ToolCall, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        let out = match self.prepare(call) {
            Ok(start) => start,
            Err(out) => return Box::pin(async move { out }),
        };
        let (rec, admission) = out;
        let sched = self.scheduler.clone();
        // A queued task is only this small future until it gets a slot; the sub-agent's own
        // task is spawned then, so memory grows with the concurrency, not the queue.
        Box::pin(async move {
            if let Err(out) = wait_for_slot(&sched, &rec, admission).await {
                sched.forget(&rec);
                return out;
            }
            run_admitted(&sched, &rec).await
        })
    }
}

/// Runs a task that holds a slot on a tokio task of its own (a panic fails the task), then
/// gives the slot back and forgets the task.
pub(super) async fn run_admitted(sched: &Arc<Scheduler>, rec: &Arc<TaskRecord>) -> ToolOutput {
    let handle = tokio::spawn({
        let (sched, rec) = (sched.clone(), rec.clone());
        async move { supervise(&sched, &rec).await }
    });
    let out = match handle.await {
        Ok(out) => out,
        Err(e) => {
            let why = if e.is_panic() {
                "internal error: the sub-agent panicked"
            } else {
                "the sub-agent was aborted"
            };
            rec.fail(&sched.events, why, None)
        }
    };
    sched.release();
    sched.forget(rec);
    out
}

impl TaskTool {
    fn prepare(&self, call: &ToolCall) -> Result<(Arc<TaskRecord>, Admission), ToolOutput> {
        let s = &self.scheduler;
        let args: TaskArgs = parse(&call.arguments).map_err(|e| {
            let detail = e.0.strip_prefix("Error: ").unwrap_or(&e.0).to_string();
            ToolOutput::error(format!("Task failed. {e}"))
                .with_task_end(TaskEnd::new(TaskStatus::Failed, detail))
        })?;
        let description = args.description.trim().to_string();
        let prompt = args.prompt;
        // A sub-agent with nothing to do would only spend a turn finding that out.
        if prompt.trim().is_empty() {
            return Err(failed(
                "the prompt is empty: give the sub-agent a self-contained instruction",
            ));
        }
        let kind = args.subagent_type.as_str();
        let Some(t) = s.setup.find(kind).cloned() else {
            let avail = s.setup.type_names().join(", ");
            let msg = format!("Unknown subagent type '{kind}'. Available: {avail}");
            s.events.emit(Event::warning(
                WarningCode::UnknownSubagentType,
                msg.clone(),
            ));
            return Err(failed(msg));
        };
        let Some(rec) = s.accept(&call.id, &description, &prompt, t) else {
            let msg = format!(
                "task limit reached: this run may start at most {} sub-agents (--max-tasks)",
                s.max_tasks()
            );
            s.events
                .emit(Event::warning(WarningCode::TaskLimit, msg.clone()));
            return Err(failed(msg));
        };
        let admission = s.admit(&rec);
        Ok((rec, admission))
    }
}

fn failed(error: impl Into<String>) -> ToolOutput {
    TaskEnd::new(TaskStatus::Failed, error).into_output()
}

/// Waits in the queue until the scheduler hands this task a slot (and starts it), or the
/// run stops first (the scheduler then drops the queue).
async fn wait_for_slot(
    s: &Scheduler,
    rec: &TaskRecord,
    admission: Admission,
) -> Result<(), ToolOutput> {
    if admission == Admission::Now || rec.slot_answer().await {
        return Ok(());
    }
    Err(rec.cancel(&s.events, &s.shared.control.cancel_message()))
}

/// Runs the sub-agent; once it timed out or was cancelled (and its tools are dropped), kills
/// every host process its commands started, those they detached included (§12).
async fn supervise(s: &Arc<Scheduler>, rec: &Arc<TaskRecord>) -> ToolOutput {
    let mark = TaskMark::new(rec.seq);
    let out = run_under_timeout(s, rec, &mark).await;
    if matches!(rec.state.get(), TaskState::TimedOut | TaskState::Cancelled) {
        mark.kill_all().await;
    }
    out
}

/// Runs the sub-agent under its timeout and turns its end into the terminal event.
async fn run_under_timeout(
    s: &Arc<Scheduler>,
    rec: &Arc<TaskRecord>,
    mark: &TaskMark,
) -> ToolOutput {
    let cancel = s.shared.control.cancel.child_token();
    let agent = match build_agent(s, rec, cancel.clone(), mark) {
        Ok(a) => a,
        Err(e) => return rec.fail(&s.events, &e, None),
    };
    let timeout = Duration::from_secs_f64(rec.kind.timeout_seconds.max(0.0));
    let run = run_agent(&agent, &s.shared, rec.prompt().to_string());
    tokio::pin!(run);
    let end = tokio::select! {
        end = &mut run => Some(end),
        _ = tokio::time::sleep(timeout) => None,
    };
    let Some(end) = end else {
        // The timeout wins the state first; then the sub-agent is told to stop and given a
        // moment to kill its child processes before its future is dropped.
        let out = rec.time_out(&s.events);
        cancel.cancel();
        let _ = tokio::time::timeout(TIMEOUT_GRACE, &mut run).await;
        return out;
    };
    cancel.cancel();
    finish(s, rec, end)
}

fn build_agent(
    s: &Arc<Scheduler>,
    rec: &Arc<TaskRecord>,
    cancel: tokio_util::sync::CancellationToken,
    mark: &TaskMark,
) -> Result<Agent, String> {
    let t = &rec.kind;
    let events = s.events.for_task(rec.id());
    // Every reachable model is resolved before the run starts, so this only guards a bug.
    let model = s
        .setup
        .models
        .get(&t.model)
        .cloned()
        .ok_or_else(|| format!("internal error: model '{}' was not resolved", t.model))?;
    let kit = s.kit(t);
    Ok(Agent {
        id: AgentId::Task {
            description: rec.description().to_string(),
            task_id: rec.id().to_string(),
        },
        caller: format!("subagent:{}", t.name),
        model,
        model_name: t.model.clone(),
        system: kit.system.clone(),
        context: s.shared.context.clone(),
        tools: kit.tools.clone(),
        max_turns: t.max_turns,
        tool_ctx: ToolContext {
            workspace: s.workspace.clone(),
            limits: s.limits.for_task(rec.id(), mark.clone()),
            cancel,
        },
        events: events.clone(),
        observer: Arc::new(TaskObserver {
            events,
            rec: rec.clone(),
            index: AtomicU32::new(0),
        }),
        progress: rec.progress(),
        // Only `--each` items answer to a schema; a delegated task answers the lead.
        output_schema: rec.item.and(s.output_schema.clone()),
        // `--each` attaches `--image`s to every item's task; a delegated task has none.
        task_images: match rec.item {
            Some(_) => s.item_images.clone(),
            None => Vec::new(),
        },
    })
}

fn finish(s: &Scheduler, rec: &TaskRecord, end: AgentEnd) -> ToolOutput {
    let events = &s.events;
    match end {
        AgentEnd::Final { text, stop_reason } => rec.complete(
            events,
            text.unwrap_or_else(|| "No response generated".into()),
            stop_reason,
        ),
        AgentEnd::MaxTurns { last_text: Some(t) } => rec.complete(events, t, Some("turn_capped")),
        AgentEnd::MaxTurns { last_text: None } => rec.fail(
            events,
            &format!("Reached max_turns={}", rec.kind.max_turns),
            Some("turn_capped"),
        ),
        AgentEnd::Budget { .. } => rec.cancel(events, "Token budget exceeded"),
        AgentEnd::Failed(e) => match (rec.item, schema_violation(&e)) {
            (Some(index), Some(first)) => rec.fail(events, &format!("Item {index}: {first}"), None),
            _ => rec.fail(events, &e, None),
        },
        AgentEnd::Cancelled => rec.cancel(events, &s.shared.control.cancel_message()),
        AgentEnd::Clarify { question, .. } => rec.fail(
            events,
            &format!("the sub-agent asked for clarification: {question}"),
            None,
        ),
    }
}

/// Reports a sub-agent's messages as `task_running` events with cumulative usage.
struct TaskObserver {
    events: EventSink,
    rec: Arc<TaskRecord>,
    index: AtomicU32,
}

impl TaskObserver {
    fn emit(&self, message: TaskMessage) {
        // After a timeout the sub-agent gets a moment to stop its tools; what it reports
        // then would follow its terminal event, which must stay its last.
        if self.rec.state.get().is_terminal() {
            return;
        }
        let i = self.index.fetch_add(1, Ordering::SeqCst) + 1;
        self.events.emit(Event::TaskRunning {
            task_id: self.rec.id().to_string(),
            item_index: self.rec.item,
            message_index: i,
            message,
            usage: self.rec.progress().usage(),
        });
    }
}

impl Observer for TaskObserver {
    fn assistant(&self, text: Option<&str>, reasoning: Option<&str>, calls: &[ToolCall]) {
        let tool_calls = calls
            .iter()
            .map(|c| TaskToolCall {
                id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            })
            .collect();
        self.emit(TaskMessage::Assistant {
            text: text.unwrap_or("").to_string(),
            tool_calls,
            reasoning: reasoning.map(str::to_string),
        });
    }

    fn tool_call(&self, _call: &ToolCall) {}

    fn tool_result(&self, call: &ToolCall, out: &ToolOutput, _took: Duration) {
        let (text, _) = cap_chars(&out.text(), EVENT_OUTPUT_MAX_CHARS);
        self.emit(TaskMessage::Tool {
            text,
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            status: out.status,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deerflow_model::ToolArgs;
    use deerflow_tools::args::assert_schema_matches;

    #[test]
    fn task_schema_matches_its_arguments_and_lists_the_types() {
        assert_schema_matches::<TaskArgs>(
            &["description", "prompt", "subagent_type"],
            json!({"description": "d", "prompt": "p", "subagent_type": "general-purpose"}),
        );
        let schema = task_parameters(vec!["general-purpose".into(), "bash".into()]);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string", "description": "A 3-5 word label for the sub-task."},
                    "prompt": {"type": "string", "description": "The complete, self-contained instruction: goal, relevant files, constraints, and the form of the answer. The sub-agent sees nothing else."},
                    "subagent_type": {"type": "string", "enum": ["general-purpose", "bash"], "description": "Which kind of sub-agent runs the task."}
                },
                "required": ["description", "prompt", "subagent_type"]
            })
        );
        let err = parse::<TaskArgs>(&ToolArgs::from(
            json!({"description": "d", "prompt": 3, "subagent_type": "x"}),
        ))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Error: missing required string argument 'prompt'"
        );
    }
}
