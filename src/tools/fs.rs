//! File tools: `ls`, `read_file`, `write_file`, `str_replace`, plus the helpers the other tool
//! families share (output truncation, path resolution, binary detection).

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::Deserialize;

use super::args::{lenient, spec, with_args, Count};
use super::read_range::{read_range, Excerpt};
use super::{Concurrency, Tool, ToolContext, ToolOutput};
use crate::model::{BoxFuture, ToolCall, ToolSpec};
use crate::text::{cut, Keep};
use crate::workspace::beneath::{self, OpenMode};
use crate::workspace::paths::OUTSIDE;
use crate::workspace::Access;

/// Directories that listings and searches never descend into (nor show).
pub const IGNORED_DIRS: &[&str] = &[".git", "node_modules", "target", "__pycache__", ".venv"];

/// How much of a file's start is checked for NUL bytes.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/// Resolves a path argument; the workspace's refusal becomes the tool's error output.
pub(crate) fn resolve(
    ctx: &ToolContext,
    path: &str,
    access: Access,
) -> Result<PathBuf, ToolOutput> {
    ctx.workspace
        .resolve(path, access)
        .map_err(ToolOutput::error)
}

/// A path `resolve` accepted, split into the root it lies under and the path relative to that
/// root. `resolve` gives the friendly errors and maps virtual paths; the file is then opened
/// beneath `root` ([`beneath::open_beneath`]), so a component swapped for a symlink after the
/// check cannot lead the open outside.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The checked absolute path: for display and the per-path write lock, never for opening.
    pub(crate) abs: PathBuf,
    root: PathBuf,
    rel: PathBuf,
}

/// [`resolve`], plus the root and relative path the open beneath needs.
pub(crate) fn resolve_target(
    ctx: &ToolContext,
    path: &str,
    access: Access,
) -> Result<Target, ToolOutput> {
    if names_directory(path) {
        return Err(ToolOutput::error(format!(
            "Error: {} names a directory (it ends in '/'), not a file",
            path.trim()
        )));
    }
    let abs = resolve(ctx, path, access)?;
    let (root, rel) = ctx
        .workspace
        .split_root(&abs)
        .map(|(root, rel)| (root.to_path_buf(), rel.to_path_buf()))
        .ok_or_else(|| ToolOutput::error(OUTSIDE))?;
    Ok(Target { abs, root, rel })
}

/// A trailing `/` names a directory; resolving normalizes it away, which would let
/// `write_file "newdir/"` create a regular file `newdir`, and `read_file "f.txt/"` read a
/// file the path says is a directory.
fn names_directory(path: &str) -> bool {
    path.trim().ends_with('/')
}

/// Runs blocking file work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolOutput> + Send + 'static,
) -> Result<T, ToolOutput> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
        Err(ToolOutput::error(format!(
            "Error: file operation failed: {e}"
        )))
    })
}

/// Opens a target beneath its root and makes sure it is a regular file (a FIFO or device would
/// block or never end). Every refusal is already the message the model sees; `dir_hint`
/// follows "is a directory".
fn open_regular(
    t: &Target,
    shown: &str,
    mode: OpenMode,
    dir_hint: &str,
) -> Result<std::fs::File, ToolOutput> {
    let verb = if mode == OpenMode::Read {
        "read"
    } else {
        "write"
    };
    let is_dir = || ToolOutput::error(format!("Error: {shown} is a directory{dir_hint}"));
    let not_regular = || ToolOutput::error(format!("Error: {shown} is not a regular file"));
    let file =
        beneath::open_beneath(&t.root, &t.rel, mode).map_err(|e| match e.raw_os_error() {
            _ if beneath::is_escape(&e) => ToolOutput::error(OUTSIDE),
            Some(libc::ENOENT) if !matches!(mode, OpenMode::Write { .. }) => {
                ToolOutput::error(format!("Error: file not found: {shown}"))
            }
            Some(libc::EISDIR) => is_dir(),
            // A FIFO without a reader, or a socket.
            Some(libc::ENXIO) => not_regular(),
            _ => ToolOutput::error(format!("Error: cannot {verb} {shown}: {e}")),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| ToolOutput::error(format!("Error: cannot {verb} {shown}: {e}")))?;
    if meta.is_dir() {
        return Err(is_dir());
    }
    if !meta.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

/// A NUL byte near the start means binary (what git and grep assume too).
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0)
}

/// Decodes a file as text, or `None` when it is binary (NUL bytes or invalid UTF-8).
pub(crate) fn decode_text(bytes: Vec<u8>) -> Option<String> {
    if looks_binary(&bytes) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// What a directory gets from the reading tools.
const READ_DIR_HINT: &str = " (use ls to list it)";

/// `write_file`'s open step: creates the parent directories and writes (or appends) beneath
/// the target's root. The caller holds the path's write lock.
pub(crate) async fn write_target(
    ctx: &ToolContext,
    t: &Target,
    content: &str,
    append: bool,
) -> Result<(), ToolOutput> {
    let shown = ctx.workspace.display_path(&t.abs);
    let (t, content) = (t.clone(), content.to_string());
    blocking(move || {
        let fail = |e: std::io::Error| {
            ToolOutput::error(if beneath::is_escape(&e) {
                OUTSIDE.to_string()
            } else {
                format!("Error: cannot write {shown}: {e}")
            })
        };
        if let Some(parent) = t.rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            beneath::create_dirs_beneath(&t.root, parent).map_err(fail)?;
        }
        if !append {
            // Something already there must be a regular file we may write (not a directory,
            // a FIFO or a device); opening it without truncating changes nothing.
            if t.abs.symlink_metadata().is_ok() {
                let probe = OpenMode::Write {
                    create: false,
                    truncate: false,
                    append: false,
                };
                open_regular(&t, &shown, probe, "")?;
            }
            return beneath::replace_beneath(&t.root, &t.rel, content.as_bytes()).map_err(fail);
        }
        let mode = OpenMode::Write {
            create: true,
            truncate: false,
            append,
        };
        let mut file = open_regular(&t, &shown, mode, "")?;
        file.write_all(content.as_bytes()).map_err(fail)
    })
    .await
}

