//! Back-pressure between the run and the writer thread (contract §12: no unbounded queue).
//!
//! The queue (src/events/queue.rs) holds at most [`QUEUE_EVENTS`] events. When it is
//! full, an emitter waits for the writer, so a reader that stops reading slows the run down instead of letting its
//! memory grow without bound, as a pipe does to any Unix producer. The wait has to end when
//! the run must stop anyway, even if the runtime's thread is waiting in it and no task can
//! run: after a stop signal (seen by a plain signal handler, not a tokio task) or past the
//! run's deadline, a waiting emitter gives up after a grace period and from then on events
//! that find the queue full are dropped. The writer's own drain deadline then ends the run
//! as before (src/run).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Events the queue holds before an emitter waits: enough to keep the writer's batches
/// full, small enough that a stalled reader holds a few MiB at most.
pub const QUEUE_EVENTS: usize = 8192;

/// How long an emitter keeps waiting after the run was told to stop. Under §8's 2 s for the
/// whole stop, with room for the drain that follows.
const STOP_GRACE: Duration = Duration::from_millis(700);

/// Set by the signal handler: SIGINT, SIGTERM or SIGHUP arrived.
static STOP_SIGNALLED: AtomicBool = AtomicBool::new(false);
/// When the first of them arrived (CLOCK_MONOTONIC nanoseconds; 0: none yet).
static SIGNALLED_AT: AtomicU64 = AtomicU64::new(0);

fn monotonic_nanos() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given, and is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64
}

fn on_stop_signal() {
    let _ = SIGNALLED_AT.compare_exchange(
        0,
        monotonic_nanos().max(1),
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    STOP_SIGNALLED.store(true, Ordering::SeqCst);
}

/// When the first stop signal arrived. The run's own handler (a tokio task) may only get to
/// it much later, when the runtime's thread waited on a stalled stdout; the stop's 2 s count from
/// here.
pub fn stop_signalled_at() -> Option<Instant> {
    let at = SIGNALLED_AT.load(Ordering::SeqCst);
    if at == 0 {
        return None;
    }
    let ago = Duration::from_nanos(monotonic_nanos().saturating_sub(at));
    Instant::now().checked_sub(ago)
}

/// Installs the handlers that set the stop flag (once per process). They only store an
/// atomic, which is async-signal-safe, and run beside tokio's own handlers.
pub fn watch_stop_signals() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: the action only reads the clock and stores to static atomics (both
            // async-signal-safe), and signal-hook-registry chains it with tokio's handler for
            // the same signal.
            let _ = unsafe { signal_hook_registry::register(sig, on_stop_signal) };
        }
    });
}

/// Shared by every sink of one writer.
#[derive(Default)]
pub struct Flow {
    /// Once set, an emitter that finds the queue full drops its event instead of waiting.
    given_up: AtomicBool,
    /// The run's deadline, if it has one.
    deadline: OnceLock<Instant>,
}

impl Flow {
    /// Past this instant (the run's `--timeout`) a waiting emitter stops waiting after the
    /// grace period.
    pub fn set_deadline(&self, at: Instant) {
        let _ = self.deadline.set(at);
    }

    pub fn given_up(&self) -> bool {
        self.given_up.load(Ordering::SeqCst)
    }

    /// Whether an emitter waiting for room should stop waiting now. `stop_seen` remembers
    /// when this emitter first saw the run stopping (the grace period counts from there).
    pub fn should_give_up(&self, stop_seen: &mut Option<Instant>) -> bool {
        if self.given_up() {
            return true;
        }
        let now = Instant::now();
        if stop_seen.is_none() && (STOP_SIGNALLED.load(Ordering::SeqCst) || self.past_deadline(now))
        {
            *stop_seen = Some(now);
        }
        if stop_seen.is_some_and(|t| now.duration_since(t) >= STOP_GRACE) {
            self.given_up.store(true, Ordering::SeqCst);
            return true;
        }
        false
    }

    fn past_deadline(&self, now: Instant) -> bool {
        self.deadline.get().is_some_and(|at| now >= *at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_stop_an_emitter_waits_as_long_as_it_takes() {
        let flow = Flow::default();
        let mut seen = None;
        assert!(!flow.should_give_up(&mut seen));
        assert!(seen.is_none());
    }

    #[test]
    fn past_the_deadline_it_waits_the_grace_period_then_gives_up_for_everyone() {
        let flow = Flow::default();
        flow.set_deadline(Instant::now());
        let mut seen = None;
        assert!(
            !flow.should_give_up(&mut seen),
            "the grace period comes first"
        );
        let first = seen.expect("the deadline was noticed");
        let mut late = Some(first - STOP_GRACE);
        assert!(flow.should_give_up(&mut late));
        assert!(flow.given_up(), "every other emitter stops waiting too");
        assert!(flow.should_give_up(&mut None));
    }

    #[test]
    fn a_deadline_in_the_future_does_not_stop_the_wait() {
        let flow = Flow::default();
        flow.set_deadline(Instant::now() + Duration::from_secs(3600));
        let mut seen = None;
        assert!(!flow.should_give_up(&mut seen));
        assert!(seen.is_none());
    }
}
