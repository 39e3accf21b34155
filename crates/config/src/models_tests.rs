use std::fs;

use super::*;
use crate::{load_with, parse_set, LoadOptions};

const SECRET: &str = "sk-test-secret-value";

/// A config in a temp dir (kept alive by the returned guard).
fn loaded(text: &str, env: &Env) -> (tempfile::TempDir, LoadedConfig) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    fs::write(&file, text).unwrap();
    let opts = LoadOptions {
        explicit: Some(file),
        sets: Vec::new(),
        cwd: dir.path().to_path_buf(),
        providers: crate::testing::providers(),
        mcp_configs: Vec::new(),
        model: None,
    };
    let l = load_with(&opts, env).unwrap();
    (dir, l)
}

fn no_config() -> LoadedConfig {
    let dir = std::env::temp_dir();
    let opts = LoadOptions {
        explicit: None,
        sets: Vec::new(),
        cwd: dir.join("deerflow-no-such-dir"),
        providers: crate::testing::providers(),
        mcp_configs: Vec::new(),
        model: None,
    };
    load_with(&opts, &Env::empty()).unwrap()
}

fn err(r: Result<ResolvedModel, ConfigError>) -> ConfigError {
    r.expect_err("expected an error")
}

#[test]
fn choice_order() {
    let (_d, l) = loaded(
        "models: [{name: first, model: m}, {name: second, model: m}]",
        &Env::empty(),
    );
    let env = Env::from_pairs([("DEERFLOW_MODEL", "second")]);
    assert_eq!(
        model_choice_with(Some("openai:x"), &l.config, &env).unwrap(),
        "openai:x"
    );
    assert_eq!(model_choice_with(None, &l.config, &env).unwrap(), "second");
    assert_eq!(
        model_choice_with(None, &l.config, &Env::empty()).unwrap(),
        "first"
    );
    let e = model_choice_with(None, &Config::default(), &Env::empty()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "config error: no model configured: pass --model PROVIDER:MODEL (e.g. --model openai:gpt-4o-mini or \
         --model replay:cassette.json), set DEERFLOW_MODEL, or add a models: entry to the config"
    );
}

#[test]
fn provider_specs_read_the_environment() {
    let l = no_config();
    let env = Env::from_pairs([("OPENAI_API_KEY", SECRET), ("ANTHROPIC_API_KEY", "ak")]);
    let m = resolve_model_with(&l, "openai:gpt-4o-mini", Path::new("/"), &env).unwrap();
    assert_eq!(
        (m.name.as_str(), m.provider(), m.model.as_str()),
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini")
    );
    let http = m.http.unwrap();
    assert_eq!(http.base_url, "https://api.openai.com/v1");
    assert_eq!(http.api_key.as_deref(), Some(SECRET));
    assert_eq!(http.request_timeout, Duration::from_secs(600));
    let m = resolve_model_with(&l, "anthropic:claude-sonnet-4-5", Path::new("/"), &env).unwrap();
    assert_eq!(m.provider(), "anthropic");
    assert_eq!(m.http.unwrap().base_url, "https://api.anthropic.com");

    let e = err(resolve_model_with(
        &l,
        "openai:gpt-4o",
        Path::new("/"),
        &Env::empty(),
    ));
    assert!(matches!(e, ConfigError::MissingSecret(_)));
    assert!(e.to_string().contains("set OPENAI_API_KEY"), "{e}");
    // A local server needs no key.
    let env = Env::from_pairs([("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1/")]);
    let m = resolve_model_with(&l, "openai:qwen", Path::new("/"), &env).unwrap();
    let http = m.http.unwrap();
    assert_eq!(http.base_url, "http://127.0.0.1:8080/v1");
    assert_eq!(http.api_key, None);
}

#[test]
fn a_key_variable_with_control_characters_is_named() {
    let env = Env::from_pairs([("ANTHROPIC_API_KEY", "ak\nx")]);
    let e = err(resolve_model_with(
        &no_config(),
        "anthropic:c",
        Path::new("/"),
        &env,
    ));
    assert!(
        e.to_string()
            .contains("$ANTHROPIC_API_KEY contains control characters"),
        "{e}"
    );
}

