//! Path resolution confined to the workspace (and the read-only skills root), DeerFlow
//! virtual paths, opening files beneath a root (`openat2`), per-file write locks, and owned
//! child process groups, and the mark that finds every process a sub-agent started.

pub mod beneath;
pub mod child_env;
pub mod locks;
pub mod paths;
pub mod process;
pub mod sandbox;
pub mod task_mark;

pub use paths::{Access, Workspace};
