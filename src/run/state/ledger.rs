//! `DIR/ledger.jsonl`: one JSON line per finished item or task and per model response,
//! appended and flushed to disk (fsync) before the event that reports it. Read back whole at
//! the start: a torn last line (the process died mid-write) is cut off, a corrupt line
//! before it is an error naming the line.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::Mutex;

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
    /// A lead tool call's result, as fed back to the model.
    Tool(ToolEnd),
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
        match parse(&line, number == 1) {
            Ok(Parsed::Header(h)) => back.header = Some(h),
            Ok(Parsed::Entry(e)) if whole => back.entries.push(e),
            Ok(Parsed::Entry(_)) => {}
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
}

fn parse(line: &[u8], first: bool) -> Result<Parsed, String> {
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
    serde_json::from_slice(line)
        .map(Parsed::Entry)
        .map_err(|e| e.to_string())
}

/// The open ledger, appended to.
pub struct Writer {
    file: Mutex<File>,
}

impl Writer {
    /// Opens `path` for appending, its torn tail cut at `whole_len`, and writes the header
    /// when the ledger is new.
    pub fn open(path: &Path, whole_len: u64, new: Option<&Purpose>) -> Result<Self, String> {
        let why = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(why)?;
        file.set_len(whole_len).map_err(why)?;
        let w = Self::from_file(file);
        if let Some(p) = new {
            let header = Header {
                deerflow_ledger: VERSION,
                written_for: p.clone(),
            };
            w.append(&header)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(w)
    }

    pub fn from_file(file: File) -> Self {
        Self {
            file: Mutex::new(file),
        }
    }

    /// Appends one line and waits until it is on disk.
    pub fn append(&self, value: &impl Serialize) -> Result<(), String> {
        let mut line = serde_json::to_vec(value).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
        f.write_all(&line)
            .and_then(|()| f.sync_data())
            .map_err(|e| format!("cannot write the ledger: {e}"))
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
        w.append(&item(1)).unwrap();
        drop(w);
        let whole = std::fs::metadata(&path).unwrap().len();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"kind":"item","index":2,"con"#).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back.header.unwrap().written_for, purpose());
        assert_eq!(back.entries.len(), 2);
        assert_eq!(back.whole_len, whole);
        let w = Writer::open(&path, back.whole_len, None).unwrap();
        w.append(&item(2)).unwrap();
        assert_eq!(read(&path).unwrap().entries.len(), 3);
    }

    #[test]
    fn a_corrupt_line_before_the_last_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        let w = Writer::open(&path, 0, Some(&purpose())).unwrap();
        w.append(&item(0)).unwrap();
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
    fn a_torn_header_is_a_new_ledger_and_a_write_error_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        std::fs::write(&path, b"{\"deerflow_led").unwrap();
        let back = read(&path).unwrap();
        assert!(back.header.is_none());
        assert_eq!(back.whole_len, 0);
        let read_only = File::open(&path).unwrap();
        let e = Writer::from_file(read_only).append(&item(0)).err().unwrap();
        assert!(e.contains("cannot write the ledger"), "{e}");
    }
}
