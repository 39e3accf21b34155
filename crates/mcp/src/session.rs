//! One server's session: connect (spawn or HTTP), `initialize`, `tools/list`, and stop.
//! The session is shared by every agent of the run; rmcp multiplexes concurrent requests.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientInfo, Implementation, ProtocolVersion};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpClientWorker,
};
use rmcp::transport::WorkerTransport;
use rmcp::ClientHandler;
use rmcp::ServiceExt;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use super::child::{spawn, ServerProcess};
use super::fault::{self, Fault};
use super::http::BoundedHttp;
use super::stdio::LineTransport;
use deerflow_config::{McpServer, McpTransport};
use deerflow_workspace::process::ProcessGroups;

/// What starting a server needs from the run.
#[derive(Clone)]
pub struct StartContext {
    /// The workspace: a stdio server's default (and relative `cwd`'s base) directory.
    pub workspace: PathBuf,
    pub groups: ProcessGroups,
    /// Variables no server inherits unless its own `env` sets them (contract §6).
    /// What a server inherits before its own `env`: deerflow's environment without
    /// credentials (contract §6), the same bash gets.
    pub base_env: std::sync::Arc<deerflow_workspace::child_env::ChildEnv>,
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
    /// Why its transport gave up, once it did.
    fault: Fault,
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
        deerflow_base::logging::info(&format!(
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
/// nothing of it is left running, and the error says in one line what failed and why.
pub async fn connect(
    server: &McpServer,
    ctx: &StartContext,
) -> Result<(Arc<Session>, Vec<rmcp::model::Tool>), String> {
    match &server.transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let dir = cwd
                .as_deref()
                .map_or_else(|| ctx.workspace.clone(), |c| ctx.workspace.join(c));
            usable_dir(&dir)?;
            let env = server_env(ctx, env);
            let spawned = spawn(&server.name, command, args, &env, &dir, &ctx.groups)
                .map_err(|e| spawn_error(command, &e))?;
            let mut process = spawned.process;
            let fault = Fault::default();
            let transport = LineTransport::new(spawned.stdout, spawned.stdin, fault.clone());
            match tokio::time::timeout(init_limit(server), handshake(server, transport, &fault))
                .await
            {
                Ok(Ok((service, tools))) => {
                    Ok((session(server, service, Some(process), fault), tools))
                }
                Ok(Err(Failed::Answered(why))) => Err(with_stderr(why, process.fail().await)),
                Ok(Err(Failed::Broke(e))) => {
                    // What it sent says more than how it ended; how it ended more than rmcp.
                    let exited = process.exit_status(Duration::from_millis(300)).await;
                    let why = match (fault.get(), exited) {
                        (Some(said), _) => said,
                        (None, Some(status)) => {
                            format!("`{command}` {} before answering", exit_text(status))
                        }
                        (None, None) => e,
                    };
                    Err(with_stderr(why, process.fail().await))
                }
                Err(_) => Err(with_stderr(timed_out(server), process.fail().await)),
            }
        }
        McpTransport::Http { url, headers } => {
            let fault = Fault::default();
            let stop = CancellationToken::new();
            let client = BoundedHttp {
                client: super::http::client(headers)?,
                fault: fault.clone(),
                stop: stop.clone(),
            };
            let worker = StreamableHttpClientWorker::new(
                client,
                StreamableHttpClientTransportConfig::with_uri(url.as_str()),
            );
            let transport = WorkerTransport::spawn_with_ct(worker, stop);
            match tokio::time::timeout(init_limit(server), handshake(server, transport, &fault))
                .await
            {
                Ok(Ok((service, tools))) => Ok((session(server, service, None, fault), tools)),
                Ok(Err(Failed::Answered(e) | Failed::Broke(e))) => Err(e),
                Err(_) => Err(timed_out(server)),
            }
        }
    }
}

fn init_limit(server: &McpServer) -> Duration {
    Duration::from_secs_f64(server.session_init_timeout)
}

fn timed_out(server: &McpServer) -> String {
    format!(
        "no answer to initialize and tools/list within {} s (session_init_timeout)",
        deerflow_base::text::secs(server.session_init_timeout)
    )
}

/// Why a handshake failed, in the user's words.
enum Failed {
    /// The server answered, with an error or the wrong thing: its answer is the reason, even
    /// when it exits afterwards (stdin closes once the handshake is given up).
    Answered(String),
    /// No usable answer came: how the transport or the process ended may say more.
    Broke(String),
}

/// `initialize`, then every page of `tools/list`.
async fn handshake<T, E, A>(
    server: &McpServer,
    transport: T,
    fault: &Fault,
) -> Result<(RunningService<RoleClient, Client>, Vec<rmcp::model::Tool>), Failed>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    use rmcp::service::ClientInitializeError as Init;
    let service = client(server).serve(transport).await.map_err(|e| {
        let why = fault::init_error(&e, fault);
        match e {
            Init::JsonRpcError(_)
            | Init::ExpectedInitResponse(_)
            | Init::ExpectedInitResult(_)
            | Init::ConflictInitResponseId(..) => Failed::Answered(why),
            _ => Failed::Broke(why),
        }
    })?;
    // `list_all_tools` follows `nextCursor` until the last page.
    let tools = service.list_all_tools().await.map_err(|e| {
        let why = format!("tools/list failed: {}", fault::service_error(&e, fault));
        match e {
            ServiceError::McpError(_) | ServiceError::UnexpectedResponse => Failed::Answered(why),
            _ => Failed::Broke(why),
        }
    })?;
    Ok((service, tools))
}

