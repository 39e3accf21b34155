//! `--state DIR` (contract §15): a ledger of the run's finished work in `DIR/ledger.jsonl`,
//! so that the same command run again resumes instead of redoing it. The directory is
//! locked for the life of the process (`lock.rs`); the ledger's first line says what it was
//! written for (`header.rs`), the rest is appended and fsynced before the event that
//! reports each entry (`ledger.rs`).

pub mod hash;
pub mod header;
pub mod ledger;
pub mod lock;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

pub use header::Purpose;
use ledger::{Entry, ItemEnd, Writer};
use lock::DirLock;

/// An open state directory: locked, its ledger read back and open for appending.
pub struct StateDir {
    dir: PathBuf,
    _lock: DirLock,
    writer: Writer,
    /// The items the ledger holds as completed, by index; taken as they are resumed.
    completed: Mutex<HashMap<u64, ItemEnd>>,
    /// The first write error: the run stops at it.
    failure: Mutex<Option<String>>,
}

impl StateDir {
    /// Creates `dir` if absent, locks it and reads its ledger back. `Err` (a usage error)
    /// when another deerflow holds it, a line before the last is corrupt, or the ledger was
    /// written for another run (naming the difference).
    pub fn open(dir: &Path, purpose: &Purpose) -> Result<Self, String> {
        let shown = dir.display();
        std::fs::create_dir_all(dir).map_err(|e| format!("--state {shown}: {e}"))?;
        let lock = DirLock::take(dir).map_err(|e| format!("--state {shown} {e}"))?;
        let path = dir.join("ledger.jsonl");
        let back = ledger::read(&path).map_err(|e| format!("--state {shown}: {e}"))?;
        if let Some(h) = &back.header {
            if let Some(d) = purpose.difference(&h.written_for) {
                return Err(format!(
                    "--state {shown}: the ledger {d}; give another directory, or remove it to \
                     start over"
                ));
            }
        }
        let new = back.header.is_none().then_some(purpose);
        let writer = Writer::open(&path, back.whole_len, new)
            .map_err(|e| format!("--state {shown}: {e}"))?;
        let mut completed = HashMap::new();
        for e in back.entries {
            if let Entry::Item(end) = e {
                if end.status == "completed" {
                    completed.insert(end.index, end);
                } else {
                    completed.remove(&end.index);
                }
            }
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            _lock: lock,
            writer,
            completed: Mutex::new(completed),
            failure: Mutex::new(None),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The recorded end of item `index` if it completed with this `content` (the
    /// fingerprint of its prompt); taken: an item starts once per run.
    pub fn take_completed(&self, index: u64, content: &str) -> Option<ItemEnd> {
        let mut g = self.completed.lock().unwrap_or_else(|p| p.into_inner());
        match g.get(&index) {
            Some(e) if e.content == content => g.remove(&index),
            _ => None,
        }
    }

    /// Records an item's end (before its event). A write error is kept as the run's
    /// failure and returned.
    pub fn item_ended(&self, end: &ItemEnd) -> Result<(), String> {
        self.append(&Entry::Item(end.clone()))
    }

    fn append(&self, entry: &impl Serialize) -> Result<(), String> {
        if let Some(f) = self.failure() {
            return Err(f);
        }
        self.writer.append(entry).map_err(|e| {
            let why = format!("--state {}: {e}", self.dir.display());
            let mut g = self.failure.lock().unwrap_or_else(|p| p.into_inner());
            g.get_or_insert(why).clone()
        })
    }

    /// The first ledger write error, which ends the run (exit 1).
    pub fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
