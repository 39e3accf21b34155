//! Sub-agents: the type registry, skills, the bounded-concurrency scheduler with its
//! cancellation tree, the set-once task state machine, and the `task` tool the lead gets.

// Events are the only output channel: nothing prints to stdout but the event writer,
// the human view and the plain-text commands, all through one explicit writer each.
#![deny(clippy::print_stdout)]
// stderr too: `eprintln!` panics on a closed stderr, which must change no exit code (§12).
#![cfg_attr(not(test), deny(clippy::print_stderr))]

pub mod item;
pub mod prompts;
pub mod record;
pub mod registry;
pub mod scheduler;
#[cfg(test)]
mod scheduler_tests;
pub mod skills;
pub mod state;
pub mod task_tool;

use std::collections::HashMap;
use std::sync::Arc;

pub use scheduler::Scheduler;
pub use skills::Skill;

use deerflow_model::ChatModel;

/// One sub-agent type with its effective settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentType {
    pub name: String,
    /// "built-in" or "custom".
    pub source: &'static str,
    pub description: String,
    pub system_prompt: String,
    /// Allow-list; `None` inherits all the lead's tools.
    pub tools: Option<Vec<String>>,
    pub disallowed_tools: Vec<String>,
    /// Skill names; `None` = all skills, empty = none.
    pub skills: Option<Vec<String>>,
    /// The model as the user named it (`inherit` already resolved).
    pub model: String,
    pub max_turns: u32,
    pub timeout_seconds: f64,
}

/// Tools no sub-agent ever gets (kept here too for the config's check of `tools:` lists).
pub use deerflow_tools::registry::LEAD_ONLY_TOOLS;

/// What the scheduler needs to start sub-agents: the available types, their models and
/// the skills they may list.
pub struct SubagentSetup {
    /// Shared with every task of the type, so a task does not copy its prompt.
    pub types: Vec<Arc<SubagentType>>,
    pub models: HashMap<String, Arc<dyn ChatModel>>,
    /// The names in `models` of those that take images (`supports_vision`): a sub-agent
    /// on one gets `view_image`.
    pub vision: std::collections::HashSet<String>,
    pub skills: Vec<Skill>,
}

impl SubagentSetup {
    pub fn type_names(&self) -> Vec<String> {
        self.types.iter().map(|t| t.name.clone()).collect()
    }

    pub fn find(&self, name: &str) -> Option<&Arc<SubagentType>> {
        self.types.iter().find(|t| t.name == name)
    }
}
