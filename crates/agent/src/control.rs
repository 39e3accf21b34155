//! The run's stop switch: a cancellation token plus the first reason it was pulled.

use std::sync::Mutex;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use deerflow_events::outcome::StopCause;

#[derive(Default)]
pub struct RunControl {
    pub cancel: CancellationToken,
    cause: Mutex<Option<(StopCause, Instant)>>,
    timeout_seconds: Option<f64>,
}

impl RunControl {
    pub fn new(timeout_seconds: Option<f64>) -> Self {
        Self {
            cancel: CancellationToken::new(),
            cause: Mutex::new(None),
            timeout_seconds,
        }
    }

    /// Stops the run; the first cause wins. Returns whether this call set it.
    pub fn stop(&self, cause: StopCause) -> bool {
        self.stop_at(cause, Instant::now())
    }

    /// [`stop`](Self::stop) for a cause that arrived at `at` (a signal seen late).
    pub fn stop_at(&self, cause: StopCause, at: Instant) -> bool {
        let mut g = self.cause.lock().unwrap_or_else(|p| p.into_inner());
        let first = g.is_none();
        if first {
            *g = Some((cause, at));
        }
        drop(g);
        self.cancel.cancel();
        first
    }

    pub fn cause(&self) -> Option<StopCause> {
        self.stopped().map(|(c, _)| c)
    }

    /// The first cause and when it was set.
    pub fn stopped(&self) -> Option<(StopCause, Instant)> {
        *self.cause.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Why a task was cancelled, as its `task_cancelled` event and the lead's tool result say.
    pub fn cancel_message(&self) -> String {
        match self.cause() {
            Some(StopCause::Timeout) => {
                format!(
                    "Run timed out after {} seconds",
                    deerflow_base::text::secs(self.timeout_seconds.unwrap_or(0.0))
                )
            }
            Some(StopCause::Budget) => "Token budget exceeded".into(),
            Some(StopCause::Sigint) => "Run interrupted (SIGINT)".into(),
            Some(StopCause::Sigterm) => "Run terminated (SIGTERM)".into(),
            Some(StopCause::Sighup) => "Run terminated (SIGHUP)".into(),
            Some(StopCause::StdoutClosed) => "Run cancelled: stdout was closed".into(),
            Some(StopCause::StdoutFailed) => "Run cancelled: cannot write to stdout".into(),
            None => "Run cancelled".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_stop_seen_late_keeps_when_its_cause_arrived_and_the_first_cause_wins() {
        let c = RunControl::new(None);
        let at = Instant::now() - Duration::from_millis(700);
        assert!(c.stop_at(StopCause::Sigterm, at));
        assert!(!c.stop(StopCause::Timeout));
        assert_eq!(c.stopped(), Some((StopCause::Sigterm, at)));
        assert!(c.cancel.is_cancelled());
    }
}
