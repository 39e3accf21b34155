use std::fs;
use std::path::Path;

use super::*;
use crate::{parse_set, ContextSize, Env, LoopDetectionConfig, SizeKind};

const DEERFLOW_EXAMPLE: &str = include_str!("../../../tests/fixtures/deerflow/config.example.yaml");

fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(&path, text).unwrap();
    path
}

fn opts(dir: &Path, explicit: Option<PathBuf>, sets: &[&str]) -> LoadOptions {
    LoadOptions {
        explicit,
        sets: sets.iter().map(|s| parse_set(s).unwrap()).collect(),
        cwd: dir.to_path_buf(),
        providers: crate::testing::providers(),
        mcp_configs: Vec::new(),
        model: None,
    }
}

fn load_text(text: &str, sets: &[&str], env: &Env) -> Result<LoadedConfig, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "config.yaml", text);
    load_with(&opts(dir.path(), Some(file), sets), env)
}

fn err_text(r: Result<LoadedConfig, ConfigError>) -> String {
    r.expect_err("expected a config error").to_string()
}

#[test]
fn deerflow_example_loads_as_it_is() {
    let loaded = load_text(DEERFLOW_EXAMPLE, &[], &Env::empty()).unwrap();
    let cfg = &loaded.config;
    assert!(cfg.models.is_empty());
    assert_eq!(cfg.sandbox.use_, "local");
    assert!(!cfg.sandbox.allow_host_bash);
    assert!(!cfg.token_budget.enabled);
    assert_eq!(cfg.token_budget.max_tokens, 200_000);
    assert_eq!(cfg.loop_detection, LoopDetectionConfig::default());
    for key in [
        "config_version",
        "log_level",
        "memory",
        "title",
        "database",
        "summarization.skill_file_read_tool_names",
        "tool_output.preview_head_chars",
        "skills.container_path",
        "token_budget.max_input_tokens",
        "token_budget.warn_threshold",
        "loop_detection.max_tracked_threads",
    ] {
        assert!(
            loaded.ignored.iter().any(|k| k == key),
            "{key} not in {:?}",
            loaded.ignored
        );
    }
    // DeerFlow's tool entries are read (contract §14), none of their keys is ignored.
    assert!(
        !loaded
            .ignored
            .iter()
            .any(|k| k.starts_with("tools") || k.starts_with("tool_groups")),
        "{:?}",
        loaded.ignored
    );
    let names: Vec<&str> = cfg.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(&names[..3], ["web_search", "web_fetch", "image_search"]);
    assert_eq!(cfg.tools[3].name, "ls");
    assert_eq!(cfg.tool_groups.len(), 5);
    assert!(!loaded.ignored.iter().any(|k| k == "sandbox"
        || k == "models"
        || k == "summarization"
        || k == "tool_output"
        || k.starts_with("safety_finish_reason")
        || k.starts_with("summarization.trigger")
        || k.starts_with("summarization.keep")
        || k == "tool_output.exempt_tools"));
    // DeerFlow's summarization and tool_output sections are read as they are.
    let s = &cfg.summarization;
    assert!(s.enabled);
    assert_eq!(s.model_name, None);
    assert_eq!(
        s.trigger.0,
        [ContextSize {
            kind: SizeKind::Tokens,
            value: 32000.0
        }]
    );
    assert_eq!(
        s.keep,
        ContextSize {
            kind: SizeKind::Messages,
            value: 10.0
        }
    );
    assert_eq!(s.trim_tokens_to_summarize, 15564);
    assert_eq!(s.summary_prompt, None);
    let t = &cfg.tool_output;
    assert!(t.enabled);
    assert_eq!(t.externalize_min_chars, 12000);
    assert_eq!(t.exempt_tools, ["read_file", "read_file_tool"]);
    let warning = loaded.ignored_warning().unwrap();
    assert!(
        warning.starts_with("ignored config keys deerflow does not use: config_version, log_level")
    );
    assert!(!warning.contains('\n'));
    // The example has no skills.path: the default sits beside the file.
    assert_eq!(loaded.skills_dir(), loaded.base_dir.join("skills"));
}

#[test]
fn vars_in_ignored_sections_are_never_read() {
    let text = "memory: {api_key: $DF_TEST_NEVER_SET_1}\nchannels: {x: $DF_TEST_NEVER_SET_2}\n";
    let loaded = load_text(text, &[], &Env::from_pairs([("HOME", "/nonexistent")])).unwrap();
    assert_eq!(loaded.ignored, ["memory", "channels"]);
}

