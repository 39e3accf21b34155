//! One accepted task and its terminal transitions. Each transition sets the set-once state,
//! emits the task's one terminal event and returns what the lead model sees, so whoever
//! ends a task first (the sub-agent, its timeout, the run's shutdown) reports it, once.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Poll;

use futures_util::task::AtomicWaker;
use std::time::Instant;

use super::state::{StateCell, TaskState};
use super::SubagentType;
use deerflow_agent::Progress;
use deerflow_base::text::secs;
use deerflow_events::usage::UsageTotals;
use deerflow_events::{Event, EventSink, Gate};
use deerflow_tools::task_end::{TaskEnd, TaskStatus};
use deerflow_tools::ToolOutput;

/// Told of a task's end before its terminal event is emitted: `--each` writes the item's
/// result line here, and the `--state` ledger every item's and every lead task's end
/// (contract §15: on disk before the event says it). The scheduler holds the run's one
/// hook and gives it to every task it accepts. The gate it returns holds the terminal event back until it
/// opens (the ledger's entry on disk) without holding the run's thread.
pub trait EndHook: Send + Sync {
    fn ended(&self, rec: &TaskRecord, end: &Ended<'_>) -> Option<Gate>;
}

/// What a task's terminal event reports.
pub struct Ended<'a> {
    pub status: TaskStatus,
    /// The result, or the error.
    pub text: &'a str,
    pub usage: UsageTotals,
    pub turns: u32,
    pub duration_ms: u64,
}

pub struct TaskRecord {
    /// The id, description and prompt in one allocation, split at `ends`: a fan-out holds
    /// every queued task's record, and three small strings cost three allocations each.
    text: Box<str>,
    ends: [usize; 2],
    pub kind: Arc<SubagentType>,
    /// Its place among the run's accepted tasks.
    pub(super) seq: u32,
    /// The `--each` item it runs, carried by its events as `item_index`.
    pub item: Option<u64>,
    /// Set by the scheduler when it accepts the task.
    pub(super) end_hook: Option<Arc<dyn EndHook>>,
    pub state: StateCell,
    /// Made when the sub-agent is built: a fan-out's queued tasks do not carry one.
    progress: OnceLock<Arc<Progress>>,
    /// How the queue answers this task's wait for a slot.
    slot: Slot,
    /// Set when the task started running (its timeout counts from here).
    pub started: Mutex<Option<Instant>>,
    pub accepted: Instant,
}

/// A queued task's wait for a slot: one answer and the waker of the one future waiting
/// for it. It lives in the record, so a queued task costs no channel of its own.
#[derive(Default)]
struct Slot {
    answer: AtomicU8,
    waker: AtomicWaker,
}

const WAITING: u8 = 0;
const GRANTED: u8 = 1;
const REFUSED: u8 = 2;

impl TaskRecord {
    pub fn new(id: &str, description: &str, prompt: &str, kind: Arc<SubagentType>) -> Self {
        Self {
            text: [id, description, prompt].concat().into(),
            ends: [id.len(), id.len() + description.len()],
            kind,
            seq: 0,
            item: None,
            end_hook: None,
            state: StateCell::default(),
            progress: OnceLock::new(),
            slot: Slot::default(),
            started: Mutex::new(None),
            accepted: Instant::now(),
        }
    }

    /// Makes this the task of `--each` item `index`.
    pub fn for_item(mut self, index: u64) -> Self {
        self.item = Some(index);
        self
    }

