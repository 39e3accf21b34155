//! Path resolution confined to the workspace and the read-only roots beside it: the skills
//! and the run's stored tool results.
//!
//! Every path a tool touches goes through [`Workspace::resolve`]: it maps DeerFlow virtual
//! paths, normalizes `.`/`..` lexically, then checks the real (symlink-resolved) location of
//! the deepest existing ancestor, so neither `..` nor a symlink can reach outside.

use std::path::{Component, Path, PathBuf};

use super::locks::WriteLocks;
use super::process::ProcessGroups;

/// The message for any path that resolves outside the allowed roots.
pub const OUTSIDE: &str = "Access denied: path outside the workspace";
/// The message for a write under the skills root.
pub const SKILLS_READ_ONLY: &str = "Access denied: /mnt/skills is read-only";
/// The message for a write under the stored tool results.
pub const TOOL_RESULTS_READ_ONLY: &str = "Access denied: /mnt/tool-results is read-only";
/// Where large tool results are read back (contract §10).
pub const VIRTUAL_TOOL_RESULTS: &str = "/mnt/tool-results";

const VIRTUAL_WORKSPACE: &str = "/mnt/user-data/workspace";
const VIRTUAL_OUTPUTS: &str = "/mnt/user-data/outputs";
const VIRTUAL_UPLOADS: &str = "/mnt/user-data/uploads";
const VIRTUAL_SKILLS: &str = "/mnt/skills";

/// Symlink hops followed while checking a dangling link before giving up (as the kernel does).
const MAX_LINK_HOPS: usize = 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// The directory tree the tools may reach, plus the shared write locks and process groups.
#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
    skills: Option<PathBuf>,
    /// The run's stored tool results, outside the workspace.
    tool_results: Option<PathBuf>,
    locks: WriteLocks,
    processes: ProcessGroups,
}

