//! `--each FILE` end to end (contract §15): items as sub-agent tasks, the template, items
//! that fail alone, `--results` in completion then input order, `--shard`, usage errors.

use std::path::Path;

use serde_json::{json, Value};

use super::harness::{cassette, check_stream, deerflow, workspace, Output};
use super::openai_http::config;
use crate::support::{MockServer, Reply, Rule};

fn model_arg(p: &Path) -> String {
    format!("replay:{}", p.display())
}

fn done_cassette(dir: &Path) -> std::path::PathBuf {
    cassette(
        dir,
        json!({"version": 1, "default_task": [{"text": "done", "usage": {"input_tokens": 5, "output_tokens": 1}}]}),
    )
}

fn results(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn indexes(lines: &[Value]) -> Vec<u64> {
    lines.iter().map(|l| l["index"].as_u64().unwrap()).collect()
}

/// Every task event of the run carries `item_index`, matching its `item-<index>` id.
fn assert_item_events(out: &Output) {
    for e in &out.events {
        let t = e["type"].as_str().unwrap();
        if t.starts_with("task_") {
            let id = e["task_id"].as_str().unwrap();
            assert_eq!(id, format!("item-{}", e["item_index"]), "{e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn items_run_as_tasks_without_a_lead_and_results_end_in_input_order() {
    let ws = workspace();
    let c = done_cassette(ws.path());
    std::fs::write(
        ws.path().join("items.txt"),
        "alpha\n\n  \n{\"n\": 1}\r\nthird\n",
    )
    .unwrap();
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &model_arg(&c),
        "--each",
        "items.txt",
        "--results",
        "out.jsonl",
        "--max-concurrent",
        "2",
        "Do {{item}}",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let types = out.types();
    for absent in ["tool_call", "tool_result", "task_queued", "message"] {
        assert!(!types.contains(&absent.to_string()), "{types:?}");
    }
    let started = out.of_type("task_started");
    assert_eq!(started.len(), 3);
    for (i, s) in started.iter().enumerate() {
        assert_eq!(s["task_id"], format!("item-{i}"));
        assert_eq!(s["description"], format!("item {i}"));
        assert_eq!(s["item_index"], i);
        assert_eq!(s["subagent_type"], "general-purpose");
    }
    assert_item_events(&out);
    let done = out.completed();
    assert_eq!(done["status"], "completed");
    assert!(done["final_message"].is_null());
    assert_eq!(done["turns"], 0);
    assert_eq!(done["tasks"]["total"], 3);
    assert_eq!(done["tasks"]["completed"], 3);
    assert_eq!(done["usage"]["lead"]["total_tokens"], 0);
    assert_eq!(done["usage"]["subagents"]["total_tokens"], 18);
    let lines = results(&ws.path().join("out.jsonl"));
    assert_eq!(indexes(&lines), [0, 1, 2]);
    assert_eq!(
        lines[1],
        json!({"index": 1, "status": "completed", "result": "done", "final_output": null,
               "error": null, "usage": {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6},
               "duration_ms": lines[1]["duration_ms"], "resumed": false})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_template_is_rendered_per_item() {
    let server = MockServer::start().await;
    server.push(Rule::any().always().reply(Reply::text("ok")));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    std::fs::write(
        ws.path().join("items.jsonl"),
        "{\"name\": \"ada\", \"tags\": [\"x\"], \"index\": \"own\", \"a\": {\"b\": 2}}\nplain text\r\n",
    )
    .unwrap();
    let run = |template: &str| {
        deerflow([
            "-c",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "--max-concurrent",
            "1",
            "--each",
            "items.jsonl",
            template,
        ])
        .cwd(ws.path())
    };
    let out = run("#{{index}} {{item.name}} {{tags}} {{item.index}} {{a.b}} \\{{x}} {{ .Values }}")
        .json()
        .await;
    // The text item names fields it lacks: it fails, alone.
    assert_eq!(out.code, 3, "{}", out.stderr);
    let failed = out.first("task_failed");
    assert_eq!(failed["item_index"], 1);
    assert_eq!(
        failed["error"],
        "Item 1: the template names field 'name' but the item is text, not a JSON object"
    );
    let prompts: Vec<String> = server
        .requests()
        .iter()
        .map(|r| last_user_text(&r.body))
        .collect();
    assert_eq!(
        prompts,
        [r#"#0 ada ["x"] own 2 {{x}} {{ .Values }}"#.to_string()]
    );

    let before = server.requests().len();
    let out = run("Summarize.").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let prompts: Vec<String> = server.requests()[before..]
        .iter()
        .map(|r| last_user_text(&r.body))
        .collect();
    assert_eq!(
        prompts,
        [
            "Summarize.\n\n{\"name\":\"ada\",\"tags\":[\"x\"],\"index\":\"own\",\"a\":{\"b\":2}}",
            "Summarize.\n\nplain text"
        ]
    );
}

fn last_user_text(body: &Value) -> String {
    let msgs = body["messages"].as_array().unwrap();
    let user = msgs.iter().rev().find(|m| m["role"] == "user").unwrap();
    match &user["content"] {
        Value::String(s) => s.clone(),
        other => other[0]["text"].as_str().unwrap().to_string(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn broken_items_fail_as_their_own_tasks_and_the_run_exits_3() {
    let ws = workspace();
    let c = done_cassette(ws.path());
    let mut input = b"ok\n{not json\n{\"a\": 1}\n".to_vec();
    input.extend(vec![b'x'; 1024 * 1024 + 1]);
    input.extend(b"\n\xff\xfe bytes\nlast\n");
    std::fs::write(ws.path().join("items.txt"), input).unwrap();
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &model_arg(&c),
        "--each",
        "items.txt",
        "--results",
        "r.jsonl",
        "{{item}} {{item.a}}",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert_item_events(&out);
    let errors: Vec<(u64, String)> = out
        .of_type("task_failed")
        .iter()
        .map(|e| {
            (
                e["item_index"].as_u64().unwrap(),
                e["error"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut errors = errors;
    errors.sort();
    assert_eq!(errors.len(), 5, "{errors:?}");
    assert_eq!(
        errors[0],
        (
            0,
            "Item 0: the template names field 'a' but the item is text, not a JSON object".into()
        )
    );
    assert!(
        errors[1].1.starts_with("Item 1: invalid JSON: "),
        "{errors:?}"
    );
    assert_eq!(errors[2].0, 3);
    assert_eq!(
        errors[2].1,
        "Item 3: the item is over 1 MiB (1048577 bytes)"
    );
    assert_eq!(errors[3], (4, "Item 4: the item is not UTF-8".into()));
    assert_eq!(errors[4].0, 5);
    // Each failed item started first, and got exactly one terminal event.
    for (index, _) in &errors {
        let id = format!("item-{index}");
        let of: Vec<&str> = out
            .events
            .iter()
            .filter(|e| e["task_id"] == id.as_str())
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        assert_eq!(of.first(), Some(&"task_started"), "{of:?}");
        assert_eq!(of.last(), Some(&"task_failed"), "{of:?}");
    }
    let done = out.completed();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["tasks"]["completed"], 1);
    assert_eq!(done["tasks"]["failed"], 5);
    let lines = results(&ws.path().join("r.jsonl"));
    assert_eq!(indexes(&lines), [0, 1, 2, 3, 4, 5]);
    assert_eq!(lines[2]["status"], "completed");
    assert_eq!(lines[2]["result"], "done");
    assert_eq!(lines[4]["status"], "failed");
    assert_eq!(lines[4]["error"], "Item 4: the item is not UTF-8");
    assert!(lines[4]["result"].is_null());
}

#[tokio::test(flavor = "multi_thread")]
async fn items_come_from_stdin_and_without_json_stdout_carries_only_the_results() {
    let ws = workspace();
    let c = done_cassette(ws.path());
    let out = deerflow([
        "run",
        "-m",
        &model_arg(&c),
        "--each",
        "-",
        "--results",
        "/dev/stdout",
        "-p",
        "Echo {{item}}",
    ])
    .cwd(ws.path())
    .stdin("one\ntwo\n")
    .output()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut got = indexes(&lines);
    got.sort();
    assert_eq!(got, [0, 1], "{}", out.stdout);
    assert!(lines.iter().all(|l| l["status"] == "completed"));
    assert!(
        out.stderr.contains(" · 2 items (2 completed)") && !out.stderr.contains("turn"),
        "{}",
        out.stderr
    );

    // The prompt cannot come from stdin too.
    let out = deerflow(["run", "-m", &model_arg(&c), "--each", "-"])
        .cwd(ws.path())
        .output()
        .await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("--each - reads the items from stdin"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn each_item_answers_to_the_output_schema() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "tasks": {
            "item 0": [{"text": "{\"n\": 1}"}],
            "item 1": [{"text": "{\"n\": \"x\"}"}, {"text": "nope"}, {"text": "{\"n\": false}"}]
        }}),
    );
    std::fs::write(
        ws.path().join("schema.json"),
        r#"{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}"#,
    )
    .unwrap();
    std::fs::write(ws.path().join("items.txt"), "a\nb\n").unwrap();
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &model_arg(&c),
        "--each",
        "items.txt",
        "--output-schema",
        "schema.json",
        "--results",
        "r.jsonl",
        "Count {{item}}",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.code, 3, "{}", out.stderr);
    let failed = out.first("task_failed");
    assert_eq!(failed["item_index"], 1);
    let error = failed["error"].as_str().unwrap();
    assert!(error.starts_with("Item 1: "), "{error}");
    assert!(!error.contains("retries"), "{error}");
    assert!(error.contains("false"), "{error}");
    assert!(out.completed()["final_output"].is_null());
    let lines = results(&ws.path().join("r.jsonl"));
    assert_eq!(lines[0]["final_output"], json!({"n": 1}));
    assert_eq!(lines[0]["result"], "{\"n\": 1}");
    assert!(lines[1]["final_output"].is_null());
}

#[tokio::test(flavor = "multi_thread")]
async fn results_go_through_a_fifo_in_completion_order_and_a_file_ends_in_input_order() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
            "tasks": {"item 0": [{"text": "slow", "delay_ms": 600}]},
            "default_task": [{"text": "fast"}]}),
    );
    std::fs::write(ws.path().join("items.txt"), "a\nb\nc\n").unwrap();
    let fifo = ws.path().join("pipe");
    let cpath = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(cpath.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let run = |results: &str| {
        deerflow([
            "run",
            "--json",
            "-m",
            &model_arg(&c),
            "--each",
            "items.txt",
            "--max-concurrent",
            "2",
            "--results",
            results,
            "x {{item}}",
        ])
        .cwd(ws.path())
    };
    let out = run("pipe").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let through: Vec<Value> = reader
        .join()
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(indexes(&through), [1, 2, 0]);
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(
        &std::fs::symlink_metadata(&fifo).unwrap().file_type()
    ));

    let out = run("r.jsonl").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let ended: Vec<u64> = out
        .events
        .iter()
        .filter(|e| e["type"] == "task_completed")
        .map(|e| e["item_index"].as_u64().unwrap())
        .collect();
    assert_eq!(ended, [1, 2, 0]);
    let lines = results(&ws.path().join("r.jsonl"));
    assert_eq!(indexes(&lines), [0, 1, 2]);
    assert_eq!(lines[0]["result"], "slow");
}

/// A FIFO's reader gets an item's line as the item ends, not when the run does: lines are
/// written in batches, and a batch never waits for the next item.
#[tokio::test(flavor = "multi_thread")]
async fn a_fifo_reader_gets_a_line_while_the_other_items_still_run() {
    use std::io::BufRead;
    use std::time::{Duration, Instant};
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
            "tasks": {"item 1": [{"text": "slow", "delay_ms": 2500}]},
            "default_task": [{"text": "fast"}]}),
    );
    std::fs::write(ws.path().join("items.txt"), "a\nb\n").unwrap();
    let fifo = ws.path().join("pipe");
    let cpath = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(cpath.as_ptr(), 0o600) }, 0);
    let reader = std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(std::fs::File::open(fifo).unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let at = Instant::now();
        let rest: Vec<String> = lines.map(Result::unwrap).collect();
        (first, at, rest)
    });
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &model_arg(&c),
        "--each",
        "items.txt",
        "--max-concurrent",
        "2",
        "--results",
        "pipe",
        "x {{item}}",
    ])
    .cwd(ws.path())
    .json()
    .await;
    let ended = Instant::now();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (first, at, rest) = reader.join().unwrap();
    let first: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(first["index"], 0);
    assert_eq!(first["result"], "fast");
    assert!(
        ended.duration_since(at) > Duration::from_millis(1500),
        "the first line came {:?} before the run ended",
        ended.duration_since(at)
    );
    assert_eq!(rest.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn shards_cover_the_file_once() {
    let ws = workspace();
    let c = done_cassette(ws.path());
    let items: String = (0..20).map(|i| format!("item {i}\n\n")).collect();
    std::fs::write(ws.path().join("items.txt"), items).unwrap();
    let mut all = Vec::new();
    for k in 1..=3 {
        let r = format!("r{k}.jsonl");
        let out = deerflow([
            "run",
            "--json",
            "-m",
            &model_arg(&c),
            "--each",
            "items.txt",
            "--shard",
            &format!("{k}/3"),
            "--results",
            &r,
            "{{item}}",
        ])
        .cwd(ws.path())
        .json()
        .await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        let mine = indexes(&results(&ws.path().join(&r)));
        assert!(mine.iter().all(|i| i % 3 == k - 1), "{mine:?}");
        assert_eq!(out.completed()["tasks"]["total"], mine.len());
        all.extend(mine);
    }
    all.sort();
    assert_eq!(all, (0..20).collect::<Vec<u64>>());
}

/// `--max-tasks` does not apply to `--each` (§15): more items than it names all run, and
/// `run_started.max_tasks` reports the bound that does apply, the item limit.
#[tokio::test(flavor = "multi_thread")]
async fn max_tasks_and_max_turns_do_not_apply_and_run_started_reports_the_items_limits() {
    let ws = workspace();
    let c = done_cassette(ws.path());
    std::fs::write(ws.path().join("items.txt"), "a\nb\nc\n").unwrap();
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &model_arg(&c),
        "--each",
        "items.txt",
        "--max-tasks",
        "1",
        "--max-turns",
        "7",
        "{{item}}",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.first("run_started")["max_tasks"], 1_000_000);
    // Neither does --max-turns: the items' type's own limit is reported, as each item's
    // task_started says.
    assert_eq!(out.first("run_started")["max_turns"], 150);
    assert_eq!(out.first("task_started")["max_turns"], 150);
    assert_eq!(out.completed()["tasks"]["completed"], 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn past_a_million_items_the_run_stops_reading_and_fails() {
    let ws = workspace();
    let c = done_cassette(ws.path());
    let items = "x\n".repeat(1_000_001);
    std::fs::write(ws.path().join("big.txt"), items).unwrap();
    // One shard in 10000 keeps the run small; the limit counts the file's items.
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &model_arg(&c),
        "--each",
        "big.txt",
        "--shard",
        "1/10000",
        "{{item}}",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let done = out.completed();
    assert_eq!(done["status"], "failed");
    assert!(
        done["error"]
            .as_str()
            .unwrap()
            .contains("more than 1000000 items"),
        "{done}"
    );
    assert_eq!(done["tasks"]["completed"], 100);
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_and_configuration_errors_come_before_any_event() {
    let ws = workspace();
    let c = done_cassette(ws.path());
    std::fs::write(ws.path().join("items.txt"), "a\n").unwrap();
    let m = model_arg(&c);
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["--agent", "bash"], 2, "--agent needs --each FILE"),
        (
            vec!["--results", "r.jsonl"],
            2,
            "--results needs --each FILE",
        ),
        (vec!["--shard", "1/2"], 2, "--shard needs --each FILE"),
        (
            vec!["--each", "items.txt", "--shard", "0/3"],
            2,
            "--shard '0/3' must be K/N",
        ),
        (
            vec!["--each", "items.txt", "--shard", "3"],
            2,
            "must be K/N",
        ),
        (
            vec!["--each", "items.txt", "--shard", "1/10001"],
            2,
            "must be K/N",
        ),
        (
            vec!["--each", "missing.txt"],
            2,
            "cannot read --each missing.txt",
        ),
        (
            vec!["--each", "items.txt", "--results", "/dev/stdout"],
            2,
            "names stdout",
        ),
        (
            vec!["--each", "items.txt", "--agent", "nobody"],
            78,
            "unknown sub-agent type 'nobody'",
        ),
        (
            vec!["--each", "items.txt", "--agent", "bash"],
            78,
            "unknown sub-agent type 'bash'",
        ),
    ];
    for (flags, code, says) in cases {
        let mut args = vec!["run", "--json", "-m", &m];
        args.extend(flags.iter().copied());
        args.push("do {{item}}");
        let out = deerflow(&args).cwd(ws.path()).output().await;
        assert_eq!(out.code, code, "{flags:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{flags:?}: {}", out.stdout);
        assert!(out.stderr.contains(says), "{flags:?}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{flags:?}: {}", out.stderr);
    }
    // A `bash` agent with host bash allowed is a type like any other.
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &m,
        "--allow-bash",
        "--each",
        "items.txt",
        "--agent",
        "bash",
        "x",
    ])
    .cwd(ws.path())
    .output()
    .await;
    check_stream(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.first("task_started")["subagent_type"], "bash");
}