#[test]
fn vars_in_ignored_keys_are_never_read_even_beside_broken_keys() {
    // A type error, a missing required key and an unset variable in used keys do not hide
    // the ignored keys after them: their variables are still never read.
    let text = "subagents:\n  max_concurrent: $DF_TEST_UNSET_N\n  shiny: $DF_TEST_UNSET_S\n  custom_agents:\n    r: {tools: [ls], color: $DF_TEST_UNSET_C}\n\
                models:\n  - {name: a, timeout: abc, display_name: $DF_TEST_UNSET_M}\nmemory: {key: $DF_TEST_UNSET_K}\n";
    let problems = load_text(text, &[], &Env::empty())
        .expect_err("broken config")
        .problems();
    let joined = problems.join("\n");
    let want = [
        "subagents.max_concurrent: environment variable DF_TEST_UNSET_N is not set",
        "models[0].timeout: expected a number",
        "subagents.max_concurrent: expected a non-negative integer",
        "subagents.custom_agents.r.description: required key is missing",
    ];
    assert_eq!(problems.len(), want.len(), "{joined}");
    for (p, w) in problems.iter().zip(want) {
        assert!(p.starts_with(w), "{joined}");
    }
    for name in ["_S", "_C", "_M", "_K"] {
        assert!(
            !joined.contains(&format!("DF_TEST_UNSET{name}")),
            "{joined}"
        );
    }
}

#[test]
fn vars_in_used_sections_are_expanded() {
    let env = Env::from_pairs([("DF_SKILLS", "/opt/skills"), ("DF_N", "7")]);
    let loaded = load_text(
        "skills: {path: $DF_SKILLS}\nsubagents: {max_concurrent: $DF_N}\n",
        &[],
        &env,
    )
    .unwrap();
    assert_eq!(loaded.skills_dir(), PathBuf::from("/opt/skills"));
    assert_eq!(loaded.config.subagents.max_concurrent, 7);
    let e = err_text(load_text("skills: {path: $DF_UNSET}\n", &[], &env));
    assert!(
        e.contains("skills.path: environment variable DF_UNSET is not set (line 1 of "),
        "{e}"
    );
}

#[test]
fn half_written_references_are_errors_wherever_they_are_read() {
    let env = Env::from_pairs([("HOME", "/h")]);
    for (yaml, key) in [
        ("skills: {path: \"${HOME}/skills\"}\n", "skills.path"),
        (
            "models: [{name: a, use: \"${USE}\", model: m}]\n",
            "models[0].use",
        ),
        (
            "models: [{name: \"$N-1\", use: openai, model: m}]\n",
            "models[0].name",
        ),
        (
            "subagents: {custom_agents: {r: {description: \"$\", system_prompt: s}}}\n",
            "subagents.custom_agents.r.description",
        ),
    ] {
        let e = err_text(load_text(yaml, &[], &env));
        assert!(
            e.contains(&format!("{key}: a value starting with $ must be")),
            "{e}"
        );
    }
    let e = err_text(load_text("models: []\n", &["sandbox.use=${SB}"], &env));
    assert!(e.contains("sandbox.use: a value starting with $"), "{e}");
}

#[test]
fn wrong_type_names_key_path_and_line() {
    let text = "# models\nmodels:\n  - name: a\n    use: openai\n    model: m\n    timeout: abc\n";
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "config.yaml", text);
    let e = err_text(load_with(
        &opts(dir.path(), Some(file.clone()), &[]),
        &Env::empty(),
    ));
    let want = format!(
        "config error: models[0].timeout: expected a number, found \"abc\" (line 6 of {})",
        file.display()
    );
    assert_eq!(e, want);
}

#[test]
fn aliased_key_errors_point_at_the_line() {
    let text = "models:\n  - name: a\n    request_timeout: [1]\n";
    let e = err_text(load_text(text, &[], &Env::empty()));
    assert!(
        e.contains("models[0].request_timeout: expected a number, found a list (line 3 of"),
        "{e}"
    );
}

#[test]
fn several_problems_are_summarized_on_one_line() {
    let text = "sandbox: {use: deerflow.community.boxlite:BoxliteProvider}\nsubagents:\n  custom_agents:\n    r: {system_prompt: x}\n";
    let err = load_text(text, &[], &Env::empty()).unwrap_err();
    let problems = err.problems();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0]
        .starts_with("subagents.custom_agents.r.description: required key is missing (line 4 of"));
    assert!(problems[1]
        .starts_with("sandbox.use: deerflow.community.boxlite:BoxliteProvider is not supported"));
    let line = err.to_string();
    assert!(
        line.contains("(and 1 more; run `deerflow config check`"),
        "{line}"
    );
    assert!(!line.contains('\n'));
}

#[test]
fn syntax_errors_carry_a_line() {
    let e = err_text(load_text(
        "models:\n  - name: a\n   bad: [\n",
        &[],
        &Env::empty(),
    ));
    assert!(e.starts_with("config error: "), "{e}");
    assert!(e.contains("invalid YAML"), "{e}");
    assert!(e.contains("line"), "{e}");
    assert!(!e.contains('\n'));
    // A tab where indentation is expected: the scanner's own text names no place.
    let e = err_text(load_text("models: []\n\t- bad\n", &[], &Env::empty()));
    assert!(e.contains("at line 2 column"), "{e}");
}

