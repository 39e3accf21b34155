use std::fs;
use std::path::PathBuf;

use super::*;

const SECRET: &str = "sk-literal-secret-123";

fn opts_for(text: &str) -> (tempfile::TempDir, LoadOptions) {
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
    (dir, opts)
}

#[test]
fn deerflow_example_checks_clean() {
    let text = include_str!("../../../tests/fixtures/deerflow/config.example.yaml");
    let (_d, opts) = opts_for(text);
    let r = check_with(&opts, &Env::empty());
    assert_eq!(r.problems, Vec::<String>::new());
    assert_eq!(r.exit_code(), 0);
    assert_eq!(r.warnings.len(), 1);
    assert!(r.warnings[0].starts_with("ignored config keys deerflow does not use: "));
}

#[test]
fn unset_vars_and_unused_unsupported_classes_are_warnings() {
    let text = "models:\n - {name: a, model: m, api_key: $DF_R_UNSET}\n - {name: g, use: langchain_google_genai:ChatGoogleGenerativeAI, model: x}\n";
    let (_d, opts) = opts_for(text);
    let r = check_with(&opts, &Env::empty());
    assert_eq!(r.problems, Vec::<String>::new());
    assert_eq!(r.exit_code(), 0);
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    assert!(
        r.warnings[0].starts_with("models[0].api_key: environment variable DF_R_UNSET is not set")
    );
    assert!(r.warnings[1].contains("is not supported"));
}

#[test]
fn every_problem_is_listed() {
    let text = "models:\n - {name: g, use: langchain_google_genai:ChatGoogleGenerativeAI, model: x}\n - {name: r, use: replay}\n\
                subagents:\n  agents: {bash: {model: nope}}\n  custom_agents: {rev: {description: d, system_prompt: p, model: inherit}}\n";
    let (_d, opts) = opts_for(text);
    let r = check_with(&opts, &Env::empty());
    assert_eq!(r.exit_code(), 78);
    assert_eq!(r.problems.len(), 3, "{:?}", r.problems);
    assert!(
        r.problems[0].contains("models[0] ('g')"),
        "{}",
        r.problems[0]
    );
    assert!(
        r.problems[1].contains("models[1].cassette: required"),
        "{}",
        r.problems[1]
    );
    assert!(
        r.problems[2].starts_with("subagents.agents.bash.model: unknown model 'nope'"),
        "{}",
        r.problems[2]
    );
}

#[test]
fn load_failures_list_every_problem() {
    let text =
        "models: [{name: a, timeout: x}, {name: b, max_retries: y}]\nsandbox: {use: docker}\n";
    let (_d, opts) = opts_for(text);
    let r = check_with(&opts, &Env::empty());
    assert_eq!(r.exit_code(), 78);
    assert_eq!(r.problems.len(), 3, "{:?}", r.problems);
    assert!(r.problems[2].contains("(line 2 of "), "{:?}", r.problems);
    assert!(r.problems[0].contains("(line 1 of "), "{:?}", r.problems);
}

#[test]
fn show_redacts_secrets_and_fills_defaults() {
    let text = format!(
        "models:\n - {{name: a, model: m, api_key: {SECRET}}}\n - {{name: b, model: m, api_key: $DF_R_KEY}}\n - {{name: c, model: m}}\nmemory: {{x: 1}}\n"
    );
    let (dir, opts) = opts_for(&text);
    let env = Env::from_pairs([("DF_R_KEY", "another-secret")]);
    let loaded = load_with(&opts, &env).unwrap();
    let json = show_json(&loaded);
    assert_eq!(json["models"][0]["api_key"], "***");
    assert_eq!(json["models"][1]["api_key"], "$DF_R_KEY");
    assert!(json["models"][2].get("api_key").is_none());
    assert_eq!(json["models"][0]["provider"], "openai");
    assert_eq!(json["models"][0]["timeout"], 600.0);
    assert_eq!(json["subagents"]["max_concurrent"], 3);
    assert_eq!(json["sandbox"]["use"], "local");
    assert_eq!(json["token_budget"]["max_tokens"], 200_000);
    assert_eq!(
        json["skills"]["path"],
        dir.path().join("skills").display().to_string()
    );
    assert!(json.get("memory").is_none());
    let yaml = show_yaml(&loaded);
    assert!(
        !yaml.contains(SECRET) && !yaml.contains("another-secret"),
        "{yaml}"
    );
    assert!(yaml.starts_with("# config file: "), "{yaml}");
    let back: serde_yaml_ng::Value = serde_yaml_ng::from_str(&yaml).unwrap();
    assert_eq!(
        back["models"][0]["api_key"],
        serde_yaml_ng::Value::from("***")
    );
}

#[test]
fn show_without_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LoadOptions {
        explicit: None,
        sets: Vec::new(),
        cwd: PathBuf::from(dir.path()),
        providers: crate::testing::providers(),
        mcp_configs: Vec::new(),
        model: None,
    };
    let loaded = load_with(&opts, &Env::empty()).unwrap();
    assert!(show_yaml(&loaded).starts_with("# no config file"));
    assert_eq!(show_json(&loaded)["models"], serde_json::json!([]));
}

