//! Configuration through the binary (contract §1 errors, §2): every configuration error is
//! exit 78 with one stderr line and nothing on stdout, the lookup order, layering, and
//! DeerFlow `config.yaml` compatibility.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::harness::{cassette, deerflow, workspace, Output};

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/deerflow/config.example.yaml"
);

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, text).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A cassette answering once with `text`.
fn answer(dir: &Path, text: &str) -> PathBuf {
    cassette(dir, json!({"version": 1, "lead": [{"text": text}]}))
}

/// Exit 78, exactly one stderr line, nothing on stdout; returns that line.
fn config_error(out: &Output) -> String {
    assert_eq!(
        out.code, 78,
        "stdout: {}\nstderr: {}",
        out.stdout, out.stderr
    );
    assert_eq!(out.stdout, "", "stdout must be empty on a config error");
    assert!(out.events.is_empty());
    assert_eq!(
        out.stderr.lines().count(),
        1,
        "exactly one stderr line:\n{}",
        out.stderr
    );
    out.stderr.trim_end().to_string()
}

/// `run --json -c CONFIG hi` in `dir`, expecting a configuration error.
async fn run_config_error(dir: &Path, config: &str, extra: &[&str]) -> String {
    let path = write(dir, "bad.yaml", config);
    let mut args = vec!["run", "--json", "-c", s(&path)];
    args.extend_from_slice(extra);
    args.push("hi");
    config_error(&deerflow(args).cwd(dir).text().await)
}

