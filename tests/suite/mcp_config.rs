//! MCP configuration and what servers say (contract §2, §9, §12): the `$` rules of each
//! source, tool names providers would reject, lenient `tools/call` results, and server text
//! reaching a terminal escaped. The server is tests/support/mcp_odd_server.py.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::harness::{check_stream, deerflow, workspace, Output};
use super::mcp::python;
use super::openai_http::{config, run};
use crate::support::{MockServer, Reply};

fn script() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/support/mcp_odd_server.py"
    )
    .to_string()
}

/// A stdio entry running the odd server with `spec`.
fn odd(py: &str, spec: Value) -> Value {
    json!({"command": py, "args": [script()], "env": {"ODD_SPEC": spec.to_string()}})
}

/// A `--mcp-config` file (Claude Code's `.mcp.json`) holding `servers`.
fn mcp_file(dir: &Path, servers: Value) -> PathBuf {
    let path = dir.join(".mcp.json");
    std::fs::write(&path, json!({ "mcpServers": servers }).to_string()).unwrap();
    path
}

fn mcp_list(file: &Path, json_out: bool) -> super::harness::Run {
    let mut args = vec!["mcp", "list", "--mcp-config", file.to_str().unwrap()];
    if json_out {
        args.push("--json");
    }
    deerflow(args)
}

/// The odd server over streamable HTTP: its process (killed on drop) and its endpoint.
async fn http_server(py: &str, spec: Value) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(py)
        .args([script().as_str(), "--http"])
        .env("ODD_SPEC", spec.to_string())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let port = lines.next_line().await.unwrap().unwrap();
    (child, port)
}

fn raw_controls(s: &str) -> Vec<char> {
    s.chars().filter(|c| c.is_control() && *c != '\n').collect()
}

const EVIL: &str = "\u{1b}]52;c;aGk=\u{7}\u{1b}[2J\r\u{1b}]0;title\u{7}";

#[tokio::test(flavor = "multi_thread")]
async fn mcp_list_shows_what_servers_say_with_controls_escaped() {
    let Some(py) = python() else { return };
    let ws = workspace();
    // Over HTTP the server's own error message is part of the start-up error.
    let (_down, port) = http_server(&py, json!({"init_error": format!("no{EVIL}")})).await;
    let file = mcp_file(
        ws.path(),
        json!({
            "evil": odd(&py, json!({"tools": [{"name": format!("t{EVIL}"), "description": format!("d{EVIL}x")}]})),
            "down": {"url": format!("http://127.0.0.1:{port}/mcp")},
        }),
    );
    let out = mcp_list(&file, false).cwd(ws.path()).text().await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(raw_controls(&out.stdout).is_empty(), "{:?}", out.stdout);
    assert!(raw_controls(&out.stderr).is_empty(), "{:?}", out.stderr);
    assert!(
        out.stdout.contains("evil (stdio): 1 tools"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("d\\u{1b}]52;c;aGk=\\u{7}\\u{1b}[2J\\r"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("down: failed to start: ")
            && out.stdout.contains("no\\u{1b}]52;c;aGk=\\u{7}"),
        "{}",
        out.stdout
    );
    assert!(out.stderr.contains("renamed"), "{}", out.stderr);
    // With --json the text is JSON-escaped: no raw control byte either.
    let out = mcp_list(&file, true).cwd(ws.path()).text().await;
    assert!(raw_controls(&out.stdout).is_empty(), "{:?}", out.stdout);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let desc = v["servers"][1]["tools"][0]["description"].as_str().unwrap();
    assert_eq!(desc, format!("d{EVIL}x"), "JSON carries the text as it was");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_s_warnings_about_a_server_are_escaped_on_stderr() {
    let Some(py) = python() else { return };
    let server = MockServer::start().await;
    server.push_reply(Reply::text("fine"));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), ", max_retries: 0");
    let (_down, port) = http_server(&py, json!({"init_error": format!("no{EVIL}")})).await;
    let file = mcp_file(
        ws.path(),
        json!({"down": {"url": format!("http://127.0.0.1:{port}/mcp")}}),
    );
    let out = deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "-C",
        ws.path().to_str().unwrap(),
        "--mcp-config",
        file.to_str().unwrap(),
        "go",
    ])
    .output()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("mcp_server_failed") && out.stderr.contains("no\\u{1b}]52"),
        "{}",
        out.stderr
    );
    assert!(raw_controls(&out.stderr).is_empty(), "{:?}", out.stderr);
}

