//! The hand-over from the run's thread to the results writer. Each line is serialized
//! straight into one shared buffer (no allocation per line, nothing freed on the other
//! thread), and the writer is woken only when it sleeps with nothing to do: once woken it
//! gathers what else ends within [`GATHER`] and writes it all at once. A line per item each
//! waking the writer thread cost the run a quarter of its time at 100,000 items (two
//! threads taking turns on a lock and the CPU for every item); now it is one wake-up per
//! batch, and a reader of the file still sees each line within [`GATHER`] of its item's end.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long the writer, woken by a first line, waits for more before writing.
pub const GATHER: Duration = Duration::from_millis(10);
/// Lines or bytes waiting that make the writer write at once.
const WAKE_LINES: usize = 4096;
const WAKE_BYTES: usize = 1 << 20;
/// Bytes waiting above which an ending item waits for the writer (a slow reader holds the
/// run back instead of growing memory).
const FULL_BYTES: usize = 8 << 20;
/// A buffer grown past this by a huge line is given back once written.
const KEEP_BYTES: usize = 2 * FULL_BYTES;
/// How often a waiting sender looks again at whether the run must stop.
const RECHECK: Duration = Duration::from_millis(20);

/// Lines taken by the writer: their bytes back to back, and each one's item index and length.
#[derive(Default)]
pub struct Batch {
    pub bytes: Vec<u8>,
    pub lines: Vec<(u64, usize)>,
}

/// What the writer is waiting for, which decides whether a new line wakes it.
#[derive(Clone, Copy, PartialEq)]
enum Waiting {
    /// Busy writing, or not started: it looks at the queue before it sleeps again.
    No,
    /// Asleep with an empty queue: the next line wakes it.
    First,
    /// Gathering: only a full batch wakes it before its time is up.
    More,
}

struct State {
    queued: Batch,
    closed: bool,
    /// The writer thread ended: nothing waits for it any more.
    writer_gone: bool,
    waiting: Waiting,
    senders_waiting: usize,
}

pub struct Queue {
    state: Mutex<State>,
    readable: Condvar,
    writable: Condvar,
}

