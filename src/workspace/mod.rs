//! Path resolution confined to the workspace (and the read-only skills root), DeerFlow
//! virtual paths, per-file write locks, and owned child process groups.

pub mod locks;
pub mod paths;
pub mod process;

pub use paths::{Access, Workspace};
