//! `deerflow config check` and `deerflow config show`.

use std::path::Path;

use serde_json::Value as Json;

use super::env::{var_name, Env};
use super::error::ConfigError;
use super::load::{load_with, LoadOptions, LoadedConfig};
use super::models::{model_choice_with, resolve_entry, resolve_model_with};

/// What `config check` prints: problems (exit 78 when any) and warnings (exit 0).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckReport {
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
}

impl CheckReport {
    /// The report of a config that does not load: its problems, no warnings.
    pub fn failed(e: &ConfigError) -> Self {
        Self {
            problems: e.problems(),
            warnings: Vec::new(),
        }
    }

    /// 0 when there is no problem, else 78.
    pub fn exit_code(&self) -> i32 {
        if self.problems.is_empty() {
            0
        } else {
            78
        }
    }
}

/// Loads and checks in one go, so a config that fails to load still lists every problem.
/// These are the config's own checks; `deerflow config check` adds the notes other modules
/// make about the loaded config (custom agents' tool names) to `LoadedConfig::warnings`
/// before `check_report`.
pub fn check_with(opts: &LoadOptions, env: &Env) -> CheckReport {
    match load_with(opts, env) {
        Ok(loaded) => check_report_with(&loaded, env, &opts.cwd),
        Err(e) => CheckReport::failed(&e),
    }
}

/// Checks a loaded config: every model entry and every model reference is resolved.
pub fn check_report(loaded: &LoadedConfig) -> CheckReport {
    let cwd = std::env::current_dir().unwrap_or_else(|_| loaded.base_dir.clone());
    check_report_with(loaded, &Env::process(), &cwd)
}

pub fn check_report_with(loaded: &LoadedConfig, env: &Env, cwd: &Path) -> CheckReport {
    let mut r = CheckReport::default();
    r.warnings.extend(loaded.ignored_warning());
    r.warnings.extend(loaded.warnings.iter().cloned());
    let in_use = models_in_use(loaded, env);
    let models = &loaded.config.models;
    for (i, m) in models.iter().enumerate() {
        if models[..i].iter().any(|o| o.name == m.name) {
            continue; // a duplicate is unreachable; load already warned
        }
        let used = in_use.iter().any(|(_, spec)| *spec == m.name);
        let unsupported = m.provider.is_none();
        match resolve_entry(loaded, i, env) {
            Ok(_) => {}
            Err(ConfigError::MissingSecret(msg)) => r
                .warnings
                .push(format!("{msg} (needed only when this model is used)")),
            Err(e) if unsupported && !used => r.warnings.extend(e.problems()),
            Err(e) => r.problems.extend(e.problems()),
        }
    }
    for (who, spec) in &in_use {
        if models.iter().any(|m| m.name == *spec) {
            continue; // checked above
        }
        match resolve_model_with(loaded, spec, cwd, env) {
            Ok(_) => {}
            Err(ConfigError::MissingSecret(msg)) => r.warnings.push(format!("{who}: {msg}")),
            Err(e) => r
                .problems
                .extend(e.problems().into_iter().map(|p| format!("{who}: {p}"))),
        }
    }
    r
}

/// Every model a run could reach: the default choice and each sub-agent `model:`.
fn models_in_use(loaded: &LoadedConfig, env: &Env) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Ok(spec) = model_choice_with(None, &loaded.config, env) {
        out.push(("default model".to_string(), spec));
    }
    let sub = &loaded.config.subagents;
    let agents = sub
        .agents
        .iter()
        .map(|(n, o)| (format!("subagents.agents.{n}.model"), &o.model));
    let custom = sub
        .custom_agents
        .iter()
        .map(|(n, a)| (format!("subagents.custom_agents.{n}.model"), &a.model));
    for (who, model) in agents.chain(custom) {
        if let Some(spec) = model.as_deref().filter(|m| *m != "inherit") {
            out.push((who, spec.to_string()));
        }
    }
    out
}

/// The effective config as JSON: defaults filled in, the skills directory resolved,
/// API keys redacted (`"***"`, or the `$VAR` name they come from).
pub fn show_json(loaded: &LoadedConfig) -> Json {
    let mut v = match serde_json::to_value(&loaded.config) {
        Ok(v) => v,
        Err(e) => return serde_json::json!({ "error": e.to_string() }),
    };
    if let Some(models) = v.get_mut("models").and_then(Json::as_array_mut) {
        for m in models {
            redact(m);
        }
    }
    // An MCP server's env and headers carry its credentials.
    if let Some(servers) = v.get_mut("mcp_servers").and_then(Json::as_object_mut) {
        for server in servers.values_mut() {
            redact_url(server, "url");
            for key in ["env", "headers"] {
                if let Some(map) = server.get_mut(key).and_then(Json::as_object_mut) {
                    map.values_mut().for_each(redact_value);
                }
            }
        }
    }
    // The container's environment may carry credentials too (DeerFlow's `API_KEY: $MY_KEY`).
    if let Some(map) = v
        .get_mut("sandbox")
        .and_then(|s| s.get_mut("environment"))
        .and_then(Json::as_object_mut)
    {
        map.values_mut().for_each(redact_value);
    }
    // A tool entry's key and token are a search or fetch service's credentials (§14).
    if let Some(tools) = v.get_mut("tools").and_then(Json::as_array_mut) {
        for entry in tools {
            for key in ["base_url", "proxy"] {
                redact_url(entry, key);
            }
            for key in ["api_key", "token"] {
                if let Some(secret) = entry.get_mut(key) {
                    redact_value(secret);
                }
            }
        }
    }
    if let Some(skills) = v.get_mut("skills").and_then(Json::as_object_mut) {
        skills.insert(
            "path".into(),
            Json::String(loaded.skills_dir().display().to_string()),
        );
    }
    v
}

fn redact(model: &mut Json) {
    redact_url(model, "base_url");
    if let Some(key) = model.get_mut("api_key") {
        redact_value(key);
    }
}

/// The URL at `key` of `v` without the `user:password@` it may carry.
fn redact_url(v: &mut Json, key: &str) {
    if let Some(url) = v.get_mut(key) {
        if let Some(text) = url.as_str() {
            *url = Json::String(deerflow_base::text::without_url_credentials(text).into_owned());
        }
    }
}

/// A secret's `$VAR` name, or `***` for a literal value.
fn redact_value(v: &mut Json) {
    let shown = match v.as_str().and_then(var_name) {
        Some(name) => format!("${name}"),
        None => "***".to_string(),
    };
    *v = Json::String(shown);
}

/// The effective config as YAML, headed by a comment naming its source.
pub fn show_yaml(loaded: &LoadedConfig) -> String {
    let source = match &loaded.source {
        Some(p) => format!("# config file: {}\n", p.display()),
        None => "# no config file: built-in defaults\n".to_string(),
    };
    let body =
        serde_yaml_ng::to_string(&show_json(loaded)).unwrap_or_else(|e| format!("# error: {e}\n"));
    source + &body
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