impl Workspace {
    /// Canonicalizes `root` (which must exist) and `skills` (a missing skills dir means none).
    pub fn new(root: &Path, skills: Option<&Path>) -> std::io::Result<Workspace> {
        let root = root.canonicalize()?;
        let skills = skills
            .and_then(|s| s.canonicalize().ok())
            .filter(|s| s.is_dir());
        Ok(Workspace {
            root,
            skills,
            tool_results: None,
            locks: WriteLocks::default(),
            processes: ProcessGroups::default(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn skills_root(&self) -> Option<&Path> {
        self.skills.as_deref()
    }

    /// Maps `/mnt/tool-results` (read-only) onto `dir`, which must exist.
    pub fn with_tool_results(mut self, dir: &Path) -> std::io::Result<Workspace> {
        self.tool_results = Some(dir.canonicalize()?);
        Ok(self)
    }

    pub fn tool_results_root(&self) -> Option<&Path> {
        self.tool_results.as_deref()
    }

    pub fn locks(&self) -> &WriteLocks {
        &self.locks
    }

    pub fn processes(&self) -> &ProcessGroups {
        &self.processes
    }

    /// Turns a tool's path argument into a real absolute path inside the allowed roots, or the
    /// error message to hand back to the model.
    pub fn resolve(&self, path: &str, access: Access) -> Result<PathBuf, String> {
        let (joined, via_skills) = self.map_virtual(path.trim())?;
        let lexical = normalize(&joined);
        let real = real_path(&lexical, 0).ok_or_else(|| OUTSIDE.to_string())?;
        let in_root = real.starts_with(&self.root);
        let in_skills = self.skills.as_ref().is_some_and(|s| real.starts_with(s));
        let in_results = self
            .tool_results
            .as_ref()
            .is_some_and(|s| real.starts_with(s));
        if !in_root && !in_skills && !in_results {
            return Err(OUTSIDE.to_string());
        }
        if access == Access::Write && in_results && !in_root {
            return Err(TOOL_RESULTS_READ_ONLY.to_string());
        }
        // The skills tree is read-only however it is named, unless it also lies in the workspace
        // and was reached through a workspace path.
        if access == Access::Write && (via_skills || !in_root) {
            return Err(SKILLS_READ_ONLY.to_string());
        }
        Ok(real)
    }

    /// The root a resolved path lies under (the workspace first, then the skills root) and the
    /// path relative to it: what [`super::beneath::open_beneath`] needs to open it without
    /// trusting the path between the check and the open. `None` for a path under neither.
    pub fn split_root<'a>(&'a self, abs: &'a Path) -> Option<(&'a Path, &'a Path)> {
        std::iter::once(self.root.as_path())
            .chain(self.skills.as_deref())
            .chain(self.tool_results.as_deref())
            .find_map(|root| abs.strip_prefix(root).ok().map(|rel| (root, rel)))
    }

    /// How a resolved path is shown to the model: workspace-relative (`.` for the root), or
    /// `/mnt/skills/…` under the skills root.
    pub fn display_path(&self, abs: &Path) -> String {
        if let Ok(rel) = abs.strip_prefix(&self.root) {
            return if rel.as_os_str().is_empty() {
                ".".to_string()
            } else {
                rel.display().to_string()
            };
        }
        if let Some(rel) = self.skills.as_ref().and_then(|s| abs.strip_prefix(s).ok()) {
            return if rel.as_os_str().is_empty() {
                VIRTUAL_SKILLS.to_string()
            } else {
                format!("{VIRTUAL_SKILLS}/{}", rel.display())
            };
        }
        if let Some(rel) = self
            .tool_results
            .as_ref()
            .and_then(|s| abs.strip_prefix(s).ok())
        {
            return if rel.as_os_str().is_empty() {
                VIRTUAL_TOOL_RESULTS.to_string()
            } else {
                format!("{VIRTUAL_TOOL_RESULTS}/{}", rel.display())
            };
        }
        abs.display().to_string()
    }

    /// Maps a virtual or relative path onto the host; says whether it named the skills root.
    fn map_virtual(&self, path: &str) -> Result<(PathBuf, bool), String> {
        let virtual_roots = [
            (VIRTUAL_WORKSPACE, Some(self.root.clone())),
            (VIRTUAL_OUTPUTS, Some(self.root.join("outputs"))),
            (VIRTUAL_UPLOADS, Some(self.root.join("uploads"))),
            (VIRTUAL_SKILLS, self.skills.clone()),
            (VIRTUAL_TOOL_RESULTS, self.tool_results.clone()),
        ];
        for (prefix, base) in virtual_roots {
            let Some(rest) = strip_virtual(path, prefix) else {
                continue;
            };
            let Some(base) = base else {
                return Err(if prefix == VIRTUAL_SKILLS {
                    "Access denied: no skills directory is configured".to_string()
                } else {
                    "Access denied: no tool results are stored in this run".to_string()
                });
            };
            return Ok((base.join(rest), prefix == VIRTUAL_SKILLS));
        }
        if path.is_empty() {
            return Ok((self.root.clone(), false));
        }
        Ok((self.root.join(path), false))
    }
}

/// `Some(rest)` when `path` is `prefix` or `prefix/rest`.
fn strip_virtual<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(prefix)?;
    if rest.is_empty() {
        return Some("");
    }
    rest.strip_prefix('/').map(|r| r.trim_start_matches('/'))
}

/// Removes `.` and resolves `..` without touching the filesystem (`/..` stays `/`).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The real location of an absolute, normalized path: the canonical form of its deepest
/// existing ancestor with the not-yet-existing rest appended. A dangling symlink is followed
/// lexically so a write through it cannot escape. `None` when the chain cannot be resolved.
fn real_path(path: &Path, hops: usize) -> Option<PathBuf> {
    if hops > MAX_LINK_HOPS {
        return None;
    }
    // Most paths exist: one realpath settles them (the walk below stats first).
    if let Ok(real) = path.canonicalize() {
        return Some(real);
    }
    let mut existing = path;
    let mut missing: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(meta) = existing.symlink_metadata() {
            let base = match existing.canonicalize() {
                Ok(canon) => canon,
                Err(_) if meta.file_type().is_symlink() => follow_dangling(existing, hops)?,
                Err(_) => return None,
            };
            return Some(missing.iter().rev().fold(base, |acc, part| acc.join(part)));
        }
        missing.push(existing.file_name()?);
        existing = existing.parent()?;
    }
}

/// Resolves a symlink whose target does not exist yet.
fn follow_dangling(link: &Path, hops: usize) -> Option<PathBuf> {
    let target = std::fs::read_link(link).ok()?;
    let parent = link.parent()?;
    // The parent exists (the link is in it), so this recursion terminates at the parent.
    let parent_real = real_path(parent, hops + 1)?;
    real_path(&normalize(&parent_real.join(target)), hops + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Workspace) {
        let ws = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join("src/sub")).unwrap();
        std::fs::write(ws.path().join("src/a.txt"), "a").unwrap();
        std::fs::create_dir_all(other.path().join("skills/demo")).unwrap();
        std::fs::write(other.path().join("skills/demo/SKILL.md"), "x").unwrap();
        std::fs::write(other.path().join("secret.txt"), "s").unwrap();
        symlink(other.path(), ws.path().join("escape")).unwrap();
        symlink(other.path().join("new.txt"), ws.path().join("dangling_out")).unwrap();
        symlink(ws.path().join("src/new.txt"), ws.path().join("dangling_in")).unwrap();
        let w = Workspace::new(ws.path(), Some(&other.path().join("skills"))).unwrap();
        (ws, other, w)
    }

