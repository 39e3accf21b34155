//! Integration test modules (one binary: tests/all.rs).

mod anthropic_http;
mod architecture;
mod commands_cli;
mod config_cli;
mod context;
mod deerflow_examples;
mod each;
mod each_results;
mod examples;
mod gemini_http;
mod generated_docs;
mod guards;
mod hardening;
mod harness;
mod hot_code;
mod logs;
mod mcp;
mod mcp_config;
mod mcp_transport;
mod mock_selftest;
mod openai_http;
mod output_schema;
mod provider_echo;
mod provider_faults;
mod rate_limits;
mod replay_runs;
mod responses_http;
mod sandbox;
#[cfg(feature = "docker")]
mod sandbox_docker;
#[cfg(feature = "docker")]
mod sandbox_docker_owner;
mod signals;
mod state;
mod state_ledger;
mod state_resume;
mod state_tasks;
mod stop_reasons;
mod subagents;
mod subagents_http;
mod task_processes;
mod thinking;
mod tools_cli;
mod user_reports;
mod vision;
mod web_config;
