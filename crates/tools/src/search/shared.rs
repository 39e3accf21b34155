//! What `glob` and `grep` share: the search root, the cap on results, the hand-off to a
//! blocking thread and the note on paths the walk could not read.

use std::path::PathBuf;

use crate::args::Count;
use crate::fs::resolve;
use crate::walk::unreadable_note;
use crate::ToolError;
use crate::{ToolContext, ToolOutput};
use deerflow_workspace::Access;

/// Resolves an optional search root (default: the workspace).
pub(super) fn search_root(ctx: &ToolContext, path: Option<&str>) -> Result<PathBuf, ToolOutput> {
    let abs = resolve(ctx, path.unwrap_or("."), Access::Read)?;
    if !abs.exists() {
        let shown = ctx.workspace.display_path(&abs);
        return Err(ToolError::NotFound {
            what: "path",
            path: shown,
        }
        .into());
    }
    Ok(abs)
}

/// `max_results`, defaulted and capped.
pub(super) fn max_results(given: Option<Count>, default: u64, cap: u64) -> usize {
    let n = given.map_or(default, |c| c.0).clamp(1, cap);
    // `n` is at most `cap` (≤ 1000), so it fits any usize.
    n as usize
}

/// Runs blocking filesystem work off the async threads.
pub(super) async fn blocking<F>(f: F) -> ToolOutput
where
    F: FnOnce() -> ToolOutput + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| ToolError::failed("search", e).into())
}

/// `text`, then the walk's note on the paths it could not read, if any, on a line of its own.
pub(super) fn with_unreadable_note(mut text: String, unreadable: usize) -> String {
    if let Some(note) = unreadable_note(unreadable) {
        text.push('\n');
        text.push_str(&note);
    }
    text
}
