//! Every model example in DeerFlow's `config.example.yaml` (issue 9, item 7), taken from the
//! fixture itself: each commented-out entry under `models:` is uncommented where it stands
//! (the rest of the file as it is), its key variable set to a dummy and its base URL pointed
//! at a mock speaking the entry's protocol. Then `config check` passes and a run makes one
//! `ls` round trip. A new example deerflow cannot run fails here; one it deliberately does
//! not serve belongs in [`UNRUNNABLE`] with the reason, and must be a clear config error.

use std::sync::Arc;

use serde_json::{json, Value};
use serde_yaml_ng::Value as Yaml;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::harness::{deerflow, workspace};
use crate::support::{MockServer, Reply};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/deerflow/config.example.yaml"
);

/// Model examples deerflow does not serve, with the reason: (name, why). Empty today: every
/// example in the fixture runs.
const UNRUNNABLE: &[(&str, &str)] = &[];

/// The fixture held this many model examples when this test was written; fewer found means
/// the extraction broke, not that the fixture shrank.
const AT_LEAST: usize = 26;

const KEY: &str = "sk-dummy-EXAMPLE-key";

/// A file the `ls` round trip must find.
const MARKER: &str = "marker-in-workspace.txt";

/// Keys DeerFlow (LangChain) entries give a base URL under.
const BASE_KEYS: &[&str] = &["base_url", "api_base", "openai_api_base"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Chat,
    Responses,
    Anthropic,
    Gemini,
}

impl Protocol {
    /// How a DeerFlow `use:` class is served (contract §2): Anthropic's classes speak
    /// Messages, Google's GenAI class Gemini's native API, the rest the OpenAI API, through
    /// `/responses` when the entry asks for it.
    fn of(entry: &Yaml) -> Self {
        let use_ = str_of(entry, "use");
        if use_.contains("Anthropic") {
            Protocol::Anthropic
        } else if use_.contains("GoogleGenerativeAI") {
            Protocol::Gemini
        } else if entry.get("use_responses_api").and_then(Yaml::as_bool) == Some(true)
            || str_of(entry, "output_version") == "responses/v1"
        {
            Protocol::Responses
        } else {
            Protocol::Chat
        }
    }

    /// The provider `run_started` names.
    fn provider(self) -> &'static str {
        match self {
            Protocol::Chat | Protocol::Responses => "openai",
            Protocol::Anthropic => "anthropic",
            Protocol::Gemini => "gemini",
        }
    }

    /// The header the key travels in, and its value.
    fn key_header(self) -> (&'static str, String) {
        match self {
            Protocol::Chat | Protocol::Responses => ("authorization", format!("Bearer {KEY}")),
            Protocol::Anthropic => ("x-api-key", KEY.to_string()),
            Protocol::Gemini => ("x-goog-api-key", KEY.to_string()),
        }
    }

    /// One `ls` call, then `answer`, in this protocol's stream format.
    fn script(self, answer: &str) -> [Reply; 2] {
        let args = json!({"path": "."});
        match self {
            Protocol::Chat | Protocol::Responses => [
                Reply::tool_calls(vec![("call_ls_1", "ls", args)]).usage(40, 6),
                Reply::text(answer).usage(60, 8),
            ],
            Protocol::Anthropic => [
                Reply::anthropic_tool_uses(vec![("toolu_ls_1", "ls", args)]).usage(40, 6),
                Reply::anthropic_text(answer).usage(60, 8),
            ],
            Protocol::Gemini => [
                Reply::gemini_calls(vec![("", "ls", args)]).usage(40, 6),
                Reply::gemini_text(answer).usage(60, 8),
            ],
        }
    }
}

fn str_of<'a>(entry: &'a Yaml, key: &str) -> &'a str {
    entry.get(key).and_then(Yaml::as_str).unwrap_or_default()
}

/// One commented-out entry under `models:`.
#[derive(Clone, Debug)]
struct Example {
    /// Its `- name:` line's index in the fixture's lines.
    start: usize,
    /// Its lines as the fixture has them (`  # - name: …`, `  #   use: …`).
    commented: Vec<String>,
    /// The uncommented entry, parsed.
    entry: Yaml,
}

