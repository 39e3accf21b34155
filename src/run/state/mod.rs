//! `--state DIR` (contract §15): a ledger of the run's finished work in `DIR/ledger.jsonl`,
//! so that the same command run again resumes instead of redoing it. The directory is
//! locked for the life of the process (`lock.rs`); the ledger's first line says what it was
//! written for (`header.rs`), the rest is appended and fsynced before the event that
//! reports each entry (`ledger.rs`): the lead's responses and tool results (`lead.rs`),
//! every sub-agent's responses and every lead task's end (`tasks.rs`), and every item's
//! end.

pub mod hash;
pub mod header;
pub mod lead;
pub mod ledger;
pub mod lock;
pub mod tasks;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

use crate::events::Gate;
use crate::usage::UsageTotals;
pub use header::Purpose;
use ledger::{Entry, ItemEnd, TaskAsked, TaskEnded, Ticket, ToolEnd, Writer};
use lock::DirLock;

/// What earlier runs of the lead left in the ledger.
#[derive(Default)]
pub struct LeadRecord {
    /// The lead's responses, turn 0 on, as a cassette scripts them.
    pub responses: Vec<serde_json::Value>,
    /// Tool results by call id.
    pub tools: HashMap<String, ToolEnd>,
    /// Completed tasks, in the order they ended.
    pub tasks: Vec<DoneTask>,
}

/// A completed task of the ledger.
#[derive(Debug, Clone)]
pub struct DoneTask {
    /// The id of the call that ran it.
    pub ran_as: String,
    pub asked: TaskAsked,
    /// What its terminal event reported; nothing when only its `tool` line holds it.
    pub usage: UsageTotals,
    pub turns: u32,
    pub duration_ms: u64,
}

impl LeadRecord {
    /// Adds a completed task unless the ledger holds it already: a task's own line comes
    /// before its call's `tool` line, and both say it completed.
    fn add_task(&mut self, done: DoneTask) {
        let (a, id) = (&done.asked, &done.ran_as);
        let known = self.tasks.iter().any(|t| {
            t.ran_as == *id
                && t.asked.description.trim() == a.description.trim()
                && t.asked.prompt == a.prompt
                && t.asked.subagent_type == a.subagent_type
        });
        if !known {
            self.tasks.push(done);
        }
    }
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
    /// Sub-agents' recorded responses by task id, turn 0 on — kept only for `--record`,
    /// which writes those of the tasks and items taken from the ledger.
    task_responses: Mutex<HashMap<String, Vec<serde_json::Value>>>,
    /// The first error queueing an entry (a write error is the writer's).
    failure: Mutex<Option<String>>,
}

