//! Logs: one line each on stderr, prefixed with the run's trace id. `DEERFLOW_LOG` or
//! `RUST_LOG` (error, warn, info, debug, trace) set the level; warn by default.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
    Trace = 5,
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Warn as u8);
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

/// Reads the level from the environment and fixes the trace id for this process.
pub fn init(trace_id: &str) {
    let _ = TRACE.set(trace_id.to_string());
    let raw = std::env::var("DEERFLOW_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_default();
    if let Some(l) = parse_level(&raw) {
        LEVEL.store(l as u8, Ordering::Relaxed);
    }
}

fn parse_level(raw: &str) -> Option<Level> {
    // RUST_LOG may be `crate=level,...`; the most verbose plain or deerflow level counts.
    raw.split(',')
        .filter_map(|part| {
            let lvl = match part.split_once('=') {
                Some((target, l)) if target.trim() == "deerflow" => l,
                Some(_) => return None,
                None => part,
            };
            match lvl.trim().to_ascii_lowercase().as_str() {
                "error" => Some(Level::Error),
                "warn" | "warning" => Some(Level::Warn),
                "info" => Some(Level::Info),
                "debug" => Some(Level::Debug),
                "trace" => Some(Level::Trace),
                _ => None,
            }
        })
        .max()
}

pub fn enabled(level: Level) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

pub fn log(level: Level, msg: &str) {
    if !enabled(level) {
        return;
    }
    let name = match level {
        Level::Error => "ERROR",
        Level::Warn => "WARN",
        Level::Info => "INFO",
        Level::Debug => "DEBUG",
        Level::Trace => "TRACE",
    };
    let msg = crate::text::escape_controls(msg);
    let line = match TRACE.get() {
        Some(t) => format!("[trace={t}] {name} {msg}"),
        None => format!("{name} {msg}"),
    };
    // Cloned out so the lock is not held while writing.
    let writer = WRITER.read().ok().and_then(|w| w.clone());
    match writer {
        Some(w) => w(&line),
        None => stderr_line(&line),
    }
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
    log(Level::Warn, msg);
}

pub fn info(msg: &str) {
    log(Level::Info, msg);
}

pub fn debug(msg: &str) {
    log(Level::Debug, msg);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_like_rust_log() {
        assert_eq!(parse_level("debug"), Some(Level::Debug));
        assert_eq!(parse_level("hyper=trace,deerflow=info"), Some(Level::Info));
        assert_eq!(parse_level("hyper=trace"), None);
        assert_eq!(parse_level(""), None);
    }
}
