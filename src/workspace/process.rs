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
