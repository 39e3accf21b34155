//! Search tools, one file each: `glob` (`glob.rs`) finds paths by pattern, `grep` (`grep.rs`)
//! lines by regex, searching the files in parallel with `scan.rs`; `shared.rs` holds what both
//! do alike. Both walk without following symlinks, so a link cannot lead a search outside the
//! workspace.

mod glob;
mod grep;
mod scan;
mod shared;
#[cfg(test)]
pub(crate) mod tests;

pub use glob::{GlobArgs, GlobTool};
pub use grep::{GrepArgs, GrepTool};
