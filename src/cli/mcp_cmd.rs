//! `deerflow mcp list [--json]`: start every enabled MCP server, list its tools as a run
//! would offer them (or why it did not start), stop them; exit 0 when all started, else 1.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::docs::print;
use super::{config_error, load_warnings};
use crate::config;
use crate::mcp::{start_all, Outcome, StartContext, StopTimes};
use crate::tools::registry::ToolRegistry;
use crate::workspace::process::ProcessGroups;

pub async fn list(config_path: Option<PathBuf>, mcp_configs: Vec<PathBuf>, as_json: bool) -> i32 {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let loaded = match config::load(&config::LoadOptions {
        explicit: config_path,
        sets: Vec::new(),
        cwd: cwd.clone(),
        mcp_configs,
        model: None,
        providers: crate::model::registry::providers(),
    }) {
        Ok(l) => l,
        Err(e) => return config_error(&e),
    };
    load_warnings(&loaded);
    let ctx = StartContext {
        workspace: cwd,
        groups: ProcessGroups::default(),
        base_env: std::sync::Arc::new(super::run::child_env(&loaded)),
    };
    // The names a run's built-ins take, bash included, so a collision shows here too.
    let mut registry = ToolRegistry::builtin(true);
    let (running, outcomes) = start_all(&loaded.mcp, &ctx, &mut registry).await;
    running.stop(StopTimes::NORMAL).await;
    for o in &outcomes {
        if let Outcome::Started {
            server, renamed, ..
        } = o
        {
            if let Some(w) = crate::mcp::renamed_warning(server, renamed) {
                super::warning(&w);
            }
        }
    }
    let all_up = outcomes
        .iter()
        .all(|o| matches!(o, Outcome::Started { .. }));
    let code = if as_json {
        let servers: Vec<Value> = outcomes.iter().map(|o| to_json(o, &registry)).collect();
        print(&serde_json::to_string_pretty(&json!({ "servers": servers })).unwrap_or_default())
    } else if outcomes.is_empty() {
        print("no MCP servers are configured (or all are disabled)")
    } else {
        print(&text(&outcomes, &registry))
    };
    match code {
        0 if !all_up => 1,
        c => c,
    }
}

fn to_json(o: &Outcome, registry: &ToolRegistry) -> Value {
    match o {
        Outcome::Started {
            server,
            transport,
            tools,
            duration_ms,
            ..
        } => {
            let tools: Vec<Value> = tools
                .iter()
                .filter_map(|n| registry.get(n))
                .map(|t| {
                    let spec = t.spec();
                    json!({"name": spec.name, "description": spec.description, "input_schema": spec.parameters})
                })
                .collect();
            json!({"name": server, "status": "started", "transport": transport, "duration_ms": duration_ms, "tools": tools})
        }
        Outcome::Failed {
            server,
            required,
            error,
        } => json!({"name": server, "status": "failed", "required": required, "error": error}),
    }
}

/// The listing for a terminal: everything a server or the config says is shown on its line
/// with control characters escaped (contract §12), so a tool description cannot set the
/// clipboard (OSC 52), retitle or clear the terminal.
fn text(outcomes: &[Outcome], registry: &ToolRegistry) -> String {
    use crate::text::escape_controls as esc;
    let mut out = String::new();
    for o in outcomes {
        match o {
            Outcome::Started {
                server,
                transport,
                tools,
                ..
            } => {
                out.push_str(&format!(
                    "{} ({transport}): {} tools\n",
                    esc(server),
                    tools.len()
                ));
                for name in tools {
                    let desc = registry
                        .get(name)
                        .map(|t| t.spec().description)
                        .unwrap_or_default();
                    let desc = desc.lines().next().unwrap_or_default();
                    out.push_str(&format!("  {}  {}\n", esc(name), esc(desc)));
                }
            }
            Outcome::Failed { server, error, .. } => {
                out.push_str(&format!(
                    "{}: failed to start: {}\n",
                    esc(server),
                    esc(error)
                ));
            }
        }
    }
    out
}
