//! The event stream: the `Event` enum (contract §3) and the single writer that owns stdout.
//!
//! Every part of a run emits `Event`s into one bounded channel; one writer thread stamps
//! `seq`, `ts` and `run_id` and writes the lines in batches (one `write` for as many events
//! as have queued up). It runs on its own OS thread so a slow pipe stalls the run only once
//! the queue is full (back-pressure, src/events/flow.rs).
//!
//! The types here are the wire format: their `Serialize` fixes each line's field order and
//! their `JsonSchema` is what `deerflow schema` prints (src/schema.rs), so the two cannot
//! drift apart. The schema is generated for serialization: a field is required unless it
//! has `skip_serializing_if`, so an `Option` without it is required and may be `null`.

// Events are the only output channel: nothing prints to stdout but the event writer,
// the human view and the plain-text commands, all through one explicit writer each.
#![deny(clippy::print_stdout)]
// stderr too: `eprintln!` panics on a closed stderr, which must change no exit code (§12).
#![cfg_attr(not(test), deny(clippy::print_stderr))]

mod flow;
mod kinds;
mod line;
pub mod outcome;
mod queue;
pub mod usage;

use std::collections::VecDeque;
use std::io::Write;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::usage::{RunUsage, UsageTotals};
use deerflow_model::ToolArgs;
use deerflow_workspace::sandbox::SandboxKind;

use flow::Flow;
pub use flow::{stop_signalled_at, watch_stop_signals};
pub use kinds::{CompactionReason, RunStatus, ToolStatus, WarningCode};
pub use line::{stamp, write_line, Stamp};

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct ModelInfo {
    pub name: String,
    pub provider: String,
    pub model: String,
}

/// Where tools run (contract §13).
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct SandboxInfo {
    /// The config's `sandbox.use`, normalised (`local`, `confined`, `docker`).
    #[serde(rename = "use")]
    #[schemars(with = "String")]
    pub use_: SandboxKind,
    /// The container image when there is one.
    pub image: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, JsonSchema, PartialEq, Eq)]
pub struct TaskCounts {
    pub total: u32,
    pub completed: u32,
    pub failed: u32,
    pub timed_out: u32,
    pub cancelled: u32,
    /// Items and tasks taken from the `--state` ledger (counted in `completed` too).
    pub resumed: u32,
}

