//! The live part of the human view: indicatif bars on stderr, one for the lead and one per
//! running sub-agent (the first `MAX_TASK_LINES`; the rest are counted on a last line).
//! Drawn from the event writer's thread only, at most once per `FRAME`, from `ViewState`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::paint;
use super::state::{task_line, ViewState};

/// How often the bars are redrawn, at most (events in between only update the state).
pub const FRAME: Duration = Duration::from_millis(100);
/// Running sub-agents with a line of their own (fewer on a short terminal); more are
/// counted on one line.
pub const MAX_TASK_LINES: usize = 10;
/// Columns left free at the end of each line, so a long one is cut, not wrapped.
const RIGHT_MARGIN: usize = 1;

pub struct LiveView {
    mp: MultiProgress,
    /// Task and "more" lines sit under the lead's, indented.
    task_style: ProgressStyle,
    lead: ProgressBar,
    tasks: Vec<ProgressBar>,
    more: Option<ProgressBar>,
    color: bool,
    /// Lines to print above the bars with the next frame (one write for a burst of them).
    pending: Vec<String>,
    last_frame: Option<Instant>,
}

impl LiveView {
    /// Draws on stderr and routes log lines above the bars until `clear`.
    pub fn new(color: bool) -> Self {
        // Bars ask to redraw whenever their text changes; `frame` forces one redraw of all
        // of them, so their own requests can be rare.
        let mp = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(4));
        let style = |template: &str| {
            ProgressStyle::with_template(template)
                .unwrap_or_else(|_| ProgressStyle::default_spinner())
                .tick_chars("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ ")
        };
        let lead = mp.add(ProgressBar::new_spinner().with_style(style("{spinner} {msg}")));
        let printer = mp.clone();
        crate::logging::set_line_writer(Some(Arc::new(move |line: &str| {
            let _ = printer.println(line);
        })));
        super::tty::quiet_control_echo();
        Self {
            mp,
            task_style: style("  {spinner} {msg}"),
            lead,
            tasks: Vec::new(),
            more: None,
            color,
            pending: Vec::new(),
            last_frame: None,
        }
    }

    /// Prints `line` above the bars with the next frame.
    pub fn print(&mut self, line: String) {
        self.pending.push(line);
    }

    /// Prints the lines waiting for a frame now (before a log line, to keep their order).
    pub fn flush(&mut self) {
        if !self.pending.is_empty() {
            let _ = self.mp.println(self.pending.join("\n"));
            self.pending.clear();
        }
    }

    /// Redraws from `state` unless the last frame is younger than `FRAME` (or `force`).
    pub fn frame(&mut self, state: &ViewState, now: Instant, force: bool) {
        if !force
            && self
                .last_frame
                .is_some_and(|t| now.saturating_duration_since(t) < FRAME)
        {
            return;
        }
        self.last_frame = Some(now);
        self.flush();
        let (rows, cols) = console::Term::stderr()
            .size_checked()
            .map_or((24, 80), |(r, c)| (usize::from(r), usize::from(c)));
        // The lead's line starts with "⠋ ", a task's with "  ⠋ ".
        let fit = |s: &str, indent: usize| -> String {
            let width = cols.saturating_sub(indent + RIGHT_MARGIN).max(10);
            console::truncate_str(s, width, "…").into_owned()
        };
        self.lead
            .set_message(paint(self.color, "1", &fit(&state.headline(now), 2)));
        self.lead.tick();

        // The lead, the task lines and "… more" fit the terminal, with a line to spare.
        let max_tasks = MAX_TASK_LINES.min(rows.saturating_sub(3)).max(1);
        let visible = state.running().iter().take(max_tasks);
        let want = visible.len();
        while self.tasks.len() > want {
            if let Some(bar) = self.tasks.pop() {
                self.mp.remove(&bar);
            }
        }
        while self.tasks.len() < want {
            let bar = ProgressBar::new_spinner().with_style(self.task_style.clone());
            // After the lead and the task lines, before the "more" line.
            let bar = self.mp.insert(1 + self.tasks.len(), bar);
            self.tasks.push(bar);
        }
        for (bar, task) in self.tasks.iter().zip(visible) {
            bar.set_message(fit(&task_line(task, now), 4));
            bar.tick();
        }

        let more = state.more_line(max_tasks).map(|l| fit(&l, 4));
        match (more, &self.more) {
            (Some(line), Some(bar)) => bar.set_message(paint(self.color, "2", &line)),
            (Some(line), None) => {
                let bar = self.mp.add(
                    ProgressBar::new_spinner()
                        .with_style(self.task_style.clone())
                        .with_message(paint(self.color, "2", &line)),
                );
                self.more = Some(bar);
            }
            (None, Some(bar)) => {
                self.mp.remove(bar);
                self.more = None;
            }
            (None, None) => {}
        }
        if let Some(bar) = &self.more {
            bar.tick();
        }
        self.lead.force_draw();
    }

    /// Prints what is pending, removes the bars and gives stderr back to plain log lines
    /// (and the tty its `^C` echo); idempotent.
    pub fn clear(&mut self) {
        crate::logging::set_line_writer(None);
        super::tty::restore();
        self.flush();
        for bar in self.tasks.drain(..).chain(self.more.take()) {
            self.mp.remove(&bar);
        }
        self.mp.remove(&self.lead);
        let _ = self.mp.clear();
    }
}

impl Drop for LiveView {
    /// Also on a panic: the terminal is left as it was found.
    fn drop(&mut self) {
        self.clear();
    }
}