    #[test]
    fn resolution_table() {
        let (ws, other, w) = setup();
        let root = w.root().to_path_buf();
        let skills = w.skills_root().unwrap().to_path_buf();
        let abs_inside = root.join("src/a.txt").display().to_string();
        let secret = other.path().join("secret.txt").display().to_string();
        let ws_alias = format!("{}/src/../src/a.txt", ws.path().display());
        let ok = |p: &Path| Ok::<PathBuf, String>(p.to_path_buf());
        let cases: Vec<(&str, Access, Result<PathBuf, String>)> = vec![
            ("src/a.txt", Access::Read, ok(&root.join("src/a.txt"))),
            ("", Access::Read, ok(&root)),
            (".", Access::Read, ok(&root)),
            (&abs_inside, Access::Read, ok(&root.join("src/a.txt"))),
            (&ws_alias, Access::Read, ok(&root.join("src/a.txt"))),
            (
                "src/sub/../a.txt",
                Access::Read,
                ok(&root.join("src/a.txt")),
            ),
            ("src/../..", Access::Read, Err(OUTSIDE.into())),
            ("../x", Access::Write, Err(OUTSIDE.into())),
            ("/etc/passwd", Access::Read, Err(OUTSIDE.into())),
            (&secret, Access::Read, Err(OUTSIDE.into())),
            ("escape/secret.txt", Access::Read, Err(OUTSIDE.into())),
            ("escape/brand/new.txt", Access::Write, Err(OUTSIDE.into())),
            ("dangling_out", Access::Write, Err(OUTSIDE.into())),
            ("dangling_in", Access::Write, ok(&root.join("src/new.txt"))),
            ("/mnt/user-data/workspace", Access::Read, ok(&root)),
            (
                "/mnt/user-data/workspace/src/a.txt",
                Access::Read,
                ok(&root.join("src/a.txt")),
            ),
            (
                "/mnt/user-data/outputs/r.md",
                Access::Write,
                ok(&root.join("outputs/r.md")),
            ),
            (
                "/mnt/user-data/uploads/in.csv",
                Access::Read,
                ok(&root.join("uploads/in.csv")),
            ),
            (
                "/mnt/user-data/outputs/../../x",
                Access::Read,
                Err(OUTSIDE.into()),
            ),
            ("/mnt/user-data", Access::Read, Err(OUTSIDE.into())),
            (
                "/mnt/skills/demo/SKILL.md",
                Access::Read,
                ok(&skills.join("demo/SKILL.md")),
            ),
            (
                "/mnt/skills/demo/SKILL.md",
                Access::Write,
                Err(SKILLS_READ_ONLY.into()),
            ),
            (
                "/mnt/skills/../secret.txt",
                Access::Read,
                Err(OUTSIDE.into()),
            ),
            (
                "new/dir/file.txt",
                Access::Write,
                ok(&root.join("new/dir/file.txt")),
            ),
        ];
        for (input, access, want) in cases {
            assert_eq!(w.resolve(input, access), want, "input {input:?} {access:?}");
        }
    }

