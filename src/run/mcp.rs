//! The run's MCP servers (contract §9): started after `run_started` beside the sandbox,
//! their tools added to the registry before any agent takes its tools, stopped at the end.

use std::sync::Arc;

use crate::mcp::{Outcome, StartContext, StopTimes};

use super::RunSpec;
use crate::agent::RunControl;
use crate::events::{Event, EventSink, WarningCode};

pub(super) use crate::mcp::Running;

/// Starts the run's MCP servers (in parallel, interrupted by a stop) and registers their
/// tools; `mcp_server_started` for each that is up, `mcp_server_failed` for each that is
/// not. Returns the running servers and, when a required server failed, the run's error.
pub(super) async fn start(
    spec: &mut RunSpec,
    events: &EventSink,
    control: &RunControl,
) -> (Running, Option<String>) {
    if spec.mcp.is_empty() {
        return Default::default();
    }
    let ctx = StartContext {
        workspace: spec.workspace.root().to_path_buf(),
        groups: spec.workspace.processes().clone(),
        base_env: spec.limits.child_env.clone(),
    };
    let mut registry = (*spec.tools).clone();
    let (running, outcomes) = tokio::select! {
        r = crate::mcp::start_all(&spec.mcp, &ctx, &mut registry) => r,
        _ = control.cancel.cancelled() => {
            // Servers still starting are dropped (their leaders die with their handles);
            // no tool has run yet, so every live group is one of theirs.
            spec.workspace.processes().kill_all();
            return Default::default();
        }
    };
    spec.tools = Arc::new(registry);
    let mut failure = None;
    for o in outcomes {
        match o {
            Outcome::Started {
                server,
                transport,
                tools,
                duration_ms,
                renamed,
            } => {
                let renamed = crate::mcp::renamed_warning(&server, &renamed);
                events.emit(Event::McpServerStarted {
                    server: server.clone(),
                    transport,
                    tools,
                    duration_ms,
                });
                if let Some(message) = renamed {
                    events.emit(Event::Warning {
                        code: WarningCode::McpToolRenamed,
                        message,
                        retry: None,
                        rate: None,
                        server: Some(server),
                        tool: None,
                    });
                }
            }
            Outcome::Failed {
                server,
                required,
                error,
            } => {
                let message = format!("MCP server '{server}' failed to start: {error}");
                if required && failure.is_none() {
                    failure = Some(format!("required {message}"));
                }
                events.emit(Event::Warning {
                    code: WarningCode::McpServerFailed,
                    message,
                    retry: None,
                    rate: None,
                    server: Some(server),
                    tool: None,
                });
            }
        }
    }
    if failure.is_some() {
        running.stop(StopTimes::NORMAL).await;
    }
    (running, failure)
}

/// Stops the servers: within the hurried bounds when the run was told to stop.
pub(super) async fn stop(running: Running, hurried: bool) {
    let times = if hurried {
        StopTimes::HURRIED
    } else {
        StopTimes::NORMAL
    };
    running.stop(times).await;
}
