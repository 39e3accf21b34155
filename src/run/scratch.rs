//! The run's directory for large tool results (contract §10), in the system's temp dir.
//! Dropping it removes it; a run killed with SIGKILL cannot, so each directory holds the
//! run's lock (`state::lock`) and the next run removes the directories whose lock no live
//! process holds. The results go to a subdirectory (what `/mnt/tool-results` shows), so the
//! lock is never among them.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tempfile::TempDir;

use super::state::lock::DirLock;

const PREFIX: &str = "deerflow-tool-results-";
/// The subdirectory the results are written to, apart from the lock.
const RESULTS: &str = "results";

/// Younger directories are left alone: their run may be between creating and locking them.
const GRACE: Duration = Duration::from_secs(60);

/// A locked scratch directory, removed when dropped.
pub struct ScratchDir {
    // Field order: the directory goes before its lock is released.
    _dir: TempDir,
    results: PathBuf,
    _lock: DirLock,
}

impl ScratchDir {
    /// Removes the directories dead runs left in `parent`, then makes this run's.
    pub fn create_in(parent: &Path) -> std::io::Result<Self> {
        sweep(parent, SystemTime::now());
        let dir = tempfile::Builder::new().prefix(PREFIX).tempdir_in(parent)?;
        let lock = DirLock::take(dir.path()).map_err(std::io::Error::other)?;
        let results = dir.path().join(RESULTS);
        std::fs::create_dir(&results)?;
        Ok(Self {
            _dir: dir,
            results,
            _lock: lock,
        })
    }

    /// Where the results go: nothing else is in it.
    pub fn path(&self) -> &Path {
        &self.results
    }
}

/// Removes every scratch directory of `parent` this user owns that is older than [`GRACE`]
/// and whose lock is free (its run is dead). Errors are ignored: this is tidying only.
fn sweep(parent: &Path, now: SystemTime) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(PREFIX) || !stale(&entry, now) {
            continue;
        }
        let path: PathBuf = entry.path();
        if let Ok(_held) = DirLock::take(&path) {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// A directory (not a link) of this user's, last changed before the grace period.
fn stale(entry: &std::fs::DirEntry, now: SystemTime) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = entry.metadata() else {
        return false;
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let old = meta
        .modified()
        .is_ok_and(|m| now.duration_since(m).is_ok_and(|age| age > GRACE));
    meta.is_dir() && !meta.file_type().is_symlink() && meta.uid() == me && old
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_results_directory_holds_no_lock() {
        let tmp = tempfile::tempdir().unwrap();
        let scratch = ScratchDir::create_in(tmp.path()).unwrap();
        let listed: Vec<_> = std::fs::read_dir(scratch.path()).unwrap().collect();
        assert!(listed.is_empty(), "{listed:?}");
        assert!(scratch.path().starts_with(scratch._dir.path()));
    }

    #[test]
    fn a_dead_runs_directory_goes_and_a_live_or_young_one_stays() {
        let tmp = tempfile::tempdir().unwrap();
        let live = ScratchDir::create_in(tmp.path()).unwrap();
        // A dead run's: the lock file is there, nobody holds it.
        let dead = tmp.path().join(format!("{PREFIX}dead"));
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join("lock"), "host h, pid 1\n").unwrap();
        std::fs::write(dead.join("big.txt"), "spilled").unwrap();
        let young = tmp.path().join(format!("{PREFIX}young"));
        std::fs::create_dir(&young).unwrap();
        let other = tmp.path().join("not-ours");
        std::fs::create_dir(&other).unwrap();

        // Within the grace period nothing is touched.
        sweep(tmp.path(), SystemTime::now());
        assert!(dead.exists() && young.exists());

        // Later: the dead run's directory goes; the live run's stays, being locked.
        sweep(tmp.path(), SystemTime::now() + GRACE * 2);
        assert!(!dead.exists());
        assert!(!young.exists(), "an unlocked directory is a dead run's");
        assert!(live.path().exists());
        assert!(other.exists());
        let path = live._dir.path().to_path_buf();
        drop(live);
        assert!(!path.exists());
    }
}
