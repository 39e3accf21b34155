//! Logs: `tracing` events, written one line each on stderr, prefixed with the run's trace id
//! (`[trace=1a2b3c4d] DEBUG model request provider=openai …`, contract §1).
//!
//! `DEERFLOW_LOG` (or, when it is unset, `RUST_LOG`) sets the level with `EnvFilter`'s
//! syntax. A bare level (`debug`) is deerflow's own level; other crates stay silent unless a
//! directive names them (`rmcp=debug`), so a verbose deerflow log never shows what a
//! library would print about connections and headers. Warn by default.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::{Arc, OnceLock, RwLock};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{span, Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::EnvFilter;

static TRACE: OnceLock<String> = OnceLock::new();

/// Writes one log line (without its newline) instead of stderr; see `set_line_writer`.
pub type LineWriter = Arc<dyn Fn(&str) + Send + Sync>;
static WRITER: RwLock<Option<LineWriter>> = RwLock::new(None);

/// Routes log lines through `w` (the live view prints them above its bars, so they do not
/// tear them), or back to plain stderr with `None`.
pub fn set_line_writer(w: Option<LineWriter>) {
    if let Ok(mut slot) = WRITER.write() {
        *slot = w;
    }
}

/// Reads the level from the environment, fixes the trace id for this process and installs
/// the subscriber. A second call changes nothing.
pub fn init(trace_id: &str) {
    if TRACE.set(trace_id.to_string()).is_err() {
        return;
    }
    let raw = level_setting();
    let (directives, bad) = directives(&raw);
    let installed = match plain_level(&raw) {
        // Only levels (the usual case, and the default): one comparison per callsite, no
        // span registry — it costs a run about 0.5 MiB of RSS next to this.
        Some(max) => tracing::subscriber::set_global_default(Plain { max }).is_ok(),
        None => {
            let filter = EnvFilter::builder()
                .parse(&directives)
                .unwrap_or_else(|_| EnvFilter::new(DEFAULT));
            tracing_subscriber::registry()
                .with(filter)
                .with(LineLayer)
                .try_init()
                .is_ok()
        }
    };
    if installed && !bad.is_empty() {
        warn(&format!(
            "ignoring log directive(s) {} (DEERFLOW_LOG / RUST_LOG take a level: error, warn, info, debug, trace, or target=level)",
            bad.join(", ")
        ));
    }
}

/// Other crates off, deerflow at warn.
const DEFAULT: &str = "off,deerflow=warn";

fn level_setting() -> String {
    match std::env::var("DEERFLOW_LOG") {
        Ok(v) if !v.trim().is_empty() => v,
        _ => std::env::var("RUST_LOG").unwrap_or_default(),
    }
}

/// `raw` as EnvFilter directives after the default, with each bare level made deerflow's,
/// and the parts EnvFilter would refuse set aside (one bad part must not silence the rest).
fn directives(raw: &str) -> (String, Vec<String>) {
    let mut out = DEFAULT.to_string();
    let mut bad = Vec::new();
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let directive = if is_level(part) {
            format!("deerflow={part}")
        } else {
            match part.split_once('=') {
                Some((target, level)) => format!("{}={level}", crate_target(target)),
                None => crate_target(part),
            }
        };
        if directive
            .parse::<tracing_subscriber::filter::Directive>()
            .is_ok()
        {
            out.push(',');
            out.push_str(&directive);
        } else {
            bad.push(crate::text::escape_controls(part).into_owned());
        }
    }
    (out, bad)
}

fn is_level(s: &str) -> bool {
    matches!(
        s.to_ascii_lowercase().as_str(),
        "off" | "error" | "warn" | "info" | "debug" | "trace"
    )
}

/// deerflow's level when `raw` holds only bare levels (or nothing): the most verbose one,
/// warn when none. `None` when a part names a target or is not a level.
fn plain_level(raw: &str) -> Option<LevelFilter> {
    let mut max = None;
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if !is_level(part) {
            return None;
        }
        let level: LevelFilter = part.to_ascii_lowercase().parse().ok()?;
        max = max.max(Some(level));
    }
    Some(max.unwrap_or(LevelFilter::WARN))
}