impl Example {
    fn name(&self) -> &str {
        str_of(&self.entry, "name")
    }

    fn model(&self) -> &str {
        str_of(&self.entry, "model")
    }

    /// The name and the fixture line: DeerFlow's example repeats some names (MiniMax's
    /// international and China entries).
    fn label(&self) -> String {
        format!("{} (line {})", self.name(), self.start + 1)
    }

    /// What thinking (on by default with `supports_thinking`) adds to each request body:
    /// `when_thinking_enabled`, its `extra_body` at the top level (contract §10).
    fn thinking_body(&self) -> serde_json::Map<String, Value> {
        let mut body = serde_json::Map::new();
        if self.entry.get("supports_thinking").and_then(Yaml::as_bool) != Some(true) {
            return body;
        }
        let enabled = self.entry.get("when_thinking_enabled").cloned();
        let enabled: Value = serde_json::to_value(enabled).unwrap();
        for (k, v) in enabled.as_object().into_iter().flatten() {
            match (k.as_str(), v.as_object()) {
                ("extra_body", Some(inner)) => body.extend(inner.clone()),
                _ => {
                    body.insert(k.clone(), v.clone());
                }
            }
        }
        body
    }

    fn protocol(&self) -> Protocol {
        Protocol::of(&self.entry)
    }

    /// The variable of its `api_key: $VAR` (or `gemini_api_key: $VAR`), if it names one.
    fn key_var(&self) -> Option<String> {
        self.entry.as_mapping()?.iter().find_map(|(k, v)| {
            let key = k.as_str()?;
            let var = v.as_str()?.strip_prefix('$')?;
            key.ends_with("api_key").then(|| var.to_string())
        })
    }

    /// The base URL it names, under whichever key.
    fn base_url(&self) -> Option<&str> {
        BASE_KEYS
            .iter()
            .find_map(|k| self.entry.get(*k).and_then(Yaml::as_str))
    }
}

/// Strips the `# ` that comments out an entry line at the `models:` list's indent.
fn uncomment(line: &str) -> String {
    let rest = line
        .strip_prefix("  # ")
        .unwrap_or_else(|| panic!("not an entry line: {line:?}"));
    format!("  {rest}")
}