#[test]
fn set_beats_file_and_errors_name_the_flag() {
    let text =
        "subagents: {timeout_seconds: 100, max_concurrent: 2}\nmodels: [{name: a, model: x}]\n";
    let sets = [
        "subagents.timeout_seconds=60",
        "models.0.model=y",
        "token_budget={enabled: true}",
    ];
    let loaded = load_text(text, &sets, &Env::empty()).unwrap();
    assert_eq!(loaded.config.subagents.timeout_seconds, 60.0);
    assert_eq!(loaded.config.subagents.max_concurrent, 2);
    assert_eq!(loaded.config.models[0].model.as_deref(), Some("y"));
    assert!(loaded.config.token_budget.enabled);
    let e = err_text(load_text(
        text,
        &["subagents.max_concurrent=lots"],
        &Env::empty(),
    ));
    assert!(
        e.ends_with("subagents.max_concurrent: expected a non-negative integer, found \"lots\" (from --set subagents.max_concurrent)"),
        "{e}"
    );
    let e = err_text(load_text(text, &["models.4.model=z"], &Env::empty()));
    assert!(e.contains("out of range"), "{e}");
}

#[test]
fn set_works_without_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::from_pairs([("HOME", dir.path().to_str().unwrap())]);
    let loaded = load_with(
        &opts(dir.path(), None, &["sandbox.allow_host_bash=true"]),
        &env,
    )
    .unwrap();
    assert!(loaded.source.is_none());
    assert!(loaded.config.sandbox.allow_host_bash);
    assert_eq!(loaded.base_dir, dir.path());
}

/// With no configured models, `--set models[0].…` edits the entry `--model PROVIDER:NAME`
/// stands for; without such a `--set` nothing is synthesized.
#[test]
fn set_on_models_0_reaches_a_spec_model_without_a_config() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::from_pairs([
        ("HOME", dir.path().to_str().unwrap()),
        ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
    ]);
    let mut o = opts(dir.path(), None, &["models[0].temperature=0"]);
    o.model = Some("openai:foo".into());
    let loaded = load_with(&o, &env).unwrap();
    let m = &loaded.config.models;
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].name, "openai:foo");
    assert_eq!(m[0].temperature, Some(0.0));
    let r = crate::resolve_model_with(&loaded, "openai:foo", dir.path(), &env).unwrap();
    let http = r.http.unwrap();
    assert_eq!(
        (r.name.as_str(), http.model.as_str()),
        ("openai:foo", "foo")
    );
    assert_eq!(http.temperature, Some(0.0));
    assert_eq!(http.base_url, "http://127.0.0.1:9/v1");
    assert_eq!(http.max_retries, 3);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);

    // $DEERFLOW_MODEL is the choice when there is no flag; an empty `models:` is none.
    let env2 = Env::from_pairs([("DEERFLOW_MODEL", "anthropic:c")]);
    let loaded = load_text("models: []\n", &["models.0.max_tokens=77"], &env2).unwrap();
    assert_eq!(loaded.config.models[0].name, "anthropic:c");
    assert_eq!(loaded.config.models[0].max_tokens, Some(77));

    // No --set on a model: nothing synthesized.
    let mut o = opts(dir.path(), None, &["sandbox.allow_host_bash=true"]);
    o.model = Some("openai:foo".into());
    assert!(load_with(&o, &env).unwrap().config.models.is_empty());
}

/// With configured models, `--set models[0].…` edits `models[0]`; when the run's model is a
/// `PROVIDER:NAME` with no entry, a warning says the set does not reach it.
#[test]
fn set_on_a_configured_model_warns_when_the_run_uses_a_spec() {
    let text = "models: [{name: a, use: openai, model: x}]\n";
    let env = Env::from_pairs([("DEERFLOW_MODEL", "openai:foo")]);
    let loaded = load_text(text, &["models[0].temperature=0"], &env).unwrap();
    assert_eq!(loaded.config.models.len(), 1);
    assert_eq!(loaded.config.models[0].temperature, Some(0.0));
    let [w] = loaded.warnings.as_slice() else {
        panic!("{:?}", loaded.warnings)
    };
    assert!(
        w.contains("--set models[0].temperature") && w.contains("'openai:foo'"),
        "{w}"
    );
    // A configured name, or a spec the config has an entry for: no warning.
    for choice in ["a", "openai:x"] {
        let env = Env::from_pairs([("DEERFLOW_MODEL", choice)]);
        let text = "models: [{name: a, use: openai, model: x}, {name: \"openai:x\", use: openai, model: x}]\n";
        let loaded = load_text(text, &["models[0].temperature=0"], &env).unwrap();
        assert!(
            loaded.warnings.is_empty(),
            "{choice}: {:?}",
            loaded.warnings
        );
    }
}

