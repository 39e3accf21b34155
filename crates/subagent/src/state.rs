//! A task's lifecycle: pending → running → exactly one terminal state, set once by
//! compare-and-set so that a late completion never overwrites a timeout and vice versa.

use std::sync::atomic::{AtomicU8, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TaskState {
    Pending = 0,
    Running = 1,
    Completed = 2,
    Failed = 3,
    TimedOut = 4,
    Cancelled = 5,
}

impl TaskState {
    fn from_u8(v: u8) -> Self {
        match v {
            0 => TaskState::Pending,
            1 => TaskState::Running,
            2 => TaskState::Completed,
            3 => TaskState::Failed,
            4 => TaskState::TimedOut,
            _ => TaskState::Cancelled,
        }
    }

    pub fn is_terminal(self) -> bool {
        !matches!(self, TaskState::Pending | TaskState::Running)
    }
}

#[derive(Debug)]
pub struct StateCell(AtomicU8);

impl Default for StateCell {
    fn default() -> Self {
        Self(AtomicU8::new(TaskState::Pending as u8))
    }
}

impl StateCell {
    pub fn get(&self) -> TaskState {
        TaskState::from_u8(self.0.load(Ordering::SeqCst))
    }

    /// Pending → Running. False when the task already ended (cancelled while queued).
    pub fn start(&self) -> bool {
        self.0
            .compare_exchange(
                TaskState::Pending as u8,
                TaskState::Running as u8,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok()
    }

    /// Sets a terminal state unless one is already set. True for the one caller that wins.
    pub fn finish(&self, to: TaskState) -> bool {
        debug_assert!(to.is_terminal());
        let mut cur = self.0.load(Ordering::SeqCst);
        loop {
            if TaskState::from_u8(cur).is_terminal() {
                return false;
            }
            match self
                .0
                .compare_exchange(cur, to as u8, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn first_terminal_state_wins() {
        let s = StateCell::default();
        assert!(s.start());
        assert!(!s.start());
        assert!(s.finish(TaskState::TimedOut));
        assert!(!s.finish(TaskState::Completed));
        assert_eq!(s.get(), TaskState::TimedOut);
    }

    #[test]
    fn a_queued_task_can_be_cancelled_and_then_never_starts() {
        let s = StateCell::default();
        assert!(s.finish(TaskState::Cancelled));
        assert!(!s.start());
        assert_eq!(s.get(), TaskState::Cancelled);
    }

    #[test]
    fn racing_finishers_have_one_winner() {
        for _ in 0..200 {
            let s = Arc::new(StateCell::default());
            s.start();
            let handles: Vec<_> = [
                TaskState::Completed,
                TaskState::Failed,
                TaskState::TimedOut,
                TaskState::Cancelled,
            ]
            .into_iter()
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || s.finish(t))
            })
            .collect();
            let wins = handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .filter(|w| *w)
                .count();
            assert_eq!(wins, 1);
        }
    }
}
