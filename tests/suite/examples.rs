//! The files in examples/ work as the README says.

use std::path::PathBuf;

use super::harness::deerflow;

fn example(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
        .display()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_fan_out_runs_offline() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = deerflow([
        "run",
        "--model",
        "replay:examples/hello.json",
        "--json",
        "Describe this repository",
    ])
    .cwd(&repo)
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.completed()["tasks"]["completed"], 2);
    assert_eq!(out.completed()["usage"]["total_tokens"], 6008);
    assert!(out.completed()["final_message"]
        .as_str()
        .unwrap()
        .starts_with("The workspace holds"));
    // Both sub-agents' tools found what they looked for in this repository.
    let tool_errors: Vec<_> = out
        .of_type("task_running")
        .into_iter()
        .filter(|e| e["message"]["status"] == "error")
        .collect();
    assert!(tool_errors.is_empty(), "{tool_errors:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_failure_example_exits_3_with_a_failure_and_a_timeout() {
    let m = format!("replay:{}", example("fanout-failure.json"));
    let out = deerflow([
        "run",
        "--json",
        "--subagent-timeout",
        "1s",
        "-m",
        &m,
        "check",
    ])
    .json()
    .await;
    assert_eq!(out.code, 3, "{}", out.stderr);
    let t = &out.completed()["tasks"];
    assert_eq!(
        (
            t["completed"].as_u64(),
            t["failed"].as_u64(),
            t["timed_out"].as_u64()
        ),
        (Some(1), Some(1), Some(1))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_example_config_checks_and_runs() {
    let cfg = example("config.yaml");
    let check = deerflow(["-c", &cfg, "config", "check"]).output().await;
    assert_eq!(check.code, 0, "{}", check.stderr);
    let ws = super::harness::workspace();
    std::fs::write(ws.path().join("README.md"), "# a readme\n").unwrap();
    let out = deerflow(["-c", &cfg, "run", "--json", "go"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.first("run_started")["model"]["name"], "demo");
    assert_eq!(
        out.first("run_started")["subagent_types"],
        serde_json::json!(["general-purpose", "reviewer"])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_structured_answer_runs_offline_and_pipes_into_jq() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let args = [
        "run",
        "--output-schema",
        "examples/verdict.schema.json",
        "-m",
        "replay:examples/review.json",
        "--no-subagents",
        "Review README.md",
    ];
    let plain = deerflow(args).cwd(&repo).output().await;
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let answer: serde_json::Value = serde_json::from_str(&plain.stdout).expect("stdout is JSON");
    assert_eq!(answer["verdict"], "pass");
    assert_eq!(answer["findings"], serde_json::json!([]));
    let out = deerflow(args.iter().copied().chain(["--json"]))
        .cwd(&repo)
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The README read worked, and the prose answer was sent back once.
    assert_eq!(out.first("tool_result")["status"], "ok");
    let retries: Vec<_> = out
        .of_type("warning")
        .into_iter()
        .filter(|w| w["code"] == "schema_retry")
        .collect();
    assert_eq!(retries.len(), 1);
    assert_eq!(out.completed()["final_output"], answer);
}

#[test]
fn the_pipeline_example_exits_with_deerflows_code() {
    // A CI step copied from pipeline.sh must go red when the run did not succeed.
    let out = std::process::Command::new("bash")
        .arg(example("pipeline.sh"))
        .arg(super::harness::BIN)
        .env_remove("DEERFLOW_CONFIG")
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("exit code: 3"), "{stdout}");
    assert!(stdout.contains("a sub-agent failed:"), "{stdout}");
    assert_eq!(out.status.code(), Some(3), "{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn off_a_terminal_the_human_view_names_each_task_that_did_not_complete() {
    let m = format!("replay:{}", example("fanout-failure.json"));
    let out = deerflow(["run", "--subagent-timeout", "2s", "-m", &m, "check"])
        .output()
        .await;
    assert_eq!(out.code, 3, "{}", out.stderr);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert!(
        lines.contains(
            &"deerflow: task broken [general-purpose] flaky provider · failed: replay returned HTTP 503: upstream overloaded · 0.0s"
        ),
        "{}",
        out.stderr
    );
    assert!(
        lines.contains(
            &"deerflow: task slow [general-purpose] slow job · Execution timed out after 2 seconds · 2.0s"
        ),
        "{}",
        out.stderr
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("deerflow: task "))
            .count(),
        2,
        "the completed task has no line: {}",
        out.stderr
    );
}
