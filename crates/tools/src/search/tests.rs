//! The search tools' tests that span both of them, and the tree most of their tests search.

use std::path::Path;

use serde_json::json;

use super::glob::{GLOB_CAP, GLOB_DEFAULT_MAX};
use super::*;
use crate::fs::tests::{ctx, run};
use crate::Tool;
use crate::ToolStatus::{Error as E, Ok as O};

pub(crate) fn tree() -> tempfile::TempDir {
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
async fn cancelled_searches_say_so() {
    let dir = tree();
    let c = ctx(dir.path());
    c.cancel.cancel();
    let want = (E, "Error: search cancelled".to_string());
    assert_eq!(run(&GrepTool, &c, json!({"pattern": "hello"})).await, want);
    assert_eq!(run(&GlobTool, &c, json!({"pattern": "**"})).await, want);
}

#[test]
fn schemas_match_what_the_argument_types_accept() {
    use crate::args::assert_schema_matches;
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
