//! Search tools: `glob` (find paths by pattern) and `grep` (find lines by regex).
//! Both walk without following symlinks, so a link cannot lead a search outside the workspace.

use std::collections::BinaryHeap;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use globset::{Glob, GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::args::{lenient, spec, with_args, Count};
use super::fs::{decode_text, looks_binary, resolve};
use super::walk::{unreadable_note, walk, walk_threads, Cancelled, Seen};
use super::{Concurrency, Tool, ToolContext, ToolOutput};
use crate::model::{BoxFuture, ToolCall, ToolSpec};
use crate::workspace::{Access, Workspace};

const GLOB_DEFAULT_MAX: u64 = 200;
const GLOB_CAP: u64 = 1000;
const GREP_DEFAULT_MAX: u64 = 100;
const GREP_CAP: u64 = 500;
/// Files larger than this are skipped by grep (generated data, logs, bundles).
const GREP_MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Matched lines are cut to this many characters.
const GREP_LINE_CHARS: usize = 200;

/// Resolves an optional search root (default: the workspace).
fn search_root(ctx: &ToolContext, path: Option<&str>) -> Result<PathBuf, ToolOutput> {
    let abs = resolve(ctx, path.unwrap_or("."), Access::Read)?;
    if !abs.exists() {
        let shown = ctx.workspace.display_path(&abs);
        return Err(ToolOutput::error(format!("Error: path not found: {shown}")));
    }
    Ok(abs)
}

/// `max_results`, defaulted and capped.
fn max_results(given: Option<Count>, default: u64, cap: u64) -> usize {
    let n = given.map_or(default, |c| c.0).clamp(1, cap);
    // `n` is at most `cap` (≤ 1000), so it fits any usize.
    n as usize
}

/// Runs blocking filesystem work off the async threads.
async fn blocking<F>(f: F) -> ToolOutput
where
    F: FnOnce() -> ToolOutput + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| ToolOutput::error(format!("Error: search failed: {e}")))
}

// ---------------------------------------------------------------------------------------------
// glob
// ---------------------------------------------------------------------------------------------

/// `glob`: paths under a directory matching a glob pattern.
#[derive(Debug, Clone, Copy, Default)]
pub struct GlobTool;

/// `glob`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GlobArgs {
    /// Glob pattern, e.g. '**/*.rs', 'src/*.md', 'docs/**'.
    pub pattern: String,
    /// Directory to search. Defaults to the workspace root.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub path: Option<String>,
    /// Also return matching directories (shown ending in '/'). Default false.
    #[serde(default, deserialize_with = "lenient::flag")]
    pub include_dirs: bool,
    /// Most paths to return. Default 200, at most 1000.
    #[schemars(range(min = 1, max = GLOB_CAP), extend("default" = GLOB_DEFAULT_MAX))]
    pub max_results: Option<Count>,
}

impl Tool for GlobTool {
    fn concurrency(&self) -> Concurrency {
        Concurrency::Shared
    }

    fn name(&self) -> &str {
        "glob"
    }

    fn spec(&self) -> ToolSpec {
        spec::<GlobArgs>(
            "glob",
            "Find files whose path (relative to the search directory) matches a glob \
             pattern. '*' matches within one path component and '**' across \
             directories: use '**/*.py' to search all subdirectories. Results are \
             sorted workspace-relative paths. Skips .git, node_modules, target, \
             __pycache__ and .venv; does not follow symlinks.",
        )
    }

    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        with_args(&call.arguments, move |args: GlobArgs| async move {
            let prepared = (|| {
                // Paths are matched relative to the search root, so a leading "./" means nothing.
                let pattern = args.pattern.trim_start_matches("./");
                let matcher = GlobBuilder::new(pattern)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| ToolOutput::error(format!("Error: invalid glob pattern: {e}")))?
                    .compile_matcher();
                let root = search_root(ctx, args.path.as_deref())?;
                let max = max_results(args.max_results, GLOB_DEFAULT_MAX, GLOB_CAP);
                Ok::<_, ToolOutput>((matcher, root, max, args.include_dirs))
            })();
            let (matcher, root, max, include_dirs) = match prepared {
                Ok(p) => p,
                Err(e) => return e,
            };
            let ws = ctx.workspace.clone();
            let cancel = ctx.cancel.clone();
            blocking(
                move || match glob_paths(&ws, &root, &matcher, include_dirs, max, &cancel) {
                    Ok(text) => ToolOutput::ok(text),
                    Err(c) => c.output(),
                },
            )
            .await
        })
    }
}

