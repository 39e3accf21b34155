//! Run status → exit code, in one table that mirrors contract §4 ("the first row that
//! applies wins").

pub use crate::RunStatus;
use crate::TaskCounts;

/// Why a run was stopped from outside the agent loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    Sigint,
    Sigterm,
    Sighup,
    StdoutClosed,
    /// Writing to stdout failed for another reason than a closed pipe (a full disk).
    StdoutFailed,
    Timeout,
    Budget,
}

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_TASK_FAILED: i32 = 3;
pub const EXIT_TASK_TIMED_OUT: i32 = 4;
pub const EXIT_TASK_CANCELLED: i32 = 5;
pub const EXIT_CLARIFICATION: i32 = 6;
pub const EXIT_MAX_TURNS: i32 = 7;
pub const EXIT_BUDGET: i32 = 8;
pub const EXIT_CONFIG: i32 = 78;
pub const EXIT_TIMEOUT: i32 = 124;
pub const EXIT_SIGHUP: i32 = 129;
pub const EXIT_SIGINT: i32 = 130;
pub const EXIT_SIGPIPE: i32 = 141;
pub const EXIT_SIGTERM: i32 = 143;

/// The exit code of a run that reached `run_started`.
pub fn exit_code(status: RunStatus, cause: Option<StopCause>, tasks: &TaskCounts) -> i32 {
    match cause {
        Some(StopCause::Sigint) => return EXIT_SIGINT,
        Some(StopCause::Sigterm) => return EXIT_SIGTERM,
        Some(StopCause::Sighup) => return EXIT_SIGHUP,
        Some(StopCause::StdoutClosed) => return EXIT_SIGPIPE,
        _ => {}
    }
    match status {
        RunStatus::TimedOut => EXIT_TIMEOUT,
        RunStatus::Failed => EXIT_FAILED,
        RunStatus::BudgetExceeded => EXIT_BUDGET,
        RunStatus::MaxTurns => EXIT_MAX_TURNS,
        RunStatus::NeedsClarification => EXIT_CLARIFICATION,
        // Only a signal or a closed stdout cancels a run; without one this is an internal error.
        RunStatus::Cancelled => EXIT_FAILED,
        RunStatus::Completed if tasks.failed > 0 => EXIT_TASK_FAILED,
        RunStatus::Completed if tasks.timed_out > 0 => EXIT_TASK_TIMED_OUT,
        RunStatus::Completed if tasks.cancelled > 0 => EXIT_TASK_CANCELLED,
        RunStatus::Completed => EXIT_OK,
    }
}

/// The status a run ends with when its cancellation token fired for `cause`.
pub fn status_for_cause(cause: StopCause) -> RunStatus {
    match cause {
        StopCause::Timeout => RunStatus::TimedOut,
        StopCause::Budget => RunStatus::BudgetExceeded,
        StopCause::StdoutFailed => RunStatus::Failed,
        _ => RunStatus::Cancelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tasks(failed: u32, timed_out: u32, cancelled: u32) -> TaskCounts {
        TaskCounts {
            total: failed + timed_out + cancelled,
            completed: 0,
            failed,
            timed_out,
            cancelled,
            resumed: 0,
        }
    }

    #[test]
    fn table_rows_in_order() {
        let none = TaskCounts::default();
        use RunStatus::*;
        assert_eq!(
            exit_code(Cancelled, Some(StopCause::Sigint), &tasks(1, 1, 1)),
            130
        );
        assert_eq!(exit_code(Cancelled, Some(StopCause::Sigterm), &none), 143);
        assert_eq!(exit_code(Cancelled, Some(StopCause::Sighup), &none), 129);
        assert_eq!(
            exit_code(Cancelled, Some(StopCause::StdoutClosed), &none),
            141
        );
        assert_eq!(
            exit_code(TimedOut, Some(StopCause::Timeout), &tasks(1, 0, 0)),
            124
        );
        assert_eq!(exit_code(Failed, None, &tasks(1, 0, 0)), 1);
        assert_eq!(
            exit_code(BudgetExceeded, Some(StopCause::Budget), &tasks(0, 0, 2)),
            8
        );
        assert_eq!(exit_code(MaxTurns, None, &tasks(1, 0, 0)), 7);
        assert_eq!(exit_code(NeedsClarification, None, &tasks(1, 0, 0)), 6);
        assert_eq!(exit_code(Completed, None, &tasks(1, 1, 1)), 3);
        assert_eq!(exit_code(Completed, None, &tasks(0, 1, 1)), 4);
        assert_eq!(exit_code(Completed, None, &tasks(0, 0, 1)), 5);
        assert_eq!(exit_code(Completed, None, &none), 0);
    }
}
