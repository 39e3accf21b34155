//! Where commands run (contract §13): one [`Sandbox`] executor seam, so the `bash` tool does
//! not care whether its command runs on the host ([`LocalSandbox`]), inside bubblewrap
//! ([`ConfinedSandbox`]) or in a container ([`DockerSandbox`]). Every implementation runs the
//! command in a working directory with the §6 environment and a timeout, collects bounded
//! output, and kills what it started on timeout, cancellation, or when the call is dropped.

mod capture;
mod confined;
#[cfg(feature = "docker")]
mod docker;
mod host;

use std::fmt::Debug;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use confined::{find_bwrap, ConfinedSandbox, BWRAP_PACKAGE};
#[cfg(feature = "docker")]
pub use docker::{docker_host, DockerMount, DockerSandbox, DockerSettings};

pub use deerflow_config::SandboxKind;

use super::child_env::ChildEnv;
use super::process::ProcessGroups;
use super::task_mark::TaskMark;

/// One command to run.
pub struct ExecRequest<'a> {
    /// A bash command line.
    pub command: &'a str,
    /// The working directory (the workspace), on the host.
    pub cwd: &'a Path,
    /// The skills directory, offered read-only where a sandbox maps paths.
    pub skills: Option<&'a Path>,
    pub env: &'a ChildEnv,
    pub timeout: Duration,
    /// Each stream keeps at least this many characters of its start and of its end.
    pub output_max_chars: usize,
    pub cancel: &'a CancellationToken,
    /// Where the command's process group is registered while it runs, so an abrupt stop
    /// can kill it.
    pub processes: &'a ProcessGroups,
    /// The calling sub-agent's mark, given to host processes so its timeout or cancellation
    /// finds what they detached (`None` for the lead).
    pub mark: Option<&'a TaskMark>,
}

/// How the command ended.
#[derive(Debug)]
pub enum ExecEnd {
    /// It exited with this code (128 + signal when a signal killed it).
    Exited(i32),
    TimedOut,
    Cancelled,
    WaitFailed(std::io::Error),
}

/// What a command left: how it ended and its (possibly middle-cut) output streams.
#[derive(Debug)]
pub struct ExecOutput {
    pub end: ExecEnd,
    pub stdout: String,
    pub stderr: String,
    /// Characters dropped from the middle of both streams while capturing.
    pub cut_chars: usize,
}

pub type ExecFuture<'a> = Pin<Box<dyn Future<Output = Result<ExecOutput, String>> + Send + 'a>>;
pub type SandboxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A place commands run. `Err` means the command could not be started at all.
pub trait Sandbox: Send + Sync + Debug {
    /// What `run_started.sandbox.use` reports.
    fn kind(&self) -> SandboxKind;
    /// The container image, when there is one.
    fn image(&self) -> Option<&str> {
        None
    }
    fn exec<'a>(&'a self, req: ExecRequest<'a>) -> ExecFuture<'a>;
    /// Makes the sandbox ready before the first model call (reach a daemon, pull an image);
    /// `Err` is the one line that fails the run.
    fn start(&self) -> SandboxFuture<'_, Result<(), String>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Removes whatever the sandbox created; called on every exit path of a run.
    fn stop(&self) -> SandboxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
    /// The sandbox one sub-agent's commands run in, when it is not this one; dropping it
    /// releases what it holds.
    fn for_task(&self, _task_id: &str) -> Option<Arc<dyn Sandbox>> {
        None
    }
}

/// bash on the host, unconfined, in its own session (contract §6).
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalSandbox;

impl Sandbox for LocalSandbox {
    fn kind(&self) -> SandboxKind {
        SandboxKind::Local
    }

    fn exec<'a>(&'a self, req: ExecRequest<'a>) -> ExecFuture<'a> {
        Box::pin(async move {
            let mut cmd = tokio::process::Command::new("bash");
            cmd.arg("-c").arg(req.command);
            host::run(cmd, "bash", &req).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_is_read_from_and_reported_as_the_normalised_name() {
        for kind in [
            SandboxKind::Local,
            SandboxKind::Confined,
            SandboxKind::Docker,
        ] {
            assert_eq!(SandboxKind::from_use(kind.as_str()), Some(kind));
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
        }
        assert_eq!(LocalSandbox.kind(), SandboxKind::Local);
    }
}
