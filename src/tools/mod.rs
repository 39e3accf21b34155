//! The `Tool` trait and the tool families. A tool failure is a value returned to the
//! model (`ToolStatus::Error`), never an error that ends the run.

pub mod bash;
pub mod fs;
pub mod lead;
pub mod search;

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::model::{BoxFuture, ToolSpec};
use crate::workspace::Workspace;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    Ok,
    Error,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ok => "ok",
            ToolStatus::Error => "error",
        }
    }
}

/// Something a tool asks the agent loop to do besides answering.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// `ask_clarification`: end the run and ask the user.
    Clarify {
        question: String,
        options: Vec<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub status: ToolStatus,
    /// What the model sees.
    pub text: String,
    pub control: Option<Control>,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            status: ToolStatus::Ok,
            text: text.into(),
            control: None,
        }
    }
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            status: ToolStatus::Error,
            text: text.into(),
            control: None,
        }
    }
}

/// Limits from the `sandbox` config section that tools apply.
#[derive(Debug, Clone)]
pub struct SandboxLimits {
    pub allow_host_bash: bool,
    pub bash_command_timeout_secs: f64,
    pub bash_output_max_chars: usize,
    pub read_file_output_max_chars: usize,
    pub ls_output_max_chars: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            allow_host_bash: false,
            bash_command_timeout_secs: 600.0,
            bash_output_max_chars: 20_000,
            read_file_output_max_chars: 50_000,
            ls_output_max_chars: 20_000,
        }
    }
}

/// What a tool call can reach: the workspace, the limits, and the caller's cancellation.
#[derive(Clone)]
pub struct ToolContext {
    pub workspace: Arc<Workspace>,
    pub limits: Arc<SandboxLimits>,
    /// Cancelled when the calling agent (task or run) is cancelled or times out.
    pub cancel: CancellationToken,
    /// The id of the tool call being served (the task tool makes it the task id).
    pub call_id: String,
}

impl ToolContext {
    pub fn for_call(&self, call_id: &str) -> Self {
        Self {
            call_id: call_id.to_string(),
            ..self.clone()
        }
    }
}

pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput>;
}

pub type ToolBox = Vec<Arc<dyn Tool>>;

/// Reads a required string argument, or says which one is missing.
pub fn arg_str<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolOutput> {
    args.get(key).and_then(Value::as_str).ok_or_else(|| {
        ToolOutput::error(format!("Error: missing required string argument '{key}'"))
    })
}

pub fn arg_opt_str<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

pub fn arg_bool(args: &Value, key: &str, default: bool) -> bool {
    args.get(key).and_then(Value::as_bool).unwrap_or(default)
}

pub fn arg_u64(args: &Value, key: &str) -> Option<u64> {
    args.get(key).and_then(|v| {
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    })
}

/// The file, search and (when allowed) shell tools every agent may get.
pub fn standard_tools(allow_bash: bool) -> ToolBox {
    let mut tools: ToolBox = vec![
        Arc::new(fs::LsTool),
        Arc::new(fs::ReadFileTool),
        Arc::new(fs::WriteFileTool),
        Arc::new(fs::StrReplaceTool),
        Arc::new(search::GlobTool),
        Arc::new(search::GrepTool),
    ];
    if allow_bash {
        tools.push(Arc::new(bash::BashTool));
    }
    tools
}
