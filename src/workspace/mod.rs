//! Path resolution confined to the workspace (and the read-only skills root), DeerFlow
//! virtual paths, opening files beneath a root (`openat2`), per-file write locks, and owned
//! child process groups.

pub mod beneath;
pub mod child_env;
pub mod locks;
pub mod paths;
pub mod process;
pub mod sandbox;

pub use paths::{Access, Workspace};