    /// Computes what the terminal event reports once, tells the hook, and returns it with
    /// the hook's gate for the event.
    fn ended<'a>(&self, status: TaskStatus, text: &'a str) -> (Ended<'a>, Option<Gate>) {
        let end = Ended {
            status,
            text,
            usage: self.usage(),
            turns: self.turns(),
            duration_ms: self.duration_ms(),
        };
        let gate = self.end_hook.as_ref().and_then(|h| h.ended(self, &end));
        (end, gate)
    }

    /// The task id: the lead's call id.
    pub fn id(&self) -> &str {
        &self.text[..self.ends[0]]
    }

    pub fn description(&self) -> &str {
        &self.text[self.ends[0]..self.ends[1]]
    }

    pub fn prompt(&self) -> &str {
        &self.text[self.ends[1]..]
    }

    /// The scheduler's answer to a queued task: run now (`true`), or never, the run
    /// stopped (`false`). Wakes the task's wait.
    pub(super) fn answer_slot(&self, granted: bool) {
        let answer = if granted { GRANTED } else { REFUSED };
        // The first answer stands: a slot handed over is not taken back by a late stop.
        let _ =
            self.slot
                .answer
                .compare_exchange(WAITING, answer, Ordering::SeqCst, Ordering::SeqCst);
        self.slot.waker.wake();
    }

    /// Waits for [`answer_slot`](Self::answer_slot); whether a slot was granted.
    pub(super) async fn slot_answer(&self) -> bool {
        std::future::poll_fn(|cx| {
            // Registered before the answer is read, so an answer given in between wakes us.
            self.slot.waker.register(cx.waker());
            match self.slot.answer.load(Ordering::SeqCst) {
                WAITING => Poll::Pending,
                a => Poll::Ready(a == GRANTED),
            }
        })
        .await
    }

    /// The sub-agent's running tally, shared with its agent loop.
    pub fn progress(&self) -> Arc<Progress> {
        self.progress.get_or_init(Arc::default).clone()
    }

    fn usage(&self) -> UsageTotals {
        self.progress.get().map(|p| p.usage()).unwrap_or_default()
    }

    fn turns(&self) -> u32 {
        self.progress.get().map_or(0, |p| p.turns())
    }

    pub fn duration_ms(&self) -> u64 {
        let since = self
            .started
            .lock()
            .ok()
            .and_then(|g| *g)
            .unwrap_or(self.accepted);
        since.elapsed().as_millis() as u64
    }

    /// Pending → running, with its `task_started` event. False if the task already ended.
    pub fn start(&self, events: &EventSink) -> bool {
        if !self.state.start() {
            return false;
        }
        *self.started.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        events.emit(Event::TaskStarted {
            task_id: self.id().to_string(),
            item_index: self.item,
            description: self.description().to_string(),
            subagent_type: self.kind.name.clone(),
            model: self.kind.model.clone(),
            max_turns: self.kind.max_turns,
            timeout_seconds: self.kind.timeout_seconds,
            resumed: false,
        });
        true
    }

    pub fn complete(
        &self,
        events: &EventSink,
        result: String,
        stop_reason: Option<&str>,
    ) -> ToolOutput {
        if !self.state.finish(TaskState::Completed) {
            return self.already_ended();
        }
        let (end, gate) = self.ended(TaskStatus::Completed, &result);
        events.emit_after(
            Event::TaskCompleted {
                task_id: self.id().to_string(),
                item_index: self.item,
                result: result.clone(),
                usage: end.usage,
                turns: end.turns,
                duration_ms: end.duration_ms,
                stop_reason: stop_reason.map(String::from),
                resumed: false,
            },
            gate,
        );
        TaskEnd::new(TaskStatus::Completed, result).into_output()
    }

    pub fn fail(&self, events: &EventSink, error: &str, stop_reason: Option<&str>) -> ToolOutput {
        if !self.state.finish(TaskState::Failed) {
            return self.already_ended();
        }
        let (end, gate) = self.ended(TaskStatus::Failed, error);
        events.emit_after(
            Event::TaskFailed {
                task_id: self.id().to_string(),
                item_index: self.item,
                error: error.to_string(),
                usage: end.usage,
                turns: end.turns,
                duration_ms: end.duration_ms,
                stop_reason: stop_reason.map(String::from),
            },
            gate,
        );
        TaskEnd::new(TaskStatus::Failed, error).into_output()
    }

    pub fn time_out(&self, events: &EventSink) -> ToolOutput {
        let error = format!(
            "Execution timed out after {} seconds",
            secs(self.kind.timeout_seconds)
        );
        if !self.state.finish(TaskState::TimedOut) {
            return self.already_ended();
        }
        let (end, gate) = self.ended(TaskStatus::TimedOut, &error);
        events.emit_after(
            Event::TaskTimedOut {
                task_id: self.id().to_string(),
                item_index: self.item,
                error: error.clone(),
                timeout_seconds: self.kind.timeout_seconds,
                usage: end.usage,
                duration_ms: end.duration_ms,
            },
            gate,
        );
        TaskEnd::new(TaskStatus::TimedOut, error).into_output()
    }

    pub fn cancel(&self, events: &EventSink, error: &str) -> ToolOutput {
        if !self.state.finish(TaskState::Cancelled) {
            return self.already_ended();
        }
        let (end, gate) = self.ended(TaskStatus::Cancelled, error);
        events.emit_after(
            Event::TaskCancelled {
                task_id: self.id().to_string(),
                item_index: self.item,
                error: error.to_string(),
                usage: end.usage,
                duration_ms: end.duration_ms,
            },
            gate,
        );
        TaskEnd::new(TaskStatus::Cancelled, error).into_output()
    }

    /// The answer for a task whose terminal state someone else set first.
    fn already_ended(&self) -> ToolOutput {
        let (state, status) = match self.state.get() {
            TaskState::Completed => ("completed", TaskStatus::Completed),
            TaskState::TimedOut => ("timed out", TaskStatus::TimedOut),
            TaskState::Cancelled => ("cancelled", TaskStatus::Cancelled),
            _ => ("failed", TaskStatus::Failed),
        };
        const ENDED: &str = "the task had already ended";
        ToolOutput::error(format!("Task {state}. Error: {ENDED}"))
            .with_task_end(TaskEnd::new(status, ENDED))
    }
}
