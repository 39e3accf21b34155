//! The event stream: the `Event` enum (contract §3) and the single writer that owns stdout.
//!
//! Every part of a run emits `Event`s into one channel; one writer thread stamps `seq`,
//! `ts` and `run_id` and writes one JSON line per event. It runs on its own OS thread so a
//! slow or full pipe never stalls a tokio worker.

use std::io::Write;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::usage::{RunUsage, UsageTotals};

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModelInfo {
    pub name: String,
    pub provider: String,
    pub model: String,
}

#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct TaskCounts {
    pub total: u32,
    pub completed: u32,
    pub failed: u32,
    pub timed_out: u32,
    pub cancelled: u32,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
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
    },
    Message {
        role: String,
        text: String,
    },
    ToolCall {
        call_id: String,
        name: String,
        arguments: Value,
    },
    ToolResult {
        call_id: String,
        name: String,
        status: String,
        output: String,
        truncated: bool,
        duration_ms: u64,
    },
    TaskQueued {
        task_id: String,
        description: String,
        subagent_type: String,
        position: u32,
    },
    TaskStarted {
        task_id: String,
        description: String,
        subagent_type: String,
        model: String,
        max_turns: u32,
        #[serde(serialize_with = "seconds")]
        timeout_seconds: f64,
    },
    TaskRunning {
        task_id: String,
        message_index: u32,
        message: Value,
        usage: UsageTotals,
    },
    TaskCompleted {
        task_id: String,
        result: String,
        usage: UsageTotals,
        turns: u32,
        duration_ms: u64,
        stop_reason: Option<String>,
    },
    TaskFailed {
        task_id: String,
        error: String,
        usage: UsageTotals,
        turns: u32,
        duration_ms: u64,
        stop_reason: Option<String>,
    },
    TaskTimedOut {
        task_id: String,
        error: String,
        #[serde(serialize_with = "seconds")]
        timeout_seconds: f64,
        usage: UsageTotals,
        duration_ms: u64,
    },
    TaskCancelled {
        task_id: String,
        error: String,
        usage: UsageTotals,
        duration_ms: u64,
    },
    Usage {
        caller: String,
        model: String,
        input_tokens: Option<u64>,
        output_tokens: Option<u64>,
        total_tokens: Option<u64>,
        cache_read_tokens: Option<u64>,
        reported: bool,
    },
    Warning {
        code: String,
        message: String,
        /// Code-specific fields (`model_retry`: attempt, delay_ms, status).
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    ClarificationRequested {
        question: String,
        options: Vec<String>,
    },
    RunCompleted {
        status: String,
        exit_code: i32,
        final_message: Option<String>,
        error: Option<String>,
        duration_ms: u64,
        turns: u32,
        usage: RunUsage,
        tasks: TaskCounts,
        artifacts: Vec<String>,
    },
}

/// Whole seconds print as integers (`1800`, like the error texts say), others as floats.
fn seconds<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    match crate::text::whole(*v) {
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
    pub fn warning(code: &str, message: impl Into<String>) -> Self {
        Event::Warning {
            code: code.to_string(),
            message: message.into(),
            extra: Map::new(),
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Event::RunStarted { .. } => "run_started",
            Event::Message { .. } => "message",
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
            Event::ClarificationRequested { .. } => "clarification_requested",
            Event::RunCompleted { .. } => "run_completed",
        }
    }
}

/// An event plus the sub-agent it happened in, if any.
#[derive(Debug, Clone)]
pub struct Envelope {
    pub event: Event,
    pub task_id: Option<String>,
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

/// Where events go. Cloned freely; sending never blocks.
#[derive(Clone)]
pub struct EventSink {
    tx: mpsc::Sender<Envelope>,
    task_id: Option<String>,
}

impl EventSink {
    pub fn emit(&self, event: Event) {
        // A send error means the writer is gone (shutdown); there is no one left to tell.
        let _ = self.tx.send(Envelope {
            event,
            task_id: self.task_id.clone(),
        });
    }