fn glob_paths(
    ws: &Workspace,
    root: &Path,
    matcher: &GlobMatcher,
    include_dirs: bool,
    max: usize,
    cancel: &CancellationToken,
) -> Result<String, Cancelled> {
    // Each thread keeps only the `max` first paths in sorted order it saw (a heap whose top is
    // the last of them) and counts the rest: a pattern matching a million paths costs no more
    // memory than one matching `max`. Each has its own copy of the matcher, whose regex
    // then never waits on a cache shared with the other threads.
    let walked = walk(
        root,
        cancel,
        || {
            (
                matcher.clone(),
                BinaryHeap::<String>::with_capacity(max + 1),
                0usize,
            )
        },
        |(matcher, first, total), entry| {
            let is_dir = entry.file_type.is_dir();
            if entry.depth == 0 || (is_dir && !include_dirs) || !matcher.is_match(entry.rel()) {
                return;
            }
            *total += 1;
            let shown = ws.display_path(entry.path);
            let shown = if is_dir { format!("{shown}/") } else { shown };
            if first.len() < max || first.peek().is_some_and(|last| shown < *last) {
                first.push(shown);
                if first.len() > max {
                    first.pop();
                }
            }
        },
    )?;
    let total: usize = walked.states.iter().map(|(_, _, n)| n).sum();
    let mut found: Vec<String> = walked
        .states
        .into_iter()
        .flat_map(|(_, first, _)| first.into_vec())
        .collect();
    found.sort_unstable();
    found.truncate(max);
    let mut out = format!("Found {total} paths under {}", ws.display_path(root));
    for (i, path) in found.iter().enumerate() {
        out.push_str(&format!("\n{}. {path}", i + 1));
    }
    if total > max {
        out.push_str(&format!(
            "\n... {} more paths not shown (max_results={max}); narrow the pattern or raise max_results",
            total - max
        ));
    }
    if let Some(note) = unreadable_note(walked.unreadable) {
        out.push('\n');
        out.push_str(&note);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// grep
// ---------------------------------------------------------------------------------------------

/// `grep`: lines matching a regular expression, as `path:line: text`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

/// `grep`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GrepArgs {
    /// Regular expression to search for (or plain text with literal=true).
    pub pattern: String,
    /// File or directory to search. Defaults to the workspace root.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub path: Option<String>,
    /// Only search files matching this glob, e.g. '*.py' (matched against the file name) or
    /// 'src/**/*.rs' (matched against the path under the search directory).
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub glob: Option<String>,
    /// Treat pattern as plain text, not a regex. Default false.
    #[serde(default, deserialize_with = "lenient::flag")]
    pub literal: bool,
    /// Match case exactly. Default false.
    #[serde(default, deserialize_with = "lenient::flag")]
    pub case_sensitive: bool,
    /// Most matching lines to return. Default 100, at most 500.
    #[schemars(range(min = 1, max = GREP_CAP), extend("default" = GREP_DEFAULT_MAX))]
    pub max_results: Option<Count>,
}

impl Tool for GrepTool {
    fn concurrency(&self) -> Concurrency {
        Concurrency::Shared
    }

    fn name(&self) -> &str {
        "grep"
    }

    fn spec(&self) -> ToolSpec {
        spec::<GrepArgs>(
            "grep",
            "Search file contents for a regular expression (Rust regex syntax). Prints \
             matching lines as 'path:line: text' with workspace-relative paths. Case \
             insensitive unless case_sensitive is true. Skips binary files, files over \
             1 MB (listed at the end), and .git, node_modules, target, \
             __pycache__, .venv.",
        )
    }

    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        with_args(&call.arguments, move |args: GrepArgs| async move {
            let query = match GrepQuery::from_args(args, ctx) {
                Ok(q) => q,
                Err(e) => return e,
            };
            let ws = ctx.workspace.clone();
            let cancel = ctx.cancel.clone();
            blocking(move || query.run(&ws, &cancel).unwrap_or_else(Cancelled::output)).await
        })
    }
}

struct GrepQuery {
    pattern: String,
    regex: Regex,
    /// Finds the files that may match in one pass over their bytes; `None` when the pattern
    /// could match a line on its own but not inside the whole file (see [`prefilter`]).
    prefilter: Option<regex::bytes::Regex>,
    root: PathBuf,
    /// The file filter and whether it applies to the file name (no '/' in the glob).
    filter: Option<(GlobMatcher, bool)>,
    max: usize,
}

impl GrepQuery {
    fn from_args(args: GrepArgs, ctx: &ToolContext) -> Result<GrepQuery, ToolOutput> {
        let pattern = args.pattern;
        let source = if args.literal {
            regex::escape(&pattern)
        } else {
            pattern.clone()
        };
        let regex = RegexBuilder::new(&source)
            .case_insensitive(!args.case_sensitive)
            .build()
            .map_err(|e| ToolOutput::error(format!("Error: invalid regex: {e}")))?;
        let prefilter = prefilter(&source, args.case_sensitive);
        let filter = match args.glob.as_deref().filter(|g| !g.is_empty()) {
            None => None,
            Some(g) => {
                let glob = Glob::new(g)
                    .map_err(|e| ToolOutput::error(format!("Error: invalid glob: {e}")))?;
                Some((glob.compile_matcher(), !g.contains('/')))
            }
        };
        let root = search_root(ctx, args.path.as_deref())?;
        let max = max_results(args.max_results, GREP_DEFAULT_MAX, GREP_CAP);
        Ok(GrepQuery {
            pattern,
            regex,
            prefilter,
            root,
            filter,
            max,
        })
    }

