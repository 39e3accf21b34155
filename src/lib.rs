//! deerflow: a command-line agent harness for scripted pipelines.
//!
//! Data flows one way: flags + config → a run spec → the lead agent loop → tools (and the
//! task tool → the scheduler → sub-agent loops) → events → one sink → an exit code.

// Events are the only output channel: nothing prints to stdout but the event writer,
// the human view and the plain-text commands, all through one explicit writer each.
#![deny(clippy::print_stdout)]
// stderr too: `eprintln!` panics on a closed stderr, which must change no exit code (§12).
#![cfg_attr(not(test), deny(clippy::print_stderr))]

pub mod cli;
pub mod run;
pub mod schema;

pub mod ui;

// The layers below, under the module names the code and the tests have always used.
pub use deerflow_agent as agent;
pub use deerflow_base::logging;
pub use deerflow_base::text;
pub use deerflow_config as config;
pub use deerflow_events as events;
pub use deerflow_events::outcome;
pub use deerflow_events::usage;
#[cfg(feature = "mcp")]
pub use deerflow_mcp as mcp;
pub use deerflow_model as model;
pub use deerflow_subagent as subagent;
pub use deerflow_tools as tools;
pub use deerflow_workspace as workspace;
