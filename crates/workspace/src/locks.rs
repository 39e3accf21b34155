//! Per-path async write locks, so parallel writers (sub-agents) to one file are serialized.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// A map from resolved path to its lock. Entries nobody holds are pruned on each `lock`.
#[derive(Debug, Default)]
pub struct WriteLocks {
    map: Mutex<HashMap<PathBuf, Arc<AsyncMutex<()>>>>,
}

impl WriteLocks {
    /// Waits for exclusive write access to `path` (a path from `Workspace::resolve`).
    pub async fn lock(&self, path: &Path) -> OwnedMutexGuard<()> {
        let entry = {
            // A poisoned map only means another thread panicked mid-insert; the map is intact.
            let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
            // An entry only the map references is unheld and can go; the count cannot rise
            // meanwhile because every clone happens under this std mutex.
            map.retain(|_, m| Arc::strong_count(m) > 1);
            map.entry(path.to_path_buf()).or_default().clone()
        };
        entry.lock_owned().await
    }

    /// How many paths currently have a lock entry (for tests and diagnostics).
    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn same_path_is_serialized_other_paths_are_not() {
        let locks = Arc::new(WriteLocks::default());
        let a = locks.lock(Path::new("/w/a")).await;
        // A different path is free.
        let b =
            tokio::time::timeout(Duration::from_millis(200), locks.lock(Path::new("/w/b"))).await;
        assert!(b.is_ok());
        // The same path waits until the first guard drops.
        let l2 = locks.clone();
        let waiter = tokio::spawn(async move {
            l2.lock(Path::new("/w/a")).await;
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiter.is_finished());
        drop(a);
        tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn unheld_entries_are_pruned() {
        let locks = WriteLocks::default();
        drop(locks.lock(Path::new("/w/a")).await);
        drop(locks.lock(Path::new("/w/b")).await);
        assert_eq!(locks.len(), 1);
    }
}