#[test]
fn configured_entries() {
    let text = "models:\n\
      - {name: gpt, use: langchain_openai:ChatOpenAI, model: gpt-4o, api_key: $DF_T_KEY, request_timeout: 30.5, max_retries: 1, max_tokens: 100, temperature: 0.2, price: {input_per_mtok: 1, output_per_mtok: 2}}\n\
      - {name: claude, use: langchain_anthropic:ChatAnthropic, model: c, base_url: 'https://proxy.example/v1'}\n\
      - {name: local, use: langchain_ollama:ChatOllama, model: 'qwen3:32b', base_url: 'http://localhost:11434'}\n\
      - {name: bare-ollama, use: langchain_ollama:ChatOllama, model: llama3}\n\
      - {name: 'openai:shadow', use: replay, cassette: c.json}\n";
    let env = Env::from_pairs([("DF_T_KEY", SECRET), ("ANTHROPIC_API_KEY", "ak")]);
    let (dir, l) = loaded(text, &env);
    fs::write(dir.path().join("c.json"), "{}").unwrap();
    let cwd = Path::new("/");
    let gpt = resolve_model_with(&l, "gpt", cwd, &env).unwrap();
    assert_eq!(
        (gpt.name.as_str(), gpt.provider(), gpt.model.as_str()),
        ("gpt", "openai", "gpt-4o")
    );
    assert_eq!(gpt.price.as_ref().map(|p| p.output_per_mtok), Some(2.0));
    let http = gpt.http.unwrap();
    assert_eq!(http.api_key.as_deref(), Some(SECRET));
    assert_eq!(http.request_timeout, Duration::from_secs_f64(30.5));
    assert_eq!(
        (http.max_retries, http.max_tokens, http.temperature),
        (1, Some(100), Some(0.2))
    );
    assert_eq!(http.stream_idle_timeout, Duration::from_secs(120));

    let claude = resolve_model_with(&l, "claude", cwd, &env)
        .unwrap()
        .http
        .unwrap();
    assert_eq!(claude.base_url, "https://proxy.example");
    assert_eq!(claude.api_key.as_deref(), Some("ak"));
    let local = resolve_model_with(&l, "local", cwd, &env).unwrap();
    assert_eq!(local.provider(), "openai");
    assert_eq!(
        local.http.as_ref().unwrap().base_url,
        "http://localhost:11434/v1"
    );
    assert_eq!(local.model, "qwen3:32b");
    let bare = resolve_model_with(&l, "bare-ollama", cwd, &env)
        .unwrap()
        .http
        .unwrap();
    assert_eq!(bare.base_url, "http://localhost:11434/v1");
    // A configured name wins over the PROVIDER:MODEL reading.
    let shadow = resolve_model_with(&l, "openai:shadow", cwd, &env).unwrap();
    assert_eq!(shadow.provider(), "replay");
    assert_eq!(shadow.cassette, Some(dir.path().join("c.json")));
    assert_eq!(shadow.model, "c.json");
}

