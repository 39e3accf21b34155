//! A sub-agent's processes end with it (contract §5, §12): at its timeout, what its commands
//! detached with `setsid` is killed then, while the run goes on, not at the run's end.

use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::{cassette, deerflow, workspace};

/// Whether `pid` is still a process (a zombie counts: `kill -0` still finds it).
fn exists(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timed_out_tasks_detached_process_dies_at_the_timeout_while_the_run_goes_on() {
    let ws = workspace();
    let marker = 800_000 + fastrand::u32(0..99_999);
    let command = format!(
        "setsid sh -c 'sleep {marker}; echo late > late.txt' >/dev/null 2>&1 </dev/null & \
         echo $! > detached.pid; echo started"
    );
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [
            {"tool_calls": [{"name": "task", "arguments": {"description": "detacher", "prompt": "start it", "subagent_type": "general-purpose"}}]},
            {"delay_ms": 6000, "text": "finished"}],
        "tasks": {"detacher": [
            {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]},
            {"delay_ms": 30000, "text": "never"}]}}),
    );
    let model = format!("replay:{}", c.display());
    let mut child = deerflow([
        "run",
        "--json",
        "--allow-bash",
        "-m",
        &model,
        "--subagent-timeout",
        "1s",
        "go",
    ])
    .cwd(ws.path())
    .command()
    .spawn()
    .expect("spawn deerflow");
    let pid_file = ws.path().join("detached.pid");
    let started = Instant::now();
    let pid: i32 = loop {
        let text = std::fs::read_to_string(&pid_file).unwrap_or_default();
        if let Ok(pid) = text.trim().parse() {
            break pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the command never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let seen = Instant::now();
    assert!(exists(pid), "the detached process is not running");
    // The task times out about 1 s after it ran the command; the lead's answer comes 6 s
    // after that.
    while exists(pid) && seen.elapsed() < Duration::from_secs(4) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let still_running = child.try_wait().unwrap().is_none();
    assert!(
        !exists(pid),
        "the detached process outlived its task's timeout by {:?}: {}",
        seen.elapsed(),
        std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default()
    );
    assert!(still_running, "the run ended before the check");
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("the run did not end")
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"task_timed_out\""), "{stdout}");
    assert!(stdout.contains("finished"), "{stdout}");
    assert!(!ws.path().join("late.txt").exists());
}
