//! `--results FILE` (contract §15): one JSON line per started item, appended as items end,
//! by a thread of its own (a FIFO's reader may be slow). Lines reach it in batches
//! (`queue.rs`): each is serialized into a shared buffer as its item ends, and the writer,
//! woken once per batch, writes a batch with one `write`. A regular file is rewritten in
//! input order at the end, atomically, in memory that does not grow with the item count: as
//! each line is appended, its offset and length go into a temporary index file at the
//! item's rank, so the rewrite walks the index file in order and copies each line from
//! where it is. A FIFO, `/dev/stdout` and the like are written through in completion order
//! (§12).

mod queue;
mod rewrite;

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use super::items::Shard;
use crate::run::output_file::{self, Target};
use crate::usage::UsageTotals;
use queue::{Batch, Queue};
use rewrite::{in_input_order, ENTRY};

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
    /// Appends the line and its newline to `out`.
    fn write_to(&self, out: &mut Vec<u8>) {
        let start = out.len();
        // Plain fields and a parsed JSON value always serialize; should one not, no half
        // line is left behind.
        if serde_json::to_writer(&mut *out, self).is_err() {
            out.truncate(start);
        }
        out.push(b'\n');
    }
}

/// Called when the writer hits an error: whether it was a closed pipe, and the words.
pub type OnError = Arc<dyn Fn(bool, &str) + Send + Sync>;

pub struct ResultsFile {
    path: PathBuf,
    queue: Arc<Queue>,
    thread: Mutex<Option<JoinHandle<Ended>>>,
    /// Told by the writer thread as it ends.
    done: Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
    /// The writer's first error (read after every item: no lock).
    failure: Arc<OnceLock<String>>,
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
                let out = File::options()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(real)
                    .map_err(|e| words(path, &e.to_string()))?;
                let index = tempfile::tempfile().map_err(|e| words(path, &e.to_string()))?;
                Sink::Regular {
                    real: real.clone(),
                    out,
                    pos: 0,
                    index,
                    entries: Vec::new(),
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
        let queue = Arc::new(Queue::default());
        let failure: Arc<OnceLock<String>> = Arc::default();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("deerflow-results".into())
            .spawn({
                let failure = failure.clone();
                let queue = queue.clone();
                let path = path.to_path_buf();
                move || {
                    let _told = Told(&queue, Some(done_tx));
                    write_all(&queue, sink, &path, &failure, on_error.as_ref())
                }
            })
            .map_err(|e| words(path, &e.to_string()))?;
        Ok(Self {
            path: path.to_path_buf(),
            queue,
            thread: Mutex::new(Some(thread)),
            done: Mutex::new(Some(done_rx)),
            failure,
            give_up,
        })
    }

    /// Queues an item's line. Waits while the queue is full (a slow reader holds the run
    /// back, as a slow reader of the events does), unless the run is being torn down.
    pub fn send(&self, line: &ResultLine<'_>) {
        self.queue
            .push(line.index, |out| line.write_to(out), self.give_up.as_ref());
    }

    /// The writer's first error, in words.
    pub fn failure(&self) -> Option<String> {
        self.failure.get().cloned()
    }