fn is_ours(target: &str) -> bool {
    target == "deerflow" || target.starts_with("deerflow::") || target.starts_with("deerflow_")
}

/// Where each module's events come from since the layers became crates: `deerflow::model`
/// in a directive means the `deerflow_model` crate.
const CRATE_TARGETS: &[(&str, &str)] = &[
    ("text", "deerflow_base::text"),
    ("logging", "deerflow_base::logging"),
    ("config", "deerflow_config"),
    ("model", "deerflow_model"),
    ("workspace", "deerflow_workspace"),
    ("usage", "deerflow_events::usage"),
    ("outcome", "deerflow_events::outcome"),
    ("events", "deerflow_events"),
    ("tools", "deerflow_tools"),
    ("mcp", "deerflow_mcp"),
    ("agent", "deerflow_agent"),
    ("subagent", "deerflow_subagent"),
];

/// A `deerflow::MODULE…` target as the crate that holds the module now names it.
fn crate_target(target: &str) -> String {
    let Some(rest) = target.strip_prefix("deerflow::") else {
        return target.to_string();
    };
    let (module, tail) = rest.split_once("::").map_or((rest, ""), |(m, t)| (m, t));
    match CRATE_TARGETS.iter().find(|(m, _)| *m == module) {
        Some((_, krate)) if tail.is_empty() => krate.to_string(),
        Some((_, krate)) => format!("{krate}::{tail}"),
        None => target.to_string(),
    }
}

/// The subscriber for a plain level: deerflow's events up to `max`, nothing from others.
struct Plain {
    max: LevelFilter,
}

impl Subscriber for Plain {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.enabled(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        *meta.level() <= self.max && is_ours(meta.target())
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.max)
    }

    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }

    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn event(&self, event: &Event<'_>) {
        write_event(event);
    }

    fn enter(&self, _: &span::Id) {}

    fn exit(&self, _: &span::Id) {}
}

/// Formats each event as one line: level, message, then its fields as `key=value`.
struct LineLayer;

impl<S: Subscriber> Layer<S> for LineLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        write_event(event);
    }
}

fn write_event(event: &Event<'_>) {
    let mut fields = Fields::default();
    event.record(&mut fields);
    let meta = event.metadata();
    let target = meta.target();
    // A library's line says whose it is; deerflow's own need no module path.
    let from = (!is_ours(target)).then_some(target);
    emit(&line(*meta.level(), from, &fields.message, &fields.rest));
}

#[derive(Default)]
struct Fields {
    message: String,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record(field, &format!("{value:?}"));
    }
}

impl Fields {
    fn record(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
            return;
        }
        let value = crate::text::escape_controls(value);
        if value.is_empty() || value.contains([' ', '"', '=']) {
            let _ = write!(
                self.rest,
                " {}=\"{}\"",
                field.name(),
                value.replace('"', "\\\"")
            );
        } else {
            let _ = write!(self.rest, " {}={value}", field.name());
        }
    }
}

fn line(level: tracing::Level, from: Option<&str>, message: &str, rest: &str) -> String {
    let mut line = String::with_capacity(message.len() + rest.len() + 32);
    if let Some(t) = TRACE.get() {
        let _ = write!(line, "[trace={t}] ");
    }
    line.push_str(level.as_str());
    line.push(' ');
    if let Some(from) = from {
        line.push_str(from);
        line.push_str(": ");
    }
    line.push_str(&crate::text::escape_controls(message));
    line.push_str(rest);
    line
}

fn emit(line: &str) {
    // Cloned out so the lock is not held while writing.
    let writer = WRITER.read().ok().and_then(|w| w.clone());
    match writer {
        Some(w) => w(line),
        None => stderr_line(line),
    }
}

