//! Signals, the run deadline and a stalled stdout reader (contract §4, §8): the binary is
//! spawned, the test waits until the fan-out is visibly running, then signals it.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdout};

use super::harness::{cassette, check_stream, deerflow, is_terminal, workspace, Output};

fn task(desc: &str) -> Value {
    json!({"name": "task", "arguments": {"description": desc, "prompt": format!("do {desc}"), "subagent_type": "general-purpose"}})
}

/// A lead that fans out to `descs`, each sub-agent answering only after 30 s.
fn slow_fan_out(dir: &Path, descs: &[&str]) -> std::path::PathBuf {
    cassette(
        dir,
        json!({"version": 1,
        "lead": [{"tool_calls": descs.iter().map(|d| task(d)).collect::<Vec<_>>(), "usage": {"input_tokens": 100, "output_tokens": 10}},
                 {"text": "never"}],
        "default_task": [{"text": "late", "delay_ms": 30000, "usage": {"input_tokens": 5, "output_tokens": 1}}]}),
    )
}

/// A running binary whose stdout is read line by line in the background.
struct Live {
    child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
    reader: tokio::task::JoinHandle<()>,
}

fn spawn(ws: &Path, args: &[&str]) -> Live {
    let mut child = deerflow(args).cwd(ws).command().spawn().expect("spawn");
    let stdout = child.stdout.take().unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let reader = tokio::spawn(read_lines(stdout, lines.clone()));
    Live {
        child,
        lines,
        reader,
    }
}

async fn read_lines(stdout: ChildStdout, into: Arc<Mutex<Vec<Value>>>) {
    let mut r = BufReader::new(stdout).lines();
    while let Ok(Some(l)) = r.next_line().await {
        let v = serde_json::from_str(&l).unwrap_or_else(|e| panic!("bad JSON line {l}: {e}"));
        into.lock().unwrap().push(v);
    }
}

impl Live {
    fn pid(&self) -> i32 {
        self.child.id().expect("running") as i32
    }

