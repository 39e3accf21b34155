//! Everything a run needs, resolved from flags and config before `run_started`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::each::EachSpec;
use crate::agent::guards::LoopLimits;
use crate::agent::{ContextPolicy, Progress};
use crate::config::McpServer;
use crate::events::{ModelInfo, SandboxInfo, WarningCode};
use crate::model::output_schema::OutputSchema;
use crate::model::providers::replay::RecordLog;
use crate::model::{ChatModel, StopRules};
use crate::subagent::{Skill, SubagentSetup};
use crate::tools::registry::ToolRegistry;
use crate::tools::SandboxLimits;
use crate::usage::Price;
use crate::workspace::Workspace;

/// A model ready to call, with the name the user chose for it.
#[derive(Clone)]
pub struct LeadModel {
    pub info: ModelInfo,
    pub model: Arc<dyn ChatModel>,
    /// The model takes images: its agents get `view_image` (contract §14).
    pub vision: bool,
}

pub struct RunSpec {
    pub prompt: String,
    /// `--image`s, attached to the lead's task message.
    pub images: Vec<crate::model::image::Image>,
    pub model: LeadModel,
    /// Prices by model name (as named in events), for `cost_usd`.
    pub prices: HashMap<String, Price>,
    pub json: bool,
    pub quiet: bool,
    pub color: bool,
    pub workspace: Arc<Workspace>,
    /// Where tools run, as `run_started` reports it.
    pub sandbox: SandboxInfo,
    pub limits: Arc<SandboxLimits>,
    /// The run's tools, built once: the lead and every sub-agent take theirs from it.
    pub tools: Arc<ToolRegistry>,
    pub loop_limits: LoopLimits,
    /// DeerFlow's `safety_finish_reason` section applied to the built-in stop reasons.
    pub stops: StopRules,
    pub max_turns: u32,
    pub max_concurrent: u32,
    pub max_tasks: u32,
    pub timeout_seconds: Option<f64>,
    pub max_tokens: Option<u64>,
    /// `None` when sub-agents are disabled.
    pub subagents: Option<Arc<SubagentSetup>>,
    pub output_last_message: Option<PathBuf>,
    /// `--output-schema`, compiled: the lead's final answer must satisfy it.
    pub output_schema: Option<Arc<OutputSchema>>,
    pub record: Option<(PathBuf, Arc<RecordLog>)>,
    /// Warnings found before the run (`config_ignored`, `skill_skipped`), emitted after
    /// `run_started`: (code, message).
    pub warnings: Vec<(WarningCode, String)>,
    /// Configured tools deerflow does not offer (§14): (tool, message), emitted as
    /// `tool_unavailable` warnings after `warnings`.
    pub unavailable_tools: Vec<(String, String)>,
    pub lead_progress: Arc<Progress>,
    /// The skills every agent may list.
    pub skills: Vec<Skill>,
    /// What every agent's history goes through (summarization, large tool outputs).
    pub context: Arc<dyn ContextPolicy>,
    /// Where large tool results are stored (`/mnt/tool-results`); removed with the spec,
    /// at the end of the run.
    pub tool_results: Option<super::scratch::ScratchDir>,
    /// Enabled MCP servers, started after `run_started` (contract §9).
    pub mcp: Vec<McpServer>,
    /// `--each`: the prompt is a template run once per item, with no lead (§15).
    pub each: Option<EachSpec>,
    /// `--state DIR`: the ledger, locked and read back (§15).
    pub state: Option<Arc<super::state::StateDir>>,
}
