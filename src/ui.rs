//! The human view (no `--json`): progress on stderr when it is a terminal, the final
//! answer on stdout, a one-line summary on stderr. Fed by the same events as the JSON writer.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use crate::events::{Envelope, Event, Renderer};

pub struct HumanView {
    /// The lead's latest text, shown once a tool call follows it (so the final answer,
    /// which goes to stdout, is not also shown as progress).
    pending_text: Option<String>,
    progress: bool,
    quiet: bool,
    color: bool,
    on_closed: Arc<dyn Fn() + Send + Sync>,
}

impl HumanView {
    pub fn new(quiet: bool, color: bool, on_closed: Arc<dyn Fn() + Send + Sync>) -> Self {
        let progress = !quiet && std::io::stderr().is_terminal();
        Self {
            pending_text: None,
            progress,
            quiet,
            color,
            on_closed,
        }
    }

    fn paint(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    fn err_line(&self, s: &str) {
        let _ = writeln!(std::io::stderr(), "{s}");
    }

    fn progress_line(&self, env: &Envelope) -> Option<String> {
        let dim = |s: String| self.paint("2", &s);
        Some(match &env.event {
            Event::ToolCall {
                name, arguments, ..
            } if name != "task" => dim(format!("  · {name} {}", short(&arguments.to_string(), 80))),
            Event::TaskQueued {
                task_id,
                description,
                position,
                ..
            } => dim(format!(
                "  ⋯ queued {task_id} ({description}), position {position}"
            )),
            Event::TaskStarted {
                task_id,
                description,
                subagent_type,
                ..
            } => format!("  ▶ {task_id} [{subagent_type}] {description}"),
            Event::TaskCompleted {
                task_id,
                duration_ms,
                ..
            } => self.paint(
                "32",
                &format!("  ✓ {task_id} completed in {}", ms(*duration_ms)),
            ),
            Event::TaskFailed { task_id, error, .. } => self.paint(
                "31",
                &format!("  ✗ {task_id} failed: {}", short(error, 120)),
            ),
            Event::TaskTimedOut { task_id, error, .. } => {
                self.paint("31", &format!("  ⏱ {task_id}: {error}"))
            }
            Event::TaskCancelled { task_id, error, .. } => {
                self.paint("33", &format!("  ⊘ {task_id} cancelled: {error}"))
            }
            _ => return None,
        })
    }

    fn completed(&self, event: &Event) {
        let Event::RunCompleted {
            status,
            final_message,
            error,
            duration_ms,
            turns,
            usage,
            tasks,
            ..
        } = event
        else {
            return;
        };
        if let Some(m) = final_message {
            let mut out = std::io::stdout().lock();
            let text = if m.ends_with('\n') {
                m.clone()
            } else {
                format!("{m}\n")
            };
            if out
                .write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .is_err()
            {
                (self.on_closed)();
            }
        }
        if let Some(e) = error {
            self.err_line(&self.paint("31", &format!("deerflow: {status}: {e}")));
        }
        if !self.quiet {
            let mut s = format!(
                "deerflow: {status} · {turns} turns · {} tokens · {}",
                usage.total_tokens,
                ms(*duration_ms)
            );
            if tasks.total > 0 {
                s.push_str(&format!(
                    " · {} tasks ({} completed)",
                    tasks.total, tasks.completed
                ));
            }
            if let Some(c) = usage.cost_usd {
                s.push_str(&format!(" · ${c:.4}"));
            }
            self.err_line(&self.paint("2", &s));
        }
    }
}

impl Renderer for HumanView {
    fn render(&mut self, env: &Envelope) {
        match &env.event {
            // Warnings are logs: one line, prefixed with the trace id.
            Event::Warning { message, code, .. } => {
                crate::logging::warn(&format!("{message} [{code}]"))
            }
            Event::ClarificationRequested { question, options } => {
                let opts = if options.is_empty() {
                    String::new()
                } else {
                    format!(" (options: {})", options.join(", "))
                };
                self.err_line(&format!(
                    "deerflow: the agent needs clarification: {question}{opts}"
                ));
            }
            e @ Event::RunCompleted { .. } => self.completed(e),
            Event::Message { text, .. } => self.pending_text = Some(text.clone()),
            _ if self.progress => {
                if let Some(t) = self.pending_text.take() {
                    self.err_line(&format!("  {}", short(&t, 160)));
                }
                if let Some(l) = self.progress_line(env) {
                    self.err_line(&l);
                }
            }
            _ => {}
        }
    }
}

fn ms(d: u64) -> String {
    format!("{:.1}s", d as f64 / 1000.0)
}

fn short(s: &str, max: usize) -> String {
    let one_line = s.replace('\n', " ");
    match one_line.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}
