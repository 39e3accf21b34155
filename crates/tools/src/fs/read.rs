//! `read_file`: a text file, whole or a line range.

use schemars::JsonSchema;
use serde::Deserialize;

use super::binary::BINARY_SNIFF_BYTES;
use super::target::{blocking, open_regular, resolve_target, Target, READ_DIR_HINT};
use crate::args::{spec, with_args, Count};
use crate::read_range::{read_range, Excerpt};
use crate::ToolError;
use crate::{Concurrency, Tool, ToolContext, ToolOutput};
use deerflow_model::{BoxFuture, ToolCall, ToolSpec};
use deerflow_workspace::beneath::OpenMode;
use deerflow_workspace::Access;

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
    fn loop_key(&self, args: &deerflow_model::ToolArgs) -> u64 {
        crate::loop_key::path_and_line_stretch(args)
    }

    fn concurrency(&self, _call: &ToolCall) -> Concurrency {
        Concurrency::Shared
    }

    fn name(&self) -> &str {
        "read_file"
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
pub(super) async fn read_target(
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
            .map_err(|e| ToolError::cannot("read", &shown, e).into())
            .map(|x| (x, shown))
    })
    .await?;
    match excerpt {
        (Excerpt::BadRange(message), _) => Err(ToolError::Refused(message).into()),
        (Excerpt::Binary, shown) => Err(ToolError::Binary { path: shown }.into()),
        (Excerpt::Text { kept, .. }, _) if kept.is_empty() => Ok(ToolOutput::ok("(empty file)")),
        (Excerpt::Text { kept, cut: 0 }, _) => Ok(ToolOutput::ok(kept)),
        (Excerpt::Text { kept, cut }, _) => Ok(ToolOutput::ok(format!(
            "{kept}\n... [{cut} characters truncated] ..."
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tests::{ctx, ctx_with, run};
    use crate::SandboxLimits;
    use crate::ToolStatus::{Error as E, Ok as O};
    use serde_json::json;

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
}