impl StateDir {
    /// Creates `dir` if absent, locks it and reads its ledger back. `Err` (a usage error)
    /// when another deerflow holds it, a line before the last is corrupt, or the ledger was
    /// written for another run (naming the difference). `keep_responses`: keep the
    /// sub-agents' recorded responses (`--record` writes those of the tasks resumed).
    pub fn open(dir: &Path, purpose: &Purpose, keep_responses: bool) -> Result<Self, String> {
        let shown = dir.display();
        if dir.exists() && !dir.is_dir() {
            return Err(format!(
                "--state {shown} is not a directory; give a directory"
            ));
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("--state {shown}: {e}"))?;
        let lock = DirLock::take(dir).map_err(|e| format!("--state {shown} {e}"))?;
        let path = dir.join("ledger.jsonl");
        let back = ledger::read_keeping(&path, keep_responses)
            .map_err(|e| format!("--state {shown}: {e}"))?;
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
        let mut task_responses: HashMap<String, Vec<serde_json::Value>> = HashMap::new();
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
                // As for the lead: a task that ran again from turn 0 replaced its record.
                Entry::TaskResponse {
                    task_id,
                    turn,
                    response,
                    ..
                } if keep_responses => {
                    let turns = task_responses.entry(task_id).or_default();
                    if turn <= turns.len() {
                        turns.truncate(turn);
                        turns.push(response);
                    }
                }
                Entry::TaskResponse { .. } => {}
                Entry::Task(t) if t.status == "completed" => lead.add_task(DoneTask {
                    asked: TaskAsked {
                        description: t.description,
                        prompt: t.prompt,
                        subagent_type: t.subagent_type,
                        result: t.text,
                    },
                    ran_as: t.task_id,
                    usage: t.usage,
                    turns: t.turns,
                    duration_ms: t.duration_ms,
                }),
                // Run again on resume, as a call that never ended is.
                Entry::Task(_) => {}
                Entry::Tool(t) => {
                    if let Some(asked) = t.task.clone() {
                        lead.add_task(DoneTask {
                            ran_as: t.call_id.clone(),
                            asked,
                            usage: UsageTotals::default(),
                            turns: 0,
                            duration_ms: 0,
                        });
                    }
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
            task_responses: Mutex::new(task_responses),
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

    /// Records an item's end. Its terminal event must wait at the gate returned: the
    /// entry is on disk when it opens. `None` after a write error (the run fails at the
    /// next item; the event goes out, the ledger does not hold it: a resume runs the item
    /// again).
    pub fn item_ended(&self, end: &ItemEnd) -> Option<Gate> {
        self.gated(&Entry::Item(end.clone()))
    }

    /// Records a lead task's end, as [`item_ended`](Self::item_ended) does an item's.
    pub fn task_ended(&self, end: TaskEnded) -> Option<Gate> {
        self.gated(&Entry::Task(end))
    }

    fn gated(&self, entry: &Entry) -> Option<Gate> {
        let ticket = self.queue(entry).ok()?;
        Some(Gate::new(move || ticket.wait()))
    }

    /// What earlier runs' lead did; empty after the first call.
    pub fn take_lead(&self) -> LeadRecord {
        let mut g = self.lead.lock().unwrap_or_else(|p| p.into_inner());
        g.take().unwrap_or_default()
    }

    /// The recorded responses of task `task_id` (kept only for `--record`), taken.
    pub fn take_task_responses(&self, task_id: &str) -> Vec<serde_json::Value> {
        let mut g = self
            .task_responses
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        g.remove(task_id).unwrap_or_default()
    }

    /// Records a lead model response; returns once it is on disk.
    pub async fn lead_response(
        &self,
        turn: usize,
        response: &impl Serialize,
    ) -> Result<(), String> {
        let response = serde_json::to_value(response).map_err(|e| e.to_string())?;
        self.append(&Entry::Response { turn, response }).await
    }

    /// Records a sub-agent's model response; returns once it is on disk.
    pub async fn task_response(
        &self,
        task_id: &str,
        description: &str,
        turn: usize,
        response: &impl Serialize,
    ) -> Result<(), String> {
        let response = serde_json::to_value(response).map_err(|e| e.to_string())?;
        self.append(&Entry::TaskResponse {
            task_id: task_id.to_string(),
            description: description.to_string(),
            turn,
            response,
        })
        .await
    }

    /// Records a lead tool result; returns once it is on disk.
    pub async fn tool_ended(&self, end: ToolEnd) -> Result<(), String> {
        self.append(&Entry::Tool(end)).await
    }

    async fn append(&self, entry: &Entry) -> Result<(), String> {
        let ticket = self.queue(entry)?;
        ticket.on_disk().await.map_err(|e| self.described(e))
    }

    /// Queues `entry` for the ledger's writer. A failure is kept as the run's.
    fn queue(&self, entry: &Entry) -> Result<Ticket, String> {
        if let Some(f) = self.failure() {
            return Err(f);
        }
        self.writer.append(entry).map_err(|e| {
            let why = self.described(e);
            let mut g = self.failure.lock().unwrap_or_else(|p| p.into_inner());
            g.get_or_insert(why).clone()
        })
    }

    fn described(&self, e: String) -> String {
        format!("--state {}: {e}", self.dir.display())
    }

    /// The first ledger write error, which ends the run (exit 1).
    pub fn failure(&self) -> Option<String> {
        let queued = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        queued
            .clone()
            .or_else(|| self.writer.failure().map(|e| self.described(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn purpose() -> Purpose {
        Purpose {
            prompt: "go".into(),
            each: false,
            agent: None,
            model: "m".into(),
            output_schema: None,
            images: vec![],
            shard: None,
        }
    }

    fn task(id: &str, status: &str) -> Entry {
        Entry::Task(TaskEnded {
            task_id: id.into(),
            description: " count ".into(),
            prompt: "count it".into(),
            subagent_type: "general-purpose".into(),
            status: status.into(),
            text: format!("{id} said so"),
            usage: UsageTotals {
                input_tokens: 3,
                output_tokens: 1,
                total_tokens: 4,
            },
            turns: 2,
            duration_ms: 9,
        })
    }

    fn tool(id: &str) -> Entry {
        Entry::Tool(ToolEnd {
            call_id: id.into(),
            name: "task".into(),
            ok: true,
            output: format!("Task Succeeded. Result: {id} said so"),
            task: Some(TaskAsked {
                description: "count".into(),
                prompt: "count it".into(),
                subagent_type: "general-purpose".into(),
                result: format!("{id} said so"),
            }),
        })
    }

    #[test]
    fn a_file_where_the_directory_should_be_is_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let e = StateDir::open(&file, &purpose(), false).err().unwrap();
        assert!(e.ends_with("is not a directory; give a directory"), "{e}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    }

    /// A completed task is taken from its own line (with what its event reported) or,
    /// in a ledger written before those lines, from its call's `tool` line; both lines
    /// of one task are one task; a failed one is not taken.
    #[test]
    fn a_lead_task_is_read_back_once_from_either_line_and_only_completed() {
        let dir = tempfile::tempdir().unwrap();
        let st = dir.path().join("st");
        let entries = [
            task("c1", "completed"),
            tool("c1"),
            task("c2", "failed"),
            tool("c3"),
            task("c4", "completed"),
        ];
        std::fs::create_dir(&st).unwrap();
        let w = Writer::open(&st.join("ledger.jsonl"), 0, Some(&purpose())).unwrap();
        let tickets: Vec<Ticket> = entries.iter().map(|e| w.append(e).unwrap()).collect();
        tickets.iter().for_each(Ticket::wait);
        drop(w);
        let state = StateDir::open(&st, &purpose(), false).unwrap();
        let tasks = state.take_lead().tasks;
        let ids: Vec<&str> = tasks.iter().map(|t| t.ran_as.as_str()).collect();
        assert_eq!(ids, ["c1", "c3", "c4"]);
        assert_eq!((tasks[0].turns, tasks[0].usage.total_tokens), (2, 4));
        assert_eq!(tasks[0].asked.result, "c1 said so");
        assert_eq!((tasks[1].turns, tasks[1].duration_ms), (0, 0));
    }
}
