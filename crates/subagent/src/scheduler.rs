//! The run-wide scheduler: at most `max_concurrent` sub-agents run at once, later tasks
//! wait in FIFO order, at most `max_tasks` are accepted per run. Each task runs on its own
//! tokio task under a child of the run's cancellation token.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::record::{EndHook, TaskRecord};
use super::state::TaskState;
use super::{SubagentSetup, SubagentType};
use deerflow_agent::RunShared;
use deerflow_events::{Event, EventSink, TaskCounts};
use deerflow_model::output_schema::OutputSchema;
use deerflow_tools::registry::ToolRegistry;
use deerflow_tools::{SandboxLimits, Toolset};
use deerflow_workspace::Workspace;

/// What the scheduler takes from the run's settings.
pub struct SchedulerLimits {
    pub workspace: Arc<Workspace>,
    pub limits: Arc<SandboxLimits>,
    /// The run's tools, from which each sub-agent type takes its set.
    pub tools: Arc<ToolRegistry>,
    pub max_concurrent: u32,
    pub max_tasks: u32,
    /// `--each` with `--output-schema`: every item's answer must satisfy it (§15).
    pub output_schema: Option<Arc<OutputSchema>>,
    /// `--each` with `--image`: every item's task message carries them (§14).
    pub item_images: Vec<deerflow_model::image::Image>,
    /// Told of every accepted task's end before its terminal event: `--each`'s item log,
    /// or the `--state` ledger of a lead's tasks (contract §15).
    pub end_hook: Option<Arc<dyn EndHook>>,
}

#[derive(Default)]
struct Slots {
    running: u32,
    waiting: VecDeque<Arc<TaskRecord>>,
}

pub struct Scheduler {
    pub(super) setup: Arc<SubagentSetup>,
    pub(super) shared: Arc<RunShared>,
    pub(super) events: EventSink,
    pub(super) workspace: Arc<Workspace>,
    pub(super) limits: Arc<SandboxLimits>,
    /// Where every sub-agent's tools come from.
    pub(super) tools: Arc<ToolRegistry>,
    max_concurrent: u32,
    max_tasks: u32,
    pub(super) output_schema: Option<Arc<OutputSchema>>,
    pub(super) item_images: Vec<deerflow_model::image::Image>,
    end_hook: Option<Arc<dyn EndHook>>,
    slots: Mutex<Slots>,
    tasks: Mutex<Tasks>,
    /// Each sub-agent type's prompt and tools, built by its first task.
    kits: Mutex<HashMap<String, Arc<Kit>>>,
    /// Whether the watcher that wakes the queue when the run stops is running.
    watching: AtomicBool,
}

/// The run's accepted tasks: those not yet forgotten, and the tally of those that were.
/// A finished task is forgotten, so a fan-out does not keep every record to the end.
#[derive(Default)]
struct Tasks {
    accepted: u32,
    /// In the order they were accepted.
    live: BTreeMap<u32, Arc<TaskRecord>>,
    ended: TaskCounts,
}

/// What every sub-agent of one type shares: its system prompt and its tools with their
/// specs (built once, not per task).
pub struct Kit {
    pub system: Arc<str>,
    pub tools: Arc<Toolset>,
}

/// Whether a task may run now or has to wait for a slot (see [`TaskRecord::slot_answer`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    Now,
    Queued { position: u32 },
}

impl Scheduler {
    pub fn new(
        setup: Arc<SubagentSetup>,
        shared: Arc<RunShared>,
        events: EventSink,
        limits: SchedulerLimits,
    ) -> Arc<Self> {
        Arc::new(Self {
            setup,
            shared,
            events,
            workspace: limits.workspace,
            limits: limits.limits,
            tools: limits.tools,
            max_concurrent: limits.max_concurrent.max(1),
            max_tasks: limits.max_tasks,
            output_schema: limits.output_schema,
            item_images: limits.item_images,
            end_hook: limits.end_hook,
            slots: Mutex::default(),
            tasks: Mutex::default(),
            kits: Mutex::default(),
            watching: AtomicBool::new(false),
        })
    }

    /// The prompt and tools of sub-agent type `t`, built once per run.
    pub fn kit(&self, t: &SubagentType) -> Arc<Kit> {
        let mut kits = lock(&self.kits);
        if let Some(k) = kits.get(&t.name) {
            return k.clone();
        }
        let skills: Vec<&super::Skill> = self
            .setup
            .skills
            .iter()
            .filter(|k| {
                t.skills
                    .as_ref()
                    .is_none_or(|allowed| allowed.contains(&k.name))
            })
            .collect();
        let mut system = super::prompts::subagent_system(t, &skills, self.limits.allow_host_bash);
        if let Some(schema) = &self.output_schema {
            system.push('\n');
            system.push_str(&schema.instruction());
        }
        let kit = Arc::new(Kit {
            system: system.into(),
            tools: Arc::new(Toolset::new(super::registry::subagent_tools_seeing(
                t,
                &self.tools,
                self.setup.vision.contains(&t.model),
            ))),
        });
        kits.insert(t.name.clone(), kit.clone());
        kit
    }

    pub fn type_descriptions(&self) -> Vec<(String, String)> {
        self.setup
            .types
            .iter()
            .map(|t| (t.name.clone(), t.description.clone()))
            .collect()
    }

    /// An available sub-agent type by name.
    pub fn find_type(&self, name: &str) -> Option<Arc<SubagentType>> {
        self.setup.find(name).cloned()
    }

    pub fn max_tasks(&self) -> u32 {
        self.max_tasks
    }

