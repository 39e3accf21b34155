//! The subcommands besides `run` (contract §1): `agents`, `schema`, `completions`, `man`,
//! and the usage errors every command shares.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::harness::{deerflow, workspace, Output};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Exit 2, one stderr line, nothing on stdout.
fn usage_error(out: &Output) {
    assert_eq!(
        out.code, 2,
        "stdout: {}\nstderr: {}",
        out.stdout, out.stderr
    );
    assert_eq!(out.stdout, "");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
}

async fn agents_json(cfg: &Path) -> Vec<Value> {
    let out = deerflow(["agents", "--json", "-c", cfg.to_str().unwrap()])
        .text()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str::<Vec<Value>>(&out.stdout)
        .unwrap_or_else(|e| panic!("agents --json is not a JSON list ({e}): {}", out.stdout))
}

fn by_name<'a>(list: &'a [Value], name: &str) -> &'a Value {
    list.iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list:#?}"))
}

fn names(list: &[Value]) -> Vec<&str> {
    list.iter().map(|a| a["name"].as_str().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_without_config_lists_general_purpose_only() {
    let ws = workspace();
    let out = deerflow(["agents", "--json"]).cwd(ws.path()).text().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let list: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(names(&list), ["general-purpose"]);
    let gp = &list[0];
    assert_eq!(gp["max_turns"], 150);
    assert_eq!(gp["timeout_seconds"], 1800.0);
    let text = deerflow(["agents"]).cwd(ws.path()).text().await;
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains("general-purpose"), "{}", text.stdout);
    assert!(
        !text.stdout.lines().any(|l| l.starts_with("bash ")),
        "{}",
        text.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_show_effective_settings() {
    let ws = workspace();
    let cfg = write(
        ws.path(),
        "conf.yaml",
        "subagents:
  timeout_seconds: 600
  agents:
    general-purpose:
      timeout_seconds: 42
  custom_agents:
    reviewer:
      description: Reviews a diff and lists defects
      system_prompt: You review diffs.
      tools: [read_file, grep]
    tuned:
      description: Tuned agent
      system_prompt: You are tuned.
      max_turns: 7
      timeout_seconds: 70
",
    );
    let list = agents_json(&cfg).await;
    assert_eq!(names(&list), ["general-purpose", "reviewer", "tuned"]);
    let gp = by_name(&list, "general-purpose");
    assert_eq!(gp["timeout_seconds"], 42.0, "the per-type override wins");
    assert_eq!(gp["max_turns"], 150);
    let reviewer = by_name(&list, "reviewer");
    assert_eq!(reviewer["max_turns"], 50);
    assert_eq!(
        reviewer["timeout_seconds"], 900.0,
        "custom types do not take the global default"
    );
    assert_eq!(reviewer["description"], "Reviews a diff and lists defects");
    assert_eq!(reviewer["tools"], serde_json::json!(["read_file", "grep"]));
    let tuned = by_name(&list, "tuned");
    assert_eq!(
        (
            tuned["max_turns"].as_u64(),
            tuned["timeout_seconds"].as_f64()
        ),
        (Some(7), Some(70.0))
    );

    let text = deerflow(["-c", cfg.to_str().unwrap(), "agents"])
        .text()
        .await;
    assert_eq!(text.code, 0, "{}", text.stderr);
    let row = |name: &str| {
        text.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row in {}", text.stdout))
            .split_whitespace()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert!(
        row("general-purpose").contains(&"42".to_string()),
        "{}",
        text.stdout
    );
    assert!(
        row("reviewer").contains(&"900".to_string()),
        "{}",
        text.stdout
    );
    assert!(
        row("reviewer").contains(&"50".to_string()),
        "{}",
        text.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_lists_bash_only_with_host_bash() {
    let ws = workspace();
    let off = write(
        ws.path(),
        "off.yaml",
        "sandbox:\n  allow_host_bash: false\n",
    );
    assert_eq!(names(&agents_json(&off).await), ["general-purpose"]);
    let on = write(
        ws.path(),
        "on.yaml",
        "sandbox:\n  allow_host_bash: true\nsubagents:\n  agents:\n    bash: {max_turns: 30}\n",
    );
    let list = agents_json(&on).await;
    assert_eq!(names(&list), ["general-purpose", "bash"]);
    let bash = by_name(&list, "bash");
    assert_eq!(bash["max_turns"], 30);
    assert_eq!(
        bash["tools"],
        serde_json::json!(["ls", "read_file", "write_file", "str_replace", "bash"])
    );
    // Effective tools: general-purpose gets every tool but the lead-only ones.
    let gp = by_name(&list, "general-purpose");
    assert_eq!(
        gp["tools"],
        serde_json::json!([
            "ls",
            "read_file",
            "write_file",
            "str_replace",
            "glob",
            "grep",
            "bash"
        ])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_shows_the_tools_a_custom_type_really_gets() {
    let ws = workspace();
    let cfg = write(
        ws.path(),
        "c.yaml",
        "subagents:\n  custom_agents:\n    r: {description: d, system_prompt: p, tools: [read_file, task, bogus_tool]}\n",
    );
    let list = agents_json(&cfg).await;
    assert_eq!(
        by_name(&list, "r")["tools"],
        serde_json::json!(["read_file"])
    );
}

/// The event type a `oneOf` branch stands for.
fn branch_type(branch: &Value, root: &Value) -> String {
    let resolved = match branch.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.trim_start_matches("#/$defs/");
            root["$defs"][name].clone()
        }
        None => branch.clone(),
    };
    resolved["properties"]["type"]["const"]
        .as_str()
        .unwrap_or_else(|| panic!("branch without a type const: {resolved}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn schema_covers_every_event_type() {
    let out = deerflow(["schema"]).text().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let schema: Value = serde_json::from_str(&out.stdout).expect("schema is JSON");
    let branches = schema["oneOf"].as_array().expect("oneOf");
    let got: BTreeSet<String> = branches.iter().map(|b| branch_type(b, &schema)).collect();
    let want: BTreeSet<String> = [
        "run_started",
        "message",
        "reasoning",
        "tool_call",
        "tool_result",
        "task_queued",
        "task_started",
        "task_running",
        "task_completed",
        "task_failed",
        "task_timed_out",
        "task_cancelled",
        "usage",
        "warning",
        "context_compacted",
        "mcp_server_started",
        "clarification_requested",
        "run_completed",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(got, want);
    assert_eq!(branches.len(), 18);
    // Every branch requires the common fields, itself or through the root's `required`
    // (which applies to every line next to `oneOf`).
    let names = |s: &Value| -> Vec<String> {
        s["required"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    };
    for b in branches {
        let name = branch_type(b, &schema);
        let resolved = match b.get("$ref").and_then(Value::as_str) {
            Some(r) => schema["$defs"][r.trim_start_matches("#/$defs/")].clone(),
            None => b.clone(),
        };
        let required = [names(&schema), names(&resolved)].concat();
        let required: Vec<&str> = required.iter().map(String::as_str).collect();
        for f in ["type", "seq", "ts", "run_id"] {
            assert!(required.contains(&f), "{name} does not require {f}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = deerflow(["completions", shell]).text().await;
        assert_eq!(out.code, 0, "{shell}: {}", out.stderr);
        assert!(out.stdout.contains("deerflow"), "{shell}");
        assert!(
            out.stdout.contains("allow-bash"),
            "{shell} lacks run's flags"
        );
        assert_eq!(out.stderr, "", "{shell}");
    }
    usage_error(&deerflow(["completions", "tcsh"]).text().await);
    usage_error(&deerflow(["completions"]).text().await);
}

#[tokio::test(flavor = "multi_thread")]
async fn man_page_is_roff() {
    let out = deerflow(["man"]).text().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.lines().any(|l| l.starts_with(".TH")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("deerflow"));
}

#[tokio::test(flavor = "multi_thread")]
async fn version_and_help() {
    let v = deerflow(["--version"]).text().await;
    assert_eq!(v.code, 0, "{}", v.stderr);
    assert_eq!(
        v.stdout.trim(),
        format!("deerflow {}", env!("CARGO_PKG_VERSION"))
    );
    let h = deerflow(["run", "--help"]).text().await;
    assert_eq!(h.code, 0, "{}", h.stderr);
    for flag in [
        "--json",
        "--model",
        "--allow-bash",
        "--set",
        "--subagent-timeout",
    ] {
        assert!(h.stdout.contains(flag), "run --help lacks {flag}");
    }
    let top = deerflow(["--help"]).text().await;
    assert_eq!(top.code, 0);
    for cmd in ["run", "agents", "config", "schema", "completions", "man"] {
        assert!(top.stdout.contains(cmd), "--help lacks {cmd}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_errors_are_one_line_exit_2() {
    usage_error(&deerflow(["run", "--no-such-flag", "hi"]).text().await);
    usage_error(&deerflow(["--no-such-flag"]).text().await);
    usage_error(&deerflow(["agents", "--bogus"]).text().await);
    usage_error(&deerflow(["nosuchcommand"]).text().await);
    // A missing subcommand says so and lists the choices (not clap's description line).
    let none = deerflow(Vec::<&str>::new()).text().await;
    usage_error(&none);
    assert!(
        none.stderr.contains("subcommand is required") && none.stderr.contains("agents"),
        "{}",
        none.stderr
    );
    let config = deerflow(["config"]).text().await;
    usage_error(&config);
    assert!(
        config.stderr.contains("subcommand is required")
            && config.stderr.contains("check")
            && config.stderr.contains("show"),
        "{}",
        config.stderr
    );
    usage_error(
        &deerflow(["run", "--max-concurrent", "0", "hi"])
            .text()
            .await,
    );
    usage_error(&deerflow(["run", "--timeout", "soon", "hi"]).text().await);
    usage_error(
        &deerflow(["run", "--json", "--max-tasks", "x", "hi"])
            .text()
            .await,
    );
    // No prompt and stdin at /dev/null (the harness's default) is a usage error.
    let ws = workspace();
    let out = deerflow(["run", "--json", "-m", "replay:x.json"])
        .cwd(ws.path())
        .text()
        .await;
    usage_error(&out);
    let out = deerflow(["run"]).cwd(ws.path()).text().await;
    usage_error(&out);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_man_page_covers_every_command_and_refers_to_no_missing_page() {
    let out = deerflow(["man"]).text().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let page = out.stdout.replace("\\-", "-");
    assert!(
        !page.contains("(1)"),
        "a reference to a page that does not exist"
    );
    for needed in [
        ".SH \"DEERFLOW RUN\"",
        ".SH \"DEERFLOW CONFIG CHECK\"",
        ".SH \"DEERFLOW CONFIG SHOW\"",
        ".SH \"DEERFLOW MCP LIST\"",
        ".SH \"DEERFLOW AGENTS\"",
        "GEMINI_API_KEY",
        "GEMINI_BASE_URL",
        "DOCKER_HOST",
        "TAVILY_API_KEY",
        ".SH EXAMPLES",
    ] {
        assert!(page.contains(needed), "the man page lacks {needed}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bash_completion_offers_providers_and_models_for_dash_m() {
    if std::process::Command::new("bash")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("notice: no bash here; the bash completion test is skipped");
        return;
    }
    let ws = workspace();
    let script = deerflow(["completions", "bash"]).text().await.stdout;
    let script_path = write(ws.path(), "deerflow.bash", &script);
    let cfg = write(
        ws.path(),
        "deerflow.yaml",
        "models:\n  - {name: fast, use: openai, model: x}\n  - {name: deep, use: anthropic, model: y}\n",
    );
    let complete = |words: &str, cword: usize| {
        let probe = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; \
             _deerflow \"${{COMP_WORDS[0]}}\" \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             echo \"${{COMPREPLY[*]}}\"; complete -p deerflow",
            script_path.display()
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &probe])
            .current_dir(ws.path())
            .env("HOME", ws.path())
            .env("XDG_CONFIG_HOME", ws.path().join("none"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let bin = super::harness::BIN;
    let all = complete(&format!("{bin} -c {} run -m ''", cfg.display()), 5);
    let mut lines = all.lines();
    assert_eq!(
        lines.next(),
        Some("openai: anthropic: gemini: replay: fast deep"),
        "{all}"
    );
    let spec = lines.next().unwrap_or_default();
    assert!(
        spec.contains("-o filenames"),
        "directories get no space: {spec}"
    );
    let some = complete(&format!("{bin} run --model an"), 3);
    assert_eq!(some.lines().next(), Some("anthropic:"), "{some}");
}

/// A type whose model takes images gets `view_image` in a run (§14), so `agents` lists it
/// there, and not for a type on a blind model or one that denies it.
#[tokio::test(flavor = "multi_thread")]
async fn agents_list_view_image_for_a_type_whose_model_sees() {
    let ws = workspace();
    let cfg = write(
        ws.path(),
        "conf.yaml",
        "models:
  - name: eyes
    use: langchain_openai:ChatOpenAI
    model: gpt-4o
    api_key: sk-test
    supports_vision: true
  - name: blind
    use: langchain_openai:ChatOpenAI
    model: gpt-4o-mini
    api_key: sk-test
subagents:
  custom_agents:
    looker:
      description: Looks at pictures
      system_prompt: Look.
      model: eyes
    reader:
      description: Reads
      system_prompt: Read.
      model: blind
    squinter:
      description: Sees but may not look
      system_prompt: Do not look.
      model: eyes
      disallowed_tools: [view_image]
",
    );
    let list = agents_json(&cfg).await;
    let tools = |name: &str| -> Vec<String> {
        by_name(&list, name)["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect()
    };
    assert!(
        tools("looker").contains(&"view_image".to_string()),
        "{list:#?}"
    );
    assert!(
        tools("looker").contains(&"read_file".to_string()),
        "{list:#?}"
    );
    assert!(
        !tools("reader").contains(&"view_image".to_string()),
        "{list:#?}"
    );
    assert!(
        !tools("squinter").contains(&"view_image".to_string()),
        "{list:#?}"
    );
}
