//! deerflow: a command-line agent harness for scripted pipelines.
//!
//! Data flows one way: flags + config → a run spec → the lead agent loop → tools (and the
//! task tool → the scheduler → sub-agent loops) → events → one sink → an exit code.

// Events are the only output channel: nothing prints to stdout but the event writer,
// the human view and the plain-text commands, all through one explicit writer each.
#![deny(clippy::print_stdout)]
// stderr too: `eprintln!` panics on a closed stderr, which must change no exit code (§12).
#![cfg_attr(not(test), deny(clippy::print_stderr))]

pub mod agent;
pub mod cli;
pub mod config;
pub mod events;
pub mod logging;
pub mod mcp;
pub mod model;
pub mod outcome;
pub mod run;
pub mod schema;
pub mod subagent;
pub mod text;

#[cfg(test)]
pub(crate) mod testing;
pub mod tools;
pub mod ui;
pub mod usage;
pub mod workspace;
