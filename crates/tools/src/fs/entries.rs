//! Reading the entries of the directories a listing shows, a few directories at a time.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::walk::{is_ignored_dir, walk_threads};

/// The entries of each of `dirs` (`None` for one that cannot be read), in order.
pub(super) fn read_each(dirs: &[PathBuf]) -> Vec<Option<Entries>> {
    // A few directories are read here: starting a thread costs more than reading them.
    if dirs.len() <= FEW_DIRS {
        let mut unlimited = usize::MAX;
        return dirs
            .iter()
            .map(|dir| read_entries(dir, &mut unlimited).ok().flatten())
            .collect();
    }
    // The second level is most of a large listing: each of a few threads takes the next
    // unread directory; the results are put back in order.
    let next = AtomicUsize::new(0);
    let read = || {
        let mut got: Vec<(usize, Option<Entries>)> = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(dir) = dirs.get(i) else { break };
            let mut unlimited = usize::MAX;
            got.push((i, read_entries(dir, &mut unlimited).ok().flatten()));
        }
        got
    };
    let mut all = std::thread::scope(|s| {
        let others: Vec<_> = (1..walk_threads().min(dirs.len()))
            .map(|_| s.spawn(read))
            .collect();
        let mut all = read();
        for other in others {
            match other.join() {
                Ok(got) => all.extend(got),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        all
    });
    all.sort_unstable_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, entries)| entries).collect()
}

/// Subdirectories a listing reads on one thread.
const FEW_DIRS: usize = 16;

/// A directory's entries: each name and whether it is a directory.
pub(super) type Entries = Vec<(OsString, bool)>;

/// A directory's entry names, unsorted, ignored directories left out. Symlinks count as files
/// so a listing never descends through a link (which could point outside). Sorted, the names
/// are in the order of the paths they make (by their bytes: names in one directory are
/// unique single components). `None` once more than `budget` entries were read (what was
/// read is taken off it).
pub(super) fn read_entries(dir: &Path, budget: &mut usize) -> std::io::Result<Option<Entries>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let Some(left) = budget.checked_sub(1) else {
            return Ok(None);
        };
        *budget = left;
        let Ok(entry) = entry else { continue };
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let name = entry.file_name();
        if is_dir && is_ignored_dir(&name) {
            continue;
        }
        out.push((name, is_dir));
    }
    Ok(Some(out))
}