#[test]
fn lookup_order() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let cwd = root.join("cwd");
    fs::create_dir_all(&cwd).unwrap();
    let home = root.join("home");
    let xdg = root.join("xdg");
    let marker = |n: u32| format!("subagents: {{max_concurrent: {n}}}\n");
    let home_file = write(&home, ".config/deerflow/config.yaml", &marker(1));
    let xdg_file = write(&xdg, "deerflow/config.yaml", &marker(2));
    let cwd_file = write(&cwd, "deerflow.yaml", &marker(3));
    let env_file = write(root, "env.yaml", &marker(4));
    let flag_file = write(root, "flag.yaml", &marker(5));
    let env = Env::from_pairs([
        ("HOME", home.to_str().unwrap()),
        ("XDG_CONFIG_HOME", xdg.to_str().unwrap()),
        ("DEERFLOW_CONFIG", env_file.to_str().unwrap()),
    ]);
    let pick = |explicit: Option<PathBuf>, env: &Env| {
        let l = load_with(&opts(&cwd, explicit, &[]), env).unwrap();
        (l.config.subagents.max_concurrent, l.source)
    };
    assert_eq!(pick(Some(flag_file.clone()), &env), (5, Some(flag_file)));
    assert_eq!(pick(None, &env), (4, Some(env_file)));
    let env = Env::from_pairs([
        ("HOME", home.to_str().unwrap()),
        ("XDG_CONFIG_HOME", xdg.to_str().unwrap()),
    ]);
    assert_eq!(pick(None, &env), (3, Some(cwd_file.clone())));
    fs::remove_file(&cwd_file).unwrap();
    assert_eq!(pick(None, &env), (2, Some(xdg_file.clone())));
    fs::remove_file(&xdg_file).unwrap();
    assert_eq!(pick(None, &env), (1, Some(home_file.clone())));
    fs::remove_file(&home_file).unwrap();
    assert_eq!(pick(None, &env), (3, None));
}

#[test]
fn named_files_must_exist() {
    let dir = tempfile::tempdir().unwrap();
    let e = err_text(load_with(
        &opts(dir.path(), Some("nope.yaml".into()), &[]),
        &Env::empty(),
    ));
    assert!(e.starts_with("config error: cannot read "), "{e}");
    assert!(e.contains("nope.yaml (--config)"), "{e}");
    let env = Env::from_pairs([("DEERFLOW_CONFIG", "missing.yaml")]);
    let e = err_text(load_with(&opts(dir.path(), None, &[]), &env));
    assert!(e.contains("missing.yaml ($DEERFLOW_CONFIG)"), "{e}");
}

#[test]
fn relative_paths_are_relative_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "conf/config.yaml",
        "skills: {path: my-skills}\n",
    );
    let elsewhere = dir.path().join("elsewhere");
    let loaded = load_with(&opts(&elsewhere, Some(file), &[]), &Env::empty()).unwrap();
    assert_eq!(loaded.base_dir, dir.path().join("conf"));
    assert_eq!(loaded.skills_dir(), dir.path().join("conf/my-skills"));
    let file = write(dir.path(), "conf/home.yaml", "skills: {path: ~/sk}\n");
    let env = Env::from_pairs([("HOME", "/home/u")]);
    let loaded = load_with(&opts(&elsewhere, Some(file), &[]), &env).unwrap();
    assert_eq!(loaded.skills_dir(), PathBuf::from("/home/u/sk"));
}

#[test]
fn empty_and_null_sections_are_defaults() {
    let loaded = load_text("models:\nsubagents:\n", &[], &Env::empty()).unwrap();
    assert_eq!(loaded.config, Config::default());
    assert!(load_text("", &[], &Env::empty()).is_ok());
    let e = err_text(load_text("- a\n- b\n", &[], &Env::empty()));
    assert!(e.contains("the top level must be a mapping"), "{e}");
}

#[test]
fn ignored_keys_are_grouped_across_models() {
    let text = "models:\n  - {name: a, display_name: A, supports_audio: true}\n  - {name: b, display_name: B}\ntitle: {}\n";
    let loaded = load_text(text, &[], &Env::empty()).unwrap();
    assert_eq!(
        loaded.ignored_warning().unwrap(),
        "ignored config keys deerflow does not use: models[*].display_name, models[0].supports_audio, title"
    );
}

#[test]
fn ranges_are_checked() {
    let e = err_text(load_text(
        "subagents: {max_concurrent: 0}\n",
        &[],
        &Env::empty(),
    ));
    assert!(
        e.contains("subagents.max_concurrent: expected 1..=64, found 0 (line 1"),
        "{e}"
    );
    let e = err_text(load_text(
        "models: [{name: a, timeout: -1}]\n",
        &[],
        &Env::empty(),
    ));
    assert!(
        e.contains("models[0].timeout: expected a positive number of seconds"),
        "{e}"
    );
}

