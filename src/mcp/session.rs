//! One server's session: connect (spawn or HTTP), `initialize`, `tools/list`, and stop.
//! The session is shared by every agent of the run; rmcp multiplexes concurrent requests.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientInfo, Implementation, ProtocolVersion};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use rmcp::ClientHandler;
use rmcp::ServiceExt;
use tokio::sync::Mutex;

use super::child::{spawn, ServerProcess};
use crate::config::{McpServer, McpTransport};
use crate::workspace::process::ProcessGroups;

/// What starting a server needs from the run.
#[derive(Clone)]
pub struct StartContext {
    /// The workspace: a stdio server's default (and relative `cwd`'s base) directory.
    pub workspace: PathBuf,
    pub groups: ProcessGroups,
    /// Variables no server inherits unless its own `env` sets them (contract §6).
    /// What a server inherits before its own `env`: deerflow's environment without
    /// credentials (contract §6), the same bash gets.
    pub base_env: std::sync::Arc<crate::workspace::child_env::ChildEnv>,
}

/// How long each step of a stop may take.
#[derive(Debug, Clone, Copy)]
pub struct StopTimes {
    /// After stdin closes, before SIGTERM.
    pub grace: Duration,
    /// After SIGTERM, before SIGKILL.
    pub kill_after: Duration,
}

impl StopTimes {
    /// Contract §9: SIGKILL 2 s after SIGTERM.
    pub const NORMAL: StopTimes = StopTimes {
        grace: Duration::from_millis(500),
        kill_after: Duration::from_secs(2),
    };
    /// After a signal the whole run must stop within 2 s (contract §8).
    pub const HURRIED: StopTimes = StopTimes {
        grace: Duration::from_millis(100),
        kill_after: Duration::from_millis(400),
    };
}

pub struct Session {
    pub name: String,
    peer: Peer<RoleClient>,
    service: Mutex<Option<RunningService<RoleClient, Client>>>,
    process: Mutex<Option<ServerProcess>>,
}

/// deerflow's side of a session: who it is, and what it does with the server's notices.
pub struct Client {
    server: String,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientInfo {
        client_info()
    }

    // The tools are listed once, at start-up (README, "Choices"); a change is only noted.
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        crate::logging::info(&format!(
            "mcp server '{}' changed its tool list; this run keeps the tools it listed at start-up",
            self.server
        ));
        std::future::ready(())
    }
}

fn client_info() -> ClientInfo {
    ClientInfo {
        meta: None,
        protocol_version: ProtocolVersion::default(),
        capabilities: ClientCapabilities::default(),
        client_info: Implementation {
            name: "deerflow".into(),
            title: None,
            version: env!("CARGO_PKG_VERSION").into(),
            description: None,
            icons: None,
            website_url: None,
        },
    }
}

/// Starts `server` and lists its tools within its `session_init_timeout`. On failure
/// nothing of it is left running.
pub async fn connect(
    server: &McpServer,
    ctx: &StartContext,
) -> Result<(Arc<Session>, Vec<rmcp::model::Tool>), String> {
    let limit = Duration::from_secs_f64(server.session_init_timeout);
    let timed_out = || {
        format!(
            "no answer to initialize and tools/list within {} s (session_init_timeout)",
            crate::text::secs(server.session_init_timeout)
        )
    };
    match &server.transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut full_env: Vec<(String, String)> = ctx
                .base_env
                .vars()
                .iter()
                .map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.to_string_lossy().into_owned(),
                    )
                })
                .collect();
            full_env.retain(|(k, _)| !env.iter().any(|(e, _)| e == k));
            full_env.extend(env.iter().cloned());
            let dir = cwd
                .as_deref()
                .map_or_else(|| ctx.workspace.clone(), |c| ctx.workspace.join(c));
            let spawned = spawn(&server.name, command, args, &full_env, &dir, &ctx.groups)
                .map_err(|e| format!("cannot start `{command}`: {e}"))?;
            let mut process = spawned.process;
            let started = tokio::time::timeout(limit, async {
                let service = client(server)
                    .serve((spawned.stdout, spawned.stdin))
                    .await
                    .map_err(|e| format!("initialize failed: {e}"))?;
                let tools = list(&service).await?;
                Ok::<_, String>((service, tools))
            })
            .await;
            match started {
                Ok(Ok((service, tools))) => Ok((session(server, service, Some(process)), tools)),
                Ok(Err(e)) => {
                    // A server that died says more by its exit (its stderr is at debug level).
                    let exited = process.exit_status(Duration::from_millis(300)).await;
                    process.stop(Duration::ZERO, Duration::ZERO).await;
                    Err(match exited {
                        Some(status) => format!(
                            "`{command}` exited ({status}) before answering; \
                             DEERFLOW_LOG=debug shows its stderr"
                        ),
                        None => e,
                    })
                }
                Err(_) => {
                    process.stop(Duration::ZERO, Duration::ZERO).await;
                    Err(timed_out())
                }
            }
        }
        McpTransport::Http { url, headers } => {
            let http = http_client(headers)?;
            let transport = StreamableHttpClientTransport::with_client(
                http,
                StreamableHttpClientTransportConfig::with_uri(url.as_str()),
            );
            let started = tokio::time::timeout(limit, async {
                let service = client(server)
                    .serve(transport)
                    .await
                    .map_err(|e| format!("initialize failed at {url}: {e}"))?;
                let tools = list(&service).await?;
                Ok::<_, String>((service, tools))
            })
            .await;
            match started {
                Ok(Ok((service, tools))) => Ok((session(server, service, None), tools)),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(timed_out()),
            }
        }
    }
}

fn client(server: &McpServer) -> Client {
    Client {
        server: server.name.clone(),
    }
}

async fn list(
    service: &RunningService<RoleClient, Client>,
) -> Result<Vec<rmcp::model::Tool>, String> {
    // `list_all_tools` follows `nextCursor` until the last page.
    service
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {e}"))
}

fn session(
    server: &McpServer,
    service: RunningService<RoleClient, Client>,
    process: Option<ServerProcess>,
) -> Arc<Session> {
    Arc::new(Session {
        name: server.name.clone(),
        peer: service.peer().clone(),
        service: Mutex::new(Some(service)),
        process: Mutex::new(process),
    })
}

fn http_client(headers: &[(String, String)]) -> Result<reqwest::Client, String> {
    let mut map = reqwest::header::HeaderMap::new();
    for (k, v) in headers {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| format!("header '{k}': {e}"))?;
        // The value is a secret: the error never shows it.
        let mut value = reqwest::header::HeaderValue::from_str(v)
            .map_err(|_| format!("header '{k}': the value is not a valid header value"))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    reqwest::Client::builder()
        .default_headers(map)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

impl Session {
    pub fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    /// Ends the session: the transport closes (a stdio server's stdin with it), then the
    /// process is stopped. Calling it again does nothing.
    pub async fn stop(&self, times: StopTimes) {
        if let Some(service) = self.service.lock().await.take() {
            let _ = tokio::time::timeout(times.grace, service.cancel()).await;
        }
        if let Some(process) = self.process.lock().await.take() {
            process.stop(times.grace, times.kill_after).await;
        }
    }
}
