//! `grep`: the lines of the files under a path that match a regular expression.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::scan::{Found, LineSearch, GREP_MAX_FILE_BYTES};
use super::shared::{blocking, max_results, search_root, with_unreadable_note};
use crate::args::{lenient, spec, with_args, Count};
use crate::fs::decode_text;
use crate::walk::{walk, Cancelled, Seen};
use crate::ToolError;
use crate::{Concurrency, Tool, ToolContext, ToolOutput};
use deerflow_model::{BoxFuture, ToolCall, ToolSpec};
use deerflow_workspace::Workspace;

const GREP_DEFAULT_MAX: u64 = 100;
const GREP_CAP: u64 = 500;

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
    /// The same search over the same files, whatever the limits and case.
    fn loop_key(&self, args: &deerflow_model::ToolArgs) -> u64 {
        crate::loop_key::arguments(args, &["pattern", "path", "glob"])
    }

    fn concurrency(&self, _call: &ToolCall) -> Concurrency {
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

/// One `grep` call's arguments, checked and compiled.
struct GrepQuery {
    pattern: String,
    lines: LineSearch,
    root: PathBuf,
    /// The file filter and whether it applies to the file name (no '/' in the glob).
    filter: Option<(GlobMatcher, bool)>,
}

impl GrepQuery {
    fn from_args(args: GrepArgs, ctx: &ToolContext) -> Result<GrepQuery, ToolOutput> {
        let pattern = args.pattern;
        let source = if args.literal {
            regex::escape(&pattern)
        } else {
            pattern.clone()
        };
        let default = ctx.limits.grep_max_results.unwrap_or(GREP_DEFAULT_MAX);
        let max = max_results(args.max_results, default, GREP_CAP);
        let lines = LineSearch::new(&source, args.case_sensitive, max)
            .map_err(|e| ToolError::invalid("regex", e))?;
        let filter = match args.glob.as_deref().filter(|g| !g.is_empty()) {
            None => None,
            Some(g) => {
                let glob = Glob::new(g).map_err(|e| ToolError::invalid("glob", e))?;
                Some((glob.compile_matcher(), !g.contains('/')))
            }
        };
        let root = search_root(ctx, args.path.as_deref())?;
        Ok(GrepQuery {
            pattern,
            lines,
            root,
            filter,
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
        let found = self.lines.search(&files, cancel)?;
        let text = with_unreadable_note(self.report(ws, found), walked.unreadable);
        Ok(ToolOutput::ok(text))
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
                self.lines.max
            ));
        }
        if !found.too_large.is_empty() {
            lines.push(skipped_note(ws, &found.too_large));
        }
        lines.join("\n")
    }
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
        Searchable::TooLarge(len) => Err(ToolError::Message(format!(
            "{shown} is {len} bytes; grep does not search files over 1 MB. Use read_file \
             with start_line/end_line, or bash if it is allowed"
        ))
        .into()),
        Searchable::Skip => Err(ToolError::Message(format!(
            "{shown} is a binary or unreadable file; grep searches text files only"
        ))
        .into()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tests::{ctx, run};
    use crate::search::tests::tree;
    use crate::ToolStatus::{Error as E, Ok as O};
    use serde_json::json;

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

    /// The parallel search gives what a search file by file would: the first `max` lines in
    /// path order, the cut, and only the large files before the cut.
    /// The config's `grep` entry sets the default.
    #[tokio::test]
    async fn a_configured_max_results_is_the_default() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hit\nhit\nhit\n").unwrap();
        let limits = crate::SandboxLimits {
            grep_max_results: Some(2),
            ..Default::default()
        };
        let c = crate::fs::tests::ctx_with(dir.path(), limits);
        let (_, out) = run(&GrepTool, &c, json!({"pattern": "hit"})).await;
        assert!(out.contains("stopped at 2 matches"), "{out}");
    }

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
}