    /// Waits (at most 10 s) until the events seen so far satisfy `ready`.
    async fn wait_for(&self, what: &str, ready: impl Fn(&[Value]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if ready(&self.lines.lock().unwrap()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {:#?}",
                self.lines.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_started(&self, n: usize) {
        self.wait_for(&format!("{n} task_started"), |ev| {
            count(ev, "task_started") >= n
        })
        .await;
    }

    fn signal(&self, sig: i32) -> Instant {
        // SAFETY: kill only sends a signal to the child we spawned.
        let rc = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(rc, 0, "kill failed");
        Instant::now()
    }

    /// Waits for the exit (at most 10 s) and returns the output and when it exited.
    async fn finish(mut self) -> (Output, Instant) {
        let status = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("deerflow did not exit")
            .unwrap();
        let exited = Instant::now();
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.reader).await;
        let mut stderr = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ =
                tokio::time::timeout(Duration::from_secs(2), e.read_to_string(&mut stderr)).await;
        }
        let events: Vec<Value> = self.lines.lock().unwrap().clone();
        let stdout = events.iter().map(|e| format!("{e}\n")).collect::<String>();
        let out = Output {
            code: status.code().unwrap_or(-1),
            stdout,
            stderr,
            events,
        };
        (out, exited)
    }
}

fn count(ev: &[Value], t: &str) -> usize {
    ev.iter().filter(|e| e["type"] == t).count()
}

/// Every started task has exactly one terminal event, a `task_cancelled` with usage.
fn assert_all_cancelled(out: &Output, n: usize, error: &str) {
    let started = out.of_type("task_started");
    assert_eq!(started.len(), n, "{:#?}", out.events);
    for s in started {
        let id = &s["task_id"];
        let term: Vec<_> = out
            .events
            .iter()
            .filter(|e| &e["task_id"] == id && is_terminal(e))
            .collect();
        assert_eq!(term.len(), 1, "task {id}: {term:#?}");
        assert_eq!(term[0]["type"], "task_cancelled", "{:#?}", term[0]);
        assert_eq!(term[0]["error"], error);
        assert!(term[0]["usage"]["total_tokens"].is_u64(), "{:#?}", term[0]);
    }
}

async fn signal_during_fan_out(sig: i32, code: i32, error: &str) {
    let ws = workspace();
    let c = slow_fan_out(ws.path(), &["one", "two", "three"]);
    let m = format!("replay:{}", c.display());
    let live = spawn(ws.path(), &["run", "--json", "-m", &m, "go"]);
    live.wait_started(3).await;
    let sent = live.signal(sig);
    let (out, exited) = live.finish().await;
    let took = exited - sent;
    assert!(took < Duration::from_secs(2), "exit took {took:?}");
    assert_eq!(out.code, code, "{}", out.stderr);
    check_stream(&out);
    let done = out.completed();
    assert_eq!(done["status"], "cancelled");
    assert_eq!(done["tasks"]["cancelled"], 3);
    assert_all_cancelled(&out, 3, error);
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_during_fan_out_cancels_every_task_and_exits_130() {
    signal_during_fan_out(libc::SIGINT, 130, "Run interrupted (SIGINT)").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_during_fan_out_exits_143() {
    signal_during_fan_out(libc::SIGTERM, 143, "Run terminated (SIGTERM)").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_during_fan_out_exits_129() {
    signal_during_fan_out(libc::SIGHUP, 129, "Run terminated (SIGHUP)").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signal_right_after_run_started_still_gets_run_completed() {
    let ws = workspace();
    let c = slow_fan_out(ws.path(), &["one"]);
    let m = format!("replay:{}", c.display());
    for _ in 0..5 {
        let live = spawn(ws.path(), &["run", "--json", "-m", &m, "go"]);
        live.wait_for("run_started", |ev| !ev.is_empty()).await;
        live.signal(libc::SIGTERM);
        let (out, _) = live.finish().await;
        assert_eq!(out.code, 143, "{}", out.stderr);
        check_stream(&out);
        assert_eq!(out.completed()["status"], "cancelled");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_in_human_mode_exits_130() {
    let ws = workspace();
    let c = slow_fan_out(ws.path(), &["one", "two", "three"]);
    let m = format!("replay:{}", c.display());
    let live = spawn(ws.path(), &["run", "-m", &m, "go"]);
    // Nothing on stdout to wait for in human mode: give the fan-out a moment to start.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let sent = live.signal(libc::SIGINT);
    let (out, exited) = live.finish().await;
    assert!(
        exited - sent < Duration::from_secs(2),
        "{:?}",
        exited - sent
    );
    assert_eq!(out.code, 130, "{}", out.stderr);
    assert!(out.events.is_empty(), "stdout: {}", out.stdout);
}

/// Whether any live process has `marker` in its command line.
fn process_with(marker: &str) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(Result::ok).any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(marker)
            })
            .unwrap_or(false)
    })
}

async fn wait_until(what: &str, secs: u64, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A lead that starts one `bash` sub-agent running a long, uniquely marked sleep.
fn bash_sleeper(ws: &Path) -> (std::path::PathBuf, String) {
    let secs = format!("3133{}", fastrand::u32(10_000..99_999));
    let command = format!("sleep {secs} ; echo marker-{secs}");
    let c = cassette(
        ws,
        json!({"version": 1,
        "lead": [{"tool_calls": [{"name": "task", "arguments": {"description": "sleeper", "prompt": "sleep", "subagent_type": "bash"}}]},
                 {"text": "never"}],
        "tasks": {"sleeper": [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "woke"}]}}),
    );
    (c, secs)
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_kills_a_sub_agents_bash_commands() {
    let ws = workspace();
    let (c, marker) = bash_sleeper(ws.path());
    let m = format!("replay:{}", c.display());
    let live = spawn(
        ws.path(),
        &["run", "--json", "--allow-bash", "-m", &m, "go"],
    );
    live.wait_for("the bash call", |ev| {
        ev.iter()
            .any(|e| e["type"] == "task_running" && e["message"]["tool_calls"][0]["name"] == "bash")
    })
    .await;
    wait_until("the sleep to start", 5, || process_with(&marker)).await;
    let sent = live.signal(libc::SIGTERM);
    let (out, exited) = live.finish().await;
    assert!(
        exited - sent < Duration::from_secs(2),
        "{:?}",
        exited - sent
    );
    assert_eq!(out.code, 143, "{}", out.stderr);
    check_stream(&out);
    assert_all_cancelled(&out, 1, "Run terminated (SIGTERM)");
    wait_until("the marked processes to die", 2, || !process_with(&marker)).await;
}

/// A stdout that is piped but never read: the graceful stop then waits for the writer (up to
/// 2 s), which leaves time for a second SIGINT.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_sigint_exits_130_at_once() {
    let ws = workspace();
    let secs = format!("3133{}", fastrand::u32(10_000..99_999));
    let command = format!("sleep {secs} ; echo marker-{secs}");
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [{"tool_calls": [{"name": "task", "arguments": {"description": "sleeper", "prompt": "sleep", "subagent_type": "bash"}}]},
                 {"text": "never"}],
        "tasks": {"sleeper": [{"text": "y".repeat(200_000), "tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "woke"}]}}),
    );
    let m = format!("replay:{}", c.display());
    let mut cmd = deerflow(["run", "--json", "--allow-bash", "-m", &m, "go"])
        .cwd(ws.path())
        .command();
    cmd.stderr(Stdio::null());
    let mut child = cmd.spawn().expect("spawn");
    let _stdout = child.stdout.take();
    let pid = child.id().unwrap() as i32;
    wait_until("the sleep to start", 10, || process_with(&secs)).await;
    // SAFETY: kill only sends a signal to the child we spawned.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "the graceful stop should still be waiting for stdout"
    );
    let second = Instant::now();
    // SAFETY: as above; the child has not exited.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .expect("no exit after the second SIGINT")
        .unwrap();
    assert!(
        second.elapsed() < Duration::from_millis(500),
        "{:?}",
        second.elapsed()
    );
    assert_eq!(status.code(), Some(130));
    wait_until("the marked processes to die", 2, || !process_with(&secs)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_run_deadline_cancels_running_tasks_and_exits_124() {
    let ws = workspace();
    let c = slow_fan_out(ws.path(), &["one", "two", "three"]);
    let m = format!("replay:{}", c.display());
    let t0 = Instant::now();
    let live = spawn(
        ws.path(),
        &["run", "--json", "--timeout", "1s", "-m", &m, "go"],
    );
    let (out, _) = live.finish().await;
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    assert_eq!(out.code, 124, "{}", out.stderr);
    check_stream(&out);
    let done = out.completed();
    assert_eq!(done["status"], "timed_out");
    assert_eq!(done["error"], "Run timed out after 1 seconds");
    assert_all_cancelled(&out, 3, "Run timed out after 1 seconds");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_with_a_stalled_stdout_reader_still_exits() {
    let ws = workspace();
    // Each sub-agent's first message is large, so the stream quickly outgrows the pipe.
    let big = "x".repeat(40_000);
    let calls: Vec<Value> = ["a", "b", "c"].iter().map(|d| task(d)).collect();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [{"tool_calls": calls}, {"text": "never"}],
        "default_task": [{"text": big, "tool_calls": [{"name": "ls"}]},
                         {"text": "late", "delay_ms": 30000}]}),
    );
    let m = format!("replay:{}", c.display());
    let mut cmd = deerflow(["run", "--json", "-m", &m, "go"])
        .cwd(ws.path())
        .command();
    cmd.stderr(Stdio::null());
    let mut child = cmd.spawn().expect("spawn");
    // stdout stays piped and is never read.
    let _stdout = child.stdout.take();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // SAFETY: kill only sends a signal to the child we spawned.
    assert_eq!(
        unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) },
        0
    );
    let sent = Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("deerflow hung on a stalled stdout")
        .unwrap();
    let took = sent.elapsed();
    assert!(took < Duration::from_secs(2), "exit took {took:?}");
    assert_eq!(status.code(), Some(143));
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_kills_the_leads_own_bash_command() {
    let ws = workspace();
    let secs = format!("3133{}", fastrand::u32(10_000..99_999));
    let command = format!("sleep {secs} ; echo marker-{secs}");
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "never"}]}),
    );
    let m = format!("replay:{}", c.display());
    let live = spawn(
        ws.path(),
        &["run", "--json", "--allow-bash", "-m", &m, "go"],
    );
    live.wait_for("the bash call", |ev| count(ev, "tool_call") == 1)
        .await;
    wait_until("the sleep to start", 5, || process_with(&secs)).await;
    let sent = live.signal(libc::SIGTERM);
    let (out, exited) = live.finish().await;
    assert!(
        exited - sent < Duration::from_secs(2),
        "{:?}",
        exited - sent
    );
    assert_eq!(out.code, 143, "{}", out.stderr);
    check_stream(&out);
    let result = out.first("tool_result");
    assert_eq!(result["status"], "error");
    wait_until("the marked processes to die", 2, || !process_with(&secs)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_cancels_queued_tasks_too() {
    let ws = workspace();
    let c = slow_fan_out(ws.path(), &["one", "two", "three", "four"]);
    let m = format!("replay:{}", c.display());
    let live = spawn(
        ws.path(),
        &["run", "--json", "--max-concurrent", "2", "-m", &m, "go"],
    );
    live.wait_for("2 started, 2 queued", |ev| {
        count(ev, "task_started") == 2 && count(ev, "task_queued") == 2
    })
    .await;
    let sent = live.signal(libc::SIGINT);
    let (out, exited) = live.finish().await;
    assert!(
        exited - sent < Duration::from_secs(2),
        "{:?}",
        exited - sent
    );
    assert_eq!(out.code, 130, "{}", out.stderr);
    check_stream(&out);
    assert_eq!(
        out.of_type("task_started").len(),
        2,
        "queued tasks never start"
    );
    let cancelled = out.of_type("task_cancelled");
    assert_eq!(cancelled.len(), 4);
    assert!(cancelled
        .iter()
        .all(|e| e["error"] == "Run interrupted (SIGINT)" && e["usage"].is_object()));
    assert_eq!(out.completed()["tasks"]["cancelled"], 4);
    // Each task call got its tool_result after its terminal event.
    for t in &cancelled {
        let term = out.events.iter().position(|e| e == *t).unwrap();
        let result = out
            .events
            .iter()
            .position(|e| e["type"] == "tool_result" && e["call_id"] == t["task_id"]);
        assert!(result.is_none_or(|r| r > term), "{t}");
    }
}

/// `-o` names a FIFO no one opens yet. The run ends, `run_completed` is written, then the
/// final answer waits for a reader of the FIFO. A second SIGINT must still exit at once
/// (§8), though the `open` holds the runtime's thread.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_sigint_exits_while_o_waits_for_a_fifo_reader() {
    let ws = workspace();
    let fifo = ws.path().join("answer.fifo");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let c = cassette(ws.path(), json!({"version": 1, "lead": [{"text": "done"}]}));
    let m = format!("replay:{}", c.display());
    let fifo_arg = fifo.display().to_string();
    let live = spawn(
        ws.path(),
        &["run", "--json", "-m", &m, "-o", &fifo_arg, "go"],
    );
    live.wait_for("run_completed", |ev| count(ev, "run_completed") == 1)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    live.signal(libc::SIGINT);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let second = live.signal(libc::SIGINT);
    let mut live = live;
    let status = tokio::time::timeout(Duration::from_secs(3), live.child.wait()).await;
    if status.is_err() {
        let _ = live.child.kill().await;
        panic!("no exit 3 s after the second SIGINT (blocked opening the -o FIFO)");
    }
    assert!(second.elapsed() < Duration::from_millis(1000));
    assert_eq!(status.unwrap().unwrap().code(), Some(130));
}