/// One message inside a sub-agent (`task_running.message`).
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum TaskMessage {
    Assistant {
        text: String,
        tool_calls: Vec<TaskToolCall>,
        /// The reasoning / thinking text the model returned with this message (§10).
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
    },
    Tool {
        text: String,
        tool_call_id: String,
        name: String,
        #[schemars(schema_with = "tool_status_schema")]
        status: ToolStatus,
    },
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct TaskToolCall {
    pub id: String,
    pub name: String,
    #[schemars(with = "Map<String, Value>")]
    pub arguments: ToolArgs,
}

/// The fields a `model_retry` warning adds.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
pub struct RetryInfo {
    pub attempt: u32,
    pub delay_ms: u64,
    /// The HTTP status; `null` for a connection error.
    pub status: Option<u16>,
}

/// A `rate_limited` warning's fields (§15).
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct RateInfo {
    /// The model that answered 429, as the user named it.
    pub model: String,
    /// Its requests allowed in flight from now on.
    pub concurrency: u32,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The first line.
    RunStarted {
        schema_version: u32,
        version: String,
        model: ModelInfo,
        max_concurrent: u32,
        max_tasks: u32,
        max_turns: u32,
        #[serde(serialize_with = "opt_seconds")]
        timeout_seconds: Option<f64>,
        workspace: String,
        subagents_enabled: bool,
        subagent_types: Vec<String>,
        sandbox: SandboxInfo,
    },
    /// The lead agent produced text.
    Message {
        role: String,
        text: String,
        /// Replayed from the `--state` ledger (contract §15); absent otherwise.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resumed: bool,
    },
    /// The lead model returned reasoning / thinking text (§10).
    Reasoning {
        text: String,
        /// Replayed from the `--state` ledger (contract §15); absent otherwise.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resumed: bool,
    },
    /// The lead agent calls a tool (a `task` call too).
    ToolCall {
        call_id: String,
        name: String,
        #[schemars(with = "Map<String, Value>")]
        arguments: ToolArgs,
        /// Replayed from the `--state` ledger (contract §15); absent otherwise.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resumed: bool,
    },
    /// A lead tool returned; `output` is cut at 2000 characters (`truncated`).
    ToolResult {
        call_id: String,
        name: String,
        #[schemars(schema_with = "tool_status_schema")]
        status: ToolStatus,
        output: String,
        truncated: bool,
        duration_ms: u64,
        /// Replayed from the `--state` ledger (contract §15); absent otherwise.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resumed: bool,
    },
    /// An accepted task waits for a free slot; `position` is 1-based.
    TaskQueued {
        task_id: String,
        description: String,
        subagent_type: String,
        position: u32,
    },
    /// A sub-agent begins running.
    TaskStarted {
        task_id: String,
        /// The `--each` item this task runs (contract §15); absent for a delegated task.
        #[serde(skip_serializing_if = "Option::is_none")]
        item_index: Option<u64>,
        description: String,
        subagent_type: String,
        model: String,
        max_turns: u32,
        #[serde(serialize_with = "seconds")]
        timeout_seconds: f64,
        /// Taken from the `--state` ledger instead of run (contract §15); absent otherwise.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resumed: bool,
    },
    /// A new message inside a sub-agent; `usage` is cumulative.
    TaskRunning {
        task_id: String,
        /// The `--each` item this task runs (contract §15); absent for a delegated task.
        #[serde(skip_serializing_if = "Option::is_none")]
        item_index: Option<u64>,
        message_index: u32,
        message: TaskMessage,
        usage: UsageTotals,
    },
    /// Terminal: the sub-agent answered.
    TaskCompleted {
        task_id: String,
        /// The `--each` item this task runs (contract §15); absent for a delegated task.
        #[serde(skip_serializing_if = "Option::is_none")]
        item_index: Option<u64>,
        result: String,
        usage: UsageTotals,
        turns: u32,
        duration_ms: u64,
        stop_reason: Option<String>,
        /// Taken from the `--state` ledger instead of run (contract §15); absent otherwise.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resumed: bool,
    },
    /// Terminal: the sub-agent failed.
    TaskFailed {
        task_id: String,
        /// The `--each` item this task runs (contract §15); absent for a delegated task.
        #[serde(skip_serializing_if = "Option::is_none")]
        item_index: Option<u64>,
        error: String,
        usage: UsageTotals,
        turns: u32,
        duration_ms: u64,
        stop_reason: Option<String>,
    },
    /// Terminal: the sub-agent ran out of time.
    TaskTimedOut {
        task_id: String,
        /// The `--each` item this task runs (contract §15); absent for a delegated task.
        #[serde(skip_serializing_if = "Option::is_none")]
        item_index: Option<u64>,
        error: String,
        #[serde(serialize_with = "seconds")]
        timeout_seconds: f64,
        usage: UsageTotals,
        duration_ms: u64,
    },
    /// Terminal: the task was cancelled, running or queued.
    TaskCancelled {
        task_id: String,
        /// The `--each` item this task runs (contract §15); absent for a delegated task.
        #[serde(skip_serializing_if = "Option::is_none")]
        item_index: Option<u64>,
        error: String,
        usage: UsageTotals,
        duration_ms: u64,
    },
    /// After every model response; the token fields are `null` when `reported` is false.
    Usage {
        caller: String,
        model: String,
        input_tokens: Option<u64>,
        output_tokens: Option<u64>,
        total_tokens: Option<u64>,
        cache_read_tokens: Option<u64>,
        reported: bool,
        /// A lead response replayed from the `--state` ledger (contract §15): its recorded
        /// usage, not counted in this run's totals or budget; absent otherwise.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resumed: bool,
    },
    /// Something worth knowing that did not stop the run.
    // A retry warning always says which attempt, when, and the status (null or not).
    #[schemars(extend(
        "if" = {"properties": {"code": {"const": "model_retry"}}},
        "then" = {"required": ["attempt", "delay_ms", "status"]}
    ))]
    Warning {
        // A plain string in the schema: consumers must accept codes added later.
        #[schemars(with = "String")]
        code: WarningCode,
        message: String,
        /// `model_retry` only.
        #[serde(flatten, skip_serializing_if = "Option::is_none")]
        retry: Option<RetryInfo>,
        /// `rate_limited` only.
        #[serde(flatten, skip_serializing_if = "Option::is_none")]
        rate: Option<RateInfo>,
        /// The MCP server a warning is about (`mcp_server_failed`).
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schemars(with = "String")]
        server: Option<String>,
        /// The tool a warning is about (`tool_unavailable`).
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schemars(with = "String")]
        tool: Option<String>,
    },
    /// An agent's history was summarized (§10); `task_id` when a sub-agent's.
    ContextCompacted {
        messages_before: u32,
        messages_after: u32,
        /// What the last response reported; `null` when the size was estimated.
        input_tokens_before: Option<u64>,
        #[schemars(schema_with = "compaction_reason_schema")]
        reason: CompactionReason,
    },
    /// An MCP server answered `initialize` and `tools/list`, before the first model call.
    McpServerStarted {
        server: String,
        /// `stdio` or `http`.
        transport: String,
        /// Its tools, as offered to the model.
        tools: Vec<String>,
        duration_ms: u64,
    },
    /// The lead agent asked the user; the run then ends.
    ClarificationRequested {
        question: String,
        options: Vec<String>,
    },
    /// Always the last line, exactly once.
    RunCompleted {
        #[schemars(schema_with = "run_status_schema")]
        status: RunStatus,
        exit_code: i32,
        final_message: Option<String>,
        error: Option<String>,
        duration_ms: u64,
        turns: u32,
        usage: RunUsage,
        tasks: TaskCounts,
        artifacts: Vec<String>,
        /// The parsed final answer under `--output-schema` (§11); `null` without it.
        final_output: Option<Value>,
    },
}