impl Default for Queue {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                queued: Batch::default(),
                closed: false,
                writer_gone: false,
                waiting: Waiting::No,
                senders_waiting: 0,
            }),
            readable: Condvar::new(),
            writable: Condvar::new(),
        }
    }
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wake_writer(&self, s: &mut State) {
        if s.waiting != Waiting::No {
            s.waiting = Waiting::No;
            self.readable.notify_one();
        }
    }

    /// Queues the line `write` appends for item `index`. Waits while the queue is full,
    /// unless `give_up` says the run is being torn down (the line is then dropped).
    pub fn push(&self, index: u64, write: impl FnOnce(&mut Vec<u8>), give_up: &dyn Fn() -> bool) {
        let mut s = self.lock();
        while s.queued.bytes.len() >= FULL_BYTES && !s.writer_gone {
            self.wake_writer(&mut s);
            if give_up() {
                return;
            }
            s.senders_waiting += 1;
            s = self
                .writable
                .wait_timeout(s, RECHECK)
                .map(|(s, _)| s)
                .unwrap_or_else(|p| p.into_inner().0);
            s.senders_waiting -= 1;
        }
        if s.writer_gone {
            return;
        }
        let start = s.queued.bytes.len();
        write(&mut s.queued.bytes);
        let len = s.queued.bytes.len() - start;
        s.queued.lines.push((index, len));
        let full = s.queued.lines.len() >= WAKE_LINES || s.queued.bytes.len() >= WAKE_BYTES;
        if s.waiting == Waiting::First || full {
            self.wake_writer(&mut s);
        }
    }

    /// No more lines: the writer takes what is left without gathering, then ends.
    pub fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        s.waiting = Waiting::No;
        self.readable.notify_one();
    }

    /// The writer's end: senders stop waiting for it.
    pub fn writer_gone(&self) {
        let mut s = self.lock();
        s.writer_gone = true;
        self.writable.notify_all();
    }

    /// Waits for lines and moves them into `out` (emptied first, its buffers reused);
    /// false once the queue is closed and empty.
    pub fn take(&self, out: &mut Batch) -> bool {
        let mut s = self.lock();
        while s.queued.lines.is_empty() {
            if s.closed {
                return false;
            }
            s.waiting = Waiting::First;
            s = self.readable.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        let until = Instant::now() + GATHER;
        while !s.closed && s.queued.lines.len() < WAKE_LINES && s.queued.bytes.len() < WAKE_BYTES {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s.waiting = Waiting::More;
            s = self
                .readable
                .wait_timeout(s, left)
                .map(|(s, _)| s)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        s.waiting = Waiting::No;
        if out.bytes.capacity() > KEEP_BYTES {
            out.bytes = Vec::new();
        }
        out.bytes.clear();
        out.lines.clear();
        std::mem::swap(&mut s.queued, out);
        if s.senders_waiting > 0 {
            self.writable.notify_all();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn push(q: &Queue, i: u64) {
        q.push(
            i,
            |b| b.extend_from_slice(format!("{i}\n").as_bytes()),
            &|| false,
        );
    }

    #[test]
    fn lines_ending_close_together_go_in_one_batch() {
        let q = Arc::new(Queue::default());
        let writer = {
            let q = q.clone();
            std::thread::spawn(move || {
                let mut batches = Vec::new();
                let mut b = Batch::default();
                while q.take(&mut b) {
                    batches.push((String::from_utf8(b.bytes.clone()).unwrap(), b.lines.clone()));
                }
                batches
            })
        };
        // Items ending a millisecond apart: each used to wake the writer for its one line.
        for i in 0..200 {
            push(&q, i);
            std::thread::sleep(Duration::from_millis(1));
        }
        q.close();
        let batches = writer.join().unwrap();
        let all: String = batches.iter().map(|(t, _)| t.as_str()).collect();
        let want: String = (0..200).map(|i| format!("{i}\n")).collect();
        assert_eq!(all, want);
        let lines: Vec<(u64, usize)> = batches.iter().flat_map(|(_, l)| l.clone()).collect();
        assert_eq!(lines.len(), 200);
        assert!(lines.iter().all(|&(i, len)| len == format!("{i}\n").len()));
        // 200 ms of lines in batches gathered over 10 ms: about 20, far from 200.
        assert!(batches.len() <= 100, "{} batches", batches.len());
    }

    #[test]
    fn a_lone_line_is_taken_within_the_gathering_time() {
        let q = Arc::new(Queue::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = {
            let q = q.clone();
            std::thread::spawn(move || {
                let mut b = Batch::default();
                while q.take(&mut b) {
                    tx.send(Instant::now()).unwrap();
                }
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        let sent = Instant::now();
        push(&q, 0);
        // The queue stays open: the line does not wait for more, nor for the end.
        let taken = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(taken.duration_since(sent) < Duration::from_secs(1));
        q.close();
        writer.join().unwrap();
    }

    #[test]
    fn a_full_queue_holds_the_sender_until_the_writer_takes_it_or_the_run_gives_up() {
        let q = Queue::default();
        let big = vec![b'x'; FULL_BYTES];
        q.push(0, |b| b.extend_from_slice(&big), &|| false);
        // No writer: the next line waits, and is dropped once the run gives up.
        let t = Instant::now();
        let tries = std::cell::Cell::new(0);
        q.push(1, |b| b.push(b'y'), &|| {
            tries.set(tries.get() + 1);
            tries.get() > 3
        });
        assert!(t.elapsed() >= RECHECK * 2);
        let mut b = Batch::default();
        q.close();
        assert!(q.take(&mut b));
        assert_eq!(b.lines, [(0, FULL_BYTES)]);
        // A gone writer never holds a sender.
        q.writer_gone();
        q.push(2, |b| b.extend_from_slice(&big), &|| false);
        q.push(3, |b| b.extend_from_slice(&big), &|| false);
    }
}
