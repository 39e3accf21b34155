//! An `--each` item as a sub-agent task (contract §15): its id is `item-<index>`, its
//! description `item <index>`, and it starts at once — the run reads an item only when a
//! slot is free, so none ever queues.

use std::sync::Arc;

use super::record::{EndHook, TaskRecord};
use super::scheduler::{Admission, Scheduler};
use super::task_tool::run_admitted;
use super::SubagentType;

impl Scheduler {
    /// Accepts the item and starts it (`task_started`). `None` when the run's task limit
    /// is reached (an `--each` run sets none) or the run stopped before it could start.
    pub fn start_item(
        self: &Arc<Self>,
        index: u64,
        prompt: &str,
        kind: Arc<SubagentType>,
        hook: Arc<dyn EndHook>,
    ) -> Option<Arc<TaskRecord>> {
        let id = format!("item-{index}");
        let description = format!("item {index}");
        let rec = TaskRecord::new(&id, &description, prompt, kind).for_item(index, hook);
        let rec = self.accept_record(rec)?;
        match self.admit(&rec) {
            Admission::Now => Some(rec),
            // Not reached while the caller waits for a free slot; a queued item would
            // wait on nobody, so it is ended here.
            Admission::Queued { .. } => {
                rec.cancel(&self.events, &self.shared.control.cancel_message());
                self.forget(&rec);
                None
            }
        }
    }
}

/// Runs a started item to its end; `problem` fails it at once (an item that could not be
/// read or rendered fails as its own task).
pub async fn run_item(s: Arc<Scheduler>, rec: Arc<TaskRecord>, problem: Option<String>) {
    match problem {
        Some(why) => {
            rec.fail(&s.events, &why, None);
            s.release();
            s.forget(&rec);
        }
        None => {
            run_admitted(&s, &rec).await;
        }
    }
}
