//! Model choice (`--model` → `$DEERFLOW_MODEL` → the first `models:` entry) and resolution
//! of a choice into what a provider client needs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::deerflow::{class_endpoint, is_ollama, unsupported};
use super::env::{unset_message, var_name, Env, WHOLE_REFERENCE};
use super::error::ConfigError;
use super::expandable::{Expandable, Unexpanded};
use super::load::LoadedConfig;
use super::providers::{Endpoint, HttpSettings, ProviderInfo, Providers, ThinkingSettings};
use super::schema::{Config, ModelEntry, Price};

/// langchain_ollama's default server.
const OLLAMA_URL: &str = "http://localhost:11434";

/// A model ready for a provider client.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedModel {
    /// As the user chose it: the `models[].name`, or the `PROVIDER:MODEL` text.
    pub name: String,
    /// The provider table's row that serves it (`model::registry` builds its client).
    pub row: &'static ProviderInfo,
    /// The provider's model id; for replay the cassette path as written.
    pub model: String,
    /// For a row with an endpoint (openai, anthropic).
    pub http: Option<HttpSettings>,
    /// For a row without one (replay): an absolute path to a readable file.
    pub cassette: Option<PathBuf>,
    pub price: Option<Price>,
    /// Prompt + completion capacity, when the config says (the client reports it as its
    /// limit, for summarization's `fraction` sizes).
    pub context_window: Option<u64>,
    /// The model takes images (`supports_vision: true`); a replay model counts as seeing,
    /// since it sends nothing anywhere (contract §14).
    pub supports_vision: bool,
}

/// The model to use: the flag, else `$DEERFLOW_MODEL`, else the first configured model.
pub fn model_choice(cli: Option<&str>, cfg: &Config) -> Result<String, ConfigError> {
    model_choice_with(cli, cfg, &Env::process())
}

pub fn model_choice_with(
    cli: Option<&str>,
    cfg: &Config,
    env: &Env,
) -> Result<String, ConfigError> {
    if let Some(m) = cli.map(str::trim).filter(|m| !m.is_empty()) {
        return Ok(m.to_string());
    }
    if let Some(m) = env.get("DEERFLOW_MODEL") {
        return Ok(m.trim().to_string());
    }
    cfg.models.first().map(|m| m.name.clone()).ok_or_else(|| {
        ConfigError::Model(
            "no model configured: pass --model PROVIDER:MODEL (e.g. --model openai:gpt-4o-mini or \
             --model replay:cassette.json), set DEERFLOW_MODEL, or add a models: entry to the config"
                .to_string(),
        )
    })
}

/// Resolves a `models[].name` or a `PROVIDER:MODEL` spec. A configured name wins.
/// `cwd` anchors a `replay:PATH` given on the command line.
pub fn resolve_model(
    loaded: &LoadedConfig,
    spec: &str,
    cwd: &Path,
) -> Result<ResolvedModel, ConfigError> {
    resolve_model_with(loaded, spec, cwd, &Env::process())
}

pub fn resolve_model_with(
    loaded: &LoadedConfig,
    spec: &str,
    cwd: &Path,
    env: &Env,
) -> Result<ResolvedModel, ConfigError> {
    let models = &loaded.config.models;
    if let Some(i) = models.iter().position(|m| m.name == spec) {
        return resolve_entry(loaded, i, env);
    }
    let Some((provider, model)) = spec.split_once(':') else {
        return Err(unknown_model(spec, loaded));
    };
    if model.trim().is_empty() {
        return Err(ConfigError::Model(format!(
            "model '{spec}': the part after '{provider}:' is empty; use e.g. openai:gpt-4o-mini"
        )));
    }
    let providers = &loaded.providers;
    let Some(row) = providers.by_name(provider) else {
        return Err(ConfigError::Model(format!(
            "unknown model provider '{provider}' in '{spec}': use {}{}",
            providers.spec_forms(),
            configured_hint(&loaded.config)
        )));
    };
    match &row.endpoint {
        Some(endpoint) => {
            let http = spec_http(providers, endpoint, model, env, spec)?;
            Ok(ResolvedModel::http(spec, row, http, None))
        }
        None => {
            let path = readable_cassette(&cwd.join(model), spec)?;
            Ok(ResolvedModel::replay(spec, row, model, path, None))
        }
    }
}