    fn wants(&self, entry: &Seen<'_>) -> bool {
        let Some((matcher, by_name)) = &self.filter else {
            return true;
        };
        if *by_name {
            return entry.path.file_name().is_some_and(|n| matcher.is_match(n));
        }
        matcher.is_match(entry.rel())
    }

    fn run(&self, ws: &Workspace, cancel: &CancellationToken) -> Result<ToolOutput, Cancelled> {
        if self.root.is_file() {
            if let Err(refusal) = check_named_file(ws, &self.root) {
                return Ok(refusal);
            }
        }
        let walked = walk(&self.root, cancel, Vec::new, |files, e| {
            if e.file_type.is_file() && self.wants(e) {
                files.push(e.path.to_path_buf());
            }
        })?;
        let mut files: Vec<PathBuf> = walked.states.into_iter().flatten().collect();
        // Paths are unique, so an unstable sort gives the one order there is.
        files.sort_unstable();
        let found = self.search(&files, cancel)?;
        let mut text = self.report(ws, found);
        if let Some(note) = unreadable_note(walked.unreadable) {
            text.push('\n');
            text.push_str(&note);
        }
        Ok(ToolOutput::ok(text))
    }

    /// Matching lines of `files` in order, up to `max`. Files are searched in parallel, taken
    /// in order; once the files searched without a gap hold more than `max` lines the rest is
    /// left alone, so the answer is the one a search file by file would give.
    fn search<'f>(
        &self,
        files: &'f [PathBuf],
        cancel: &CancellationToken,
    ) -> Result<Found<'f>, Cancelled> {
        let next = AtomicUsize::new(0);
        let enough = AtomicBool::new(false);
        let progress = Mutex::new(Progress {
            results: files.iter().map(|_| None).collect(),
            done: 0,
            hits: 0,
        });
        let worker = || {
            // One buffer per thread: files are at most 1 MB, read into memory they already
            // hold (mmap costs more than it saves on files this small).
            let mut buf = Vec::new();
            while !enough.load(Ordering::Relaxed) && !cancel.is_cancelled() {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(file) = files.get(i) else { break };
                let result = self.search_file(file, &mut buf);
                let mut p = progress.lock().unwrap_or_else(PoisonError::into_inner);
                p.results[i] = Some(result);
                while let Some(Some(done)) = p.results.get(p.done) {
                    let n = match done {
                        FileResult::Hits(hits) => hits.len(),
                        FileResult::TooLarge | FileResult::Nothing => 0,
                    };
                    p.hits += n;
                    p.done += 1;
                }
                if p.hits > self.max {
                    enough.store(true, Ordering::Relaxed);
                }
            }
        };
        let threads = walk_threads().min(files.len());
        std::thread::scope(|s| {
            for _ in 1..threads {
                s.spawn(worker);
            }
            worker();
        });
        if cancel.is_cancelled() {
            return Err(Cancelled);
        }
        let results = progress
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .results;
        let mut found = Found::default();
        // Every file before the cut was searched, so the first gap comes after it.
        for (file, result) in files.iter().zip(results) {
            match result {
                None => break,
                Some(FileResult::Nothing) => {}
                Some(FileResult::TooLarge) => found.too_large.push(file),
                Some(FileResult::Hits(hits)) => {
                    for (n, line) in hits {
                        if found.hits.len() == self.max {
                            found.cut = true;
                            return Ok(found);
                        }
                        found.hits.push((file, n, line));
                    }
                }
            }
        }
        Ok(found)
    }

    /// One file's matching lines (at most `max + 1`: more are never shown).
    fn search_file(&self, path: &Path, buf: &mut Vec<u8>) -> FileResult {
        let Ok(mut file) = std::fs::File::open(path) else {
            return FileResult::Nothing;
        };
        let Ok(meta) = file.metadata() else {
            return FileResult::Nothing;
        };
        if meta.len() > GREP_MAX_FILE_BYTES {
            return FileResult::TooLarge;
        }
        buf.clear();
        if std::io::Read::read_to_end(&mut file, buf).is_err() {
            return FileResult::Nothing;
        }
        // Most files do not match: one scan of the bytes settles them, before any check of
        // whether they are text (a binary or non-UTF-8 file shows nothing either way).
        if let Some(pre) = &self.prefilter {
            if !pre.is_match(buf) {
                return FileResult::Nothing;
            }
        }
        if looks_binary(buf) {
            return FileResult::Nothing;
        }
        let Ok(text) = std::str::from_utf8(buf) else {
            return FileResult::Nothing;
        };
        let hits: Vec<(usize, String)> = text
            .lines()
            .enumerate()
            .filter(|(_, line)| self.regex.is_match(line))
            .take(self.max + 1)
            .map(|(n, line)| (n + 1, clip_line(line)))
            .collect();
        if hits.is_empty() {
            FileResult::Nothing
        } else {
            FileResult::Hits(hits)
        }
    }

    fn report(&self, ws: &Workspace, found: Found<'_>) -> String {
        let mut lines: Vec<String> = found
            .hits
            .iter()
            .map(|(file, n, line)| format!("{}:{n}: {line}", ws.display_path(file)))
            .collect();
        if lines.is_empty() {
            let shown_root = ws.display_path(&self.root);
            lines.push(format!(
                "No matches for '{}' under {shown_root}",
                self.pattern
            ));
        }
        if found.cut {
            lines.push(format!(
                "... stopped at {} matches (max_results); narrow the search or raise max_results",
                self.max
            ));
        }
        if !found.too_large.is_empty() {
            lines.push(skipped_note(ws, &found.too_large));
        }
        lines.join("\n")
    }
}

