//! `str_replace`: replace one exact occurrence (or all) of a string in a file, streamed.

use std::io::Write;

use schemars::JsonSchema;
use serde::Deserialize;

use super::binary::BINARY_SNIFF_BYTES;
use super::target::{blocking, open_regular, resolve_target, Target, READ_DIR_HINT};
use crate::args::{lenient, spec, with_args};
use crate::edit_stream::{replace_stream, ScanError, TextCheck, CHUNK};
use crate::ToolError;
use crate::{Tool, ToolContext, ToolOutput};
use deerflow_model::{BoxFuture, ToolCall, ToolSpec};
use deerflow_workspace::beneath::{self, OpenMode};
use deerflow_workspace::Access;

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
        return Err(ToolError::Message("old_str must not be empty".into()).into());
    }
    // Held across read-modify-write so a parallel edit or write cannot be lost.
    let _guard = ctx.workspace.locks().lock(&target.abs).await;
    edit_target(ctx, &target, (old, new), move |count, shown| {
        match (count, replace_all) {
            (0, _) => Err(ToolError::Message(format!("old_str not found in {shown}")).into()),
            (1, _) | (_, true) => Ok(()),
            (n, false) => Err(ToolError::Message(format!(
                "old_str occurs {n} times in {shown}; add surrounding context to make it \
                 unique, or set replace_all to true"
            ))
            .into()),
        }
    })
    .await?;
    Ok(ToolOutput::ok("OK"))
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
            Err(ScanError::NotText) => return Err(ToolError::Binary { path: shown }.into()),
            Err(ScanError::Io(e)) => return Err(ToolError::cannot("read", &shown, e).into()),
        };
        allowed(count, &shown)?;
        let fail = |e: std::io::Error| ToolOutput::from(ToolError::cannot("write", &shown, e));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tests::{ctx, run};
    use crate::ToolStatus::{Error as E, Ok as O};
    use serde_json::json;
    use std::sync::Arc;

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
}