/// DeepSeek's classes without a base URL go to DeepSeek (langchain_deepseek's variables),
/// never to OpenAI's URL with OpenAI's key; with one, the entry's own is used.
#[test]
fn deepseek_classes_default_to_deepseeks_api() {
    let text = "models:\n\
      - {name: ds, use: deerflow.models.patched_deepseek:PatchedChatDeepSeek, model: deepseek-v4-pro}\n\
      - {name: lc, use: langchain_deepseek:ChatDeepSeek, model: deepseek-chat, api_key: $DF_T_DS}\n\
      - {name: ark, use: deerflow.models.patched_deepseek:PatchedChatDeepSeek, model: glm, api_base: 'https://ark.example/api/v3', api_key: $DF_T_DS}\n";
    let openai = [
        ("OPENAI_API_KEY", "sk-openai"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:1/v1"),
        ("DF_T_DS", SECRET),
    ];
    let (_d, l) = loaded(text, &Env::from_pairs(openai));
    let http = |name: &str, env: &Env| {
        resolve_model_with(&l, name, Path::new("/"), env).map(|m| m.http.unwrap())
    };
    let env = Env::from_pairs(
        openai
            .iter()
            .copied()
            .chain([("DEEPSEEK_API_KEY", "sk-ds")]),
    );
    let ds = http("ds", &env).unwrap();
    assert_eq!(
        (ds.base_url.as_str(), ds.api_key.as_deref()),
        ("https://api.deepseek.com/v1", Some("sk-ds"))
    );
    let lc = http("lc", &env).unwrap();
    assert_eq!(
        (lc.base_url.as_str(), lc.api_key.as_deref()),
        ("https://api.deepseek.com/v1", Some(SECRET))
    );
    let ark = http("ark", &env).unwrap();
    assert_eq!(ark.base_url, "https://ark.example/api/v3");
    let moved = Env::from_pairs([
        ("DEEPSEEK_API_BASE", "http://127.0.0.1:2/v1/"),
        ("DF_T_DS", SECRET),
    ]);
    assert_eq!(
        http("lc", &moved).unwrap().base_url,
        "http://127.0.0.1:2/v1"
    );
    // DeepSeek's API without DeepSeek's key: the error names its variable, not OpenAI's.
    let e = err(resolve_model_with(
        &l,
        "ds",
        Path::new("/"),
        &Env::from_pairs(openai),
    ));
    assert!(matches!(e, ConfigError::MissingSecret(_)), "{e}");
    assert_eq!(
        e.to_string(),
        "config error: models[0] ('ds') needs an API key: set api_key in the config or DEEPSEEK_API_KEY"
    );
    // A local DeepSeek-compatible server needs none.
    let local = Env::from_pairs([("DEEPSEEK_API_BASE", "http://127.0.0.1:2/v1")]);
    assert_eq!(http("ds", &local).unwrap().api_key, None);
}

#[test]
fn unset_var_names_key_and_var_but_not_secrets() {
    let text = "models:\n - {name: a, model: m, api_key: literal-secret}\n - {name: b, model: m, api_key: $DF_T_UNSET_KEY}\n";
    let (_d, l) = loaded(text, &Env::empty());
    let e = err(resolve_model_with(&l, "b", Path::new("/"), &Env::empty()));
    assert!(matches!(e, ConfigError::MissingSecret(_)));
    assert_eq!(
        e.to_string(),
        "config error: models[1].api_key: environment variable DF_T_UNSET_KEY is not set; \
         export it, or change models[1].api_key in the config"
    );
    assert!(resolve_model_with(&l, "a", Path::new("/"), &Env::empty()).is_ok());
}

#[test]
fn missing_key_for_hosted_api() {
    let (_d, l) = loaded("models: [{name: a, use: openai, model: m}]", &Env::empty());
    let e = err(resolve_model_with(&l, "a", Path::new("/"), &Env::empty()));
    assert_eq!(
        e.to_string(),
        "config error: models[0] ('a') needs an API key: set api_key in the config or OPENAI_API_KEY"
    );
    let (_d2, blank) = loaded("models: [{name: a, model: m, api_key: ''}]", &Env::empty());
    let e = err(resolve_model_with(
        &blank,
        "a",
        Path::new("/"),
        &Env::empty(),
    ));
    assert!(matches!(e, ConfigError::MissingSecret(_)), "{e}");
    let env = Env::from_pairs([("OPENAI_API_KEY", SECRET)]);
    let m = resolve_model_with(&l, "a", Path::new("/"), &env).unwrap();
    assert_eq!(m.http.unwrap().api_key.as_deref(), Some(SECRET));
}

#[test]
fn unknown_names_and_providers() {
    let (_d, l) = loaded(
        "models: [{name: a, model: m}, {name: b, model: m}]",
        &Env::empty(),
    );
    let e = err(resolve_model_with(
        &l,
        "gpt5",
        Path::new("/"),
        &Env::empty(),
    ))
    .to_string();
    assert!(e.contains("unknown model 'gpt5'"), "{e}");
    assert!(e.contains("openai:gpt-4o-mini"), "{e}");
    assert!(e.ends_with("or a configured model: a, b"), "{e}");
    let e = err(resolve_model_with(
        &l,
        "gemini:pro",
        Path::new("/"),
        &Env::empty(),
    ))
    .to_string();
    assert!(e.contains("unknown model provider 'gemini'"), "{e}");
    let e = err(resolve_model_with(
        &no_config(),
        "x",
        Path::new("/"),
        &Env::empty(),
    ))
    .to_string();
    assert!(e.contains("(no models are configured)"), "{e}");
}

#[test]
fn unsupported_class_fails_only_when_used() {
    let text = "models:\n - {name: ok, model: m, base_url: 'http://localhost:1/v1'}\n - {name: gem, use: langchain_google_genai:ChatGoogleGenerativeAI, model: gemini-2.5-pro}\n";
    let (_d, l) = loaded(text, &Env::empty());
    assert!(resolve_model_with(&l, "ok", Path::new("/"), &Env::empty()).is_ok());
    let e = err(resolve_model_with(&l, "gem", Path::new("/"), &Env::empty())).to_string();
    assert!(e.contains("models[1] ('gem'): use: langchain_google_genai:ChatGoogleGenerativeAI is not supported"), "{e}");
}

#[test]
fn replay_cassettes() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("run.json"), "{}").unwrap();
    let l = no_config();
    let m = resolve_model_with(&l, "replay:run.json", dir.path(), &Env::empty()).unwrap();
    assert_eq!(
        (m.name.as_str(), m.provider(), m.model.as_str()),
        ("replay:run.json", "replay", "run.json")
    );
    assert_eq!(m.cassette, Some(dir.path().join("run.json")));
    assert!(m.http.is_none());
    let e = err(resolve_model_with(
        &l,
        "replay:missing.json",
        dir.path(),
        &Env::empty(),
    ))
    .to_string();
    assert!(
        e.contains("cannot read cassette") && e.contains("missing.json"),
        "{e}"
    );

    let (_d, l) = loaded(
        "models: [{name: r, use: replay}, {name: s, use: replay, cassette: nope.json}]",
        &Env::empty(),
    );
    let e = err(resolve_model_with(&l, "r", dir.path(), &Env::empty())).to_string();
    assert!(
        e.contains("models[0].cassette: required for use: replay"),
        "{e}"
    );
    let e = err(resolve_model_with(&l, "s", dir.path(), &Env::empty())).to_string();
    assert!(e.contains("cannot read cassette"), "{e}");
}

