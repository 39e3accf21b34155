//! The parallel directory walk behind `glob` and `grep`, and what it shares with `ls`: the
//! directories never shown and the threads one walk or listing may use.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use tokio_util::sync::CancellationToken;

use super::ToolOutput;
use crate::ToolError;

/// Directories that listings and searches never descend into (nor show).
pub const IGNORED_DIRS: &[&str] = &[".git", "node_modules", "target", "__pycache__", ".venv"];

/// Threads for one walk, search or listing: a few are enough to keep the disk and the regex
/// busy, and the machine is shared with the agent's other work.
pub(super) fn walk_threads() -> usize {
    // Asked once: the answer reads cgroup files, which cost more than a small `ls` itself
    // (6 % of the CPU of a run doing nothing but `ls` calls).
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(8)))
}

/// Whether a directory named `name` is one of [`IGNORED_DIRS`].
pub(super) fn is_ignored_dir(name: &OsStr) -> bool {
    IGNORED_DIRS.iter().any(|d| name == *d)
}

/// A search stopped because the calling agent was cancelled (or timed out).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Cancelled;

impl Cancelled {
    pub(super) fn output(self) -> ToolOutput {
        ToolError::Message("search cancelled".into()).into()
    }
}

/// A parallel recursive walk of `root` that never follows symlinks below it and skips
/// [`IGNORED_DIRS`]. Each thread gets its own state from `make` and passes it with each entry
/// it sees to `visit`; the states come back in no particular order (callers sort).
/// `.gitignore` is deliberately not honoured: agents look for generated files too.
/// Every entry checks `cancel`, so a walk of a huge tree stops soon after it fires.
///
/// Its own walk rather than `ignore::WalkParallel`: that one queues every file as a work
/// item with its own path and matcher state, which cost more than the reading of the
/// directories on a tree of 100,000 files; here a file is one visit on a reused buffer.
pub(super) fn walk<S, M, V>(
    root: &Path,
    cancel: &CancellationToken,
    make: M,
    visit: V,
) -> Result<Walked<S>, Cancelled>
where
    S: Send,
    M: Fn() -> S + Sync,
    V: Fn(&mut S, &Seen<'_>) + Sync,
{
    let rel_at = {
        // Where a name pushed onto the root starts: past a separator unless the root ends in one.
        let mut probe = root.to_path_buf();
        probe.push("x");
        probe.as_os_str().len() - 1
    };
    let shared = Shared {
        pending: Mutex::new(Pending::default()),
        wake: Condvar::new(),
        unreadable: AtomicUsize::new(0),
        cancel,
        rel_at,
    };
    let mut first = make();
    // The root is followed if it is a link: the caller named it. Nothing below it is.
    match std::fs::metadata(root) {
        Err(_) => {
            shared.unreadable.fetch_add(1, Ordering::Relaxed);
        }
        Ok(meta) if !cancel.is_cancelled() => {
            let seen = Seen {
                path: root,
                rel_at,
                depth: 0,
                file_type: meta.file_type(),
            };
            visit(&mut first, &seen);
            if meta.is_dir() {
                shared.lock().dirs.push((root.to_path_buf(), 0));
            }
        }
        Ok(_) => return Err(Cancelled),
    }
    let mut states = Vec::new();
    if shared.lock().dirs.is_empty() {
        states.push(first);
    } else {
        let (shared, make, visit) = (&shared, &make, &visit);
        std::thread::scope(|s| {
            let others: Vec<_> = (1..walk_threads())
                .map(|_| {
                    s.spawn(move || {
                        let mut state = make();
                        shared.work(&mut state, visit);
                        state
                    })
                })
                .collect();
            shared.work(&mut first, visit);
            states.push(first);
            for other in others {
                match other.join() {
                    Ok(state) => states.push(state),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
        });
    }
    if cancel.is_cancelled() {
        return Err(Cancelled);
    }
    Ok(Walked {
        states,
        unreadable: shared.unreadable.into_inner(),
    })
}

/// One entry a walk shows its visitor, in a buffer the walk reuses for the next entry.
pub(super) struct Seen<'a> {
    /// The root joined with the names below it.
    pub(super) path: &'a Path,
    /// Where the part below the root starts in `path`.
    rel_at: usize,
    /// 0 for the root, 1 for its entries, and so on.
    pub(super) depth: usize,
    /// Not followed below the root: a symlink there is neither a file nor a directory.
    pub(super) file_type: std::fs::FileType,
}

impl Seen<'_> {
    /// The path below the root ("" for the root itself).
    pub(super) fn rel(&self) -> &Path {
        let bytes = self.path.as_os_str().as_bytes();
        Path::new(OsStr::from_bytes(
            bytes.get(self.rel_at..).unwrap_or_default(),
        ))
    }
}

/// Directories a walk has yet to read, shared by its threads.
#[derive(Default)]
pub(super) struct Pending {
    /// Each with its depth.
    dirs: Vec<(PathBuf, usize)>,
    /// Threads reading a directory now: they may still add to `dirs`.
    busy: usize,
    /// Nothing is left to read, or the walk was cancelled.
    over: bool,
}

/// What the threads of one walk share.
pub(super) struct Shared<'c> {
    pending: Mutex<Pending>,
    /// Wakes idle threads when directories are added or the walk is over.
    wake: Condvar,
    unreadable: AtomicUsize,
    cancel: &'c CancellationToken,
    rel_at: usize,
}

