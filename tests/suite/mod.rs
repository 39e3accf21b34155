//! Integration test modules (one binary: tests/all.rs).

mod commands_cli;
mod config_cli;
mod harness;
mod mock_selftest;
mod replay_runs;
mod subagents;
mod tools_cli;
