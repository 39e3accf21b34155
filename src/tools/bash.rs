//! `bash`: runs a command on the host, in the workspace, in its own session.
//!
//! The command gets a new session (so its own process group) and that whole group is killed
//! when the command times out, is cancelled, or returns — nothing it started outlives the call.
//! Output is captured into bounded head+tail buffers so a runaway writer cannot exhaust memory.

use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::task::JoinHandle;

use super::args::{lenient, spec, with_args};
use super::{Tool, ToolContext, ToolOutput};
use crate::model::{BoxFuture, ToolSpec};
use crate::workspace::process::kill_group;

/// How long output is still read after the command exits (a backgrounded child may hold the
/// pipe open forever).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);
/// How long to wait for the killed group's leader and pipes after a timeout or cancellation.
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(1);

pub const DISABLED: &str = "Error: host bash is disabled. It runs commands unconfined with the \
                            user's account; run deerflow with --allow-bash to enable it.";

/// `bash`: a shell command in the workspace.
#[derive(Debug, Clone, Copy, Default)]
pub struct BashTool;

/// `bash`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct BashArgs {
    /// A few words on why this command runs (for the log).
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub description: Option<String>,
    /// The bash command line to run.
    pub command: String,
}

impl Tool for BashTool {
    fn name(&self) -> &str {
        "bash"
    }

    fn spec(&self) -> ToolSpec {
        spec::<BashArgs>(
            "bash",
            "Run a bash command in the workspace directory (stdin is empty). Returns \
             stdout, then stderr after 'Std Error:', then 'Exit Code: N' when the \
             exit code is not 0. Long output keeps its start and end. The command and \
             everything it starts are killed on timeout; background processes do not \
             survive the call.",
        )
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        // Refused before its arguments are looked at, as it always was.
        if !ctx.limits.allow_host_bash {
            return Box::pin(async { ToolOutput::error(DISABLED) });
        }
        with_args(args, move |a: BashArgs| async move {
            run_command(&a.command, ctx).await
        })
    }
}

/// How the wait for the command ended.
enum End {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
    WaitFailed(std::io::Error),
}

/// SIGKILLs the group when dropped, which covers the tool future itself being dropped.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

async fn run_command(command: &str, ctx: &ToolContext) -> ToolOutput {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(command)
        .current_dir(ctx.workspace.root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    ctx.limits.child_env.apply(&mut cmd);
    // SAFETY: the closure runs in the forked child before exec and only calls setsid(), which
    // is async-signal-safe; it touches no memory shared with the parent. A new session makes
    // the child leader of its own process group (pgid = pid), so killpg reaches everything it
    // starts, and a terminal Ctrl-C to our group does not hit it directly.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(format!("Error: cannot start bash: {e}")),
    };
    // A spawned, not-yet-awaited child always has an id; 0 would make killpg target our own
    // group, which kill_group refuses.
    let pgid = child.id().map_or(0, |id| id as i32);
    let _registered = ctx.workspace.processes().register(pgid);
    let _killer = KillOnDrop(pgid);
    let stdout = Capture::new(ctx.limits.bash_output_max_chars);
    let stderr = Capture::new(ctx.limits.bash_output_max_chars);
    let mut readers = [
        stdout.spawn_reader(child.stdout.take()),
        stderr.spawn_reader(child.stderr.take()),
    ];

    let timeout = timeout_of(ctx.limits.bash_command_timeout_secs);
    let end = tokio::select! {
        r = child.wait() => r.map_or_else(End::WaitFailed, End::Exited),
        _ = tokio::time::sleep(timeout) => End::TimedOut,
        _ = ctx.cancel.cancelled() => End::Cancelled,
    };
    if !matches!(end, End::Exited(_)) {
        kill_group(pgid);
        // The leader got SIGKILL, so this returns at once; it reaps the zombie.
        let _ = tokio::time::timeout(DRAIN_AFTER_KILL, child.wait()).await;
    }
    let drain = if matches!(end, End::Exited(_)) {
        DRAIN_AFTER_EXIT
    } else {
        DRAIN_AFTER_KILL
    };
    let _ = tokio::time::timeout(drain, async {
        for r in readers.iter_mut() {
            let _ = r.await;
        }
    })
    .await;
    // Background children still running now are killed: nothing outlives the call.
    kill_group(pgid);
    readers.iter().for_each(JoinHandle::abort);
    finish(
        end,
        &stdout,
        &stderr,
        ctx.limits.bash_output_max_chars,
        ctx.limits.bash_command_timeout_secs,
    )
}

