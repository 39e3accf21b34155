//! `glob`: the paths under a directory that match a glob pattern.

use std::collections::BinaryHeap;
use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::shared::{blocking, max_results, search_root, with_unreadable_note};
use crate::args::{lenient, spec, with_args, Count};
use crate::walk::{walk, Cancelled};
use crate::ToolError;
use crate::{Concurrency, Tool, ToolContext, ToolOutput};
use deerflow_model::{BoxFuture, ToolCall, ToolSpec};
use deerflow_workspace::Workspace;

pub(super) const GLOB_DEFAULT_MAX: u64 = 200;
pub(super) const GLOB_CAP: u64 = 1000;

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
    /// The same pattern under the same directory, whatever the limits.
    fn loop_key(&self, args: &deerflow_model::ToolArgs) -> u64 {
        crate::loop_key::arguments(args, &["pattern", "path"])
    }

    fn concurrency(&self, _call: &ToolCall) -> Concurrency {
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
                    .map_err(|e| ToolError::invalid("glob pattern", e))?
                    .compile_matcher();
                let root = search_root(ctx, args.path.as_deref())?;
                let default = ctx.limits.glob_max_results.unwrap_or(GLOB_DEFAULT_MAX);
                let max = max_results(args.max_results, default, GLOB_CAP);
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
    Ok(with_unreadable_note(out, walked.unreadable))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tests::{ctx, run};
    use crate::search::tests::tree;
    use crate::ToolStatus::{Error as E, Ok as O};
    use serde_json::json;

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

    /// The config's `glob` entry sets the default; a call's own `max_results` still wins.
    #[tokio::test]
    async fn a_configured_max_results_is_the_default() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("f{i}.txt")), "x").unwrap();
        }
        let limits = crate::SandboxLimits {
            glob_max_results: Some(2),
            ..Default::default()
        };
        let c = crate::fs::tests::ctx_with(dir.path(), limits);
        let (_, out) = run(&GlobTool, &c, json!({"pattern": "*.txt"})).await;
        assert!(out.ends_with("... 3 more paths not shown (max_results=2); narrow the pattern or raise max_results"), "{out}");
        let (_, out) = run(&GlobTool, &c, json!({"pattern": "*.txt", "max_results": 4})).await;
        assert!(out.contains("(max_results=4)"), "{out}");
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
}
