//! `DIR/ledger.jsonl`: one JSON line per finished item or task and per model response (the
//! lead's and every sub-agent's), appended and flushed to disk (fsync) before the event
//! that reports it. Read back whole at the start: a torn last line (the process died
//! mid-write) is cut off, a corrupt line before it is an error naming the line.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::header::{Header, Purpose, VERSION};
use crate::usage::UsageTotals;

/// One line after the header.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    /// An `--each` item ended.
    Item(ItemEnd),
    /// A lead model response, as a cassette scripts it.
    Response {
        turn: usize,
        response: serde_json::Value,
    },
    /// A sub-agent's model response (a `task`'s, or an `--each` item's), as a cassette
    /// scripts it, with the task it belongs to: `task_id` is the lead's call id, or
    /// `item-<index>`, and `description` the task's (`item <index>`).
    TaskResponse {
        task_id: String,
        description: String,
        turn: usize,
        response: serde_json::Value,
    },
    /// A lead tool call's result, as fed back to the model.
    Tool(ToolEnd),
    /// A lead's task ended: written before its terminal event, where the `tool` line of
    /// its call comes only once the call returns to the lead (an earlier deerflow wrote
    /// only that one).
    Task(TaskEnded),
}

/// A lead tool call's result (contract §15: the ledger of a run without `--each`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolEnd {
    pub call_id: String,
    pub name: String,
    pub ok: bool,
    pub output: String,
    /// For a `task` call that completed: what it was asked, so a resumed run that asks the
    /// same gets the result without running it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskAsked>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskAsked {
    pub description: String,
    pub prompt: String,
    pub subagent_type: String,
    /// The task's result (the text after `Task Succeeded. Result: `).
    pub result: String,
}

/// How a lead's task ended, with what it was asked and what its terminal event reported:
/// a resumed run that asks the same of a completed one takes it without running it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskEnded {
    /// The lead's call id.
    pub task_id: String,
    pub description: String,
    pub prompt: String,
    pub subagent_type: String,
    pub status: String,
    /// The result, or the error.
    pub text: String,
    pub usage: UsageTotals,
    pub turns: u32,
    pub duration_ms: u64,
}

/// How an item ended, with what its terminal event reported.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ItemEnd {
    pub index: u64,
    /// The fingerprint of the item's rendered prompt.
    pub content: String,
    pub status: String,
    /// The result, or the error.
    pub text: String,
    pub usage: UsageTotals,
    pub turns: u32,
    pub duration_ms: u64,
}

/// What was read back: the header (none for a new ledger) and the lines after it.
pub struct ReadBack {
    pub header: Option<Header>,
    pub entries: Vec<Entry>,
    /// Where the last whole line ends: a torn line after it is cut off before appending.
    pub whole_len: u64,
}

/// Reads `path` (absent: a new ledger). `Err` names a corrupt line that is not the last.
pub fn read(path: &Path) -> Result<ReadBack, String> {
    read_keeping(path, true)
}

