//! Integration test modules (one binary: tests/all.rs).

mod mock_selftest;
mod harness;
mod replay_runs;
mod subagents;