impl Shared<'_> {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads directories until none is left (or the walk is cancelled).
    fn work<S, V: Fn(&mut S, &Seen<'_>)>(&self, state: &mut S, visit: &V) {
        let mut found = Vec::new();
        let mut buf = Vec::new();
        loop {
            let (dir, depth) = {
                let mut pending = self.lock();
                loop {
                    if pending.over {
                        return;
                    }
                    if let Some(next) = pending.dirs.pop() {
                        pending.busy += 1;
                        break next;
                    }
                    if pending.busy == 0 {
                        pending.over = true;
                        self.wake.notify_all();
                        return;
                    }
                    pending = self
                        .wake
                        .wait(pending)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            };
            let stop_on_panic = StopOnPanic(self);
            let finished = self.read(&dir, depth, state, visit, &mut found, &mut buf);
            drop(stop_on_panic);
            let mut pending = self.lock();
            pending.busy -= 1;
            if !finished {
                pending.over = true;
            }
            pending.dirs.append(&mut found);
            self.wake.notify_all();
        }
    }

    /// Visits the entries of `dir`, keeping its subdirectories in `found`. False once the walk
    /// is cancelled.
    fn read<S, V: Fn(&mut S, &Seen<'_>)>(
        &self,
        dir: &Path,
        depth: usize,
        state: &mut S,
        visit: &V,
        found: &mut Vec<(PathBuf, usize)>,
        buf: &mut Vec<u8>,
    ) -> bool {
        // Unreadable entries (permissions, races, paths too long for the system) are skipped
        // rather than failing the search, and counted so the answer says so.
        let Ok(entries) = std::fs::read_dir(dir) else {
            self.unreadable.fetch_add(1, Ordering::Relaxed);
            return true;
        };
        // Each entry's path is this directory's, a separator (as `PathBuf::push` puts one),
        // and the entry's name.
        buf.clear();
        buf.extend_from_slice(dir.as_os_str().as_bytes());
        if buf.last() != Some(&b'/') {
            buf.push(b'/');
        }
        let base = buf.len();
        for entry in entries {
            if self.cancel.is_cancelled() {
                return false;
            }
            let Ok((entry, file_type)) = entry.and_then(|e| e.file_type().map(|t| (e, t))) else {
                self.unreadable.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let name = entry.file_name();
            if file_type.is_dir() && is_ignored_dir(&name) {
                continue;
            }
            buf.truncate(base);
            buf.extend_from_slice(name.as_bytes());
            let path = Path::new(OsStr::from_bytes(buf));
            visit(
                state,
                &Seen {
                    path,
                    rel_at: self.rel_at,
                    depth: depth + 1,
                    file_type,
                },
            );
            if file_type.is_dir() {
                found.push((path.to_path_buf(), depth + 1));
            }
        }
        true
    }
}

/// Ends the walk if a visitor panics while its thread reads a directory: the other threads
/// would otherwise wait for that directory forever, and the panic would never reach the caller.
pub(super) struct StopOnPanic<'s, 'c>(&'s Shared<'c>);

impl Drop for StopOnPanic<'_, '_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.lock().over = true;
            self.0.wake.notify_all();
        }
    }
}

/// What a walk's threads kept, and how many entries it could not read.
#[derive(Debug, PartialEq)]
pub(super) struct Walked<S> {
    pub(super) states: Vec<S>,
    pub(super) unreadable: usize,
}

/// `(skipped 2 paths that could not be read …)`, so a missing match is never silent.
pub(super) fn unreadable_note(n: usize) -> Option<String> {
    (n > 0).then(|| {
        let noun = if n == 1 { "path" } else { "paths" };
        format!(
            "(skipped {n} {noun} that could not be read: unreadable, or too long for the system)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_stops_when_cancelled() {
        let dir = tempfile::tempdir().unwrap();
        for d in 0..20 {
            let sub = dir.path().join(format!("d{d}"));
            std::fs::create_dir(&sub).unwrap();
            for f in 0..100 {
                std::fs::write(sub.join(format!("{f}.txt")), "x").unwrap();
            }
        }
        let cancel = CancellationToken::new();
        let seen = AtomicUsize::new(0);
        let got = walk(
            dir.path(),
            &cancel,
            || (),
            |_, _| {
                // The agent is cancelled while the walk is under way.
                if seen.fetch_add(1, Ordering::SeqCst) == 10 {
                    cancel.cancel();
                }
            },
        );
        assert_eq!(got, Err(Cancelled));
        let seen = seen.into_inner();
        assert!(
            seen < 1000,
            "the walk went on after the cancel: {seen} entries"
        );
        let all = walk(dir.path(), &CancellationToken::new(), || 0, |n, _| *n += 1).unwrap();
        assert_eq!(all.states.iter().sum::<usize>(), 2021);
        assert_eq!(all.unreadable, 0);
    }

    /// A visitor's panic reaches the caller instead of leaving the other threads waiting.
    #[test]
    fn a_panicking_visitor_ends_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        for d in 0..8 {
            let sub = dir.path().join(format!("d{d}/e"));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join("f.txt"), "x").unwrap();
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let root = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let got = std::panic::catch_unwind(|| {
                walk(
                    &root,
                    &CancellationToken::new(),
                    || (),
                    // One directory's visit fails; the others' succeed.
                    |_, e| assert!(!e.path.ends_with("d3/e"), "a visitor fails"),
                )
            });
            let _ = tx.send(got.is_err());
        });
        let panicked = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(
            panicked,
            Ok(true),
            "the walk hung or did not pass the panic on"
        );
    }
}