impl ResolvedModel {
    /// The provider's name, as events show it: `openai`, `anthropic` or `replay`.
    pub fn provider(&self) -> &'static str {
        self.row.name
    }

    fn http(
        name: &str,
        row: &'static ProviderInfo,
        http: HttpSettings,
        price: Option<Price>,
    ) -> Self {
        Self {
            name: name.to_string(),
            row,
            model: http.model.clone(),
            http: Some(http),
            cassette: None,
            price,
            context_window: None,
            supports_vision: false,
        }
    }

    fn replay(
        name: &str,
        row: &'static ProviderInfo,
        text: &str,
        cassette: PathBuf,
        price: Option<Price>,
    ) -> Self {
        Self {
            name: name.to_string(),
            row,
            model: text.to_string(),
            http: None,
            cassette: Some(cassette),
            price,
            context_window: None,
            supports_vision: true,
        }
    }
}

/// `openai:NAME` / `anthropic:NAME` without a config entry: everything from the environment.
fn spec_http(
    providers: &Providers,
    endpoint: &Endpoint,
    model: &str,
    env: &Env,
    spec: &str,
) -> Result<HttpSettings, ConfigError> {
    let base = env
        .get(endpoint.url_var)
        .unwrap_or_else(|| endpoint.default_url.to_string());
    check_base_url(&base, &format!("${}", endpoint.url_var))?;
    let found = endpoint
        .key_vars
        .iter()
        .find_map(|var| env.get(var).map(|k| (*var, k)));
    if let Some((var, k)) = &found {
        // The user has to know which variable to fix (§2: the line names the cause).
        check_key(Some(k), &format!("${var}"))?;
    }
    let key = found.map(|(_, k)| k);
    if key.is_none() && providers.needs_key(&base) {
        return Err(ConfigError::MissingSecret(format!(
            "model '{spec}' needs an API key: set {} (or add a models: entry with api_key)",
            key_var(endpoint)
        )));
    }
    let mut http = HttpSettings::new(model, (endpoint.normalize_base)(&base), key);
    http.max_tokens = endpoint.default_max_tokens.map(|f| f(model));
    Ok(http)
}

/// The key from the first of the endpoint's variables that is set.
fn env_key(endpoint: &Endpoint, env: &Env) -> Option<String> {
    endpoint.key_vars.iter().find_map(|var| env.get(var))
}

/// The variable error messages tell the user to set.
fn key_var(endpoint: &Endpoint) -> &'static str {
    endpoint
        .key_vars
        .first()
        .copied()
        .unwrap_or("the API key variable")
}

pub(super) fn resolve_entry(
    loaded: &LoadedConfig,
    i: usize,
    env: &Env,
) -> Result<ResolvedModel, ConfigError> {
    let m = &loaded.config.models[i];
    let at = format!("models[{i}]");
    let providers = &loaded.providers;
    if let Some(var) = var_name(&m.use_) {
        // load.rs replaced a set one with its value.
        return Err(ConfigError::MissingSecret(format!(
            "{at}.use ('{}'): {}",
            m.name,
            unset_message(var)
        )));
    }
    let Some(row) = m.provider else {
        return Err(ConfigError::Model(format!(
            "{at} ('{}'): {}",
            m.name,
            unsupported(&m.use_, providers)
        )));
    };
    if let Some(endpoint) = &row.endpoint {
        let http = entry_http(providers, m, endpoint, &at, env)?;
        let mut r = ResolvedModel::http(&m.name, row, http, m.price.clone());
        r.context_window = m.context_window;
        r.supports_vision = m.supports_vision;
        return Ok(r);
    }
    let Some(raw) = &m.cassette else {
        return Err(ConfigError::Model(format!(
            "{at}.cassette: required for use: replay (a path to a cassette file, relative to the config file)"
        )));
    };
    let text = field(raw, &at, "cassette", env)?;
    let path = readable_cassette(&loaded.base_dir.join(&text), &m.name)?;
    let mut r = ResolvedModel::replay(&m.name, row, &text, path, m.price.clone());
    r.context_window = m.context_window;
    Ok(r)
}