/// An error line written whatever the filter says and whether or not `init` ran: the panic
/// hook's report must never be lost.
pub fn error(msg: &str) {
    emit(&line(tracing::Level::ERROR, None, msg, ""));
}

/// Writes one line to stderr. A closed or full stderr is ignored: it must never change an
/// exit code or panic (contract §12), as `eprintln!` would.
pub fn stderr_line(line: &str) {
    let mut buf = String::with_capacity(line.len() + 1);
    buf.push_str(line);
    buf.push('\n');
    let _ = std::io::stderr().write_all(buf.as_bytes());
}

pub fn warn(msg: &str) {
    tracing::warn!(target: "deerflow", "{msg}");
}

pub fn info(msg: &str) {
    tracing::info!(target: "deerflow", "{msg}");
}

pub fn debug(msg: &str) {
    tracing::debug!(target: "deerflow", "{msg}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directive_for_a_module_names_the_crate_that_holds_it() {
        assert_eq!(
            directives("deerflow::model=debug,deerflow::workspace::sandbox=trace").0,
            "off,deerflow=warn,deerflow_model=debug,deerflow_workspace::sandbox=trace"
        );
        assert_eq!(crate_target("deerflow::usage"), "deerflow_events::usage");
        assert_eq!(crate_target("deerflow::cli::run"), "deerflow::cli::run");
        assert_eq!(crate_target("hyper"), "hyper");
        assert!(is_ours("deerflow_tools::bash") && !is_ours("hyper::client"));
    }

    #[test]
    fn bare_levels_are_deerflows_and_targets_pass_through() {
        assert_eq!(directives("").0, DEFAULT);
        assert_eq!(directives("debug").0, "off,deerflow=warn,deerflow=debug");
        assert_eq!(
            directives("hyper=trace,deerflow=info").0,
            "off,deerflow=warn,hyper=trace,deerflow=info"
        );
        let (d, bad) = directives("debug,=[,\u{1b}x=y=z");
        assert_eq!(d, "off,deerflow=warn,deerflow=debug");
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert!(!bad.concat().contains('\u{1b}'));
    }

    #[test]
    fn only_bare_levels_take_the_plain_subscriber() {
        assert_eq!(plain_level(""), Some(LevelFilter::WARN));
        assert_eq!(plain_level("info, DEBUG"), Some(LevelFilter::DEBUG));
        assert_eq!(plain_level("off"), Some(LevelFilter::OFF));
        assert_eq!(plain_level("debug,rmcp=info"), None);
        assert_eq!(plain_level("loud"), None);
        let plain = Plain {
            max: LevelFilter::INFO,
        };
        static FIELDS: &[&str] = &[];
        struct Cs;
        impl tracing::callsite::Callsite for Cs {
            fn set_interest(&self, _: Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                unreachable!()
            }
        }
        let meta = |target: &'static str, level| {
            Metadata::new(
                "e",
                target,
                level,
                None,
                None,
                None,
                tracing::field::FieldSet::new(FIELDS, tracing::callsite::Identifier(&Cs)),
                tracing::metadata::Kind::EVENT,
            )
        };
        assert!(plain.enabled(&meta("deerflow::model", tracing::Level::INFO)));
        assert!(!plain.enabled(&meta("deerflow::model", tracing::Level::DEBUG)));
        assert!(!plain.enabled(&meta("rmcp::service", tracing::Level::ERROR)));
        assert!(!plain.enabled(&meta("deerflowx", tracing::Level::ERROR)));
    }

    #[test]
    fn a_line_carries_the_level_message_and_fields() {
        let l = line(
            tracing::Level::DEBUG,
            None,
            "model request\r",
            " provider=openai",
        );
        assert!(l.ends_with("DEBUG model request\\r provider=openai"), "{l}");
        let l = line(tracing::Level::WARN, Some("rmcp::service"), "closed", "");
        assert!(l.ends_with("WARN rmcp::service: closed"), "{l}");
    }
}
