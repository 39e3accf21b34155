//! The bounded queue between the run and the writer thread. The writer takes everything
//! queued at once (one lock per batch, not per event) and is woken only when it sleeps;
//! an emitter that finds the queue full waits on a condition variable with a short
//! timeout, so it can give up when the run must stop (src/events/flow.rs).
//!
//! Inside a tokio runtime, waking the writer is left to a task of its own ([`Sender::nudge_later`]):
//! the events the runtime's other ready tasks emit meanwhile go in the same batch, and the
//! writer wakes once per turn of the runtime instead of once per event (a thread wake-up
//! per event was ~10 % of the CPU per model call, issue 13). Each line is still written as
//! soon as the runtime has run what was ready; `run_completed`, a queue filling up and the
//! last sender going wake the writer at once.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::flow::Flow;
use super::Envelope;

/// How often a waiting emitter looks again at whether the run must stop.
const RECHECK: Duration = Duration::from_millis(20);

/// Queued events that wake the writer at once, even with a nudge pending: a busy runtime
/// keeps the writer busy too.
const WAKE_AT: usize = 1024;

struct Inner {
    items: VecDeque<Envelope>,
    senders: usize,
    receiver_gone: bool,
    reader_waiting: bool,
    emitters_waiting: usize,
    /// A task wakes the writer once the runtime has run what was ready.
    nudger: bool,
}

struct Shared {
    inner: Mutex<Inner>,
    readable: Condvar,
    writable: Condvar,
    capacity: usize,
    nudge: tokio::sync::Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes the writer if it sleeps. It is marked awake here, so the events queued before it
    /// runs make no further wake-up calls.
    fn wake_reader(&self, g: &mut Inner) {
        if g.reader_waiting {
            g.reader_waiting = false;
            self.readable.notify_one();
        }
    }
}

pub struct Sender {
    shared: Arc<Shared>,
}

pub struct Receiver {
    shared: Arc<Shared>,
}

/// What [`Receiver::recv_batch`] found.
#[derive(Debug, PartialEq)]
pub enum Batch {
    /// Events were moved into the caller's deque.
    Got,
    /// None came within the timeout.
    Timeout,
    /// Every sender is gone and nothing is left.
    Closed,
}

