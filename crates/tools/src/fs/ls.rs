//! `ls`: a two-level listing of a directory.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;

use super::entries::{read_each, read_entries};
use super::listing::{ChildPrefix, Listing};
use super::target::resolve;
use crate::args::{lenient, spec, with_args};
use crate::ToolError;
use crate::{Concurrency, Tool, ToolContext, ToolOutput};
use deerflow_base::text::{cut, Keep};
use deerflow_model::{BoxFuture, ToolCall, ToolSpec};
use deerflow_workspace::Access;

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
    /// Listed again is the same directory, whatever else the call says.
    fn loop_key(&self, args: &deerflow_model::ToolArgs) -> u64 {
        crate::loop_key::arguments(args, &["path"])
    }

    fn concurrency(&self, _call: &ToolCall) -> Concurrency {
        Concurrency::Shared
    }

    fn name(&self) -> &str {
        "ls"
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
                        .unwrap_or_else(|e| Err(ToolError::failed("ls", e)))
                }
            };
            match listed {
                Ok(text) => ToolOutput::ok(text),
                Err(e) => e.into(),
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
    ws: &deerflow_workspace::Workspace,
    max: usize,
) -> Result<String, ToolError> {
    list_levels(dir, ws, max, None).map(Option::unwrap_or_default)
}

/// [`list_two_levels`]; under a `budget`, `None` once more entries were read or when there
/// are subdirectories to read.
fn list_levels(
    dir: &Path,
    ws: &deerflow_workspace::Workspace,
    max: usize,
    budget: Option<usize>,
) -> Result<Option<String>, ToolError> {
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
            return Err(ToolError::NotFound {
                what: "path",
                path: shown,
            });
        }
        Err(e) => return Err(ToolError::cannot("list", &shown, e)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tests::{ctx, ctx_with, run};
    use crate::fs::IGNORED_DIRS;
    use crate::SandboxLimits;
    use crate::ToolStatus::{Error as E, Ok as O};
    use deerflow_workspace::Workspace;
    use serde_json::json;

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
}