    #[test]
    fn split_root_prefers_the_workspace() {
        let (_ws, _other, w) = setup();
        let root = w.root().to_path_buf();
        let skills = w.skills_root().unwrap().to_path_buf();
        let file = root.join("src/a.txt");
        assert_eq!(
            w.split_root(&file),
            Some((root.as_path(), Path::new("src/a.txt")))
        );
        assert_eq!(w.split_root(&root), Some((root.as_path(), Path::new(""))));
        let skill = skills.join("demo/SKILL.md");
        assert_eq!(
            w.split_root(&skill),
            Some((skills.as_path(), Path::new("demo/SKILL.md")))
        );
        assert_eq!(w.split_root(Path::new("/etc/passwd")), None);
    }

    #[test]
    fn stored_tool_results_are_readable_and_read_only() {
        let (_ws, other, w) = setup();
        let dir = other.path().join("results");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("call_1.txt"), "r").unwrap();
        assert_eq!(
            w.resolve("/mnt/tool-results/call_1.txt", Access::Read),
            Err("Access denied: no tool results are stored in this run".into())
        );
        let w = w.with_tool_results(&dir).unwrap();
        let stored = w.tool_results_root().unwrap().join("call_1.txt");
        assert_eq!(
            w.resolve("/mnt/tool-results/call_1.txt", Access::Read),
            Ok(stored.clone())
        );
        assert_eq!(
            w.resolve("/mnt/tool-results/call_1.txt", Access::Write),
            Err(TOOL_RESULTS_READ_ONLY.into())
        );
        assert_eq!(
            w.resolve("/mnt/tool-results/../secret.txt", Access::Read),
            Err(OUTSIDE.into())
        );
        assert_eq!(w.display_path(&stored), "/mnt/tool-results/call_1.txt");
        let root = w.tool_results_root().unwrap();
        assert_eq!(w.split_root(&stored), Some((root, Path::new("call_1.txt"))));
    }

    #[test]
    fn skills_missing_means_none() {
        let ws = tempfile::tempdir().unwrap();
        let w = Workspace::new(ws.path(), Some(&ws.path().join("nope"))).unwrap();
        assert!(w.skills_root().is_none());
        assert!(w.resolve("/mnt/skills/x", Access::Read).is_err());
    }

    #[test]
    fn display_paths() {
        let (_ws, _other, w) = setup();
        assert_eq!(w.display_path(w.root()), ".");
        assert_eq!(w.display_path(&w.root().join("src/a.txt")), "src/a.txt");
        let skill = w.skills_root().unwrap().join("demo/SKILL.md");
        assert_eq!(w.display_path(&skill), "/mnt/skills/demo/SKILL.md");
        assert_eq!(w.display_path(w.skills_root().unwrap()), "/mnt/skills");
    }

    /// Symlinks in and out of a workspace, a skills root beside it, and generated paths made
    /// of `..`, `.`, names, links, absolute and virtual prefixes: whatever `resolve` accepts
    /// lies under the workspace root or the skills root, checked by the kernel's own
    /// resolution (`canonicalize`) of the result or of its deepest existing ancestor.
    #[test]
    fn every_accepted_path_stays_inside_the_roots() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};

        let ws = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let r = ws.path();
        std::fs::create_dir_all(r.join("sub/deep")).unwrap();
        std::fs::write(r.join("sub/a.txt"), "a").unwrap();
        std::fs::create_dir_all(other.path().join("skills/demo")).unwrap();
        std::fs::write(other.path().join("skills/demo/SKILL.md"), "x").unwrap();
        std::fs::create_dir_all(other.path().join("outside/inner")).unwrap();
        symlink(r.join("sub/deep"), r.join("link_in")).unwrap();
        symlink("sub", r.join("link_rel_in")).unwrap();
        symlink(other.path().join("outside"), r.join("link_out")).unwrap();
        symlink("../..", r.join("sub/link_up")).unwrap();
        symlink("/etc", r.join("link_etc")).unwrap();
        symlink(other.path().join("outside/new"), r.join("dangling_out")).unwrap();
        symlink("sub/new", r.join("dangling_in")).unwrap();
        symlink("loop_b", r.join("loop_a")).unwrap();
        symlink("loop_a", r.join("loop_b")).unwrap();
        symlink(other.path().join("outside"), r.join("outputs")).unwrap();
        symlink(r, other.path().join("skills/back_to_ws")).unwrap();
        symlink(other.path().join("skills"), r.join("link_skills")).unwrap();
        symlink(other.path(), other.path().join("skills/escape")).unwrap();
        let w = Workspace::new(r, Some(&other.path().join("skills"))).unwrap();
        let root = w.root().to_path_buf();
        let skills = w.skills_root().unwrap().to_path_buf();

        let prefixes: Vec<String> = vec![
            String::new(),
            "/".into(),
            "/etc/".into(),
            format!("{}/", root.display()),
            format!("{}/", r.display()),
            format!("{}/", other.path().display()),
            "/mnt/user-data/workspace/".into(),
            "/mnt/user-data/outputs/".into(),
            "/mnt/user-data/uploads/".into(),
            "/mnt/skills/".into(),
            "/mnt/".into(),
        ];
        let segment = prop_oneof![
            Just(".."),
            Just("."),
            Just(""),
            Just("sub"),
            Just("deep"),
            Just("a.txt"),
            Just("new"),
            Just("demo"),
            Just("link_in"),
            Just("link_rel_in"),
            Just("link_out"),
            Just("link_up"),
            Just("link_etc"),
            Just("dangling_out"),
            Just("dangling_in"),
            Just("loop_a"),
            Just("outputs"),
            Just("back_to_ws"),
            Just("link_skills"),
            Just("escape"),
            Just("inner"),
            Just("passwd"),
        ];
        let strategy = (
            0..prefixes.len(),
            proptest::collection::vec(segment, 0..7),
            any::<bool>(),
        );
        let inside = |p: &Path| -> bool {
            // The kernel's view: canonicalize the result, or its deepest existing ancestor.
            let mut probe = p;
            loop {
                if let Ok(c) = probe.canonicalize() {
                    return c.starts_with(&root) || c.starts_with(&skills);
                }
                match probe.parent() {
                    Some(parent) => probe = parent,
                    None => return false,
                }
            }
        };
        let mut runner = TestRunner::new(Config {
            cases: 256,
            failure_persistence: None,
            ..Config::default()
        });
        let (accepted, refused) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
        runner
            .run(&strategy, |(prefix, segments, write)| {
                let path = format!("{}{}", prefixes[prefix], segments.join("/"));
                let access = if write { Access::Write } else { Access::Read };
                let got = w.resolve(&path, access);
                let counter = if got.is_ok() { &accepted } else { &refused };
                counter.set(counter.get() + 1);
                if let Ok(got) = got {
                    prop_assert!(got.is_absolute(), "{path:?} -> {got:?}");
                    prop_assert!(
                        got.starts_with(&root) || got.starts_with(&skills),
                        "{path:?} -> {got:?}"
                    );
                    prop_assert!(inside(&got), "{path:?} -> {got:?} escapes");
                    if write {
                        prop_assert!(got.starts_with(&root), "{path:?} -> {got:?} written");
                    }
                }
                Ok(())
            })
            .unwrap();
        // Not vacuous: the generator reaches both sides.
        assert!(
            accepted.get() > 20 && refused.get() > 20,
            "{accepted:?} {refused:?}"
        );
    }

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../../a")), PathBuf::from("/a"));
    }
}
