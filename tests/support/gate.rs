//! A one-way latch a test opens to release replies that were told to `wait_for` it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

/// Replies using `.wait_for(&gate)` hold their response headers until `open()` is called.
/// Opening is permanent; clones share the same latch.
#[derive(Clone, Debug)]
pub struct Gate {
    // A watch channel (not a Notify) so a waiter that arrives after `open()` passes at once.
    open: Arc<watch::Sender<bool>>,
    waiting: Arc<AtomicUsize>,
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Gate {
            open: Arc::new(watch::channel(false).0),
            waiting: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Releases every current and future waiter.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// Whether `open()` has been called.
    pub fn is_open(&self) -> bool {
        *self.open.borrow()
    }

    /// How many requests are blocked on this gate right now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Resolves once the gate is open.
    pub(crate) async fn wait(&self) {
        let mut rx = self.open.subscribe();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        // The decrement lives in a guard so a waiter cancelled by a client disconnect
        // still leaves the count right.
        let _guard = Decrement(&self.waiting);
        // `wait_for` errors only when the sender is gone, and `self` holds the sender.
        let _ = rx.wait_for(|open| *open).await;
    }
}

struct Decrement<'a>(&'a AtomicUsize);

impl Drop for Decrement<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
