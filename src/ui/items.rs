//! The live view of an `--each` run (contract §15): one line of item progress — done,
//! failed, running, queued, the rate and the time left — in place of the lead's line.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many items the run has, once counted (a regular file is counted on the side; stdin
/// never is, and then neither queue nor ETA is shown).
#[derive(Debug, Clone, Default)]
pub struct ItemTotal(Arc<AtomicU64>);

impl ItemTotal {
    pub fn set(&self, n: u64) {
        // 0 stands for "not counted yet".
        self.0.store(n.saturating_add(1), Ordering::Relaxed);
    }

    pub fn get(&self) -> Option<u64> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n - 1),
        }
    }
}

/// The items' tally, folded from their task events.
#[derive(Debug, Default)]
pub struct ItemProgress {
    total: ItemTotal,
    started: u64,
    done: u64,
    failed: u64,
    first: Option<Instant>,
}

impl ItemProgress {
    pub fn new(total: ItemTotal) -> Self {
        Self {
            total,
            ..Self::default()
        }
    }

    pub fn started(&mut self, now: Instant) {
        self.started += 1;
        self.first.get_or_insert(now);
    }

    /// An item ended; `completed` false counts it as failed (failed, timed out, cancelled).
    pub fn ended(&mut self, completed: bool) {
        self.done += 1;
        self.failed += u64::from(!completed);
    }

    /// `items · 120 done (3 failed) · 64 running · 9816 queued · 42.0/s · ETA 3m54s`.
    pub fn line(&self, now: Instant) -> String {
        let running = self.started.saturating_sub(self.done);
        let mut s = format!("items · {} done", self.done);
        if self.failed > 0 {
            s.push_str(&format!(" ({} failed)", self.failed));
        }
        s.push_str(&format!(" · {running} running"));
        let total = self.total.get();
        if let Some(t) = total {
            s.push_str(&format!(" · {} queued", t.saturating_sub(self.started)));
        }
        let elapsed = self
            .first
            .map_or(Duration::ZERO, |f| now.saturating_duration_since(f));
        if self.done > 0 && elapsed >= Duration::from_millis(500) {
            let rate = self.done as f64 / elapsed.as_secs_f64();
            s.push_str(&format!(" · {rate:.1}/s"));
            if let Some(t) = total {
                let left = t.saturating_sub(self.done) as f64 / rate;
                if left.is_finite() {
                    let eta = crate::text::clock(Duration::from_secs_f64(left.min(1e9)));
                    s.push_str(&format!(" · ETA {eta}"));
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_counts_items_and_estimates_the_time_left() {
        let total = ItemTotal::default();
        let mut p = ItemProgress::new(total.clone());
        let t0 = Instant::now();
        assert_eq!(p.line(t0), "items · 0 done · 0 running");
        for _ in 0..4 {
            p.started(t0);
        }
        p.ended(true);
        p.ended(false);
        assert_eq!(p.line(t0), "items · 2 done (1 failed) · 2 running");
        total.set(10);
        // 2 done in 2 s: 1.0/s, 8 left.
        assert_eq!(
            p.line(t0 + Duration::from_secs(2)),
            "items · 2 done (1 failed) · 2 running · 6 queued · 1.0/s · ETA 8s"
        );
        total.set(0);
        assert_eq!(total.get(), Some(0));
    }
}
