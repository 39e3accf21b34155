//! Path resolution confined to the workspace (and the read-only skills root), DeerFlow
//! virtual paths, per-file write locks, and owned child process groups.

pub mod paths;
pub mod process;
pub mod locks;

pub use paths::{Access, Workspace};