#[test]
fn set_can_pick_the_model_entry_fields() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    fs::write(
        &file,
        "models: [{name: a, model: m, base_url: 'http://x/v1'}]",
    )
    .unwrap();
    let sets = vec![parse_set("models.0.model=other").unwrap()];
    let opts = LoadOptions {
        explicit: Some(file),
        sets,
        cwd: dir.path().to_path_buf(),
        providers: crate::testing::providers(),
        mcp_configs: Vec::new(),
        model: None,
    };
    let l = load_with(&opts, &Env::empty()).unwrap();
    assert_eq!(
        resolve_model_with(&l, "a", Path::new("/"), &Env::empty())
            .unwrap()
            .model,
        "other"
    );
}

/// The model entry of DeerFlow's example config that starts with `- name: NAME`,
/// uncommented.
fn deerflow_example_entry(name: &str) -> String {
    let text = include_str!("../../../tests/fixtures/deerflow/config.example.yaml");
    let start = format!("  # - name: {name}\n");
    let at = text.find(&start).expect("the example has the entry");
    text[at..]
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(|l| format!("  {}\n", l.trim_start().trim_start_matches("# ")))
        .collect()
}

#[test]
fn deerflow_thinking_keys_are_read_and_resolved() {
    let text = format!(
        "models:\n{}{}",
        deerflow_example_entry("doubao-seed-1.8"),
        deerflow_example_entry("claude-sonnet-4")
    );
    let env = Env::from_pairs([("VOLCENGINE_API_KEY", "k"), ("ANTHROPIC_API_KEY", "k")]);
    let (dir, l) = loaded(&text, &env);
    for read in [
        "supports_thinking",
        "supports_vision",
        "when_thinking_enabled",
        "when_thinking_disabled",
    ] {
        assert!(
            !l.ignored.iter().any(|k| k.ends_with(read)),
            "{read}: {:?}",
            l.ignored
        );
    }
    let seeing = |name: &str| {
        resolve_model_with(&l, name, dir.path(), &env)
            .unwrap()
            .supports_vision
    };
    assert!(seeing("doubao-seed-1.8"));
    let http = |name: &str| {
        resolve_model_with(&l, name, dir.path(), &env)
            .unwrap()
            .http
            .unwrap()
    };
    let doubao = http("doubao-seed-1.8");
    assert!(doubao.thinking.supported && doubao.thinking.is_on());
    assert_eq!(
        serde_json::Value::Object(doubao.thinking.active().clone()),
        serde_json::json!({"extra_body": {"thinking": {"type": "enabled"}}})
    );
    let mut claude = http("claude-sonnet-4");
    assert_eq!(
        serde_json::Value::Object(claude.thinking.active().clone()),
        serde_json::json!({"thinking": {"type": "enabled", "budget_tokens": 4096}})
    );
    claude.thinking.requested = Some(false);
    assert_eq!(
        serde_json::Value::Object(claude.thinking.active().clone()),
        serde_json::json!({"thinking": {"type": "disabled"}})
    );
}

