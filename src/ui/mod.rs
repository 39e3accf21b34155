//! The human view (no `--json`): a live view of the lead and of each running sub-agent on
//! stderr when it is a terminal (`live.rs`, fed from `state.rs`), the final answer on
//! stdout, a one-line summary on stderr. Fed by the same events as the JSON writer.

mod items;
mod live;
pub mod state;
mod tty;

/// Gives the terminal back as the live view found it; for exits that skip the view's own
/// cleanup (the second Ctrl-C).
pub fn restore_terminal() {
    tty::restore();
}

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::events::{Envelope, Event, Renderer};
use crate::text::tenths as ms;
pub use items::ItemTotal;
use live::LiveView;
use state::{Ending, Printed, ViewState};

pub struct HumanView {
    state: ViewState,
    /// The bars, while stderr is a terminal, progress is wanted and the run is not over.
    live: Option<LiveView>,
    quiet: bool,
    color: bool,
    on_closed: crate::events::OnStdoutLost,
}

/// `s` in the SGR colour `code` when `color` is on.
pub(crate) fn paint(color: bool, code: &str, s: &str) -> String {
    if color {
        format!("\x1b[{code}m{s}\x1b[0m")
    } else {
        s.to_string()
    }
}

impl HumanView {
    /// `items`: an `--each` run, whose view shows item progress instead of the lead.
    pub fn new(
        quiet: bool,
        color: bool,
        on_closed: crate::events::OnStdoutLost,
        items: Option<ItemTotal>,
    ) -> Self {
        let progress = Self::live(quiet);
        Self {
            state: items.map_or_else(ViewState::new, ViewState::for_items),
            live: progress.then(|| LiveView::new(color)),
            quiet,
            color,
            on_closed,
        }
    }

    /// Whether a view with `quiet` draws the live bars (stderr is a terminal).
    pub fn live(quiet: bool) -> bool {
        !quiet && std::io::stderr().is_terminal()
    }

    fn paint(&self, code: &str, s: &str) -> String {
        paint(self.color, code, s)
    }

    fn err_line(&self, s: &str) {
        let _ = writeln!(std::io::stderr(), "{s}");
    }

    /// A line above the bars (or nothing without them).
    fn show(&mut self, printed: Printed) {
        let line = match &printed {
            Printed::LeadText(t) => self.paint("2", &format!("  {}", state::short(t, 160))),
            Printed::Task(f) => {
                let code = match f.ending {
                    Ending::Completed => "32",
                    Ending::Failed | Ending::TimedOut => "31",
                    Ending::Cancelled => "33",
                };
                self.paint(code, &format!("  {}", f.line))
            }
        };
        match &mut self.live {
            Some(live) => live.print(line),
            // Off a terminal the bars are hidden, and with them which task went wrong and
            // why: a task that did not complete gets its line in the log (also with -q).
            None => {
                if let Printed::Task(f) = &printed {
                    if f.ending != Ending::Completed {
                        let what = f.line.split_once(' ').map_or(&*f.line, |(_, rest)| rest);
                        self.err_line(&format!("deerflow: task {what}"));
                    }
                }
            }
        }
    }

    /// Removes the bars for good (the run is over).
    fn clear_live(&mut self) {
        if let Some(mut live) = self.live.take() {
            live.clear();
        }
    }

    fn completed(&self, event: &Event) {
        let Event::RunCompleted {
            status,
            final_message,
            error,
            ..
        } = event
        else {
            return;
        };
        if let Some(m) = final_message {
            let mut out = std::io::stdout().lock();
            // A terminal gets the answer's lines with its escape sequences made visible; a
            // pipe gets the answer as the model wrote it.
            let m = if out.is_terminal() {
                crate::text::for_terminal(m)
            } else {
                std::borrow::Cow::Borrowed(m.as_str())
            };
            let text = if m.ends_with('\n') {
                m.into_owned()
            } else {
                format!("{m}\n")
            };
            if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
                (self.on_closed)(&e);
            }
        }
        if let Some(e) = error {
            let e = crate::text::escape_controls(e);
            self.err_line(&self.paint("31", &format!("deerflow: {status}: {e}")));
        }
        if !self.quiet {
            if let Some(s) = summary_line(event, self.state.is_items()) {
                self.err_line(&self.paint("2", &s));
            }
        }
    }
}

