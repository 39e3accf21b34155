//! MCP tool servers (contract §9) end to end: the binary against the mock LLM and a small
//! stdio MCP server (tests/support/mcp_server.py, Python's standard library only).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::harness::{check_stream, deerflow, workspace, Output};
use super::openai_http::{config, run};
use crate::support::{MockServer, Reply};

/// The test server's interpreter, as an absolute path (the binary's environment is clean,
/// so a version manager's shim may not work there). `None` skips the test with a notice.
pub(super) fn python() -> Option<String> {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()?;
    let exe = String::from_utf8(out.stdout).ok()?.trim().to_string();
    if exe.is_empty() {
        eprintln!("skipped: python3 is not available for the test MCP server");
        return None;
    }
    Some(exe)
}

pub(super) fn server_script() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/mcp_server.py").to_string()
}

/// One `mcp_servers` entry (YAML flow mapping) for the test server; `extra` is appended.
pub(super) fn entry(py: &str, env: &str, extra: &str) -> String {
    format!(
        "{{command: \"{py}\", args: [\"{}\"], env: {{{env}}}{extra}}}",
        server_script()
    )
}

/// The mock-model config with `servers` (`name: entry` lines) under `mcp_servers:`.
pub(super) fn config_with(dir: &Path, url: &str, servers: &[(&str, String)]) -> PathBuf {
    let path = config(dir, "openai", url, ", max_retries: 0");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("mcp_servers:\n");
    for (name, e) in servers {
        text.push_str(&format!("  {name}: {e}\n"));
    }
    std::fs::write(&path, text).unwrap();
    path
}