/// `str_replace`'s open step: the file opened beneath the target's root, its matches of
/// `old` counted as it streams, then (when `allowed` accepts the count, else its refusal)
/// the edited copy streamed into a temporary file that replaces it. Memory stays a chunk
/// whatever the file's size. The caller holds the path's write lock.
pub(crate) async fn edit_target(
    ctx: &ToolContext,
    t: &Target,
    (old, new): (String, String),
    allowed: impl FnOnce(u64, &str) -> Result<(), ToolOutput> + Send + 'static,
) -> Result<(), ToolOutput> {
    use super::edit_stream::{replace_stream, ScanError, TextCheck, CHUNK};
    let shown = ctx.workspace.display_path(&t.abs);
    let t = t.clone();
    blocking(move || {
        let mut file = open_regular(&t, &shown, OpenMode::Read, READ_DIR_HINT)?;
        let check = TextCheck {
            sniff: BINARY_SNIFF_BYTES,
        };
        let (o, n) = (old.as_bytes(), new.as_bytes());
        let count = match replace_stream(&mut file, &mut std::io::sink(), o, n, CHUNK, Some(&check))
        {
            Ok(c) => c,
            Err(ScanError::NotText) => {
                return Err(ToolOutput::error(format!(
                    "Error: {shown} is a binary file; read_file only reads text files"
                )))
            }
            Err(ScanError::Io(e)) => {
                return Err(ToolOutput::error(format!(
                    "Error: cannot read {shown}: {e}"
                )))
            }
        };
        allowed(count, &shown)?;
        let fail =
            |e: std::io::Error| ToolOutput::error(format!("Error: cannot write {shown}: {e}"));
        std::io::Seek::rewind(&mut file).map_err(fail)?;
        beneath::replace_beneath_with(&t.root, &t.rel, |out| {
            let mut w = std::io::BufWriter::with_capacity(CHUNK, out);
            match replace_stream(&mut file, &mut w, o, n, CHUNK, None) {
                Ok(_) => w.flush(),
                Err(ScanError::Io(e)) => Err(e),
                Err(ScanError::NotText) => Err(std::io::Error::other("not text")),
            }
        })
        .map_err(fail)
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// ls
// ---------------------------------------------------------------------------------------------

/// `ls`: a two-level listing of a directory.
#[derive(Debug, Clone, Copy, Default)]
pub struct LsTool;

/// `ls`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct LsArgs {
    /// Directory to list: relative to the workspace, absolute inside it, or a virtual path
    /// such as /mnt/user-data/outputs or /mnt/skills. Defaults to the workspace root.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub path: Option<String>,
}

impl Tool for LsTool {
    fn concurrency(&self) -> Concurrency {
        Concurrency::Shared
    }

    fn name(&self) -> &str {
        "ls"
    }

    /// Listed again is the same directory, whatever else the call says.
    fn loop_key(&self, args: &crate::model::ToolArgs) -> u64 {
        super::loop_key::arguments(args, &["path"])
    }

    fn spec(&self) -> ToolSpec {
        spec::<LsArgs>(
            "ls",
            "List a directory two levels deep. Directories end in '/'. Paths are shown relative to \
             the workspace. Skips .git, node_modules, target, __pycache__ and .venv.",
        )
    }

    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        with_args(&call.arguments, move |a: LsArgs| async move {
            let path = a.path.as_deref().unwrap_or(".");
            let abs = match resolve(ctx, path, Access::Read) {
                Ok(p) => p,
                Err(e) => return e,
            };
            let max = ctx.limits.ls_output_max_chars;
            let listed = match list_levels(&abs, &ctx.workspace, max, Some(INLINE_ENTRIES)) {
                Ok(Some(text)) => Ok(text),
                Err(msg) => Err(msg),
                Ok(None) => {
                    let ws = ctx.workspace.clone();
                    tokio::task::spawn_blocking(move || list_two_levels(&abs, &ws, max))
                        .await
                        .unwrap_or_else(|e| Err(format!("Error: ls failed: {e}")))
                }
            };
            match listed {
                Ok(text) => ToolOutput::ok(text),
                Err(msg) => ToolOutput::error(msg),
            }
        })
    }
}

/// Entries an `ls` of a flat directory reads on the runtime's thread before it hands the
/// listing to a blocking thread instead (starting over there). A listing this small costs
/// less than the two thread wake-ups of the hand-off (~10 % of the CPU of a model call whose
/// tool is a small `ls`, issue 13), and blocks the runtime for tens of microseconds at most.
const INLINE_ENTRIES: usize = 256;

/// The listing of `dir`, cut to `max` characters as `cut(.., Keep::Head).marked(0)` cuts it.
fn list_two_levels(
    dir: &Path,
    ws: &crate::workspace::Workspace,
    max: usize,
) -> Result<String, String> {
    list_levels(dir, ws, max, None).map(Option::unwrap_or_default)
}

/// [`list_two_levels`]; under a `budget`, `None` once more entries were read or when there
/// are subdirectories to read.
fn list_levels(
    dir: &Path,
    ws: &crate::workspace::Workspace,
    max: usize,
    budget: Option<usize>,
) -> Result<Option<String>, String> {
    let shown = ws.display_path(dir);
    let mut left = budget.unwrap_or(usize::MAX);
    // Opening it tells a file from a directory, without a stat first.
    let mut top = match read_entries(dir, &mut left) {
        Ok(Some(top)) => top,
        Ok(None) => return Ok(None),
        // Not a directory: the path is a file (shown as it is), or a file stands where one of
        // its parents should be (then it does not exist).
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory && dir.metadata().is_ok() => {
            return Ok(Some(cut(&shown, max, Keep::Head).marked(0)));
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Err(format!("Error: path not found: {shown}"));
        }
        Err(e) => return Err(format!("Error: cannot list {shown}: {e}")),
    };
    top.sort_unstable();
    let subdirs: Vec<PathBuf> = top
        .iter()
        .filter(|(_, is_dir)| *is_dir)
        .map(|(name, _)| dir.join(name))
        .collect();
    // Only a flat directory is listed on the runtime's thread: each subdirectory could be a
    // mount point (a dead NFS server, an automounter) that would hold every agent.
    if budget.is_some() && !subdirs.is_empty() {
        return Ok(None);
    }
    let mut below = subdirs.iter().zip(read_each(&subdirs));
    let mut listing = Listing::new(max);
    let prefix = ChildPrefix::new(ws, dir);
    for (name, is_dir) in &top {
        listing.push(&prefix, name, *is_dir);
        if !*is_dir {
            continue;
        }
        // A second-level read error (permissions) just leaves that directory unexpanded.
        if let Some((subdir, Some(mut entries))) = below.next() {
            // Lines past the cut are only counted, so their order does not matter.
            if !listing.is_full() {
                entries.sort_unstable();
            }
            let child_prefix = ChildPrefix::new(ws, subdir);
            for (child, child_is_dir) in &entries {
                listing.push(&child_prefix, child, *child_is_dir);
            }
        }
    }
    Ok(Some(listing.finish()))
}

/// A listing's lines as far as `max` characters and one line beyond, and how many characters
/// the lines after those would add: what `cut(.., max, Keep::Head).marked(0)` of the whole
/// text shows, without building (or sorting) the part it cuts — most of a large listing.
struct Listing {
    text: String,
    /// Characters in `text`.
    chars: usize,
    lines: usize,
    /// Characters of the lines past `text`, newlines included.
    rest: usize,
    max: usize,
}

impl Listing {
    fn new(max: usize) -> Self {
        Listing {
            text: String::new(),
            chars: 0,
            lines: 0,
            rest: 0,
            max,
        }
    }

    fn is_full(&self) -> bool {
        self.chars > self.max
    }

    fn push(&mut self, prefix: &ChildPrefix<'_>, name: &OsStr, is_dir: bool) {
        let newline = usize::from(self.lines > 0);
        self.lines += 1;
        if self.is_full() {
            self.rest += newline + prefix.chars_of(name) + usize::from(is_dir);
            return;
        }
        let start = self.text.len();
        if newline > 0 {
            self.text.push('\n');
        }
        prefix.push(&mut self.text, name);
        if is_dir {
            self.text.push('/');
        }
        self.chars += self.text[start..].chars().count();
    }

    fn finish(self) -> String {
        if self.lines == 0 {
            return cut("(empty)", self.max, Keep::Head).marked(0);
        }
        // `text` holds more than `max` characters whenever anything was left out, so its cut
        // keeps the same head the whole text's would, and `rest` completes the count.
        cut(&self.text, self.max, Keep::Head).marked(self.rest)
    }
}

/// How a directory's entries are shown: [`Workspace::display_path`] of each, made once per
/// directory rather than once per entry (it compares path components: 15 % of the time of a
/// listing of 100,000 files).
///
/// [`Workspace::display_path`]: crate::workspace::Workspace::display_path
struct ChildPrefix<'w> {
    /// What comes before an entry's name (`src/`, `/mnt/skills/demo/`, or nothing at the
    /// workspace root), and its length in characters; `None` if that could not be told (each
    /// entry is then shown alone).
    text: Option<(String, usize)>,
    dir: &'w Path,
    ws: &'w crate::workspace::Workspace,
}