fn tool_status_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": ToolStatus::names() })
}

fn compaction_reason_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": CompactionReason::names() })
}

fn run_status_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": RunStatus::names() })
}

/// Whole seconds print as integers (`1800`, like the error texts say), others as floats.
fn seconds<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    match deerflow_base::text::whole(*v) {
        Some(n) => s.serialize_i64(n),
        None => s.serialize_f64(*v),
    }
}

fn opt_seconds<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => seconds(v, s),
        None => s.serialize_none(),
    }
}

impl Event {
    pub fn warning(code: WarningCode, message: impl Into<String>) -> Self {
        Event::Warning {
            code,
            message: message.into(),
            retry: None,
            rate: None,
            server: None,
            tool: None,
        }
    }

    /// `tool_unavailable`: a configured tool deerflow does not offer (§14).
    pub fn tool_unavailable(tool: &str, message: impl Into<String>) -> Self {
        Event::Warning {
            code: WarningCode::ToolUnavailable,
            message: message.into(),
            retry: None,
            rate: None,
            server: None,
            tool: Some(tool.to_string()),
        }
    }

    /// `rate_limited`: a 429 halved a model's requests in flight (§15).
    pub fn rate_limited(model: &str, concurrency: u32, message: impl Into<String>) -> Self {
        Event::Warning {
            code: WarningCode::RateLimited,
            message: message.into(),
            retry: None,
            rate: Some(RateInfo {
                model: model.to_string(),
                concurrency,
            }),
            server: None,
            tool: None,
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Event::RunStarted { .. } => "run_started",
            Event::Message { .. } => "message",
            Event::Reasoning { .. } => "reasoning",
            Event::ToolCall { .. } => "tool_call",
            Event::ToolResult { .. } => "tool_result",
            Event::TaskQueued { .. } => "task_queued",
            Event::TaskStarted { .. } => "task_started",
            Event::TaskRunning { .. } => "task_running",
            Event::TaskCompleted { .. } => "task_completed",
            Event::TaskFailed { .. } => "task_failed",
            Event::TaskTimedOut { .. } => "task_timed_out",
            Event::TaskCancelled { .. } => "task_cancelled",
            Event::Usage { .. } => "usage",
            Event::Warning { .. } => "warning",
            Event::ContextCompacted { .. } => "context_compacted",
            Event::McpServerStarted { .. } => "mcp_server_started",
            Event::ClarificationRequested { .. } => "clarification_requested",
            Event::RunCompleted { .. } => "run_completed",
        }
    }
}

/// An event plus the sub-agent it happened in, if any.
#[derive(Debug, Clone)]
pub struct Envelope {
    pub event: Event,
    /// Shared by every event of the task: stamping it costs no allocation per event.
    pub task_id: Option<Arc<str>>,
    /// What must have happened before the event is written, if anything.
    pub gate: Option<Gate>,
}

