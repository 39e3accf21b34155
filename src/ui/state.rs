//! The live view's state, kept apart from the terminal: `ViewState::apply` folds events
//! into it and the `*_line` functions render it to plain strings, so tests drive it
//! without a TTY. Colour and bars are the renderer's business (`live.rs`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::events::{Envelope, Event};

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
    queued: HashSet<String>,
    /// Running sub-agents, oldest first.
    running: Vec<TaskView>,
    finished: u32,
    /// The lead's latest text, printed once a tool call follows it (the final answer goes
    /// to stdout instead).
    pending_text: Option<String>,
}

impl ViewState {
    pub fn new() -> Self {
        Self::default()
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
            (Event::Usage { total_tokens, .. }, task) => {
                let n = total_tokens.unwrap_or(0);
                self.run_tokens += n;
                match task {
                    None => {
                        self.lead_turns += 1;
                        self.phase = Some(LeadPhase::Responding);
                    }
                    Some(id) => {
                        if let Some(t) = self.task_mut(id) {
                            t.turns += 1;
                            t.tokens += n;
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
            (Event::TaskQueued { task_id, .. }, _) => {
                self.queued.insert(task_id.clone());
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
                return Some(self.end(task_id, Ending::Completed, &detail, *duration_ms));
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
        let was_queued = self.queued.remove(id);
        let task = self
            .running
            .iter()
            .position(|t| t.id == id)
            .map(|i| self.running.remove(i));
        let what = match &task {
            Some(t) => format!("{id} [{}] {}", t.subagent_type, short(&t.description, 60)),
            None if was_queued => format!("{id} (queued)"),
            None => id.to_string(),
        };
        Printed::Task(Finished {
            ending,
            line: format!(
                "{} {what} · {detail} · {}",
                ending.glyph(),
                seconds(duration_ms)
            ),
        })
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
        t.id,
        t.subagent_type,
        short(&t.description, 60),
        t.turns + u32::from(thinking),
        tokens(t.tokens),
        elapsed(now.saturating_duration_since(t.started))
    )
}

/// `ls, task×3`: tool names in order, repeated ones counted.
fn tool_summary<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for n in names {
        *counts.entry(n.as_str()).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(n, c)| {
            if c > 1 {
                format!("{n}×{c}")
            } else {
                n.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn is_tool_result(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some("tool")
}

/// The tool names of a sub-agent's assistant message, if it called any, and how many.
fn tool_names(message: &Value) -> Option<(String, usize)> {
    if message.get("role")?.as_str()? != "assistant" {
        return None;
    }
    let names: Vec<String> = message
        .get("tool_calls")?
        .as_array()?
        .iter()
        .filter_map(|c| c.get("name")?.as_str().map(String::from))
        .collect();
    (!names.is_empty()).then(|| (tool_summary(names.iter()), names.len()))
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

/// Whole seconds while running (the line changes once a second): `7s`, `2m05s`.
pub fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// `1.3s`, as the summary line prints durations.
pub fn seconds(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// One line of at most `max` characters.
pub fn short(s: &str, max: usize) -> String {
    let one_line = s.replace('\n', " ");
    match one_line.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}