#[test]
fn reasoning_effort_and_extra_body_are_carried() {
    let (dir, l) = loaded(
        "models: [{name: o, model: o3, base_url: 'http://127.0.0.1:1/v1', reasoning_effort: low, extra_body: {top_k: 5}}, {name: p, model: m, base_url: 'http://127.0.0.1:1/v1', reasoning_effort: ''}]",
        &Env::empty(),
    );
    assert!(l.ignored.is_empty(), "{:?}", l.ignored);
    let o = resolve_model_with(&l, "o", dir.path(), &Env::empty())
        .unwrap()
        .http
        .unwrap();
    assert_eq!(o.reasoning_effort.as_deref(), Some("low"));
    assert_eq!(o.extra_body["top_k"], serde_json::json!(5));
    assert!(!o.thinking.supported && !o.thinking.is_on());
    let p = resolve_model_with(&l, "p", dir.path(), &Env::empty())
        .unwrap()
        .http
        .unwrap();
    assert_eq!(p.reasoning_effort, None);
}

#[test]
fn anthropic_models_get_the_row_output_limit_and_prompt_cache() {
    let (dir, l) = loaded(
        "models:\n\
         - {name: a, use: anthropic, model: claude-x, base_url: 'http://127.0.0.1:1'}\n\
         - {name: b, use: anthropic, model: claude-x, base_url: 'http://127.0.0.1:1', max_tokens: 900, prompt_cache: false}\n\
         - {name: o, model: gpt-x, base_url: 'http://127.0.0.1:1/v1'}\n",
        &Env::empty(),
    );
    assert!(l.ignored.is_empty(), "{:?}", l.ignored);
    let http = |name: &str| {
        resolve_model_with(&l, name, dir.path(), &Env::empty())
            .unwrap()
            .http
            .unwrap()
    };
    let (a, b, o) = (http("a"), http("b"), http("o"));
    assert_eq!((a.max_tokens, a.prompt_cache), (Some(32_000), true));
    assert_eq!((b.max_tokens, b.prompt_cache), (Some(900), false));
    // A provider without a required output limit leaves it to the server.
    assert_eq!(o.max_tokens, None);
    let env = Env::from_pairs([("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")]);
    let spec = resolve_model_with(&l, "anthropic:claude-y", dir.path(), &env).unwrap();
    assert_eq!(spec.http.unwrap().max_tokens, Some(32_000));
}