fn valid_name(n: &str) -> bool {
    (1..=64).contains(&n.len())
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[tokio::test(flavor = "multi_thread")]
async fn names_providers_reject_are_rewritten_unique_and_reach_the_server_s_own_name() {
    let Some(py) = python() else { return };
    let ws = workspace();
    let raw = [
        "a/b".to_string(),
        "a b".into(),
        "a_b".into(),
        String::new(),
        "x".repeat(300),
        "ctl\u{1}\u{1b}[2Jname".into(),
        "read file".into(),
    ];
    let tools: Vec<Value> = raw.iter().map(|n| json!({"name": n})).collect();
    let mut entry = odd(&py, json!({ "tools": tools }));
    entry["tool_name_prefix"] = json!(false);
    let file = mcp_file(ws.path(), json!({ "s": entry }));
    let list = mcp_list(&file, true).cwd(ws.path()).text().await;
    assert_eq!(list.code, 0, "{}", list.stderr);
    let v: Value = serde_json::from_str(&list.stdout).unwrap();
    let offered: Vec<String> = v["servers"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(offered.len(), raw.len(), "{offered:?}");
    assert!(offered.iter().all(|n| valid_name(n)), "{offered:?}");
    let unique: std::collections::HashSet<&String> = offered.iter().collect();
    assert_eq!(unique.len(), offered.len(), "{offered:?}");
    assert_eq!(offered[2], "a_b", "a valid name is kept");
    assert_ne!(offered[6], "read_file", "a built-in's name is not taken");

    let server = MockServer::start().await;
    let calls: Vec<(String, String, Value)> = offered
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("c{i}"), n.clone(), json!({})))
        .collect();
    server.push_reply(Reply::tool_calls(
        calls
            .iter()
            .map(|(id, n, a)| (id.as_str(), n.as_str(), a.clone()))
            .collect(),
    ));
    server.push_reply(Reply::text("done"));
    let cfg = config(ws.path(), "openai", &server.url(), ", max_retries: 0");
    let out = run_with(&cfg, ws.path(), &file).await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for (i, name) in raw.iter().enumerate() {
        let r = result_of(&out, &format!("c{i}"));
        assert_eq!(r["output"], format!("called {name}"), "{r}");
    }
    let warnings: Vec<&Value> = out
        .of_type("warning")
        .into_iter()
        .filter(|w| w["code"] == "mcp_tool_renamed")
        .collect();
    assert_eq!(warnings.len(), 1, "warned once: {warnings:?}");
    assert_eq!(warnings[0]["server"], "s");
    let sent = &server.requests()[0].body;
    let names: Vec<&str> = sent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.iter().all(|n| valid_name(n)), "{names:?}");
}

async fn run_with(cfg: &Path, ws: &Path, file: &Path) -> Output {
    deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-C",
        ws.to_str().unwrap(),
        "--mcp-config",
        file.to_str().unwrap(),
        "go",
    ])
    .output()
    .await
}

fn result_of<'a>(out: &'a Output, id: &str) -> &'a Value {
    out.events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["call_id"] == id)
        .unwrap_or_else(|| panic!("no tool_result {id}: {:#?}", out.events))
}

/// Each field of an entry with `VAL` where the value goes (YAML flow mappings).
const FIELDS: [(&str, &str); 6] = [
    ("command", "{command: 'VAL'}"),
    ("args[1]", "{command: c, args: [x, 'VAL']}"),
    ("env.K", "{command: c, env: {K: 'VAL'}}"),
    ("cwd", "{command: c, cwd: 'VAL'}"),
    ("url", "{url: 'VAL'}"),
    ("headers.K", "{url: 'http://h/mcp', headers: {K: 'VAL'}}"),
];

