//! Integration test modules (one binary: tests/all.rs).

mod anthropic_http;
mod architecture;
mod commands_cli;
mod config_cli;
mod context;
mod examples;
mod generated_docs;
mod guards;
mod hardening;
mod harness;
mod mcp;
mod mock_selftest;
mod openai_http;
mod output_schema;
mod provider_echo;
mod provider_faults;
mod replay_runs;
mod sandbox;
mod sandbox_docker;
mod signals;
mod subagents;
mod subagents_http;
mod thinking;
mod tools_cli;
