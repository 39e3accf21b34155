//! `--each FILE` (contract §15): the prompt is a template run once per item of FILE, each
//! item a sub-agent task of the `--agent` type, with no lead agent. Items are read on a
//! thread of their own and taken only when a slot is free, so memory holds the items in
//! flight, not the file. `--results` gets one line per item as it ends (`results.rs`).
//!
//! An item's life has two places a record of it is kept: [`start`] (about to start: the
//! `--state` ledger may answer for it) and [`ItemLog::ended`] (ended, before its terminal
//! event is emitted: the ledger and `--results` get it there).

pub mod items;
pub mod results;
pub mod template;

use std::io::{BufReader, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::agent::{AgentEnd, RunControl};
use crate::events::Gate;
use crate::model::providers::replay::RecordLog;
use crate::model::AgentId;
use crate::run::state::hash::fingerprint;
use crate::run::state::ledger::ItemEnd;
use crate::run::state::tasks::record_resumed;
use crate::run::state::StateDir;
use crate::subagent::item::{run_item, Resumed};
use crate::subagent::record::{EndHook, Ended, TaskRecord};
use crate::subagent::{Scheduler, SubagentType};
use crate::tools::task_end::TaskStatus;
use items::{read_items, Next, Prepared, Shard, MAX_ITEMS};
use results::{ResultLine, ResultsFile};
use template::Template;

/// Items read ahead of the free slots: a few, so a slot that frees finds one waiting
/// (each may hold a prompt of up to 1 MiB).
const READ_AHEAD: usize = 16;
/// After the run is told to stop, how long items in flight may take to end on their own.
const WIND_DOWN: Duration = Duration::from_millis(1300);

/// What `--each` needs, checked and opened before `run_started`.
pub struct EachSpec {
    /// The items: the file, or stdin.
    pub input: Box<dyn Read + Send>,
    pub template: Template,
    /// The sub-agent type every item runs as.
    pub agent: String,
    pub shard: Shard,
    pub results: Option<PathBuf>,
    /// The items' file when it is a regular one, which the live view may count.
    pub count_path: Option<PathBuf>,
}

/// Where the end of every item is kept: the `--state` ledger (on disk before the event
/// says it) and the `--results` file.
pub struct ItemLog {
    pub results: Option<ResultsFile>,
    /// Whether answers are JSON under `--output-schema` (each line's `final_output`).
    pub schema: bool,
    pub state: Option<Arc<StateDir>>,
    /// `--record`'s log: it gets the responses of the items taken from the ledger.
    pub record: Option<Arc<RecordLog>>,
    /// Items taken from the ledger instead of run.
    pub resumed: AtomicU32,
}

impl ItemLog {
    pub fn new(results: Option<ResultsFile>, schema: bool, state: Option<Arc<StateDir>>) -> Self {
        Self {
            results,
            schema,
            state,
            record: None,
            resumed: AtomicU32::new(0),
        }
    }

    /// The first write error, which stops the run from reading more items.
    fn failure(&self) -> Option<String> {
        let state = self.state.as_ref().and_then(|s| s.failure());
        state.or_else(|| self.results.as_ref().and_then(ResultsFile::failure))
    }

    /// How many items were taken from the ledger.
    pub fn resumed(&self) -> u32 {
        self.resumed.load(Ordering::Relaxed)
    }

    /// Sends an item's result line (a no-op without `--results`).
    fn result_line(&self, index: u64, status: TaskStatus, text: &str, end: Recorded) {
        let Some(results) = &self.results else {
            return;
        };
        let completed = status == TaskStatus::Completed;
        let final_output = if completed && self.schema {
            serde_json::from_str(text).ok()
        } else {
            None
        };
        let line = ResultLine {
            index,
            status: status.as_str(),
            result: completed.then_some(text),
            final_output,
            error: (!completed).then_some(text),
            usage: end.usage,
            duration_ms: end.duration_ms,
            resumed: end.resumed,
        };
        results.send(&line);
    }
}

/// What a result line reports besides the text.
struct Recorded {
    usage: crate::usage::UsageTotals,
    duration_ms: u64,
    resumed: bool,
}

impl EndHook for ItemLog {
    fn ended(&self, rec: &TaskRecord, end: &Ended<'_>) -> Option<Gate> {
        let index = rec.item?;
        let gate = self.state.as_ref().and_then(|state| {
            state.item_ended(&ItemEnd {
                index,
                content: fingerprint(rec.prompt().as_bytes()),
                status: end.status.as_str().to_string(),
                text: end.text.to_string(),
                usage: end.usage,
                turns: end.turns,
                duration_ms: end.duration_ms,
            })
        });
        let recorded = Recorded {
            usage: end.usage,
            duration_ms: end.duration_ms,
            resumed: false,
        };
        self.result_line(index, end.status, end.text, recorded);
        gate
    }
}

/// Runs every item of `each` (at most `max_concurrent` at once) and says how the run
/// ended: `Final` without text when the input was read to its end, `Failed` when it could
/// not be (too many items, a read or results error) once the items in flight ended,
/// `Cancelled` when the run was stopped.
pub async fn drive(
    each: EachSpec,
    sched: &Arc<Scheduler>,
    control: &RunControl,
    log: Arc<ItemLog>,
    max_concurrent: usize,
) -> AgentEnd {
    let Some(kind) = sched.find_type(&each.agent) else {
        return AgentEnd::Failed(format!(
            "internal error: sub-agent type '{}' was not set up",
            each.agent
        ));
    };
    let mut rx = match spawn_reader(each.input, each.template, each.shard) {
        Ok(rx) => rx,
        Err(e) => return AgentEnd::Failed(format!("cannot start reading the items: {e}")),
    };
    let mut inflight = JoinSet::new();
    let mut failure = None;
    let max = max_concurrent.max(1);
    loop {
        if control.cancel.is_cancelled() {
            break;
        }
        if let Some(e) = log.failure() {
            failure = Some(e);
            break;
        }
        if inflight.len() >= max {
            tokio::select! {
                _ = inflight.join_next() => {}
                _ = control.cancel.cancelled() => {}
            }
            continue;
        }
        tokio::select! {
            biased;
            _ = control.cancel.cancelled() => {}
            Some(_) = inflight.join_next(), if !inflight.is_empty() => {}
            next = rx.recv() => match next {
                Some(Next::Item(p)) => start(sched, &kind, &log, p, &mut inflight),
                Some(Next::End(Ok(()))) | None => break,
                Some(Next::End(Err(e))) => {
                    failure = Some(e);
                    break;
                }
            },
        }
    }
    drop(rx);
    wait_for(&mut inflight, control).await;
    if control.cancel.is_cancelled() {
        return AgentEnd::Cancelled;
    }
    match failure.or_else(|| log.failure()) {
        Some(e) => AgentEnd::Failed(e),
        None => AgentEnd::Final {
            text: None,
            stop_reason: None,
        },
    }
}

/// Waits for the items in flight; once the run is stopped, only for a bounded wind-down
/// (the scheduler's shutdown ends the stragglers, each with its terminal event).
async fn wait_for(inflight: &mut JoinSet<()>, control: &RunControl) {
    let wind_down = async {
        control.cancel.cancelled().await;
        tokio::time::sleep(WIND_DOWN).await;
    };
    tokio::pin!(wind_down);
    loop {
        tokio::select! {
            r = inflight.join_next() => if r.is_none() { return },
            _ = &mut wind_down => break,
        }
    }
    // Left to end as they will; each releases its slot and is counted when it does.
    inflight.detach_all();
}

/// An item is about to start: one the ledger holds as completed (same index, same
/// prompt) is reported from it with `resumed: true` instead of run. The run's `--image`s
/// (§14) belong to every item's task message, which is `prompt`.
fn start(
    sched: &Arc<Scheduler>,
    kind: &Arc<SubagentType>,
    log: &Arc<ItemLog>,
    item: Prepared,
    inflight: &mut JoinSet<()>,
) {
    let (prompt, problem) = match item.prompt {
        Ok(p) => (p, None),
        Err(why) => (String::new(), Some(why)),
    };
    if problem.is_none() && resume(sched, kind, log, item.index, &prompt) {
        return;
    }
    if let Some(rec) = sched.start_item(item.index, &prompt, kind.clone()) {
        inflight.spawn(run_item(sched.clone(), rec, problem));
    }
}

/// Reports item `index` from the ledger when it completed there; whether it did.
fn resume(sched: &Scheduler, kind: &SubagentType, log: &ItemLog, index: u64, prompt: &str) -> bool {
    let Some(state) = &log.state else {
        return false;
    };
    let Some(done) = state.take_completed(index, &fingerprint(prompt.as_bytes())) else {
        return false;
    };
    log.resumed.fetch_add(1, Ordering::Relaxed);
    if let Some(record) = &log.record {
        let agent = AgentId::Task {
            description: format!("item {index}"),
            task_id: format!("item-{index}"),
        };
        record_resumed(record, state, &format!("item-{index}"), agent);
    }
    let recorded = Recorded {
        usage: done.usage,
        duration_ms: done.duration_ms,
        resumed: true,
    };
    log.result_line(index, TaskStatus::Completed, &done.text, recorded);
    let r = Resumed {
        result: &done.text,
        usage: done.usage,
        turns: done.turns,
        duration_ms: done.duration_ms,
    };
    sched.resume_item(index, kind, r);
    true
}

/// Counts the items of `path` (this shard's) on a thread of its own, for the live view's
/// queue and ETA; a file that cannot be read again is simply not counted.
pub fn count_in_background(path: PathBuf, shard: Shard, total: crate::ui::ItemTotal) {
    let _ = std::thread::Builder::new()
        .name("deerflow-count".into())
        .spawn(move || {
            if let Ok(f) = std::fs::File::open(&path) {
                let input = BufReader::with_capacity(64 * 1024, f);
                if let Ok(n) = items::count_items(input, shard, MAX_ITEMS) {
                    total.set(n);
                }
            }
        });
}

/// Reads the items on a thread of its own, a few ahead of the run.
fn spawn_reader(
    input: Box<dyn Read + Send>,
    template: Template,
    shard: Shard,
) -> std::io::Result<mpsc::Receiver<Next>> {
    let (tx, rx) = mpsc::channel(READ_AHEAD);
    std::thread::Builder::new()
        .name("deerflow-items".into())
        .spawn(move || {
            let input = BufReader::with_capacity(64 * 1024, input);
            read_items(input, &template, shard, MAX_ITEMS, |n| {
                tx.blocking_send(n).is_ok()
            });
        })?;
    Ok(rx)
}