/// `--results` or `--record` naming the `--each` input, by any name, would destroy the items
/// it reads: a usage error, the file untouched.
#[tokio::test(flavor = "multi_thread")]
async fn an_output_naming_the_each_input_is_a_usage_error_and_the_items_stay() {
    let ws = workspace();
    let c = done_cassette(ws.path());
    let m = model_arg(&c);
    std::fs::write(ws.path().join("items.txt"), "a\nb\n").unwrap();
    std::os::unix::fs::symlink("items.txt", ws.path().join("link.txt")).unwrap();
    for (flag, out) in [
        ("--results", "items.txt"),
        ("--results", "link.txt"),
        ("--record", "./items.txt"),
    ] {
        let got = deerflow([
            "run",
            "--json",
            "-m",
            &m,
            "--each",
            "items.txt",
            flag,
            out,
            "x",
        ])
        .cwd(ws.path())
        .output()
        .await;
        assert_eq!(got.code, 2, "{flag} {out}: {}", got.stderr);
        assert!(got.stderr.contains("is the --each input"), "{}", got.stderr);
        assert!(got.stdout.is_empty());
    }
    // Items piped in from the file itself: stdin is that file.
    let mut cmd = deerflow([
        "run",
        "--json",
        "-m",
        &m,
        "--each",
        "-",
        "--results",
        "items.txt",
        "x",
    ])
    .cwd(ws.path())
    .command();
    cmd.stdin(std::fs::File::open(ws.path().join("items.txt")).unwrap());
    let got = cmd.output().await.unwrap();
    assert_eq!(got.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("items.txt")).unwrap(),
        "a\nb\n"
    );
}