/// A usable timeout from the configured seconds (nonsense values fall back to the default).
fn timeout_of(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .unwrap_or(Duration::from_secs(600))
}

fn finish(
    end: End,
    stdout: &Capture,
    stderr: &Capture,
    max: usize,
    timeout_secs: f64,
) -> ToolOutput {
    let (out, out_cut) = stdout.text();
    let (err, err_cut) = stderr.text();
    let code = match &end {
        End::Exited(status) => exit_code(*status),
        _ => 0,
    };
    let body = crate::text::cut(&compose(&out, &err, code), max, crate::text::Keep::Middle)
        .marked(out_cut + err_cut);
    match end {
        End::Exited(_) => ToolOutput::ok(body),
        End::TimedOut => ToolOutput::error(format!(
            "Error: command timed out after {timeout_secs} seconds\n{body}"
        )),
        End::Cancelled => ToolOutput::error(format!("Error: command cancelled\n{body}")),
        End::WaitFailed(e) => ToolOutput::error(format!(
            "Error: waiting for the command failed: {e}\n{body}"
        )),
    }
}

/// The exit code, or 128 + signal for a command killed by a signal (as shells report it).
fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// stdout, then stderr after a label, then the exit code when it is not 0.
pub fn compose(stdout: &str, stderr: &str, code: i32) -> String {
    let mut out = stdout.to_string();
    if !stderr.is_empty() {
        out.push_str("\nStd Error:\n");
        out.push_str(stderr);
    }
    if code != 0 {
        out.push_str(&format!("\nExit Code: {code}"));
    }
    if out.is_empty() {
        out.push_str("(no output)");
    }
    out
}

/// One output stream's capture: the first and last `cap` bytes, counting what fell between.
#[derive(Clone)]
struct Capture {
    inner: Arc<Mutex<HeadTail>>,
}

struct HeadTail {
    cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Characters dropped from the middle (UTF-8 lead bytes counted).
    dropped_chars: usize,
}

