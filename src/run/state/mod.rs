//! `--state DIR` (contract §15): a ledger of the run's finished work in `DIR/ledger.jsonl`,
//! so that the same command run again resumes instead of redoing it. The directory is
//! locked for the life of the process (`lock.rs`); the ledger's first line says what it was
//! written for (`header.rs`), the rest is appended and fsynced before the event that
//! reports each entry (`ledger.rs`).

pub mod hash;
pub mod header;
pub mod lead;
pub mod ledger;
pub mod lock;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

pub use header::Purpose;
use ledger::{Entry, ItemEnd, TaskAsked, ToolEnd, Writer};
use lock::DirLock;

/// What earlier runs of the lead left in the ledger.
#[derive(Default)]
pub struct LeadRecord {
    /// The lead's responses, turn 0 on, as a cassette scripts them.
    pub responses: Vec<serde_json::Value>,
    /// Tool results by call id.
    pub tools: HashMap<String, ToolEnd>,
    /// Completed tasks, in the order they ended.
    pub tasks: Vec<TaskAsked>,
}

/// An open state directory: locked, its ledger read back and open for appending.
pub struct StateDir {
    dir: PathBuf,
    _lock: DirLock,
    writer: Writer,
    /// The items the ledger holds as completed, by index; taken as they are resumed.
    completed: Mutex<HashMap<u64, ItemEnd>>,
    /// What the lead did in earlier runs, taken once by the lead's replay.
    lead: Mutex<Option<LeadRecord>>,
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
        let mut lead = LeadRecord::default();
        for e in back.entries {
            match e {
                Entry::Item(end) if end.status == "completed" => {
                    completed.insert(end.index, end);
                }
                Entry::Item(end) => {
                    completed.remove(&end.index);
                }
                // A later run that went live from turn t replaced the record from there;
                // only an unbroken run of turns from the first can be replayed.
                Entry::Response { turn, response } if turn <= lead.responses.len() => {
                    lead.responses.truncate(turn);
                    lead.responses.push(response);
                }
                Entry::Response { .. } => {}
                Entry::Tool(t) => {
                    lead.tasks.extend(t.task.clone());
                    lead.tools.insert(t.call_id.clone(), t);
                }
            }
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            _lock: lock,
            writer,
            completed: Mutex::new(completed),
            lead: Mutex::new(Some(lead)),
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

    /// What earlier runs' lead did; empty after the first call.
    pub fn take_lead(&self) -> LeadRecord {
        let mut g = self.lead.lock().unwrap_or_else(|p| p.into_inner());
        g.take().unwrap_or_default()
    }

    /// Records a lead model response (before its events).
    pub fn lead_response(&self, turn: usize, response: &impl Serialize) -> Result<(), String> {
        let response = serde_json::to_value(response).map_err(|e| e.to_string())?;
        self.append(&Entry::Response { turn, response })
    }

    /// Records a lead tool result (before its event).
    pub fn tool_ended(&self, end: ToolEnd) -> Result<(), String> {
        self.append(&Entry::Tool(end))
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
