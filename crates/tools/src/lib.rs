//! The `Tool` trait, the run's tool registry (`registry`), typed arguments with generated
//! schemas (`args`), and the tool families (`fs`, `search`, `bash`, `lead`). A tool failure
//! is a value returned to the model (`ToolStatus::Error`), never an error that ends the run.

// Events are the only output channel: nothing prints to stdout but the event writer,
// the human view and the plain-text commands, all through one explicit writer each.
#![deny(clippy::print_stdout)]
// stderr too: `eprintln!` panics on a closed stderr, which must change no exit code (§12).
#![cfg_attr(not(test), deny(clippy::print_stderr))]

pub mod args;
pub mod bash;
mod edit_stream;
mod error;
pub mod fs;
pub mod lead;
pub mod loop_key;
mod read_range;
pub mod registry;
pub mod search;
pub mod task_end;
mod walk;
pub mod web;

use std::borrow::Cow;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use deerflow_events::ToolStatus;
use deerflow_model::{BoxFuture, ToolArgs, ToolCall, ToolSpec};
use deerflow_workspace::Workspace;
pub use error::ToolError;

/// Something a tool asks the agent loop to do besides answering.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// `ask_clarification`: end the run and ask the user.
    Clarify {
        question: String,
        options: Vec<String>,
    },
}

/// One block of a tool's output. Built-in tools answer with one text block; a tool from
/// elsewhere (an MCP server) may also return blocks that are not text.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    /// An image, audio clip or embedded resource: the model and the events get a one-line
    /// stand-in, since tool results reach them as text.
    Media(Media),
}

/// A block that is not text, described rather than carried.
#[derive(Debug, Clone, PartialEq)]
pub struct Media {
    /// What it is, as its source names it (`image`, `audio`, `resource`).
    pub kind: String,
    pub mime_type: Option<String>,
    /// A URI, a name, or a size: whatever says what it was.
    pub description: String,
}