pub fn bounded(capacity: usize) -> (Sender, Receiver) {
    let shared = Arc::new(Shared {
        inner: Mutex::new(Inner {
            items: VecDeque::new(),
            senders: 1,
            receiver_gone: false,
            reader_waiting: false,
            emitters_waiting: 0,
            nudger: false,
        }),
        readable: Condvar::new(),
        writable: Condvar::new(),
        capacity: capacity.max(1),
        nudge: tokio::sync::Notify::new(),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

impl Sender {
    /// Queues `env`, waiting while the queue is full until there is room, the writer is
    /// gone (the event is dropped: no one is left to tell), or `flow` says to give up.
    pub fn send(&self, env: Envelope, flow: &Flow) {
        let s = &self.shared;
        let urgent = super::is_last(&env);
        let mut g = s.lock();
        let mut stop_seen = None;
        loop {
            if g.receiver_gone {
                return;
            }
            if g.items.len() < s.capacity {
                g.items.push_back(env);
                if !g.reader_waiting {
                    return;
                }
                if urgent || !g.nudger || g.items.len() >= WAKE_AT {
                    s.wake_reader(&mut g);
                } else {
                    // Told again before it runs, the task keeps one permit: its second look
                    // finds the writer awake or the queue empty.
                    drop(g);
                    s.nudge.notify_one();
                }
                return;
            }
            // Full: a writer left waiting for a nudge must take this batch now.
            s.wake_reader(&mut g);
            if flow.should_give_up(&mut stop_seen) {
                return;
            }
            g.emitters_waiting += 1;
            g = s
                .writable
                .wait_timeout(g, RECHECK)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
            g.emitters_waiting -= 1;
        }
    }

    /// From now on the writer is woken by a task on the current tokio runtime once the
    /// runtime has run what was ready, not by each event (see the module's comment). Outside
    /// a runtime each event wakes it, as before.
    pub fn nudge_later(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = self.shared.clone();
        {
            let mut g = shared.lock();
            if std::mem::replace(&mut g.nudger, true) {
                return;
            }
        }
        rt.spawn(async move {
            loop {
                shared.nudge.notified().await;
                let mut g = shared.lock();
                if !g.items.is_empty() {
                    shared.wake_reader(&mut g);
                }
                if g.senders == 0 || g.receiver_gone {
                    return;
                }
            }
        });
    }
}

impl Clone for Sender {
    fn clone(&self) -> Self {
        self.shared.lock().senders += 1;
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let mut g = self.shared.lock();
        g.senders -= 1;
        if g.senders == 0 {
            self.shared.wake_reader(&mut g);
            // The nudging task ends too.
            drop(g);
            self.shared.nudge.notify_one();
        }
    }
}

impl Receiver {
    /// Moves every queued event into `out` (which the caller has emptied), waiting up to
    /// `timeout` (`None`: as long as it takes) for the first one.
    pub fn recv_batch(&self, out: &mut VecDeque<Envelope>, timeout: Option<Duration>) -> Batch {
        let s = &self.shared;
        let mut g = s.lock();
        loop {
            if !g.items.is_empty() {
                std::mem::swap(&mut g.items, out);
                if g.emitters_waiting > 0 {
                    s.writable.notify_all();
                }
                return Batch::Got;
            }
            if g.senders == 0 {
                return Batch::Closed;
            }
            g.reader_waiting = true;
            let timed_out;
            (g, timed_out) = match timeout {
                None => (s.readable.wait(g).unwrap_or_else(|p| p.into_inner()), false),
                Some(t) => match s.readable.wait_timeout(g, t) {
                    Ok((g, r)) => (g, r.timed_out()),
                    Err(p) => {
                        let (g, r) = p.into_inner();
                        (g, r.timed_out())
                    }
                },
            };
            g.reader_waiting = false;
            if timed_out && g.items.is_empty() && g.senders > 0 {
                return Batch::Timeout;
            }
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let mut g = self.shared.lock();
        g.receiver_gone = true;
        g.items.clear();
        self.shared.writable.notify_all();
        drop(g);
        self.shared.nudge.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Event, WarningCode};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    fn env(i: usize) -> Envelope {
        Envelope {
            event: Event::warning(WarningCode::Budget, i.to_string()),
            task_id: None,
            gate: None,
        }
    }

    fn text(e: &Envelope) -> String {
        match &e.event {
            Event::Warning { message, .. } => message.clone(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_full_queue_holds_the_emitter_until_the_reader_takes_a_batch() {
        let (tx, rx) = bounded(4);
        let sent = Arc::new(AtomicUsize::new(0));
        let emitter = {
            let sent = sent.clone();
            std::thread::spawn(move || {
                let flow = Flow::default();
                for i in 0..10 {
                    tx.send(env(i), &flow);
                    sent.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(sent.load(Ordering::SeqCst), 4, "the fifth event waits");
        let mut got = Vec::new();
        let mut batch = VecDeque::new();
        while rx.recv_batch(&mut batch, None) == Batch::Got {
            assert!(batch.len() <= 4);
            got.extend(batch.drain(..).map(|e| text(&e)));
        }
        emitter.join().unwrap();
        let want: Vec<String> = (0..10).map(|i| i.to_string()).collect();
        assert_eq!(got, want, "every event, in order, then Closed");
    }

    #[test]
    fn a_stopping_run_stops_waiting_for_a_reader_that_never_reads() {
        let (tx, rx) = bounded(1);
        let flow = Flow::default();
        flow.set_deadline(Instant::now());
        tx.send(env(0), &flow);
        let t0 = Instant::now();
        tx.send(env(1), &flow);
        tx.send(env(2), &flow);
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        assert!(flow.given_up());
        let mut batch = VecDeque::new();
        assert_eq!(rx.recv_batch(&mut batch, None), Batch::Got);
        assert_eq!(batch.len(), 1, "the dropped events never queued");
    }

    /// Waits until the reader sleeps in `recv_batch`.
    fn reader_asleep(tx: &Sender) {
        while !tx.shared.lock().reader_waiting {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A reader thread: each batch's texts, as it gets them.
    fn batches(rx: Receiver) -> std::sync::mpsc::Receiver<Vec<String>> {
        let (out, got) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut batch = VecDeque::new();
            while rx.recv_batch(&mut batch, None) == Batch::Got {
                let texts = batch.drain(..).map(|e| text_or_last(&e)).collect();
                if out.send(texts).is_err() {
                    return;
                }
            }
        });
        got
    }

    fn text_or_last(e: &Envelope) -> String {
        match &e.event {
            Event::RunCompleted { .. } => "last".into(),
            _ => text(e),
        }
    }

    /// A runtime, and a queue whose writer it nudges, its reader asleep.
    fn nudged_queue() -> (
        tokio::runtime::Runtime,
        Sender,
        std::sync::mpsc::Receiver<Vec<String>>,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (tx, rx) = bounded(64);
        rt.block_on(async { tx.nudge_later() });
        let got = batches(rx);
        reader_asleep(&tx);
        (rt, tx, got)
    }

    /// Inside a runtime, the events a task emits before it yields wake the sleeping writer
    /// once, together, when the runtime has run what was ready.
    #[test]
    fn events_emitted_in_one_turn_of_the_runtime_reach_the_writer_in_one_batch() {
        let (rt, tx, got) = nudged_queue();
        rt.block_on(async {
            let flow = Flow::default();
            for i in 0..3 {
                tx.send(env(i), &flow);
            }
            assert!(tx.shared.lock().reader_waiting, "not woken per event");
            tokio::task::yield_now().await;
        });
        let batch = got.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(batch, ["0", "1", "2"]);
    }

    /// `run_completed` wakes the writer at once: nothing may be left for a runtime that has
    /// finished its work.
    #[test]
    fn the_last_event_wakes_the_writer_at_once() {
        let (rt, tx, got) = nudged_queue();
        rt.block_on(async {
            let flow = Flow::default();
            tx.send(env(0), &flow);
            tx.send(crate::samples().pop().unwrap(), &flow);
            // The runtime's thread waits here without running the nudging task.
            let batch = got.recv_timeout(Duration::from_secs(10)).unwrap();
            assert_eq!(batch, ["0", "last"]);
        });
    }

    #[test]
    fn a_gone_writer_drops_events_and_a_gone_sender_closes_the_queue() {
        let (tx, rx) = bounded(1);
        drop(rx);
        tx.send(env(0), &Flow::default());
        tx.send(env(1), &Flow::default());
        let (tx, rx) = bounded(8);
        let tx2 = tx.clone();
        drop(tx);
        let mut batch = VecDeque::new();
        assert_eq!(
            rx.recv_batch(&mut batch, Some(Duration::from_millis(10))),
            Batch::Timeout
        );
        drop(tx2);
        assert_eq!(rx.recv_batch(&mut batch, None), Batch::Closed);
    }
}
