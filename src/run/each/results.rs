//! `--results FILE` (contract §15): one JSON line per started item, appended as items end,
//! by a thread of its own (a FIFO's reader may be slow). A regular file is rewritten in input
//! order at the end, atomically, in memory that does not grow with the item count: as each
//! line is appended, its offset and length go into a temporary index file at the item's
//! rank, so the rewrite walks the index file in order and copies each line from where it
//! is. A FIFO, `/dev/stdout` and the like are written through in completion order (§12).

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use super::items::Shard;
use crate::run::output_file::{self, Target};
use crate::usage::UsageTotals;

/// Lines queued for the writer before an ending item waits for it.
const QUEUE: usize = 4096;
/// One index entry: offset + 1 (0: no line for this rank) and length, little-endian.
const ENTRY: u64 = 16;

/// One result line's fields, in the contract's order.
#[derive(Serialize)]
pub struct ResultLine<'a> {
    pub index: u64,
    pub status: &'static str,
    pub result: Option<&'a str>,
    pub final_output: Option<serde_json::Value>,
    pub error: Option<&'a str>,
    pub usage: UsageTotals,
    pub duration_ms: u64,
    pub resumed: bool,
}

impl ResultLine<'_> {
    pub fn to_bytes(&self) -> Vec<u8> {
        // Plain fields and a parsed JSON value always serialize.
        let mut v = serde_json::to_vec(self).unwrap_or_default();
        v.push(b'\n');
        v
    }
}

struct Msg {
    index: u64,
    line: Vec<u8>,
}

/// Called when the writer hits an error: whether it was a closed pipe, and the words.
pub type OnError = Arc<dyn Fn(bool, &str) + Send + Sync>;

pub struct ResultsFile {
    path: PathBuf,
    tx: Mutex<Option<SyncSender<Msg>>>,
    thread: Mutex<Option<JoinHandle<Ended>>>,
    failure: Arc<Mutex<Option<String>>>,
    /// Whether a full queue should stop waiting (the run is being torn down by a signal).
    give_up: Arc<dyn Fn() -> bool + Send + Sync>,
}

/// What the writer thread leaves for the end.
struct Ended {
    /// For a regular file: the file, the index and whether the lines came in input order.
    replace: Option<(PathBuf, File, File, bool)>,
}

impl ResultsFile {
    /// Truncates (or creates) a regular file now; anything else is opened by the writer
    /// (opening a FIFO waits for its reader).
    pub fn open(
        path: &Path,
        shard: Shard,
        on_error: OnError,
        give_up: Arc<dyn Fn() -> bool + Send + Sync>,
    ) -> Result<Self, String> {
        let target = output_file::classify(path).map_err(|e| words(path, &e))?;
        let sink = match &target {
            Target::Replace(real) => {
                // Read back by the rewrite at the end.
                let f = File::options()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(real)
                    .map_err(|e| words(path, &e.to_string()))?;
                let index = tempfile::tempfile().map_err(|e| words(path, &e.to_string()))?;
                Sink::Regular {
                    real: real.clone(),
                    out: BufWriter::with_capacity(64 * 1024, f),
                    pos: 0,
                    index,
                    shard,
                    last: None,
                    in_order: true,
                }
            }
            Target::WriteThrough(p) => Sink::Through {
                path: p.clone(),
                out: None,
            },
        };
        let (tx, rx) = sync_channel(QUEUE);
        let failure: Arc<Mutex<Option<String>>> = Arc::default();
        let thread = std::thread::Builder::new()
            .name("deerflow-results".into())
            .spawn({
                let failure = failure.clone();
                let path = path.to_path_buf();
                move || write_all(rx, sink, &path, &failure, on_error.as_ref())
            })
            .map_err(|e| words(path, &e.to_string()))?;
        Ok(Self {
            path: path.to_path_buf(),
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            failure,
            give_up,
        })
    }