/// What an event waits for before it is written: the `--state` ledger's entry it reports,
/// on disk (contract §15). The writer thread waits at it, and the events queued after it
/// wait with it, so the stream keeps its order while the run's thread goes on.
#[derive(Clone)]
pub struct Gate(Arc<dyn Fn() + Send + Sync>);

impl Gate {
    /// `wait` returns once the event may be written; it runs on the writer thread.
    pub fn new(wait: impl Fn() + Send + Sync + 'static) -> Self {
        Self(Arc::new(wait))
    }

    fn wait(&self) {
        (self.0)()
    }
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gate")
    }
}

/// Renders events for a person (the human view); the JSON writer needs none.
pub trait Renderer: Send {
    fn render(&mut self, env: &Envelope);
    /// How long to wait for an event before calling `tick` (a live view redraws its
    /// clocks); `None`: no ticks.
    fn tick_interval(&self) -> Option<Duration> {
        None
    }
    /// Called when no event came for `tick_interval`.
    fn tick(&mut self) {}
    /// Called once after the last event, before the writer thread ends.
    fn finish(&mut self) {}
}

/// Where events go. Cloned freely; sending waits only while the queue is full.
#[derive(Clone)]
pub struct EventSink {
    tx: queue::Sender,
    task_id: Option<Arc<str>>,
    flow: Arc<Flow>,
}

impl EventSink {
    pub fn emit(&self, event: Event) {
        self.emit_after(event, None);
    }

    /// Emits `event` to be written only once `gate` has opened (`None`: at once).
    pub fn emit_after(&self, event: Event, gate: Option<Gate>) {
        let env = Envelope {
            event,
            task_id: self.task_id.clone(),
            gate,
        };
        self.tx.send(env, &self.flow);
    }

    /// A sink whose events are stamped with a sub-agent's task id.
    pub fn for_task(&self, task_id: &str) -> Self {
        Self {
            tx: self.tx.clone(),
            task_id: Some(task_id.into()),
            flow: self.flow.clone(),
        }
    }

    /// The run's deadline: past it, an emitter waiting for a stalled reader gives up.
    pub fn set_deadline(&self, at: std::time::Instant) {
        self.flow.set_deadline(at);
    }
}

/// The writer thread's handle: join it (with a deadline) after the last event.
pub struct EventWriter {
    handle: Option<JoinHandle<()>>,
    done: tokio::sync::oneshot::Receiver<()>,
}

/// Told once when writing to stdout failed: the error says whether its reader went away
/// (`BrokenPipe`) or something else broke (a full disk).
pub type OnStdoutLost = Arc<dyn Fn(&std::io::Error) + Send + Sync>;

/// Output mode of the writer thread.
pub enum Output {
    /// NDJSON on stdout; `on_closed` runs once if writing to stdout fails (a closed pipe,
    /// a full disk), with the error.
    Json {
        run_id: String,
        on_closed: OnStdoutLost,
    },
    /// A human renderer (stderr view, final answer on stdout).
    Human(Box<dyn Renderer>),
}

pub fn start_writer(output: Output) -> (EventSink, EventWriter) {
    let (tx, rx) = queue::bounded(flow::QUEUE_EVENTS);
    let (done_tx, done) = tokio::sync::oneshot::channel();
    let handle = std::thread::Builder::new()
        .name("deerflow-events".into())
        .spawn(move || {
            match output {
                Output::Json { run_id, on_closed } => write_json(rx, &run_id, on_closed.as_ref()),
                Output::Human(mut r) => {
                    let mut events = Events {
                        rx,
                        batch: VecDeque::new(),
                    };
                    while let Some(env) = events.next(r.as_mut()) {
                        r.render(&env);
                        if is_last(&env) {
                            break;
                        }
                    }
                    r.finish();
                }
            }
            let _ = done_tx.send(());
        })
        .ok();
    tx.nudge_later();
    (
        EventSink {
            tx,
            task_id: None,
            flow: Arc::default(),
        },
        EventWriter { handle, done },
    )
}