/// What a stdio server inherits (contract §6), with its own `env` on top.
fn server_env(ctx: &StartContext, own: &[(String, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = ctx
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
    env.retain(|(k, _)| !own.iter().any(|(e, _)| e == k));
    env.extend(own.iter().cloned());
    env
}

/// A missing `cwd` is named as such, not blamed on the command.
fn usable_dir(dir: &Path) -> Result<(), String> {
    let shown = deerflow_base::text::escape_controls(&dir.to_string_lossy()).into_owned();
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!("cwd {shown} is not a directory")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("cwd {shown} does not exist"))
        }
        Err(e) => Err(format!("cwd {shown} cannot be used: {e}")),
    }
}

fn spawn_error(command: &str, err: &std::io::Error) -> String {
    let shown = deerflow_base::text::escape_controls(command);
    match err.kind() {
        std::io::ErrorKind::NotFound if command.contains('/') => {
            format!("command `{shown}` does not exist")
        }
        std::io::ErrorKind::NotFound => format!("command `{shown}` was not found on its PATH"),
        std::io::ErrorKind::PermissionDenied => {
            format!("command `{shown}` cannot be run (permission denied)")
        }
        _ => format!("cannot start `{shown}`: {err}"),
    }
}

/// `exited with status 3`, `was killed by signal 9`.
fn exit_text(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        (None, None) => "exited".into(),
    }
}

/// `why`, with the server's last stderr line when it wrote one.
fn with_stderr(why: String, last: Option<String>) -> String {
    match last {
        Some(line) => format!(
            "{why}; its last stderr line: {}",
            deerflow_base::text::clip(&line, 300)
        ),
        None => why,
    }
}

fn client(server: &McpServer) -> Client {
    Client {
        server: server.name.clone(),
    }
}

fn session(
    server: &McpServer,
    service: RunningService<RoleClient, Client>,
    process: Option<ServerProcess>,
    fault: Fault,
) -> Arc<Session> {
    Arc::new(Session {
        name: server.name.clone(),
        peer: service.peer().clone(),
        service: Mutex::new(Some(service)),
        process: Mutex::new(process),
        fault,
    })
}

impl Session {
    pub fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    /// Why a request failed, in the user's words.
    pub fn explain(&self, err: &ServiceError) -> String {
        fault::service_error(err, &self.fault)
    }

    /// Why no answer will come: the connection closed, and what the transport knows of why.
    pub fn closed(&self) -> String {
        fault::closed(&self.fault)
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