#[test]
fn zero_turns_and_non_positive_timeouts_are_config_errors() {
    let cases = [
        ("subagents: {max_turns: 0}", "subagents.max_turns: expected at least 1, found 0 (line 1 of"),
        (
            "subagents:\n  agents: {bash: {max_turns: 0}}",
            "subagents.agents.bash.max_turns: expected at least 1, found 0 (line 2 of",
        ),
        (
            "subagents:\n  custom_agents:\n    r: {description: d, system_prompt: p, max_turns: 0}",
            "subagents.custom_agents.r.max_turns: expected at least 1, found 0 (line 3 of",
        ),
        (
            "subagents: {timeout_seconds: 0}",
            "subagents.timeout_seconds: expected a positive number of seconds, found 0 (line 1 of",
        ),
        (
            "subagents:\n  agents: {general-purpose: {timeout_seconds: -5}}",
            "subagents.agents.general-purpose.timeout_seconds: expected a positive number of seconds, found -5 (line 2 of",
        ),
        (
            "subagents:\n  custom_agents:\n    r: {description: d, system_prompt: p, timeout_seconds: 0.0}",
            "subagents.custom_agents.r.timeout_seconds: expected a positive number of seconds, found 0 (line 3 of",
        ),
        (
            "subagents: {timeout_seconds: 1e300}",
            "subagents.timeout_seconds: longer than a year (at most 31536000 seconds) (line 1 of",
        ),
        (
            "models:\n  - {name: m, use: openai, model: x, timeout: 31536001}",
            "models[0].timeout: longer than a year",
        ),
        (
            "models:\n  - {name: m, use: openai, model: x, price: {input_per_mtok: -1, output_per_mtok: 2}}",
            "models[0].price.input_per_mtok: expected a price of 0 or more per million tokens, found -1",
        ),
        (
            "models:\n  - {name: m, use: anthropic, model: x, price: {input_per_mtok: 1, output_per_mtok: 2, cache_write_per_mtok: -0.5}}",
            "models[0].price.cache_write_per_mtok: expected a price of 0 or more per million tokens, found -0.5",
        ),
    ];
    for (text, want) in cases {
        let problems = load_text(text, &[], &Env::empty())
            .expect_err(text)
            .problems();
        assert_eq!(problems.len(), 1, "{text}: {problems:?}");
        assert!(problems[0].starts_with(want), "{text}: {}", problems[0]);
    }
}

#[test]
fn custom_agent_names_are_letters_digits_dash_underscore() {
    let agent = "{description: d, system_prompt: p}";
    for good in ["rev", "code-review_2", "R2D2"] {
        let text = format!("subagents:\n  custom_agents:\n    {good}: {agent}\n");
        assert!(load_text(&text, &[], &Env::empty()).is_ok(), "{good}");
    }
    for bad in ["\"\"", "\"code review\"", "a.b", "\"x/y\"", "ünï"] {
        let text = format!("subagents:\n  custom_agents:\n    {bad}: {agent}\n");
        let problems = load_text(&text, &[], &Env::empty())
            .expect_err(bad)
            .problems();
        assert_eq!(problems.len(), 1, "{bad}: {problems:?}");
        assert!(
            problems[0].starts_with("subagents.custom_agents: agent name "),
            "{bad}: {}",
            problems[0]
        );
        assert!(problems[0].contains("(line 3 of"), "{bad}: {}", problems[0]);
    }
}

#[test]
fn tool_names_of_a_custom_agent_are_not_the_config_s_to_judge() {
    // Which tools exist is the tool registry's knowledge: the sub-agent registry warns
    // (`custom_agent_tool_warnings`); loading keeps the names as written.
    let text = "subagents:\n  custom_agents:\n    r:\n      description: d\n      system_prompt: p\n      tools: [read_file, grpe, task, present_files, bash]\n";
    let loaded = load_text(text, &[], &Env::empty()).unwrap();
    assert_eq!(loaded.warnings, Vec::<String>::new());
    assert_eq!(
        loaded.config.subagents.custom_agents["r"].tools.as_deref(),
        Some(&["read_file", "grpe", "task", "present_files", "bash"].map(String::from)[..])
    );
}

#[test]
fn set_with_an_empty_value_restores_the_default() {
    let text = "subagents: {max_concurrent: 5, timeout_seconds: 60}\n";
    let loaded = load_text(
        text,
        &[
            "subagents.max_concurrent=",
            "subagents.timeout_seconds=null",
        ],
        &Env::empty(),
    )
    .unwrap();
    assert_eq!(loaded.config.subagents.max_concurrent, 3);
    assert_eq!(loaded.config.subagents.timeout_seconds, 1800.0);
    assert!(loaded.ignored.is_empty(), "{:?}", loaded.ignored);
}

#[test]
fn set_accepts_bracket_indexes() {
    let text = "models: [{name: a, model: x}, {name: b, model: y}]\n";
    let loaded = load_text(
        text,
        &["models[1].model=z", "models[0].name=first"],
        &Env::empty(),
    )
    .unwrap();
    assert_eq!(loaded.config.models[1].model.as_deref(), Some("z"));
    assert_eq!(loaded.config.models[0].name, "first");
    assert!(loaded.ignored.is_empty(), "{:?}", loaded.ignored);
}

