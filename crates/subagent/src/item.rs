//! An `--each` item as a sub-agent task (contract §15): its id is `item-<index>`, its
//! description `item <index>`, and it starts at once — the run reads an item only when a
//! slot is free, so none ever queues.

use std::sync::Arc;

use super::record::TaskRecord;
use super::scheduler::{Admission, Scheduler};
use super::task_tool::run_admitted;
use super::SubagentType;

impl Scheduler {
    /// Accepts the item and starts it (`task_started`); the run's end hook hears its end.
    /// `None` when the run's task limit is reached (an `--each` run sets none) or the run
    /// stopped before it could start.
    pub fn start_item(
        self: &Arc<Self>,
        index: u64,
        prompt: &str,
        kind: Arc<SubagentType>,
    ) -> Option<Arc<TaskRecord>> {
        let id = format!("item-{index}");
        let description = format!("item {index}");
        let rec = TaskRecord::new(&id, &description, prompt, kind).for_item(index);
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

/// What the `--state` ledger recorded of a completed item, reported again instead of run.
pub struct Resumed<'a> {
    pub result: &'a str,
    pub usage: deerflow_events::usage::UsageTotals,
    pub turns: u32,
    pub duration_ms: u64,
}

impl Scheduler {
    /// Reports item `index` as the ledger recorded it (`task_started` and `task_completed`,
    /// both `resumed`), without a slot or a model call. Its usage is the recorded one: it
    /// is not added to this run's totals (contract §15).
    pub fn resume_item(&self, index: u64, kind: &SubagentType, r: Resumed<'_>) {
        let id = format!("item-{index}");
        self.resume_task(&id, Some(index), &format!("item {index}"), kind, r);
    }

    /// Reports a task taken from the `--state` ledger: `task_started` and
    /// `task_completed`, both `resumed`.
    pub fn resume_task(
        &self,
        task_id: &str,
        item_index: Option<u64>,
        description: &str,
        kind: &SubagentType,
        r: Resumed<'_>,
    ) {
        self.events.emit(deerflow_events::Event::TaskStarted {
            task_id: task_id.to_string(),
            item_index,
            description: description.to_string(),
            subagent_type: kind.name.clone(),
            model: kind.model.clone(),
            max_turns: kind.max_turns,
            timeout_seconds: kind.timeout_seconds,
            resumed: true,
        });
        self.events.emit(deerflow_events::Event::TaskCompleted {
            task_id: task_id.to_string(),
            item_index,
            result: r.result.to_string(),
            usage: r.usage,
            turns: r.turns,
            duration_ms: r.duration_ms,
            stop_reason: None,
            resumed: true,
        });
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
