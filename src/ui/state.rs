//! The live view's state, kept apart from the terminal: `ViewState::apply` folds events
//! into it and the `*_line` functions render it to plain strings, so tests drive it
//! without a TTY. Colour and bars are the renderer's business (`live.rs`).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use super::items::{ItemProgress, ItemTotal};
use crate::events::{Envelope, Event, TaskMessage};

/// What the lead agent is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeadPhase {
    /// Before `run_started`.
    Starting,
    /// A model call is in flight: after `run_started`, and after the last tool result of a
    /// turn, until the next `usage` event.
    Thinking,
    /// The model answered; its tool calls (if any) have not been reported yet.
    Responding,
    /// Tools are running (see `ViewState::lead_tools`).
    Tools,
}

/// One running sub-agent.
#[derive(Debug, Clone)]
pub struct TaskView {
    pub id: String,
    pub subagent_type: String,
    pub description: String,
    /// Model calls so far (one `usage` event each).
    pub turns: u32,
    /// The tools of its latest assistant message.
    pub last_tool: Option<String>,
    /// Tool calls of that message whose results are still out; none: a model call is
    /// in flight.
    pub tools_out: usize,
    pub tokens: u64,
    pub started: Instant,
}

/// How a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Completed,
    Failed,
    TimedOut,
    Cancelled,
}

impl Ending {
    pub fn glyph(self) -> &'static str {
        match self {
            Ending::Completed => "✓",
            Ending::Failed => "✗",
            Ending::TimedOut => "⏱",
            Ending::Cancelled => "⊘",
        }
    }
}

/// A task's terminal event, as one line to print above the bars.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub ending: Ending,
    pub line: String,
}

#[derive(Debug, Default)]
pub struct ViewState {
    phase: Option<LeadPhase>,
    lead_turns: u32,
    /// Every reported token of the run so far (lead and sub-agents).
    run_tokens: u64,
    /// The lead's tools in flight: call id → name.
    lead_tools: HashMap<String, String>,
    /// Tasks waiting for a slot: id → (type, description), for the line a task cancelled
    /// while queued gets.
    queued: HashMap<String, (String, String)>,
    /// Running sub-agents, oldest first.
    running: Vec<TaskView>,
    finished: u32,
    /// The lead's latest text, printed once a tool call follows it (the final answer goes
    /// to stdout instead).
    pending_text: Option<String>,
    /// An `--each` run's item progress, shown instead of the lead.
    items: Option<ItemProgress>,
}

impl ViewState {
    pub fn new() -> Self {
        Self::default()
    }

    /// The state of an `--each` run, whose item count `total` gives once it is known.
    pub fn for_items(total: ItemTotal) -> Self {
        Self {
            items: Some(ItemProgress::new(total)),
            ..Self::default()
        }
    }

    /// Whether this is an `--each` run.
    pub fn is_items(&self) -> bool {
        self.items.is_some()
    }

    /// The first line of the view: the items' progress, else the lead's.
    pub fn headline(&self, now: Instant) -> String {
        match &self.items {
            Some(p) => p.line(now),
            None => self.lead_line(),
        }
    }

    pub fn phase(&self) -> LeadPhase {
        self.phase.unwrap_or(LeadPhase::Starting)
    }

    pub fn running(&self) -> &[TaskView] {
        &self.running
    }

    pub fn queued(&self) -> usize {
        self.queued.len()
    }