/// examples/pipeline-indexed-job.yaml: its container's exact shell command, run for every
/// completion index as Kubernetes would (JOB_COMPLETION_INDEX, the manifest's own N), covers
/// the example's items exactly once, and the shards' results merge in input order.
#[tokio::test(flavor = "multi_thread")]
async fn the_indexed_job_manifest_covers_every_item_once() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let text = std::fs::read_to_string(examples.join("pipeline-indexed-job.yaml")).unwrap();
    let job: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    let completions = job["spec"]["completions"].as_u64().unwrap();
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let command: Vec<String> = container["command"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    assert_eq!(command[..2], ["/bin/sh", "-c"]);
    let env: Vec<(String, String)> = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_string();
            (name, e["value"].as_str().unwrap().to_string())
        })
        .collect();
    assert!(env
        .iter()
        .any(|(k, v)| k == "N" && *v == completions.to_string()));
    // The pod's working directory: the example's inputs and a shared out/.
    let dir = workspace();
    for f in ["tickets.jsonl", "ticket.schema.json", "triage.json"] {
        std::fs::copy(examples.join(f), dir.path().join(f)).unwrap();
    }
    std::fs::create_dir(dir.path().join("out")).unwrap();
    let bin_dir = Path::new(super::harness::BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for index in 0..completions {
        let mut c = tokio::process::Command::new(&command[0]);
        c.args(&command[1..])
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", &path)
            .env("HOME", dir.path())
            .env("JOB_COMPLETION_INDEX", index.to_string());
        for (k, v) in &env {
            c.env(k, v);
        }
        let out = c.output().await.unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "index {index}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let events =
            std::fs::read_to_string(dir.path().join(format!("out/events-{index}.jsonl"))).unwrap();
        assert!(events.lines().last().unwrap().contains("\"run_completed\""));
    }
    let items = std::fs::read_to_string(examples.join("tickets.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    let mut all = Vec::new();
    for index in 0..completions {
        let lines = results(&dir.path().join(format!("out/results-{index}.jsonl")));
        let mine = indexes(&lines);
        assert!(mine.iter().all(|i| i % completions == index), "{mine:?}");
        assert!(lines.iter().all(|l| l["final_output"]["label"] == "bug"));
        all.extend(mine);
    }
    all.sort();
    assert_eq!(all, (0..items).collect::<Vec<u64>>());
}

/// A run stopped by `--timeout`: the items in flight are cancelled and get their result line,
/// items never started get none, and the file still ends in input order.
#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_run_cancels_the_items_in_flight_and_still_rewrites_the_results() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
            "tasks": {"item 1": [{"text": "quick"}]},
            "default_task": [{"text": "slow", "delay_ms": 30000}]}),
    );
    std::fs::write(ws.path().join("items.txt"), "a\nb\nc\nd\ne\n").unwrap();
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &model_arg(&c),
        "--each",
        "items.txt",
        "--max-concurrent",
        "2",
        "--timeout",
        "1s",
        "--results",
        "r.jsonl",
        "x {{item}}",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.code, 124, "{}", out.stderr);
    assert_eq!(out.completed()["status"], "timed_out");
    let lines = results(&ws.path().join("r.jsonl"));
    assert_eq!(indexes(&lines), [0, 1, 2]);
    assert_eq!(lines[1]["status"], "completed");
    for l in [&lines[0], &lines[2]] {
        assert_eq!(l["status"], "cancelled", "{l}");
        assert_eq!(l["error"], "Run timed out after 1 seconds", "{l}");
    }
    assert_eq!(out.completed()["tasks"]["total"], 3);
    assert_eq!(out.completed()["tasks"]["cancelled"], 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_item_that_times_out_makes_the_exit_code_4() {
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1,
            "tasks": {"item 0": [{"text": "slow", "delay_ms": 30000}]},
            "default_task": [{"text": "ok"}]}),
    );
    std::fs::write(ws.path().join("items.txt"), "a\nb\n").unwrap();
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &model_arg(&c),
        "--each",
        "items.txt",
        "--subagent-timeout",
        "1s",
        "x {{item}}",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert_eq!(out.first("task_timed_out")["item_index"], 0);
    assert_eq!(out.completed()["status"], "completed");
}

/// A results file that cannot be written (a full disk: /dev/full) stops reading items and
/// fails the run, naming the file once.
#[tokio::test(flavor = "multi_thread")]
async fn a_results_write_error_fails_the_run() {
    let ws = workspace();
    let c = done_cassette(ws.path());
    std::fs::write(ws.path().join("items.txt"), "a\n".repeat(50)).unwrap();
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &model_arg(&c),
        "--each",
        "items.txt",
        "--results",
        "/dev/full",
        "x {{item}}",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let done = out.completed();
    assert_eq!(done["status"], "failed");
    let error = done["error"].as_str().unwrap();
    assert_eq!(
        error
            .matches("cannot write the results to /dev/full")
            .count(),
        1,
        "{error}"
    );
}
