//! Drives the built binary and checks its event stream against contract §3, decoding each
//! line as plain JSON (not through the crate's own `Event` type).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

pub const BIN: &str = env!("CARGO_BIN_EXE_deerflow");

/// What a run printed and how it ended.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub events: Vec<Value>,
}

impl Output {
    pub fn of_type(&self, t: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["type"] == t).collect()
    }
    pub fn first(&self, t: &str) -> &Value {
        self.events
            .iter()
            .find(|e| e["type"] == t)
            .unwrap_or_else(|| panic!("no {t} event in {:#?}", self.events))
    }
    pub fn completed(&self) -> &Value {
        self.events.last().expect("no events")
    }
    pub fn types(&self) -> Vec<String> {
        self.events
            .iter()
            .map(|e| e["type"].as_str().unwrap_or("?").to_string())
            .collect()
    }
}

/// A command builder with a clean environment: no user config, no provider keys.
pub struct Run {
    args: Vec<String>,
    envs: Vec<(String, String)>,
    cwd: PathBuf,
    stdin: Option<String>,
    timeout: Duration,
}

pub fn deerflow<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    Run {
        args: args.into_iter().map(|s| s.as_ref().to_string()).collect(),
        envs: Vec::new(),
        cwd: std::env::temp_dir(),
        stdin: None,
        timeout: Duration::from_secs(60),
    }
}

#[allow(dead_code)] // not every test module uses every builder method
impl Run {
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.envs.push((k.into(), v.into()));
        self
    }
    pub fn cwd(mut self, p: &Path) -> Self {
        self.cwd = p.to_path_buf();
        self
    }
    pub fn stdin(mut self, s: &str) -> Self {
        self.stdin = Some(s.into());
        self
    }

    pub fn command(&self) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(BIN);
        c.args(&self.args).current_dir(&self.cwd).env_clear();
        c.env("PATH", std::env::var("PATH").unwrap_or_default());
        // An empty HOME and XDG dir keep the user's own config out of the tests.
        let home = std::env::temp_dir().join("deerflow-test-home-empty");
        c.env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"));
        for (k, v) in &self.envs {
            c.env(k, v);
        }
        c.stdin(if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    }

    pub async fn output(self) -> Output {
        let mut child = self.command().spawn().expect("spawn deerflow");
        if let Some(input) = &self.stdin {
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input.as_bytes()).await.unwrap();
            drop(stdin);
        }
        let out = tokio::time::timeout(self.timeout, child.wait_with_output())
            .await
            .expect("deerflow took too long")
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let events = stdout
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l}: {e}")))
            .collect();
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            events,
        }
    }

    /// For commands whose stdout is not an event stream (pretty JSON, YAML, text).
    pub async fn text(self) -> Output {
        let out = self.command().output().await.expect("spawn deerflow");
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            events: Vec::new(),
        }
    }

    /// Runs with `--json` expected: checks the whole stream against the contract.
    pub async fn json(self) -> Output {
        let out = self.output().await;
        check_stream(&out);
        out
    }
}

/// Every line valid against `deerflow schema`, seq gapless from 0, one run_id, RFC 3339
/// ms timestamps, `run_completed` last and only once, its exit code equal to the
/// process's, stdout holding nothing but events.
pub fn check_stream(out: &Output) {
    assert!(!out.events.is_empty(), "no events; stderr: {}", out.stderr);
    assert_eq!(
        out.stdout.lines().count(),
        out.events.len(),
        "stdout has non-event lines:\n{}",
        out.stdout
    );
    let run_id = out.events[0]["run_id"].as_str().expect("run_id");
    assert_eq!(out.events[0]["type"], "run_started");
    for (i, e) in out.events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64, "seq gap at {i}: {e}");
        assert_eq!(e["run_id"], run_id);
        let ts = e["ts"].as_str().expect("ts");
        assert!(
            ts.len() == 24 && ts.ends_with('Z') && &ts[10..11] == "T" && &ts[19..20] == ".",
            "ts {ts}"
        );
        let errors: Vec<String> = schema().iter_errors(e).map(|x| x.to_string()).collect();
        assert!(
            errors.is_empty(),
            "line {i} breaks the schema: {errors:?}\n{e}"
        );
    }
    let completed: Vec<_> = out
        .events
        .iter()
        .filter(|e| e["type"] == "run_completed")
        .collect();
    assert_eq!(completed.len(), 1, "run_completed count");
    let last = out.events.last().unwrap();
    assert_eq!(last["type"], "run_completed");
    assert_eq!(last["exit_code"], out.code, "exit_code field vs process");
    check_tasks(out);
}

/// Per task: started/queued after the lead's tool_call, running after that, exactly one
/// terminal event, then the lead's tool_result for the call. One pass over the events, so a
/// 10,000-task stream is checked as fast as a small one.
fn check_tasks(out: &Output) {
    #[derive(Default)]
    struct Seen {
        started: Vec<usize>,
        running: Vec<usize>,
        terminal: Vec<usize>,
    }
    let first_call = out
        .events
        .iter()
        .position(|e| e["type"] == "tool_call" && e["name"] == "task");
    let mut tasks: std::collections::HashMap<&str, Seen> = Default::default();
    for (i, e) in out.events.iter().enumerate() {
        let Some(id) = e["task_id"].as_str() else {
            continue;
        };
        let seen = tasks.entry(id).or_default();
        match e["type"].as_str() {
            Some("task_started") => seen.started.push(i),
            Some("task_running") => seen.running.push(i),
            _ if is_terminal(e) => seen.terminal.push(i),
            _ => {}
        }
    }
    for (id, seen) in &tasks {
        let [started] = seen.started[..] else {
            assert!(seen.started.is_empty(), "task {id} started twice");
            continue;
        };
        assert_eq!(
            seen.terminal.len(),
            1,
            "task {id} terminal events: {:?}",
            seen.terminal
        );
        // An `--each` item has no lead call: it starts from the file (§15).
        assert!(
            first_call.is_some_and(|c| c < started) || id.starts_with("item-"),
            "task_started before any task tool_call"
        );
        for &i in &seen.running {
            assert!(
                i > started && i < seen.terminal[0],
                "task_running out of order"
            );
        }
    }
}

pub fn is_terminal(e: &Value) -> bool {
    matches!(
        e["type"].as_str(),
        Some("task_completed" | "task_failed" | "task_timed_out" | "task_cancelled")
    )
}

/// `deerflow schema`, compiled once per test process. Formats are checked too (`ts` is a
/// `date-time`).
pub fn schema() -> &'static jsonschema::Validator {
    static SCHEMA: OnceLock<jsonschema::Validator> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let out = std::process::Command::new(BIN)
            .arg("schema")
            .output()
            .expect("run deerflow schema");
        assert!(out.status.success(), "deerflow schema failed");
        let schema: Value = serde_json::from_slice(&out.stdout).expect("schema is JSON");
        jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&schema)
            .expect("deerflow schema is a valid draft 2020-12 schema")
    })
}

/// A fresh workspace directory.
pub fn workspace() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Writes a replay cassette into `dir` and returns its path.
pub fn cassette(dir: &Path, body: Value) -> PathBuf {
    let p = dir.join(format!("cassette-{}.json", fastrand::u32(..)));
    std::fs::write(&p, serde_json::to_string_pretty(&body).unwrap()).unwrap();
    p
}

/// Processes whose command line holds `marker` (a number unique to one test run).
pub fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) {
                found.push(cmd);
            }
        }
    }
    found
}
