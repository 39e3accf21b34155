//! What an agent loop reports as it goes. The lead reports `message` / `tool_call` /
//! `tool_result` events; a sub-agent reports `task_running` (in `subagent/`).

use std::time::Duration;

use deerflow_events::{Event, EventSink};
use deerflow_model::ToolCall;
use deerflow_tools::ToolOutput;

/// Tool output in events is capped; the model gets all of it.
pub const EVENT_OUTPUT_MAX_CHARS: usize = 2000;

pub trait Observer: Send + Sync {
    /// An assistant message, with the reasoning the model returned and the tool calls
    /// that will run.
    fn assistant(&self, text: Option<&str>, reasoning: Option<&str>, calls: &[ToolCall]);
    /// A tool call about to run (called in call order, before any of them runs).
    fn tool_call(&self, call: &ToolCall);
    /// A tool finished.
    fn tool_result(&self, call: &ToolCall, out: &ToolOutput, took: Duration);
    /// Whether the response just received was replayed from the `--state` ledger: its
    /// usage is reported `resumed` and not counted (contract §15).
    fn response_resumed(&self) -> bool {
        false
    }
    /// Whether the model call of `turn` will be answered from the ledger: the history is
    /// then not compacted before it (compacting would call a model).
    fn replays_turn(&self, _turn: usize) -> bool {
        false
    }
}

/// Which of the lead's events replay an earlier run (`--state`, contract §15): they carry
/// `resumed: true`.
pub trait ResumeMarks: Send + Sync {
    /// Whether the response just received was replayed.
    fn response(&self) -> bool;
    /// Whether call `id` belongs to a replayed response.
    fn call(&self, id: &str) -> bool;
    /// Whether the model call of `turn` will be replayed.
    fn replays(&self, turn: usize) -> bool;
}

pub struct LeadObserver {
    pub events: EventSink,
    pub marks: Option<std::sync::Arc<dyn ResumeMarks>>,
}

impl LeadObserver {
    fn response_resumed(&self) -> bool {
        self.marks.as_ref().is_some_and(|m| m.response())
    }

    fn call_resumed(&self, id: &str) -> bool {
        self.marks.as_ref().is_some_and(|m| m.call(id))
    }
}

impl Observer for LeadObserver {
    fn response_resumed(&self) -> bool {
        LeadObserver::response_resumed(self)
    }

    fn replays_turn(&self, turn: usize) -> bool {
        self.marks.as_ref().is_some_and(|m| m.replays(turn))
    }

    fn assistant(&self, text: Option<&str>, reasoning: Option<&str>, _calls: &[ToolCall]) {
        // The model thought before it wrote: reasoning comes first.
        if let Some(r) = reasoning {
            self.events.emit(Event::Reasoning {
                text: r.to_string(),
                resumed: self.response_resumed(),
            });
        }
        if let Some(t) = text {
            self.events.emit(Event::Message {
                role: "assistant".into(),
                text: t.to_string(),
                resumed: self.response_resumed(),
            });
        }
    }

    fn tool_call(&self, call: &ToolCall) {
        self.events.emit(Event::ToolCall {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            resumed: self.call_resumed(&call.id),
        });
    }

    fn tool_result(&self, call: &ToolCall, out: &ToolOutput, took: Duration) {
        let (output, truncated) = cap_chars(&out.text(), EVENT_OUTPUT_MAX_CHARS);
        self.events.emit(Event::ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            status: out.status,
            output,
            truncated,
            duration_ms: took.as_millis() as u64,
            resumed: self.call_resumed(&call.id),
        });
    }
}

/// The first `max` characters of `s`, and whether anything was cut.
pub fn cap_chars(s: &str, max: usize) -> (String, bool) {
    let c = deerflow_base::text::cut(s, max, deerflow_base::text::Keep::Head);
    (c.plain(), c.is_cut())
}