fn tool_names(req: &Value) -> Vec<String> {
    req["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn result_of<'a>(out: &'a Output, id: &str) -> &'a Value {
    out.events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["call_id"] == id)
        .unwrap_or_else(|| panic!("no tool_result {id}: {:#?}", out.events))
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn logged_pids(log: &Path) -> Vec<i32> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("pid ")?.parse().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_are_offered_called_and_mapped_and_the_server_is_stopped() {
    let Some(py) = python() else { return };
    let server = MockServer::start().await;
    server.push_reply(Reply::tool_calls(vec![
        ("c1", "t_echo", json!({"text": "hi there"})),
        ("c2", "t_fail", json!({})),
        ("c3", "t_image", json!({})),
        ("c4", "t_structured", json!({})),
        ("c5", "t_env", json!({"name": "DF_MCP_SECRET_TOKEN"})),
        ("c6", "t_env", json!({"name": "GIVEN"})),
        ("c7", "t_big", json!({"n": 50000})),
    ]));
    server.push_reply(Reply::text("done"));
    let ws = workspace();
    let log = ws.path().join("mcp.log");
    let e = entry(
        &py,
        &format!(
            "MCP_LOG: \"{}\", MCP_PAGE: \"3\", GIVEN: given-value",
            log.display()
        ),
        ", disabled_tools: [sleep]",
    );
    let cfg = config_with(ws.path(), &server.url(), &[("t", e)]);
    let out = run(&cfg, ws.path(), "use the tools")
        .env("DF_MCP_SECRET_TOKEN", "must-not-leak")
        .output()
        .await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let started = out.first("mcp_server_started");
    assert_eq!(started["server"], "t");
    assert_eq!(started["transport"], "stdio");
    let offered: Vec<&str> = started["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"t_echo") && !offered.contains(&"t_sleep"),
        "{offered:?}"
    );
    assert_eq!(offered.len(), 7, "pagination lost tools: {offered:?}");
    let types = out.types();
    let at = |t: &str| types.iter().position(|x| x == t).unwrap();
    assert!(at("mcp_server_started") < at("usage"), "{types:?}");
    // Offered to the model with the server's schema.
    let reqs = server.requests();
    let first = &reqs[0].body;
    let names = tool_names(first);
    assert!(names.contains(&"t_echo".to_string()), "{names:?}");
    let echo = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "t_echo")
        .unwrap();
    assert_eq!(echo["function"]["parameters"]["required"], json!(["text"]));
    assert_eq!(echo["function"]["description"], "Echoes its text");
    // Results.
    assert_eq!(result_of(&out, "c1")["status"], "ok");
    assert_eq!(result_of(&out, "c1")["output"], "hi there");
    assert_eq!(result_of(&out, "c2")["status"], "error");
    assert_eq!(result_of(&out, "c2")["output"], "it broke");
    assert_eq!(
        result_of(&out, "c3")["output"],
        "[image: image/png, 8 bytes]\n[resource: file:///tmp/r.txt]"
    );
    assert_eq!(result_of(&out, "c4")["output"], r#"{"answer":42}"#);
    assert_eq!(result_of(&out, "c5")["output"], "(unset)");
    assert_eq!(result_of(&out, "c6")["output"], "given-value");
    let second = reqs[1].raw_body.clone();
    assert!(second.contains("hi there") && second.contains("it broke"));
    assert!(
        !second.contains(&"x".repeat(30000)),
        "the big result was not cut"
    );
    assert!(!out.stdout.contains("must-not-leak"));
    // The server is gone once deerflow has exited.
    let pids = logged_pids(&log);
    assert_eq!(pids.len(), 1, "one session for the whole run");
    assert!(!pid_alive(pids[0]), "the MCP server outlived the run");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_required_server_that_fails_fails_the_run_before_any_model_call() {
    let Some(py) = python() else { return };
    let server = MockServer::start().await;
    server.push_reply(Reply::text("never"));
    let ws = workspace();
    let cfg = config_with(
        ws.path(),
        &server.url(),
        &[("down", entry(&py, "MCP_MODE: crash", ", required: true"))],
    );
    let out = run(&cfg, ws.path(), "go").output().await;
    check_stream(&out);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let done = out.completed();
    assert_eq!(done["status"], "failed");
    assert!(done["error"].as_str().unwrap().contains("'down'"), "{done}");
    let w = out.first("warning");
    assert_eq!(w["code"], "mcp_server_failed");
    assert_eq!(w["server"], "down");
    assert_eq!(server.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_optional_server_that_fails_or_hangs_is_a_warning_and_the_run_goes_on() {
    let Some(py) = python() else { return };
    let server = MockServer::start().await;
    server.push_reply(Reply::text("fine"));
    let ws = workspace();
    let cfg = config_with(
        ws.path(),
        &server.url(),
        &[
            ("crashy", entry(&py, "MCP_MODE: crash", "")),
            (
                "hangs",
                entry(&py, "MCP_MODE: hang", ", session_init_timeout: 0.5"),
            ),
            ("up", entry(&py, "MCP_TOOLS: echo", "")),
        ],
    );
    let out = run(&cfg, ws.path(), "go")
        .env("DEERFLOW_LOG", "debug")
        .output()
        .await;
    assert!(
        out.stderr
            .contains("mcp server 'crashy': test server: crashing on purpose"),
        "the server's stderr is logged at debug level: {}",
        out.stderr
    );
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let failed: Vec<&str> = out
        .of_type("warning")
        .iter()
        .filter(|w| w["code"] == "mcp_server_failed")
        .map(|w| w["server"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["crashy", "hangs"]);
    let hang = out
        .of_type("warning")
        .into_iter()
        .find(|w| w["server"] == "hangs")
        .unwrap();
    assert!(hang["message"]
        .as_str()
        .unwrap()
        .contains("session_init_timeout"));
    assert_eq!(out.first("mcp_server_started")["tools"], json!(["up_echo"]));
    assert_eq!(
        tool_names(&server.requests()[0].body)
            .iter()
            .filter(|n| n.starts_with("up_"))
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn colliding_names_make_the_later_server_fail_naming_both() {
    let Some(py) = python() else { return };
    let server = MockServer::start().await;
    server.push_reply(Reply::text("fine"));
    let ws = workspace();
    let raw = ", tool_name_prefix: false";
    let cfg = config_with(
        ws.path(),
        &server.url(),
        &[
            ("a", entry(&py, "MCP_TOOLS: echo", raw)),
            ("b", entry(&py, "MCP_TOOLS: echo", raw)),
            ("c", entry(&py, "MCP_TOOLS: read_file", raw)),
            // Prefixed, its `image` is offered as `view_image`: a vision agent's built-in.
            ("view", entry(&py, "MCP_TOOLS: image", "")),
        ],
    );
    let out = run(&cfg, ws.path(), "go").output().await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let warnings = out.of_type("warning");
    let msg = |s: &str| {
        warnings
            .iter()
            .find(|w| w["server"] == s)
            .map(|w| w["message"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("no warning for {s}: {warnings:#?}"))
    };
    assert!(
        msg("b").contains("'echo' of MCP server 'a'"),
        "{}",
        msg("b")
    );
    assert!(
        msg("c").contains("built-in tool 'read_file'"),
        "{}",
        msg("c")
    );
    assert!(
        msg("view").contains("built-in tool 'view_image'"),
        "{}",
        msg("view")
    );
    let names = tool_names(&server.requests()[0].body);
    assert_eq!(
        names.iter().filter(|n| *n == "echo").count(),
        1,
        "{names:?}"
    );
    assert_eq!(
        names.iter().filter(|n| *n == "read_file").count(),
        1,
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_disabled_server_is_never_started_nor_its_variables_read() {
    let Some(py) = python() else { return };
    let server = MockServer::start().await;
    server.push_reply(Reply::text("fine"));
    let ws = workspace();
    let log = ws.path().join("never.log");
    let e = entry(
        &py,
        &format!("MCP_LOG: \"{}\", K: $DF_SURELY_UNSET_VAR", log.display()),
        ", enabled: false",
    );
    let cfg = config_with(ws.path(), &server.url(), &[("off", e)]);
    let out = run(&cfg, ws.path(), "go").output().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.of_type("mcp_server_started").is_empty());
    assert!(!log.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn config_errors_come_before_run_started() {
    let ws = workspace();
    let cfg = config_with(
        ws.path(),
        "http://127.0.0.1:9/v1",
        &[(
            "gh",
            "{command: npx, env: {GITHUB_TOKEN: $DF_SURELY_UNSET_VAR}}".into(),
        )],
    );
    let out = run(&cfg, ws.path(), "go").output().await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.events.is_empty());
    assert!(
        out.stderr.contains("mcp_servers.gh.env.GITHUB_TOKEN"),
        "{}",
        out.stderr
    );
    let cfg = config_with(
        ws.path(),
        "http://127.0.0.1:9/v1",
        &[("old", "{type: sse, url: 'http://127.0.0.1:9/sse'}".into())],
    );
    let out = run(&cfg, ws.path(), "go").output().await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr.contains("'old'") && out.stderr.contains("SSE"),
        "{}",
        out.stderr
    );
    let check = deerflow(["-c", cfg.to_str().unwrap(), "config", "check"])
        .output()
        .await;
    assert_eq!(check.code, 78, "{}", check.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_deerflow_extensions_example_loads_beside_the_config() {
    let server = MockServer::start().await;
    server.push_reply(Reply::text("fine"));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), ", max_retries: 0");
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/deerflow/extensions_config.example.json"
    );
    std::fs::copy(example, ws.path().join("extensions_config.json")).unwrap();
    let out = run(&cfg, ws.path(), "go").output().await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.of_type("mcp_server_started").is_empty());
    let ignored: Vec<&Value> = out
        .of_type("warning")
        .into_iter()
        .filter(|w| w["code"] == "config_ignored")
        .collect();
    assert_eq!(ignored.len(), 1, "{ignored:#?}");
    let m = ignored[0]["message"].as_str().unwrap();
    assert!(
        m.contains("mcpInterceptors") && m.contains("mcpServers.postgres.routing"),
        "{m}"
    );
    // config show lists its servers with the token redacted.
    let show = deerflow(["-c", cfg.to_str().unwrap(), "config", "show", "--json"])
        .text()
        .await;
    assert_eq!(show.code, 0, "{}", show.stderr);
    let v: Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(
        v["mcp_servers"]["github"]["env"]["GITHUB_TOKEN"],
        "$GITHUB_TOKEN"
    );
    assert_eq!(v["mcp_servers"]["github"]["enabled"], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_call_times_out_and_is_cancelled_at_the_server() {
    let Some(py) = python() else { return };
    let server = MockServer::start().await;
    server.push_reply(Reply::tool_calls(vec![(
        "s1",
        "t_sleep",
        json!({"seconds": 5}),
    )]));
    server.push_reply(Reply::text("gave up"));
    let ws = workspace();
    let log = ws.path().join("mcp.log");
    let e = entry(
        &py,
        &format!("MCP_LOG: \"{}\"", log.display()),
        ", tool_call_timeout: 0.5",
    );
    let cfg = config_with(ws.path(), &server.url(), &[("t", e)]);
    let t = std::time::Instant::now();
    let out = run(&cfg, ws.path(), "sleep").output().await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = result_of(&out, "s1");
    assert_eq!(r["status"], "error");
    assert!(
        r["output"]
            .as_str()
            .unwrap()
            .contains("timed out after 0.5 seconds"),
        "{r}"
    );
    assert!(t.elapsed() < Duration::from_secs(4));
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("notifications/cancelled"), "{logged}");
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_list_shows_tools_and_failures() {
    let Some(py) = python() else { return };
    let ws = workspace();
    let file = ws.path().join(".mcp.json");
    let srv = |env: Value| json!({"command": py, "args": [server_script()], "env": env});
    std::fs::write(
        &file,
        json!({"mcpServers": {"t": srv(json!({"MCP_TOOLS": "echo,fail"}))}}).to_string(),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let out = deerflow(["mcp", "list", "--mcp-config", f])
        .cwd(ws.path())
        .text()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("t (stdio): 2 tools"), "{}", out.stdout);
    assert!(
        out.stdout.contains("  t_echo  Echoes its text"),
        "{}",
        out.stdout
    );
    let out = deerflow(["mcp", "list", "--json", "--mcp-config", f])
        .cwd(ws.path())
        .text()
        .await;
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        v["servers"][0]["tools"][0]["input_schema"]["required"],
        json!(["text"])
    );
    // A later file wins per server name: now it crashes.
    let bad = ws.path().join("bad.json");
    std::fs::write(
        &bad,
        json!({"mcpServers": {"t": srv(json!({"MCP_MODE": "crash"}))}}).to_string(),
    )
    .unwrap();
    let out = deerflow([
        "mcp",
        "list",
        "--mcp-config",
        f,
        "--mcp-config",
        bad.to_str().unwrap(),
    ])
    .cwd(ws.path())
    .text()
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stdout.contains("t: failed to start: `")
            && out.stdout.contains("exited with status 1 before answering")
            && out
                .stdout
                .contains("its last stderr line: test server: crashing on purpose"),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sub_agents_get_the_tools_by_the_lead_s_rules() {
    use crate::support::Rule;
    let Some(py) = python() else { return };
    let server = MockServer::start().await;
    let task = |i: u32, kind: &str| {
        (
            format!("task_{i}"),
            "task".to_string(),
            json!({"description": format!("part {i}"), "prompt": format!("SUBTASK {i} {kind}"), "subagent_type": kind}),
        )
    };
    server.push(Rule::body_contains("Task Succeeded").reply(Reply::text("final")));
    server.push(
        Rule::body_contains("LEADPROMPT").reply(Reply::tool_calls(vec![
            task(1, "general-purpose"),
            task(2, "picky"),
            task(3, "plain"),
        ])),
    );
    server.push(
        Rule::body_contains("SUBTASK 1").reply(Reply::tool_calls(vec![(
            "e1",
            "t_echo",
            json!({"text": "from a sub-agent"}),
        )])),
    );
    server.push(
        Rule::body_contains("SUBTASK")
            .always()
            .reply(Reply::text("sub done")),
    );
    let ws = workspace();
    let cfg = config_with(
        ws.path(),
        &server.url(),
        &[("t", entry(&py, "MCP_TOOLS: \"echo,fail\"", ""))],
    );
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(
        "subagents:\n  custom_agents:\n    picky:\n      description: d\n      system_prompt: p\n      tools: [read_file, t_echo]\n    plain:\n      description: d\n      system_prompt: p\n      tools: [read_file]\n",
    );
    std::fs::write(&cfg, text).unwrap();
    let out = run(&cfg, ws.path(), "LEADPROMPT").output().await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.of_type("warning")
            .iter()
            .all(|w| w["code"] != "config_ignored"),
        "an MCP tool in an allow-list is not unknown: {:#?}",
        out.of_type("warning")
    );
    let reqs = server.requests();
    let sub = |marker: &str| {
        let r = reqs
            .iter()
            .find(|r| r.raw_body.contains(marker) && !r.raw_body.contains("LEADPROMPT"))
            .unwrap();
        tool_names(&r.body)
    };
    let gp = sub("SUBTASK 1 general-purpose");
    assert!(
        gp.contains(&"t_echo".into()) && gp.contains(&"t_fail".into()),
        "{gp:?}"
    );
    assert_eq!(sub("SUBTASK 2 picky"), ["read_file", "t_echo"]);
    assert_eq!(sub("SUBTASK 3 plain"), ["read_file"]);
    // The sub-agent's call went through the run's one session.
    let running = out
        .of_type("task_running")
        .into_iter()
        .find(|e| e["message"]["role"] == "tool")
        .unwrap();
    assert_eq!(running["message"]["name"], "t_echo");
    assert_eq!(running["message"]["status"], "ok");
    let done = out
        .of_type("task_completed")
        .into_iter()
        .find(|e| e["task_id"] == "task_1")
        .unwrap();
    assert_eq!(done["result"], "sub done");
    let follow_up = reqs
        .iter()
        .find(|r| r.raw_body.contains("SUBTASK 1") && r.raw_body.contains("from a sub-agent"));
    assert!(
        follow_up.is_some(),
        "the tool result reached the sub-agent's model"
    );
}

/// Waits until `pid` is gone (a killed process may linger a moment until it is reaped).
async fn gone(pid: i32) -> bool {
    for _ in 0..100 {
        if !pid_alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_ignores_stdin_and_sigterm_is_killed_at_the_end() {
    let Some(py) = python() else { return };
    let server = MockServer::start().await;
    server.push_reply(Reply::text("fine"));
    let ws = workspace();
    let log = ws.path().join("mcp.log");
    let e = entry(
        &py,
        &format!("MCP_LOG: \"{}\", MCP_MODE: stubborn", log.display()),
        "",
    );
    let cfg = config_with(ws.path(), &server.url(), &[("t", e)]);
    let t = std::time::Instant::now();
    let out = run(&cfg, ws.path(), "go").output().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    // stdin closed, a grace, SIGTERM, 2 s, SIGKILL.
    assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
    let pids = logged_pids(&log);
    assert_eq!(pids.len(), 1);
    assert!(gone(pids[0]).await, "the stubborn server outlived the run");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_during_a_call_stops_the_run_and_its_servers_within_2s() {
    use tokio::io::AsyncBufReadExt;
    let Some(py) = python() else { return };
    let server = MockServer::start().await;
    server.push_reply(Reply::tool_calls(vec![(
        "s1",
        "t_sleep",
        json!({"seconds": 30}),
    )]));
    let ws = workspace();
    let log = ws.path().join("mcp.log");
    let e = entry(
        &py,
        &format!("MCP_LOG: \"{}\", MCP_MODE: stubborn", log.display()),
        "",
    );
    let cfg = config_with(ws.path(), &server.url(), &[("t", e)]);
    let mut child = run(&cfg, ws.path(), "sleep").command().spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut events = Vec::new();
    while let Ok(Some(l)) = lines.next_line().await {
        let v: Value = serde_json::from_str(&l).unwrap();
        let call = v["type"] == "tool_call";
        events.push(v);
        if call {
            break;
        }
    }
    // The call has reached the server once it logged it.
    for _ in 0..100 {
        if std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("tools/call")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = child.id().unwrap() as i32;
    let sent = std::time::Instant::now();
    // SAFETY: kill only sends a signal to the child we spawned.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    while let Ok(Some(l)) = lines.next_line().await {
        events.push(serde_json::from_str(&l).unwrap());
    }
    let status = child.wait().await.unwrap();
    assert!(
        sent.elapsed() < Duration::from_millis(2500),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(status.code(), Some(143));
    let last = events.last().unwrap();
    assert_eq!(last["type"], "run_completed");
    assert_eq!(last["exit_code"], 143);
    let pids = logged_pids(&log);
    assert!(gone(pids[0]).await, "the server outlived a SIGTERM'd run");
}

/// `mcp-server-time` from PyPI, as `.ci/run` installs it (or `$DEERFLOW_TEST_MCP_TIME`).
fn published_time_server() -> Option<String> {
    let path = std::env::var("DEERFLOW_TEST_MCP_TIME").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/target/mcp-venv/bin/mcp-server-time"
        )
        .to_string()
    });
    if Path::new(&path).exists() {
        Some(path)
    } else {
        eprintln!(
            "skipped: {path} is missing (.ci/run installs mcp-server-time from PyPI; needs python3)"
        );
        None
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_published_server_mcp_server_time() {
    let Some(time) = published_time_server() else {
        return;
    };
    let ws = workspace();
    let file = ws.path().join(".mcp.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"time": {"command": time, "args": ["--local-timezone", "UTC"]}}})
            .to_string(),
    )
    .unwrap();
    let cassette = super::harness::cassette(
        ws.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"id": "c1", "name": "time_get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}]},
            {"text": "done"}]}),
    );
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &format!("replay:{}", cassette.display()),
        "--mcp-config",
        file.to_str().unwrap(),
        "-C",
        ws.path().to_str().unwrap(),
        "What time is it in Tokyo?",
    ])
    .output()
    .await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let started = out.first("mcp_server_started");
    assert!(started["tools"]
        .as_array()
        .unwrap()
        .contains(&json!("time_get_current_time")));
    let r = result_of(&out, "c1");
    assert_eq!(r["status"], "ok", "{r}");
    assert!(r["output"].as_str().unwrap().contains("Asia/Tokyo"), "{r}");
    let list = deerflow(["mcp", "list", "--mcp-config", file.to_str().unwrap()])
        .text()
        .await;
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        list.stdout.contains("time (stdio): 2 tools"),
        "{}",
        list.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn streamable_http_servers_get_their_headers_and_serve_calls() {
    use tokio::io::AsyncBufReadExt;
    let Some(py) = python() else { return };
    let ws = workspace();
    let log = ws.path().join("http.log");
    let mut http = tokio::process::Command::new(&py)
        .args([server_script().as_str(), "--http"])
        .env("MCP_LOG", &log)
        .env("MCP_TOOLS", "echo")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(http.stdout.take().unwrap()).lines();
    let port = lines.next_line().await.unwrap().unwrap();
    let server = MockServer::start().await;
    server.push_reply(Reply::tool_calls(vec![(
        "h1",
        "web_echo",
        json!({"text": "over http"}),
    )]));
    server.push_reply(Reply::text("done"));
    let e = format!("{{type: http, url: 'http://127.0.0.1:{port}/mcp', headers: {{X-Test-Key: $DF_MCP_HTTP_KEY}}}}");
    let cfg = config_with(ws.path(), &server.url(), &[("web", e)]);
    let out = run(&cfg, ws.path(), "go")
        .env("DF_MCP_HTTP_KEY", "k-123")
        .output()
        .await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let started = out.first("mcp_server_started");
    assert_eq!(started["transport"], "http");
    assert_eq!(started["tools"], json!(["web_echo"]));
    assert_eq!(result_of(&out, "h1")["output"], "over http");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("initialize k-123"), "{logged}");
    assert!(logged.contains("tools/call k-123"), "{logged}");
    let _ = http.kill().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sub_agent_that_times_out_cancels_its_call_at_the_server() {
    use crate::support::Rule;
    let Some(py) = python() else { return };
    let server = MockServer::start().await;
    server.push(Rule::body_contains("Task timed out").reply(Reply::text("final")));
    server.push(Rule::body_contains("LEADPROMPT").reply(Reply::tool_calls(vec![(
        "task_1",
        "task",
        json!({"description": "slow", "prompt": "SUBTASK sleep", "subagent_type": "general-purpose"}),
    )])));
    server.push(
        Rule::body_contains("SUBTASK").reply(Reply::tool_calls(vec![(
            "z1",
            "t_sleep",
            json!({"seconds": 30}),
        )])),
    );
    let ws = workspace();
    let log = ws.path().join("mcp.log");
    let e = entry(&py, &format!("MCP_LOG: \"{}\"", log.display()), "");
    let cfg = config_with(ws.path(), &server.url(), &[("t", e)]);
    let out = super::harness::deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "--subagent-timeout",
        "1s",
        "-C",
        ws.path().to_str().unwrap(),
        "LEADPROMPT",
    ])
    .output()
    .await;
    check_stream(&out);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert_eq!(out.first("task_timed_out")["task_id"], "task_1");
    let mut logged = String::new();
    for _ in 0..100 {
        logged = std::fs::read_to_string(&log).unwrap_or_default();
        if logged.contains("notifications/cancelled") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(logged.contains("notifications/cancelled"), "{logged}");
}

#[tokio::test(flavor = "multi_thread")]
async fn config_check_validates_servers_without_starting_them() {
    let Some(py) = python() else { return };
    let ws = workspace();
    let log = ws.path().join("never.log");
    let cfg = config_with(
        ws.path(),
        "http://127.0.0.1:9/v1",
        &[(
            "t",
            entry(&py, &format!("MCP_LOG: \"{}\"", log.display()), ""),
        )],
    );
    let out = deerflow(["-c", cfg.to_str().unwrap(), "config", "check"])
        .text()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!log.exists(), "config check started a server");
    let cfg = config_with(
        ws.path(),
        "http://127.0.0.1:9/v1",
        &[(
            "t",
            entry(&py, "", ", tool_call_timeout: -1, required: maybe"),
        )],
    );
    let out = deerflow(["-c", cfg.to_str().unwrap(), "config", "check"])
        .text()
        .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr.contains("mcp_servers.t.required"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn parallel_sub_agents_share_one_session() {
    use crate::support::Rule;
    let Some(py) = python() else { return };
    let server = MockServer::start().await;
    server.push(Rule::body_contains("Task Succeeded").reply(Reply::text("final")));
    let tasks = (1..=3)
        .map(|i| {
            (
                format!("task_{i}"),
                "task".to_string(),
                json!({"description": format!("part {i}"), "prompt": format!("SUBTASK {i}"), "subagent_type": "general-purpose"}),
            )
        })
        .collect();
    server.push(Rule::body_contains("LEADPROMPT").reply(Reply::tool_calls(tasks)));
    server.push(
        Rule::body_contains("slept")
            .always()
            .reply(Reply::text("sub done")),
    );
    server.push(
        Rule::body_contains("SUBTASK")
            .times(3)
            .reply(Reply::tool_calls(vec![(
                "z",
                "t_sleep",
                json!({"seconds": 1.5}),
            )])),
    );
    let ws = workspace();
    let log = ws.path().join("mcp.log");
    let e = entry(&py, &format!("MCP_LOG: \"{}\"", log.display()), "");
    let cfg = config_with(ws.path(), &server.url(), &[("t", e)]);
    let out = run(&cfg, ws.path(), "LEADPROMPT").output().await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["tasks"]["completed"], 3);
    assert_eq!(
        logged_pids(&log).len(),
        1,
        "one server process for all sub-agents"
    );
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(log_text.matches("tools/call").count(), 3, "{log_text}");
    // The three 1.5 s calls overlapped at the server (in sequence they take 4.5 s).
    let run_ms = out.completed()["duration_ms"].as_u64().unwrap();
    assert!(run_ms < 4000, "calls were serialized: {run_ms} ms");
}