#[test]
fn set_of_a_key_deerflow_does_not_use_is_reported_not_read() {
    let loaded = load_text(
        "models: [{name: a}]\n",
        &[
            "memory.key=$DF_TEST_SET_UNSET",
            "models.0.display_name=A",
            "models.0.api_base=http://x/v1",
        ],
        &Env::empty(),
    )
    .unwrap();
    assert_eq!(loaded.ignored, ["models[0].display_name", "memory"]);
    assert_eq!(
        loaded.config.models[0].base_url.as_deref(),
        Some("http://x/v1")
    );
}

#[test]
fn summarization_and_tool_output_values_are_checked_with_their_key_paths() {
    let cases = [
        (
            "summarization:\n  trigger: [{type: tokens, value: 0}]",
            "summarization.trigger[0].value: expected a whole number of at least 1, found 0 (line 2 of",
        ),
        (
            "summarization:\n  trigger:\n    - {type: messages, value: 50}\n    - {type: fraction, value: 1.5}",
            "summarization.trigger[1].value: expected a fraction in (0, 1], found 1.5 (line 4 of",
        ),
        (
            "summarization:\n  trigger: {type: tokens, value: 2.5}",
            "summarization.trigger[0].value: expected a whole number of at least 1, found 2.5 (line 2 of",
        ),
        (
            "summarization:\n  trigger: []",
            "summarization.trigger: expected at least one trigger",
        ),
        (
            "summarization:\n  trigger: {type: words, value: 3}",
            "summarization.trigger.type: unknown variant `words`, expected one of `tokens`, `messages`, `fraction` (line 2 of",
        ),
        (
            "summarization:\n  keep: {type: fraction, value: 1}",
            "summarization.keep.value: expected a fraction in [0, 1), found 1 (line 2 of",
        ),
        (
            "summarization: {trim_tokens_to_summarize: 0}",
            "summarization.trim_tokens_to_summarize: expected at least 1, found 0 (line 1 of",
        ),
        (
            "summarization: {model_name: cheap}",
            "summarization.model_name: no model named 'cheap' in models: (use a models[].name or null) (line 1 of",
        ),
        (
            "tool_output: {externalize_min_chars: 0}",
            "tool_output.externalize_min_chars: expected at least 1, found 0 (line 1 of",
        ),
        (
            "models: [{name: a, context_window: 0}]",
            "models[0].context_window: expected at least 1, found 0 (line 1 of",
        ),
        (
            "tool_output: {exempt_tools: read_file}",
            "tool_output.exempt_tools: expected a list, found \"read_file\" (line 1 of",
        ),
    ];
    for (text, want) in cases {
        let problems = load_text(text, &[], &Env::empty())
            .expect_err(text)
            .problems();
        assert_eq!(problems.len(), 1, "{text}: {problems:?}");
        assert!(problems[0].starts_with(want), "{text}: {}", problems[0]);
    }
    // Keeping nothing verbatim is fine, and a single trigger mapping is a list of one.
    let ok = load_text(
        "models: [{name: m, model: x, context_window: 8000}]\nsummarization: {model_name: m, trigger: {type: messages, value: 40}, keep: {type: tokens, value: 0}}",
        &[],
        &Env::empty(),
    )
    .unwrap();
    let s = &ok.config.summarization;
    assert_eq!(s.trigger.0.len(), 1);
    assert_eq!(s.trigger.0[0].kind, SizeKind::Messages);
    assert_eq!(s.model_name.as_deref(), Some("m"));
    assert_eq!(ok.config.models[0].context_window, Some(8000));
    assert!(ok.ignored.is_empty(), "{:?}", ok.ignored);
}

#[test]
fn a_thinking_budget_must_be_below_max_tokens() {
    let entry = |max: u64| {
        format!(
            "models:\n  - name: c\n    use: anthropic\n    model: claude\n    max_tokens: {max}\n    \
             supports_thinking: true\n    when_thinking_enabled: {{thinking: {{type: enabled, budget_tokens: 4096}}}}\n"
        )
    };
    let e = err_text(load_text(&entry(4096), &[], &Env::empty()));
    assert!(
        e.contains("models[0].when_thinking_enabled.thinking.budget_tokens")
            && e.contains("less than max_tokens (4096)"),
        "{e}"
    );
    assert!(load_text(&entry(16000), &[], &Env::empty()).is_ok());
}