    /// Folds one event in. Returns what to print above the bars: the lead's text once a
    /// tool call follows it, and a task's summary when it ends.
    pub fn apply(&mut self, env: &Envelope, now: Instant) -> Option<Printed> {
        match (&env.event, env.task_id.as_deref()) {
            (Event::RunStarted { .. }, _) => self.phase = Some(LeadPhase::Thinking),
            (
                Event::Usage {
                    total_tokens,
                    resumed,
                    ..
                },
                task,
            ) => {
                // A replayed response's tokens were spent by an earlier run.
                let n = if *resumed {
                    0
                } else {
                    total_tokens.unwrap_or(0)
                };
                self.run_tokens = self.run_tokens.saturating_add(n);
                match task {
                    None => {
                        self.lead_turns += 1;
                        self.phase = Some(LeadPhase::Responding);
                    }
                    Some(id) => {
                        if let Some(t) = self.task_mut(id) {
                            t.turns += 1;
                            t.tokens = t.tokens.saturating_add(n);
                        }
                    }
                }
            }
            (Event::Message { text, .. }, None) => self.pending_text = Some(text.clone()),
            (Event::ToolCall { call_id, name, .. }, None) => {
                self.lead_tools.insert(call_id.clone(), name.clone());
                self.phase = Some(LeadPhase::Tools);
                if let Some(t) = self.pending_text.take() {
                    return Some(Printed::LeadText(t));
                }
            }
            (Event::ToolResult { call_id, .. }, None) => {
                self.lead_tools.remove(call_id);
                if self.lead_tools.is_empty() {
                    self.phase = Some(LeadPhase::Thinking);
                }
            }
            (
                Event::TaskQueued {
                    task_id,
                    description,
                    subagent_type,
                    ..
                },
                _,
            ) => {
                let what = (subagent_type.clone(), description.clone());
                self.queued.insert(task_id.clone(), what);
            }
            (
                Event::TaskStarted {
                    task_id,
                    description,
                    subagent_type,
                    ..
                },
                _,
            ) => {
                if let Some(p) = &mut self.items {
                    p.started(now);
                }
                self.queued.remove(task_id);
                self.running.push(TaskView {
                    id: task_id.clone(),
                    subagent_type: subagent_type.clone(),
                    description: description.clone(),
                    turns: 0,
                    last_tool: None,
                    tools_out: 0,
                    tokens: 0,
                    started: now,
                });
            }
            (
                Event::TaskRunning {
                    task_id, message, ..
                },
                _,
            ) => {
                if let Some(t) = self.task_mut(task_id) {
                    match tool_names(message) {
                        Some((names, n)) => {
                            t.last_tool = Some(names);
                            t.tools_out = n;
                        }
                        None if is_tool_result(message) => {
                            t.tools_out = t.tools_out.saturating_sub(1)
                        }
                        None => {}
                    }
                }
            }
            (
                Event::TaskCompleted {
                    task_id,
                    usage,
                    turns,
                    duration_ms,
                    stop_reason,
                    ..
                },
                _,
            ) => {
                let mut detail = format!(
                    "{} · {} tokens",
                    plural(*turns, "turn"),
                    tokens(usage.total_tokens)
                );
                if let Some(r) = stop_reason {
                    detail.push_str(&format!(" · {r}"));
                }
                let printed = self.end(task_id, Ending::Completed, &detail, *duration_ms);
                // Thousands of items: only those that did not complete get a line.
                return self.items.is_none().then_some(printed);
            }
            (
                Event::TaskFailed {
                    task_id,
                    error,
                    duration_ms,
                    ..
                },
                _,
            ) => {
                return Some(self.end(
                    task_id,
                    Ending::Failed,
                    &format!("failed: {}", short(error, 120)),
                    *duration_ms,
                ));
            }
            (
                Event::TaskTimedOut {
                    task_id,
                    error,
                    duration_ms,
                    ..
                },
                _,
            ) => {
                return Some(self.end(task_id, Ending::TimedOut, &short(error, 120), *duration_ms));
            }
            (
                Event::TaskCancelled {
                    task_id,
                    error,
                    duration_ms,
                    ..
                },
                _,
            ) => {
                return Some(self.end(
                    task_id,
                    Ending::Cancelled,
                    &format!("cancelled: {}", short(error, 120)),
                    *duration_ms,
                ));
            }
            _ => {}
        }
        None
    }

    fn task_mut(&mut self, id: &str) -> Option<&mut TaskView> {
        self.running.iter_mut().find(|t| t.id == id)
    }

