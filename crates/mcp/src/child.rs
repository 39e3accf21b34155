//! A stdio server's process: spawned in its own process group (registered with the
//! workspace's groups, like bash's, so every stop path can kill it), with the filtered
//! environment of contract §6, stderr logged at debug level, and stopped in the order §9
//! gives: stdin closed, then SIGTERM, then SIGKILL.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

use deerflow_workspace::process::{GroupRegistration, ProcessGroups};

/// A running server process and the pipes rmcp speaks over.
pub struct ServerProcess {
    child: Child,
    pgid: i32,
    _group: GroupRegistration,
    stderr: Option<JoinHandle<()>>,
    last_stderr: Arc<Mutex<String>>,
}

/// The most bytes of one stderr line kept (its end): a server's stderr is read to its end
/// whatever it writes, so it never blocks on a full pipe, but only this much is held.
const STDERR_LINE_BYTES: usize = 4096;

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
        cmd.pre_exec(deerflow_workspace::process::die_with_parent);
    }
    let mut child = cmd.spawn()?;
    let pgid = child.id().map_or(0, |id| i32::try_from(id).unwrap_or(0));
    let group = groups.register(pgid);
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other("the server's pipes were not opened"));
    };
    let last_stderr = Arc::new(Mutex::new(String::new()));
    let stderr = child
        .stderr
        .take()
        .map(|pipe| tokio::spawn(drain_stderr(pipe, server.to_string(), last_stderr.clone())));
    Ok(Spawned {
        process: ServerProcess {
            child,
            pgid,
            _group: group,
            stderr,
            last_stderr,
        },
        stdin,
        stdout,
    })
}

/// Logs every stderr line at debug level and keeps the last non-blank one, reading to the
/// end: bytes, not text (invalid UTF-8 is shown replaced), and of a line only its last
/// [`STDERR_LINE_BYTES`].
async fn drain_stderr(pipe: impl AsyncRead + Unpin, name: String, last: Arc<Mutex<String>>) {
    let mut reader = BufReader::new(pipe);
    let mut line = Vec::new();
    let mut cut = false;
    loop {
        let buf = match reader.fill_buf().await {
            Ok(buf) if !buf.is_empty() => buf,
            _ => break,
        };
        let (take, end) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        cut |= keep_tail(&mut line, &buf[..take], STDERR_LINE_BYTES);
        reader.consume(take + usize::from(end));
        if end {
            stderr_line(&name, &line, std::mem::take(&mut cut), &last);
            line.clear();
        }
    }
    if !line.is_empty() {
        stderr_line(&name, &line, cut, &last);
    }
}

/// Appends `more` to `line`, dropping from its front what goes over `max`; true if it did.
fn keep_tail(line: &mut Vec<u8>, more: &[u8], max: usize) -> bool {
    if more.len() >= max {
        line.clear();
        line.extend_from_slice(&more[more.len() - max..]);
        return true;
    }
    let over = (line.len() + more.len()).saturating_sub(max);
    line.drain(..over);
    line.extend_from_slice(more);
    over > 0
}

fn stderr_line(name: &str, line: &[u8], cut: bool, last: &Mutex<String>) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end_matches('\r');
    let text = if cut {
        format!("…{text}")
    } else {
        text.to_string()
    };
    deerflow_base::logging::debug(&format!("mcp server '{name}': {text}"));
    if !text.trim().is_empty() {
        if let Ok(mut slot) = last.lock() {
            *slot = deerflow_base::text::escape_controls(text.trim()).into_owned();
        }
    }
}

impl ServerProcess {
    /// The last non-blank line the server wrote to stderr, once its stderr ended (or
    /// `within` passed): what a server that failed says about why.
    pub async fn last_stderr_line(&mut self, within: Duration) -> Option<String> {
        if let Some(reader) = self.stderr.as_mut() {
            if tokio::time::timeout(within, reader).await.is_ok() {
                self.stderr = None;
            }
        }
        let line = self.last_stderr.lock().ok()?.clone();
        (!line.is_empty()).then_some(line)
    }

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
        self.halt(grace, kill_after).await;
    }

    /// Stops a server that failed to start at once, and returns its last stderr line.
    pub async fn fail(mut self) -> Option<String> {
        self.halt(Duration::ZERO, Duration::ZERO).await;
        self.last_stderr_line(Duration::from_millis(300)).await
    }

    async fn halt(&mut self, grace: Duration, kill_after: Duration) {
        let exited = tokio::time::timeout(grace, self.child.wait()).await.is_ok();
        if !exited {
            signal_group(self.pgid, libc::SIGTERM);
            if tokio::time::timeout(kill_after, self.child.wait())
                .await
                .is_err()
            {
                deerflow_base::logging::debug(&format!(
                    "mcp server process {} ignored SIGTERM: killing it",
                    self.pgid
                ));
            }
        }
        deerflow_workspace::process::kill_group(self.pgid);
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
    async fn stderr_is_read_to_its_end_whatever_it_holds() {
        let mut input = b"\xff\xfe bad\n".to_vec();
        input.extend(std::iter::repeat_n(b'y', 3 << 20));
        input.extend(b"tail\n\nlast words\r\n\n");
        let last = Arc::new(Mutex::new(String::new()));
        drain_stderr(&input[..], "t".into(), last.clone()).await;
        assert_eq!(*last.lock().unwrap(), "last words");
        let mut line = b"abc".to_vec();
        assert!(!keep_tail(&mut line, b"de", 5));
        assert!(keep_tail(&mut line, b"fg", 5));
        assert_eq!(line, b"cdefg");
        assert!(keep_tail(&mut line, b"0123456", 5));
        assert_eq!(line, b"23456");
    }

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
