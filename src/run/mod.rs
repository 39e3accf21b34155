//! Executes one run: wires the lead agent, the sub-agent scheduler, signals, the deadline
//! and the event writer together, and turns the outcome into `run_completed` and an exit
//! code. Everything from `run_started` on ends with exactly one `run_completed`.

pub mod each;
#[cfg(feature = "mcp")]
mod mcp;
#[cfg(not(feature = "mcp"))]
mod no_mcp;
pub mod output_file;
pub mod scratch;
mod signals;
mod spec;
pub mod state;
mod stdout_watch;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[cfg(not(feature = "mcp"))]
use no_mcp as mcp;
pub use spec::{LeadModel, RunSpec};

use crate::agent::guards::Budget;
use crate::agent::prompts::{self, DelegationInfo};
use crate::agent::{run_agent, Agent, AgentEnd, LeadObserver, RunControl, RunShared};
use crate::events::{start_writer, Event, EventSink, OnStdoutLost, Output, WarningCode};
use crate::model::AgentId;
use crate::outcome::{exit_code, status_for_cause, RunStatus, StopCause, EXIT_SIGPIPE};
use crate::subagent::record::EndHook;
use crate::subagent::scheduler::SchedulerLimits;
use crate::subagent::task_tool::TaskTool;
use crate::subagent::Scheduler;
use crate::tools::{ToolBox, ToolContext, Toolset};
use crate::usage::Ledger;

/// After the run is told to stop, how long the lead may take to wind down before it is
/// abandoned (the whole stop must finish within 2 s).
const WIND_DOWN: Duration = Duration::from_millis(1300);
/// A signal's whole stop, from the signal to the exit, with a margin under §8's 2 s.
const SIGNAL_STOP: Duration = Duration::from_millis(1800);
/// After a signal, how long the writer may wait for a reader that does not read. It is the
/// one wait of a stop that can take all it is given, so it ends well before `SIGNAL_STOP`:
/// a loaded machine still needs time to tear the run down after it.
const SIGNAL_DRAIN: Duration = Duration::from_millis(1400);