    /// A sink whose events are stamped with a sub-agent's task id.
    pub fn for_task(&self, task_id: &str) -> Self {
        Self {
            tx: self.tx.clone(),
            task_id: Some(task_id.to_string()),
        }
    }
}

/// The writer thread's handle: join it (with a deadline) after the last event.
pub struct EventWriter {
    handle: Option<JoinHandle<()>>,
    done: mpsc::Receiver<()>,
}

/// Output mode of the writer thread.
pub enum Output {
    /// NDJSON on stdout; `on_closed` runs once if stdout turns out to be closed.
    Json {
        run_id: String,
        on_closed: Arc<dyn Fn() + Send + Sync>,
    },
    /// A human renderer (stderr view, final answer on stdout).
    Human(Box<dyn Renderer>),
}

pub fn start_writer(output: Output) -> (EventSink, EventWriter) {
    let (tx, rx) = mpsc::channel::<Envelope>();
    let (done_tx, done) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("deerflow-events".into())
        .spawn(move || {
            match output {
                Output::Json { run_id, on_closed } => write_json(rx, &run_id, on_closed.as_ref()),
                Output::Human(mut r) => {
                    while let Some(env) = next_event(&rx, r.as_mut()) {
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
    (
        EventSink { tx, task_id: None },
        EventWriter { handle, done },
    )
}

impl EventWriter {
    /// Waits for the writer to drain. Checks `give_up` every 50 ms while it waits (a
    /// reader that stopped reading must not keep a signalled process alive). Returns false
    /// when it gave up.
    pub fn finish(mut self, give_up: impl Fn() -> bool) -> bool {
        loop {
            match self.done.recv_timeout(Duration::from_millis(50)) {
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) if give_up() => return false,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        true
    }
}

/// The next event for a renderer, ticking it while none comes; `None` once every sender
/// is gone.
fn next_event(rx: &mpsc::Receiver<Envelope>, r: &mut dyn Renderer) -> Option<Envelope> {
    loop {
        let Some(every) = r.tick_interval() else {
            return rx.recv().ok();
        };
        match rx.recv_timeout(every) {
            Ok(env) => return Some(env),
            Err(mpsc::RecvTimeoutError::Timeout) => r.tick(),
            Err(mpsc::RecvTimeoutError::Disconnected) => return None,
        }
    }
}

/// `run_completed` is the stream's last line: the writer stops after it, without waiting
/// for every sender to go away (a sub-agent abandoned mid-tool may still hold one).
fn is_last(env: &Envelope) -> bool {
    matches!(env.event, Event::RunCompleted { .. })
}

fn write_json(rx: mpsc::Receiver<Envelope>, run_id: &str, on_closed: &(dyn Fn() + Send + Sync)) {
    let stdout = std::io::stdout();
    let mut seq: u64 = 0;
    let mut closed = false;
    for env in rx {
        let last = is_last(&env);
        if !closed {
            let line = stamp(&env, seq, run_id);
            seq += 1;
            let mut out = stdout.lock();
            let ok = out.write_all(line.as_bytes()).and_then(|_| out.flush());
            if ok.is_err() {
                // EPIPE (or any write failure): stop writing, tell the run, keep draining.
                closed = true;
                on_closed();
            }
        }
        if last {
            break;
        }
    }
}

/// One NDJSON line: `type`, `seq`, `ts`, `run_id`, then `task_id` and the event's fields.
pub fn stamp(env: &Envelope, seq: u64, run_id: &str) -> String {
    let mut obj = Map::new();
    obj.insert("type".into(), Value::from(env.event.type_name()));
    obj.insert("seq".into(), Value::from(seq));
    obj.insert("ts".into(), Value::from(now_rfc3339()));
    obj.insert("run_id".into(), Value::from(run_id));
    if let Some(t) = &env.task_id {
        obj.insert("task_id".into(), Value::from(t.as_str()));
    }
    if let Ok(Value::Object(fields)) = serde_json::to_value(&env.event) {
        for (k, v) in fields {
            if k != "type" {
                obj.insert(k, v);
            }
        }
    }
    let mut line = Value::Object(obj).to_string();
    line.push('\n');
    line
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamped_line_has_envelope_fields_first() {
        let env = Envelope {
            event: Event::warning("x", "y"),
            task_id: Some("t1".into()),
        };
        let line = stamp(&env, 7, "run1");
        assert!(line.ends_with('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["type"], "warning");
        assert_eq!(v["seq"], 7);
        assert_eq!(v["run_id"], "run1");
        assert_eq!(v["task_id"], "t1");
        assert_eq!(v["code"], "x");
        let ts = v["ts"].as_str().unwrap();
        assert!(ts.ends_with('Z') && ts.len() == 24, "{ts}");
        assert!(line.starts_with(r#"{"type":"warning","seq":7"#));
    }

    #[test]
    fn warning_extra_fields_are_flattened() {
        let mut extra = Map::new();
        extra.insert("attempt".into(), Value::from(1));
        extra.insert("status".into(), Value::Null);
        let env = Envelope {
            event: Event::Warning {
                code: "model_retry".into(),
                message: "m".into(),
                extra,
            },
            task_id: None,
        };
        let v: Value = serde_json::from_str(&stamp(&env, 0, "r")).unwrap();
        assert_eq!(v["attempt"], 1);
        assert!(v["status"].is_null());
        assert!(v.get("extra").is_none());
    }
}
