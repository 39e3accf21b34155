//! Path resolution confined to the workspace (and the read-only skills root), DeerFlow
//! virtual paths, opening files beneath a root (`openat2`), per-file write locks, and owned
//! child process groups, and the mark that finds every process a sub-agent started.

// Events are the only output channel: nothing prints to stdout but the event writer,
// the human view and the plain-text commands, all through one explicit writer each.
#![deny(clippy::print_stdout)]
// stderr too: `eprintln!` panics on a closed stderr, which must change no exit code (§12).
#![cfg_attr(not(test), deny(clippy::print_stderr))]

pub mod beneath;
pub mod child_env;
pub mod locks;
pub mod paths;
pub mod process;
pub mod sandbox;
pub mod task_mark;

pub use paths::{Access, Workspace};