/// Runs `spec` to completion and returns the process exit code.
/// `run_id` is the id the process's logs already carry the trace of (`new_run_id`).
pub async fn execute(mut spec: RunSpec, run_id: String) -> i32 {
    // What tools detach is reparented to deerflow, so the end of the run finds it.
    crate::workspace::process::become_subreaper();
    let started = Instant::now();
    let control = Arc::new(RunControl::new(spec.timeout_seconds));
    let stdout_closed = Arc::new(AtomicBool::new(false));
    // Handlers first: a consumer that signals as soon as it sees `run_started` must get
    // `run_completed`, not the default disposition.
    signals::watch(
        control.clone(),
        spec.workspace.clone(),
        spec.limits.sandbox.clone(),
    );
    let stdout_failure: Arc<Mutex<Option<String>>> = Arc::default();
    let on_closed: OnStdoutLost = {
        let (control, closed) = (control.clone(), stdout_closed.clone());
        let failure = stdout_failure.clone();
        Arc::new(move |e: &std::io::Error| {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                closed.store(true, Ordering::SeqCst);
                control.stop(StopCause::StdoutClosed);
            } else {
                *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                control.stop(StopCause::StdoutFailed);
            }
        })
    };
    stdout_watch::watch(on_closed.clone());
    let item_total = item_total(&spec);
    let (events, writer) = start_writer(output_for(&spec, &run_id, on_closed, item_total));
    events.emit(run_started(&spec));
    for (code, message) in &spec.warnings {
        events.emit(Event::warning(*code, message.clone()));
    }
    for (tool, message) in &spec.unavailable_tools {
        events.emit(Event::tool_unavailable(tool, message.clone()));
    }
    if let Some(t) = spec.timeout_seconds {
        events.set_deadline(started + Duration::from_secs_f64(t));
        let c = control.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs_f64(t)).await;
            c.stop(StopCause::Timeout);
        });
    }
    // MCP tools join the registry before the scheduler and the lead take their tools from
    // it; the sandbox gets ready (a daemon reached, an image pulled) at the same time.
    let sandbox = spec.limits.sandbox.clone();
    let sandbox_start = async {
        tokio::select! {
            r = sandbox.start() => r.err(),
            _ = control.cancel.cancelled() => None,
        }
    };
    let ((mcp, mcp_failure), sandbox_failure) =
        tokio::join!(mcp::start(&mut spec, &events, &control), sandbox_start);
    let shared = Arc::new(RunShared {
        ledger: Arc::new(Ledger::new(spec.prices.clone())),
        budget: Budget::new(spec.max_tokens),
        loop_limits: spec.loop_limits.clone(),
        control: control.clone(),
        context: spec.context.clone(),
        stops: spec.stops.clone(),
    });
    let artifacts = Arc::new(Mutex::new(Vec::new()));
    let mut each = spec.each.take();
    let item_log = each.as_ref().map(|e| item_log(e, &spec, &control));
    let scheduler = spec.subagents.clone().map(|setup| {
        let setup = match &spec.state {
            Some(st) => state::tasks::with_ledger(&setup, st),
            None => setup,
        };
        let end_hook: Option<Arc<dyn EndHook>> = match (&item_log, &spec.state) {
            (Some(log), _) => Some(log.clone()),
            (None, Some(st)) => Some(Arc::new(state::tasks::TaskEnds(st.clone()))),
            (None, None) => None,
        };
        Scheduler::new(
            setup,
            shared.clone(),
            events.clone(),
            scheduler_limits(&spec, item_log.is_some(), end_hook),
        )
    });
    let lead_replay = spec.state.clone().filter(|_| item_log.is_none()).map(|st| {
        let record = spec.record.as_ref().map(|r| r.1.clone());
        state::lead::LeadReplay::new(st, record, scheduler.clone())
    });
    let end = match sandbox_failure.or(mcp_failure) {
        // No sandbox, or a required server is down: the run fails before the first model call.
        Some(error) => Ok(AgentEnd::Failed(error)),
        None if control.cancel.is_cancelled() => Ok(AgentEnd::Cancelled),
        None if item_log.is_some() => Ok(drive_items(
            each.take(),
            scheduler.as_ref(),
            &control,
            item_log.as_ref(),
            &spec,
        )
        .await),
        None => {
            let mut lead = lead_agent(&spec, &events, &control, &artifacts, scheduler.as_ref());
            if let Some(r) = &lead_replay {
                resume_lead(&mut lead, r);
            }
            drive_lead(lead, shared.clone(), spec.prompt.clone(), &control).await
        }
    };
    if let Some(s) = &scheduler {
        s.shutdown(&control).await;
    }
    // The sandbox's containers go on every path, before `run_completed` says the run is over.
    let sandbox_stop = tokio::time::timeout(sandbox_stop_bound(&control), sandbox.stop());
    let hurried = control.cancel.is_cancelled();
    let (_, _) = tokio::join!(mcp::stop(mcp, hurried), sandbox_stop);
    let tasks = with_resumed(
        scheduler.as_ref().map(|s| s.counts()).unwrap_or_default(),
        Resumed::of(item_log.as_deref(), lead_replay.as_deref()),
        &spec,
        &events,
    );
    let (status, final_message, error) = classify(end, control.cause(), &events, &spec);
    let (status, error) = match finish_results(item_log.as_deref(), &control).await {
        Ok(()) => (status, error),
        Err(why) => {
            if spec.json {
                crate::logging::stderr_line(&format!("deerflow: {why}"));
            }
            // A write error seen mid-run already failed the run with these words.
            let error = match error {
                Some(e) if e.contains(&why) => e,
                Some(e) => format!("{e}; {why}"),
                None => why,
            };
            // A reader that went away stopped the run as a closed stdout does (§4: 141,
            // `cancelled`); the file is not whole, which the error says.
            let status = match control.cause() {
                Some(StopCause::StdoutClosed) => status,
                _ => RunStatus::Failed,
            };
            (status, Some(error))
        }
    };
    // The files are whole before `run_completed` says so: a consumer reads them on that line.
    let (late, early): (Vec<_>, Vec<_>) = outputs(&spec, status, final_message.as_deref())
        .into_iter()
        .partition(|o| output_file::after_the_stream(&o.path));
    let (status, error) = match write_outputs(&early) {
        None => (status, error),
        Some((why, _)) => {
            if spec.json {
                crate::logging::stderr_line(&format!("deerflow: {why}"));
            }
            let error = error.map_or(why.clone(), |e| format!("{e}; {why}"));
            (RunStatus::Failed, Some(error))
        }
    };
    let mut code = exit_code(status, control.cause(), &tasks);
    events.emit(Event::RunCompleted {
        status,
        exit_code: code,
        final_message: final_message.clone(),
        error: error.clone(),
        duration_ms: started.elapsed().as_millis() as u64,
        turns: shared_turns(&spec),
        usage: shared.ledger.snapshot(),
        tasks,
        artifacts: existing_files(&spec, &artifacts),
        final_output: final_output(&spec, status, final_message.as_deref()),
    });
    drop(events);
    let give_up_at = drain_deadline(&control);
    let drained = writer
        .finish(|| {
            give_up_at.is_some_and(|t| Instant::now() >= t) || signalled_deadline_passed(&control)
        })
        .await;
    if !drained {
        crate::logging::warn("stdout is not being read: exiting without writing the last events");
        // A signal that cut the drain short decides the exit code, as it would have
        // decided `run_completed` had it come earlier.
        code = exit_code(status, control.cause(), &tasks);
    }
    // Our own stdout (`-o /dev/stdout`) follows the stream it carries; a FIFO waits for
    // its reader, who may read the stream first.
    match write_outputs(&late) {
        None => {}
        Some((_, true)) => code = EXIT_SIGPIPE,
        Some((why, false)) => {
            crate::logging::stderr_line(&format!("deerflow: {why}"));
            if matches!(code, 0 | 3..=8) {
                code = crate::outcome::EXIT_FAILED;
            }
            // A signal that ended the wait for a FIFO's reader decides the exit (§4's
            // first rows); its handler thread may set the cause a moment after the flag.
            if crate::events::stop_signalled_at().is_some() {
                code = signalled_code(&control, status, &tasks)
                    .await
                    .unwrap_or(code);
            }
        }
    }
    if stdout_closed.load(Ordering::SeqCst) {
        code = EXIT_SIGPIPE;
    }
    if let Some(why) = stdout_failure.lock().ok().and_then(|f| f.clone()) {
        // The stream could not say it: the one line goes to stderr (§12), exit 1.
        crate::logging::stderr_line(&format!("deerflow: cannot write to stdout: {why}"));
        code = crate::outcome::EXIT_FAILED;
    }
    // No child process outlives the run (§6): what a tool left running or detached. Only a
    // run that could start processes pays for the sweep of /proc.
    if spec.limits.allow_host_bash || !spec.mcp.is_empty() {
        spec.workspace.processes().kill_all();
        crate::workspace::process::kill_orphans();
    }
    code
}