    /// Waits for the writer (checking `give_up` every 20 ms), then puts a regular file in
    /// input order. `Err` says why the file is not whole.
    pub async fn finish(&self, give_up: impl Fn() -> bool) -> Result<(), String> {
        self.queue.close();
        let Some(thread) = lock(&self.thread).take() else {
            return Ok(());
        };
        let done = lock(&self.done).take();
        if let Some(mut done) = done {
            loop {
                tokio::select! {
                    _ = &mut done => break,
                    _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                }
                if give_up() {
                    return Err(format!(
                        "the results to {} were not all written: its reader does not read",
                        self.path.display()
                    ));
                }
            }
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

/// Ends the writer's side however its thread ends (a panic too): senders stop waiting for
/// it and `finish` stops waiting for the thread.
struct Told<'a>(&'a Queue, Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for Told<'_> {
    fn drop(&mut self) {
        self.0.writer_gone();
        if let Some(tx) = self.1.take() {
            let _ = tx.send(());
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
        out: File,
        pos: u64,
        index: File,
        /// Index entries of consecutive ranks, written with one `pwrite`.
        entries: Vec<u8>,
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
    fn write(&mut self, b: &Batch) -> std::io::Result<()> {
        match self {
            Sink::Regular {
                out,
                pos,
                index,
                entries,
                shard,
                last,
                in_order,
                ..
            } => {
                out.write_all(&b.bytes)?;
                // The entries of a run of consecutive ranks, most of a batch, go together.
                let mut first = 0;
                let mut next = None;
                entries.clear();
                for &(i, len) in &b.lines {
                    let rank = shard.rank(i);
                    if next != Some(rank) && !entries.is_empty() {
                        index.write_all_at(entries, first * ENTRY)?;
                        entries.clear();
                    }
                    if entries.is_empty() {
                        first = rank;
                    }
                    entries.extend_from_slice(&(*pos + 1).to_le_bytes());
                    entries.extend_from_slice(&(len as u64).to_le_bytes());
                    next = Some(rank + 1);
                    *pos += len as u64;
                    *in_order &= last.is_none_or(|l| l < i);
                    *last = Some(i);
                }
                if !entries.is_empty() {
                    index.write_all_at(entries, first * ENTRY)?;
                }
                Ok(())
            }
            Sink::Through { path, out } => {
                if out.is_none() {
                    *out = Some(output_file::open_through(path)?);
                }
                match out {
                    Some(f) => f.write_all(&b.bytes),
                    None => Ok(()),
                }
            }
        }
    }
}

/// The writer thread: each batch as it comes, with one `write`, so a reader of the file
/// sees each line soon after its item ended.
fn write_all(
    queue: &Queue,
    mut sink: Sink,
    path: &Path,
    failure: &OnceLock<String>,
    on_error: &(dyn Fn(bool, &str) + Send + Sync),
) -> Ended {
    let mut failed = false;
    let fail = |e: std::io::Error| {
        let why = words(path, &e.to_string());
        let _ = failure.set(why.clone());
        on_error(e.kind() == std::io::ErrorKind::BrokenPipe, &why);
    };
    let mut batch = Batch::default();
    while queue.take(&mut batch) {
        if !failed {
            if let Err(e) = sink.write(&batch) {
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
        } if !failed => Ended {
            replace: Some((real, out, index, in_order)),
        },
        _ => Ended { replace: None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(r: &ResultsFile, index: u64) {
        r.send(&ResultLine {
            index,
            status: "completed",
            result: Some("ok"),
            final_output: None,
            error: None,
            usage: UsageTotals::default(),
            duration_ms: 1,
            resumed: false,
        });
    }

    fn indexes(text: &str) -> Vec<u64> {
        text.lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["index"]
                    .as_u64()
                    .unwrap()
            })
            .collect()
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
            send(&r, i);
        }
        // Give the writer a moment: the lines are there in the order they ended.
        for _ in 0..100 {
            if std::fs::read_to_string(&p).unwrap().lines().count() == 4 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let during = std::fs::read_to_string(&p).unwrap();
        assert_eq!(indexes(&during), [7, 1, 13, 4]);
        r.finish(|| false).await.unwrap();
        let after = std::fs::read_to_string(&p).unwrap();
        assert_eq!(indexes(&after), [1, 4, 7, 13]);
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
            send(&r, i);
        }
        r.finish(|| false).await.unwrap();
        assert_eq!(indexes(&reader.join().unwrap()), [2, 0, 1]);
    }

    #[tokio::test]
    async fn a_fifo_reader_gets_each_line_while_the_run_goes_on() {
        use std::io::BufRead;
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut lines = std::io::BufReader::new(File::open(fifo).unwrap()).lines();
                while let Some(Ok(l)) = lines.next() {
                    tx.send(l).unwrap();
                }
            })
        };
        let r = open(&fifo, Shard::WHOLE);
        for i in [3, 1] {
            send(&r, i);
            // Nothing else ends, and the file stays open: the line still goes out.
            let l = rx.recv_timeout(Duration::from_secs(5)).unwrap();
            assert_eq!(indexes(&l), [i]);
        }
        r.finish(|| false).await.unwrap();
        reader.join().unwrap();
    }

    #[tokio::test]
    async fn many_lines_end_sorted() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.jsonl");
        let r = open(&p, Shard::WHOLE);
        let mut order: Vec<u64> = (0..5000).collect();
        fastrand::shuffle(&mut order);
        for &i in &order[..4000] {
            send(&r, i);
        }
        r.finish(|| false).await.unwrap();
        let got = indexes(&std::fs::read_to_string(&p).unwrap());
        let mut want = order[..4000].to_vec();
        want.sort();
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn runs_of_consecutive_ranks_and_gaps_end_in_input_order() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.jsonl");
        // Shard 2/3: indexes 1, 4, 7, … are ranks 0, 1, 2, …
        let r = open(&p, Shard { k: 2, n: 3 });
        let mut sent = Vec::new();
        for rank in (0..3000u64).filter(|r| r % 97 != 5) {
            sent.push(rank * 3 + 1);
        }
        // Mostly in order, as a run's items end, with a few held back and a gap or two.
        sent.swap(10, 500);
        sent.swap(1200, 1201);
        let (early, late) = sent.split_at(2000);
        for &i in early {
            send(&r, i);
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        for &i in late {
            send(&r, i);
        }
        r.finish(|| false).await.unwrap();
        sent.sort();
        assert_eq!(indexes(&std::fs::read_to_string(&p).unwrap()), sent);
    }
}
