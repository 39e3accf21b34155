//! What every layer uses: text helpers (escaping, truncation, durations) and the log line format.

// Events are the only output channel: nothing prints to stdout but the event writer,
// the human view and the plain-text commands, all through one explicit writer each.
#![deny(clippy::print_stdout)]
// stderr too: `eprintln!` panics on a closed stderr, which must change no exit code (§12).
#![cfg_attr(not(test), deny(clippy::print_stderr))]

pub mod logging;
pub mod text;