impl<'w> ChildPrefix<'w> {
    fn new(ws: &'w crate::workspace::Workspace, dir: &'w Path) -> Self {
        // A child's path is shown as the directory's shown prefix then its name; a probe name
        // tells what that prefix is wherever the directory lies (workspace, skills, elsewhere).
        let probe = ws.display_path(&dir.join("x"));
        let text = probe
            .strip_suffix('x')
            .map(|p| (p.to_string(), p.chars().count()));
        ChildPrefix { text, dir, ws }
    }

    /// Adds how the entry `name` is shown. A lossy name joins a prefix ending in '/' exactly as
    /// the whole path would be shown lossily.
    fn push(&self, out: &mut String, name: &OsStr) {
        match &self.text {
            Some((prefix, _)) => {
                out.push_str(prefix);
                out.push_str(&name.to_string_lossy());
            }
            None => out.push_str(&self.ws.display_path(&self.dir.join(name))),
        }
    }

    /// The characters `push` would add.
    fn chars_of(&self, name: &OsStr) -> usize {
        match &self.text {
            Some((_, chars)) => chars + name.to_string_lossy().chars().count(),
            None => self.ws.display_path(&self.dir.join(name)).chars().count(),
        }
    }
}

/// The entries of each of `dirs` (`None` for one that cannot be read), in order.
fn read_each(dirs: &[PathBuf]) -> Vec<Option<Entries>> {
    // A few directories are read here: starting a thread costs more than reading them.
    if dirs.len() <= FEW_DIRS {
        let mut unlimited = usize::MAX;
        return dirs
            .iter()
            .map(|dir| read_entries(dir, &mut unlimited).ok().flatten())
            .collect();
    }
    // The second level is most of a large listing: each of a few threads takes the next
    // unread directory; the results are put back in order.
    let next = AtomicUsize::new(0);
    let read = || {
        let mut got: Vec<(usize, Option<Entries>)> = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(dir) = dirs.get(i) else { break };
            let mut unlimited = usize::MAX;
            got.push((i, read_entries(dir, &mut unlimited).ok().flatten()));
        }
        got
    };
    let mut all = std::thread::scope(|s| {
        let others: Vec<_> = (1..walk_threads().min(dirs.len()))
            .map(|_| s.spawn(read))
            .collect();
        let mut all = read();
        for other in others {
            match other.join() {
                Ok(got) => all.extend(got),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        all
    });
    all.sort_unstable_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, entries)| entries).collect()
}

/// Subdirectories a listing reads on one thread.
const FEW_DIRS: usize = 16;

/// A directory's entries: each name and whether it is a directory.
type Entries = Vec<(OsString, bool)>;

/// Threads for one walk, search or listing: a few are enough to keep the disk and the regex
/// busy, and the machine is shared with the agent's other work.
pub(crate) fn walk_threads() -> usize {
    // Asked once: the answer reads cgroup files, which cost more than a small `ls` itself
    // (6 % of the CPU of a run doing nothing but `ls` calls).
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(8)))
}

/// A directory's entry names, unsorted, ignored directories left out. Symlinks count as files
/// so a listing never descends through a link (which could point outside). Sorted, the names
/// are in the order of the paths they make (by their bytes: names in one directory are
/// unique single components). `None` once more than `budget` entries were read (what was
/// read is taken off it).
fn read_entries(dir: &Path, budget: &mut usize) -> std::io::Result<Option<Entries>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let Some(left) = budget.checked_sub(1) else {
            return Ok(None);
        };
        *budget = left;
        let Ok(entry) = entry else { continue };
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let name = entry.file_name();
        if is_dir && IGNORED_DIRS.iter().any(|d| name == *d) {
            continue;
        }
        out.push((name, is_dir));
    }
    Ok(Some(out))
}

// ---------------------------------------------------------------------------------------------
// read_file
// ---------------------------------------------------------------------------------------------

/// `read_file`: a text file, whole or a 1-based inclusive line range.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFileTool;

/// `read_file`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// File to read: relative to the workspace, absolute inside it, or a virtual path
    /// (/mnt/user-data/..., /mnt/skills/...).
    pub path: String,
    /// First line to read (1-based). Defaults to 1.
    #[schemars(range(min = 1))]
    pub start_line: Option<Count>,
    /// Last line to read (inclusive). Defaults to the end of the file.
    #[schemars(range(min = 1))]
    pub end_line: Option<Count>,
}

impl Tool for ReadFileTool {
    fn concurrency(&self) -> Concurrency {
        Concurrency::Shared
    }

    fn name(&self) -> &str {
        "read_file"
    }

    fn loop_key(&self, args: &crate::model::ToolArgs) -> u64 {
        super::loop_key::path_and_line_stretch(args)
    }

    fn spec(&self) -> ToolSpec {
        spec::<ReadFileArgs>(
            "read_file",
            "Read a text file, whole or a line range (1-based, inclusive). Binary files are refused. \
             Long output is truncated at the end; use start_line/end_line to read further.",
        )
    }

    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        with_args(&call.arguments, move |a| async move {
            read_file(a, ctx).await.unwrap_or_else(|e| e)
        })
    }
}

async fn read_file(args: ReadFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let target = resolve_target(ctx, &args.path, Access::Read)?;
    let start = args.start_line.map(|c| c.0);
    let end = args.end_line.map(|c| c.0);
    read_target(ctx, &target, start, end).await
}