fn entry_http(
    providers: &Providers,
    m: &ModelEntry,
    endpoint: &Endpoint,
    at: &str,
    env: &Env,
) -> Result<HttpSettings, ConfigError> {
    let model = match &m.model {
        Some(raw) => field(raw, at, "model", env)?,
        None => {
            return Err(ConfigError::Model(format!(
                "{at}.model: required (the provider's model id, e.g. gpt-4o-mini)"
            )))
        }
    };
    let ollama = is_ollama(&m.use_);
    let own = class_endpoint(&m.use_);
    let base = match (&m.base_url, own) {
        (Some(raw), _) => field(raw, at, "base_url", env)?,
        (None, _) if ollama => OLLAMA_URL.to_string(),
        (None, Some(own)) => env
            .get(own.url_var)
            .unwrap_or_else(|| own.default_url.to_string()),
        (None, None) => env
            .get(endpoint.url_var)
            .unwrap_or_else(|| endpoint.default_url.to_string()),
    };
    check_base_url(&base, &format!("{at}.base_url"))?;
    let mut base = (endpoint.normalize_base)(&base);
    if ollama && !base.ends_with("/v1") {
        base.push_str("/v1");
    }
    let key = match &m.api_key {
        // An empty key is no key (a blanked-out template value).
        Some(raw) => Some(field(raw, at, "api_key", env)?).filter(|k| !k.trim().is_empty()),
        None => match own {
            Some(own) => env.get(own.key_var),
            None => env_key(endpoint, env),
        },
    };
    check_key(key.as_deref(), &format!("{at}.api_key"))?;
    let own_hosted = own.is_some_and(|o| base.contains(&format!("://{}", o.hosted)));
    if key.is_none() && (providers.needs_key(&base) || own_hosted) {
        return Err(ConfigError::MissingSecret(format!(
            "{at} ('{}') needs an API key: set api_key in the config or {}",
            m.name,
            own.map_or_else(|| key_var(endpoint), |o| o.key_var)
        )));
    }
    let mut http = HttpSettings::new(model, base, key);
    http.max_tokens = m
        .max_tokens
        .or_else(|| endpoint.default_max_tokens.map(|f| f(&http.model)));
    http.temperature = m.temperature;
    http.request_timeout = secs(m.timeout);
    http.stream_idle_timeout = secs(m.stream_idle_timeout);
    http.max_retries = m.max_retries;
    http.reasoning_effort = m.reasoning_effort.clone().filter(|e| !e.trim().is_empty());
    http.extra_body = m.extra_body.clone();
    http.thinking = ThinkingSettings {
        supported: m.supports_thinking,
        requested: None,
        when_enabled: m.when_thinking_enabled.clone().unwrap_or_default(),
        when_disabled: m.when_thinking_disabled.clone().unwrap_or_default(),
    };
    http.prompt_cache = m.prompt_cache;
    check_thinking_budget(&http, m.max_tokens.is_some(), at)?;
    http.use_responses_api = m.use_responses_api.unwrap_or_else(|| {
        m.output_version
            .as_deref()
            .is_some_and(|v| v.trim() == "responses/v1")
    });
    check_body_keys(&http, (endpoint.body_keys)(&http), at)?;
    Ok(http)
}

/// `extra_body` and the thinking maps are merged into the request body last, so a key the
/// client writes itself (the model, the conversation, the tools, streaming) would be
/// replaced silently while every event names the configured model: such a key is a
/// configuration error naming it. Each map counts whatever `--thinking` says.
fn check_body_keys(http: &HttpSettings, reserved: &[&str], at: &str) -> Result<(), ConfigError> {
    let t = &http.thinking;
    let maps = [
        ("extra_body", &http.extra_body),
        ("when_thinking_enabled", &t.when_enabled),
        ("when_thinking_disabled", &t.when_disabled),
    ];
    for (name, map) in maps {
        // A thinking map's own `extra_body` goes to the top level of the body too.
        let nested = match map.get("extra_body") {
            Some(serde_json::Value::Object(inner)) if name != "extra_body" => Some(inner),
            _ => None,
        };
        let keys = map.keys().map(|k| (String::new(), k)).chain(
            nested
                .into_iter()
                .flat_map(|m| m.keys().map(|k| ("extra_body.".to_string(), k))),
        );
        for (prefix, key) in keys {
            if reserved.contains(&key.as_str()) {
                return Err(ConfigError::Model(format!(
                    "{at}.{name}.{prefix}{key}: deerflow writes '{key}' in every request itself \
                     (the model, the conversation, the tools, streaming); it cannot be set here"
                )));
            }
        }
    }
    Ok(())
}