/// [`read`], the sub-agents' responses only checked, not kept, unless `task_responses`:
/// a resume does not use them, and they are half the lines of an `--each` ledger.
pub fn read_keeping(path: &Path, task_responses: bool) -> Result<ReadBack, String> {
    let mut back = ReadBack {
        header: None,
        entries: Vec::new(),
        whole_len: 0,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(back),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    if !file.metadata().map(|m| m.is_file()).unwrap_or(false) {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut line = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    let mut number = 0usize;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        // A bad line is only known to be corrupt (rather than torn) once another follows.
        if let Some((at, why)) = pending.take() {
            return Err(corrupt(path, at, &why));
        }
        number += 1;
        let whole = line.ends_with(b"\n");
        match parse(&line, number == 1, task_responses) {
            Ok(Parsed::Header(h)) => back.header = Some(h),
            Ok(Parsed::Skipped) => {}
            Ok(Parsed::Entry(e)) if whole => back.entries.push(e),
            Ok(Parsed::Entry(_)) => {}
            // A whole first line that is no header: the file is not a ledger deerflow
            // wrote (a torn header has no newline), and starting over would destroy it.
            Err(why) if number == 1 && whole => {
                return Err(format!(
                    "{} is not a deerflow ledger: its first line is no ledger header ({why}); \
                     give another directory, or remove the file",
                    path.display()
                ));
            }
            Err(why) => {
                pending = Some((number, why));
                continue;
            }
        }
        if whole {
            back.whole_len += n as u64;
        } else if number == 1 {
            back.header = None;
        }
    }
    Ok(back)
}

fn corrupt(path: &Path, line: usize, why: &str) -> String {
    format!(
        "{} line {line} is corrupt ({why}); it is not the last line, so it is not a torn \
         write: repair or remove the ledger",
        path.display()
    )
}

enum Parsed {
    Header(Header),
    Entry(Entry),
    /// A sub-agent's response, checked and left out.
    Skipped,
}

/// How a sub-agent's response line starts (serde writes the tag first).
const TASK_RESPONSE: &[u8] = br#"{"kind":"task_response","#;

fn parse(line: &[u8], first: bool, task_responses: bool) -> Result<Parsed, String> {
    if first {
        let h: Header = serde_json::from_slice(line).map_err(|e| e.to_string())?;
        if h.deerflow_ledger != VERSION {
            return Err(format!(
                "ledger version {}, not {VERSION}",
                h.deerflow_ledger
            ));
        }
        return Ok(Parsed::Header(h));
    }
    if !task_responses && line.starts_with(TASK_RESPONSE) {
        return serde_json::from_slice::<serde::de::IgnoredAny>(line)
            .map(|_| Parsed::Skipped)
            .map_err(|e| e.to_string());
    }
    serde_json::from_slice(line)
        .map(Parsed::Entry)
        .map_err(|e| e.to_string())
}

/// The open ledger, appended to by group commit: lines are queued as they come, and a
/// thread of its own writes everything queued while the previous fsync ran with one write
/// and one fsync, then tells every waiter of those lines at once. So concurrent items
/// share an fsync instead of taking one each, and the run's thread never waits for the
/// disk: a line's waiter (its event's gate, or an `await`) does.
pub struct Writer {
    shared: Arc<Shared>,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the writing thread when lines are queued.
    work: Condvar,
    /// Wakes threads waiting for a line (the event writer at a gate).
    done: Condvar,
    /// Wakes tasks waiting for a line.
    notify: tokio::sync::Notify,
}

#[derive(Default)]
struct Queue {
    lines: Vec<u8>,
    /// The number of lines queued so far; a line's ticket is its number.
    queued: u64,
    /// Lines up to this number are on disk.
    durable: u64,
    /// The first write error: nothing is written after it (a line cut short by it must
    /// stay the last), and every line not yet on disk fails with it.
    failed: Option<String>,
    closed: bool,
    /// Writes (each with its fsync) so far.
    rounds: u64,
}

/// A line's place in the ledger: wait on it to know the line is on disk.
#[derive(Clone)]
pub struct Ticket {
    shared: Arc<Shared>,
    line: u64,
}

impl Writer {
    /// Opens `path` for appending, its torn tail cut at `whole_len`, and writes the header
    /// when the ledger is new.
    pub fn open(path: &Path, whole_len: u64, new: Option<&Purpose>) -> Result<Self, String> {
        let why = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(why)?;
        file.set_len(whole_len).map_err(why)?;
        if let Some(p) = new {
            let header = Header {
                deerflow_ledger: VERSION,
                written_for: p.clone(),
            };
            let mut line = serde_json::to_vec(&header).map_err(|e| e.to_string())?;
            line.push(b'\n');
            file.write_all(&line)
                .and_then(|()| file.sync_data())
                .map_err(why)?;
        }
        Self::from_file(file).map_err(why)
    }

    /// Starts the writing thread over `file`.
    pub fn from_file(file: File) -> std::io::Result<Self> {
        let w = Self::idle();
        w.start(file)?;
        Ok(w)
    }

    /// A writer whose lines wait until [`start`](Self::start).
    fn idle() -> Self {
        Self {
            shared: Arc::new(Shared {
                queue: Mutex::default(),
                work: Condvar::new(),
                done: Condvar::new(),
                notify: tokio::sync::Notify::new(),
            }),
        }
    }

    fn start(&self, file: File) -> std::io::Result<()> {
        let s = self.shared.clone();
        std::thread::Builder::new()
            .name("deerflow-ledger".into())
            .spawn(move || write_lines(&s, file))?;
        Ok(())
    }

    /// Queues one line; its ticket says when it is on disk. `Err` once a write failed.
    pub fn append(&self, value: &impl Serialize) -> Result<Ticket, String> {
        let mut line = serde_json::to_vec(value).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let mut g = self.shared.lock();
        if let Some(f) = &g.failed {
            return Err(f.clone());
        }
        g.lines.extend_from_slice(&line);
        g.queued += 1;
        let ticket = Ticket {
            shared: self.shared.clone(),
            line: g.queued,
        };
        drop(g);
        self.shared.work.notify_one();
        Ok(ticket)
    }

    /// The first write error, if one happened.
    pub fn failure(&self) -> Option<String> {
        self.shared.lock().failed.clone()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_one();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether line `line` is on disk (`Ok`) or never will be (`Err`); `None`: not yet.
    fn outcome(&self, line: u64) -> Option<Result<(), String>> {
        let g = self.lock();
        if g.durable >= line {
            return Some(Ok(()));
        }
        g.failed.clone().map(Err)
    }
}

/// The writing thread: takes every line queued, writes them at once, fsyncs once, and
/// wakes their waiters; until the writer is dropped and nothing is left, or a write fails.
fn write_lines(shared: &Shared, mut file: File) {
    let mut batch = Vec::new();
    loop {
        let upto = {
            let mut g = shared.lock();
            while g.lines.is_empty() && !g.closed {
                g = shared.work.wait(g).unwrap_or_else(|p| p.into_inner());
            }
            if g.lines.is_empty() {
                return;
            }
            std::mem::swap(&mut g.lines, &mut batch);
            g.queued
        };
        let written = file.write_all(&batch).and_then(|()| file.sync_data());
        batch.clear();
        // A burst's buffer is not kept for the rest of the run.
        batch.shrink_to(1 << 20);
        let failed = {
            let mut g = shared.lock();
            g.rounds += 1;
            match written {
                Ok(()) => g.durable = upto,
                Err(e) => g.failed = Some(format!("cannot write the ledger: {e}")),
            }
            g.failed.is_some()
        };
        shared.done.notify_all();
        shared.notify.notify_waiters();
        if failed {
            return;
        }
    }
}

impl Ticket {
    /// Waits until the line is on disk; `Err` when a write failed first.
    pub async fn on_disk(&self) -> Result<(), String> {
        loop {
            let notified = self.shared.notify.notified();
            tokio::pin!(notified);
            // Registered before looking, so a wake-up in between is not lost.
            notified.as_mut().enable();
            if let Some(r) = self.shared.outcome(self.line) {
                return r;
            }
            notified.await;
        }
    }

    /// Blocks the calling thread until the line is on disk or a write failed (never on
    /// the runtime's thread: the event writer's, at an event's gate).
    pub fn wait(&self) {
        let mut g = self.shared.lock();
        while g.durable < self.line && g.failed.is_none() {
            g = self.shared.done.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn purpose() -> Purpose {
        Purpose {
            prompt: "p".into(),
            each: true,
            agent: None,
            model: "m".into(),
            output_schema: None,
            images: vec![],
            shard: None,
        }
    }

    fn item(index: u64) -> Entry {
        Entry::Item(ItemEnd {
            index,
            content: "c".into(),
            status: "completed".into(),
            text: "ok".into(),
            usage: UsageTotals::default(),
            turns: 1,
            duration_ms: 2,
        })
    }

    #[test]
    fn lines_written_are_read_back_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        let w = Writer::open(&path, 0, Some(&purpose())).unwrap();
        w.append(&item(0)).unwrap();
        w.append(&item(1)).unwrap().wait();
        drop(w);
        let whole = std::fs::metadata(&path).unwrap().len();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"kind":"item","index":2,"con"#).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back.header.unwrap().written_for, purpose());
        assert_eq!(back.entries.len(), 2);
        assert_eq!(back.whole_len, whole);
        let w = Writer::open(&path, back.whole_len, None).unwrap();
        w.append(&item(2)).unwrap().wait();
        assert_eq!(read(&path).unwrap().entries.len(), 3);
    }

    #[test]
    fn a_corrupt_line_before_the_last_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        let w = Writer::open(&path, 0, Some(&purpose())).unwrap();
        w.append(&item(0)).unwrap().wait();
        drop(w);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"garbage\n").unwrap();
        // Last: a torn write, ignored.
        assert_eq!(read(&path).unwrap().entries.len(), 1);
        f.write_all(b"{\"kind\":\"item\"}\n").unwrap();
        let e = read(&path).err().unwrap();
        assert!(e.contains("line 3 is corrupt"), "{e}");
    }

    #[test]
    fn a_file_whose_whole_first_line_is_no_header_is_not_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        std::fs::write(&path, b"{\"foo\": 1}\n").unwrap();
        let e = read(&path).err().unwrap();
        assert!(e.contains("is not a deerflow ledger"), "{e}");
    }

    #[test]
    fn a_torn_header_is_a_new_ledger_and_a_write_error_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        std::fs::write(&path, b"{\"deerflow_led").unwrap();
        let back = read(&path).unwrap();
        assert!(back.header.is_none());
        assert_eq!(back.whole_len, 0);
        let read_only = File::open(&path).unwrap();
        let w = Writer::from_file(read_only).unwrap();
        // The first line is queued before any write; the others, before or after the
        // failure is known.
        let tickets: Vec<Ticket> = (0..3).filter_map(|i| w.append(&item(i)).ok()).collect();
        assert!(!tickets.is_empty());
        // Every waiter is let go, none told the line is on disk.
        for t in &tickets {
            t.wait();
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let last = tickets.last().unwrap();
        let e = rt.block_on(last.on_disk()).unwrap_err();
        assert!(e.contains("cannot write the ledger"), "{e}");
        assert_eq!(w.failure(), Some(e.clone()));
        assert_eq!(w.append(&item(3)).err(), Some(e));
    }

    /// Lines queued while the writer is busy share its next write and fsync: a thousand
    /// lines queued before it looks take one, and each waiter learns its line is on disk.
    #[tokio::test]
    async fn lines_queued_meanwhile_share_one_fsync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        drop(Writer::open(&path, 0, Some(&purpose())).unwrap());
        let w = Writer::idle();
        let tickets: Vec<Ticket> = (0..1000).map(|i| w.append(&item(i)).unwrap()).collect();
        let file = OpenOptions::new().append(true).open(&path).unwrap();
        w.start(file).unwrap();
        let waits = tickets.iter().map(|t| t.on_disk());
        for r in futures_util::future::join_all(waits).await {
            r.unwrap();
        }
        assert_eq!(w.shared.lock().rounds, 1);
        assert_eq!(read(&path).unwrap().entries.len(), 1000);
        // Later lines go on: each waiter is told once its own round is done.
        let more: Vec<Ticket> = (0..10).map(|i| w.append(&item(i)).unwrap()).collect();
        more.last().unwrap().on_disk().await.unwrap();
        assert!(more
            .iter()
            .all(|t| t.shared.outcome(t.line) == Some(Ok(()))));
        assert_eq!(read(&path).unwrap().entries.len(), 1010);
    }

    /// A resume without `--record` only checks the sub-agents' responses: left out, yet a
    /// corrupt one before the last line is still an error.
    #[test]
    fn task_responses_are_read_only_when_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        let w = Writer::open(&path, 0, Some(&purpose())).unwrap();
        let response = Entry::TaskResponse {
            task_id: "item-0".into(),
            description: "item 0".into(),
            turn: 0,
            response: serde_json::json!({"text": "ok"}),
        };
        w.append(&response).unwrap();
        w.append(&item(0)).unwrap().wait();
        drop(w);
        assert_eq!(read_keeping(&path, true).unwrap().entries.len(), 2);
        let back = read_keeping(&path, false).unwrap();
        assert!(matches!(back.entries[..], [Entry::Item(_)]));
        assert_eq!(back.whole_len, std::fs::metadata(&path).unwrap().len());
        let text = std::fs::read_to_string(&path).unwrap();
        let cut = text.replace(r#"{"text":"ok"}"#, r#"{"text":"ok""#);
        std::fs::write(&path, cut).unwrap();
        let e = read_keeping(&path, false).err().unwrap();
        assert!(e.contains("line 2 is corrupt"), "{e}");
    }
}
