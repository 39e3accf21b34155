//! The registry of live child process groups, so an abrupt stop (a second Ctrl-C) can kill
//! every command the tools started, including their backgrounded children.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Process-group ids of running tool commands. Cloning shares the registry.
#[derive(Debug, Clone, Default)]
pub struct ProcessGroups {
    live: Arc<Mutex<HashSet<i32>>>,
}

/// Unregisters its process group when dropped.
#[derive(Debug)]
pub struct GroupRegistration {
    live: Arc<Mutex<HashSet<i32>>>,
    pgid: i32,
}

impl ProcessGroups {
    /// Records `pgid` as live until the returned guard is dropped.
    pub fn register(&self, pgid: i32) -> GroupRegistration {
        lock(&self.live).insert(pgid);
        GroupRegistration {
            live: self.live.clone(),
            pgid,
        }
    }

    /// Sends SIGKILL to every registered group. Safe to call from any thread, any number of times.
    pub fn kill_all(&self) {
        for pgid in lock(&self.live).iter() {
            kill_group(*pgid);
        }
    }

    /// The registered group ids (for tests and diagnostics).
    pub fn live(&self) -> Vec<i32> {
        lock(&self.live).iter().copied().collect()
    }
}

impl Drop for GroupRegistration {
    fn drop(&mut self) {
        lock(&self.live).remove(&self.pgid);
    }
}

/// Makes deerflow the child subreaper of what it starts (Linux): a descendant that detaches
/// (`setsid`, a double fork) is reparented to deerflow instead of init, so the end of the run
/// still finds it ([`kill_orphans`]). Elsewhere a no-op.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integers and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Asks the kernel to SIGKILL the calling (child) process when its parent thread dies, so a
/// `kill -9` of deerflow takes the processes it started directly with it. For `pre_exec`:
/// async-signal-safe. The parent is the spawning thread, which is a runtime worker that
/// lives as long as the run.
pub fn die_with_parent() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_PDEATHSIG takes plain integers and touches no memory.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) == -1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Kills every process still a child of deerflow at the end of a run — with the subreaper
/// set, that includes what tools detached — and the process group each one leads.
pub fn kill_orphans() {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Some((ppid, pgid)) = parent_and_group(pid) else {
            continue;
        };
        if ppid != me || pid == me {
            continue;
        }
        if pgid == pid {
            kill_group(pgid);
        }
        // SAFETY: kill has no memory-safety preconditions; it only sends a signal.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// The parent and the process group of `pid`, from `/proc/PID/stat`.
fn parent_and_group(pid: i32) -> Option<(i32, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields follow the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let _state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    Some((ppid, pgid))
}

/// SIGKILLs a whole process group; a group that is already gone is not an error.
pub fn kill_group(pgid: i32) {
    // pgid 0 or 1 would mean "our own group" / init-like targets: never signal those.
    if pgid <= 1 {
        return;
    }
    // SAFETY: killpg has no memory-safety preconditions; it only sends a signal.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

/// A poisoned set only means a panic elsewhere; the set itself is still usable.
fn lock(m: &Mutex<HashSet<i32>>) -> std::sync::MutexGuard<'_, HashSet<i32>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_unregisters() {
        let groups = ProcessGroups::default();
        let g = groups.register(4242);
        assert_eq!(groups.live(), vec![4242]);
        drop(g);
        assert!(groups.live().is_empty());
    }

    #[test]
    fn kill_all_kills_registered_groups() {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("30").process_group(0);
        let mut child = cmd.spawn().unwrap();
        let groups = ProcessGroups::default();
        let _g = groups.register(child.id() as i32);
        groups.kill_all();
        let status = child.wait().unwrap();
        assert!(!status.success());
    }
}