#[test]
fn mcp_sources_merge_by_name_and_show_redacts_their_secrets() {
    let (dir, mut opts) = opts_for(
        "mcp_servers:\n  a: {command: from-yaml, env: {TOKEN: $DF_MCP_TOK, PLAIN: literal-secret}}\n  b: {command: from-yaml}\n  c: {url: 'http://h/mcp', headers: {X-Key: literal-key}}\n",
    );
    fs::write(
        dir.path().join("extensions_config.json"),
        r#"{"mcpServers": {"b": {"command": "from-extensions"}, "d": {"command": "from-extensions"}}, "skills": {}}"#,
    )
    .unwrap();
    let flag = dir.path().join("one.json");
    fs::write(
        &flag,
        r#"{"mcpServers": {"d": {"command": "from-flag-1"}}}"#,
    )
    .unwrap();
    let flag2 = dir.path().join("two.json");
    fs::write(
        &flag2,
        r#"{"mcpServers": {"d": {"command": "from-flag-2", "enabled": false}}}"#,
    )
    .unwrap();
    opts.mcp_configs = vec![flag, flag2];
    let env = Env::from_pairs([("DF_MCP_TOK", "tok-value")]);
    let loaded = load_with(&opts, &env).unwrap();
    let cmd = |n: &str| {
        loaded.config.mcp_servers[n]
            .command
            .clone()
            .unwrap_or_default()
    };
    assert_eq!(cmd("a"), "from-yaml");
    assert_eq!(cmd("b"), "from-extensions");
    assert_eq!(cmd("d"), "from-flag-2");
    let enabled: Vec<&str> = loaded.mcp.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(enabled, ["a", "b", "c"]);
    assert_eq!(loaded.mcp_secrets, ["DF_MCP_TOK"]);
    assert!(loaded
        .ignored
        .iter()
        .any(|i| i.ends_with("extensions_config.json: skills")));
    let json = show_json(&loaded);
    assert_eq!(json["mcp_servers"]["a"]["env"]["TOKEN"], "$DF_MCP_TOK");
    assert_eq!(json["mcp_servers"]["a"]["env"]["PLAIN"], "***");
    assert_eq!(json["mcp_servers"]["c"]["headers"]["X-Key"], "***");
    let yaml = show_yaml(&loaded);
    assert!(
        !yaml.contains("literal-") && !yaml.contains("tok-value"),
        "{yaml}"
    );

    // An unset variable in an enabled server is a problem; in a disabled one it is not read.
    let err = load_with(&opts, &Env::empty()).unwrap_err();
    assert!(
        err.to_string()
            .contains("mcp_servers.a.env.TOKEN: $DF_MCP_TOK is not set"),
        "{err}"
    );
    let mut off = opts.clone();
    off.sets = vec![crate::parse_set("mcp_servers.a.enabled=false").unwrap()];
    assert!(load_with(&off, &Env::empty()).is_ok());
    // $DEER_FLOW_EXTENSIONS_CONFIG_PATH names the extensions file, which must then exist.
    let env = Env::from_pairs([
        ("DF_MCP_TOK", "t"),
        ("DEER_FLOW_EXTENSIONS_CONFIG_PATH", "elsewhere.json"),
    ]);
    let err = load_with(&opts, &env).unwrap_err();
    assert!(err.to_string().contains("elsewhere.json"), "{err}");
}

#[test]
fn show_redacts_credentials_in_an_mcp_server_s_url() {
    let (_d, opts) = opts_for("mcp_servers:\n  w: {url: 'http://me:pw-secret@h:8/mcp?x=1'}\n");
    let loaded = load_with(&opts, &Env::empty()).unwrap();
    let json = show_json(&loaded);
    assert_eq!(
        json["mcp_servers"]["w"]["url"],
        "http://[redacted]@h:8/mcp?x=1"
    );
    assert!(!show_yaml(&loaded).contains("pw-secret"));
}

#[test]
fn show_redacts_the_keys_of_tool_entries() {
    let (_d, opts) = opts_for(&format!(
        "tools:\n- {{name: web_search, use: x.tavily:web_search_tool, api_key: {SECRET}}}\n\
         - {{name: web_fetch, use: x.crawl4ai:web_fetch_tool, token: $CRAWL4AI_TOKEN,\n   \
         proxy: 'http://u:proxy-secret@p:3128', base_url: 'http://me:url-secret@h:1'}}\n"
    ));
    let loaded = load_with(&opts, &Env::empty()).unwrap();
    let json = show_json(&loaded);
    assert_eq!(json["tools"][0]["api_key"], "***");
    assert_eq!(json["tools"][0]["name"], "web_search");
    assert_eq!(json["tools"][1]["token"], "$CRAWL4AI_TOKEN");
    assert_eq!(json["tools"][1]["proxy"], "http://[redacted]@p:3128");
    let yaml = show_yaml(&loaded);
    for secret in [SECRET, "proxy-secret", "url-secret"] {
        assert!(!yaml.contains(secret), "{yaml}");
    }
}