/// The model examples of a DeerFlow config text: under `models:` (up to the next top-level
/// key), each `  # - name:` line with the `  #   key: …` lines after it.
fn examples(text: &str) -> Vec<Example> {
    let lines: Vec<&str> = text.lines().collect();
    let models = lines
        .iter()
        .position(|l| l.trim_end() == "models:")
        .expect("the fixture has a models: section");
    let end = lines[models + 1..]
        .iter()
        .position(|l| l.starts_with(|c: char| c != ' ' && c != '#'))
        .map_or(lines.len(), |i| models + 1 + i);
    let mut found = Vec::new();
    let mut i = models + 1;
    while i < end {
        if !lines[i].starts_with("  # - name:") {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        while i < end && lines[i].starts_with("  #   ") {
            i += 1;
        }
        let commented: Vec<String> = lines[start..i].iter().map(|l| l.to_string()).collect();
        let yaml: String = commented.iter().map(|l| uncomment(l) + "\n").collect();
        let list: Vec<Yaml> = serde_yaml_ng::from_str(&yaml)
            .unwrap_or_else(|e| panic!("entry at line {} is no YAML: {e}\n{yaml}", start + 1));
        assert_eq!(list.len(), 1, "{yaml}");
        found.push(Example {
            start,
            commented,
            entry: list.into_iter().next().unwrap(),
        });
    }
    let names = lines[models..end]
        .iter()
        .filter(|l| l.starts_with("  # - name:"))
        .count();
    assert_eq!(found.len(), names, "every `- name:` under models: is read");
    found
}

/// `scheme://host[:port]/path` → `/path` (without a trailing `/`).
fn url_path(url: &str) -> String {
    let after = url.split_once("://").map_or(url, |(_, rest)| rest);
    match after.find('/') {
        Some(i) => after[i..].trim_end_matches('/').to_string(),
        None => String::new(),
    }
}

/// What one example needs to run against a mock at `root` (`http://127.0.0.1:PORT`).
struct Setup {
    /// The whole fixture with this one entry uncommented, its base URL on the mock.
    config: String,
    env: Vec<(String, String)>,
    /// The path (and query) the mock must see for this entry's protocol.
    path: String,
}

fn setup(text: &str, ex: &Example, root: &str) -> Setup {
    let protocol = ex.protocol();
    let mut env = Vec::new();
    if let Some(var) = ex.key_var() {
        env.push((var, KEY.to_string()));
    }
    let mut entry: Vec<String> = ex.commented.iter().map(|l| uncomment(l)).collect();
    // The base path as the user wrote it (the mock answers any prefix), or the provider's.
    let base_path = match ex.base_url() {
        Some(url) => {
            let path = url_path(url);
            for line in entry.iter_mut() {
                let key = line.trim_start().split(':').next().unwrap_or_default();
                if BASE_KEYS.contains(&key) {
                    let indent = &line[..line.len() - line.trim_start().len()];
                    *line = format!("{indent}{key}: {root}{path}");
                }
            }
            path
        }
        None => {
            let (var, path) = match protocol {
                // langchain_deepseek's own variable; its default is DeepSeek's API.
                _ if str_of(&ex.entry, "use").contains("DeepSeek") => ("DEEPSEEK_API_BASE", "/v1"),
                Protocol::Chat | Protocol::Responses => ("OPENAI_BASE_URL", "/v1"),
                Protocol::Anthropic => ("ANTHROPIC_BASE_URL", ""),
                Protocol::Gemini => ("GEMINI_BASE_URL", ""),
            };
            env.push((var.to_string(), format!("{root}{path}")));
            path.to_string()
        }
    };
    let ollama = str_of(&ex.entry, "use").ends_with(":ChatOllama");
    let path = match protocol {
        // Ollama's native base is the server root; its OpenAI API is under /v1.
        Protocol::Chat if ollama && !base_path.ends_with("/v1") => {
            format!("{base_path}/v1/chat/completions")
        }
        Protocol::Chat => format!("{base_path}/chat/completions"),
        Protocol::Responses => format!("{base_path}/responses"),
        Protocol::Anthropic => format!("{}/v1/messages", base_path.trim_end_matches("/v1")),
        Protocol::Gemini => format!(
            "{}/v1beta/models/{}:streamGenerateContent?alt=sse",
            base_path
                .trim_end_matches("/v1beta")
                .trim_end_matches("/v1"),
            ex.model()
        ),
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut config: Vec<String> = lines[..ex.start].iter().map(|l| l.to_string()).collect();
    config.extend(entry);
    config.extend(
        lines[ex.start + ex.commented.len()..]
            .iter()
            .map(|l| l.to_string()),
    );
    Setup {
        config: config.join("\n") + "\n",
        env,
        path,
    }
}

/// Checks one example end to end against [`UNRUNNABLE`]-shaped `unrunnable`; panics with
/// what went wrong.
async fn check_example(text: Arc<String>, ex: Example, unrunnable: &'static [(&str, &str)]) {
    let name = ex.label();
    let server = MockServer::start().await;
    let root = format!("http://{}", server.addr());
    let s = setup(&text, &ex, &root);
    let dir = workspace();
    let cfg = dir.path().join("config.yaml");
    std::fs::write(&cfg, &s.config).unwrap();
    let cfg = cfg.to_str().unwrap();
    let ws = workspace();
    std::fs::write(ws.path().join(MARKER), "x\n").unwrap();
    let with_env = |mut run: super::harness::Run| {
        for (k, v) in &s.env {
            run = run.env(k, v);
        }
        run.cwd(dir.path())
    };

    let check = with_env(deerflow(["-c", cfg, "config", "check"]))
        .text()
        .await;
    let run_args = [
        "-c",
        cfg,
        "run",
        "--json",
        "-m",
        ex.name(),
        "-C",
        ws.path().to_str().unwrap(),
        "List the workspace.",
    ];
    if let Some((_, why)) = unrunnable.iter().find(|(n, _)| *n == ex.name()) {
        // The only model is the default one, so `config check` reports it as an error.
        assert_eq!(check.code, 78, "{name} ({why}): {}", check.stderr);
        assert!(
            check.stderr.contains("not supported"),
            "{name}: {}",
            check.stderr
        );
        let out = with_env(deerflow(run_args)).text().await;
        assert_eq!(out.code, 78, "{name} ({why}): {}", out.stderr);
        assert_eq!(out.stdout, "", "{name}");
        assert_eq!(out.stderr.lines().count(), 1, "{name}: {}", out.stderr);
        assert!(
            out.stderr.contains("not supported") && out.stderr.contains(ex.name()),
            "{name}: {}",
            out.stderr
        );
        assert_eq!(server.request_count(), 0, "{name}");
        return;
    }
    assert_eq!(
        check.code, 0,
        "{name}: config check\n{}{}",
        check.stdout, check.stderr
    );

    let protocol = ex.protocol();
    let answer = format!("The workspace holds {MARKER} ({}).", ex.name());
    for reply in protocol.script(&answer) {
        server.push_reply(reply);
    }
    let out = with_env(deerflow(run_args)).json().await;
    assert_eq!(
        out.code,
        0,
        "{name}: {}{}",
        out.stderr,
        out.stdout.lines().last().unwrap_or_default()
    );
    let started = &out.first("run_started")["model"];
    assert_eq!(
        (&started["name"], &started["provider"], &started["model"]),
        (
            &json!(ex.name()),
            &json!(protocol.provider()),
            &json!(ex.model())
        ),
        "{name}"
    );
    let call = out.first("tool_call");
    assert_eq!(call["name"], "ls", "{name}");
    let result = out.first("tool_result");
    assert_eq!(
        (&result["name"], &result["status"]),
        (&json!("ls"), &json!("ok")),
        "{name}: {result}"
    );
    assert_eq!(result["call_id"], call["call_id"], "{name}");
    assert!(
        result["output"].as_str().unwrap().contains(MARKER),
        "{name}: {result}"
    );
    let messages: Vec<&Value> = out.of_type("message");
    assert_eq!(
        messages.last().map(|m| &m["text"]),
        Some(&json!(answer)),
        "{name}"
    );
    let done = out.completed();
    assert_eq!(
        (&done["status"], &done["final_message"]),
        (&json!("completed"), &json!(answer)),
        "{name}"
    );
    assert!(
        !out.stdout.contains(KEY) && !out.stderr.contains(KEY),
        "{name}"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{name}: {requests:#?}");
    assert_eq!(server.unmatched_count(), 0, "{name}");
    let (header, value) = protocol.key_header();
    let thinking = ex.thinking_body();
    for r in &requests {
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("POST", s.path.as_str()),
            "{name}"
        );
        if protocol != Protocol::Gemini {
            assert_eq!(r.body["model"], ex.model(), "{name}");
        }
        if ex.key_var().is_some() {
            assert_eq!(r.header(header), Some(value.as_str()), "{name}");
        }
        for (k, v) in &thinking {
            assert_eq!(&r.body[k], v, "{name}: thinking key {k}");
        }
    }
    // The second call carries the tool's output back.
    assert!(
        requests[1].raw_body.contains(MARKER),
        "{name}: {}",
        requests[1].raw_body
    );
}

/// Runs every example, a few at a time, and reports each one that failed by name.
async fn check_all(text: String, found: Vec<Example>, unrunnable: &'static [(&str, &str)]) {
    let text = Arc::new(text);
    let slots = Arc::new(Semaphore::new(6));
    let mut set = JoinSet::new();
    for ex in found {
        let (text, slots) = (text.clone(), slots.clone());
        let name = ex.label();
        set.spawn(async move {
            let _slot = slots.acquire_owned().await.unwrap();
            let outcome = tokio::spawn(check_example(text, ex, unrunnable)).await;
            (name, outcome)
        });
    }
    let mut failures = Vec::new();
    while let Some(joined) = set.join_next().await {
        let (name, outcome) = joined.unwrap();
        if let Err(e) = outcome {
            let panic = e.into_panic();
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(format!("{name}: {why}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn every_model_example_in_deerflows_config_runs() {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    let found = examples(&text);
    assert!(
        found.len() >= AT_LEAST,
        "found {} model examples: {:?}",
        found.len(),
        found.iter().map(Example::name).collect::<Vec<_>>()
    );
    for (name, _) in UNRUNNABLE {
        assert!(
            found.iter().any(|e| e.name() == *name),
            "{name} is no longer an example"
        );
    }
    assert!(found.iter().any(|e| !e.thinking_body().is_empty()));
    let protocols: Vec<Protocol> = found.iter().map(Example::protocol).collect();
    for p in [
        Protocol::Chat,
        Protocol::Responses,
        Protocol::Anthropic,
        Protocol::Gemini,
    ] {
        assert!(protocols.contains(&p), "no example speaks {p:?}");
    }
    check_all(text, found, UNRUNNABLE).await;
}

/// The table's other branch: an example deerflow does not serve (Vertex AI, inserted into
/// the fixture's text here) is found like the others and is a one-line config error.
#[tokio::test(flavor = "multi_thread")]
async fn an_example_deerflow_does_not_serve_is_a_config_error() {
    let fixture = std::fs::read_to_string(FIXTURE).unwrap();
    let text = fixture.replacen(
        "\nmodels:\n",
        "\nmodels:\n  # - name: vertex-gemini\n  #   use: langchain_google_vertexai:ChatVertexAI\n  #   model: gemini-2.5-pro\n  #   api_key: $VERTEX_KEY\n\n",
        1,
    );
    let found = examples(&text);
    assert_eq!(found.len(), examples(&fixture).len() + 1);
    let vertex = found[0].clone();
    assert_eq!(
        (vertex.name(), vertex.key_var().as_deref()),
        ("vertex-gemini", Some("VERTEX_KEY"))
    );
    check_all(
        text,
        vec![vertex],
        &[("vertex-gemini", "deerflow has no client for Vertex AI")],
    )
    .await;
}

/// The extraction itself: entries end at the first line that is not theirs, and the
/// uncommented text is the entry with its indentation.
#[test]
fn examples_are_read_from_the_commented_lines() {
    let text = "a: 1\nmodels:\n  # Example: x\n  # - name: one\n  #   use: openai\n  #   model: m1\n  #   base_url: https://h.example/api/v3   # note\n  #\n  #   base_url: http://stray\n\n  # - name: two\n  #   use: langchain_anthropic:ChatAnthropic\n  #   model: c\n  #   api_key: $K\n  #   supports_thinking: true\n  #   when_thinking_enabled:\n  #     thinking: {type: enabled}\n  #     extra_body:\n  #       top_k: 5\ntools:\n  # - name: web_search\n";
    let found = examples(text);
    assert_eq!(
        found.iter().map(Example::name).collect::<Vec<_>>(),
        ["one", "two"]
    );
    assert_eq!(found[0].base_url(), Some("https://h.example/api/v3"));
    assert_eq!(found[0].key_var(), None);
    assert_eq!(found[1].key_var().as_deref(), Some("K"));
    assert_eq!(found[1].protocol(), Protocol::Anthropic);
    assert!(found[0].thinking_body().is_empty());
    assert_eq!(
        Value::Object(found[1].thinking_body()),
        json!({"thinking": {"type": "enabled"}, "top_k": 5})
    );
    let s = setup(text, &found[0], "http://127.0.0.1:9");
    assert!(
        s.config
            .contains("models:\n  # Example: x\n  - name: one\n    use: openai\n    model: m1\n    base_url: http://127.0.0.1:9/api/v3\n  #\n"),
        "{}",
        s.config
    );
    assert_eq!(s.path, "/api/v3/chat/completions");
    assert!(s.env.is_empty());
    let s = setup(text, &found[1], "http://127.0.0.1:9");
    assert_eq!(s.path, "/v1/messages");
    assert_eq!(
        s.env,
        [
            ("K".to_string(), KEY.to_string()),
            (
                "ANTHROPIC_BASE_URL".to_string(),
                "http://127.0.0.1:9".to_string()
            )
        ]
    );
}