/// Reads lines `start..=end` of a resolved target, opened beneath its root.
async fn read_target(
    ctx: &ToolContext,
    target: &Target,
    start: Option<u64>,
    end: Option<u64>,
) -> Result<ToolOutput, ToolOutput> {
    let target = target.clone();
    let max = ctx.limits.read_file_output_max_chars;
    let shown = ctx.workspace.display_path(&target.abs);
    let excerpt = blocking(move || {
        let file = open_regular(&target, &shown, OpenMode::Read, READ_DIR_HINT)?;
        read_range(file, start, end, max, BINARY_SNIFF_BYTES)
            .map_err(|e| ToolOutput::error(format!("Error: cannot read {shown}: {e}")))
            .map(|x| (x, shown))
    })
    .await?;
    match excerpt {
        (Excerpt::BadRange(message), _) => Err(ToolOutput::error(message)),
        (Excerpt::Binary, shown) => Err(ToolOutput::error(format!(
            "Error: {shown} is a binary file; read_file only reads text files"
        ))),
        (Excerpt::Text { kept, .. }, _) if kept.is_empty() => Ok(ToolOutput::ok("(empty file)")),
        (Excerpt::Text { kept, cut: 0 }, _) => Ok(ToolOutput::ok(kept)),
        (Excerpt::Text { kept, cut }, _) => Ok(ToolOutput::ok(format!(
            "{kept}\n... [{cut} characters truncated] ..."
        ))),
    }
}

// ---------------------------------------------------------------------------------------------
// write_file
// ---------------------------------------------------------------------------------------------

/// `write_file`: create, overwrite or append to a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFileTool;

/// `write_file`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// File to write: relative to the workspace, absolute inside it, or
    /// /mnt/user-data/outputs/... (/mnt/skills is read-only).
    pub path: String,
    /// The text to write.
    pub content: String,
    /// Append to the end of the file instead of replacing it. Default false.
    #[serde(default, deserialize_with = "lenient::flag")]
    pub append: bool,
}

impl Tool for WriteFileTool {
    fn name(&self) -> &str {
        "write_file"
    }

    fn spec(&self) -> ToolSpec {
        spec::<WriteFileArgs>(
            "write_file",
            "Write text to a file, creating parent directories. Overwrites the file unless append \
             is true. Answers OK. Write final deliverables under /mnt/user-data/outputs.",
        )
    }

    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        with_args(&call.arguments, move |a| async move {
            write_file(a, ctx).await.unwrap_or_else(|e| e)
        })
    }
}

async fn write_file(args: WriteFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let target = resolve_target(ctx, &args.path, Access::Write)?;
    let _guard = ctx.workspace.locks().lock(&target.abs).await;
    write_target(ctx, &target, &args.content, args.append).await?;
    Ok(ToolOutput::ok("OK"))
}

// ---------------------------------------------------------------------------------------------
// str_replace
// ---------------------------------------------------------------------------------------------

/// `str_replace`: replace one exact occurrence (or all) of a string in a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct StrReplaceTool;

/// `str_replace`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct StrReplaceArgs {
    /// File to edit: relative to the workspace, absolute inside it, or a virtual path.
    pub path: String,
    /// The exact text to replace; include enough context to make it unique.
    pub old_str: String,
    /// The replacement text (may be empty).
    pub new_str: String,
    /// Replace every occurrence instead of requiring exactly one. Default false.
    #[serde(default, deserialize_with = "lenient::flag")]
    pub replace_all: bool,
}

impl Tool for StrReplaceTool {
    fn name(&self) -> &str {
        "str_replace"
    }

    fn spec(&self) -> ToolSpec {
        spec::<StrReplaceArgs>(
            "str_replace",
            "Replace text in a file. old_str must match exactly (whitespace included) and occur \
             exactly once, unless replace_all is true. Answers OK.",
        )
    }

    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        with_args(&call.arguments, move |a| async move {
            str_replace(a, ctx).await.unwrap_or_else(|e| e)
        })
    }
}

