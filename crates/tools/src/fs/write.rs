//! `write_file`: create, overwrite or append to a file.

use std::io::Write;

use schemars::JsonSchema;
use serde::Deserialize;

use super::target::{blocking, open_regular, resolve_target, Target};
use crate::args::{lenient, spec, with_args};
use crate::ToolError;
use crate::{Tool, ToolContext, ToolOutput};
use deerflow_model::{BoxFuture, ToolCall, ToolSpec};
use deerflow_workspace::beneath::{self, OpenMode};
use deerflow_workspace::paths::OUTSIDE;
use deerflow_workspace::Access;

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
            ToolOutput::from(if beneath::is_escape(&e) {
                ToolError::Refused(OUTSIDE.to_string())
            } else {
                ToolError::cannot("write", &shown, e)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tests::{ctx, is_empty_dir, run, OUTSIDE_MSG};
    use crate::fs::StrReplaceTool;
    use crate::ToolStatus::{Error as E, Ok as O};
    use serde_json::json;
    use std::sync::Arc;

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
        let flipper = deerflow_workspace::beneath::testing::spawn_flipper(
            &root.join("a"),
            outside.path(),
            &stop,
        );
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
}
