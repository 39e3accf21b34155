//! MCP tool servers (contract §9), through the official SDK `rmcp`: config entries
//! (resolved in `config`) → start-up in parallel → one `Tool` per server tool, registered in
//! the run's `ToolRegistry` before any agent is wired → stop at the end of the run.

// Events are the only output channel: nothing prints to stdout but the event writer,
// the human view and the plain-text commands, all through one explicit writer each.
#![deny(clippy::print_stdout)]
// stderr too: `eprintln!` panics on a closed stderr, which must change no exit code (§12).
#![cfg_attr(not(test), deny(clippy::print_stderr))]

mod child;
mod fault;
mod http;
mod names;
mod result;
mod session;
mod stdio;
mod tool;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

pub use session::{connect, Session, StartContext, StopTimes};
pub use tool::McpTool;

use deerflow_config::McpServer;
use deerflow_tools::fs::VIEW_IMAGE;
use deerflow_tools::registry::{ToolRegistry, LEAD_ONLY_TOOLS};
use deerflow_tools::Tool;

/// How one server's start-up ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Started {
        server: String,
        transport: String,
        /// Its tools as offered to the model.
        tools: Vec<String>,
        duration_ms: u64,
        /// The tools whose names providers would reject: (the name as the server and the
        /// prefix make it, the name offered instead).
        renamed: Vec<(String, String)>,
    },
    Failed {
        server: String,
        required: bool,
        error: String,
    },
}

/// The servers that are up, to be stopped when the run ends.
#[derive(Default)]
pub struct Running {
    sessions: Vec<Arc<Session>>,
}

impl Running {
    /// Stops every server at once.
    pub async fn stop(&self, times: StopTimes) {
        futures_util::future::join_all(self.sessions.iter().map(|s| s.stop(times))).await;
    }
}

/// The name a server tool would be offered under, before [`names::offer`] makes it one
/// providers accept.
pub fn offered_name(server: &McpServer, tool: &str) -> String {
    if server.tool_name_prefix {
        format!("{}_{tool}", server.name)
    } else {
        tool.to_string()
    }
}

/// `enabled_tools`/`disabled_tools` as sets: a server may list thousands of tools.
struct Filter<'a> {
    allow: Option<HashSet<&'a str>>,
    deny: HashSet<&'a str>,
}

impl<'a> Filter<'a> {
    fn new(server: &'a McpServer) -> Self {
        Self {
            allow: server
                .enabled_tools
                .as_ref()
                .map(|a| a.iter().map(String::as_str).collect()),
            deny: server.disabled_tools.iter().map(String::as_str).collect(),
        }
    }

    /// Whether the lists let the server's tool (by its own name) through.
    fn wanted(&self, tool: &str) -> bool {
        self.allow.as_ref().is_none_or(|a| a.contains(tool)) && !self.deny.contains(tool)
    }
}

/// A started server's tools, filtered and named as offered (names `taken` elsewhere are
/// not given to a rewritten name), and the renames.
pub fn offered_tools(
    server: &McpServer,
    session: &Arc<Session>,
    tools: &[rmcp::model::Tool],
    taken: impl Fn(&str) -> bool,
) -> (Vec<McpTool>, Vec<(String, String)>) {
    let filter = Filter::new(server);
    let kept: Vec<&rmcp::model::Tool> = tools.iter().filter(|t| filter.wanted(&t.name)).collect();
    let wanted: Vec<String> = kept.iter().map(|t| offered_name(server, &t.name)).collect();
    let offered = names::offer(&wanted, taken);
    let renamed = wanted
        .iter()
        .zip(&offered)
        .filter(|(w, o)| w != o)
        .map(|(w, o)| (w.clone(), o.clone()))
        .collect();
    let tools = kept
        .into_iter()
        .zip(offered)
        .map(|(t, name)| McpTool::new(name, t, session.clone(), server.tool_call_timeout))
        .collect();
    (tools, renamed)
}

/// The one warning for a server's renamed tools (the first few named), or `None`.
pub fn renamed_warning(server: &str, renamed: &[(String, String)]) -> Option<String> {
    const SHOWN: usize = 5;
    if renamed.is_empty() {
        return None;
    }
    let list: Vec<String> = renamed
        .iter()
        .take(SHOWN)
        .map(|(w, o)| format!("'{w}' as '{o}'"))
        .collect();
    let more = match renamed.len().saturating_sub(SHOWN) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    Some(format!(
        "MCP server '{server}': {} tool name(s) that providers reject (allowed: 1 to 64 of \
         a-z A-Z 0-9 _ -) are offered renamed: {}{more}; calls still reach the server's own names",
        renamed.len(),
        list.join(", ")
    ))
}