/// What one grep found: hits as (file, line number, clipped line), whether it stopped at
/// `max_results`, and the files it did not search because of their size.
#[derive(Default)]
struct Found<'f> {
    hits: Vec<(&'f Path, usize, String)>,
    cut: bool,
    too_large: Vec<&'f Path>,
}

/// What grep found in one file.
enum FileResult {
    /// Matching lines: (line number, clipped line).
    Hits(Vec<(usize, String)>),
    /// Over [`GREP_MAX_FILE_BYTES`]: named in the report as not searched.
    TooLarge,
    /// No match, or binary, not UTF-8, or unreadable.
    Nothing,
}

/// The parallel search's shared state: each file's result by index, and how many files from
/// the first are done without a gap, with their matching lines.
struct Progress {
    results: Vec<Option<FileResult>>,
    done: usize,
    hits: usize,
}

/// A regex that matches somewhere in a file whenever `source` matches one of its lines, so a
/// file it does not match can be passed over without splitting it into lines. It is `source`
/// with `^`/`$` at line boundaries (`\r\n` too, as `str::lines` strips the `\r`); whatever it
/// matches more is checked line by line. Patterns that pin a match to the whole haystack
/// (`\A`, `\z`) or turn those modes off (`(?-m)`, `(?-R)`) get no prefilter.
fn prefilter(source: &str, case_sensitive: bool) -> Option<regex::bytes::Regex> {
    let pins = source.contains("\\A") || source.contains("\\z");
    let turns_off = source.match_indices("(?").any(|(i, _)| {
        source[i + 2..]
            .chars()
            .find(|c| !c.is_ascii_alphabetic())
            .is_some_and(|c| c == '-')
    });
    if pins || turns_off {
        return None;
    }
    regex::bytes::RegexBuilder::new(source)
        .case_insensitive(!case_sensitive)
        .multi_line(true)
        .crlf(true)
        .build()
        .ok()
}

/// How many skipped files are named before the rest is summed up as `…`.
const SKIPPED_NAMES_SHOWN: usize = 5;

/// `(skipped 2 files over 1 MB: a.log, b.bin)`: so "No matches" is never said of a file
/// that was not searched.
fn skipped_note(ws: &Workspace, files: &[&Path]) -> String {
    let mut names: Vec<String> = files
        .iter()
        .take(SKIPPED_NAMES_SHOWN)
        .map(|f| ws.display_path(f))
        .collect();
    if files.len() > SKIPPED_NAMES_SHOWN {
        names.push("…".into());
    }
    let noun = if files.len() == 1 { "file" } else { "files" };
    format!(
        "(skipped {} {noun} over 1 MB: {}; use read_file with start_line/end_line)",
        files.len(),
        names.join(", ")
    )
}

/// A file named by `path` that grep cannot search is an error, not "No matches".
fn check_named_file(ws: &Workspace, file: &Path) -> Result<(), ToolOutput> {
    let shown = ws.display_path(file);
    match read_searchable(file) {
        Searchable::Text => Ok(()),
        Searchable::TooLarge(len) => Err(ToolOutput::error(format!(
            "Error: {shown} is {len} bytes; grep does not search files over 1 MB. Use read_file \
             with start_line/end_line, or bash if it is allowed"
        ))),
        Searchable::Skip => Err(ToolOutput::error(format!(
            "Error: {shown} is a binary or unreadable file; grep searches text files only"
        ))),
    }
}

/// What grep can do with one file.
enum Searchable {
    Text,
    /// Over [`GREP_MAX_FILE_BYTES`]; the size in bytes.
    TooLarge(u64),
    /// Binary, not UTF-8, or unreadable.
    Skip,
}