    /// Accepts a task unless the run's task limit is reached; its id is the call id.
    pub fn accept(
        &self,
        call_id: &str,
        description: &str,
        prompt: &str,
        kind: Arc<SubagentType>,
    ) -> Option<Arc<TaskRecord>> {
        // The agent loop has made every call id of the lead's transcript unique already.
        self.accept_record(TaskRecord::new(call_id, description, prompt, kind))
    }

    /// Accepts a record built by the caller, unless the run's task limit is reached; the
    /// run's end hook hears its end.
    pub fn accept_record(&self, mut rec: TaskRecord) -> Option<Arc<TaskRecord>> {
        let mut tasks = lock(&self.tasks);
        if tasks.accepted >= self.max_tasks {
            return None;
        }
        rec.seq = tasks.accepted;
        rec.end_hook = self.end_hook.clone();
        let rec = Arc::new(rec);
        tasks.accepted += 1;
        tasks.live.insert(rec.seq, rec.clone());
        Some(rec)
    }

    /// Drops a task that has ended from the run's list; only its outcome is counted on.
    pub fn forget(&self, rec: &Arc<TaskRecord>) {
        let state = rec.state.get();
        if !state.is_terminal() {
            return;
        }
        let mut tasks = lock(&self.tasks);
        if tasks.live.remove(&rec.seq).is_some() {
            count(&mut tasks.ended, state);
        }
    }

    /// Takes a running slot now (`task_started`), or joins the queue (`task_queued`). Both
    /// events are emitted under the slots lock, so they follow the queue's order.
    pub fn admit(self: &Arc<Self>, rec: &Arc<TaskRecord>) -> Admission {
        let mut s = lock(&self.slots);
        if s.running < self.max_concurrent {
            s.running += 1;
            rec.start(&self.events);
            tracing::debug!(task_id = rec.id(), running = s.running, "task admitted");
            return Admission::Now;
        }
        self.watch_stop();
        if self.shared.control.cancel.is_cancelled() {
            // A stopped run queues nothing: the task is cancelled at once.
            rec.answer_slot(false);
        } else {
            s.waiting.push_back(rec.clone());
        }
        let position = s.waiting.len() as u32;
        tracing::debug!(task_id = rec.id(), position, "task queued");
        self.events.emit(Event::TaskQueued {
            task_id: rec.id().to_string(),
            description: rec.description().to_string(),
            subagent_type: rec.kind.name.clone(),
            position,
        });
        Admission::Queued { position }
    }

    /// A queued task waits on its slot alone, not also on the run's cancellation (a
    /// fan-out's queue would hold one cancellation future per task): when the run stops,
    /// this one watcher empties the queue, and each waiter, finding its slot dropped,
    /// cancels itself.
    fn watch_stop(self: &Arc<Self>) {
        if self.watching.swap(true, Ordering::SeqCst) {
            return;
        }
        // Tasks are only admitted inside the run's runtime.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (me, stop) = (Arc::downgrade(self), self.shared.control.cancel.clone());
        rt.spawn(async move {
            stop.cancelled().await;
            if let Some(me) = me.upgrade() {
                for rec in lock(&me.slots).waiting.drain(..) {
                    rec.answer_slot(false);
                }
            }
        });
    }

    /// Frees a slot and hands it to the first waiter still waiting. The waiter is marked
    /// started here, under the lock, so `task_started` events come in queue order however
    /// the waiters' tasks are scheduled.
    pub fn release(&self) {
        let mut s = lock(&self.slots);
        s.running = s.running.saturating_sub(1);
        // A stopped run starts nothing: its waiters cancel themselves.
        while s.running < self.max_concurrent && !self.shared.control.cancel.is_cancelled() {
            let Some(rec) = s.waiting.pop_front() else {
                break;
            };
            // A task cancelled while queued has its terminal state already: skip it.
            if !rec.start(&self.events) {
                continue;
            }
            rec.answer_slot(true);
            s.running += 1;
            tracing::debug!(
                task_id = rec.id(),
                running = s.running,
                "task admitted from the queue"
            );
        }
    }

    #[cfg(test)]
    pub fn live_tasks(&self) -> usize {
        lock(&self.tasks).live.len()
    }

    pub fn counts(&self) -> TaskCounts {
        let tasks = lock(&self.tasks);
        let mut c = TaskCounts {
            total: tasks.accepted,
            ..tasks.ended
        };
        for t in tasks.live.values() {
            count(&mut c, t.state.get());
        }
        c
    }

    /// At the end of a run: tasks still going are cancelled and get their terminal event.
    pub async fn shutdown(&self, control: &deerflow_agent::RunControl) {
        let pending: Vec<Arc<TaskRecord>> = lock(&self.tasks)
            .live
            .values()
            .filter(|t| !t.state.get().is_terminal())
            .cloned()
            .collect();
        if pending.is_empty() {
            return;
        }
        control.cancel.cancel();
        // Each task reports its own terminal event when it sees the cancellation; give them
        // a moment, then end the stragglers here.
        let deadline = Instant::now() + Duration::from_millis(400);
        while Instant::now() < deadline && pending.iter().any(|t| !t.state.get().is_terminal()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for t in pending {
            t.cancel(&self.events, &control.cancel_message());
        }
    }
}

fn count(c: &mut TaskCounts, state: TaskState) {
    match state {
        TaskState::Completed => c.completed += 1,
        TaskState::Failed => c.failed += 1,
        TaskState::TimedOut => c.timed_out += 1,
        TaskState::Cancelled => c.cancelled += 1,
        TaskState::Pending | TaskState::Running => {}
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
