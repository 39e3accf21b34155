//! Running a host process for a sandbox: a new session (so its own process group), stdin
//! `/dev/null`, bounded output, and the whole group killed when the command times out, is
//! cancelled, or returns — nothing it started outlives the call.

use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::Command;
use tokio::task::JoinHandle;

use super::capture::{exec_output, Capture};
use super::{ExecEnd, ExecOutput, ExecRequest};
use crate::process::kill_group;

/// How long output is still read after the command exits (a backgrounded child may hold the
/// pipe open forever).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);
/// How long to wait for the killed group's leader and pipes after a timeout or cancellation.
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(1);

/// SIGKILLs the group when dropped, which covers the tool future itself being dropped.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// Runs `cmd` (a program and its arguments; `what` names it in errors) as the request says.
pub(super) async fn run(
    mut cmd: Command,
    what: &str,
    req: &ExecRequest<'_>,
) -> Result<ExecOutput, String> {
    cmd.current_dir(req.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    req.env.apply(&mut cmd);
    if let Some(mark) = req.mark {
        mark.apply(&mut cmd);
    }
    // SAFETY: the closure runs in the forked child before exec and only calls setsid() and
    // prctl(), which are async-signal-safe; it touches no memory shared with the parent. A new session makes
    // the child leader of its own process group (pgid = pid), so killpg reaches everything it
    // starts, and a terminal Ctrl-C to our group does not hit it directly.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            crate::process::die_with_parent()
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {what}: {e}"))?;
    // A spawned, not-yet-awaited child always has an id; 0 would make killpg target our own
    // group, which kill_group refuses.
    let pgid = child.id().map_or(0, |id| id as i32);
    let _registered = req.processes.register(pgid);
    let _killer = KillOnDrop(pgid);
    let stdout = Capture::new(req.output_max_chars);
    let stderr = Capture::new(req.output_max_chars);
    let mut readers = [
        stdout.spawn_reader(child.stdout.take()),
        stderr.spawn_reader(child.stderr.take()),
    ];

    let end = tokio::select! {
        r = child.wait() => r.map_or_else(ExecEnd::WaitFailed, |s| ExecEnd::Exited(exit_code(s))),
        _ = tokio::time::sleep(req.timeout) => ExecEnd::TimedOut,
        _ = req.cancel.cancelled() => ExecEnd::Cancelled,
    };
    let exited = matches!(end, ExecEnd::Exited(_));
    if !exited {
        kill_group(pgid);
        // The leader got SIGKILL, so this returns at once; it reaps the zombie.
        let _ = tokio::time::timeout(DRAIN_AFTER_KILL, child.wait()).await;
    }
    let drain = if exited {
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
    Ok(exec_output(end, &stdout, &stderr))
}

/// The exit code, or 128 + signal for a command killed by a signal (as shells report it).
fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}