#[test]
fn deerflow_s_safety_finish_reason_section_is_read() {
    let cfg = load_text(DEERFLOW_EXAMPLE, &[], &Env::empty())
        .unwrap()
        .config;
    assert_eq!(
        cfg.safety_finish_reason,
        crate::SafetyFinishReasonConfig::default()
    );
    let text = "safety_finish_reason:\n  enabled: true\n  detectors:\n\
                \x20   - use: deerflow.agents.middlewares.safety_termination_detectors:OpenAICompatibleContentFilterDetector\n\
                \x20     config:\n        finish_reasons: [\"content_filter\", \"sensitive\", \"risk_control\"]\n\
                \x20   - use: deerflow.agents.middlewares.safety_termination_detectors:AnthropicRefusalDetector\n\
                \x20   - use: my_company.deerflow_ext:WenxinSafetyDetector\n\
                \x20     config:\n        error_codes: [336003, 17, 18]\n";
    let loaded = load_text(text, &[], &Env::empty()).unwrap();
    let s = &loaded.config.safety_finish_reason;
    assert!(s.enabled);
    assert_eq!(
        s.extra_finish_reasons(),
        ["content_filter", "sensitive", "risk_control"]
    );
    // A detector's keys deerflow does not read are named like every ignored key; a class
    // it does not have is a warning.
    assert_eq!(
        loaded.ignored,
        ["safety_finish_reason.detectors[2].config.error_codes"]
    );
    assert!(
        loaded.warnings.iter().any(|w| w.starts_with(
            "safety_finish_reason.detectors[2].use: detector 'my_company.deerflow_ext:WenxinSafetyDetector' is not one deerflow has"
        )),
        "{:?}",
        loaded.warnings
    );
    let off = load_text("safety_finish_reason: {enabled: false}", &[], &Env::empty()).unwrap();
    assert!(!off.config.safety_finish_reason.enabled);
    let e = err_text(load_text(
        "safety_finish_reason: {detectors: [{use: x, config: {finish_reasons: 5}}]}",
        &[],
        &Env::empty(),
    ));
    assert!(
        e.contains("safety_finish_reason.detectors[0].config.finish_reasons"),
        "{e}"
    );
}

#[test]
fn docker_sandbox_keys_load_with_mounts_anchored_and_environment_unexpanded() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "config.yaml",
        "sandbox:\n  use: deerflow.community.aio_sandbox:AioSandboxProvider\n  image: $DF_IMG\n  \
         per_task: true\n  replicas: 2\n  mounts:\n    - {host_path: data, container_path: /mnt/data}\n    \
         - {host_path: /abs, container_path: /mnt/abs, read_only: true}\n  \
         environment: {FROM_HOST: $DF_SECRET, PLAIN: x}\n",
    );
    let env = Env::from_pairs([("DF_IMG", "img:1"), ("DF_SECRET", "s3cret")]);
    let loaded = load_with(&opts(dir.path(), Some(file), &[]), &env).unwrap();
    let s = &loaded.config.sandbox;
    assert_eq!(s.use_, "docker");
    // The rest of the section expands as usual; the container's environment waits for the run.
    assert_eq!(s.image.as_deref(), Some("img:1"));
    assert_eq!(s.environment["FROM_HOST"], "$DF_SECRET");
    assert!(s.per_task);
    assert_eq!(s.replicas, 2);
    assert_eq!(s.container_prefix, "deerflow-sandbox");
    assert_eq!(s.mounts[0].host_path, dir.path().join("data"));
    assert!(!s.mounts[0].read_only);
    assert_eq!(s.mounts[1].host_path, std::path::Path::new("/abs"));
    assert!(s.mounts[1].read_only);
    assert_eq!(
        s.environment_with(&env).unwrap(),
        [
            ("FROM_HOST".to_string(), "s3cret".to_string()),
            ("PLAIN".to_string(), "x".to_string())
        ]
    );
    assert_eq!(
        s.environment_with(&Env::empty()).unwrap_err(),
        "sandbox.environment.FROM_HOST: environment variable DF_SECRET is not set"
    );
    assert!(s.bash_allowed(false), "docker offers bash without the flag");
    // Only a whole `$NAME` is a reference; the resolver refuses the rest even when it is
    // handed a config that skipped validation.
    let mut half = s.clone();
    half.environment
        .insert("BRACED".into(), "${DF_SECRET}".into());
    assert_eq!(
        half.environment_with(&env).unwrap_err(),
        "sandbox.environment.BRACED: a value starting with $ must be a whole $NAME reference \
         (no braces, nothing around it)"
    );
    let json = crate::show_json(&loaded);
    assert_eq!(json["sandbox"]["environment"]["FROM_HOST"], "$DF_SECRET");
    assert_eq!(json["sandbox"]["environment"]["PLAIN"], "***");
}

