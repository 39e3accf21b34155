//! The MCP client transport under hostile servers (contract §9, §12): no redirect to another
//! origin, every message bounded, stderr drained whatever it holds, and start-up failures
//! named in one line without Rust type names.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::harness::{check_stream, deerflow, workspace, Output};
use super::mcp::{config_with, entry, python, result_of, server_script};
use super::openai_http::run;
use crate::support::{MockServer, Reply, Rule};

/// `deerflow mcp list` over one `.mcp.json` holding `servers`.
async fn mcp_list(dir: &Path, servers: Value) -> Output {
    let file = dir.join(".mcp.json");
    std::fs::write(&file, json!({ "mcpServers": servers }).to_string()).unwrap();
    deerflow(["mcp", "list", "--mcp-config", file.to_str().unwrap()])
        .cwd(dir)
        .text()
        .await
}

/// The `NAME: failed to start: …` line of `mcp list`, checked to be free of Rust type names.
fn failure<'a>(out: &'a Output, name: &str) -> &'a str {
    let prefix = format!("{name}: failed to start: ");
    let line = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no failure for {name}: {}", out.stdout));
    assert!(
        !line.contains("::") && !line.contains('<'),
        "a Rust type name in: {line}"
    );
    line
}

fn sh(script: &str) -> Value {
    json!({"command": "sh", "args": ["-c", script], "session_init_timeout": 10})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cross_origin_redirect_is_refused_before_anything_reaches_the_other_origin() {
    let trap = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let trap_port = trap.local_addr().unwrap().port();
    let arrived = Arc::new(AtomicBool::new(false));
    let seen = arrived.clone();
    tokio::spawn(async move {
        while trap.accept().await.is_ok() {
            seen.store(true, Ordering::SeqCst);
        }
    });
    let server = MockServer::start().await;
    let target = format!("http://127.0.0.1:{trap_port}/mcp");
    server.push(
        Rule::any()
            .always()
            .reply(Reply::status(307).header("Location", &target).body("")),
    );
    let ws = workspace();
    let url = format!("http://{}/mcp", server.addr());
    let out = mcp_list(
        ws.path(),
        json!({"r": {"type": "http", "url": url, "headers": {"X-Api-Key": "secret-123"}}}),
    )
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let why = failure(&out, "r");
    assert!(
        why.contains("redirected to another origin") && why.contains(&target),
        "{why}"
    );
    assert!(!out.stdout.contains("secret-123"));
    let reqs = server.requests();
    assert!(!reqs.is_empty(), "the first origin was asked");
    assert_eq!(reqs[0].header("x-api-key"), Some("secret-123"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !arrived.load(Ordering::SeqCst),
        "a request reached the other origin"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn http_failures_name_the_url_and_the_cause() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!(
        "http://127.0.0.1:{}/mcp",
        closed.local_addr().unwrap().port()
    );
    drop(closed);
    let server = MockServer::start().await;
    server.push(
        Rule::any()
            .always()
            .reply(Reply::status(500).html_body("<h1>database on fire</h1>")),
    );
    let broken = format!("http://{}/mcp", server.addr());
    let garbled = MockServer::start().await;
    garbled.push(
        Rule::any()
            .always()
            .reply(Reply::raw_sse(vec!["data: Hello there\n\n"])),
    );
    let endless = MockServer::start().await;
    let event = format!("data: {}", "x".repeat(1 << 20));
    endless.push(Rule::any().always().reply(Reply::raw_sse(vec![event; 17])));
    let url = |s: &MockServer| format!("http://{}/mcp", s.addr());
    let ws = workspace();
    let out = mcp_list(
        ws.path(),
        json!({
            "dead": {"type": "http", "url": dead},
            "broken": {"type": "http", "url": broken},
            "garbled": {"type": "http", "url": url(&garbled)},
            "endless": {"type": "http", "url": url(&endless)},
        }),
    )
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(
        failure(&out, "dead"),
        format!("cannot reach {dead}: connection refused")
    );
    assert_eq!(
        failure(&out, "broken"),
        format!("{broken} answered HTTP 500 Internal Server Error: database on fire")
    );
    assert_eq!(
        failure(&out, "garbled"),
        "answered something that is not MCP JSON-RPC: Hello there"
    );
    assert!(
        failure(&out, "endless").starts_with("sent a message larger than 16 MiB"),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn stdio_start_up_failures_name_their_cause_and_the_last_stderr_line() {
    let ws = workspace();
    let out = mcp_list(
        ws.path(),
        json!({
            "garbage": sh("read l; echo 'config: none found' >&2; echo 'Welcome to srv 1.0'; sleep 5"),
            "quits": sh("echo 'fatal: no API token' >&2; echo >&2; exit 3"),
            "nocwd": {"command": "sh", "args": ["-c", "true"], "cwd": "/surely/not/here"},
            "nocmd": {"command": "surely-not-a-command-xyz"},
        }),
    )
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(
        failure(&out, "garbage"),
        "answered something that is not MCP JSON-RPC: Welcome to srv 1.0; \
         its last stderr line: config: none found"
    );
    assert_eq!(
        failure(&out, "quits"),
        "`sh` exited with status 3 before answering; its last stderr line: fatal: no API token"
    );
    assert_eq!(
        failure(&out, "nocwd"),
        "cwd /surely/not/here does not exist"
    );
    assert_eq!(
        failure(&out, "nocmd"),
        "command `surely-not-a-command-xyz` was not found on its PATH"
    );
}

/// The peak resident memory of `pid` while it runs; it is killed past `limit_mb`.
async fn watch_rss(pid: u32, limit_mb: u64) -> u64 {
    let mut peak = 0;
    let status = format!("/proc/{pid}/status");
    while let Ok(text) = std::fs::read_to_string(&status) {
        // Exited, not yet reaped: the entry stays until the test waits for it.
        if text
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z'))
        {
            break;
        }
        let kb: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        peak = peak.max(kb / 1024);
        if peak > limit_mb {
            // SAFETY: kill only sends a signal to the child this test spawned.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    peak
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_stdout_line_fails_the_server_with_memory_bounded() {
    let ws = workspace();
    let file = ws.path().join(".mcp.json");
    let servers = json!({"endless": sh("read l; yes x | tr -d '\\n'")});
    std::fs::write(&file, json!({ "mcpServers": servers }).to_string()).unwrap();
    let child = deerflow(["mcp", "list", "--mcp-config", file.to_str().unwrap()])
        .cwd(ws.path())
        .command()
        .spawn()
        .unwrap();
    let peak = watch_rss(child.id().unwrap(), 400).await;
    let out = child.wait_with_output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(peak < 150, "deerflow grew to {peak} MB");
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("endless: failed to start: sent a message larger than 16 MiB"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn huge_results_fail_the_call_over_stdio_and_http() {
    use tokio::io::AsyncBufReadExt;
    let Some(py) = python() else { return };
    let ws = workspace();
    let mut http = tokio::process::Command::new(&py)
        .args([server_script().as_str(), "--http"])
        .env("MCP_TOOLS", "big")
        .stdout(std::process::Stdio::piped())
        // Its traceback for the answer deerflow stopped reading is expected noise.
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(http.stdout.take().unwrap()).lines();
    let port = lines.next_line().await.unwrap().unwrap();
    let server = MockServer::start().await;
    let n = json!({"n": 20_000_000});
    server.push_reply(Reply::tool_calls(vec![("s1", "t_big", n.clone())]));
    server.push_reply(Reply::tool_calls(vec![("h1", "web_big", n)]));
    server.push_reply(Reply::text("done"));
    let web = format!("{{type: http, url: 'http://127.0.0.1:{port}/mcp'}}");
    let cfg = config_with(
        ws.path(),
        &server.url(),
        &[("t", entry(&py, "MCP_TOOLS: big", "")), ("web", web)],
    );
    let out = run(&cfg, ws.path(), "go").output().await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let stdio = result_of(&out, "s1");
    assert_eq!(stdio["status"], "error");
    assert_eq!(
        stdio["output"],
        "Error: MCP server 't' could not run 'big': the connection to the server closed: \
         sent a message larger than 16 MiB (the limit of one MCP message); it was not read"
    );
    let over_http = result_of(&out, "h1");
    assert_eq!(over_http["status"], "error");
    let text = over_http["output"].as_str().unwrap();
    assert!(text.contains("larger than 16 MiB"), "{text}");
    assert!(!text.contains("::"), "{text}");
    let _ = http.kill().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stderr_with_invalid_utf8_and_an_endless_line_never_blocks_the_server() {
    let Some(py) = python() else { return };
    let ws = workspace();
    let script = format!(
        "printf '\\377\\376 bad bytes\\n' >&2; head -c 3000000 /dev/zero | tr '\\0' y >&2; \
         printf '\\nlast words\\n' >&2; exec '{py}' '{}'",
        server_script()
    );
    let mut server = sh(&script);
    server["env"] = json!({"MCP_TOOLS": "echo"});
    server["session_init_timeout"] = json!(5);
    let file = ws.path().join(".mcp.json");
    std::fs::write(&file, json!({"mcpServers": {"s": server}}).to_string()).unwrap();
    let out = deerflow(["mcp", "list", "--mcp-config", file.to_str().unwrap()])
        .cwd(ws.path())
        .env("DEERFLOW_LOG", "debug")
        .text()
        .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("s_echo"), "{}", out.stdout);
    assert!(out
        .stderr
        .contains("mcp server 's': \u{fffd}\u{fffd} bad bytes"));
    assert!(out.stderr.contains("mcp server 's': last words"));
    assert!(
        out.stderr.len() < 64 * 1024,
        "the long stderr line was kept whole ({} bytes)",
        out.stderr.len()
    );
}