/// The run's one-line summary on stderr: `deerflow: completed · 3 turns · 6228 tokens · 11.5s`.
/// An `--each` run (`items`) has no turns of its own, and its tasks are items.
pub fn summary_line(event: &Event, items: bool) -> Option<String> {
    let Event::RunCompleted {
        status,
        duration_ms,
        turns,
        usage,
        tasks,
        ..
    } = event
    else {
        return None;
    };
    let mut s = format!("deerflow: {status}");
    if !items {
        s.push_str(&format!(" · {}", plural(*turns, "turn")));
    }
    s.push_str(&format!(
        " · {} tokens · {}",
        usage.total_tokens,
        ms(*duration_ms)
    ));
    if tasks.total > 0 {
        let states = [
            (tasks.completed, "completed"),
            (tasks.failed, "failed"),
            (tasks.timed_out, "timed out"),
            (tasks.cancelled, "cancelled"),
        ];
        let parts: Vec<String> = states
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
        let what = if items { "item" } else { "task" };
        s.push_str(&format!(
            " · {} ({})",
            plural(tasks.total, what),
            parts.join(", ")
        ));
    }
    if let Some(c) = usage.cost_usd {
        s.push_str(&format!(" · ${c:.4}"));
    }
    Some(s)
}

fn plural(n: u32, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

impl Renderer for HumanView {
    fn render(&mut self, env: &Envelope) {
        let now = Instant::now();
        if let Some(p) = self.state.apply(env, now) {
            self.show(p);
        }
        match &env.event {
            // Warnings are logs: one line, prefixed with the trace id (above the bars).
            Event::Warning { message, code, .. } => {
                if let Some(live) = &mut self.live {
                    live.flush();
                }
                crate::logging::warn(&format!("{message} [{code}]"))
            }
            Event::ClarificationRequested { question, options } => {
                let opts = if options.is_empty() {
                    String::new()
                } else {
                    format!(" (options: {})", options.join(", "))
                };
                let line = format!("deerflow: the agent needs clarification: {question}{opts}");
                self.clear_live();
                self.err_line(&line);
            }
            e @ Event::RunCompleted { .. } => {
                self.clear_live();
                self.completed(e);
            }
            _ => {}
        }
        if let Some(live) = &mut self.live {
            live.frame(&self.state, now, false);
        }
    }

    fn tick_interval(&self) -> Option<Duration> {
        self.live.as_ref().map(|_| live::FRAME)
    }

    fn tick(&mut self) {
        if let Some(live) = &mut self.live {
            live.frame(&self.state, Instant::now(), false);
        }
    }

    fn finish(&mut self) {
        self.clear_live();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{RunStatus, TaskCounts, WarningCode};
    use crate::usage::RunUsage;

    fn completed(tasks: TaskCounts, cost_usd: Option<f64>) -> Event {
        Event::RunCompleted {
            status: RunStatus::Completed,
            exit_code: 0,
            final_message: Some("answer".into()),
            error: None,
            duration_ms: 11_520,
            turns: 3,
            usage: RunUsage {
                total_tokens: 6228,
                cost_usd,
                ..RunUsage::default()
            },
            tasks,
            artifacts: vec![],
            final_output: None,
        }
    }

    #[test]
    fn summary_line_names_status_turns_tokens_time_and_tasks() {
        assert_eq!(
            summary_line(&completed(TaskCounts::default(), None), false).as_deref(),
            Some("deerflow: completed · 3 turns · 6228 tokens · 11.5s")
        );
        let tasks = TaskCounts {
            total: 3,
            completed: 2,
            failed: 1,
            ..TaskCounts::default()
        };
        assert_eq!(
            summary_line(&completed(tasks, Some(0.01234)), false).as_deref(),
            Some("deerflow: completed · 3 turns · 6228 tokens · 11.5s · 3 tasks (2 completed, 1 failed) · $0.0123")
        );
        assert_eq!(
            summary_line(&completed(tasks, None), true).as_deref(),
            Some("deerflow: completed · 6228 tokens · 11.5s · 3 items (2 completed, 1 failed)")
        );
        assert_eq!(
            summary_line(&Event::warning(WarningCode::Budget, "y"), false),
            None
        );
    }

    #[test]
    fn paint_only_with_color() {
        assert_eq!(paint(false, "31", "x"), "x");
        assert_eq!(paint(true, "31", "x"), "\x1b[31mx\x1b[0m");
    }
}
