//! A stdio server's process: spawned in its own process group (registered with the
//! workspace's groups, like bash's, so every stop path can kill it), with the filtered
//! environment of contract §6, stderr logged at debug level, and stopped in the order §9
//! gives: stdin closed, then SIGTERM, then SIGKILL.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::workspace::process::{GroupRegistration, ProcessGroups};

/// A running server process and the pipes rmcp speaks over.
pub struct ServerProcess {
    child: Child,
    pgid: i32,
    _group: GroupRegistration,
}

pub struct Spawned {
    pub process: ServerProcess,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
}

pub fn spawn(
    server: &str,
    command: &str,
    args: &[String],
    env: &[(String, String)],
    cwd: &Path,
    groups: &ProcessGroups,
) -> std::io::Result<Spawned> {
    let mut cmd = Command::new(command);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        // A run that is dropped without stopping its servers (a panic) must not leave them.
        .kill_on_drop(true);
    // SAFETY: the closure runs in the forked child before exec and only calls prctl(), which
    // is async-signal-safe; it touches no memory shared with the parent.
    unsafe {
        cmd.pre_exec(crate::workspace::process::die_with_parent);
    }
    let mut child = cmd.spawn()?;
    let pgid = child.id().map_or(0, |id| i32::try_from(id).unwrap_or(0));
    let group = groups.register(pgid);
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other("the server's pipes were not opened"));
    };
    if let Some(stderr) = child.stderr.take() {
        let name = server.to_string();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                crate::logging::debug(&format!("mcp server '{name}': {line}"));
            }
        });
    }
    Ok(Spawned {
        process: ServerProcess {
            child,
            pgid,
            _group: group,
        },
        stdin,
        stdout,
    })
}

impl ServerProcess {
    /// How the server exited, if it does within `within` (to explain a failed start-up).
    pub async fn exit_status(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(within, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Waits `grace` for the server to leave after its stdin closed (the caller closes it
    /// by dropping the transport), then SIGTERM and `kill_after` more, then SIGKILL. The
    /// group is killed in the end whatever happened, so nothing the server started stays.
    pub async fn stop(mut self, grace: Duration, kill_after: Duration) {
        let exited = tokio::time::timeout(grace, self.child.wait()).await.is_ok();
        if !exited {
            signal_group(self.pgid, libc::SIGTERM);
            if tokio::time::timeout(kill_after, self.child.wait())
                .await
                .is_err()
            {
                crate::logging::debug(&format!(
                    "mcp server process {} ignored SIGTERM: killing it",
                    self.pgid
                ));
            }
        }
        crate::workspace::process::kill_group(self.pgid);
        let _ = self.child.wait().await;
    }
}

fn signal_group(pgid: i32, sig: i32) {
    if pgid <= 1 {
        return;
    }
    // SAFETY: killpg has no memory-safety preconditions; it only sends a signal.
    unsafe {
        libc::killpg(pgid, sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stop_closes_then_terminates_then_kills_the_group() {
        let groups = ProcessGroups::default();
        let dir = std::env::temp_dir();
        // Ignores SIGTERM and stdin's end: only SIGKILL stops it.
        let s = spawn(
            "t",
            "sh",
            &["-c".into(), "trap '' TERM; sleep 30 & wait".into()],
            &[(
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_default(),
            )],
            &dir,
            &groups,
        )
        .unwrap();
        let pgid = s.process.pgid;
        assert_eq!(groups.live(), vec![pgid]);
        drop((s.stdin, s.stdout));
        let t = std::time::Instant::now();
        s.process
            .stop(Duration::from_millis(50), Duration::from_millis(200))
            .await;
        assert!(t.elapsed() < Duration::from_secs(2));
        assert!(groups.live().is_empty());
        // SAFETY: signal 0 only checks whether the group exists. The killed orphan may
        // linger a moment until init reaps it.
        let gone = || unsafe { libc::killpg(pgid, 0) } != 0;
        let t = std::time::Instant::now();
        while !gone() && t.elapsed() < Duration::from_secs(3) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(gone(), "the group survived");
    }
}
