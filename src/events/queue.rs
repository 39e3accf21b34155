//! The bounded queue between the run and the writer thread. The writer takes everything
//! queued at once (one lock per batch, not per event) and is woken only when it sleeps;
//! an emitter that finds the queue full waits on a condition variable with a short
//! timeout, so it can give up when the run must stop (src/events/flow.rs). Under a steady
//! stream of events the writer lingers between batches ([`Receiver::linger`]): emitters then
//! queue without waking it, and it takes a millisecond's worth at a time.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::flow::Flow;
use super::Envelope;

/// How often a waiting emitter looks again at whether the run must stop.
const RECHECK: Duration = Duration::from_millis(20);

struct Inner {
    items: VecDeque<Envelope>,
    senders: usize,
    receiver_gone: bool,
    reader_waiting: bool,
    /// The reader is in [`Receiver::linger`]: only what ends it early wakes it.
    reader_lingering: bool,
    /// The run's last event is queued: the reader must not linger over it.
    last_queued: bool,
    emitters_waiting: usize,
}

impl Inner {
    /// Whether a lingering reader should stop lingering and take the queue now.
    fn linger_over(&self, capacity: usize) -> bool {
        self.last_queued || self.senders == 0 || self.items.len() >= capacity.div_ceil(2)
    }
}

struct Shared {
    inner: Mutex<Inner>,
    readable: Condvar,
    writable: Condvar,
    capacity: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
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
            reader_lingering: false,
            last_queued: false,
            emitters_waiting: 0,
        }),
        readable: Condvar::new(),
        writable: Condvar::new(),
        capacity: capacity.max(1),
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
        let mut g = s.lock();
        let mut stop_seen = None;
        loop {
            if g.receiver_gone {
                return;
            }
            if g.items.len() < s.capacity {
                g.last_queued |= super::is_last(&env);
                g.items.push_back(env);
                if g.reader_waiting || (g.reader_lingering && g.linger_over(s.capacity)) {
                    s.readable.notify_one();
                }
                return;
            }
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
        if g.senders == 0 && (g.reader_waiting || g.reader_lingering) {
            self.shared.readable.notify_one();
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
                g.last_queued = false;
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

    /// Waits up to `time` for more events before the next [`recv_batch`](Self::recv_batch),
    /// without being woken by each one. Ends early when the queue is half full (so an
    /// emitter does not wait for room), when the run's last event is queued or when every
    /// sender is gone (so the stream's end is not held back).
    pub fn linger(&self, time: Duration) {
        let s = &self.shared;
        let until = Instant::now() + time;
        let mut g = s.lock();
        g.reader_lingering = true;
        while !g.linger_over(s.capacity) {
            let now = Instant::now();
            if now >= until {
                break;
            }
            g = match s.readable.wait_timeout(g, until - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        g.reader_lingering = false;
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let mut g = self.shared.lock();
        g.receiver_gone = true;
        g.items.clear();
        self.shared.writable.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    fn env(i: usize) -> Envelope {
        Envelope {
            event: Event::warning("n", i.to_string()),
            task_id: None,
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

    /// The run's last event, which ends a linger.
    fn run_completed() -> Envelope {
        crate::events::samples()
            .into_iter()
            .find(crate::events::is_last)
            .unwrap()
    }

    #[test]
    fn a_lingering_reader_is_not_woken_by_each_event() {
        let (tx, rx) = bounded(8);
        let emitter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            for i in 0..3 {
                tx.send(env(i), &Flow::default());
            }
            tx
        });
        let t0 = Instant::now();
        rx.linger(Duration::from_millis(300));
        assert!(
            t0.elapsed() >= Duration::from_millis(300),
            "{:?}",
            t0.elapsed()
        );
        let _tx = emitter.join().unwrap();
        let mut batch = VecDeque::new();
        assert_eq!(rx.recv_batch(&mut batch, None), Batch::Got);
        assert_eq!(batch.iter().map(text).collect::<Vec<_>>(), ["0", "1", "2"]);
    }

    /// How long `linger(10 s)` lasts while `act` runs on another thread after 50 ms.
    fn linger_with(capacity: usize, act: impl FnOnce(Sender) + Send + 'static) -> Duration {
        let (tx, rx) = bounded(capacity);
        let emitter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            act(tx);
        });
        let t0 = Instant::now();
        rx.linger(Duration::from_secs(10));
        let took = t0.elapsed();
        emitter.join().unwrap();
        took
    }

    #[test]
    fn the_last_event_a_half_full_queue_or_no_sender_end_a_linger() {
        let last = linger_with(8, |tx| {
            tx.send(env(0), &Flow::default());
            tx.send(run_completed(), &Flow::default());
            // Held until the reader has taken the queue: the sender is not what ended it.
            std::thread::sleep(Duration::from_millis(200));
        });
        let half = linger_with(8, |tx| {
            for i in 0..4 {
                tx.send(env(i), &Flow::default());
            }
            std::thread::sleep(Duration::from_millis(200));
        });
        let gone = linger_with(8, drop);
        for took in [last, half, gone] {
            assert!(took < Duration::from_secs(5), "{took:?}");
        }
        // Below half full and no end in sight: the whole linger.
        let (tx, rx) = bounded(8);
        tx.send(env(0), &Flow::default());
        let t0 = Instant::now();
        rx.linger(Duration::from_millis(100));
        assert!(t0.elapsed() >= Duration::from_millis(100));
    }

    #[test]
    fn taking_the_last_event_lets_the_next_linger_run_its_course() {
        let (tx, rx) = bounded(8);
        tx.send(run_completed(), &Flow::default());
        let mut batch = VecDeque::new();
        assert_eq!(rx.recv_batch(&mut batch, None), Batch::Got);
        let t0 = Instant::now();
        rx.linger(Duration::from_millis(100));
        assert!(t0.elapsed() >= Duration::from_millis(100));
        drop(tx);
    }
}
