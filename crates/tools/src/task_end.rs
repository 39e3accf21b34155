//! How a `task` call ended, carried as data beside the text the model sees, so that nothing
//! (the compaction's ledger of delegations) reads it back out of that text.

use super::ToolOutput;

/// A delegated task's terminal status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    Completed,
    Failed,
    TimedOut,
    Cancelled,
}

impl TaskStatus {
    /// The name the ledger of delegations gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::TimedOut => "timed_out",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

/// A task's end: its status and what it answered (the result, or the error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEnd {
    pub status: TaskStatus,
    pub detail: String,
}

impl TaskEnd {
    pub fn new(status: TaskStatus, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: detail.into(),
        }
    }

    /// The `task` call's answer: the text the model sees, with this end beside it.
    pub fn into_output(self) -> ToolOutput {
        let text = match self.status {
            TaskStatus::Completed => format!("Task Succeeded. Result: {}", self.detail),
            TaskStatus::Failed => format!("Task failed. Error: {}", self.detail),
            TaskStatus::TimedOut => format!("Task timed out. Error: {}", self.detail),
            TaskStatus::Cancelled => format!("Task cancelled. Error: {}", self.detail),
        };
        let out = match self.status {
            TaskStatus::Completed => ToolOutput::ok(text),
            _ => ToolOutput::error(text),
        };
        out.with_task_end(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolStatus;

    #[test]
    fn an_end_renders_the_text_the_model_has_always_seen_and_stays_beside_it() {
        let cases = [
            (
                TaskStatus::Completed,
                "Task Succeeded. Result: 42",
                ToolStatus::Ok,
            ),
            (
                TaskStatus::Failed,
                "Task failed. Error: 42",
                ToolStatus::Error,
            ),
            (
                TaskStatus::TimedOut,
                "Task timed out. Error: 42",
                ToolStatus::Error,
            ),
            (
                TaskStatus::Cancelled,
                "Task cancelled. Error: 42",
                ToolStatus::Error,
            ),
        ];
        for (status, text, tool_status) in cases {
            let out = TaskEnd::new(status, "42").into_output();
            assert_eq!(out.text(), text);
            assert_eq!(out.status, tool_status);
            assert_eq!(out.task_end, Some(TaskEnd::new(status, "42")));
        }
    }
}