/// The exit code of the signal whose raw flag is up, once its handler has named it.
async fn signalled_code(
    control: &RunControl,
    status: RunStatus,
    tasks: &crate::events::TaskCounts,
) -> Option<i32> {
    for _ in 0..50 {
        if let Some(c) = control.cause() {
            return Some(exit_code(status, Some(c), tasks));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// Until when the writer may drain. A run that ends normally waits for its reader however
/// slow (`run_completed` must be written); after a signal the whole stop must fit in 2 s
/// (contract §8), and after `--timeout` the drain gets 2 s more.
fn drain_deadline(control: &RunControl) -> Option<Instant> {
    match control.stopped() {
        Some((StopCause::Sigint | StopCause::Sigterm | StopCause::Sighup, at)) => {
            Some(at + SIGNAL_DRAIN)
        }
        Some((StopCause::Timeout, _)) => Some(Instant::now() + Duration::from_secs(2)),
        _ => None,
    }
}

/// How long removing the sandbox's containers may take: after a signal, what is left of the
/// 2 s stop (at least a little, so a quick removal still happens); otherwise long enough
/// for a slow daemon.
fn sandbox_stop_bound(control: &RunControl) -> Duration {
    match control.stopped() {
        Some((StopCause::Sigint | StopCause::Sigterm | StopCause::Sighup, at)) => (at
            + SIGNAL_STOP)
            .saturating_duration_since(Instant::now())
            .saturating_sub(Duration::from_millis(200))
            .max(Duration::from_millis(500)),
        _ => Duration::from_secs(15),
    }
}

/// A signal that arrives while the writer drains ends the drain as one before it would.
fn signalled_deadline_passed(control: &RunControl) -> bool {
    matches!(
        control.stopped(),
        Some((StopCause::Sigint | StopCause::Sigterm | StopCause::Sighup, at)) if Instant::now() >= at + SIGNAL_DRAIN
    )
}

/// An `--each` run's item count for the live view, counted on the side when the items are
/// a regular file and the view is drawn.
fn item_total(spec: &RunSpec) -> Option<crate::ui::ItemTotal> {
    let each = spec.each.as_ref().filter(|_| !spec.json)?;
    let total = crate::ui::ItemTotal::default();
    if let Some(path) = each
        .count_path
        .clone()
        .filter(|_| crate::ui::HumanView::live(spec.quiet))
    {
        each::count_in_background(path, each.shard, total.clone());
    }
    Some(total)
}

fn output_for(
    spec: &RunSpec,
    run_id: &str,
    on_closed: OnStdoutLost,
    items: Option<crate::ui::ItemTotal>,
) -> Output {
    if spec.json {
        Output::Json {
            run_id: run_id.to_string(),
            on_closed,
        }
    } else {
        Output::Human(Box::new(crate::ui::HumanView::new(
            spec.quiet, spec.color, on_closed, items,
        )))
    }
}

fn run_started(spec: &RunSpec) -> Event {
    let types = spec
        .subagents
        .as_ref()
        .map(|s| s.type_names())
        .unwrap_or_default();
    Event::RunStarted {
        schema_version: crate::events::SCHEMA_VERSION,
        version: env!("CARGO_PKG_VERSION").into(),
        model: spec.model.info.clone(),
        max_concurrent: spec.max_concurrent,
        max_tasks: started_task_limit(spec),
        max_turns: started_turn_limit(spec),
        timeout_seconds: spec.timeout_seconds,
        workspace: spec.workspace.root().display().to_string(),
        subagents_enabled: spec.subagents.is_some(),
        subagent_types: types,
        sandbox: spec.sandbox.clone(),
    }
}

/// The tasks the run may start: `--max-tasks` does not apply to `--each` (§15), whose
/// bound is the item limit, so that is what `run_started.max_tasks` reports.
fn started_task_limit(spec: &RunSpec) -> u32 {
    match spec.each {
        Some(_) => u32::try_from(each::items::MAX_ITEMS).unwrap_or(u32::MAX),
        None => spec.max_tasks,
    }
}

/// `--max-turns` is the lead's and does not apply to `--each` (§15): every item runs as
/// the `--agent` type, whose turn limit is what `run_started.max_turns` reports.
fn started_turn_limit(spec: &RunSpec) -> u32 {
    let item_type = spec
        .each
        .as_ref()
        .and_then(|each| spec.subagents.as_ref()?.find(&each.agent));
    item_type.map_or(spec.max_turns, |t| t.max_turns)
}

/// An `--each` run has no task limit (§15), and each item answers to the output schema.
/// `end_hook` hears every task's end: the item log's with `--each`, the ledger's in a lead
/// run with `--state`.
fn scheduler_limits(
    spec: &RunSpec,
    items: bool,
    end_hook: Option<Arc<dyn EndHook>>,
) -> SchedulerLimits {
    SchedulerLimits {
        workspace: spec.workspace.clone(),
        limits: spec.limits.clone(),
        tools: spec.tools.clone(),
        max_concurrent: spec.max_concurrent,
        max_tasks: if items { u32::MAX } else { spec.max_tasks },
        output_schema: if items {
            spec.output_schema.clone()
        } else {
            None
        },
        item_images: if items {
            spec.images.clone()
        } else {
            Vec::new()
        },
        end_hook,
    }
}

/// The record of an `--each` run's items: its `--results` file, truncated now. A closed
/// pipe behind it stops the run as a closed stdout would.
fn item_log(
    each: &each::EachSpec,
    spec: &RunSpec,
    control: &Arc<RunControl>,
) -> Arc<each::ItemLog> {
    let results = each.results.as_ref().and_then(|path| {
        let on_error: each::results::OnError = {
            let control = control.clone();
            Arc::new(move |pipe, _why: &str| {
                if pipe {
                    control.stop(StopCause::StdoutClosed);
                }
            })
        };
        let give_up = {
            let control = control.clone();
            Arc::new(move || signalled_deadline_passed(&control))
        };
        match each::results::ResultsFile::open(path, each.shard, on_error, give_up) {
            Ok(r) => Some(r),
            Err(why) => {
                // Checked before the run; what changed since ends the run before any item.
                crate::logging::stderr_line(&format!("deerflow: {why}"));
                control.stop(StopCause::StdoutFailed);
                None
            }
        }
    });
    let mut log = each::ItemLog::new(results, spec.output_schema.is_some(), spec.state.clone());
    log.record = spec.record.as_ref().map(|r| r.1.clone());
    Arc::new(log)
}

/// Runs the items of an `--each` run (the scheduler exists: `--each` always sets one up).
async fn drive_items(
    each: Option<each::EachSpec>,
    scheduler: Option<&Arc<Scheduler>>,
    control: &RunControl,
    log: Option<&Arc<each::ItemLog>>,
    spec: &RunSpec,
) -> AgentEnd {
    match (each, scheduler, log) {
        (Some(e), Some(s), Some(log)) => {
            each::drive(e, s, control, log.clone(), spec.max_concurrent as usize).await
        }
        _ => AgentEnd::Failed("internal error: --each without its scheduler".into()),
    }
}

/// What a run took from its `--state` ledger.
struct Resumed {
    items: u32,
    tasks: u32,
    responses: u32,
}

impl Resumed {
    fn of(log: Option<&each::ItemLog>, lead: Option<&state::lead::LeadReplay>) -> Self {
        Self {
            items: log.map_or(0, |l| l.resumed()),
            tasks: lead.map_or(0, |l| l.resumed_tasks()),
            responses: lead.map_or(0, |l| l.replayed()),
        }
    }
}

/// Adds the items and tasks taken from the `--state` ledger to the run's task counts (they
/// completed, in an earlier run) and says what was taken.
fn with_resumed(
    mut tasks: crate::events::TaskCounts,
    r: Resumed,
    spec: &RunSpec,
    events: &EventSink,
) -> crate::events::TaskCounts {
    let n = r.items + r.tasks;
    tasks.total += n;
    tasks.completed += n;
    tasks.resumed += n;
    let dir = spec.state.as_ref().map(|s| s.dir().display().to_string());
    let what = if r.items > 0 {
        format!("{} item(s)", r.items)
    } else {
        format!("{} lead response(s) and {} task(s)", r.responses, r.tasks)
    };
    if n + r.responses > 0 {
        events.emit(Event::warning(
            WarningCode::Resumed,
            format!(
                "{what} taken from the ledger in {} instead of run again",
                dir.unwrap_or_default()
            ),
        ));
    }
    tasks
}

/// Gives the lead the ledger's replay: its model answers from the record while the tool
/// results match, its tools answer from or are compared with the record.
fn resume_lead(lead: &mut Agent, replay: &Arc<state::lead::LeadReplay>) {
    lead.model = replay.model(lead.model.clone());
    lead.observer = Arc::new(LeadObserver {
        events: lead.events.clone(),
        marks: Some(replay.clone()),
    });
    let tools = replay.tools(lead.tools.tools.clone());
    lead.tools = Arc::new(Toolset::new(tools));
}

/// Puts the `--results` file in input order (every path that emits `run_completed`
/// passes here); the items' lines are all queued by now.
async fn finish_results(log: Option<&each::ItemLog>, control: &RunControl) -> Result<(), String> {
    let Some(results) = log.and_then(|l| l.results.as_ref()) else {
        return Ok(());
    };
    let give_up_at = drain_deadline(control);
    results
        .finish(|| {
            give_up_at.is_some_and(|t| Instant::now() >= t) || signalled_deadline_passed(control)
        })
        .await
}

fn lead_agent(
    spec: &RunSpec,
    events: &EventSink,
    control: &Arc<RunControl>,
    artifacts: &Arc<Mutex<Vec<String>>>,
    scheduler: Option<&Arc<Scheduler>>,
) -> Agent {
    let mut tools: ToolBox = spec.tools.for_lead(artifacts.clone());
    if spec.model.vision {
        tools.push(Arc::new(crate::tools::fs::ViewImageTool));
    }
    let delegation = scheduler.map(|s| {
        tools.push(Arc::new(TaskTool::new(s.clone())));
        DelegationInfo {
            max_concurrent: spec.max_concurrent,
            types: s.type_descriptions(),
        }
    });
    Agent {
        id: AgentId::Lead,
        caller: "lead".into(),
        model: spec.model.model.clone(),
        model_name: spec.model.info.name.clone(),
        system: lead_system(spec, delegation.as_ref()).into(),
        context: spec.context.clone(),
        tools: Arc::new(Toolset::new(tools)),
        max_turns: spec.max_turns,
        tool_ctx: ToolContext {
            workspace: spec.workspace.clone(),
            limits: spec.limits.clone(),
            cancel: control.cancel.clone(),
        },
        events: events.clone(),
        observer: Arc::new(LeadObserver {
            events: events.clone(),
            marks: None,
        }),
        progress: spec.lead_progress.clone(),
        output_schema: spec.output_schema.clone(),
        task_images: spec.images.clone(),
    }
}

fn lead_system(spec: &RunSpec, delegation: Option<&DelegationInfo>) -> String {
    let skills: Vec<_> = spec.skills.iter().collect();
    let mut s = prompts::lead_system(spec.limits.allow_host_bash, delegation);
    s.push_str(&crate::subagent::prompts::skills_section(&skills));
    // Every provider's lead is told, whether or not the provider also takes the schema.
    if let Some(schema) = &spec.output_schema {
        s.push('\n');
        s.push_str(&schema.instruction());
    }
    s
}

/// Runs the lead in its own task (a panic becomes a failed run) and gives it a bounded
/// time to wind down once the run is stopped.
async fn drive_lead(
    lead: Agent,
    shared: Arc<RunShared>,
    prompt: String,
    control: &RunControl,
) -> Result<AgentEnd, String> {
    let mut handle = tokio::spawn(async move { run_agent(&lead, &shared, prompt).await });
    let stopped = async {
        control.cancel.cancelled().await;
        tokio::time::sleep(WIND_DOWN).await;
    };
    tokio::select! {
        r = &mut handle => r.map_err(panic_message),
        _ = stopped => {
            handle.abort();
            Ok(AgentEnd::Cancelled)
        }
    }
}

fn panic_message(e: tokio::task::JoinError) -> String {
    if e.is_panic() {
        let p = e.into_panic();
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        format!("internal error: panic: {msg}")
    } else {
        "internal error: the lead agent's task was aborted".into()
    }
}

/// Status, final message and error of the run.
fn classify(
    end: Result<AgentEnd, String>,
    cause: Option<StopCause>,
    events: &EventSink,
    spec: &RunSpec,
) -> (RunStatus, Option<String>, Option<String>) {
    let end = match end {
        Ok(e) => e,
        Err(panic) => return (RunStatus::Failed, None, Some(panic)),
    };
    // A signal, a closed stdout or the deadline outrank how the lead ended (§4's order);
    // the budget does not outrank a final answer.
    if let Some(c) = cause.filter(|c| *c != StopCause::Budget) {
        return (status_for_cause(c), None, Some(cause_error(c, spec)));
    }
    match end {
        AgentEnd::Final { text, .. } => (RunStatus::Completed, text, None),
        AgentEnd::Clarify { question, options } => {
            events.emit(Event::ClarificationRequested {
                question: question.clone(),
                options,
            });
            (RunStatus::NeedsClarification, Some(question), None)
        }
        AgentEnd::MaxTurns { .. } => (
            RunStatus::MaxTurns,
            None,
            Some(format!(
                "Reached max_turns={} without a final answer",
                spec.max_turns
            )),
        ),
        AgentEnd::Budget { .. } => (RunStatus::BudgetExceeded, None, Some(budget_error(spec))),
        AgentEnd::Failed(e) => (RunStatus::Failed, None, Some(e)),
        AgentEnd::Cancelled if cause == Some(StopCause::Budget) => {
            (RunStatus::BudgetExceeded, None, Some(budget_error(spec)))
        }
        AgentEnd::Cancelled => (
            RunStatus::Failed,
            None,
            Some("internal error: the run was cancelled without a cause".into()),
        ),
    }
}

/// The parsed answer of a completed run under `--output-schema` (the loop has checked
/// that the final message is the JSON text).
fn final_output(
    spec: &RunSpec,
    status: RunStatus,
    final_message: Option<&str>,
) -> Option<serde_json::Value> {
    if spec.output_schema.is_none() || status != RunStatus::Completed {
        return None;
    }
    final_message.and_then(|m| serde_json::from_str(m).ok())
}

fn budget_error(spec: &RunSpec) -> String {
    format!(
        "Token budget exceeded ({} tokens)",
        spec.max_tokens.unwrap_or(0)
    )
}

fn cause_error(c: StopCause, spec: &RunSpec) -> String {
    match c {
        StopCause::Sigint => "Interrupted by SIGINT".into(),
        StopCause::Sigterm => "Terminated by SIGTERM".into(),
        StopCause::Sighup => "Terminated by SIGHUP".into(),
        StopCause::StdoutClosed => "stdout was closed".into(),
        StopCause::StdoutFailed => "cannot write to stdout".into(),
        StopCause::Timeout => format!(
            "Run timed out after {} seconds",
            crate::text::secs(spec.timeout_seconds.unwrap_or(0.0))
        ),
        StopCause::Budget => budget_error(spec),
    }
}

fn shared_turns(spec: &RunSpec) -> u32 {
    spec.lead_progress.turns()
}

/// The presented files that exist when the run ends.
fn existing_files(spec: &RunSpec, artifacts: &Mutex<Vec<String>>) -> Vec<String> {
    let listed = artifacts.lock().map(|a| a.clone()).unwrap_or_default();
    listed
        .into_iter()
        .filter(|p| {
            spec.workspace
                .resolve(p, crate::workspace::Access::Read)
                .is_ok_and(|abs| abs.is_file())
        })
        .collect()
}

/// A file the run writes at its end.
struct OutputJob {
    path: std::path::PathBuf,
    bytes: Vec<u8>,
    what: &'static str,
}

/// `-o` gets the final answer only when the run completed; `--record` always writes.
fn outputs(spec: &RunSpec, status: RunStatus, final_message: Option<&str>) -> Vec<OutputJob> {
    let mut v = Vec::new();
    if let (Some(path), RunStatus::Completed) = (&spec.output_last_message, status) {
        v.push(OutputJob {
            path: path.clone(),
            bytes: final_message.unwrap_or("").as_bytes().to_vec(),
            what: "the final answer to",
        });
    }
    if let Some((path, log)) = &spec.record {
        v.push(OutputJob {
            path: path.clone(),
            bytes: log.to_json().into_bytes(),
            what: "the cassette",
        });
    }
    v
}

/// Writes every job; the first failure, in words, when one failed (a full disk leaves a
/// replaced file as it was).
/// Also says whether every failure was a closed pipe (a reader of our own stdout that went
/// away: the run then ends as one whose stdout closed, quietly).
fn write_outputs(jobs: &[OutputJob]) -> Option<(String, bool)> {
    let mut failure: Option<(String, bool)> = None;
    for j in jobs {
        if let Err(e) = output_file::write(&j.path, &j.bytes) {
            let pipe = e.kind() == std::io::ErrorKind::BrokenPipe;
            let why = format!("cannot write {} {}: {e}", j.what, j.path.display());
            match &mut failure {
                None => failure = Some((why, pipe)),
                Some((_, all_pipes)) => *all_pipes &= pipe,
            }
        }
    }
    failure
}

/// A random UUID (v4 layout); its first 8 hex digits are the trace id.
pub fn new_run_id() -> String {
    let hex: String = (0..32)
        .map(|_| char::from_digit(fastrand::u32(0..16), 16).unwrap_or('0'))
        .collect();
    format!(
        "{}-{}-4{}-{}{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[13..16],
        ["8", "9", "a", "b"][fastrand::usize(0..4)],
        &hex[17..20],
        &hex[20..32]
    )
}