/// Stdout is piped but never read and a fan-out fills the queue to the writer, so the
/// runtime's thread waits in an emitter. A second SIGINT 50 ms after the first still exits
/// at once (§8): the handlers have a thread of their own, so the two are not seen as one.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_sigint_exits_while_a_fan_out_fills_the_event_queue() {
    let ws = workspace();
    let n = 3000;
    let calls: Vec<Value> = (0..n).map(|i| task(&format!("t{i}"))).collect();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [{"tool_calls": calls}, {"text": "never"}],
        "default_task": [{"text": "ok"}]}),
    );
    let m = format!("replay:{}", c.display());
    two_sigints_with_a_stalled_reader(ws.path(), &["--max-tasks", "100000", "-m", &m]).await;
}

/// Runs deerflow with `args` and a stdout that is piped but never read, lets the queue to
/// the writer fill, then sends two SIGINTs 50 ms apart: the second must exit at once, 130.
async fn two_sigints_with_a_stalled_reader(ws: &std::path::Path, args: &[&str]) {
    let mut all = vec!["run", "--json"];
    all.extend_from_slice(args);
    all.push("go");
    let mut cmd = deerflow(all).cwd(ws).command();
    cmd.stderr(Stdio::null());
    let mut child = cmd.spawn().expect("spawn");
    let _stdout = child.stdout.take();
    let pid = child.id().unwrap() as i32;
    // Long enough for the pipe and the 8192-event queue to fill.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "still running, stdout stalled"
    );
    // SAFETY: kill only sends a signal to the child we spawned.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = Instant::now();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .expect("no exit after the second SIGINT")
        .unwrap();
    let took = second.elapsed();
    assert!(took < Duration::from_millis(300), "{took:?}");
    assert_eq!(status.code(), Some(130));
}