#[test]
fn a_thinking_budget_must_be_below_the_output_limit_it_is_sent_with() {
    let entry = |extra: &str| {
        format!(
            "models:\n  - name: c\n    use: anthropic\n    model: claude-x\n    \
             base_url: 'http://127.0.0.1:1'\n{extra}"
        )
    };
    let resolve = |text: &str| {
        let (dir, l) = loaded(text, &Env::empty());
        resolve_model_with(&l, "c", dir.path(), &Env::empty()).map(|_| ())
    };
    // The family default (32000 for this row) is the limit when max_tokens is unset.
    let enabled = |budget: u64| {
        entry(&format!(
            "    supports_thinking: true\n    when_thinking_enabled: {{thinking: {{type: enabled, budget_tokens: {budget}}}}}\n"
        ))
    };
    assert_eq!(resolve(&enabled(31_999)), Ok(()));
    let e = resolve(&enabled(32_000)).unwrap_err().to_string();
    assert_eq!(
        e,
        "config error: models[0].when_thinking_enabled.thinking.budget_tokens: 32000 must be \
         less than max_tokens (32000, the default output limit for claude-x; set max_tokens to \
         raise it): the thinking budget is part of the output limit"
    );
    // LangChain's spelling inside the thinking map, and the model's own extra_body.
    let nested = entry(
        "    max_tokens: 2000\n    supports_thinking: true\n    when_thinking_enabled: {extra_body: {thinking: {type: enabled, budget_tokens: 2048}}}\n",
    );
    let e = resolve(&nested).unwrap_err().to_string();
    assert!(
        e.contains("models[0].when_thinking_enabled.extra_body.thinking.budget_tokens: 2048 must be less than max_tokens (2000)"),
        "{e}"
    );
    let body = entry("    extra_body: {thinking: {type: enabled, budget_tokens: 40000}}\n");
    let e = resolve(&body).unwrap_err().to_string();
    assert!(
        e.contains("models[0].extra_body.thinking.budget_tokens: 40000"),
        "{e}"
    );
    // A thinking map the model never sends (no supports_thinking) is not checked.
    let unused =
        entry("    when_thinking_enabled: {thinking: {type: enabled, budget_tokens: 99999}}\n");
    assert_eq!(resolve(&unused), Ok(()));
}

#[test]
fn the_responses_api_is_chosen_by_use_responses_api_or_deerflows_output_version() {
    let entries = [
        ("{name: a, model: gpt-5, use_responses_api: true}", true),
        (
            "{name: a, model: gpt-5, output_version: responses/v1}",
            true,
        ),
        ("{name: a, model: gpt-5, output_version: v1}", false),
        // An explicit `false` wins, as in LangChain.
        (
            "{name: a, model: gpt-5, use_responses_api: false, output_version: responses/v1}",
            false,
        ),
        ("{name: a, model: gpt-5}", false),
    ];
    let env = Env::from_pairs([("OPENAI_API_KEY", "k")]);
    for (entry, on) in entries {
        let (dir, l) = loaded(&format!("models: [{entry}]"), &env);
        assert!(l.ignored.is_empty(), "{entry}: {:?}", l.ignored);
        let http = resolve_model_with(&l, "a", dir.path(), &env)
            .unwrap()
            .http
            .unwrap();
        assert_eq!(http.use_responses_api, on, "{entry}");
    }
    // DeerFlow's own example entry reads as it is.
    let text = format!("models:\n{}", deerflow_example_entry("gpt-5-responses"));
    let (dir, l) = loaded(&text, &env);
    assert!(
        !l.ignored
            .iter()
            .any(|k| k.ends_with("use_responses_api") || k.ends_with("output_version")),
        "{:?}",
        l.ignored
    );
    let r = resolve_model_with(&l, "gpt-5-responses", dir.path(), &env).unwrap();
    assert_eq!(r.provider(), "openai");
    assert!(r.http.unwrap().use_responses_api);
}