fn assert_has(line: &str, parts: &[&str]) {
    for p in parts {
        assert!(line.contains(p), "{line:?} lacks {p:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn yaml_syntax_error_names_the_file_and_line() {
    let ws = workspace();
    let line = run_config_error(
        ws.path(),
        "models: []\nsubagents:\n  timeout_seconds: [1, 2\n  max_turns: 3\n",
        &[],
    )
    .await;
    assert_has(&line, &["bad.yaml", "YAML", "line "]);
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_type_names_the_key_path_and_line() {
    let ws = workspace();
    let line = run_config_error(
        ws.path(),
        "# a comment\nsubagents:\n  timeout_seconds: abc\n",
        &["-m", "replay:nowhere.json"],
    )
    .await;
    assert_has(&line, &["subagents.timeout_seconds", "line 3", "bad.yaml"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_config_file_from_flag_or_env() {
    let ws = workspace();
    let c = answer(ws.path(), "ok");
    let m = format!("replay:{}", c.display());
    let flag = deerflow(["run", "--json", "-c", "no-such.yaml", "-m", &m, "hi"])
        .cwd(ws.path())
        .text()
        .await;
    assert_has(
        &config_error(&flag),
        &["no-such.yaml", "check the path given to --config"],
    );
    let env = deerflow(["run", "--json", "-m", &m, "hi"])
        .env("DEERFLOW_CONFIG", "/nonexistent/deerflow-env.yaml")
        .cwd(ws.path())
        .text()
        .await;
    assert_has(
        &config_error(&env),
        &[
            "/nonexistent/deerflow-env.yaml",
            "check the path in DEERFLOW_CONFIG",
        ],
    );
    // Every subcommand that reads the config says the same.
    for cmd in [&["agents"][..], &["config", "show"], &["config", "check"]] {
        let mut args = vec!["-c", "no-such.yaml"];
        args.extend_from_slice(cmd);
        let out = deerflow(args).cwd(ws.path()).text().await;
        assert_has(&config_error(&out), &["no-such.yaml"]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_model_name_and_unknown_provider() {
    let ws = workspace();
    let c = answer(ws.path(), "ok");
    let cfg = format!(
        "models:\n  - name: demo\n    use: replay\n    cassette: {}\n",
        c.display()
    );
    let line = run_config_error(ws.path(), &cfg, &["--model", "nosuch"]).await;
    assert_has(&line, &["nosuch", "demo", "PROVIDER:MODEL"]);
    let line = run_config_error(ws.path(), &cfg, &["--model", "foo:bar"]).await;
    assert_has(&line, &["'foo'", "openai:", "anthropic:", "replay:"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_without_a_key_says_to_set_it() {
    let ws = workspace();
    let out = deerflow(["run", "--json", "--model", "openai:gpt-4o-mini", "hi"])
        .cwd(ws.path())
        .text()
        .await;
    assert_has(&config_error(&out), &["set OPENAI_API_KEY"]);
    let out = deerflow([
        "run",
        "--json",
        "--model",
        "anthropic:claude-sonnet-4-5",
        "hi",
    ])
    .cwd(ws.path())
    .text()
    .await;
    assert_has(&config_error(&out), &["set ANTHROPIC_API_KEY"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn unset_var_of_the_used_model_is_named() {
    let ws = workspace();
    let cfg = "models:\n  - name: gpt\n    use: openai\n    model: gpt-4o-mini\n    api_key: $SOME_UNSET_VAR\n";
    let line = run_config_error(ws.path(), cfg, &[]).await;
    assert_has(&line, &["SOME_UNSET_VAR", "models[0].api_key", "export it"]);
    assert!(!line.contains("gpt-4o-mini-secret"));
}

#[tokio::test(flavor = "multi_thread")]
async fn unset_var_of_an_unused_model_is_only_a_warning() {
    let ws = workspace();
    let c = answer(ws.path(), "fine");
    let cfg = write(
        ws.path(),
        "deerflow.yaml",
        &format!(
            "models:\n  - name: demo\n    use: replay\n    cassette: {}\n  - name: gpt\n    use: openai\n    model: gpt-4o-mini\n    api_key: $SOME_UNSET_VAR\n",
            c.display()
        ),
    );
    let out = deerflow(["run", "--json", "-c", s(&cfg), "hi"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["final_message"], "fine");
    let check = deerflow(["-c", s(&cfg), "config", "check"])
        .cwd(ws.path())
        .text()
        .await;
    assert_eq!(check.code, 0, "{}", check.stderr);
    assert!(
        check
            .stderr
            .lines()
            .any(|l| l.contains("warning") && l.contains("SOME_UNSET_VAR")),
        "{}",
        check.stderr
    );
    let json_check = deerflow(["-c", s(&cfg), "config", "check", "--json"])
        .cwd(ws.path())
        .text()
        .await;
    assert_eq!(json_check.code, 0, "{}", json_check.stderr);
    let v: Value = serde_json::from_str(&json_check.stdout).unwrap();
    assert_eq!(v["ok"], true);
    assert!(v["warnings"].to_string().contains("SOME_UNSET_VAR"), "{v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_model_at_all_says_how_to_choose_one() {
    let ws = workspace();
    let out = deerflow(["run", "--json", "hi"])
        .cwd(ws.path())
        .text()
        .await;
    assert_has(
        &config_error(&out),
        &["--model", "DEERFLOW_MODEL", "models:"],
    );
    // An empty `models:` is the same.
    let line = run_config_error(ws.path(), "models:\n", &[]).await;
    assert_has(&line, &["--model"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_cassette_is_a_config_error() {
    let ws = workspace();
    let out = deerflow(["run", "--json", "-m", "replay:does-not-exist.json", "hi"])
        .cwd(ws.path())
        .text()
        .await;
    assert_has(&config_error(&out), &["does-not-exist.json"]);
    let line = run_config_error(
        ws.path(),
        "models:\n  - {name: demo, use: replay, cassette: gone.json}\n",
        &[],
    )
    .await;
    assert_has(&line, &["gone.json", "demo"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn custom_agent_without_system_prompt() {
    let ws = workspace();
    let c = answer(ws.path(), "ok");
    let cfg = format!(
        "models:\n  - {{name: demo, use: replay, cassette: {}}}\nsubagents:\n  custom_agents:\n    reviewer:\n      description: Reviews things\n",
        c.display()
    );
    let line = run_config_error(ws.path(), &cfg, &[]).await;
    assert_has(&line, &["subagents.custom_agents.reviewer.system_prompt"]);
    let check = deerflow(["-c", s(&ws.path().join("bad.yaml")), "config", "check"])
        .cwd(ws.path())
        .text()
        .await;
    assert_eq!(check.code, 78);
    assert!(check
        .stderr
        .contains("subagents.custom_agents.reviewer.system_prompt"));
}

#[tokio::test(flavor = "multi_thread")]
async fn another_sandbox_provider_is_refused() {
    let ws = workspace();
    let c = answer(ws.path(), "ok");
    let cfg = format!(
        "models:\n  - {{name: demo, use: replay, cassette: {}}}\nsandbox:\n  use: some.other:Provider\n",
        c.display()
    );
    let line = run_config_error(ws.path(), &cfg, &[]).await;
    assert_has(
        &line,
        &["sandbox.use", "some.other:Provider", "local", "line 4"],
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn subagent_model_override_is_checked_before_run_started() {
    let ws = workspace();
    let c = answer(ws.path(), "ok");
    let cfg = format!(
        "models:\n  - {{name: demo, use: replay, cassette: {}}}\nsubagents:\n  agents:\n    general-purpose:\n      model: nosuch\n",
        c.display()
    );
    let line = run_config_error(ws.path(), &cfg, &[]).await;
    assert_has(
        &line,
        &[
            "subagents.agents.general-purpose.model",
            "unknown model 'nosuch'",
            "demo",
        ],
    );
    // A custom type's own model is named by its key too.
    let custom = format!(
        "models:\n  - {{name: demo, use: replay, cassette: {}}}\nsubagents:\n  custom_agents:\n    rev: {{description: d, system_prompt: p, model: gone}}\n",
        c.display()
    );
    let line = run_config_error(ws.path(), &custom, &[]).await;
    assert_has(&line, &["subagents.custom_agents.rev.model", "'gone'"]);
    let check = deerflow(["-c", s(&ws.path().join("bad.yaml")), "config", "check"])
        .cwd(ws.path())
        .text()
        .await;
    assert_eq!(check.code, 78, "{}", check.stderr);
    assert!(
        check.stderr.contains("subagents.custom_agents.rev.model"),
        "{}",
        check.stderr
    );
    // Without sub-agents the override cannot be reached: the run works.
    let out = deerflow([
        "run",
        "--json",
        "--no-subagents",
        "-c",
        s(&ws.path().join("bad.yaml")),
        "hi",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_set_is_a_usage_error() {
    let ws = workspace();
    let c = answer(ws.path(), "ok");
    let m = format!("replay:{}", c.display());
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &m,
        "--set",
        "subagents.timeout_seconds",
        "hi",
    ])
    .cwd(ws.path())
    .text()
    .await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(out.stdout, "");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("KEY=VALUE"), "{}", out.stderr);
}

/// A config whose only model is a replay cassette answering `label`, in `dir/rel`.
fn labelled_config(dir: &Path, rel: &str, label: &str) -> PathBuf {
    let p = dir.join(rel);
    let parent = p.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&parent).unwrap();
    std::fs::write(
        parent.join(format!("{label}.json")),
        json!({"version": 1, "lead": [{"text": label}]}).to_string(),
    )
    .unwrap();
    // The cassette path is relative: to the config file's directory.
    write(
        dir,
        rel,
        &format!("models:\n  - name: {label}\n    use: replay\n    cassette: {label}.json\n"),
    )
}

async fn winner(
    cwd: &Path,
    home: &Path,
    xdg: &Path,
    env_cfg: Option<&Path>,
    flag: Option<&Path>,
) -> String {
    let mut args: Vec<String> = Vec::new();
    if let Some(f) = flag {
        args.extend(["-c".to_string(), s(f).to_string()]);
    }
    args.extend(["config", "show", "--json"].map(String::from));
    let mut run = deerflow(args)
        .cwd(cwd)
        .env("HOME", s(home))
        .env("XDG_CONFIG_HOME", s(xdg));
    if let Some(e) = env_cfg {
        run = run.env("DEERFLOW_CONFIG", s(e));
    }
    let out = run.text().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let by_show = v["models"][0]["name"]
        .as_str()
        .unwrap_or("none")
        .to_string();

    // A run (in a different workspace, to show -C plays no part) answers with the label.
    let mut args: Vec<String> = Vec::new();
    if let Some(f) = flag {
        args.extend(["-c".to_string(), s(f).to_string()]);
    }
    let other = cwd.join("elsewhere");
    args.extend(["run", "--json", "-C", s(&other), "hi"].map(String::from));
    let mut run = deerflow(args)
        .cwd(cwd)
        .env("HOME", s(home))
        .env("XDG_CONFIG_HOME", s(xdg));
    if let Some(e) = env_cfg {
        run = run.env("DEERFLOW_CONFIG", s(e));
    }
    let out = run.json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["final_message"], by_show.as_str());
    by_show
}

#[tokio::test(flavor = "multi_thread")]
async fn lookup_order() {
    let root = workspace();
    let r = root.path();
    let home = r.join("home");
    let xdg = r.join("xdg");
    let cwd = r.join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    // -C points at a directory with its own deerflow.yaml: it is never read.
    labelled_config(&cwd, "elsewhere/deerflow.yaml", "from_workspace");
    let home_cfg = labelled_config(&home, ".config/deerflow/config.yaml", "from_home");
    let xdg_cfg = labelled_config(&xdg, "deerflow/config.yaml", "from_xdg");
    let env_cfg = labelled_config(r, "envdir/env.yaml", "from_env");
    let flag_cfg = labelled_config(r, "flagdir/flag.yaml", "from_flag");

    // Everything present: the flag wins.
    let cwd_cfg = labelled_config(&cwd, "deerflow.yaml", "from_cwd");
    assert_eq!(
        winner(&cwd, &home, &xdg, Some(&env_cfg), Some(&flag_cfg)).await,
        "from_flag"
    );
    assert_eq!(
        winner(&cwd, &home, &xdg, Some(&env_cfg), None).await,
        "from_env"
    );
    assert_eq!(winner(&cwd, &home, &xdg, None, None).await, "from_cwd");
    std::fs::remove_file(&cwd_cfg).unwrap();
    assert_eq!(winner(&cwd, &home, &xdg, None, None).await, "from_xdg");
    std::fs::remove_file(&xdg_cfg).unwrap();
    assert_eq!(winner(&cwd, &home, &xdg, None, None).await, "from_home");
    std::fs::remove_file(&home_cfg).unwrap();
    // No file at all is fine for `config show`.
    let out = deerflow(["config", "show", "--json"])
        .cwd(&cwd)
        .env("HOME", s(&home))
        .env("XDG_CONFIG_HOME", s(&xdg))
        .text()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["models"], json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn relative_cassette_is_relative_to_the_config_file() {
    let root = workspace();
    let cfg = labelled_config(root.path(), "a/b/conf.yaml", "nested");
    let cwd = root.path().join("c");
    std::fs::create_dir_all(&cwd).unwrap();
    let out = deerflow(["run", "--json", "-c", s(&cfg), "hi"])
        .cwd(&cwd)
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["final_message"], "nested");
    // A relative --config is relative to the current directory.
    let out = deerflow(["run", "--json", "-c", "../a/b/conf.yaml", "hi"])
        .cwd(&cwd)
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn set_beats_the_file() {
    let ws = workspace();
    // models.0.model: seen in run_started before the (refused) connection fails the run.
    let cfg = write(
        ws.path(),
        "conf.yaml",
        "models:\n  - name: local\n    use: openai\n    model: from-file\n    base_url: http://127.0.0.1:9/v1\n    max_retries: 0\n",
    );
    let out = deerflow([
        "run",
        "--json",
        "-c",
        s(&cfg),
        "--set",
        "models.0.model=from-set",
        "hi",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.first("run_started")["model"]["model"], "from-set");
    assert_eq!(out.first("run_started")["model"]["name"], "local");
    assert_eq!(out.code, 1, "{}", out.stderr);

    // subagents.timeout_seconds: seen in task_started.
    let c = cassette(
        ws.path(),
        json!({"version": 1,
            "lead": [
                {"tool_calls": [{"id": "t1", "name": "task", "arguments": {"description": "probe", "prompt": "p", "subagent_type": "general-purpose"}}]},
                {"text": "done"}
            ],
            "default_task": [{"text": "sub done"}]}),
    );
    let cfg = write(
        ws.path(),
        "conf2.yaml",
        &format!(
            "models:\n  - {{name: demo, use: replay, cassette: {}}}\nsubagents:\n  timeout_seconds: 120\n",
            c.display()
        ),
    );
    let base = ["run", "--json", "-c", s(&cfg)];
    let file = deerflow(base.iter().copied().chain(["go"]))
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(file.code, 0, "{}", file.stderr);
    assert_eq!(file.first("task_started")["timeout_seconds"], 120.0);
    let set = deerflow(
        base.iter()
            .copied()
            .chain(["--set", "subagents.timeout_seconds=60", "go"]),
    )
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(set.code, 0, "{}", set.stderr);
    assert_eq!(set.first("task_started")["timeout_seconds"], 60.0);
    // The flag beats --set.
    let flag = deerflow(base.iter().copied().chain([
        "--set",
        "subagents.timeout_seconds=60",
        "--subagent-timeout",
        "30s",
        "go",
    ]))
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(flag.first("task_started")["timeout_seconds"], 30.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn deerflow_model_env_picks_and_the_flag_beats_it() {
    let ws = workspace();
    let a = answer(ws.path(), "from a");
    let b = answer(ws.path(), "from b");
    let cfg = write(
        ws.path(),
        "deerflow.yaml",
        &format!(
            "models:\n  - {{name: a, use: replay, cassette: {}}}\n  - {{name: b, use: replay, cassette: {}}}\n",
            a.display(),
            b.display()
        ),
    );
    let _ = cfg;
    let first = deerflow(["run", "--json", "hi"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(first.first("run_started")["model"]["name"], "a");
    let env = deerflow(["run", "--json", "hi"])
        .cwd(ws.path())
        .env("DEERFLOW_MODEL", "b")
        .json()
        .await;
    assert_eq!(env.code, 0, "{}", env.stderr);
    assert_eq!(env.first("run_started")["model"]["name"], "b");
    assert_eq!(env.completed()["final_message"], "from b");
    let flag = deerflow(["run", "--json", "-m", "a", "hi"])
        .cwd(ws.path())
        .env("DEERFLOW_MODEL", "b")
        .json()
        .await;
    assert_eq!(flag.first("run_started")["model"]["name"], "a");
    // An unknown DEERFLOW_MODEL is a config error like an unknown --model.
    let bad = deerflow(["run", "--json", "hi"])
        .cwd(ws.path())
        .env("DEERFLOW_MODEL", "nosuch")
        .text()
        .await;
    assert_has(&config_error(&bad), &["nosuch"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn deerflow_example_config_is_accepted() {
    let ws = workspace();
    let check = deerflow(["-c", EXAMPLE, "config", "check"])
        .cwd(ws.path())
        .text()
        .await;
    assert_eq!(check.code, 0, "{}", check.stderr);
    // Outside a run, the ignored keys are one warning line on stderr, for every command.
    for cmd in [
        &["config", "check"][..],
        &["config", "show"],
        &["agents"],
        &["agents", "--json"],
    ] {
        let mut args = vec!["-c", EXAMPLE];
        args.extend_from_slice(cmd);
        let out = deerflow(args).cwd(ws.path()).text().await;
        assert_eq!(out.code, 0, "{cmd:?}: {}", out.stderr);
        // The example's web tools all have a backend: none is reported unavailable (§14).
        let lines: Vec<_> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{cmd:?}: {}", out.stderr);
        assert!(
            lines[0].contains("warning") && lines[0].contains("memory"),
            "{cmd:?}: {}",
            lines[0]
        );
        assert!(
            !out.stdout.contains("ignored config keys"),
            "{cmd:?}: stdout holds the warning"
        );
    }
    let c = answer(ws.path(), "compatible");
    let m = format!("replay:{}", c.display());
    let out = deerflow(["run", "--json", "-c", EXAMPLE, "--model", &m, "hi"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let ignored: Vec<_> = out
        .of_type("warning")
        .into_iter()
        .filter(|w| w["code"] == "config_ignored")
        .collect();
    assert_eq!(ignored.len(), 1, "{:#?}", out.of_type("warning"));
    let msg = ignored[0]["message"].as_str().unwrap();
    for key in [
        "memory",
        "title",
        "tool_search",
        "summarization.skill_file_read_tool_names",
        "tool_output.preview_head_chars",
    ] {
        assert!(msg.contains(key), "{msg} lacks {key}");
    }
    // The summarization and tool_output sections are read (contract §10), and the tool
    // entries (§14).
    for read in [
        ", summarization,",
        "summarization.trigger",
        ", tool_output,",
        "tools",
        "tool_groups",
    ] {
        assert!(!msg.contains(read), "{msg} names {read}");
    }
    // Used sections' known keys are not reported.
    assert!(!msg.contains("loop_detection.enabled"), "{msg}");
}

#[tokio::test(flavor = "multi_thread")]
async fn config_show_redacts_secrets() {
    let ws = workspace();
    let cfg = write(
        ws.path(),
        "conf.yaml",
        "models:\n  - {name: lit, use: openai, model: m1, api_key: sk-literal-secret-1}\n  - {name: env, use: anthropic, model: m2, api_key: $MY_TEST_KEY}\n",
    );
    for args in [
        vec!["-c", s(&cfg), "config", "show"],
        vec!["-c", s(&cfg), "config", "show", "--json"],
    ] {
        let out = deerflow(args.clone())
            .cwd(ws.path())
            .env("MY_TEST_KEY", "sk-env-secret-2")
            .text()
            .await;
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        for secret in ["sk-literal-secret-1", "sk-env-secret-2"] {
            assert!(!out.stdout.contains(secret), "{args:?} leaks {secret}");
            assert!(!out.stderr.contains(secret), "{args:?} leaks {secret}");
        }
        assert!(out.stdout.contains("***"), "{}", out.stdout);
        assert!(out.stdout.contains("$MY_TEST_KEY"), "{}", out.stdout);
    }
    let out = deerflow(["-c", EXAMPLE, "config", "show", "--json"])
        .cwd(ws.path())
        .env("OPENAI_API_KEY", "sk-example-secret-3")
        .text()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("sk-example-secret-3"));
    let _: Value = serde_json::from_str(&out.stdout).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn float_durations_and_vars_in_ignored_sections() {
    let ws = workspace();
    let c = answer(ws.path(), "ok");
    let cfg = write(
        ws.path(),
        "conf.yaml",
        &format!(
            "models:\n  - {{name: d, use: replay, cassette: {}, timeout: 600.0}}\nsubagents:\n  timeout_seconds: 12.5\n  shiny_new_key: $UNSET_IN_SUBAGENTS\nmemory:\n  storage: $UNSET_IN_MEMORY\n",
            c.display()
        ),
    );
    let out = deerflow(["run", "--json", "-c", s(&cfg), "hi"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let w = out.first("warning");
    assert_eq!(w["code"], "config_ignored");
    let msg = w["message"].as_str().unwrap();
    assert!(
        msg.contains("memory") && msg.contains("subagents.shiny_new_key"),
        "{msg}"
    );
    assert!(!msg.contains("UNSET_IN"), "{msg}");
    let agents = deerflow(["-c", s(&cfg), "agents", "--json"])
        .cwd(ws.path())
        .text()
        .await;
    assert_eq!(agents.code, 0, "{}", agents.stderr);
    let list: Vec<Value> = serde_json::from_str(&agents.stdout).unwrap();
    assert_eq!(list[0]["timeout_seconds"], 12.5);
}

#[tokio::test(flavor = "multi_thread")]
async fn config_check_lists_every_problem_on_one_line() {
    let dir = workspace();
    let cfg = write(
        dir.path(),
        "bad.yaml",
        "subagents: {timeout_seconds: abc}\nsandbox: {use: other:Provider}\n",
    );
    let out = deerflow(["-c", s(&cfg), "config", "check"])
        .cwd(dir.path())
        .text()
        .await;
    let line = config_error(&out);
    assert_has(
        &line,
        &[
            "2 problems",
            "subagents.timeout_seconds",
            "line 1",
            "sandbox.use",
        ],
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_prompt_outranks_a_broken_config() {
    let dir = workspace();
    let cfg = write(dir.path(), "bad.yaml", "models: 5\n");
    let out = deerflow(["-c", s(&cfg), "run", "--json"])
        .cwd(dir.path())
        .text()
        .await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1);
    let empty = deerflow(["-c", s(&cfg), "run", ""])
        .cwd(dir.path())
        .text()
        .await;
    assert_eq!(empty.code, 2, "{}", empty.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_custom_agent_cannot_take_a_built_in_name() {
    let dir = workspace();
    let c = answer(dir.path(), "ok");
    write(
        dir.path(),
        "deerflow.yaml",
        "subagents:\n  custom_agents:\n    bash: {description: d, system_prompt: p}\n    general-purpose: {description: d, system_prompt: p}\n",
    );
    let m = format!("replay:{}", s(&c));
    let out = deerflow(["run", "--json", "-m", &m, "hi"])
        .cwd(dir.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.first("run_started")["subagent_types"],
        json!(["general-purpose"])
    );
    let ignored: Vec<_> = out
        .of_type("warning")
        .into_iter()
        .filter(|w| w["message"].as_str().unwrap().contains("built-in"))
        .collect();
    assert_eq!(ignored.len(), 2, "{:?}", out.of_type("warning"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_duplicate_model_name_is_a_warning_in_the_run_and_bad_skills_dir_a_usage_error() {
    let dir = workspace();
    let c = answer(dir.path(), "ok");
    let cfg = write(
        dir.path(),
        "deerflow.yaml",
        &format!("models:\n  - {{name: m, use: replay, cassette: '{0}'}}\n  - {{name: m, use: replay, cassette: '{0}'}}\n", s(&c)),
    );
    let out = deerflow(["-c", s(&cfg), "run", "--json", "hi"])
        .cwd(dir.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let w = out.of_type("warning");
    assert!(
        w.iter().any(|w| w["code"] == "config_ignored"
            && w["message"]
                .as_str()
                .unwrap()
                .contains("duplicate model name")),
        "{w:?}"
    );
    let bad = deerflow([
        "-c",
        s(&cfg),
        "run",
        "--skills",
        "/nonexistent/skills",
        "hi",
    ])
    .cwd(dir.path())
    .text()
    .await;
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert_eq!(bad.stderr.lines().count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn config_check_json_names_the_file_even_when_it_has_problems() {
    let dir = workspace();
    let cfg = write(
        dir.path(),
        "bad.yaml",
        "subagents: {timeout_seconds: abc}\n",
    );
    let out = deerflow(["-c", s(&cfg), "config", "check", "--json"])
        .cwd(dir.path())
        .text()
        .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["source"], s(&cfg));
    assert_eq!(v["problems"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn custom_agent_tool_names_are_checked_by_every_command_in_the_same_order() {
    let dir = workspace();
    let c = answer(dir.path(), "ok");
    let cfg = write(
        dir.path(),
        "deerflow.yaml",
        &format!(
            "models:\n  - {{name: m, use: replay, cassette: '{0}'}}\n  - {{name: m, use: replay, cassette: '{0}'}}\n  - {{name: u, model: x, api_key: $DF_TOOLS_TEST_UNSET}}\n\
             memory: {{}}\nsubagents:\n  custom_agents:\n    r: {{description: d, system_prompt: p, tools: [read_file, grpe, task], disallowed_tools: [nope]}}\n",
            s(&c)
        ),
    );
    let load = [
        "ignored config keys deerflow does not use: memory".to_string(),
        "models[1]: duplicate model name 'm'; the first entry wins".to_string(),
        "subagents.custom_agents.r.tools: unknown tool 'grpe' (known: ls, read_file, write_file, \
         str_replace, glob, grep, bash, view_image, web_search, web_fetch, image_search)"
            .to_string(),
        "subagents.custom_agents.r.tools: lead-only tools are always removed from sub-agents: task"
            .to_string(),
    ];
    let stderr_lines = |out: &Output| -> Vec<String> {
        out.stderr
            .lines()
            .map(|l| l.trim_start_matches("deerflow: warning: ").to_string())
            .collect()
    };
    for cmd in [&["config", "show"][..], &["agents"], &["agents", "--json"]] {
        let mut args = vec!["-c", s(&cfg)];
        args.extend_from_slice(cmd);
        let out = deerflow(args).cwd(dir.path()).text().await;
        assert_eq!(out.code, 0, "{cmd:?}: {}", out.stderr);
        assert_eq!(stderr_lines(&out), load, "{cmd:?}");
    }
    let out = deerflow(["-c", s(&cfg), "config", "check"])
        .cwd(dir.path())
        .text()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = stderr_lines(&out);
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert_eq!(lines[..4], load);
    assert!(lines[4].contains("DF_TOOLS_TEST_UNSET"), "{}", lines[4]);
    let out = deerflow(["-c", s(&cfg), "config", "check", "--json"])
        .cwd(dir.path())
        .text()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let warnings: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(warnings[..4], load);
    let out = deerflow(["-c", s(&cfg), "run", "--json", "hi"])
        .cwd(dir.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let ignored: Vec<String> = out
        .of_type("warning")
        .into_iter()
        .filter(|w| w["code"] == "config_ignored")
        .map(|w| w["message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ignored, load);
}

/// `extra_body` and the thinking maps may not set a key the client writes itself (the
/// model, the conversation, the tools, streaming, per wire protocol): the request would
/// go to another model, or without the conversation, while events name the configured one.
#[tokio::test(flavor = "multi_thread")]
async fn passthrough_maps_may_not_replace_the_requests_own_keys() {
    let dir = workspace();
    let cases = [
        (
            "use: openai",
            "extra_body: {model: gpt-4o}",
            "models[0].extra_body.model",
        ),
        (
            "use: openai",
            "supports_thinking: true, when_thinking_enabled: {extra_body: {messages: []}}",
            "models[0].when_thinking_enabled.extra_body.messages",
        ),
        (
            "use: openai",
            "when_thinking_disabled: {stream: false}",
            "models[0].when_thinking_disabled.stream",
        ),
        (
            "use: openai, use_responses_api: true",
            "extra_body: {input: x}",
            "models[0].extra_body.input",
        ),
        (
            "use: anthropic",
            "extra_body: {system: x}",
            "models[0].extra_body.system",
        ),
        (
            "use: gemini",
            "extra_body: {contents: []}",
            "models[0].extra_body.contents",
        ),
    ];
    for (provider, extra, key) in cases {
        let text = format!(
            "models:\n  - {{name: m, {provider}, model: x, api_key: k, \
             base_url: 'http://127.0.0.1:9', {extra}}}\n"
        );
        let cfg = write(dir.path(), "c.yaml", &text);
        let check = deerflow(["-c", s(&cfg), "config", "check"])
            .cwd(dir.path())
            .text()
            .await;
        assert_has(&config_error(&check), &[key, "cannot be set here"]);
        let run = deerflow(["-c", s(&cfg), "run", "--json", "hi"])
            .cwd(dir.path())
            .text()
            .await;
        assert_has(&config_error(&run), &[key]);
    }
    // The same key where it replaces nothing of that protocol is passed through.
    let text = "models:\n  - {name: m, use: openai, model: x, api_key: k, \
                base_url: 'http://127.0.0.1:9', extra_body: {system: x, top_k: 5}}\n";
    let cfg = write(dir.path(), "c.yaml", text);
    let check = deerflow(["-c", s(&cfg), "config", "check"])
        .cwd(dir.path())
        .text()
        .await;
    assert_eq!(check.code, 0, "{}", check.stderr);
}