/// Anthropic rejects a thinking budget that is not below `max_tokens` (HTTP 400 on every
/// call), so each budget a request could carry is checked against the output limit it
/// would be sent with: the model's `extra_body`, and the thinking map of each `--thinking`
/// choice the model allows (an explicit `max_tokens` with `when_thinking_enabled` is
/// already checked at load, with its line).
fn check_thinking_budget(http: &HttpSettings, explicit: bool, at: &str) -> Result<(), ConfigError> {
    let Some(max) = http.max_tokens else {
        return Ok(());
    };
    let t = &http.thinking;
    let mut maps = vec![("extra_body", &http.extra_body)];
    if t.supported {
        maps.push(("when_thinking_enabled", &t.when_enabled));
    }
    maps.push(("when_thinking_disabled", &t.when_disabled));
    for (key, map) in maps {
        for (path, budget) in thinking_budgets(map) {
            if budget < max {
                continue;
            }
            let limit = if explicit {
                format!("max_tokens ({max})")
            } else {
                format!(
                    "max_tokens ({max}, the default output limit for {}; set max_tokens to raise it)",
                    http.model
                )
            };
            return Err(ConfigError::Model(format!(
                "{at}.{key}.{path}: {budget} must be less than {limit}: the thinking budget is \
                 part of the output limit"
            )));
        }
    }
    Ok(())
}

/// The `thinking.budget_tokens` of a body map, as a body key or inside its `extra_body`.
fn thinking_budgets(map: &serde_json::Map<String, serde_json::Value>) -> Vec<(&'static str, u64)> {
    let budget = |thinking: Option<&serde_json::Value>| thinking?.get("budget_tokens")?.as_u64();
    let nested = map.get("extra_body").and_then(|e| e.get("thinking"));
    [
        ("thinking.budget_tokens", budget(map.get("thinking"))),
        ("extra_body.thinking.budget_tokens", budget(nested)),
    ]
    .into_iter()
    .filter_map(|(path, b)| Some((path, b?)))
    .collect()
}

/// Load-time validation keeps these positive and finite; fall back rather than panic.
fn secs(v: f64) -> Duration {
    Duration::try_from_secs_f64(v).unwrap_or(Duration::from_secs(600))
}

/// A base URL must be an `http(s)` URL with a host: anything else would fail only after
/// `run_started`, with retries (contract §12).
fn check_base_url(url: &str, named: &str) -> Result<(), ConfigError> {
    let shown = deerflow_base::text::without_url_credentials(url);
    let ok = deerflow_base::text::is_http_url(url);
    if ok {
        Ok(())
    } else {
        Err(ConfigError::Model(format!(
            "{named}: '{}' is not an http(s) URL (e.g. https://api.openai.com/v1)",
            deerflow_base::text::escape_controls(&shown)
        )))
    }
}

/// A key with control characters (a pasted CR/LF) cannot be a header value; the message
/// never shows the key.
fn check_key(key: Option<&str>, named: &str) -> Result<(), ConfigError> {
    match key {
        Some(k) if k.chars().any(char::is_control) => Err(ConfigError::Model(format!(
            "{named} contains control characters (a line break?); remove them"
        ))),
        _ => Ok(()),
    }
}

/// Expands a `$VAR` field; the error names the key and the variable, never a value. A value
/// that starts with `$` but is no whole `$NAME` (`${VAR}`, `$HOME/x`) is an error: it would
/// otherwise be sent literally.
fn field(raw: &Expandable, at: &str, key: &str, env: &Env) -> Result<String, ConfigError> {
    raw.expand(env).map_err(|e| match e {
        Unexpanded::HalfWritten => ConfigError::Model(format!("{at}.{key}: {WHOLE_REFERENCE}")),
        Unexpanded::Unset(var) => ConfigError::MissingSecret(format!(
            "{at}.{key}: {}; export it, or change {at}.{key} in the config",
            unset_message(&var)
        )),
    })
}

fn readable_cassette(path: &Path, name: &str) -> Result<PathBuf, ConfigError> {
    match std::fs::File::open(path) {
        Ok(_) if path.is_file() => Ok(path.to_path_buf()),
        Ok(_) => Err(ConfigError::Model(format!(
            "model '{name}': cassette {} is not a file; pass a replay cassette JSON file",
            path.display()
        ))),
        Err(e) => Err(ConfigError::Model(format!(
            "model '{name}': cannot read cassette {}: {e}; check the path (relative to the \
             current directory for --model replay:PATH, to the config file for cassette:)",
            path.display()
        ))),
    }
}

fn unknown_model(spec: &str, loaded: &LoadedConfig) -> ConfigError {
    ConfigError::Model(format!(
        "unknown model '{spec}': use PROVIDER:MODEL ({}){}",
        loaded.providers.spec_examples(),
        configured_hint(&loaded.config)
    ))
}

fn configured_hint(cfg: &Config) -> String {
    if cfg.models.is_empty() {
        " (no models are configured)".to_string()
    } else {
        let names: Vec<&str> = cfg.models.iter().map(|m| m.name.as_str()).collect();
        format!(" or a configured model: {}", names.join(", "))
    }
}

#[cfg(test)]
#[path = "models_tests.rs"]
mod tests;