    fn end(&mut self, id: &str, ending: Ending, detail: &str, duration_ms: u64) -> Printed {
        self.finished += 1;
        if let Some(p) = &mut self.items {
            p.ended(ending == Ending::Completed);
        }
        let queued = self.queued.remove(id);
        let task = self
            .running
            .iter()
            .position(|t| t.id == id)
            .map(|i| self.running.remove(i));
        let shown = |ty: &str, description: &str| {
            format!(
                "{} [{}] {}",
                short(id, 40),
                short(ty, 40),
                short(description, 60)
            )
        };
        let line = match (&task, &queued) {
            (Some(t), _) => format!(
                "{} {} · {detail} · {}",
                ending.glyph(),
                shown(&t.subagent_type, &t.description),
                crate::text::tenths(duration_ms)
            ),
            // It never ran: no time of its own to show.
            (None, Some((ty, description))) => format!(
                "{} {} · {detail} while queued",
                ending.glyph(),
                shown(ty, description)
            ),
            (None, None) => format!(
                "{} {} · {detail} · {}",
                ending.glyph(),
                short(id, 40),
                crate::text::tenths(duration_ms)
            ),
        };
        Printed::Task(Finished { ending, line })
    }

    /// The lead's line: its phase, turns, the run's tokens so far and the tasks' counts.
    pub fn lead_line(&self) -> String {
        let what = match self.phase() {
            LeadPhase::Starting => "starting".to_string(),
            LeadPhase::Thinking => "thinking".to_string(),
            LeadPhase::Responding => "responding".to_string(),
            LeadPhase::Tools => format!("running {}", tool_summary(self.lead_tools.values())),
        };
        let mut s = format!(
            "lead · {what} · turn {} · {} tokens",
            (self.lead_turns + u32::from(self.phase() == LeadPhase::Thinking)).max(1),
            tokens(self.run_tokens)
        );
        if !self.running.is_empty() {
            s.push_str(&format!(" · {} running", self.running.len()));
        }
        if !self.queued.is_empty() {
            s.push_str(&format!(" · {} queued", self.queued.len()));
        }
        if self.finished > 0 {
            s.push_str(&format!(" · {} done", self.finished));
        }
        s
    }

    /// The line for "and N more" when only the first `shown` tasks get a line of their own.
    pub fn more_line(&self, shown: usize) -> Option<String> {
        let rest = self.running.len().saturating_sub(shown);
        (rest > 0).then(|| format!("… and {rest} more running"))
    }
}

/// What `apply` asks to print above the bars.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Printed {
    LeadText(String),
    Task(Finished),
}

/// A running task's line: id, type, description, turn, last tool, tokens, elapsed.
pub fn task_line(t: &TaskView, now: Instant) -> String {
    let thinking = t.tools_out == 0;
    let doing = match (&t.last_tool, thinking) {
        (Some(tool), false) => tool.clone(),
        (Some(tool), true) => format!("thinking (last: {tool})"),
        (None, _) => "thinking".to_string(),
    };
    format!(
        "{} [{}] {} · turn {} · {doing} · {} tokens · {}",
        short(&t.id, 40),
        short(&t.subagent_type, 40),
        short(&t.description, 60),
        t.turns + u32::from(thinking),
        tokens(t.tokens),
        crate::text::clock(now.saturating_duration_since(t.started))
    )
}

