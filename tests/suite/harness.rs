//! Drives the built binary and checks its event stream against contract §3, decoding each
//! line as plain JSON (not through the crate's own `Event` type).

use std::path::{Path, PathBuf};
use std::process::Stdio;
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

/// §3's required fields per event type, written out independently of the crate.
fn fields(t: &str) -> &'static [&'static str] {
    match t {
        "run_started" => &[
            "schema_version",
            "version",
            "model",
            "max_concurrent",
            "max_tasks",
            "max_turns",
            "timeout_seconds",
            "workspace",
            "subagents_enabled",
            "subagent_types",
        ],
        "message" => &["role", "text"],
        "tool_call" => &["call_id", "name", "arguments"],
        "tool_result" => &[
            "call_id",
            "name",
            "status",
            "output",
            "truncated",
            "duration_ms",
        ],
        "task_queued" => &["task_id", "description", "subagent_type", "position"],
        "task_started" => &[
            "task_id",
            "description",
            "subagent_type",
            "model",
            "max_turns",
            "timeout_seconds",
        ],
        "task_running" => &["task_id", "message_index", "message", "usage"],
        "task_completed" => &[
            "task_id",
            "result",
            "usage",
            "turns",
            "duration_ms",
            "stop_reason",
        ],
        "task_failed" => &[
            "task_id",
            "error",
            "usage",
            "turns",
            "duration_ms",
            "stop_reason",
        ],
        "task_timed_out" => &[
            "task_id",
            "error",
            "timeout_seconds",
            "usage",
            "duration_ms",
        ],
        "task_cancelled" => &["task_id", "error", "usage", "duration_ms"],
        "usage" => &[
            "caller",
            "model",
            "input_tokens",
            "output_tokens",
            "total_tokens",
            "cache_read_tokens",
            "reported",
        ],
        "warning" => &["code", "message"],
        "clarification_requested" => &["question", "options"],
        "run_completed" => &[
            "status",
            "exit_code",
            "final_message",
            "error",
            "duration_ms",
            "turns",
            "usage",
            "tasks",
            "artifacts",
        ],
        other => panic!("unknown event type {other}"),
    }
}

/// seq gapless from 0, one run_id, RFC 3339 ms timestamps, every field present,
/// `run_completed` last and only once, its exit code equal to the process's, stdout
/// holding nothing but events.
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
        let t = e["type"].as_str().expect("type");
        for f in fields(t) {
            assert!(e.get(*f).is_some(), "{t} lacks {f}: {e}");
        }
        for u in ["usage"] {
            if t.starts_with("task_") && t != "task_queued" && t != "task_started" {
                let usage = &e[u];
                for k in ["input_tokens", "output_tokens", "total_tokens"] {
                    assert!(usage[k].is_u64(), "{t}.usage.{k}: {e}");
                }
            }
        }
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
    validate_schema(out);
}

/// Per task: started/queued after the lead's tool_call, running after that, exactly one
/// terminal event, then the lead's tool_result for the call.
fn check_tasks(out: &Output) {
    let pos = |pred: &dyn Fn(&Value) -> bool| out.events.iter().position(pred);
    for s in out.of_type("task_started") {
        let id = s["task_id"].as_str().unwrap();
        let terminal: Vec<_> = out
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| e["task_id"] == id && is_terminal(e))
            .collect();
        assert_eq!(terminal.len(), 1, "task {id} terminal events: {terminal:?}");
        let started = pos(&|e| e["type"] == "task_started" && e["task_id"] == id).unwrap();
        let call = pos(&|e| e["type"] == "tool_call" && e["name"] == "task");
        assert!(
            call.is_some_and(|c| c < started),
            "task_started before any task tool_call"
        );
        for (i, e) in out.events.iter().enumerate() {
            if e["type"] == "task_running" && e["task_id"] == id {
                assert!(
                    i > started && i < terminal[0].0,
                    "task_running out of order"
                );
            }
        }
    }
    let ids: Vec<_> = out
        .of_type("task_started")
        .iter()
        .map(|e| e["task_id"].clone())
        .collect();
    let mut dedup = ids.clone();
    dedup.sort_by_key(|v| v.to_string());
    dedup.dedup();
    assert_eq!(ids.len(), dedup.len(), "task ids not unique");
}

pub fn is_terminal(e: &Value) -> bool {
    matches!(
        e["type"].as_str(),
        Some("task_completed" | "task_failed" | "task_timed_out" | "task_cancelled")
    )
}

/// Validates every line against `deerflow schema` with a small validator for the subset
/// of JSON Schema it uses.
fn validate_schema(out: &Output) {
    let schema: Value = serde_json::from_str(
        &std::process::Command::new(BIN)
            .arg("schema")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap(),
    )
    .unwrap();
    for e in &out.events {
        let ok = schema["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| valid(e, s, &schema))
            .count();
        assert_eq!(
            ok, 1,
            "line does not validate against exactly one schema branch: {e}"
        );
    }
}

fn valid(v: &Value, s: &Value, root: &Value) -> bool {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        return valid(v, &root["$defs"][name], root);
    }
    if let Some(c) = s.get("const") {
        if v != c {
            return false;
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            return false;
        }
    }
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::String(x) => vec![x.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let matches = |t: &str| match t {
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "object" => v.is_object(),
            "array" => v.is_array(),
            "null" => v.is_null(),
            _ => false,
        };
        if !types.iter().any(|t| matches(t)) {
            return false;
        }
    }
    if let Some(req) = s.get("required").and_then(Value::as_array) {
        if !req.iter().all(|k| v.get(k.as_str().unwrap()).is_some()) {
            return false;
        }
    }
    if let (Some(props), Some(obj)) = (
        s.get("properties").and_then(Value::as_object),
        v.as_object(),
    ) {
        for (k, ps) in props {
            if let Some(x) = obj.get(k) {
                if !valid(x, ps, root) {
                    return false;
                }
            }
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        if !arr.iter().all(|x| valid(x, items, root)) {
            return false;
        }
    }
    if let (Some(ap), Some(obj)) = (s.get("additionalProperties"), v.as_object()) {
        if ap.is_object() && !obj.values().all(|x| valid(x, ap, root)) {
            return false;
        }
    }
    true
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
