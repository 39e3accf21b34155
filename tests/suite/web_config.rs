//! DeerFlow's `tools:` section and `--web` (contract §14): which tools are offered, what is
//! reported, what bash never sees, and the research example's offline replay.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::harness::{cassette, deerflow, workspace, Output};

/// Backends no deerflow serves (DeerFlow's InfoQuest and browser tools).
const INFOQUEST_SEARCH: &str = "deerflow.community.infoquest.tools:web_search_tool";
const INFOQUEST_FETCH: &str = "deerflow.community.infoquest.tools:web_fetch_tool";
const BROWSER: &str = "deerflow.community.browser_automation.tools:browser_navigate_tool";

fn config(dir: &Path, text: &str) -> String {
    let p = dir.join("config.yaml");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn answer_only(dir: &Path) -> String {
    let c = cassette(dir, json!({"version": 1, "lead": [{"text": "done"}]}));
    format!("replay:{}", c.display())
}

fn warnings<'a>(out: &'a Output, code: &str) -> Vec<&'a Value> {
    out.of_type("warning")
        .into_iter()
        .filter(|w| w["code"] == code)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unservable_entry_is_reported_once_by_tool_and_class_and_the_run_goes_on() {
    let ws = workspace();
    let cfg = config(
        ws.path(),
        &format!(
            "tools:\n\
             - {{name: web_search, group: web, use: {INFOQUEST_SEARCH}, api_key: $DF_TEST_UNSET_KEY, \
                search_time_range: 10}}\n\
             - {{name: browser_navigate, group: browser, use: {BROWSER}, headless: true}}\n\
             tool_groups: [{{name: web}}, {{name: browser}}]\n"
        ),
    );
    let m = answer_only(ws.path());
    let out = deerflow(["-c", &cfg, "run", "--json", "-m", &m, "go"])
        .cwd(ws.path())
        .json()
        .await;
    // The unset variable is never read: its entry is not offered.
    assert_eq!(out.code, 0, "{}", out.stderr);
    let unavailable = warnings(&out, "tool_unavailable");
    let tools: Vec<&Value> = unavailable.iter().map(|w| &w["tool"]).collect();
    assert_eq!(tools, [&json!("web_search"), &json!("browser_navigate")]);
    let message = unavailable[0]["message"].as_str().unwrap();
    assert!(message.contains(INFOQUEST_SEARCH), "{message}");
    assert!(unavailable[1]["message"]
        .as_str()
        .unwrap()
        .contains(BROWSER));
    // Neither its keys nor `group`/`tool_groups` are reported as ignored.
    assert!(
        warnings(&out, "config_ignored").is_empty(),
        "{:?}",
        out.events
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn config_check_lists_the_tools_it_cannot_serve() {
    let ws = workspace();
    let cfg = config(
        ws.path(),
        &format!("tools:\n- {{name: web_fetch, use: {INFOQUEST_FETCH}, fetch_time: 10}}\n"),
    );
    let out = deerflow(["-c", &cfg, "config", "check", "--json"])
        .text()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["ok"], true);
    let listed = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .any(|w| w.contains("'web_fetch' is not offered") && w.contains(INFOQUEST_FETCH));
    assert!(listed, "{report}");
    // Every command that reads the config says so once, and nothing about its keys.
    for cmd in [&["config", "show"][..], &["agents"]] {
        let mut args = vec!["-c", cfg.as_str()];
        args.extend_from_slice(cmd);
        let out = deerflow(args).text().await;
        assert_eq!(out.code, 0, "{cmd:?}: {}", out.stderr);
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{cmd:?}: {}", out.stderr);
        assert!(
            lines[0].contains("'web_fetch' is not offered"),
            "{cmd:?}: {}",
            lines[0]
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn built_in_entries_change_only_their_own_keys() {
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "tools:\n\
         - {name: ls, group: file:read, use: deerflow.sandbox.tools:ls_tool, max_results: 5}\n\
         - {name: grep, group: file:read, use: deerflow.sandbox.tools:grep_tool, max_results: 2}\n\
         - {name: read_file, use: deerflow.sandbox.tools:read_file_tool, api_key: $DF_TEST_UNSET_KEY}\n",
    );
    std::fs::write(ws.path().join("notes.txt"), "hit\nhit\nhit\n").unwrap();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"id": "g", "name": "grep", "arguments": {"pattern": "hit"}}]},
            {"text": "done"}]}),
    );
    let m = format!("replay:{}", c.display());
    let out = deerflow(["-c", &cfg, "run", "--json", "-m", &m, "go"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let ignored = warnings(&out, "config_ignored");
    assert_eq!(ignored.len(), 1, "{ignored:?}");
    let message = ignored[0]["message"].as_str().unwrap();
    assert!(message.contains("tools[0].max_results"), "{message}");
    assert!(message.contains("tools[2].api_key"), "{message}");
    assert!(!message.contains("tools[1]"), "{message}");
    assert!(warnings(&out, "tool_unavailable").is_empty());
    // grep's entry set its default.
    let grep = out.first("tool_result")["output"].as_str().unwrap();
    assert!(grep.contains("stopped at 2 matches"), "{grep}");
}

#[tokio::test(flavor = "multi_thread")]
async fn web_leaves_a_configured_tool_to_its_entry() {
    let ws = workspace();
    let cfg = config(
        ws.path(),
        &format!(
            "tools:\n- {{name: web_search, use: {INFOQUEST_SEARCH}}}\n\
             - {{name: web_fetch, use: {INFOQUEST_FETCH}}}\n"
        ),
    );
    let m = answer_only(ws.path());
    let out = deerflow(["-c", &cfg, "run", "--json", "--web", "-m", &m, "go"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Only the entries' own tools, once each: `--web` added none of its own.
    let messages: Vec<&str> = warnings(&out, "tool_unavailable")
        .iter()
        .map(|w| w["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[0].contains(INFOQUEST_SEARCH) && messages[1].contains(INFOQUEST_FETCH));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_custom_agent_may_allow_list_a_web_tool() {
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "subagents:\n  custom_agents:\n    researcher:\n      description: d\n      \
         system_prompt: p\n      tools: [bash, read_file, web_search]\n",
    );
    let out = deerflow(["-c", &cfg, "agents", "--json"]).text().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("unknown tool"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn bash_never_sees_the_variables_web_keys_come_from() {
    let ws = workspace();
    let cfg = config(
        ws.path(),
        &format!(
            "tools:\n- {{name: web_search, use: {INFOQUEST_SEARCH}, api_key: $WEB_SVC_AUTH}}\n"
        ),
    );
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"id": "env", "name": "bash", "arguments": {"command": "env"}}]},
            {"text": "done"}]}),
    );
    let m = format!("replay:{}", c.display());
    let out = deerflow(["-c", &cfg, "run", "--json", "--allow-bash", "-m", &m, "go"])
        .cwd(ws.path())
        .env("WEB_SVC_AUTH", "auth-value-1")
        .env("PLAIN_VISIBLE", "yes")
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let env = out.first("tool_result")["output"].as_str().unwrap();
    assert!(env.contains("PLAIN_VISIBLE=yes"), "{env}");
    assert!(!env.contains("WEB_SVC_AUTH"), "{env}");
    assert!(!out.stdout.contains("auth-value-1"));
}