/// `ls, task×3`: tool names in order, repeated ones counted.
fn tool_summary<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for n in names {
        *counts.entry(n.as_str()).or_default() += 1;
    }
    // Names come from the model: one short line each, nothing a terminal would obey.
    counts
        .into_iter()
        .map(|(n, c)| {
            let n = short(n, 40);
            if c > 1 {
                format!("{n}×{c}")
            } else {
                n
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn is_tool_result(message: &TaskMessage) -> bool {
    matches!(message, TaskMessage::Tool { .. })
}

/// The tool names of a sub-agent's assistant message, if it called any, and how many.
fn tool_names(message: &TaskMessage) -> Option<(String, usize)> {
    let TaskMessage::Assistant { tool_calls, .. } = message else {
        return None;
    };
    let names = tool_calls.iter().map(|c| &c.name);
    (!tool_calls.is_empty()).then(|| (tool_summary(names), tool_calls.len()))
}

fn plural(n: u32, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// `812`, `12.3k`, `1.2M`.
pub fn tokens(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// One line of at most `max` characters, control characters (newlines, escapes that would
/// move the cursor) made spaces.
pub fn short(s: &str, max: usize) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    crate::text::clip(&one_line, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{TaskToolCall, ToolStatus};
    use crate::usage::UsageTotals;
    use serde_json::json;
    use std::time::Duration;

    fn lead(event: Event) -> Envelope {
        Envelope {
            event,
            task_id: None,
            gate: None,
        }
    }

    fn inside(task: &str, event: Event) -> Envelope {
        Envelope {
            event,
            task_id: Some(task.into()),
            gate: None,
        }
    }

    fn run_started() -> Event {
        Event::RunStarted {
            schema_version: 1,
            version: "0".into(),
            model: crate::events::ModelInfo {
                name: "m".into(),
                provider: "replay".into(),
                model: "m".into(),
            },
            max_concurrent: 2,
            max_tasks: 16,
            max_turns: 100,
            timeout_seconds: None,
            workspace: ".".into(),
            subagents_enabled: true,
            subagent_types: vec!["general-purpose".into()],
            sandbox: crate::events::SandboxInfo {
                use_: crate::workspace::sandbox::SandboxKind::Local,
                image: None,
            },
        }
    }

    fn usage(caller: &str, total: Option<u64>) -> Event {
        Event::Usage {
            caller: caller.into(),
            model: "m".into(),
            input_tokens: total,
            output_tokens: total.map(|_| 0),
            total_tokens: total,
            cache_read_tokens: None,
            reported: total.is_some(),
            resumed: false,
        }
    }

    fn call(id: &str, name: &str) -> Event {
        Event::ToolCall {
            call_id: id.into(),
            name: name.into(),
            arguments: json!({}).into(),
            resumed: false,
        }
    }

    fn result(id: &str, name: &str) -> Event {
        Event::ToolResult {
            call_id: id.into(),
            name: name.into(),
            status: ToolStatus::Ok,
            output: String::new(),
            truncated: false,
            duration_ms: 1,
            resumed: false,
        }
    }

    fn started(id: &str, description: &str) -> Event {
        Event::TaskStarted {
            task_id: id.into(),
            item_index: None,
            description: description.into(),
            subagent_type: "general-purpose".into(),
            model: "m".into(),
            max_turns: 10,
            timeout_seconds: 900.0,
            resumed: false,
        }
    }

    fn running(id: &str, message: TaskMessage, total: u64) -> Event {
        Event::TaskRunning {
            task_id: id.into(),
            item_index: None,
            message_index: 1,
            message,
            usage: UsageTotals {
                input_tokens: total,
                output_tokens: 0,
                total_tokens: total,
            },
        }
    }

    fn totals(total: u64) -> UsageTotals {
        UsageTotals {
            input_tokens: total,
            output_tokens: 0,
            total_tokens: total,
        }
    }

    #[test]
    fn tool_names_from_the_model_cannot_drive_the_terminal() {
        let now = Instant::now();
        let mut s = ViewState::new();
        s.apply(&lead(run_started()), now);
        s.apply(&lead(call("c1", "\u{1b}]52;c;aGk=\u{7}ls\u{1b}[2J")), now);
        let line = s.lead_line();
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(line.contains("ls"), "{line}");
    }

    #[test]
    fn lead_thinks_while_a_model_call_is_in_flight() {
        let now = Instant::now();
        let mut s = ViewState::new();
        assert_eq!(s.lead_line(), "lead · starting · turn 1 · 0 tokens");
        s.apply(&lead(run_started()), now);
        assert_eq!(s.phase(), LeadPhase::Thinking);
        assert_eq!(s.lead_line(), "lead · thinking · turn 1 · 0 tokens");

        s.apply(&lead(usage("lead", Some(1200))), now);
        assert_eq!(s.phase(), LeadPhase::Responding);
        let text = Event::Message {
            role: "assistant".into(),
            text: "let me look".into(),
            resumed: false,
        };
        assert_eq!(s.apply(&lead(text), now), None);
        // The text shows once a tool call follows it (else it is the final answer).
        assert_eq!(
            s.apply(&lead(call("c1", "ls")), now),
            Some(Printed::LeadText("let me look".into()))
        );
        s.apply(&lead(call("c2", "task")), now);
        s.apply(&lead(call("c3", "task")), now);
        assert_eq!(s.phase(), LeadPhase::Tools);
        assert_eq!(
            s.lead_line(),
            "lead · running ls, task×2 · turn 1 · 1.2k tokens"
        );
        s.apply(&lead(result("c1", "ls")), now);
        assert_eq!(
            s.lead_line(),
            "lead · running task×2 · turn 1 · 1.2k tokens"
        );
        s.apply(&lead(result("c3", "task")), now);
        s.apply(&lead(result("c2", "task")), now);
        // All results in: the next model call is in flight.
        assert_eq!(s.phase(), LeadPhase::Thinking);
        assert_eq!(s.lead_line(), "lead · thinking · turn 2 · 1.2k tokens");
        // Unreported usage still counts the turn.
        s.apply(&lead(usage("lead", None)), now);
        assert_eq!(s.lead_line(), "lead · responding · turn 2 · 1.2k tokens");
        // A response replayed from the ledger: its turn, not its tokens (spent before).
        let mut resumed = usage("lead", Some(5000));
        if let Event::Usage { resumed: r, .. } = &mut resumed {
            *r = true;
        }
        s.apply(&lead(resumed), now);
        assert_eq!(s.lead_line(), "lead · responding · turn 3 · 1.2k tokens");
    }

    #[test]
    fn a_task_line_from_started_to_running_to_terminal() {
        let t0 = Instant::now();
        let mut s = ViewState::new();
        s.apply(&lead(run_started()), t0);
        s.apply(&lead(call("t1", "task")), t0);
        s.apply(&lead(started("t1", "count lines")), t0);
        assert_eq!(s.running().len(), 1);
        let line = |s: &ViewState, secs| task_line(&s.running()[0], t0 + Duration::from_secs(secs));
        assert_eq!(
            line(&s, 0),
            "t1 [general-purpose] count lines · turn 1 · thinking · 0 tokens · 0s"
        );

        s.apply(
            &inside("t1", usage("subagent:general-purpose", Some(420))),
            t0,
        );
        let call = |id: &str, name: &str| TaskToolCall {
            id: id.into(),
            name: name.into(),
            arguments: json!({}).into(),
        };
        let calls = TaskMessage::Assistant {
            text: String::new(),
            tool_calls: vec![call("a", "glob"), call("b", "grep")],
            reasoning: None,
        };
        s.apply(&inside("t1", running("t1", calls, 420)), t0);
        assert_eq!(
            line(&s, 3),
            "t1 [general-purpose] count lines · turn 1 · glob, grep · 420 tokens · 3s"
        );
        let tool = |name: &str| TaskMessage::Tool {
            text: "x".into(),
            tool_call_id: "a".into(),
            name: name.into(),
            status: ToolStatus::Ok,
        };
        s.apply(&inside("t1", running("t1", tool("glob"), 420)), t0);
        assert!(
            line(&s, 3).contains("turn 1 · glob, grep"),
            "one result is still out"
        );
        s.apply(&inside("t1", running("t1", tool("grep"), 420)), t0);
        assert_eq!(
            line(&s, 75),
            "t1 [general-purpose] count lines · turn 2 · thinking (last: glob, grep) · 420 tokens · 1m15s"
        );
        assert_eq!(
            s.lead_line(),
            "lead · running task · turn 1 · 420 tokens · 1 running"
        );

        let done = Event::TaskCompleted {
            task_id: "t1".into(),
            item_index: None,
            result: "r".into(),
            usage: totals(950),
            turns: 2,
            duration_ms: 1340,
            stop_reason: None,
            resumed: false,
        };
        let printed = s.apply(&lead(done), t0);
        assert_eq!(
            printed,
            Some(Printed::Task(Finished {
                ending: Ending::Completed,
                line: "✓ t1 [general-purpose] count lines · 2 turns · 950 tokens · 1.3s".into()
            }))
        );
        assert!(s.running().is_empty());
        assert_eq!(
            s.lead_line(),
            "lead · running task · turn 1 · 420 tokens · 1 done"
        );
    }

    #[test]
    fn an_items_run_shows_item_progress_and_prints_only_items_that_failed() {
        let total = ItemTotal::default();
        total.set(5);
        let mut s = ViewState::for_items(total);
        let t0 = Instant::now();
        s.apply(&lead(run_started()), t0);
        for id in ["item-0", "item-1", "item-2"] {
            s.apply(&lead(started(id, id)), t0);
        }
        let done = Event::TaskCompleted {
            task_id: "item-0".into(),
            item_index: Some(0),
            result: "r".into(),
            usage: totals(1),
            turns: 1,
            duration_ms: 10,
            stop_reason: None,
            resumed: false,
        };
        assert_eq!(s.apply(&lead(done), t0), None);
        let failed = Event::TaskFailed {
            task_id: "item-1".into(),
            item_index: Some(1),
            error: "Item 1: the item is not UTF-8".into(),
            usage: totals(0),
            turns: 0,
            duration_ms: 0,
            stop_reason: None,
        };
        assert!(matches!(
            s.apply(&lead(failed), t0),
            Some(Printed::Task(Finished {
                ending: Ending::Failed,
                ..
            }))
        ));
        assert_eq!(
            s.headline(t0 + std::time::Duration::from_secs(1)),
            "items · 2 done (1 failed) · 1 running · 2 queued · 2.0/s · ETA 1s"
        );
        assert!(ViewState::new().headline(t0).starts_with("lead · "));
    }

    #[test]
    fn queued_tasks_are_counted_on_the_lead_line() {
        let now = Instant::now();
        let mut s = ViewState::new();
        s.apply(&lead(run_started()), now);
        for i in 0..5 {
            s.apply(&lead(call(&format!("t{i}"), "task")), now);
        }
        s.apply(&lead(started("t0", "a")), now);
        s.apply(&lead(started("t1", "b")), now);
        for (i, id) in ["t2", "t3", "t4"].iter().enumerate() {
            let q = Event::TaskQueued {
                task_id: (*id).into(),
                description: "q".into(),
                subagent_type: "general-purpose".into(),
                position: i as u32 + 1,
            };
            s.apply(&lead(q), now);
        }
        assert_eq!(s.queued(), 3);
        assert!(
            s.lead_line().ends_with("· 2 running · 3 queued"),
            "{}",
            s.lead_line()
        );
        assert_eq!(s.more_line(1).as_deref(), Some("… and 1 more running"));
        assert_eq!(s.more_line(10), None);

        // A queued task starts when a slot frees up.
        let failed = Event::TaskFailed {
            task_id: "t0".into(),
            item_index: None,
            error: "model error:\nboom".into(),
            usage: totals(0),
            turns: 1,
            duration_ms: 200,
            stop_reason: None,
        };
        let printed = s.apply(&lead(failed), now);
        assert!(
            matches!(&printed, Some(Printed::Task(f)) if f.ending == Ending::Failed
                && f.line == "✗ t0 [general-purpose] a · failed: model error: boom · 0.2s"),
            "{printed:?}"
        );
        s.apply(&lead(started("t2", "q")), now);
        assert_eq!(s.queued(), 2);
        // One cancelled while still queued.
        let cancelled = Event::TaskCancelled {
            task_id: "t4".into(),
            item_index: None,
            error: "run cancelled".into(),
            usage: totals(0),
            duration_ms: 0,
        };
        let printed = s.apply(&lead(cancelled), now);
        assert!(
            matches!(&printed, Some(Printed::Task(f)) if f.line == "⊘ t4 [general-purpose] q · cancelled: run cancelled while queued"),
            "{printed:?}"
        );
        let timed_out = Event::TaskTimedOut {
            task_id: "t1".into(),
            item_index: None,
            error: "Execution timed out after 2 seconds".into(),
            timeout_seconds: 2.0,
            usage: totals(0),
            duration_ms: 2004,
        };
        let printed = s.apply(&lead(timed_out), now);
        assert!(
            matches!(&printed, Some(Printed::Task(f)) if f.ending == Ending::TimedOut
                && f.line == "⏱ t1 [general-purpose] b · Execution timed out after 2 seconds · 2.0s"),
            "{printed:?}"
        );
        assert!(
            s.lead_line().ends_with("· 1 running · 1 queued · 3 done"),
            "{}",
            s.lead_line()
        );
    }

    #[test]
    fn numbers_read_short() {
        assert_eq!(tokens(812), "812");
        assert_eq!(tokens(12_345), "12.3k");
        assert_eq!(tokens(1_234_567), "1.2M");
        assert_eq!(short("a\nbcdef", 3), "a b…");
        assert_eq!(short("x\x1b[2Ay", 10), "x [2Ay");
    }
}