/// As above, but only the lead emits (one response of 5,000 `ls` calls, 10,000 events).
#[tokio::test(flavor = "multi_thread")]
async fn a_second_sigint_exits_while_the_lead_fills_the_event_queue() {
    let ws = workspace();
    let calls: Vec<Value> = (0..5000)
        .map(|i| json!({"name": "ls", "arguments": {"path": format!("missing{i}")}}))
        .collect();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [{"tool_calls": calls}, {"text": "never"}]}),
    );
    let m = format!("replay:{}", c.display());
    let args = ["-m", &m, "--set", "loop_detection.enabled=false"];
    two_sigints_with_a_stalled_reader(ws.path(), &args).await;
}

/// `-o` to a FIFO is written after the stream, and waits for its reader; a SIGTERM then
/// must still end the process within 2 s (§8), not leave it parked in `open`.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_while_waiting_for_an_output_fifo_reader_exits_143() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [{"text": "the answer"}]}),
    );
    let fifo = ws.path().join("answer.fifo");
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path, which outlives the call.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let m = format!("replay:{}", c.display());
    let live = spawn(
        ws.path(),
        &[
            "run",
            "--json",
            "-m",
            &m,
            "-o",
            fifo.to_str().unwrap(),
            "go",
        ],
    );
    live.wait_for("run_completed", |ev| count(ev, "run_completed") == 1)
        .await;
    // The process now waits for someone to open the FIFO for reading.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = live.signal(libc::SIGTERM);
    let (out, exited) = live.finish().await;
    assert!(
        exited - sent < Duration::from_secs(2),
        "{:?}",
        exited - sent
    );
    assert_eq!(out.code, 143, "{}", out.stderr);
}