/// A config whose web tools point at a port nothing listens on: any request they made
/// would fail.
fn closed_port_config(dir: &Path) -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    config(
        dir,
        &format!(
            "tools:\n\
             - {{name: web_search, use: deerflow.community.ddg_search.tools:web_search_tool, \
                base_url: 'http://127.0.0.1:{port}'}}\n\
             - {{name: web_fetch, use: deerflow.community.jina_ai.tools:web_fetch_tool, \
                base_url: 'http://127.0.0.1:{port}'}}\n"
        ),
    )
}

fn research_cassette() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/research.json")
}

async fn research_run(cfg: &str) -> Output {
    let m = format!("replay:{}", research_cassette().display());
    deerflow([
        "-c",
        cfg,
        "run",
        "--web",
        "--json",
        "-m",
        &m,
        "Compare how Rust, Go and Zig keep memory safe",
    ])
    .json()
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_research_example_runs_offline() {
    let ws = workspace();
    let out = research_run(&closed_port_config(ws.path())).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["tasks"]["completed"], 3);
    let task_ids: Vec<&Value> = out
        .of_type("task_started")
        .iter()
        .map(|e| &e["task_id"])
        .collect();
    assert_eq!(
        task_ids,
        [&json!("task_rust"), &json!("task_go"), &json!("task_zig")]
    );
    assert!(out.completed()["final_message"]
        .as_str()
        .unwrap()
        .starts_with("## Memory safety in Rust, Go and Zig"));
}