/// Starts every server in parallel and registers the tools of those that started, in
/// config order. A server whose tool name is taken (a built-in, a lead tool, an earlier
/// server's tool) fails as a whole and is stopped.
pub async fn start_all(
    servers: &[McpServer],
    ctx: &StartContext,
    registry: &mut ToolRegistry,
) -> (Running, Vec<Outcome>) {
    let started = futures_util::future::join_all(servers.iter().map(|s| async move {
        let t = Instant::now();
        (connect(s, ctx).await, t.elapsed())
    }))
    .await;
    let mut running = Running::default();
    let mut outcomes = Vec::new();
    let mut owners: BTreeMap<String, String> = BTreeMap::new();
    for (server, (result, elapsed)) in servers.iter().zip(started) {
        let fail = |error: String| Outcome::Failed {
            server: server.name.clone(),
            required: server.required,
            error,
        };
        let (session, tools) = match result {
            Ok(r) => r,
            Err(e) => {
                outcomes.push(fail(e));
                continue;
            }
        };
        let taken = |n: &str| owners.contains_key(n) || built_in(registry, n);
        let (tools, renamed) = offered_tools(server, &session, &tools, taken);
        if let Some(clash) = collision(server, &tools, registry, &owners) {
            session.stop(StopTimes::NORMAL).await;
            outcomes.push(fail(clash));
            continue;
        }
        let names: Vec<String> = tools.iter().map(|t| t.offered.clone()).collect();
        for t in tools {
            owners.insert(t.offered.clone(), server.name.clone());
            // Collisions were ruled out above, so registration cannot fail here.
            let _ = registry.register(Arc::new(t));
        }
        running.sessions.push(session);
        outcomes.push(Outcome::Started {
            server: server.name.clone(),
            transport: server.transport.kind().to_string(),
            tools: names,
            duration_ms: elapsed.as_millis() as u64,
            renamed,
        });
    }
    (running, outcomes)
}

/// Whether `name` is a built-in tool's: the registry's, a lead-only tool, or `view_image`,
/// which a vision model's agents get beside the registry's tools.
fn built_in(registry: &ToolRegistry, name: &str) -> bool {
    registry.get(name).is_some() || LEAD_ONLY_TOOLS.contains(&name) || name == VIEW_IMAGE
}

/// The first clash of `tools` with a name already taken, described naming both sides.
fn collision(
    server: &McpServer,
    tools: &[McpTool],
    registry: &ToolRegistry,
    owners: &BTreeMap<String, String>,
) -> Option<String> {
    let mut seen: HashSet<&str> = HashSet::new();
    for t in tools {
        let name = t.name();
        let other = if let Some(owner) = owners.get(name) {
            format!("tool '{name}' of MCP server '{owner}'")
        } else if built_in(registry, name) {
            format!("the built-in tool '{name}'")
        } else if !seen.insert(name) {
            format!("another of its tools offered as '{name}'")
        } else {
            continue;
        };
        return Some(format!(
            "its tool '{}' (offered as '{name}') collides with {other}{}",
            t.remote,
            if server.tool_name_prefix {
                ""
            } else {
                "; set tool_name_prefix: true or disable one of them"
            }
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use deerflow_config::McpTransport;

    fn server(prefix: bool, allow: Option<&[&str]>, deny: &[&str]) -> McpServer {
        McpServer {
            name: "gh".into(),
            transport: McpTransport::Http {
                url: "http://h".into(),
                headers: vec![],
            },
            required: false,
            tool_name_prefix: prefix,
            session_init_timeout: 60.0,
            tool_call_timeout: 60.0,
            enabled_tools: allow.map(|a| a.iter().map(|s| s.to_string()).collect()),
            disabled_tools: deny.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn names_are_prefixed_unless_asked_not_to() {
        assert_eq!(
            offered_name(&server(true, None, &[]), "search"),
            "gh_search"
        );
        assert_eq!(offered_name(&server(false, None, &[]), "search"), "search");
    }

    #[test]
    fn allow_and_deny_lists_use_the_server_s_own_names() {
        let all = server(true, None, &[]);
        let all = Filter::new(&all);
        assert!(all.wanted("a") && all.wanted("b"));
        let some = server(true, Some(&["a", "b"]), &["b"]);
        let some = Filter::new(&some);
        assert!(some.wanted("a"));
        assert!(!some.wanted("b"), "the deny-list wins");
        assert!(!some.wanted("c"));
        assert!(!some.wanted("gh_a"), "offered names are not the server's");
    }
}