#[test]
fn docker_sandbox_values_are_checked() {
    let problems = |text: &str| {
        load_text(text, &[], &Env::empty())
            .map(|_| Vec::new())
            .unwrap_or_else(|e| e.problems())
    };
    let p = problems("sandbox: {use: docker}\n");
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with("sandbox.image: required with sandbox.use: docker"),
        "{p:?}"
    );
    let p = problems(
        "sandbox: {use: docker, image: i, replicas: 0, container_prefix: 'a b', \
         mounts: [{host_path: /x, container_path: x}], environment: {'A=B': c}}\n",
    );
    assert_eq!(p.len(), 4, "{p:?}");
    let p = problems(
        "sandbox:\n  use: docker\n  image: i\n  environment:\n    A: '${HOME}'\n    \
         B: $HOME-x\n    C: $\n    D: $HOME\n    E: a$b\n",
    );
    assert_eq!(p.len(), 3, "{p:?}");
    for (key, line) in [("A", 5), ("B", 6), ("C", 7)] {
        let want = format!("sandbox.environment.{key}: a value starting with $ must be a whole");
        let got = p.iter().find(|m| m.starts_with(&want));
        assert!(
            got.is_some_and(|m| m.contains(&format!("line {line}"))),
            "{key}: {p:?}"
        );
    }
    for ok in ["a", "A1", "deer_flow.sandbox-1"] {
        let text = format!("sandbox: {{use: docker, image: i, container_prefix: {ok}}}\n");
        assert!(problems(&text).is_empty(), "{ok}");
    }
    for bad in ["-a", ".a", "a/b", "a:b"] {
        let text = format!("sandbox: {{use: docker, image: i, container_prefix: '{bad}'}}\n");
        assert_eq!(problems(&text).len(), 1, "{bad}");
    }
    // Outside docker the docker keys are not checked, only named.
    let loaded = load_text(
        "sandbox: {use: local, image: i, per_task: true}\n",
        &[],
        &Env::empty(),
    )
    .unwrap();
    assert_eq!(
        loaded.warnings,
        [
            "sandbox.image is used only with sandbox.use: docker; ignored",
            "sandbox.per_task is used only with sandbox.use: docker; ignored"
        ]
    );
    assert!(!loaded.config.sandbox.bash_allowed(false));
    assert!(loaded.config.sandbox.bash_allowed(true));
}

/// Every duration the config has, found by name in what it loads (`…timeout`,
/// `…_seconds`), keeps the one-year rule: a new duration field is checked or this fails.
#[test]
fn every_duration_is_at_most_a_year() {
    let text = "models: [{name: m, use: openai, model: x}]\n\
                subagents: {agents: {bash: {}}, custom_agents: {r: {description: d, system_prompt: p}}}\n\
                mcp_servers: {s: {command: c}}\n";
    let loaded = load_text(text, &[], &Env::empty()).unwrap();
    let shown = serde_yaml_ng::to_value(&loaded.config).unwrap();
    let mut durations = Vec::new();
    duration_keys(&shown, &mut Vec::new(), &mut durations);
    assert!(durations.len() >= 8, "{durations:?}");
    for (set_key, shown_key) in durations {
        let set = format!("{set_key}=31536001");
        let problems = load_text(text, &[&set], &Env::empty())
            .expect_err(&set)
            .problems();
        let want = format!("{shown_key}: longer than a year");
        assert!(
            problems.iter().any(|p| p.starts_with(&want)),
            "{set}: {problems:?}"
        );
    }
}

/// The `--set` key and the key path as messages show it of every duration-named leaf.
fn duration_keys(v: &serde_yaml_ng::Value, at: &mut Vec<String>, out: &mut Vec<(String, String)>) {
    use serde_yaml_ng::Value;
    let items: Vec<(String, &Value)> = match v {
        Value::Mapping(m) => m
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v)))
            .collect(),
        Value::Sequence(s) => s
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect(),
        _ => return,
    };
    for (key, child) in items {
        at.push(key.clone());
        let leaf = matches!(child, Value::Number(_) | Value::Null);
        if leaf && (key.ends_with("timeout") || key.ends_with("_seconds")) {
            let shown = at
                .iter()
                .enumerate()
                .map(|(n, s)| match (n, s.parse::<usize>()) {
                    (_, Ok(i)) => format!("[{i}]"),
                    (0, _) => s.clone(),
                    _ => format!(".{s}"),
                })
                .collect::<String>();
            out.push((at.join("."), shown));
        }
        duration_keys(child, at, out);
        at.pop();
    }
}

#[test]
fn a_models_use_from_the_environment_picks_the_provider_or_fails_when_used() {
    let text = "models:\n  - {name: a, use: $PROV, model: claude-x, api_key: k}\n";
    let anthropic = Env::from_pairs([("PROV", "langchain_anthropic:ChatAnthropic")]);
    let loaded = load_text(text, &[], &anthropic).unwrap();
    let m = &loaded.config.models[0];
    assert_eq!(m.provider.map(|p| p.name), Some("anthropic"));
    assert_eq!(m.use_, "langchain_anthropic:ChatAnthropic");

    // Unset: loading is fine (only a model in use needs it), resolving names the variable.
    let unset = Env::empty();
    let loaded = load_text(text, &[], &unset).unwrap();
    let e = crate::resolve_model_with(&loaded, "a", Path::new("."), &unset)
        .expect_err("an unset use variable fails the model")
        .to_string();
    assert!(
        e.contains("models[0].use ('a'): environment variable PROV is not set"),
        "{e}"
    );
}
