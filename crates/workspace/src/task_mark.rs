//! Finding and killing every host process a sub-agent started, at its timeout or
//! cancellation (contract §12), including those that left its process groups with `setsid` or
//! a double fork.
//!
//! Each command a sub-agent runs on the host gets `DEERFLOW_TASK=<deerflow pid>.<task seq>`
//! in its environment, which every descendant inherits across `fork`, `setsid` and `exec`
//! (unless it clears its environment). Ancestry alone cannot do it: a detached process is
//! reparented to deerflow (the child subreaper), where it looks like any other task's. So
//! the kill scans `/proc` for processes carrying the mark, adds their descendants (which
//! catches one that cleared its environment while a marked ancestor still lives), kills
//! them and the groups they lead, and repeats until a pass finds none alive (a process
//! forking at the moment of the scan is found on the next pass). Killed processes that were
//! reparented to deerflow, and the zombies of commands' children reparented here, are
//! reaped, so they do not linger (still answering `kill -0`) until the run ends.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The variable that carries the mark.
pub const TASK_MARK_VAR: &str = "DEERFLOW_TASK";

/// How many scans a kill makes at most, and the pause between them.
const PASSES: usize = 50;
const PAUSE: Duration = Duration::from_millis(10);

/// One sub-agent's mark. Cloning shares it.
#[derive(Debug, Clone)]
pub struct TaskMark(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    value: String,
    /// Whether a process was ever started with the mark: a task that ran no command has
    /// nothing to scan for.
    used: AtomicBool,
}

impl TaskMark {
    /// The mark of the run's task number `seq`; deerflow's pid keeps it apart from the
    /// tasks of other deerflow processes on the machine.
    pub fn new(seq: u32) -> Self {
        Self(Arc::new(Inner {
            value: format!("{}.{seq}", std::process::id()),
            used: AtomicBool::new(false),
        }))
    }

    pub fn value(&self) -> &str {
        &self.0.value
    }

    /// Gives the command the mark (after its environment is set).
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        self.0.used.store(true, Ordering::SeqCst);
        cmd.env(TASK_MARK_VAR, &self.0.value);
    }

    /// Kills every process carrying the mark and its descendants, off the runtime's thread.
    pub async fn kill_all(&self) {
        if !self.0.used.load(Ordering::SeqCst) {
            return;
        }
        let value = self.0.value.clone();
        let _ = tokio::task::spawn_blocking(move || kill_marked(&value)).await;
    }
}

/// What `/proc/PID/stat` says of one process.
struct Proc {
    pid: i32,
    ppid: i32,
    pgid: i32,
    zombie: bool,
}

fn snapshot() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .collect()
}

fn stat(pid: i32) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields follow the last `)`.
    let mut fields = text[text.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?;
    Some(Proc {
        pid,
        ppid: fields.next()?.parse().ok()?,
        pgid: fields.next()?.parse().ok()?,
        zombie: state == "Z" || state == "X",
    })
}

/// Whether `pid`'s environment holds `DEERFLOW_TASK=value` (unreadable: no).
fn carries(pid: i32, entry: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|e| e == entry))
}

/// The live processes carrying the mark and all their live descendants.
fn targets(procs: &[Proc], entry: &[u8], me: i32) -> HashSet<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for p in procs.iter().filter(|p| !p.zombie) {
        children.entry(p.ppid).or_default().push(p.pid);
    }
    let mut found: HashSet<i32> = HashSet::new();
    let mut stack: Vec<i32> = procs
        .iter()
        .filter(|p| !p.zombie && p.pid != me && carries(p.pid, entry))
        .map(|p| p.pid)
        .collect();
    while let Some(pid) = stack.pop() {
        if pid != me && pid > 1 && found.insert(pid) {
            stack.extend(children.get(&pid).into_iter().flatten());
        }
    }
    found
}

/// See the module docs. Blocking: it sleeps between passes.
pub fn kill_marked(value: &str) {
    let entry = format!("{TASK_MARK_VAR}={value}").into_bytes();
    let me = std::process::id() as i32;
    // SAFETY: getpgrp has no preconditions.
    let my_group = unsafe { libc::getpgrp() };
    let mut killed: HashSet<i32> = HashSet::new();
    for _ in 0..PASSES {
        let procs = snapshot();
        let alive = targets(&procs, &entry, me);
        for p in procs.iter().filter(|p| alive.contains(&p.pid)) {
            if p.pgid == p.pid {
                super::process::kill_group(p.pgid);
            }
            // SAFETY: kill has no memory-safety preconditions; it only sends a signal.
            unsafe {
                libc::kill(p.pid, libc::SIGKILL);
            }
        }
        killed.extend(alive.iter().copied());
        let mut waiting = false;
        for p in procs.iter().filter(|p| p.ppid == me) {
            if killed.contains(&p.pid) || (p.zombie && orphaned(p, my_group)) {
                waiting |= !reap(p.pid);
            }
        }
        if alive.is_empty() && !waiting {
            return;
        }
        std::thread::sleep(PAUSE);
    }
}

/// Whether a child of deerflow was reparented here rather than started by deerflow: every
/// process deerflow starts leads its own group (a new session for commands, a new group for
/// MCP servers), so one in another's group came from a command — such as a `setsid` child
/// killed with its command's group before it could detach. Its mark is gone with its
/// memory, so this is how its zombie is recognised.
fn orphaned(p: &Proc, my_group: i32) -> bool {
    p.pgid != p.pid && p.pgid != my_group
}

/// Reaps `pid`, a child of deerflow that was killed or is a reparented zombie; `false`
/// while it has not exited yet.
fn reap(pid: i32) -> bool {
    let mut status = 0;
    // SAFETY: waitpid writes only the status integer it is given. The pid is not one a
    // running tool waits on: either a reparented process (nothing else waits on it) or a
    // task's command whose tool is gone (its leader reaped by the tool, or in tokio's orphan
    // queue, which drops a pid already reaped).
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    r != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alive(pid: i32) -> bool {
        stat(pid).is_some_and(|p| !p.zombie)
    }

    #[tokio::test]
    async fn a_detached_descendant_with_the_mark_is_killed_and_reaped_others_are_not() {
        crate::process::become_subreaper();
        let dir = tempfile::tempdir().unwrap();
        let mark = TaskMark::new(4_000_000_000);
        let other = TaskMark::new(4_000_000_001);
        let spawn = |mark: &TaskMark, file: &str| {
            let mut cmd = tokio::process::Command::new("sh");
            cmd.arg("-c")
                .arg(format!(
                    "setsid sh -c 'sleep 736251' >/dev/null 2>&1 </dev/null & echo $! > {file}"
                ))
                .current_dir(dir.path());
            mark.apply(&mut cmd);
            cmd.status()
        };
        assert!(spawn(&mark, "mine").await.unwrap().success());
        assert!(spawn(&other, "theirs").await.unwrap().success());
        let pid = |f: &str| -> i32 {
            std::fs::read_to_string(dir.path().join(f))
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        };
        let (mine, theirs) = (pid("mine"), pid("theirs"));
        assert!(alive(mine) && alive(theirs));
        mark.kill_all().await;
        assert!(stat(mine).is_none(), "killed and reaped");
        assert!(alive(theirs), "another task's process was killed");
        other.kill_all().await;
        assert!(stat(theirs).is_none());
        // A mark that started nothing scans nothing.
        TaskMark::new(4_000_000_002).kill_all().await;
    }
}
