//! Integration test modules (one binary: tests/all.rs).

mod guards;
mod harness;
mod mock_selftest;
mod replay_runs;
mod signals;
mod subagents;
