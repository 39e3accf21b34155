//! The tools of contract §6 through the binary: each table row is one lead tool call in a
//! replay cassette, checked by its `tool_result` event (`status` and `output` exactly).

use std::path::Path;

use serde_json::{json, Value};

use super::harness::{cassette, deerflow, processes_with, workspace, Output};

const OUTSIDE: &str = "Access denied: path outside the workspace";

/// One row: tool name, arguments, expected status and output.
type Row<'a> = (&'a str, Value, &'a str, String);

/// Runs every row as its own lead turn (in order), then a final answer; checks each
/// `tool_result` against its row and returns the run.
async fn run_table(ws: &Path, extra: &[&str], rows: &[Row<'_>]) -> Output {
    let mut lead: Vec<Value> = rows
        .iter()
        .enumerate()
        .map(|(i, (name, args, _, _))| {
            json!({"tool_calls": [{"id": format!("c{i}"), "name": name, "arguments": args}]})
        })
        .collect();
    lead.push(json!({"text": "done"}));
    // The cassette lives outside the workspace so `ls`/`glob` do not see it.
    let dir = tempfile::tempdir().unwrap();
    let c = cassette(dir.path(), json!({"version": 1, "lead": lead}));
    let model = format!("replay:{}", c.display());
    let mut args = vec!["run", "--json", "--no-subagents", "-m", &model, "-C"];
    let ws_str = ws.to_str().unwrap();
    args.push(ws_str);
    args.extend_from_slice(extra);
    args.push("use the tools");
    let out = deerflow(args).cwd(ws).json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let results = out.of_type("tool_result");
    assert_eq!(results.len(), rows.len(), "{:#?}", out.events);
    for (i, ((name, args, status, want), got)) in rows.iter().zip(&results).enumerate() {
        assert_eq!(got["call_id"], format!("c{i}"));
        assert_eq!(got["name"], *name);
        assert_eq!(
            (
                got["status"].as_str().unwrap(),
                got["output"].as_str().unwrap()
            ),
            (*status, want.as_str()),
            "row {i}: {name} {args}"
        );
        assert_eq!(got["truncated"], false, "row {i}");
    }
    out
}

fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn ls_lists_two_levels() {
    let ws = workspace();
    let r = ws.path();
    put(r, "b.txt", "");
    put(r, "a.txt", "");
    put(r, "d/g.txt", "");
    put(r, "d/e/too-deep.txt", "");
    std::fs::create_dir_all(r.join("empty")).unwrap();
    let top = "a.txt\nb.txt\nd/\nd/e/\nd/g.txt\nempty/".to_string();
    run_table(
        r,
        &[],
        &[
            ("ls", json!({}), "ok", top.clone()),
            ("ls", json!({"path": "."}), "ok", top.clone()),
            ("ls", json!({"path": "/mnt/user-data/workspace"}), "ok", top),
            (
                "ls",
                json!({"path": "d"}),
                "ok",
                "d/e/\nd/e/too-deep.txt\nd/g.txt".into(),
            ),
            (
                "ls",
                json!({"path": "d/.."}),
                "ok",
                "a.txt\nb.txt\nd/\nd/e/\nd/g.txt\nempty/".into(),
            ),
            ("ls", json!({"path": "empty"}), "ok", "(empty)".into()),
            ("ls", json!({"path": ".."}), "error", OUTSIDE.into()),
            ("ls", json!({"path": "/etc"}), "error", OUTSIDE.into()),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn read_file_ranges_and_refusals() {
    let ws = workspace();
    let r = ws.path();
    put(r, "f.txt", "one\ntwo\nthree\n");
    std::fs::write(r.join("blob.bin"), b"abc\0def").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", r.join("pw")).unwrap();
    std::os::unix::fs::symlink("/etc", r.join("etc-link")).unwrap();
    run_table(
        r,
        &[],
        &[
            ("read_file", json!({"path": "f.txt"}), "ok", "one\ntwo\nthree\n".into()),
            ("read_file", json!({"path": "f.txt", "start_line": 2, "end_line": 2}), "ok", "two\n".into()),
            ("read_file", json!({"path": "f.txt", "start_line": 2}), "ok", "two\nthree\n".into()),
            ("read_file", json!({"path": "f.txt", "end_line": 1}), "ok", "one\n".into()),
            (
                "read_file",
                json!({"path": "blob.bin"}),
                "error",
                "Error: blob.bin is a binary file; read_file only reads text files".into(),
            ),
            ("read_file", json!({"path": "../x"}), "error", OUTSIDE.into()),
            ("read_file", json!({"path": "/etc/passwd"}), "error", OUTSIDE.into()),
            ("read_file", json!({"path": "pw"}), "error", OUTSIDE.into()),
            ("read_file", json!({"path": "etc-link/passwd"}), "error", OUTSIDE.into()),
            // A `..` that stays inside is fine; an absolute path inside too.
            ("read_file", json!({"path": "sub/../f.txt", "end_line": 1}), "ok", "one\n".into()),
            (
                "read_file",
                json!({"path": format!("{}/f.txt", r.canonicalize().unwrap().display()), "start_line": 3}),
                "ok",
                "three\n".into(),
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn write_file_creates_parents_and_appends() {
    let ws = workspace();
    let r = ws.path();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), r.join("out-link")).unwrap();
    run_table(
        r,
        &[],
        &[
            (
                "write_file",
                json!({"path": "a/b/c.txt", "content": "x\n"}),
                "ok",
                "OK".into(),
            ),
            (
                "write_file",
                json!({"path": "a/b/c.txt", "content": "y\n", "append": true}),
                "ok",
                "OK".into(),
            ),
            (
                "write_file",
                json!({"path": "/mnt/user-data/workspace/a.txt", "content": "ws"}),
                "ok",
                "OK".into(),
            ),
            (
                "write_file",
                json!({"path": "/mnt/user-data/outputs/b.txt", "content": "out"}),
                "ok",
                "OK".into(),
            ),
            (
                "write_file",
                json!({"path": "../x", "content": "no"}),
                "error",
                OUTSIDE.into(),
            ),
            (
                "write_file",
                json!({"path": "/tmp/deerflow-escape.txt", "content": "no"}),
                "error",
                OUTSIDE.into(),
            ),
            (
                "write_file",
                json!({"path": "out-link/escape.txt", "content": "no"}),
                "error",
                OUTSIDE.into(),
            ),
            (
                "read_file",
                json!({"path": "/mnt/user-data/outputs/b.txt"}),
                "ok",
                "out".into(),
            ),
        ],
    )
    .await;
    assert_eq!(read(r, "a/b/c.txt"), "x\ny\n");
    assert_eq!(read(r, "a.txt"), "ws");
    assert_eq!(read(r, "outputs/b.txt"), "out");
    assert!(!r.parent().unwrap().join("x").exists());
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn str_replace_unique_all_missing_and_ambiguous() {
    let ws = workspace();
    let r = ws.path();
    put(r, "f.txt", "foo bar foo baz");
    run_table(
        r,
        &[],
        &[
            ("str_replace", json!({"path": "f.txt", "old_str": "bar", "new_str": "BAR"}), "ok", "OK".into()),
            (
                "str_replace",
                json!({"path": "f.txt", "old_str": "foo", "new_str": "X"}),
                "error",
                "Error: old_str occurs 2 times in f.txt; add surrounding context to make it unique, or set replace_all to true".into(),
            ),
            (
                "str_replace",
                json!({"path": "f.txt", "old_str": "qux", "new_str": "X"}),
                "error",
                "Error: old_str not found in f.txt".into(),
            ),
            ("str_replace", json!({"path": "f.txt", "old_str": "foo", "new_str": "X", "replace_all": true}), "ok", "OK".into()),
            ("str_replace", json!({"path": "../f.txt", "old_str": "a", "new_str": "b"}), "error", OUTSIDE.into()),
        ],
    )
    .await;
    assert_eq!(read(r, "f.txt"), "X BAR X baz");
}

#[tokio::test(flavor = "multi_thread")]
async fn glob_and_grep() {
    let ws = workspace();
    let r = ws.path();
    put(r, "README.md", "Hello World\nsecond line\n");
    put(
        r,
        "src/main.rs",
        "fn main() {\n    println!(\"hello\");\n}\n",
    );
    put(r, "src/nested/lib.rs", "pub fn HELLO() {}\n");
    run_table(
        r,
        &[],
        &[
            (
                "glob",
                json!({"pattern": "**/*.rs"}),
                "ok",
                "Found 2 paths under .\n1. src/main.rs\n2. src/nested/lib.rs".into(),
            ),
            ("glob", json!({"pattern": "*.rs", "path": "src"}), "ok", "Found 1 paths under src\n1. src/main.rs".into()),
            ("glob", json!({"pattern": "*", "path": "/etc"}), "error", OUTSIDE.into()),
            (
                "grep",
                json!({"pattern": "hello"}),
                "ok",
                "README.md:1: Hello World\nsrc/main.rs:2:     println!(\"hello\");\nsrc/nested/lib.rs:1: pub fn HELLO() {}".into(),
            ),
            (
                "grep",
                json!({"pattern": "HELLO", "case_sensitive": true}),
                "ok",
                "src/nested/lib.rs:1: pub fn HELLO() {}".into(),
            ),
            ("grep", json!({"pattern": "zzz"}), "ok", "No matches for 'zzz' under .".into()),
            ("grep", json!({"pattern": "x", "path": "../"}), "error", OUTSIDE.into()),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bash_is_refused_without_allow_bash() {
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    let c = cassette(
        dir.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"id": "b1", "name": "bash", "arguments": {"command": "touch made-by-bash"}}]},
            {"text": "done"}
        ]}),
    );
    let model = format!("replay:{}", c.display());
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &model,
        "-C",
        ws.path().to_str().unwrap(),
        "x",
    ])
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = out.first("tool_result");
    assert_eq!(r["status"], "error");
    assert!(r["output"].as_str().unwrap().contains("bash"), "{r}");
    assert!(!ws.path().join("made-by-bash").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn bash_output_format() {
    let ws = workspace();
    let r = ws.path();
    put(r, "hello.txt", "hi\n");
    run_table(
        r,
        &["--allow-bash"],
        &[
            (
                "bash",
                json!({"command": "cat hello.txt"}),
                "ok",
                "hi\n".into(),
            ),
            (
                "bash",
                json!({"command": "true"}),
                "ok",
                "(no output)".into(),
            ),
            (
                "bash",
                json!({"command": "echo out; echo err >&2; exit 3", "description": "mixed"}),
                "ok",
                "out\n\nStd Error:\nerr\n\nExit Code: 3".into(),
            ),
            (
                "bash",
                json!({"command": "exit 7"}),
                "ok",
                "\nExit Code: 7".into(),
            ),
            (
                "bash",
                json!({"command": "pwd"}),
                "ok",
                format!("{}\n", r.canonicalize().unwrap().display()),
            ),
            (
                "bash",
                json!({"command": "cat; echo eof"}),
                "ok",
                "eof\n".into(),
            ),
        ],
    )
    .await;
}

/// DeerFlow's config.example.yaml: "Set to 0 to disable truncation" of these three limits.
#[tokio::test(flavor = "multi_thread")]
async fn a_zero_output_limit_disables_truncation_as_in_deerflow() {
    let ws = workspace();
    let r = ws.path();
    put(r, "hello.txt", "hi\n");
    run_table(
        r,
        &[
            "--allow-bash",
            "--set",
            "sandbox.bash_output_max_chars=0",
            "--set",
            "sandbox.read_file_output_max_chars=0",
            "--set",
            "sandbox.ls_output_max_chars=0",
        ],
        &[
            (
                "bash",
                json!({"command": "cat hello.txt"}),
                "ok",
                "hi\n".into(),
            ),
            (
                "read_file",
                json!({"path": "hello.txt"}),
                "ok",
                "hi\n".into(),
            ),
            ("ls", json!({}), "ok", "hello.txt".into()),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bash_timeout_kills_the_whole_group() {
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("conf.yaml");
    std::fs::write(&cfg, "sandbox:\n  bash_command_timeout: 1\n").unwrap();
    // A marker of this run's own: another test process may be sleeping too.
    let marker = format!("{}", 800_000 + fastrand::u32(0..99_999));
    let c = cassette(
        dir.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"id": "slow", "name": "bash", "arguments": {"command": format!("sleep {marker} & sleep 30")}}]},
            {"text": "done"}
        ]}),
    );
    let model = format!("replay:{}", c.display());
    let started = std::time::Instant::now();
    let out = deerflow([
        "run",
        "--json",
        "-c",
        cfg.to_str().unwrap(),
        "--allow-bash",
        "-m",
        &model,
        "-C",
        ws.path().to_str().unwrap(),
        "x",
    ])
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = out.first("tool_result");
    assert_eq!(r["status"], "error", "{r}");
    assert!(
        started.elapsed().as_secs() < 20,
        "the timeout did not apply"
    );
    assert_eq!(processes_with(&marker), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn skills_are_readable_never_writable() {
    let ws = workspace();
    let skills = tempfile::tempdir().unwrap();
    put(
        skills.path(),
        "demo/SKILL.md",
        "---\nname: demo\ndescription: A demo skill\n---\nBody\n",
    );
    let sk = skills.path().to_str().unwrap().to_string();
    run_table(
        ws.path(),
        &["--skills", &sk],
        &[
            (
                "read_file",
                json!({"path": "/mnt/skills/demo/SKILL.md", "start_line": 5}),
                "ok",
                "Body\n".into(),
            ),
            (
                "ls",
                json!({"path": "/mnt/skills"}),
                "ok",
                "/mnt/skills/demo/\n/mnt/skills/demo/SKILL.md".into(),
            ),
            (
                "write_file",
                json!({"path": "/mnt/skills/demo/x.md", "content": "x"}),
                "error",
                "Access denied: /mnt/skills is read-only".into(),
            ),
            (
                "str_replace",
                json!({"path": "/mnt/skills/demo/SKILL.md", "old_str": "Body", "new_str": "Evil"}),
                "error",
                "Access denied: /mnt/skills is read-only".into(),
            ),
            (
                "read_file",
                json!({"path": "/mnt/skills/../../etc/passwd"}),
                "error",
                OUTSIDE.into(),
            ),
        ],
    )
    .await;
    assert!(!skills.path().join("demo/x.md").exists());
    assert!(read(skills.path(), "demo/SKILL.md").ends_with("Body\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn present_files_become_relative_artifacts() {
    let ws = workspace();
    let r = ws.path();
    put(r, "report.md", "# r");
    put(r, "outputs/chart.txt", "c");
    let abs = format!("{}/report.md", r.canonicalize().unwrap().display());
    let out = run_table(
        r,
        &[],
        &[
            (
                "present_files",
                json!({"filepaths": ["/mnt/user-data/outputs/chart.txt", abs]}),
                "ok",
                "Presented 2 file(s): outputs/chart.txt, report.md".into(),
            ),
            (
                "present_files",
                json!({"filepaths": ["../escape.txt"]}),
                "error",
                OUTSIDE.into(),
            ),
            (
                "present_files",
                json!({"filepaths": ["/etc/passwd"]}),
                "error",
                OUTSIDE.into(),
            ),
        ],
    )
    .await
    .completed()
    .clone();
    assert_eq!(out["artifacts"], json!(["outputs/chart.txt", "report.md"]));
}

/// A 200 MB file is edited as it streams: deerflow's peak resident memory (VmHWM, read by a
/// bash call of the same run from /proc of its parent) stays far below the file's size.
#[tokio::test(flavor = "multi_thread")]
async fn str_replace_on_a_large_file_keeps_memory_small() {
    use std::io::{Read, Seek, Write};
    let ws = workspace();
    let big = ws.path().join("big.txt");
    let block: Vec<u8> = (0..1024 * 1024).map(|i| b"abcdefghij\n"[i % 11]).collect();
    let marker_at = 100 * block.len() - 3; // across a block (and chunk) border
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
        for _ in 0..200 {
            f.write_all(&block).unwrap();
        }
        f.seek(std::io::SeekFrom::Start(marker_at as u64)).unwrap();
        f.write_all(b"<<MARK>>").unwrap();
    }
    let rows: Vec<Row> = vec![(
        "str_replace",
        json!({"path": "big.txt", "old_str": "<<MARK>>", "new_str": "[[DONE]]!"}),
        "ok",
        "OK".into(),
    )];
    let mut lead: Vec<Value> = rows
        .iter()
        .map(|(name, args, _, _)| json!({"tool_calls": [{"id": "e", "name": name, "arguments": args}]}))
        .collect();
    lead.push(json!({"tool_calls": [{"id": "m", "name": "bash", "arguments": {"command": "grep VmHWM /proc/$PPID/status"}}]}));
    lead.push(json!({"text": "done"}));
    let dir = tempfile::tempdir().unwrap();
    let c = cassette(dir.path(), json!({"version": 1, "lead": lead}));
    let model = format!("replay:{}", c.display());
    let out = deerflow([
        "run",
        "--json",
        "--allow-bash",
        "--no-subagents",
        "-m",
        &model,
        "go",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let results = out.of_type("tool_result");
    assert_eq!(results[0]["output"], "OK", "{results:?}");
    let hwm = results[1]["output"].as_str().unwrap();
    let kib: u64 = hwm
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no VmHWM in {hwm:?}"));
    assert!(kib < 64 * 1024, "peak RSS {kib} KiB for a 200 MB edit");
    let mut f = std::fs::File::open(&big).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 200 * block.len() as u64 + 1);
    f.seek(std::io::SeekFrom::Start(marker_at as u64 - 2))
        .unwrap();
    let mut around = [0u8; 13];
    f.read_exact(&mut around).unwrap();
    assert_eq!(&around[2..11], b"[[DONE]]!");
    assert_eq!(around[..2], block[(marker_at - 2) % block.len()..][..2]);
    assert_eq!(around[11..], block[(marker_at + 8) % block.len()..][..2]);
}