impl Content {
    fn render(&self, out: &mut String) {
        match self {
            Content::Text(t) => out.push_str(t),
            Content::Media(m) => {
                // Contract §9's one line: `[image: image/png, 12345 bytes]`, `[resource: URI]`.
                out.push('[');
                out.push_str(&m.kind);
                let parts: Vec<&str> = m
                    .mime_type
                    .iter()
                    .map(String::as_str)
                    .chain(Some(m.description.as_str()).filter(|d| !d.is_empty()))
                    .collect();
                if !parts.is_empty() {
                    out.push_str(": ");
                    out.push_str(&parts.join(", "));
                }
                out.push(']');
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub status: ToolStatus,
    pub content: Vec<Content>,
    pub control: Option<Control>,
    /// Set by the `task` tool: how the delegated task ended.
    pub task_end: Option<task_end::TaskEnd>,
    /// An image the model is shown with the result (`view_image`), in its next request; the
    /// events get only the text. (One, not a list: a tool's output is moved often, and an
    /// `Image` is one pointer.)
    pub image: Option<deerflow_model::image::Image>,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> Self {
        Self::with_content(ToolStatus::Ok, vec![Content::Text(text.into())])
    }
    pub fn error(text: impl Into<String>) -> Self {
        Self::with_content(ToolStatus::Error, vec![Content::Text(text.into())])
    }
    pub fn with_content(status: ToolStatus, content: Vec<Content>) -> Self {
        Self {
            status,
            content,
            control: None,
            task_end: None,
            image: None,
        }
    }

    pub fn with_task_end(mut self, end: task_end::TaskEnd) -> Self {
        self.task_end = Some(end);
        self
    }

    /// What the model sees and the events show: the blocks in order, one per line.
    pub fn text(&self) -> Cow<'_, str> {
        match self.content.as_slice() {
            [Content::Text(t)] => Cow::Borrowed(t),
            blocks => {
                let mut out = String::new();
                for (i, b) in blocks.iter().enumerate() {
                    if i > 0 {
                        out.push('\n');
                    }
                    b.render(&mut out);
                }
                Cow::Owned(out)
            }
        }
    }

    /// [`ToolOutput::text`], without copying the common single text block.
    pub fn into_text(mut self) -> String {
        match self.content.as_mut_slice() {
            [Content::Text(t)] => std::mem::take(t),
            _ => self.text().into_owned(),
        }
    }
}

/// Limits from the `sandbox` config section that tools apply.
#[derive(Debug, Clone)]
pub struct SandboxLimits {
    pub allow_host_bash: bool,
    /// The environment bash runs with: deerflow's own without credentials (§6).
    pub child_env: Arc<deerflow_workspace::child_env::ChildEnv>,
    /// Where bash runs (contract §13).
    pub sandbox: Arc<dyn deerflow_workspace::sandbox::Sandbox>,
    pub bash_command_timeout_secs: f64,
    pub bash_output_max_chars: usize,
    pub read_file_output_max_chars: usize,
    pub ls_output_max_chars: usize,
    /// `max_results` of the config's `glob` and `grep` entries (§14): the default of a
    /// call that gives none; `None` keeps the tool's own.
    pub glob_max_results: Option<u64>,
    pub grep_max_results: Option<u64>,
    /// A sub-agent's mark on the host processes its commands start (`None` for the lead).
    pub task_mark: Option<deerflow_workspace::task_mark::TaskMark>,
    /// The sub-agent's task id (`None` for the lead): what a recorded web result is kept
    /// under besides the call's id (§14).
    pub task_id: Option<Arc<str>>,
}

impl SandboxLimits {
    /// The limits one sub-agent's tools get: the same, with its mark, in the sandbox its
    /// commands run in (its own container with docker's `per_task`).
    pub fn for_task(
        self: &Arc<Self>,
        task_id: &str,
        mark: deerflow_workspace::task_mark::TaskMark,
    ) -> Arc<Self> {
        Arc::new(Self {
            sandbox: self
                .sandbox
                .for_task(task_id)
                .unwrap_or_else(|| self.sandbox.clone()),
            task_mark: Some(mark),
            task_id: Some(task_id.into()),
            ..(**self).clone()
        })
    }
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            allow_host_bash: false,
            child_env: Arc::default(),
            sandbox: Arc::new(deerflow_workspace::sandbox::LocalSandbox),
            bash_command_timeout_secs: 600.0,
            bash_output_max_chars: 20_000,
            read_file_output_max_chars: 50_000,
            ls_output_max_chars: 20_000,
            glob_max_results: None,
            grep_max_results: None,
            task_mark: None,
            task_id: None,
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
}

/// How a call may overlap the other calls of the same response (contract §12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// Reads (and `task`, whose sub-agents run in parallel): may run at the same time as
    /// the neighbouring calls that are `Shared` too.
    Shared,
    /// Anything that changes the world (writes, bash, MCP tools): runs after every call
    /// before it has finished, and before any call after it starts.
    Exclusive,
}

pub trait Tool: Send + Sync {
    /// The name the model calls it by (the same as `spec().name`, without building the spec).
    fn name(&self) -> &str;
    fn spec(&self) -> ToolSpec;
    /// Serves one call of the model: its arguments, and its id (the task tool makes it the
    /// task id).
    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput>;
    /// How this call may overlap its neighbours, decided per call (a tool may read or
    /// write depending on its arguments). Exclusive unless the tool says otherwise, so a
    /// new tool is ordered safely.
    fn concurrency(&self, _call: &ToolCall) -> Concurrency {
        Concurrency::Exclusive
    }
    /// What makes two calls of this tool the same call for the loop detector (contract
    /// §4): all the arguments unless the tool says otherwise ([`loop_key`]), so calls with
    /// different arguments of a tool deerflow knows nothing about (an MCP tool) are never
    /// repeats.
    fn loop_key(&self, args: &ToolArgs) -> u64 {
        loop_key::all_arguments(args)
    }
}

pub type ToolBox = Vec<Arc<dyn Tool>>;

/// An agent's tools with their specs built once. Every sub-agent of one type shares one
/// `Toolset`: building the specs (JSON Schemas) per sub-agent was most of a large fan-out's
/// allocations.
pub struct Toolset {
    pub tools: ToolBox,
    /// What the model is offered, in the tools' order.
    pub specs: Arc<[ToolSpec]>,
    /// Characters of the specs as JSON, for the context policy's estimate.
    pub spec_chars: usize,
}

impl Toolset {
    pub fn new(tools: ToolBox) -> Self {
        let specs: Arc<[ToolSpec]> = tools.iter().map(|t| t.spec()).collect();
        let spec_chars = specs
            .iter()
            .map(|t| serde_json::to_string(t).map_or(0, |s| s.len()))
            .sum();
        Self {
            tools,
            specs,
            spec_chars,
        }
    }

    pub fn find(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_text_block_is_the_text_as_it_is() {
        let out = ToolOutput::ok("a\nb");
        assert!(matches!(out.text(), Cow::Borrowed("a\nb")));
        assert_eq!(out.into_text(), "a\nb");
        assert_eq!(ToolOutput::error("").text(), "");
    }

    #[test]
    fn blocks_are_rendered_one_per_line_with_media_described() {
        let out = ToolOutput::with_content(
            ToolStatus::Ok,
            vec![
                Content::Text("chart below".into()),
                Content::Media(Media {
                    kind: "image".into(),
                    mime_type: Some("image/png".into()),
                    description: "12345 bytes".into(),
                }),
                Content::Media(Media {
                    kind: "resource".into(),
                    mime_type: None,
                    description: String::new(),
                }),
            ],
        );
        let want = "chart below\n[image: image/png, 12345 bytes]\n[resource]";
        assert_eq!(out.text(), want);
        assert_eq!(out.into_text(), want);
        assert_eq!(ToolOutput::with_content(ToolStatus::Ok, vec![]).text(), "");
    }
}
