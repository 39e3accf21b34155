//! What a run tells its user about its own setup: warnings for settings that do nothing,
//! errors that name what the user typed.

use std::path::Path;

use serde_json::json;

use super::harness::{cassette, deerflow, workspace};

/// A directory holding an executable `bwrap` that is never run (a run without bash does
/// not start it), so `sandbox.use: confined` passes its check on any machine.
fn fake_bwrap(dir: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let b = bin.join("bwrap");
    std::fs::write(&b, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(&b, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn confined_without_allow_bash_warns_once() {
    let ws = workspace();
    let path = fake_bwrap(ws.path());
    let c = cassette(ws.path(), json!({"version": 1, "lead": [{"text": "done"}]}));
    let m = format!("replay:{}", c.display());
    let args = [
        "run",
        "--set",
        "sandbox.use=confined",
        "-m",
        &m,
        "--json",
        "go",
    ];
    let out = deerflow(args)
        .env("PATH", &path)
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let w: Vec<_> = out
        .of_type("warning")
        .into_iter()
        .filter(|w| w["code"] == "sandbox_unused")
        .collect();
    assert_eq!(w.len(), 1, "{:?}", out.events);
    assert!(w[0]["message"].as_str().unwrap().contains("--allow-bash"));

    let human = deerflow(["run", "--set", "sandbox.use=confined", "-m", &m, "go"])
        .env("PATH", &path)
        .cwd(ws.path())
        .output()
        .await;
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert_eq!(
        human.stderr.matches("--allow-bash").count(),
        1,
        "{}",
        human.stderr
    );

    let allowed = deerflow([
        "run",
        "--allow-bash",
        "--set",
        "sandbox.use=confined",
        "-m",
        &m,
        "--json",
        "go",
    ])
    .env("PATH", &path)
    .cwd(ws.path())
    .json()
    .await;
    assert!(
        !allowed.stdout.contains("sandbox_unused"),
        "{}",
        allowed.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_model_is_named_as_typed() {
    // Port 9 (discard) has no listener here: the connection is refused at once.
    let out = deerflow(["run", "-m", "openai:gpt-x", "--json", "go"])
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .json()
        .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let error = out.completed()["error"].as_str().unwrap().to_string();
    assert!(
        error.starts_with("cannot reach openai:gpt-x: http://127.0.0.1:9/"),
        "{error}"
    );
    for w in out
        .of_type("warning")
        .iter()
        .filter(|w| w["code"] == "model_retry")
    {
        assert!(
            w["message"]
                .as_str()
                .unwrap()
                .starts_with("cannot reach openai:gpt-x: "),
            "{w}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_subagent_model_is_refused_by_run_and_config_check_alike() {
    let ws = workspace();
    let c = cassette(ws.path(), json!({"version": 1, "lead": [{"text": "done"}]}));
    for agents in [
        "agents: {general-purpose: {model: \"\"}}",
        "custom_agents: {r: {description: d, system_prompt: p, model: \" \"}}",
    ] {
        let cfg = ws.path().join("deerflow.yaml");
        std::fs::write(
            &cfg,
            format!(
                "models:\n  - {{name: demo, use: replay, cassette: {}}}\nsubagents:\n  {agents}\n",
                c.display()
            ),
        )
        .unwrap();
        let cfg = cfg.to_str().unwrap();
        for args in [
            vec!["-c", cfg, "run", "--json", "go"],
            vec!["-c", cfg, "config", "check"],
        ] {
            let out = deerflow(&args).cwd(ws.path()).output().await;
            assert_eq!(
                out.code, 78,
                "{args:?} {agents}: {}{}",
                out.stdout, out.stderr
            );
            assert_eq!(out.stdout, "", "{args:?}");
            assert!(
                out.stderr
                    .contains(".model: must not be empty: use `inherit`"),
                "{}",
                out.stderr
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn config_check_and_agents_take_set_and_mcp_config_as_run_does() {
    let ws = workspace();
    let cfg = ws.path().join("deerflow.yaml");
    std::fs::write(
        &cfg,
        "models:\n  - {name: a, use: openai, model: x, api_key: k}\n",
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let check = |extra: &[&str]| {
        let mut args = vec!["-c", cfg, "config", "check"];
        args.extend_from_slice(extra);
        deerflow(args).cwd(ws.path()).text()
    };
    assert_eq!(check(&[]).await.code, 0);
    let bad = check(&["--set", "subagents.max_concurrent=0"]).await;
    assert_eq!(bad.code, 78, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("subagents.max_concurrent"),
        "{}",
        bad.stderr
    );
    let missing = check(&["--mcp-config", "nowhere.json"]).await;
    assert_eq!(missing.code, 78, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("nowhere.json"),
        "{}",
        missing.stderr
    );
    std::fs::write(
        ws.path().join("mcp.json"),
        r#"{"mcpServers": {"s": {"command": "true", "env": {"T": "$DF_TEST_UNSET_MCP"}}}}"#,
    )
    .unwrap();
    let unset = check(&["--mcp-config", "mcp.json"]).await;
    assert_eq!(unset.code, 78, "{}", unset.stderr);
    assert!(
        unset.stderr.contains("DF_TEST_UNSET_MCP"),
        "{}",
        unset.stderr
    );

    let typo = check(&["--set", "models.0.temprature=0.5"]).await;
    assert_eq!(typo.code, 0, "{}", typo.stderr);
    assert!(
        typo.stderr
            .contains("models[0].temprature (did you mean `temperature`?)"),
        "{}",
        typo.stderr
    );

    let agents = deerflow([
        "-c",
        cfg,
        "agents",
        "--json",
        "--set",
        "subagents.timeout_seconds=61",
    ])
    .cwd(ws.path())
    .text()
    .await;
    assert_eq!(agents.code, 0, "{}", agents.stderr);
    let list: serde_json::Value = serde_json::from_str(&agents.stdout).unwrap();
    assert_eq!(list[0]["timeout_seconds"], 61.0, "{list}");
    let show = deerflow([
        "-c",
        cfg,
        "config",
        "show",
        "--json",
        "--set",
        "subagents.max_concurrent=5",
    ])
    .cwd(ws.path())
    .text()
    .await;
    let shown: serde_json::Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(shown["subagents"]["max_concurrent"], 5, "{shown}");
}
