//! Arbitrary path strings through `Workspace::resolve` in a workspace with symlinks pointing
//! in and out: never a panic, and every accepted path lies under the workspace root or the
//! skills root by the kernel's own resolution.

#![no_main]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use deerflow::workspace::{Access, Workspace};
use libfuzzer_sys::fuzz_target;

struct Setup {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    workspace: Workspace,
    root: PathBuf,
    skills: PathBuf,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let ws = tempfile::tempdir().expect("tempdir");
        let other = tempfile::tempdir().expect("tempdir");
        let r = ws.path();
        std::fs::create_dir_all(r.join("sub/deep")).expect("mkdir");
        std::fs::create_dir_all(other.path().join("skills/demo")).expect("mkdir");
        std::fs::create_dir_all(other.path().join("outside")).expect("mkdir");
        let links: [(&Path, PathBuf); 6] = [
            (Path::new("sub/deep"), r.join("link_in")),
            (other.path(), r.join("link_out")),
            (Path::new("../.."), r.join("sub/link_up")),
            (Path::new("/etc"), r.join("link_etc")),
            (&other.path().join("outside/new"), r.join("dangling_out")),
            (other.path(), other.path().join("skills/escape")),
        ];
        for (target, link) in links {
            symlink(target, link).expect("symlink");
        }
        let workspace = Workspace::new(r, Some(&other.path().join("skills"))).expect("workspace");
        let root = workspace.root().to_path_buf();
        let skills = workspace.skills_root().expect("skills").to_path_buf();
        Setup {
            _dirs: (ws, other),
            workspace,
            root,
            skills,
        }
    })
}

fn inside(s: &Setup, p: &Path) -> bool {
    let mut probe = p;
    loop {
        if let Ok(c) = probe.canonicalize() {
            return c.starts_with(&s.root) || c.starts_with(&s.skills);
        }
        match probe.parent() {
            Some(parent) => probe = parent,
            None => return false,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(path) = std::str::from_utf8(rest) else {
        return;
    };
    let s = setup();
    let access = if mode & 1 == 0 {
        Access::Read
    } else {
        Access::Write
    };
    if let Ok(got) = s.workspace.resolve(path, access) {
        assert!(inside(s, &got), "{path:?} resolved outside: {got:?}");
        if access == Access::Write {
            assert!(
                got.starts_with(&s.root),
                "{path:?} writable outside: {got:?}"
            );
        }
    }
});