impl EventWriter {
    /// Waits for the writer to drain. Checks `give_up` every 50 ms while it waits (a
    /// reader that stopped reading must not keep a signalled process alive). Returns false
    /// when it gave up. Waits without holding the runtime's thread: a second SIGINT must
    /// still be handled meanwhile.
    pub async fn finish(mut self, give_up: impl Fn() -> bool) -> bool {
        loop {
            match tokio::time::timeout(Duration::from_millis(50), &mut self.done).await {
                Ok(_) => break,
                Err(_) if give_up() => return false,
                Err(_) => {}
            }
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        true
    }
}

/// Events for a renderer one at a time, ticking it while none comes.
struct Events {
    rx: queue::Receiver,
    batch: VecDeque<Envelope>,
}

impl Events {
    /// The next event; `None` once every sender is gone.
    fn next(&mut self, r: &mut dyn Renderer) -> Option<Envelope> {
        loop {
            if let Some(env) = self.batch.pop_front() {
                if let Some(g) = &env.gate {
                    g.wait();
                }
                return Some(env);
            }
            match self.rx.recv_batch(&mut self.batch, r.tick_interval()) {
                queue::Batch::Got => {}
                queue::Batch::Timeout => r.tick(),
                queue::Batch::Closed => return None,
            }
        }
    }
}

/// `run_completed` is the stream's last line: the writer stops after it, without waiting
/// for every sender to go away (a sub-agent abandoned mid-tool may still hold one).
fn is_last(env: &Envelope) -> bool {
    matches!(env.event, Event::RunCompleted { .. })
}

fn write_json(
    rx: queue::Receiver,
    run_id: &str,
    on_closed: &(dyn Fn(&std::io::Error) + Send + Sync),
) {
    let stdout = std::io::stdout();
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut batch = VecDeque::new();
    let mut seq: u64 = 0;
    let mut closed = false;
    let mut last = false;
    while !last && rx.recv_batch(&mut batch, None) == queue::Batch::Got {
        buf.clear();
        for env in batch.drain(..) {
            if last {
                // Nothing follows `run_completed`.
                continue;
            }
            last = is_last(&env);
            if closed {
                continue;
            }
            if let Some(g) = &env.gate {
                g.wait();
            }
            let stamp = Stamp::now(seq, run_id, env.task_id.as_deref());
            // Serializing an event cannot fail (string keys only; serde_json writes a
            // non-finite float as null); were it to, the line is skipped without using a seq.
            let start = buf.len();
            match line::append_line(&mut buf, &env.event, &stamp) {
                Ok(()) => seq += 1,
                Err(_) => buf.truncate(start),
            }
        }
        if closed || buf.is_empty() {
            continue;
        }
        let mut out = stdout.lock();
        if let Err(e) = out.write_all(&buf).and_then(|_| out.flush()) {
            // EPIPE or any other failure: stop writing, tell the run, keep draining.
            closed = true;
            on_closed(&e);
        }
        // A batch can be large after a stall; keep the buffer from holding on to it.
        buf.shrink_to(256 * 1024);
    }
}

/// One event of every type, with every optional part filled in one of them and left out
/// in another, for the serialization and schema tests.
#[cfg(any(test, feature = "testing"))]
pub fn samples() -> Vec<Envelope> {
    use serde_json::json;
    let usage = UsageTotals {
        input_tokens: 3,
        output_tokens: 2,
        total_tokens: 5,
    };
    let lead = |event| Envelope {
        event,
        task_id: None,
        gate: None,
    };
    let inside = |event| Envelope {
        event,
        task_id: Some("call_1".into()),
        gate: None,
    };
    let run_usage = RunUsage {
        input_tokens: 3,
        output_tokens: 2,
        total_tokens: 5,
        lead: usage,
        subagents: UsageTotals::default(),
        by_model: [("gpt".to_string(), usage)].into_iter().collect(),
        cost_usd: None,
    };
    vec![
        lead(Event::RunStarted {
            schema_version: SCHEMA_VERSION,
            version: "0.1.0".into(),
            model: ModelInfo {
                name: "gpt".into(),
                provider: "openai".into(),
                model: "gpt-4o-mini".into(),
            },
            max_concurrent: 3,
            max_tasks: 16,
            max_turns: 100,
            timeout_seconds: None,
            workspace: "/w".into(),
            subagents_enabled: true,
            subagent_types: vec!["general-purpose".into()],
            sandbox: SandboxInfo {
                use_: SandboxKind::Local,
                image: None,
            },
        }),
        lead(Event::RunStarted {
            schema_version: SCHEMA_VERSION,
            version: "0.1.0".into(),
            model: ModelInfo {
                name: "replay:c.json".into(),
                provider: "replay".into(),
                model: "c.json".into(),
            },
            max_concurrent: 1,
            max_tasks: 1,
            max_turns: 1,
            timeout_seconds: Some(1.5),
            workspace: "/w".into(),
            subagents_enabled: false,
            subagent_types: vec![],
            sandbox: SandboxInfo {
                use_: SandboxKind::Docker,
                image: Some("img:1".into()),
            },
        }),
        lead(Event::Message {
            role: "assistant".into(),
            text: "hi \"there\"\n".into(),
            resumed: false,
        }),
        lead(Event::ToolCall {
            call_id: "call_1".into(),
            name: "task".into(),
            // Key order is the model's, not sorted.
            arguments: json!({"z": 1, "a": {"y": [1, 2], "b": null}}).into(),
            resumed: false,
        }),
        lead(Event::ToolResult {
            call_id: "call_1".into(),
            name: "task".into(),
            status: ToolStatus::Ok,
            output: "Task Succeeded. Result: r".into(),
            truncated: false,
            duration_ms: 12,
            resumed: false,
        }),
        lead(Event::TaskQueued {
            task_id: "call_2".into(),
            description: "d".into(),
            subagent_type: "general-purpose".into(),
            position: 1,
        }),
        lead(Event::TaskStarted {
            task_id: "call_1".into(),
            item_index: Some(7),
            description: "d".into(),
            subagent_type: "general-purpose".into(),
            model: "gpt".into(),
            max_turns: 150,
            timeout_seconds: 1800.0,
            resumed: false,
        }),
        inside(Event::TaskRunning {
            task_id: "call_1".into(),
            item_index: Some(7),
            message_index: 1,
            message: TaskMessage::Assistant {
                text: String::new(),
                tool_calls: vec![TaskToolCall {
                    id: "c1".into(),
                    name: "ls".into(),
                    arguments: json!({"path": ".", "depth": 2}).into(),
                }],
                reasoning: None,
            },
            usage,
        }),
        inside(Event::TaskRunning {
            task_id: "call_1".into(),
            item_index: None,
            message_index: 2,
            message: TaskMessage::Tool {
                text: "a.txt".into(),
                tool_call_id: "c1".into(),
                name: "ls".into(),
                status: ToolStatus::Error,
            },
            usage,
        }),
        lead(Event::TaskCompleted {
            task_id: "call_1".into(),
            item_index: Some(7),
            result: "r".into(),
            usage,
            turns: 2,
            duration_ms: 30,
            stop_reason: None,
            resumed: false,
        }),
        lead(Event::TaskFailed {
            task_id: "call_3".into(),
            item_index: None,
            error: "e".into(),
            usage,
            turns: 1,
            duration_ms: 30,
            stop_reason: Some("turn_capped".into()),
        }),
        lead(Event::TaskTimedOut {
            task_id: "call_4".into(),
            item_index: Some(7),
            error: "Execution timed out after 0.5 seconds".into(),
            timeout_seconds: 0.5,
            usage,
            duration_ms: 500,
        }),
        lead(Event::TaskCancelled {
            task_id: "call_5".into(),
            item_index: None,
            error: "Run timed out after 1 seconds".into(),
            usage,
            duration_ms: 3,
        }),
        inside(Event::Usage {
            caller: "subagent:general-purpose".into(),
            model: "gpt".into(),
            input_tokens: Some(3),
            output_tokens: Some(2),
            total_tokens: Some(5),
            cache_read_tokens: None,
            reported: true,
            resumed: false,
        }),
        lead(Event::Usage {
            caller: "lead".into(),
            model: "gpt".into(),
            input_tokens: None,
            output_tokens: None,
            total_tokens: None,
            cache_read_tokens: None,
            reported: false,
            resumed: false,
        }),
        lead(Event::warning(WarningCode::TaskLimit, "refused")),
        inside(Event::Warning {
            code: WarningCode::ModelRetry,
            message: "connection reset; retry 1 in 500 ms".into(),
            retry: Some(RetryInfo {
                attempt: 1,
                delay_ms: 500,
                status: None,
            }),
            rate: None,
            server: None,
            tool: None,
        }),
        lead(Event::Warning {
            code: WarningCode::ModelRetry,
            message: "HTTP 429; retry 2 in 1000 ms".into(),
            retry: Some(RetryInfo {
                attempt: 2,
                delay_ms: 1000,
                status: Some(429),
            }),
            rate: None,
            server: None,
            tool: None,
        }),
        lead(Event::Warning {
            code: WarningCode::McpServerFailed,
            message: "fs: exited".into(),
            retry: None,
            rate: None,
            server: Some("fs".into()),
            tool: None,
        }),
        inside(Event::ContextCompacted {
            messages_before: 40,
            messages_after: 12,
            input_tokens_before: Some(33_000),
            reason: CompactionReason::Trigger,
        }),
        lead(Event::ContextCompacted {
            messages_before: 9,
            messages_after: 4,
            input_tokens_before: None,
            reason: CompactionReason::Overflow,
        }),
        lead(Event::McpServerStarted {
            server: "fs".into(),
            transport: "stdio".into(),
            tools: vec!["fs_read".into()],
            duration_ms: 40,
        }),
        lead(Event::Reasoning {
            text: "The user wants a greeting.".into(),
            resumed: false,
        }),
        lead(Event::ClarificationRequested {
            question: "which?".into(),
            options: vec!["a".into(), "b".into()],
        }),
        lead(Event::RunCompleted {
            status: RunStatus::Completed,
            exit_code: 0,
            final_message: Some("done".into()),
            error: None,
            duration_ms: 40,
            turns: 2,
            usage: run_usage.clone(),
            tasks: TaskCounts {
                total: 1,
                completed: 1,
                ..TaskCounts::default()
            },
            artifacts: vec!["out.md".into()],
            final_output: None,
        }),
        lead(Event::RunCompleted {
            status: RunStatus::BudgetExceeded,
            exit_code: 8,
            final_message: None,
            error: Some("Token budget exceeded".into()),
            duration_ms: 40,
            turns: 2,
            usage: RunUsage {
                cost_usd: Some(0.25),
                ..run_usage
            },
            tasks: TaskCounts::default(),
            artifacts: vec![],
            final_output: Some(json!({"answer": 42})),
        }),
    ]
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    fn fixed_stamp<'a>(seq: u64, env: &'a Envelope) -> Stamp<'a> {
        Stamp {
            seq,
            ts: humantime::format_rfc3339_millis(
                SystemTime::UNIX_EPOCH + Duration::from_millis(1_790_000_000_123),
            ),
            run_id: "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
            task_id: env.task_id.as_deref(),
        }
    }

    fn line(seq: u64, env: &Envelope) -> String {
        let mut buf = Vec::new();
        write_line(&mut buf, &env.event, &fixed_stamp(seq, env)).unwrap();
        String::from_utf8(buf).unwrap()
    }

    /// How lines were built before they were streamed: a `Map` of the envelope, then the
    /// event's fields without its tag, inserted in order (a repeated key keeps its first
    /// place and takes the later value).
    fn line_via_map(seq: u64, env: &Envelope) -> String {
        let stamp = fixed_stamp(seq, env);
        let mut obj = Map::new();
        obj.insert("type".into(), Value::from(env.event.type_name()));
        obj.insert("seq".into(), Value::from(seq));
        obj.insert("ts".into(), Value::from(stamp.ts.to_string()));
        obj.insert("run_id".into(), Value::from(stamp.run_id));
        if let Some(t) = &env.task_id {
            obj.insert("task_id".into(), Value::from(&**t));
        }
        let Value::Object(fields) = serde_json::to_value(&env.event).unwrap() else {
            panic!("not an object")
        };
        for (k, v) in fields {
            if k != "type" {
                obj.insert(k, v);
            }
        }
        format!("{}\n", Value::Object(obj))
    }

    #[test]
    fn streamed_lines_equal_the_map_built_lines_byte_for_byte() {
        for (seq, env) in samples().iter().enumerate() {
            assert_eq!(line(seq as u64, env), line_via_map(seq as u64, env));
        }
    }

    #[test]
    fn every_line_starts_with_the_envelope_in_order() {
        for (seq, env) in samples().iter().enumerate() {
            let l = line(seq as u64, env);
            let head = format!(
                r#"{{"type":"{}","seq":{seq},"ts":"2026-09-21T14:13:20.123Z","run_id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0""#,
                env.event.type_name()
            );
            assert!(l.starts_with(&head), "{l}");
            assert!(l.ends_with("}\n") && l.matches('\n').count() == 1, "{l}");
            assert!(
                l.matches(r#""task_id":"#).count() <= 1,
                "task_id twice: {l}"
            );
            if env.task_id.is_some() {
                assert!(l[head.len()..].starts_with(r#","task_id":"call_1""#), "{l}");
            }
        }
    }

    #[test]
    fn stamped_line_has_envelope_fields_first() {
        let env = Envelope {
            event: Event::warning(WarningCode::Budget, "y"),
            task_id: Some("t1".into()),
            gate: None,
        };
        let line = stamp(&env, 7, "run1");
        assert!(line.ends_with('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["type"], "warning");
        assert_eq!(v["seq"], 7);
        assert_eq!(v["run_id"], "run1");
        assert_eq!(v["task_id"], "t1");
        assert_eq!(v["code"], "budget");
        let ts = v["ts"].as_str().unwrap();
        assert!(ts.ends_with('Z') && ts.len() == 24, "{ts}");
        assert!(line.starts_with(r#"{"type":"warning","seq":7"#));
    }

    #[test]
    fn retry_fields_follow_the_message_and_status_stays_as_null() {
        let env = Envelope {
            event: Event::Warning {
                code: WarningCode::ModelRetry,
                message: "m".into(),
                retry: Some(RetryInfo {
                    attempt: 1,
                    delay_ms: 500,
                    status: None,
                }),
                rate: None,
                server: None,
                tool: None,
            },
            task_id: None,
            gate: None,
        };
        let l = line(0, &env);
        assert!(
            l.ends_with(concat!(
                r#","code":"model_retry","message":"m","attempt":1,"delay_ms":500,"status":null}"#,
                "\n"
            )),
            "{l}"
        );
    }

    #[test]
    fn a_plain_warning_has_only_code_and_message() {
        let l = line(
            0,
            &Envelope {
                event: Event::warning(WarningCode::Budget, "80% spent"),
                task_id: None,
                gate: None,
            },
        );
        assert!(
            l.ends_with(concat!(r#","code":"budget","message":"80% spent"}"#, "\n")),
            "{l}"
        );
    }

    #[test]
    fn tool_arguments_keep_the_models_key_order() {
        let env = &samples()[3];
        assert!(line(0, env).contains(r#""arguments":{"z":1,"a":{"y":[1,2],"b":null}}"#));
    }

    #[test]
    fn samples_cover_every_event_type() {
        let mut names: Vec<_> = samples().iter().map(|e| e.event.type_name()).collect();
        names.dedup();
        assert_eq!(names.len(), 18, "{names:?}");
    }

    /// Keeps what a renderer is given, for a test to read.
    struct Seen(Arc<std::sync::Mutex<Vec<String>>>);

    impl Renderer for Seen {
        fn render(&mut self, env: &Envelope) {
            let name = match &env.event {
                Event::Warning { message, .. } => message.clone(),
                e => e.type_name().to_string(),
            };
            self.0.lock().unwrap().push(name);
        }
    }

    /// An event behind a closed gate is not written, nor anything queued after it, until
    /// the gate opens; then all are, in order.
    #[test]
    fn an_event_waits_at_its_gate_and_those_after_it_wait_too() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (events, writer) = start_writer(Output::Human(Box::new(Seen(seen.clone()))));
        let (open, opened) = std::sync::mpsc::channel::<()>();
        let opened = std::sync::Mutex::new(opened);
        let gate = Gate::new(move || {
            let _ = opened.lock().unwrap().recv();
        });
        events.emit(Event::warning(WarningCode::Budget, "before"));
        events.emit_after(Event::warning(WarningCode::Budget, "gated"), Some(gate));
        events.emit(Event::warning(WarningCode::Budget, "after"));
        let t0 = std::time::Instant::now();
        while seen.lock().unwrap().is_empty() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(*seen.lock().unwrap(), ["before"]);
        open.send(()).unwrap();
        events.emit(samples().pop().unwrap().event);
        drop(events);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        assert!(rt.block_on(writer.finish(|| false)));
        assert_eq!(
            *seen.lock().unwrap(),
            ["before", "gated", "after", "run_completed"]
        );
    }
}
