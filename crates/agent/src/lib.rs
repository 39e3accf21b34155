//! The one agent loop used by the lead and by every sub-agent. They differ by tools,
//! prompt, limits and observer — not by code path.

// Events are the only output channel: nothing prints to stdout but the event writer,
// the human view and the plain-text commands, all through one explicit writer each.
#![deny(clippy::print_stdout)]
// stderr too: `eprintln!` panics on a closed stderr, which must change no exit code (§12).
#![cfg_attr(not(test), deny(clippy::print_stderr))]

mod call_ids;
pub mod compaction;
pub mod context;
pub mod control;
pub mod final_answer;
pub mod guards;
pub mod observer;
pub mod prompts;
pub mod tool_results;
mod turns;

#[cfg(test)]
mod loop_tests;

/// Test doubles shared with the crates above (their tests enable `testing`).
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

pub use context::{AgentPort, ContextPolicy, History, KeepAll, PreCall, Reason};
pub use control::RunControl;
pub use observer::{LeadObserver, Observer, ResumeMarks};
pub use turns::run_agent;

use deerflow_events::usage::{Ledger, UsageTotals};
use deerflow_events::EventSink;
use deerflow_model::output_schema::OutputSchema;
use deerflow_model::{AgentId, ChatModel, StopRules};
use deerflow_tools::{ToolContext, Toolset};
use guards::{Budget, LoopLimits};

/// What every agent of a run shares.
pub struct RunShared {
    pub ledger: Arc<Ledger>,
    pub budget: Budget,
    pub loop_limits: LoopLimits,
    pub control: Arc<RunControl>,
    /// What every agent's history goes through (summarization, large tool outputs).
    pub context: Arc<dyn ContextPolicy>,
    /// Which finish reasons are safety or output-limit stops (contract §10).
    pub stops: StopRules,
}

/// One agent: its model, prompt, tools and limits.
pub struct Agent {
    pub id: AgentId,
    /// `lead` or `subagent:TYPE`, as usage events name it.
    pub caller: String,
    pub model: Arc<dyn ChatModel>,
    /// The model as the user chose it (usage events, `by_model`).
    pub model_name: String,
    pub system: Arc<str>,
    pub tools: Arc<Toolset>,
    /// Acts on the history before each model call (compaction).
    pub context: Arc<dyn ContextPolicy>,
    pub max_turns: u32,
    /// Workspace, limits and this agent's cancellation token.
    pub tool_ctx: ToolContext,
    /// Stamped with the task id for a sub-agent.
    pub events: EventSink,
    pub observer: Arc<dyn Observer>,
    /// Usage and turns so far, readable after the loop's future is dropped (a timeout).
    pub progress: Arc<Progress>,
    /// The schema this agent's final answer must satisfy (the lead under
    /// `--output-schema`): sent with every request, and checked on the final answer, which
    /// goes back to the model with the violations a bounded number of times.
    pub output_schema: Option<Arc<OutputSchema>>,
    /// Images attached to the task message (`--image`, contract §14).
    pub task_images: Vec<deerflow_model::image::Image>,
}

#[derive(Default)]
pub struct Progress {
    pub usage: Mutex<UsageTotals>,
    pub turns: AtomicU32,
}

impl Progress {
    pub fn usage(&self) -> UsageTotals {
        *self.usage.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub fn turns(&self) -> u32 {
        self.turns.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// How an agent's loop ended.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEnd {
    /// A final answer (`stop_reason` "loop_capped" when the loop guard forced it).
    Final {
        text: Option<String>,
        stop_reason: Option<&'static str>,
    },
    /// `max_turns` reached; the last non-empty assistant text, if any.
    MaxTurns {
        last_text: Option<String>,
    },
    Clarify {
        question: String,
        options: Vec<String>,
    },
    /// This agent's response reached the token budget.
    Budget {
        last_text: Option<String>,
    },
    Failed(String),
    Cancelled,
}