/// Every web call of the three sub-agents is answered from the cassette, with the web
/// tools' services unreachable.
#[tokio::test(flavor = "multi_thread")]
async fn the_research_example_s_web_results_come_from_the_cassette() {
    let ws = workspace();
    let out = research_run(&closed_port_config(ws.path())).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(warnings(&out, "tool_unavailable").is_empty());
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(research_cassette()).unwrap()).unwrap();
    let results: Vec<(String, &Value)> = out
        .of_type("task_running")
        .into_iter()
        .filter(|e| e["message"]["role"] == "tool")
        .map(|e| {
            let key = format!(
                "{}/{}",
                e["task_id"].as_str().unwrap(),
                e["message"]["tool_call_id"].as_str().unwrap()
            );
            (key, &e["message"])
        })
        .collect();
    assert_eq!(results.len(), 6);
    for (key, message) in results {
        let want = &recorded["tool_results"][&key];
        assert_eq!(message["status"], want["status"], "{key}");
        assert_eq!(message["text"], want["output"], "{key}");
    }
}

/// An offered entry's unset `$VAR` stops the run before it starts, as for MCP servers.
#[tokio::test(flavor = "multi_thread")]
async fn an_offered_entry_s_unset_variable_is_a_configuration_error() {
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "tools:\n- {name: web_search, use: deerflow.community.tavily.tools:web_search_tool, \
         api_key: $DF_TEST_UNSET_KEY}\n",
    );
    let m = answer_only(ws.path());
    let out = deerflow(["-c", &cfg, "run", "--json", "-m", &m, "go"])
        .cwd(ws.path())
        .output()
        .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.events.is_empty());
    assert!(out
        .stderr
        .contains("tools[0].api_key: $DF_TEST_UNSET_KEY is not set"));
    let check = deerflow(["-c", &cfg, "config", "check"]).text().await;
    assert_eq!(check.code, 78, "{}", check.stderr);
}

/// DeerFlow's example config gives the lead its three web tools, and a custom type that
/// allow-lists `web_search` gets it.
#[tokio::test(flavor = "multi_thread")]
async fn the_deerflow_example_s_web_tools_reach_the_agents() {
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/deerflow/config.example.yaml");
    let mut text = std::fs::read_to_string(example).unwrap();
    text.push_str(
        "\nsubagents:\n  custom_agents:\n    researcher:\n      description: d\n      \
         system_prompt: p\n      tools: [read_file, web_search]\n",
    );
    let ws = workspace();
    let cfg = config(ws.path(), &text);
    let out = deerflow(["-c", &cfg, "agents", "--json"]).text().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("tool_unavailable") && !out.stderr.contains("not offered"));
    let agents: Value = serde_json::from_str(&out.stdout).unwrap();
    let tools_of = |name: &str| -> Vec<String> {
        let a = agents
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap();
        serde_json::from_value(a["tools"].clone()).unwrap()
    };
    assert_eq!(tools_of("researcher"), ["read_file", "web_search"]);
    let general = tools_of("general-purpose");
    for web in ["web_search", "web_fetch", "image_search"] {
        assert!(general.iter().any(|t| t == web), "{general:?}");
    }
}
