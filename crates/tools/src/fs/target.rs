//! A path argument resolved to a target beneath one of the workspace's roots, and opened
//! there: the steps every file tool shares.

use std::path::PathBuf;

use crate::ToolError;
use crate::{ToolContext, ToolOutput};
use deerflow_workspace::beneath::{self, OpenMode};
use deerflow_workspace::paths::OUTSIDE;
use deerflow_workspace::Access;

/// What a directory gets from the reading tools.
pub(super) const READ_DIR_HINT: &str = " (use ls to list it)";

/// Resolves a path argument; the workspace's refusal becomes the tool's error output.
pub(crate) fn resolve(
    ctx: &ToolContext,
    path: &str,
    access: Access,
) -> Result<PathBuf, ToolOutput> {
    ctx.workspace
        .resolve(path, access)
        .map_err(|e| ToolError::Refused(e).into())
}

/// A path `resolve` accepted, split into the root it lies under and the path relative to that
/// root. `resolve` gives the friendly errors and maps virtual paths; the file is then opened
/// beneath `root` ([`beneath::open_beneath`]), so a component swapped for a symlink after the
/// check cannot lead the open outside.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The checked absolute path: for display and the per-path write lock, never for opening.
    pub(crate) abs: PathBuf,
    pub(super) root: PathBuf,
    pub(super) rel: PathBuf,
}

/// [`resolve`], plus the root and relative path the open beneath needs.
pub(crate) fn resolve_target(
    ctx: &ToolContext,
    path: &str,
    access: Access,
) -> Result<Target, ToolOutput> {
    if names_directory(path) {
        return Err(ToolError::Message(format!(
            "{} names a directory (it ends in '/'), not a file",
            path.trim()
        ))
        .into());
    }
    let abs = resolve(ctx, path, access)?;
    let (root, rel) = ctx
        .workspace
        .split_root(&abs)
        .map(|(root, rel)| (root.to_path_buf(), rel.to_path_buf()))
        .ok_or_else(|| ToolError::Refused(OUTSIDE.into()))?;
    Ok(Target { abs, root, rel })
}

/// A trailing `/` names a directory; resolving normalizes it away, which would let
/// `write_file "newdir/"` create a regular file `newdir`, and `read_file "f.txt/"` read a
/// file the path says is a directory.
fn names_directory(path: &str) -> bool {
    path.trim().ends_with('/')
}

/// Runs blocking file work off the async threads.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolOutput> + Send + 'static,
) -> Result<T, ToolOutput> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(ToolError::failed("file operation", e).into()))
}

/// Opens a target beneath its root and makes sure it is a regular file (a FIFO or device would
/// block or never end). Every refusal is already the message the model sees; `dir_hint`
/// follows "is a directory".
pub(super) fn open_regular(
    t: &Target,
    shown: &str,
    mode: OpenMode,
    dir_hint: &'static str,
) -> Result<std::fs::File, ToolOutput> {
    let verb = if mode == OpenMode::Read {
        "read"
    } else {
        "write"
    };
    let path = || shown.to_string();
    let is_dir = || {
        ToolOutput::from(ToolError::IsDirectory {
            path: path(),
            hint: dir_hint,
        })
    };
    let not_regular = || ToolOutput::from(ToolError::NotRegular { path: path() });
    let file =
        beneath::open_beneath(&t.root, &t.rel, mode).map_err(|e| match e.raw_os_error() {
            _ if beneath::is_escape(&e) => ToolError::Refused(OUTSIDE.into()).into(),
            Some(libc::ENOENT) if !matches!(mode, OpenMode::Write { .. }) => ToolError::NotFound {
                what: "file",
                path: path(),
            }
            .into(),
            Some(libc::EISDIR) => is_dir(),
            // A FIFO without a reader, or a socket.
            Some(libc::ENXIO) => not_regular(),
            _ => ToolError::cannot(verb, shown, e).into(),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| ToolError::cannot(verb, shown, e))?;
    if meta.is_dir() {
        return Err(is_dir());
    }
    if !meta.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}
