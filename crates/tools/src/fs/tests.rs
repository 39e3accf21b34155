//! Helpers for every tool family's unit tests, and the file tools' tests that span several
//! tools or their open steps.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::edit::edit_target;
use super::read::read_target;
use super::target::resolve_target;
use super::write::write_target;
use super::*;
use crate::{SandboxLimits, Tool, ToolContext, ToolStatus};
use deerflow_model::ToolCall;
use deerflow_workspace::{Access, Workspace};

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

pub(crate) const OUTSIDE_MSG: &str = "Access denied: path outside the workspace";

pub(crate) fn is_empty_dir(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
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
    use crate::args::assert_schema_matches;
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
