//! Integration test modules (one binary: tests/all.rs).

mod harness;
mod mock_selftest;
mod replay_runs;
mod subagents;
mod subagents_http;