#[tokio::test(flavor = "multi_thread")]
async fn config_check_refuses_braces_and_half_written_dollars_naming_the_key() {
    let ws = workspace();
    for (key, yaml) in FIELDS {
        for bad in ["${DF_T}", "$DF_T-x", "$", "Bearer ${DF_T}"] {
            let cfg = config(ws.path(), "openai", "http://127.0.0.1:9/v1", "");
            let mut text = std::fs::read_to_string(&cfg).unwrap();
            text.push_str(&format!(
                "mcp_servers:\n  s: {}\n",
                yaml.replace("VAL", bad)
            ));
            std::fs::write(&cfg, text).unwrap();
            let out = deerflow(["-c", cfg.to_str().unwrap(), "config", "check"])
                .env("DF_T", "set")
                .text()
                .await;
            assert_eq!(out.code, 78, "{key} {bad}: {}", out.stderr);
            let at = format!("mcp_servers.s.{key}: ");
            assert!(out.stderr.contains(&at), "{key} {bad}: {}", out.stderr);
        }
    }
    // The same in DeerFlow's extensions_config.json beside the config, named by its path;
    // and `mcp list` and `run` refuse it too.
    let cfg = config(ws.path(), "openai", "http://127.0.0.1:9/v1", "");
    let ext = ws.path().join("extensions_config.json");
    std::fs::write(
        &ext,
        json!({"mcpServers": {"e": {"command": "c", "headers": {}, "args": ["${DF_T}"]}}})
            .to_string(),
    )
    .unwrap();
    let named = format!("{}: mcpServers.e.args[0]: ", ext.display());
    let out = deerflow(["-c", cfg.to_str().unwrap(), "config", "check"])
        .env("DF_T", "set")
        .text()
        .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stderr.contains(&named), "{}", out.stderr);
    let out = deerflow(["-c", cfg.to_str().unwrap(), "mcp", "list"])
        .env("DF_T", "set")
        .text()
        .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stderr.contains(&named), "{}", out.stderr);
    let out = run(&cfg, ws.path(), "go").env("DF_T", "set").output().await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.events.is_empty(), "{:?}", out.events);
    assert!(out.stderr.contains(&named), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claude_code_file_expands_braces_and_defaults_in_every_field() {
    let Some(py) = python() else { return };
    let ws = workspace();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let (_http, port) = http_server(&py, json!({"echo_env": []})).await;
    let spec = json!({"echo_env": ["E1", "E2", "E3"]}).to_string();
    let file = mcp_file(
        ws.path(),
        json!({
            "stdio": {
                "command": "${DF_PY}",
                "args": [script(), "--flag=${DF_A}", "${DF_NOPE:-dflt}", "$DF_A"],
                "env": {"ODD_SPEC": spec, "E1": "Bearer ${DF_A}", "E2": "${DF_NOPE:-fallback}", "E3": "$DF_A"},
                "cwd": "${DF_SUB}",
            },
            "web": {
                "type": "http",
                "url": "http://127.0.0.1:${DF_PORT}${DF_NOPE:-/mcp}",
                "headers": {"Authorization": "Bearer ${DF_A}", "X-Key": "${DF_NOPE:-k-default}"},
            },
        }),
    );
    let out = mcp_list(&file, true)
        .cwd(ws.path())
        .env("DF_PY", &py)
        .env("DF_A", "aaa")
        .env("DF_SUB", "sub")
        .env("DF_PORT", &port)
        .text()
        .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let who = |i: usize| -> Value {
        let t = &v["servers"][i]["tools"][0];
        serde_json::from_str(t["description"].as_str().unwrap()).unwrap()
    };
    let s = who(0);
    assert_eq!(s["argv"], json!(["--flag=aaa", "dflt", "aaa"]), "{s}");
    assert_eq!(
        s["env"],
        json!({"E1": "Bearer aaa", "E2": "fallback", "E3": "aaa"})
    );
    assert!(s["cwd"].as_str().unwrap().ends_with("/sub"), "{s}");
    let h = who(1);
    assert_eq!(h["path"], "/mcp", "{h}");
    assert_eq!(
        h["headers"],
        json!({"Authorization": "Bearer aaa", "X-Key": "k-default"})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claude_code_file_with_an_unset_or_half_written_reference_is_a_config_error() {
    let ws = workspace();
    let cfg = config(ws.path(), "openai", "http://127.0.0.1:9/v1", "");
    for (key, yaml) in FIELDS {
        for bad in ["${DF_NOPE}", "x ${DF_NOPE} y", "$DF_A-x", "$", "${DF_A"] {
            let entry: Value = serde_yaml_ng::from_str(&yaml.replace("VAL", bad)).unwrap();
            let file = mcp_file(ws.path(), json!({ "s": entry }));
            let at = format!("{}: mcpServers.s.{key}: ", file.display());
            let out = mcp_list(&file, false)
                .env("DF_A", "aaa")
                .cwd(ws.path())
                .text()
                .await;
            assert_eq!(out.code, 78, "{key} {bad}: {}", out.stderr);
            assert!(out.stderr.contains(&at), "{key} {bad}: {}", out.stderr);
            if bad == "${DF_NOPE}" {
                assert!(out.stderr.contains("$DF_NOPE is not set"), "{}", out.stderr);
                let run = run_with(&cfg, ws.path(), &file).await;
                assert_eq!(run.code, 78, "{}", run.stderr);
                assert!(run.events.is_empty(), "{:?}", run.events);
                assert!(run.stderr.contains(&at), "{}", run.stderr);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn odd_tool_results_are_read_leniently_and_never_dumped() {
    let Some(py) = python() else { return };
    let results = json!({
        "unknown_block": {"content": [{"type": "text", "text": "kept"}, {"type": "foo", "x": 1}]},
        "is_error_string": {"content": [{"type": "text", "text": "bad"}], "isError": "true"},
        "is_error_number": {"content": [{"type": "text", "text": "one"}], "isError": 1},
        "is_error_odd": {"content": [{"type": "text", "text": "fine"}], "isError": "maybe"},
        "content_null": {"content": null},
        "text_number": {"content": [{"type": "text", "text": 42}]},
        "text_missing": {"content": [{"type": "text"}, {"type": "text", "text": "after"}]},
        "not_an_object": "just a string",
    });
    let names: Vec<String> = results.as_object().unwrap().keys().cloned().collect();
    let tools: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
    let ws = workspace();
    let mut entry = odd(&py, json!({"tools": tools, "results": results}));
    entry["tool_name_prefix"] = json!(false);
    let file = mcp_file(ws.path(), json!({ "s": entry }));
    let server = MockServer::start().await;
    server.push_reply(Reply::tool_calls(
        names
            .iter()
            .map(|n| (n.as_str(), n.as_str(), json!({})))
            .collect(),
    ));
    server.push_reply(Reply::text("done"));
    let cfg = config(ws.path(), "openai", &server.url(), ", max_retries: 0");
    let out = run_with(&cfg, ws.path(), &file).await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = |id: &str| {
        let e = result_of(&out, id);
        (
            e["status"].as_str().unwrap().to_string(),
            e["output"].as_str().unwrap().to_string(),
        )
    };
    let ok = |s: &str| ("ok".to_string(), s.to_string());
    let error = |s: &str| ("error".to_string(), s.to_string());
    assert_eq!(
        r("unknown_block"),
        ok("kept\n[unsupported content block of type 'foo']")
    );
    assert_eq!(r("is_error_string"), error("bad"));
    assert_eq!(r("is_error_number"), error("one"));
    assert_eq!(r("is_error_odd"), ok("fine"));
    assert_eq!(r("content_null"), ok(""));
    assert_eq!(r("text_number"), ok("42"));
    assert_eq!(r("text_missing"), ok("[text block without text]\nafter"));
    let (status, text) = r("not_an_object");
    assert_eq!(status, "error");
    assert!(
        text.contains("a string instead of a result object"),
        "{text}"
    );
    for dump in ["CustomResult", "Object {", "String(", "Array ["] {
        assert!(!out.stdout.contains(dump), "a Debug dump: {}", out.stdout);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stdio_server_that_refuses_initialize_is_quoted_not_said_to_have_exited() {
    let Some(py) = python() else { return };
    let ws = workspace();
    let file = mcp_file(
        ws.path(),
        json!({"no": odd(&py, json!({"init_error": "licence expired"}))}),
    );
    let out = mcp_list(&file, false).cwd(ws.path()).text().await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("no: failed to start: refused initialize: licence expired"),
        "{}",
        out.stdout
    );
}