    /// Queues one line. Waits while the queue is full (a slow reader holds the run back,
    /// as a slow reader of the events does), unless the run is being torn down.
    pub fn send(&self, index: u64, line: Vec<u8>) {
        let Some(tx) = lock(&self.tx).clone() else {
            return;
        };
        let mut msg = Msg { index, line };
        loop {
            match tx.try_send(msg) {
                Ok(()) => return,
                Err(TrySendError::Disconnected(_)) => return,
                Err(TrySendError::Full(m)) => {
                    if (self.give_up)() {
                        return;
                    }
                    msg = m;
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
    }

    /// The writer's first error, in words.
    pub fn failure(&self) -> Option<String> {
        lock(&self.failure).clone()
    }

    /// Waits for the writer (checking `give_up` every 20 ms), then puts a regular file in
    /// input order. `Err` says why the file is not whole.
    pub async fn finish(&self, give_up: impl Fn() -> bool) -> Result<(), String> {
        lock(&self.tx).take();
        let Some(thread) = lock(&self.thread).take() else {
            return Ok(());
        };
        while !thread.is_finished() {
            if give_up() {
                return Err(format!(
                    "the results to {} were not all written: its reader does not read",
                    self.path.display()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let ended = thread
            .join()
            .map_err(|_| "internal error: the results writer panicked".to_string())?;
        if let Some(e) = self.failure() {
            return Err(e);
        }
        match ended.replace {
            Some((real, file, index, false)) => {
                let path = self.path.clone();
                tokio::task::spawn_blocking(move || in_input_order(&real, &file, &index))
                    .await
                    .map_err(|_| "internal error: the results rewrite panicked".to_string())?
                    .map_err(|e| words(&path, &e.to_string()))
            }
            _ => Ok(()),
        }
    }
}

fn words(path: &Path, why: &str) -> String {
    format!("cannot write the results to {}: {why}", path.display())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

enum Sink {
    Regular {
        real: PathBuf,
        out: BufWriter<File>,
        pos: u64,
        index: File,
        shard: Shard,
        last: Option<u64>,
        in_order: bool,
    },
    Through {
        path: PathBuf,
        out: Option<File>,
    },
}

impl Sink {
    fn write(&mut self, m: &Msg) -> std::io::Result<()> {
        match self {
            Sink::Regular {
                out,
                pos,
                index,
                shard,
                last,
                in_order,
                ..
            } => {
                out.write_all(&m.line)?;
                let mut entry = [0u8; ENTRY as usize];
                entry[..8].copy_from_slice(&(*pos + 1).to_le_bytes());
                entry[8..].copy_from_slice(&(m.line.len() as u64).to_le_bytes());
                index.write_all_at(&entry, shard.rank(m.index) * ENTRY)?;
                *pos += m.line.len() as u64;
                *in_order &= last.is_none_or(|l| l < m.index);
                *last = Some(m.index);
                Ok(())
            }
            Sink::Through { path, out } => {
                if out.is_none() {
                    *out = Some(output_file::open_through(path)?);
                }
                match out {
                    Some(f) => f.write_all(&m.line),
                    None => Ok(()),
                }
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Regular { out, .. } => out.flush(),
            Sink::Through { out, .. } => out.as_mut().map_or(Ok(()), |f| f.flush()),
        }
    }
}

/// The writer thread: lines as they come, flushed whenever none is waiting, so a reader of
/// the file sees each line soon after its item ended.
fn write_all(
    rx: Receiver<Msg>,
    mut sink: Sink,
    path: &Path,
    failure: &Mutex<Option<String>>,
    on_error: &(dyn Fn(bool, &str) + Send + Sync),
) -> Ended {
    let mut failed = false;
    let fail = |e: std::io::Error| {
        let why = words(path, &e.to_string());
        *lock(failure) = Some(why.clone());
        on_error(e.kind() == std::io::ErrorKind::BrokenPipe, &why);
    };
    while let Ok(m) = rx.recv() {
        let mut next = Some(m);
        while let Some(m) = next.take() {
            if !failed {
                if let Err(e) = sink.write(&m) {
                    failed = true;
                    fail(e);
                }
            }
            next = rx.try_recv().ok();
        }
        if !failed {
            if let Err(e) = sink.flush() {
                failed = true;
                fail(e);
            }
        }
    }
    match sink {
        Sink::Regular {
            real,
            out,
            index,
            in_order,
            ..
        } if !failed => match out.into_inner() {
            Ok(file) => Ended {
                replace: Some((real, file, index, in_order)),
            },
            Err(e) => {
                fail(e.into_error());
                Ended { replace: None }
            }
        },
        _ => Ended { replace: None },
    }
}

/// Writes the lines of `file` in rank order beside it and renames the copy over it.
fn in_input_order(real: &Path, file: &File, index: &File) -> std::io::Result<()> {
    let dir = match real.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let perms = file.metadata()?.permissions();
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    {
        let mut out = BufWriter::with_capacity(64 * 1024, tmp.as_file_mut());
        let mut entries = BufReader::with_capacity(64 * 1024, index);
        let mut entry = [0u8; ENTRY as usize];
        let mut line = Vec::new();
        while read_entry(&mut entries, &mut entry)? {
            let at = u64::from_le_bytes(entry[..8].try_into().unwrap_or_default());
            let len = u64::from_le_bytes(entry[8..].try_into().unwrap_or_default());
            if at == 0 {
                continue;
            }
            line.resize(len as usize, 0);
            file.read_exact_at(&mut line, at - 1)?;
            out.write_all(&line)?;
        }
        out.flush()?;
    }
    tmp.as_file().set_permissions(perms)?;
    tmp.as_file().sync_all()?;
    tmp.persist(real).map_err(|e| e.error)?;
    Ok(())
}

/// Reads one whole entry; false at the end of the index.
fn read_entry(r: &mut impl Read, entry: &mut [u8; ENTRY as usize]) -> std::io::Result<bool> {
    match r.read_exact(entry) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(index: u64) -> Vec<u8> {
        format!("{{\"index\":{index}}}\n").into_bytes()
    }

    fn open(path: &Path, shard: Shard) -> ResultsFile {
        ResultsFile::open(path, shard, Arc::new(|_, _| {}), Arc::new(|| false)).unwrap()
    }

    #[tokio::test]
    async fn lines_come_in_completion_order_and_end_in_input_order() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.jsonl");
        std::fs::write(&p, "old content\n").unwrap();
        let shard = Shard { k: 1, n: 3 };
        let r = open(&p, shard);
        for i in [7, 1, 13, 4] {
            r.send(i, line(i));
        }
        // Give the writer a moment: the lines are there in the order they ended.
        for _ in 0..100 {
            if std::fs::read_to_string(&p).unwrap().lines().count() == 4 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let during = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            during,
            "{\"index\":7}\n{\"index\":1}\n{\"index\":13}\n{\"index\":4}\n"
        );
        r.finish(|| false).await.unwrap();
        let after = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            after,
            "{\"index\":1}\n{\"index\":4}\n{\"index\":7}\n{\"index\":13}\n"
        );
    }

    #[tokio::test]
    async fn a_fifo_is_written_through_in_completion_order() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        let r = open(&fifo, Shard::WHOLE);
        for i in [2, 0, 1] {
            r.send(i, line(i));
        }
        r.finish(|| false).await.unwrap();
        assert_eq!(
            reader.join().unwrap(),
            "{\"index\":2}\n{\"index\":0}\n{\"index\":1}\n"
        );
    }

    #[tokio::test]
    async fn many_lines_end_sorted() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.jsonl");
        let r = open(&p, Shard::WHOLE);
        let mut order: Vec<u64> = (0..5000).collect();
        fastrand::shuffle(&mut order);
        for &i in &order[..4000] {
            r.send(i, line(i));
        }
        r.finish(|| false).await.unwrap();
        let got: Vec<u64> = std::fs::read_to_string(&p)
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["index"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        let mut want = order[..4000].to_vec();
        want.sort();
        assert_eq!(got, want);
    }
}