impl Capture {
    /// Each end keeps at least `max_chars` characters (4 bytes each at worst), so the dropped
    /// middle always lies inside what middle truncation cuts anyway.
    fn new(max_chars: usize) -> Self {
        let cap = max_chars.saturating_mul(4).saturating_add(4).max(4096);
        let ht = HeadTail {
            cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            dropped_chars: 0,
        };
        Capture {
            inner: Arc::new(Mutex::new(ht)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HeadTail> {
        // Poisoning only means a reader task panicked mid-push; the bytes are still valid.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn spawn_reader<R>(&self, pipe: Option<R>) -> JoinHandle<()>
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let capture = self.clone();
        tokio::spawn(async move {
            let Some(mut pipe) = pipe else { return };
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                capture.lock().push(&buf[..n]);
            }
        })
    }

    /// The captured text (lossy UTF-8) and how many characters were dropped from its middle.
    fn text(&self) -> (String, usize) {
        let ht = self.lock();
        let mut bytes = ht.head.clone();
        bytes.extend(ht.tail.iter());
        (
            String::from_utf8_lossy(&bytes).into_owned(),
            ht.dropped_chars,
        )
    }
}

impl HeadTail {
    fn push(&mut self, mut data: &[u8]) {
        let room = self.cap.saturating_sub(self.head.len());
        let to_head = room.min(data.len());
        self.head.extend_from_slice(&data[..to_head]);
        data = &data[to_head..];
        // Only the last `cap` bytes of (tail + data) survive; the rest is counted, in bulk, so
        // a fast writer costs little per byte.
        let keep_from_data = data.len().min(self.cap);
        let (dropped_data, kept_data) = data.split_at(data.len() - keep_from_data);
        let overflow = (self.tail.len() + kept_data.len()).saturating_sub(self.cap);
        self.dropped_chars +=
            char_starts(self.tail.drain(..overflow)) + char_starts(dropped_data.iter().copied());
        self.tail.extend(kept_data);
    }
}

/// Characters begun by these UTF-8 bytes: continuation bytes (0b10xx_xxxx) start none.
fn char_starts(bytes: impl IntoIterator<Item = u8>) -> usize {
    bytes.into_iter().filter(|b| b & 0xC0 != 0x80).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::fs::tests::{ctx_with, run};
    use crate::tools::SandboxLimits;
    use crate::tools::ToolStatus::{Error as E, Ok as O};
    use serde_json::json;
    use std::time::Instant;

    fn limits(timeout: f64) -> SandboxLimits {
        SandboxLimits {
            allow_host_bash: true,
            bash_command_timeout_secs: timeout,
            ..Default::default()
        }
    }

    /// Whether any live process has `marker` in its command line.
    fn process_with(marker: &str) -> bool {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return false;
        };
        dir.filter_map(Result::ok).any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .contains(marker)
                })
                .unwrap_or(false)
        })
    }

    async fn gone_within(marker: &str, secs: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if !process_with(marker) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        !process_with(marker)
    }

    #[tokio::test]
    async fn refused_without_allow() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_with(dir.path(), SandboxLimits::default());
        let got = run(&BashTool, &c, json!({"command": "touch x"})).await;
        assert_eq!(got, (E, DISABLED.to_string()));
        assert!(DISABLED.contains("--allow-bash"));
        assert!(!dir.path().join("x").exists());
    }

    #[tokio::test]
    async fn output_format_table() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("here.txt"), "").unwrap();
        let c = ctx_with(dir.path(), limits(30.0));
        let cases = [
            ("echo hi", O, "hi\n"),
            ("true", O, "(no output)"),
            ("echo out; echo err >&2", O, "out\n\nStd Error:\nerr\n"),
            (
                "echo out; echo err >&2; exit 3",
                O,
                "out\n\nStd Error:\nerr\n\nExit Code: 3",
            ),
            ("exit 7", O, "\nExit Code: 7"),
            ("echo err >&2", O, "\nStd Error:\nerr\n"),
            ("ls", O, "here.txt\n"),
            ("cat; echo done", O, "done\n"),
            ("kill -9 $$", O, "\nExit Code: 137"),
        ];
        for (command, status, want) in cases {
            assert_eq!(
                run(&BashTool, &c, json!({"command": command})).await,
                (status, want.to_string()),
                "{command}"
            );
        }
        let missing = run(&BashTool, &c, json!({})).await;
        assert_eq!(
            missing,
            (
                E,
                "Error: missing required string argument 'command'".to_string()
            )
        );
    }

    #[tokio::test]
    async fn output_is_middle_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_with(
            dir.path(),
            SandboxLimits {
                bash_output_max_chars: 10,
                ..limits(30.0)
            },
        );
        let (s, text) = run(
            &BashTool,
            &c,
            json!({"command": "printf 'abcdefghijklmnopqrstuvwxyz'"}),
        )
        .await;
        assert_eq!(
            (s, text.as_str()),
            (O, "abcde\n... [16 characters truncated] ...\nvwxyz")
        );
    }

    #[tokio::test]
    async fn huge_output_is_bounded_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_with(
            dir.path(),
            SandboxLimits {
                bash_output_max_chars: 100,
                ..limits(30.0)
            },
        );
        // 2 MB of 'a' then a final marker line: head and tail survive, the count is exact.
        let cmd = "head -c 2000000 /dev/zero | tr '\\0' a; echo; echo END";
        let (s, text) = run(&BashTool, &c, json!({"command": cmd})).await;
        assert_eq!(s, O);
        assert!(text.starts_with(&"a".repeat(50)), "{text}");
        assert!(text.ends_with("\nEND\n"), "{text}");
        let total = 2_000_000 + 1 + 4;
        assert!(
            text.contains(&format!("... [{} characters truncated] ...", total - 100)),
            "{text}"
        );
    }

    #[tokio::test]
    async fn timeout_kills_backgrounded_children() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_with(dir.path(), limits(1.0));
        let start = Instant::now();
        let (s, text) = run(
            &BashTool,
            &c,
            json!({"command": "echo started; sleep 987654 & sleep 987655; echo never"}),
        )
        .await;
        assert_eq!(s, E);
        assert!(
            text.starts_with("Error: command timed out after 1 seconds\nstarted\n"),
            "{text}"
        );
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(
            gone_within("sleep 987654", 3).await,
            "backgrounded child survived the timeout"
        );
        assert!(gone_within("sleep 987655", 3).await);
        assert!(c.workspace.processes().live().is_empty());
    }

    #[tokio::test]
    async fn backgrounded_child_does_not_hold_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_with(dir.path(), limits(60.0));
        let start = Instant::now();
        let got = run(
            &BashTool,
            &c,
            json!({"command": "sleep 876543 & echo quick"}),
        )
        .await;
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "took {:?}",
            start.elapsed()
        );
        assert_eq!(got, (O, "quick\n".to_string()));
        assert!(
            gone_within("sleep 876543", 3).await,
            "background child outlived the call"
        );
    }

    #[tokio::test]
    async fn cancellation_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_with(dir.path(), limits(60.0));
        let cancel = c.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            cancel.cancel();
        });
        let start = Instant::now();
        let (s, text) = run(
            &BashTool,
            &c,
            json!({"command": "sleep 765432 & sleep 765433"}),
        )
        .await;
        assert_eq!(s, E);
        assert!(text.starts_with("Error: command cancelled"), "{text}");
        assert!(start.elapsed() < Duration::from_secs(3));
        assert!(gone_within("sleep 765432", 3).await);
        assert!(gone_within("sleep 765433", 3).await);
    }

    #[tokio::test]
    async fn kill_all_stops_a_running_command() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_with(dir.path(), limits(60.0));
        let groups = c.workspace.processes().clone();
        tokio::spawn(async move {
            // Wait until the command registered its group, then kill everything.
            for _ in 0..100 {
                if !groups.live().is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            groups.kill_all();
        });
        let start = Instant::now();
        let (s, text) = run(
            &BashTool,
            &c,
            json!({"command": "sleep 654321 & sleep 654322"}),
        )
        .await;
        assert_eq!((s, text.as_str()), (O, "\nExit Code: 137"));
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(gone_within("sleep 654321", 3).await);
    }

    #[test]
    fn compose_formats() {
        assert_eq!(compose("", "", 0), "(no output)");
        assert_eq!(compose("a", "", 1), "a\nExit Code: 1");
        assert_eq!(compose("a", "b", 0), "a\nStd Error:\nb");
    }

    #[test]
    fn head_tail_counts_dropped_chars() {
        let mut ht = HeadTail {
            cap: 2,
            head: Vec::new(),
            tail: VecDeque::new(),
            dropped_chars: 0,
        };
        ht.push("abcdéfg".as_bytes());
        assert_eq!(ht.head, b"ab");
        assert_eq!(ht.tail.iter().copied().collect::<Vec<u8>>(), b"fg");
        assert_eq!(ht.dropped_chars, 3);
        ht.push(b"hijklmn");
        assert_eq!(ht.tail.iter().copied().collect::<Vec<u8>>(), b"mn");
        assert_eq!(ht.dropped_chars, 10);
        ht.push(b"o");
        assert_eq!(ht.tail.iter().copied().collect::<Vec<u8>>(), b"no");
        assert_eq!(ht.dropped_chars, 11);
    }

    #[test]
    fn schema_matches_what_the_argument_type_accepts() {
        crate::tools::args::assert_schema_matches::<BashArgs>(
            &["command"],
            json!({"description": "why", "command": "true"}),
        );
    }
}