async fn str_replace(args: StrReplaceArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let target = resolve_target(ctx, &args.path, Access::Write)?;
    let (old, new, replace_all) = (args.old_str, args.new_str, args.replace_all);
    if old.is_empty() {
        return Err(ToolOutput::error("Error: old_str must not be empty"));
    }
    // Held across read-modify-write so a parallel edit or write cannot be lost.
    let _guard = ctx.workspace.locks().lock(&target.abs).await;
    edit_target(ctx, &target, (old, new), move |count, shown| {
        match (count, replace_all) {
            (0, _) => Err(ToolOutput::error(format!(
                "Error: old_str not found in {shown}"
            ))),
            (1, _) | (_, true) => Ok(()),
            (n, false) => Err(ToolOutput::error(format!(
                "Error: old_str occurs {n} times in {shown}; add surrounding context to make it \
                 unique, or set replace_all to true"
            ))),
        }
    })
    .await?;
    Ok(ToolOutput::ok("OK"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::tools::{SandboxLimits, ToolStatus};
    use crate::workspace::Workspace;
    use serde_json::json;
    use std::sync::Arc;
    use tokio_util::sync::CancellationToken;

    pub(crate) fn ctx_with(dir: &Path, limits: SandboxLimits) -> ToolContext {
        ToolContext {
            workspace: Arc::new(Workspace::new(dir, None).unwrap()),
            limits: Arc::new(limits),
            cancel: CancellationToken::new(),
        }
    }

    pub(crate) fn ctx(dir: &Path) -> ToolContext {
        ctx_with(dir, SandboxLimits::default())
    }

    pub(crate) async fn run(
        tool: &dyn Tool,
        ctx: &ToolContext,
        args: serde_json::Value,
    ) -> (ToolStatus, String) {
        let out = tool.call(&ToolCall::new("c", tool.name(), args), ctx).await;
        (out.status, out.into_text())
    }

    use ToolStatus::{Error as E, Ok as O};

    #[tokio::test]
    async fn ls_table() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/deep/deeper")).unwrap();
        std::fs::create_dir_all(root.join("node_modules/x")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("empty")).unwrap();
        std::fs::write(root.join("src/main.rs"), "").unwrap();
        std::fs::write(root.join("src/deep/hidden.rs"), "").unwrap();
        std::fs::write(root.join("b.txt"), "").unwrap();
        std::fs::write(root.join("a.txt"), "").unwrap();
        let c = ctx(root);
        let full = "a.txt\nb.txt\nempty/\nsrc/\nsrc/deep/\nsrc/main.rs";
        let cases = [
            (json!({}), O, full.to_string()),
            (json!({"path": "."}), O, full.to_string()),
            (
                json!({"path": "/mnt/user-data/workspace"}),
                O,
                full.to_string(),
            ),
            (
                json!({"path": "src"}),
                O,
                "src/deep/\nsrc/deep/deeper/\nsrc/deep/hidden.rs\nsrc/main.rs".into(),
            ),
            (json!({"path": "empty"}), O, "(empty)".into()),
            (json!({"path": "a.txt"}), O, "a.txt".into()),
            (
                json!({"path": "nope"}),
                E,
                "Error: path not found: nope".into(),
            ),
            (
                json!({"path": "../"}),
                E,
                "Access denied: path outside the workspace".into(),
            ),
        ];
        for (args, status, want) in cases {
            assert_eq!(
                run(&LsTool, &c, args.clone()).await,
                (status, want),
                "{args}"
            );
        }
        let small = ctx_with(
            root,
            SandboxLimits {
                ls_output_max_chars: 5,
                ..Default::default()
            },
        );
        let (s, text) = run(&LsTool, &small, json!({})).await;
        assert_eq!(
            (s, text.as_str()),
            (O, "a.txt\n... [40 characters truncated] ...")
        );
    }

    /// The listing as it was built before issue 13: every entry's whole path shown through
    /// `display_path`, the entries sorted by path.
    fn listing_by_paths(dir: &Path, ws: &Workspace) -> String {
        fn entries(dir: &Path) -> Vec<(PathBuf, bool)> {
            let mut out: Vec<(PathBuf, bool)> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap())
                .map(|e| (e.path(), e.file_type().unwrap().is_dir()))
                .filter(|(p, d)| !(*d && IGNORED_DIRS.iter().any(|i| p.file_name().unwrap() == *i)))
                .collect();
            out.sort();
            out
        }
        let show = |p: &Path, d: bool| {
            let s = ws.display_path(p);
            if d {
                format!("{s}/")
            } else {
                s
            }
        };
        let mut lines = Vec::new();
        for (entry, is_dir) in entries(dir) {
            lines.push(show(&entry, is_dir));
            if is_dir {
                for (child, child_is_dir) in entries(&entry) {
                    lines.push(show(&child, child_is_dir));
                }
            }
        }
        if lines.is_empty() {
            "(empty)".into()
        } else {
            lines.join("\n")
        }
    }

    #[test]
    fn listings_show_entries_as_display_path_shows_their_paths() {
        let make = |root: &Path| {
            for d in [
                "Sub/deep",
                "sub/x y",
                "a",
                "é/ü",
                "node_modules/n",
                ".hidden",
            ] {
                std::fs::create_dir_all(root.join(d)).unwrap();
            }
            for f in [
                "a.txt",
                "a-b",
                "B",
                "sub/x y/z",
                "sub/x y.txt",
                "é/f",
                ".hidden/h",
            ] {
                std::fs::write(root.join(f), "").unwrap();
            }
        };
        let (dir, skills, outside) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        for root in [dir.path(), skills.path(), outside.path()] {
            make(root);
        }
        let ws = Workspace::new(dir.path(), Some(skills.path())).unwrap();
        let root = ws.root().to_path_buf();
        let skills_root = skills.path().canonicalize().unwrap();
        let outside_root = outside.path().canonicalize().unwrap();
        for listed in [
            root.clone(),
            root.join("sub"),
            root.join("é"),
            skills_root.clone(),
            skills_root.join("sub"),
            outside_root.clone(),
            outside_root.join("sub"),
        ] {
            let ours = list_two_levels(&listed, &ws, usize::MAX).unwrap();
            assert_eq!(ours, listing_by_paths(&listed, &ws), "{}", listed.display());
            assert!(ours.lines().count() > 1, "{ours}");
        }
    }

    #[tokio::test]
    async fn read_file_table() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("f.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(root.join("empty.txt"), "").unwrap();
        std::fs::write(root.join("nul.bin"), b"abc\0def").unwrap();
        std::fs::write(root.join("latin1.txt"), b"caf\xe9").unwrap();
        let c = ctx(root);
        let cases = [
            (json!({"path": "f.txt"}), O, "one\ntwo\nthree\n"),
            (json!({"path": "f.txt", "start_line": 2}), O, "two\nthree\n"),
            (
                json!({"path": "f.txt", "start_line": 2, "end_line": 2}),
                O,
                "two\n",
            ),
            (
                json!({"path": "f.txt", "start_line": "1", "end_line": 2}),
                O,
                "one\ntwo\n",
            ),
            (json!({"path": "f.txt", "end_line": 1}), O, "one\n"),
            (
                json!({"path": "f.txt", "start_line": 3, "end_line": 99}),
                O,
                "three\n",
            ),
            (
                json!({"path": "f.txt", "start_line": 3, "end_line": 2}),
                E,
                "Error: start_line (3) is after end_line (2)",
            ),
            (
                json!({"path": "f.txt", "start_line": 4}),
                E,
                "Error: start_line (4) is beyond the end of the file (3 lines)",
            ),
            (
                json!({"path": "f.txt", "start_line": 0}),
                E,
                "Error: line numbers are 1-based; start_line and end_line must be at least 1",
            ),
            (
                json!({"path": "f.txt", "start_line": -1}),
                E,
                "Error: 'start_line' must be a non-negative integer",
            ),
            (json!({"path": "empty.txt"}), O, "(empty file)"),
            (
                json!({"path": "nul.bin"}),
                E,
                "Error: nul.bin is a binary file; read_file only reads text files",
            ),
            (
                json!({"path": "latin1.txt"}),
                E,
                "Error: latin1.txt is a binary file; read_file only reads text files",
            ),
            (
                json!({"path": "missing.txt"}),
                E,
                "Error: file not found: missing.txt",
            ),
            (
                json!({"path": "."}),
                E,
                "Error: . is a directory (use ls to list it)",
            ),
            (
                json!({}),
                E,
                "Error: missing required string argument 'path'",
            ),
            (
                json!({"path": "/etc/passwd"}),
                E,
                "Access denied: path outside the workspace",
            ),
        ];
        for (args, status, want) in cases {
            assert_eq!(
                run(&ReadFileTool, &c, args.clone()).await,
                (status, want.to_string()),
                "{args}"
            );
        }
        let small = ctx_with(
            root,
            SandboxLimits {
                read_file_output_max_chars: 4,
                ..Default::default()
            },
        );
        let got = run(&ReadFileTool, &small, json!({"path": "f.txt"})).await;
        assert_eq!(
            got,
            (O, "one\n\n... [10 characters truncated] ...".to_string())
        );
    }

    #[tokio::test]
    async fn write_file_table() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let c = ctx(root);
        let cases = [
            (json!({"path": "a/b/c.txt", "content": "x"}), O, "OK"),
            (
                json!({"path": "a/b/c.txt", "content": "y", "append": true}),
                O,
                "OK",
            ),
            (
                json!({"path": "/mnt/user-data/outputs/r.md", "content": "# r"}),
                O,
                "OK",
            ),
            (
                json!({"path": "a", "content": "x"}),
                E,
                "Error: a is a directory",
            ),
            (
                json!({"path": "x.txt"}),
                E,
                "Error: missing required string argument 'content'",
            ),
            (
                json!({"path": "../x.txt", "content": ""}),
                E,
                "Access denied: path outside the workspace",
            ),
        ];
        for (args, status, want) in cases {
            assert_eq!(
                run(&WriteFileTool, &c, args.clone()).await,
                (status, want.to_string()),
                "{args}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(root.join("a/b/c.txt")).unwrap(),
            "xy"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("outputs/r.md")).unwrap(),
            "# r"
        );
        run(
            &WriteFileTool,
            &c,
            json!({"path": "a/b/c.txt", "content": "z"}),
        )
        .await;
        assert_eq!(
            std::fs::read_to_string(root.join("a/b/c.txt")).unwrap(),
            "z"
        );
    }

    #[tokio::test]
    async fn a_path_ending_in_a_slash_names_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("f.txt"), "abc").unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        let c = ctx(root);
        let refused = |path: &str| {
            (
                E,
                format!(
                    "Error: {} names a directory (it ends in '/'), not a file",
                    path.trim()
                ),
            )
        };
        for path in ["newdir/", "f.txt/", "d/", "/mnt/user-data/outputs/", " d/ "] {
            let args = json!({"path": path, "content": "x"});
            assert_eq!(run(&WriteFileTool, &c, args).await, refused(path), "{path}");
        }
        assert!(!root.join("newdir").exists());
        assert_eq!(std::fs::read_to_string(root.join("f.txt")).unwrap(), "abc");
        let edit = json!({"path": "f.txt/", "old_str": "a", "new_str": "b"});
        assert_eq!(run(&StrReplaceTool, &c, edit).await, refused("f.txt/"));
        assert_eq!(std::fs::read_to_string(root.join("f.txt")).unwrap(), "abc");
        assert_eq!(
            run(&ReadFileTool, &c, json!({"path": "f.txt/"})).await,
            refused("f.txt/")
        );
        // Without the slash the same names still work as before.
        assert_eq!(
            run(&ReadFileTool, &c, json!({"path": "./f.txt"})).await,
            (O, "abc".to_string())
        );
    }

    #[tokio::test]
    async fn str_replace_table() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let c = ctx(root);
        let reset = || std::fs::write(root.join("f.txt"), "foo bar foo baz").unwrap();
        let cases = [
            (json!({"path": "f.txt", "old_str": "bar", "new_str": "BAR"}), O, "OK", "foo BAR foo baz"),
            (
                json!({"path": "f.txt", "old_str": "foo", "new_str": "X"}),
                E,
                "Error: old_str occurs 2 times in f.txt; add surrounding context to make it unique, or set replace_all to true",
                "foo bar foo baz",
            ),
            (json!({"path": "f.txt", "old_str": "foo", "new_str": "X", "replace_all": true}), O, "OK", "X bar X baz"),
            (json!({"path": "f.txt", "old_str": "qux", "new_str": "X"}), E, "Error: old_str not found in f.txt", "foo bar foo baz"),
            (json!({"path": "f.txt", "old_str": "", "new_str": "X"}), E, "Error: old_str must not be empty", "foo bar foo baz"),
            (json!({"path": "f.txt", "old_str": " baz", "new_str": ""}), O, "OK", "foo bar foo"),
            (json!({"path": "f.txt", "old_str": "foo"}), E, "Error: missing required string argument 'new_str'", "foo bar foo baz"),
        ];
        for (args, status, want, content) in cases {
            reset();
            assert_eq!(
                run(&StrReplaceTool, &c, args.clone()).await,
                (status, want.to_string()),
                "{args}"
            );
            assert_eq!(
                std::fs::read_to_string(root.join("f.txt")).unwrap(),
                content,
                "{args}"
            );
        }
        let missing = run(
            &StrReplaceTool,
            &c,
            json!({"path": "no.txt", "old_str": "a", "new_str": "b"}),
        )
        .await;
        assert_eq!(missing, (E, "Error: file not found: no.txt".to_string()));
    }

    /// Names sort by their bytes, a name that is not UTF-8 shows with U+FFFD, and a link to a
    /// directory is listed, not expanded.
    #[tokio::test]
    async fn ls_orders_names_by_bytes_and_lists_links_unexpanded() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        std::fs::create_dir_all(r.join("a/sub")).unwrap();
        for f in ["a.b", "a-z", "Z.txt", "a/x"] {
            std::fs::write(r.join(f), "").unwrap();
        }
        let odd = std::ffi::OsStr::from_bytes(b"b\xff.txt");
        std::fs::write(r.join(odd), "").unwrap();
        std::os::unix::fs::symlink(r.join("a"), r.join("link")).unwrap();
        let c = ctx(r);
        let want = "Z.txt\na/\na/sub/\na/x\na-z\na.b\nb\u{FFFD}.txt\nlink";
        assert_eq!(run(&LsTool, &c, json!({})).await, (O, want.to_string()));
    }

    /// The listing is the one made entry by entry (each path sorted as a path and shown by
    /// `display_path`) and then cut, on random trees of odd names, in the workspace and the
    /// skills root, at lengths that cut it anywhere (mid-line, mid-name, not at all); a listing
    /// kept under a budget of entries is that same listing or none, and none only when the
    /// budget is smaller than the entries read or there are subdirectories.
    #[test]
    fn ls_lists_what_an_entry_by_entry_listing_would() {
        use std::os::unix::ffi::OsStrExt;
        let parts: [&[u8]; 9] = [
            b"a",
            b"A",
            b".",
            b"-",
            b"_",
            b"\xc3\xa9",
            b"\xff",
            b"target",
            b"z",
        ];
        let name = |rng: &mut fastrand::Rng| {
            let n: Vec<u8> = (0..rng.usize(1..4))
                .flat_map(|_| parts[rng.usize(..parts.len())].to_vec())
                .collect();
            // "." and ".." are not names a directory can hold.
            if n == b"." || n == b".." {
                b"dot".to_vec()
            } else {
                n
            }
        };
        let mut rng = fastrand::Rng::with_seed(13);
        for _ in 0..20 {
            let ws_dir = tempfile::tempdir().unwrap();
            let skills = tempfile::tempdir().unwrap();
            for root in [ws_dir.path(), skills.path()] {
                let mut dirs = vec![root.to_path_buf()];
                // Up to ~50 directories: more than a listing reads on one thread.
                for _ in 0..rng.usize(0..200) {
                    let parent = dirs[rng.usize(..dirs.len())].clone();
                    let path = parent.join(std::ffi::OsStr::from_bytes(&name(&mut rng)));
                    if path.symlink_metadata().is_ok() {
                        continue;
                    }
                    match rng.u8(0..4) {
                        0 | 1 => std::fs::write(&path, "").unwrap(),
                        2 => {
                            std::fs::create_dir(&path).unwrap();
                            dirs.push(path);
                        }
                        _ => std::os::unix::fs::symlink(&parent, &path).unwrap(),
                    }
                }
            }
            let ws = Workspace::new(ws_dir.path(), Some(skills.path())).unwrap();
            let ws_root = ws.root().to_path_buf();
            let skills_root = ws.skills_root().unwrap().to_path_buf();
            for dir in [ws_root, skills_root] {
                let mut listed = vec![dir.clone()];
                listed.extend(
                    std::fs::read_dir(&dir)
                        .unwrap()
                        .map(|e| e.unwrap().path())
                        .filter(|p| p.is_dir()),
                );
                for d in listed {
                    let whole = listing_by_paths(&d, &ws);
                    let (read, flat) = read_below(&d);
                    for max in [0, 1, 9, 40, 150, 100_000] {
                        let want = cut(&whole, max, Keep::Head).marked(0);
                        assert_eq!(
                            list_two_levels(&d, &ws, max),
                            Ok(want.clone()),
                            "{d:?} {max}"
                        );
                        for budget in [0, 5, read.saturating_sub(1), read] {
                            let kept = list_levels(&d, &ws, max, Some(budget));
                            let want = (budget >= read && flat).then(|| want.clone());
                            assert_eq!(kept, Ok(want), "{d:?} {max} {budget} of {read}");
                        }
                    }
                }
            }
        }
    }

    /// The entries a listing of `dir` reads first (its own), and whether it shows no
    /// subdirectory.
    fn read_below(dir: &Path) -> (usize, bool) {
        let entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        let flat = entries.iter().all(|e| {
            !e.file_type().unwrap().is_dir() || IGNORED_DIRS.iter().any(|i| e.file_name() == *i)
        });
        (entries.len(), flat)
    }

    /// A listing larger than what `ls` reads on the runtime's thread, or one with
    /// subdirectories, is made on a blocking thread, whole.
    #[tokio::test]
    async fn ls_lists_a_large_directory_whole() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        for i in 0..=INLINE_ENTRIES {
            std::fs::write(r.join(format!("f{i:04}")), "").unwrap();
        }
        let c = ctx(r);
        assert_eq!(
            list_levels(r, &c.workspace, usize::MAX, Some(INLINE_ENTRIES)),
            Ok(None)
        );
        let (status, text) = run(&LsTool, &c, json!({})).await;
        assert_eq!((status, text.lines().count()), (O, INLINE_ENTRIES + 1));
        std::fs::remove_file(r.join("f0000")).unwrap();
        assert!(
            list_levels(r, &c.workspace, usize::MAX, Some(INLINE_ENTRIES))
                .unwrap()
                .is_some()
        );
        std::fs::create_dir(r.join("sub")).unwrap();
        std::fs::write(r.join("sub/g"), "").unwrap();
        assert_eq!(
            list_levels(r, &c.workspace, usize::MAX, Some(INLINE_ENTRIES)),
            Ok(None)
        );
        let (status, text) = run(&LsTool, &c, json!({})).await;
        assert_eq!((status, text.lines().last()), (O, Some("sub/g")));
    }

    /// A path below a file does not exist, though opening it fails as for a file; a FIFO
    /// is shown as it is, without blocking.
    #[tokio::test]
    async fn ls_below_a_file_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "x").unwrap();
        let fifo = std::ffi::CString::new(dir.path().join("p").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let c = ctx(dir.path());
        assert_eq!(
            run(&LsTool, &c, json!({"path": "a.txt/missing"})).await,
            (E, "Error: path not found: a.txt/missing".to_string())
        );
        assert_eq!(
            run(&LsTool, &c, json!({"path": "p"})).await,
            (O, "p".to_string())
        );
    }

    #[tokio::test]
    async fn skills_are_readable_not_writable() {
        let dir = tempfile::tempdir().unwrap();
        let skills = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(skills.path().join("demo")).unwrap();
        std::fs::write(
            skills.path().join("demo/SKILL.md"),
            "---\nname: demo\n---\n",
        )
        .unwrap();
        let c = ToolContext {
            workspace: Arc::new(Workspace::new(dir.path(), Some(skills.path())).unwrap()),
            limits: Arc::new(SandboxLimits::default()),
            cancel: CancellationToken::new(),
        };
        let ls = run(&LsTool, &c, json!({"path": "/mnt/skills"})).await;
        assert_eq!(
            ls,
            (
                O,
                "/mnt/skills/demo/\n/mnt/skills/demo/SKILL.md".to_string()
            )
        );
        let read = run(
            &ReadFileTool,
            &c,
            json!({"path": "/mnt/skills/demo/SKILL.md", "end_line": 2}),
        )
        .await;
        assert_eq!(read, (O, "---\nname: demo\n".to_string()));
        let denied = "Access denied: /mnt/skills is read-only".to_string();
        let write = run(
            &WriteFileTool,
            &c,
            json!({"path": "/mnt/skills/demo/x.md", "content": "x"}),
        )
        .await;
        assert_eq!(write, (E, denied.clone()));
        let args = json!({"path": "/mnt/skills/demo/SKILL.md", "old_str": "demo", "new_str": "x"});
        assert_eq!(run(&StrReplaceTool, &c, args).await, (E, denied));
    }

    #[tokio::test]
    async fn fifo_is_refused_not_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let got = run(&ReadFileTool, &ctx(dir.path()), json!({"path": "pipe"})).await;
        assert_eq!(got, (E, "Error: pipe is not a regular file".to_string()));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn parallel_appends_lose_no_line() {
        let dir = tempfile::tempdir().unwrap();
        let c = Arc::new(ctx(dir.path()));
        let mut tasks = Vec::new();
        for t in 0..16 {
            let c = c.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..25 {
                    let line = format!("task {t} line {i} {}\n", "x".repeat(500));
                    let args = json!({"path": "log.txt", "content": line, "append": true});
                    assert_eq!(
                        WriteFileTool
                            .call(&ToolCall::new("c", "", args), &c)
                            .await
                            .into_text(),
                        "OK"
                    );
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let text = std::fs::read_to_string(dir.path().join("log.txt")).unwrap();
        assert_eq!(text.lines().count(), 16 * 25);
        assert!(text
            .lines()
            .all(|l| l.starts_with("task ") && l.ends_with(&"x".repeat(500))));
    }

    #[tokio::test]
    async fn parallel_str_replace_is_serialized() {
        let dir = tempfile::tempdir().unwrap();
        let c = Arc::new(ctx(dir.path()));
        let body: String = (0..20).map(|i| format!("item{i:02}\n")).collect();
        std::fs::write(dir.path().join("f.txt"), body).unwrap();
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let c = c.clone();
                tokio::spawn(async move {
                    let args = json!({"path": "f.txt", "old_str": format!("item{i:02}\n"), "new_str": format!("done{i:02}\n")});
                    StrReplaceTool.call(&ToolCall::new("c", "", args), &c).await.into_text()
                })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap(), "OK");
        }
        let text = std::fs::read_to_string(dir.path().join("f.txt")).unwrap();
        assert!(!text.contains("item"), "{text}");
    }

    const OUTSIDE_MSG: &str = "Access denied: path outside the workspace";

    fn is_empty_dir(dir: &Path) -> bool {
        std::fs::read_dir(dir).unwrap().next().is_none()
    }

    /// The check passes while `a` is a real directory; `a` then becomes a symlink to an outside
    /// directory before the open step runs. Every open step refuses, and nothing appears (or
    /// changes) outside.
    #[tokio::test]
    async fn component_swapped_after_resolve_is_refused_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("a")).unwrap();
        std::fs::write(root.join("a/f.txt"), "inside").unwrap();
        std::fs::write(outside.path().join("f.txt"), "outside").unwrap();
        let c = ctx(root);
        let write = resolve_target(&c, "a/new/g.txt", Access::Write).unwrap();
        let edit = resolve_target(&c, "a/f.txt", Access::Write).unwrap();
        let read = resolve_target(&c, "a/f.txt", Access::Read).unwrap();
        std::fs::rename(root.join("a"), root.join("a_moved")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("a")).unwrap();

        let got = write_target(&c, &write, "pwned", false).await.unwrap_err();
        assert_eq!((got.status, &*got.text()), (E, OUTSIDE_MSG));
        let pwned = ("inside".to_string(), "pwned".to_string());
        let got = edit_target(&c, &edit, pwned, |_, _| Ok(()))
            .await
            .unwrap_err();
        assert_eq!((got.status, &*got.text()), (E, OUTSIDE_MSG));
        let got = read_target(&c, &read, None, None).await.unwrap_err();
        assert_eq!((got.status, &*got.text()), (E, OUTSIDE_MSG));

        assert!(!outside.path().join("new").exists());
        assert_eq!(
            std::fs::read_to_string(outside.path().join("f.txt")).unwrap(),
            "outside"
        );
        // The whole tools, re-checking, say the same.
        let args = json!({"path": "a/new/g.txt", "content": "x"});
        assert_eq!(
            run(&WriteFileTool, &c, args).await,
            (E, OUTSIDE_MSG.to_string())
        );
    }

    /// The final component swapped for a symlink to /etc/passwd after the check.
    #[tokio::test]
    async fn final_component_swapped_for_etc_passwd_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("f.txt"), "mine").unwrap();
        let c = ctx(root);
        let read = resolve_target(&c, "f.txt", Access::Read).unwrap();
        std::fs::remove_file(root.join("f.txt")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("f.txt")).unwrap();
        let got = read_target(&c, &read, None, None).await.unwrap_err();
        assert_eq!(got.text(), OUTSIDE_MSG);
        let got = write_target(&c, &read, "x", true).await.unwrap_err();
        assert_eq!(got.text(), OUTSIDE_MSG);
    }

    /// Symlinks pointing inside keep working through the tools: `resolve` hands the open step
    /// the canonical path, which contains no symlink.
    #[tokio::test]
    async fn inside_symlinks_still_work_through_the_tools() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("real")).unwrap();
        std::fs::write(root.join("real/f.txt"), "hello").unwrap();
        std::os::unix::fs::symlink("real", root.join("link")).unwrap();
        std::os::unix::fs::symlink(root.join("real/f.txt"), root.join("abs_link")).unwrap();
        let c = ctx(root);
        let read = |p: &str| json!({"path": p});
        assert_eq!(
            run(&ReadFileTool, &c, read("link/f.txt")).await,
            (O, "hello".into())
        );
        assert_eq!(
            run(&ReadFileTool, &c, read("abs_link")).await,
            (O, "hello".into())
        );
        let args = json!({"path": "link/sub/g.txt", "content": "g"});
        assert_eq!(run(&WriteFileTool, &c, args).await, (O, "OK".into()));
        assert_eq!(
            std::fs::read_to_string(root.join("real/sub/g.txt")).unwrap(),
            "g"
        );
        let args = json!({"path": "abs_link", "old_str": "hello", "new_str": "bye"});
        assert_eq!(run(&StrReplaceTool, &c, args).await, (O, "OK".into()));
        assert_eq!(
            std::fs::read_to_string(root.join("real/f.txt")).unwrap(),
            "bye"
        );
    }

    #[tokio::test]
    async fn write_file_creates_dirs_beneath_and_refuses_fifos() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let c = ctx(root);
        let args = json!({"path": "x/y/z.txt", "content": "z"});
        assert_eq!(run(&WriteFileTool, &c, args).await, (O, "OK".into()));
        assert_eq!(
            std::fs::read_to_string(root.join("x/y/z.txt")).unwrap(),
            "z"
        );
        let status = std::process::Command::new("mkfifo")
            .arg(root.join("pipe"))
            .status()
            .unwrap();
        assert!(status.success());
        let args = json!({"path": "pipe", "content": "z"});
        let want = (E, "Error: pipe is not a regular file".to_string());
        assert_eq!(run(&WriteFileTool, &c, args).await, want);
        let args = json!({"path": "pipe", "old_str": "a", "new_str": "b"});
        assert_eq!(run(&StrReplaceTool, &c, args).await, want);
        let args = json!({"path": "x", "old_str": "a", "new_str": "b"});
        assert_eq!(
            run(&StrReplaceTool, &c, args).await,
            (E, "Error: x is a directory (use ls to list it)".into())
        );
    }

    /// A thread flips `a` between a real directory and a symlink to an outside directory while
    /// 200 `write_file` calls to `a/f<i>.txt` run: some fail, but none writes outside.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn flipping_component_during_writes_never_escapes() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("a")).unwrap();
        let c = Arc::new(ctx(&root));
        let stop = Arc::new(AtomicBool::new(false));
        let flipper =
            crate::workspace::beneath::tests::spawn_flipper(&root.join("a"), outside.path(), &stop);
        let mut ok = 0;
        for i in 0..200 {
            let args = json!({"path": format!("a/d{}/f{i}.txt", i % 3), "content": "x"});
            let out = WriteFileTool.call(&ToolCall::new("c", "", args), &c).await;
            if out.status == O {
                ok += 1;
            } else {
                assert!(
                    out.text() == OUTSIDE_MSG || out.text().starts_with("Error: cannot write"),
                    "{}",
                    out.text()
                );
            }
        }
        stop.store(true, Ordering::SeqCst);
        let flips = flipper.join().unwrap();
        assert!(flips > 0);
        assert!(is_empty_dir(outside.path()), "a write escaped");
        eprintln!("{ok}/200 writes landed inside during {flips} flips");
    }

    #[test]
    fn specs_are_named_and_have_required_lists() {
        let tools: [(&dyn Tool, &str); 4] = [
            (&LsTool, "ls"),
            (&ReadFileTool, "read_file"),
            (&WriteFileTool, "write_file"),
            (&StrReplaceTool, "str_replace"),
        ];
        for (tool, name) in tools {
            let s = tool.spec();
            assert_eq!((s.name.as_str(), tool.name()), (name, name));
            assert!(s.parameters["required"].is_array());
        }
    }

    #[test]
    fn schemas_match_what_the_argument_types_accept() {
        use crate::tools::args::assert_schema_matches;
        assert_schema_matches::<LsArgs>(&[], json!({"path": "."}));
        assert_schema_matches::<ReadFileArgs>(
            &["path"],
            json!({"path": "f", "start_line": 1, "end_line": 2}),
        );
        assert_schema_matches::<WriteFileArgs>(
            &["path", "content"],
            json!({"path": "f", "content": "c", "append": true}),
        );
        assert_schema_matches::<StrReplaceArgs>(
            &["path", "old_str", "new_str"],
            json!({"path": "f", "old_str": "a", "new_str": "b", "replace_all": false}),
        );
        // What the model is offered, property by property, as before the types existed.
        assert_eq!(
            ReadFileTool.spec().parameters,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to read: relative to the workspace, absolute inside it, or a virtual path (/mnt/user-data/..., /mnt/skills/...)."},
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line to read (1-based). Defaults to 1."},
                    "end_line": {"type": "integer", "minimum": 1, "description": "Last line to read (inclusive). Defaults to the end of the file."}
                },
                "required": ["path"]
            })
        );
        assert_eq!(
            WriteFileTool.spec().parameters,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to write: relative to the workspace, absolute inside it, or /mnt/user-data/outputs/... (/mnt/skills is read-only)."},
                    "content": {"type": "string", "description": "The text to write."},
                    "append": {"type": "boolean", "description": "Append to the end of the file instead of replacing it. Default false.", "default": false}
                },
                "required": ["path", "content"]
            })
        );
    }
}