fn read_searchable(path: &Path) -> Searchable {
    let Ok(meta) = std::fs::metadata(path) else {
        return Searchable::Skip;
    };
    if meta.len() > GREP_MAX_FILE_BYTES {
        return Searchable::TooLarge(meta.len());
    }
    match std::fs::read(path).ok().and_then(decode_text) {
        Some(_) => Searchable::Text,
        None => Searchable::Skip,
    }
}

fn clip_line(line: &str) -> String {
    let line = line.trim_end_matches('\r');
    crate::text::cut(line, GREP_LINE_CHARS, crate::text::Keep::Head).marked_with("...")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::fs::tests::{ctx, run};
    use crate::tools::ToolStatus::{Error as E, Ok as O};
    use serde_json::json;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        for d in ["src/nested", "docs", "node_modules/pkg", ".git"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        std::fs::write(r.join("README.md"), "Hello World\nsecond line\n").unwrap();
        std::fs::write(
            r.join("src/main.rs"),
            "fn main() {\n    println!(\"hello\");\n}\n",
        )
        .unwrap();
        std::fs::write(
            r.join("src/nested/lib.rs"),
            "pub fn HELLO() {}\n// a.b literal\n",
        )
        .unwrap();
        std::fs::write(r.join("docs/guide.md"), "hello docs\n").unwrap();
        std::fs::write(r.join("node_modules/pkg/index.js"), "hello\n").unwrap();
        std::fs::write(r.join(".git/config"), "hello\n").unwrap();
        std::fs::write(r.join("blob.bin"), b"hello\0world").unwrap();
        let mut big = "hello\n".to_string();
        big.push_str(&"x".repeat(1024 * 1024 + 10));
        std::fs::write(r.join("big.txt"), big).unwrap();
        std::fs::write(r.join("long.txt"), format!("hello {}\n", "y".repeat(300))).unwrap();
        dir
    }

    /// `levels` directories of 250-character names below `root` (deeper than PATH_MAX), made
    /// with `*at` calls, and a `hit.txt` at the bottom.
    fn too_deep(root: &Path, levels: usize) {
        use std::os::fd::{FromRawFd, OwnedFd};
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::CString::new("a".repeat(250)).unwrap();
        let root = std::ffi::CString::new(root.as_os_str().as_bytes()).unwrap();
        // SAFETY: valid NUL-terminated paths; every descriptor is owned right away.
        unsafe {
            let mut dir = OwnedFd::from_raw_fd(libc::open(root.as_ptr(), libc::O_DIRECTORY));
            for _ in 0..levels {
                use std::os::fd::AsRawFd;
                assert_eq!(libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o755), 0);
                let next = libc::openat(dir.as_raw_fd(), name.as_ptr(), libc::O_DIRECTORY);
                assert!(next >= 0);
                dir = OwnedFd::from_raw_fd(next);
            }
            use std::os::fd::AsRawFd;
            let file = std::ffi::CString::new("hit.txt").unwrap();
            let f = libc::openat(
                dir.as_raw_fd(),
                file.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY,
                0o644,
            );
            assert!(f >= 0);
            libc::write(f, b"hit\n".as_ptr().cast(), 4);
            libc::close(f);
        }
    }

    #[tokio::test]
    async fn paths_too_long_to_read_are_noted_not_silently_missed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("near.txt"), "hit\n").unwrap();
        too_deep(dir.path(), 20);
        let c = ctx(dir.path());
        let (_, out) = run(&GlobTool, &c, json!({"pattern": "**/*.txt"})).await;
        assert!(out.contains("near.txt"), "{out}");
        assert!(out.contains("that could not be read"), "{out}");
        let (_, out) = run(&GrepTool, &c, json!({"pattern": "hit"})).await;
        assert!(out.contains("near.txt:1: hit"), "{out}");
        assert!(out.contains("that could not be read"), "{out}");
    }

    #[tokio::test]
    async fn glob_keeps_only_the_first_paths_in_order_and_counts_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..300 {
            std::fs::write(dir.path().join(format!("f{i:03}.txt")), "x").unwrap();
        }
        let c = ctx(dir.path());
        let (status, out) = run(&GlobTool, &c, json!({"pattern": "*.txt", "max_results": 3})).await;
        assert_eq!(status, O);
        assert_eq!(
            out,
            "Found 300 paths under .\n1. f000.txt\n2. f001.txt\n3. f002.txt\n... 297 more paths not shown (max_results=3); narrow the pattern or raise max_results"
        );
    }

    #[tokio::test]
    async fn glob_table() {
        let dir = tree();
        let c = ctx(dir.path());
        let cases = [
            (json!({"pattern": "**/*.rs"}), O, "Found 2 paths under .\n1. src/main.rs\n2. src/nested/lib.rs"),
            (json!({"pattern": "*.rs"}), O, "Found 0 paths under ."),
            (json!({"pattern": "*.rs", "path": "src"}), O, "Found 1 paths under src\n1. src/main.rs"),
            (json!({"pattern": "*.md"}), O, "Found 1 paths under .\n1. README.md"),
            (json!({"pattern": "./*.md"}), O, "Found 1 paths under .\n1. README.md"),
            (
                json!({"pattern": "**/*.md", "max_results": 1}),
                O,
                "Found 2 paths under .\n1. README.md\n... 1 more paths not shown (max_results=1); narrow the pattern or raise max_results",
            ),
            (json!({"pattern": "src*", "include_dirs": true}), O, "Found 1 paths under .\n1. src/"),
            (json!({"pattern": "**/index.js"}), O, "Found 0 paths under ."),
            (json!({"pattern": "a[", "path": "src"}), E, "Error: invalid glob pattern: error parsing glob 'a[': unclosed character class; missing ']'"),
            (json!({}), E, "Error: missing required string argument 'pattern'"),
            (json!({"pattern": "*", "path": "/etc"}), E, "Access denied: path outside the workspace"),
            (json!({"pattern": "*", "path": "nope"}), E, "Error: path not found: nope"),
        ];
        for (args, status, want) in cases {
            assert_eq!(
                run(&GlobTool, &c, args.clone()).await,
                (status, want.to_string()),
                "{args}"
            );
        }
    }

    /// What a walk shows: hidden paths, files named like an ignored directory, links as
    /// paths of their own (never descended, never searched); ignored directories at any depth
    /// are left out whole.
    #[tokio::test]
    async fn walk_rules_hold_at_every_depth() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        for d in [".hidden", "deep/x/target", "deep/x/.venv", "empty", "src"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        for f in [
            ".env.txt",
            ".hidden/a.txt",
            "deep/target",
            "deep/x/target/t.txt",
            "deep/x/.venv/v.txt",
            "src/node_modules",
        ] {
            std::fs::write(r.join(f), "needle\n").unwrap();
        }
        std::os::unix::fs::symlink(r.join("deep"), r.join("link_dir")).unwrap();
        std::os::unix::fs::symlink(r.join(".env.txt"), r.join("link_file.txt")).unwrap();
        let c = ctx(r);
        let got = run(
            &GlobTool,
            &c,
            json!({"pattern": "**", "include_dirs": true}),
        )
        .await;
        let want = "Found 11 paths under .\n1. .env.txt\n2. .hidden/\n3. .hidden/a.txt\n\
                    4. deep/\n5. deep/target\n6. deep/x/\n7. empty/\n8. link_dir\n\
                    9. link_file.txt\n10. src/\n11. src/node_modules";
        assert_eq!(got, (O, want.to_string()));
        let got = run(&GlobTool, &c, json!({"pattern": "*/*"})).await;
        let want = "Found 3 paths under .\n1. .hidden/a.txt\n2. deep/target\n3. src/node_modules";
        assert_eq!(got, (O, want.to_string()));
        let got = run(&GrepTool, &c, json!({"pattern": "needle"})).await;
        let want = ".env.txt:1: needle\n.hidden/a.txt:1: needle\ndeep/target:1: needle\n\
                    src/node_modules:1: needle";
        assert_eq!(got, (O, want.to_string()));
    }

    #[tokio::test]
    async fn glob_does_not_follow_symlinked_dir_outside() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "s").unwrap();
        std::fs::write(dir.path().join("mine.txt"), "m").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let c = ctx(dir.path());
        let got = run(&GlobTool, &c, json!({"pattern": "**/*.txt"})).await;
        assert_eq!(got, (O, "Found 1 paths under .\n1. mine.txt".to_string()));
        let got = run(&GrepTool, &c, json!({"pattern": "s"})).await;
        assert_eq!(got, (O, "No matches for 's' under .".to_string()));
    }

    #[tokio::test]
    async fn grep_table() {
        let dir = tree();
        let c = ctx(dir.path());
        let long = format!("long.txt:1: hello {}...", "y".repeat(194));
        let skipped = "(skipped 1 file over 1 MB: big.txt; use read_file with start_line/end_line)";
        let all = format!(
            "README.md:1: Hello World\ndocs/guide.md:1: hello docs\n{long}\nsrc/main.rs:2:     println!(\"hello\");\nsrc/nested/lib.rs:1: pub fn HELLO() {{}}\n{skipped}"
        );
        let with_note = |text: &str| format!("{text}\n{skipped}");
        let cases = [
            (json!({"pattern": "hello"}), O, all),
            (json!({"pattern": "hello", "case_sensitive": true, "glob": "*.md"}), O, "docs/guide.md:1: hello docs".into()),
            (json!({"pattern": "HELLO", "case_sensitive": true}), O, with_note("src/nested/lib.rs:1: pub fn HELLO() {}")),
            (json!({"pattern": "hello", "path": "src", "glob": "nested/*.rs"}), O, "src/nested/lib.rs:1: pub fn HELLO() {}".into()),
            (json!({"pattern": "hello", "path": "README.md"}), O, "README.md:1: Hello World".into()),
            (json!({"pattern": "a.b", "literal": true}), O, with_note("src/nested/lib.rs:2: // a.b literal")),
            (json!({"pattern": "l+o w", "literal": true}), O, with_note("No matches for 'l+o w' under .")),
            (json!({"pattern": "l+o w"}), O, with_note("README.md:1: Hello World")),
            (
                json!({"pattern": "hello", "max_results": 2}),
                O,
                with_note("README.md:1: Hello World\ndocs/guide.md:1: hello docs\n... stopped at 2 matches (max_results); narrow the search or raise max_results"),
            ),
            (json!({"pattern": "zzz"}), O, with_note("No matches for 'zzz' under .")),
            (json!({"pattern": "zzz", "path": "src"}), O, "No matches for 'zzz' under src".into()),
            (json!({"pattern": "("}), E, "__regex_error__".into()),
            (json!({"pattern": "x", "path": "../"}), E, "Access denied: path outside the workspace".into()),
        ];
        for (args, status, want) in cases {
            let (s, text) = run(&GrepTool, &c, args.clone()).await;
            assert_eq!(s, status, "{args}: {text}");
            if want == "__regex_error__" {
                assert!(text.starts_with("Error: invalid regex:"), "{text}");
            } else {
                assert_eq!(text, want, "{args}");
            }
        }
    }

    #[tokio::test]
    async fn grep_refuses_a_named_file_it_cannot_search() {
        let dir = tree();
        let c = ctx(dir.path());
        let (status, text) = run(
            &GrepTool,
            &c,
            json!({"pattern": "hello", "path": "big.txt"}),
        )
        .await;
        assert_eq!(status, E);
        assert_eq!(
            text,
            "Error: big.txt is 1048592 bytes; grep does not search files over 1 MB. Use \
             read_file with start_line/end_line, or bash if it is allowed"
        );
        let (status, text) = run(
            &GrepTool,
            &c,
            json!({"pattern": "hello", "path": "blob.bin"}),
        )
        .await;
        assert_eq!(
            (status, text.as_str()),
            (
                E,
                "Error: blob.bin is a binary or unreadable file; grep searches text files only"
            )
        );
    }

    #[tokio::test]
    async fn grep_names_at_most_five_skipped_files() {
        let dir = tempfile::tempdir().unwrap();
        let big = "x".repeat(1024 * 1024 + 1);
        for i in 0..7 {
            std::fs::write(dir.path().join(format!("{i}.log")), &big).unwrap();
        }
        let c = ctx(dir.path());
        let got = run(&GrepTool, &c, json!({"pattern": "x"})).await;
        assert_eq!(
            got,
            (
                O,
                "No matches for 'x' under .\n(skipped 7 files over 1 MB: 0.log, 1.log, 2.log, \
                 3.log, 4.log, …; use read_file with start_line/end_line)"
                    .to_string()
            )
        );
    }

    #[test]
    fn walk_stops_when_cancelled() {
        let dir = tempfile::tempdir().unwrap();
        for d in 0..20 {
            let sub = dir.path().join(format!("d{d}"));
            std::fs::create_dir(&sub).unwrap();
            for f in 0..100 {
                std::fs::write(sub.join(format!("{f}.txt")), "x").unwrap();
            }
        }
        let cancel = CancellationToken::new();
        let seen = AtomicUsize::new(0);
        let got = walk(
            dir.path(),
            &cancel,
            || (),
            |_, _| {
                // The agent is cancelled while the walk is under way.
                if seen.fetch_add(1, Ordering::SeqCst) == 10 {
                    cancel.cancel();
                }
            },
        );
        assert_eq!(got, Err(Cancelled));
        let seen = seen.into_inner();
        assert!(
            seen < 1000,
            "the walk went on after the cancel: {seen} entries"
        );
        let all = walk(dir.path(), &CancellationToken::new(), || 0, |n, _| *n += 1).unwrap();
        assert_eq!(all.states.iter().sum::<usize>(), 2021);
        assert_eq!(all.unreadable, 0);
    }

    /// A visitor's panic reaches the caller instead of leaving the other threads waiting.
    #[test]
    fn a_panicking_visitor_ends_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        for d in 0..8 {
            let sub = dir.path().join(format!("d{d}/e"));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join("f.txt"), "x").unwrap();
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let root = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let got = std::panic::catch_unwind(|| {
                walk(
                    &root,
                    &CancellationToken::new(),
                    || (),
                    // One directory's visit fails; the others' succeed.
                    |_, e| assert!(!e.path.ends_with("d3/e"), "a visitor fails"),
                )
            });
            let _ = tx.send(got.is_err());
        });
        let panicked = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(
            panicked,
            Ok(true),
            "the walk hung or did not pass the panic on"
        );
    }

    #[tokio::test]
    async fn cancelled_searches_say_so() {
        let dir = tree();
        let c = ctx(dir.path());
        c.cancel.cancel();
        let want = (E, "Error: search cancelled".to_string());
        assert_eq!(run(&GrepTool, &c, json!({"pattern": "hello"})).await, want);
        assert_eq!(run(&GlobTool, &c, json!({"pattern": "**"})).await, want);
    }

    /// The parallel search gives what a search file by file would: the first `max` lines in
    /// path order, the cut, and only the large files before the cut.
    #[tokio::test]
    async fn grep_stops_at_max_results_in_path_order() {
        let dir = tempfile::tempdir().unwrap();
        let big = "x".repeat(1024 * 1024 + 1);
        for i in 0..400 {
            let name = format!("f{i:03}.txt");
            if i % 50 == 7 {
                std::fs::write(dir.path().join(name), &big).unwrap();
            } else {
                std::fs::write(
                    dir.path().join(name),
                    format!("a\nhit {i}\nhit again {i}\n"),
                )
                .unwrap();
            }
        }
        let c = ctx(dir.path());
        let (status, text) =
            run(&GrepTool, &c, json!({"pattern": "hit", "max_results": 120})).await;
        assert_eq!(status, O);
        let mut want: Vec<String> = (0..400)
            .filter(|i| i % 50 != 7)
            .flat_map(|i| {
                [
                    format!("f{i:03}.txt:2: hit {i}"),
                    format!("f{i:03}.txt:3: hit again {i}"),
                ]
            })
            .take(120)
            .collect();
        want.push(
            "... stopped at 120 matches (max_results); narrow the search or raise max_results"
                .into(),
        );
        want.push("(skipped 2 files over 1 MB: f007.txt, f057.txt; use read_file with start_line/end_line)".into());
        assert_eq!(text, want.join("\n"));
    }

    /// Every line the pattern matches on its own is in a file the prefilter matches.
    #[test]
    fn prefilter_never_passes_over_a_matching_file() {
        let text = "first\r\nab\r\n\nword end\nlast\r";
        let patterns = [
            "^ab$", "b$", "^$", "\\bend$", "^word", "t$", "^last\r$", "st\r", "\\Bnd", "(?i)^AB",
            "(?:ab)$", "[^x]$", "\\s$",
        ];
        for p in patterns {
            let line_re = Regex::new(p).unwrap();
            let matches_a_line = text.lines().any(|l| line_re.is_match(l));
            let pre = prefilter(p, true).unwrap_or_else(|| panic!("{p}: no prefilter"));
            assert!(!matches_a_line || pre.is_match(text.as_bytes()), "{p}");
        }
        for p in ["\\Afirst", "last\\z", "(?-m)^ab", "(?i-R)b$", "(?x-m)^ab"] {
            assert!(prefilter(p, true).is_none(), "{p}");
        }
    }

    #[tokio::test]
    async fn grep_anchors_hold_per_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "first\r\nab\r\nend ab\n").unwrap();
        let c = ctx(dir.path());
        for (p, want) in [
            ("\\Aab\\z", "a.txt:2: ab"),
            ("(?-m)^ab$", "a.txt:2: ab"),
            ("^ab$", "a.txt:2: ab"),
            ("ab$", "a.txt:2: ab\na.txt:3: end ab"),
        ] {
            let got = run(&GrepTool, &c, json!({"pattern": p})).await;
            assert_eq!(got, (O, want.to_string()), "{p}");
        }
    }

    #[test]
    fn clip_line_is_char_safe() {
        let line = "é".repeat(250);
        assert_eq!(clip_line(&line), format!("{}...", "é".repeat(200)));
        assert_eq!(clip_line("short\r"), "short");
    }

    #[test]
    fn schemas_match_what_the_argument_types_accept() {
        use crate::tools::args::assert_schema_matches;
        assert_schema_matches::<GlobArgs>(
            &["pattern"],
            json!({"pattern": "*", "path": ".", "include_dirs": true, "max_results": 5}),
        );
        assert_schema_matches::<GrepArgs>(
            &["pattern"],
            json!({"pattern": "x", "path": ".", "glob": "*.rs", "literal": true,
                   "case_sensitive": true, "max_results": "5"}),
        );
        assert_eq!(
            GlobTool.spec().parameters["properties"]["max_results"],
            json!({"type": "integer", "minimum": 1, "maximum": GLOB_CAP,
                   "description": "Most paths to return. Default 200, at most 1000.",
                   "default": GLOB_DEFAULT_MAX})
        );
        assert_eq!(
            GrepTool.spec().parameters["properties"]["glob"]["description"],
            "Only search files matching this glob, e.g. '*.py' (matched against the file name) \
             or 'src/**/*.rs' (matched against the path under the search directory)."
        );
    }
}
