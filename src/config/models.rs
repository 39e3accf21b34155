//! Model choice (`--model` → `$DEERFLOW_MODEL` → the first `models:` entry) and resolution
//! of a choice into what a provider client needs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::deerflow::is_ollama;
use super::env::{expand, unset_message, Env};
use super::error::ConfigError;
use super::load::LoadedConfig;
use super::providers::{self, Endpoint, HttpSettings};
use super::schema::{Config, ModelEntry, Price, ProviderKind};

/// langchain_ollama's default server.
const OLLAMA_URL: &str = "http://localhost:11434";

/// A model ready for a provider client.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedModel {
    /// As the user chose it: the `models[].name`, or the `PROVIDER:MODEL` text.
    pub name: String,
    /// Which client serves it (`model::registry` builds it).
    pub kind: ProviderKind,
    /// The provider's model id; for replay the cassette path as written.
    pub model: String,
    /// openai/anthropic only.
    pub http: Option<HttpSettings>,
    /// replay only: an absolute path to a readable file.
    pub cassette: Option<PathBuf>,
    pub price: Option<Price>,
    /// Prompt + completion capacity, when the config says (the client reports it as its
    /// limit, for summarization's `fraction` sizes).
    pub context_window: Option<u64>,
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
        return Err(unknown_model(spec, &loaded.config));
    };
    if model.trim().is_empty() {
        return Err(ConfigError::Model(format!(
            "model '{spec}': the part after '{provider}:' is empty; use e.g. openai:gpt-4o-mini"
        )));
    }
    let Some(row) = providers::by_name(provider) else {
        return Err(ConfigError::Model(format!(
            "unknown model provider '{provider}' in '{spec}': use {}{}",
            providers::spec_forms(),
            configured_hint(&loaded.config)
        )));
    };
    match &row.endpoint {
        Some(endpoint) => {
            let http = spec_http(endpoint, model, env, spec)?;
            Ok(ResolvedModel::http(spec, &row.kind, http, None))
        }
        None => {
            let path = readable_cassette(&cwd.join(model), spec)?;
            Ok(ResolvedModel::replay(spec, model, path, None))
        }
    }
}

impl ResolvedModel {
    /// The provider's name, as events show it: `openai`, `anthropic` or `replay`.
    pub fn provider(&self) -> &'static str {
        self.kind.as_str()
    }

    fn http(name: &str, kind: &ProviderKind, http: HttpSettings, price: Option<Price>) -> Self {
        Self {
            name: name.to_string(),
            kind: kind.clone(),
            model: http.model.clone(),
            http: Some(http),
            cassette: None,
            price,
            context_window: None,
        }
    }

    fn replay(name: &str, text: &str, cassette: PathBuf, price: Option<Price>) -> Self {
        Self {
            name: name.to_string(),
            kind: ProviderKind::Replay,
            model: text.to_string(),
            http: None,
            cassette: Some(cassette),
            price,
            context_window: None,
        }
    }
}

/// `openai:NAME` / `anthropic:NAME` without a config entry: everything from the environment.
fn spec_http(
    endpoint: &Endpoint,
    model: &str,
    env: &Env,
    spec: &str,
) -> Result<HttpSettings, ConfigError> {
    let base = env
        .get(endpoint.url_var)
        .unwrap_or_else(|| endpoint.default_url.to_string());
    let key = env_key(endpoint, env);
    if key.is_none() && providers::needs_key(&base) {
        return Err(ConfigError::MissingSecret(format!(
            "model '{spec}' needs an API key: set {} (or add a models: entry with api_key)",
            key_var(endpoint)
        )));
    }
    Ok(HttpSettings::new(
        model,
        (endpoint.normalize_base)(&base),
        key,
    ))
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
    let kind = match &m.provider {
        ProviderKind::Unsupported(class) => {
            return Err(ConfigError::Model(format!(
                "{at} ('{}'): use: {class} is not supported (deerflow has no client for \
                 Gemini's native API); point it at an OpenAI-compatible endpoint with use: \
                 openai and base_url",
                m.name
            )))
        }
        kind => kind,
    };
    let Some(row) = providers::of_kind(kind) else {
        return Err(ConfigError::Model(format!(
            "{at} ('{}'): provider {} has no client",
            m.name,
            kind.as_str()
        )));
    };
    if let Some(endpoint) = &row.endpoint {
        let http = entry_http(m, endpoint, &at, env)?;
        let mut r = ResolvedModel::http(&m.name, kind, http, m.price.clone());
        r.context_window = m.context_window;
        return Ok(r);
    }
    let Some(raw) = &m.cassette else {
        return Err(ConfigError::Model(format!(
            "{at}.cassette: required for use: replay (a path to a cassette file, relative to the config file)"
        )));
    };
    let text = field(raw, &at, "cassette", env)?;
    let path = readable_cassette(&loaded.base_dir.join(&text), &m.name)?;
    let mut r = ResolvedModel::replay(&m.name, &text, path, m.price.clone());
    r.context_window = m.context_window;
    Ok(r)
}

fn entry_http(
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
    let base = match &m.base_url {
        Some(raw) => field(raw, at, "base_url", env)?,
        None if ollama => OLLAMA_URL.to_string(),
        None => env
            .get(endpoint.url_var)
            .unwrap_or_else(|| endpoint.default_url.to_string()),
    };
    let mut base = (endpoint.normalize_base)(&base);
    if ollama && !base.ends_with("/v1") {
        base.push_str("/v1");
    }
    let key = match &m.api_key {
        // An empty key is no key (a blanked-out template value).
        Some(raw) => Some(field(raw, at, "api_key", env)?).filter(|k| !k.trim().is_empty()),
        None => env_key(endpoint, env),
    };
    if key.is_none() && providers::needs_key(&base) {
        return Err(ConfigError::MissingSecret(format!(
            "{at} ('{}') needs an API key: set api_key in the config or {}",
            m.name,
            key_var(endpoint)
        )));
    }
    let mut http = HttpSettings::new(model, base, key);
    http.max_tokens = m.max_tokens;
    http.temperature = m.temperature;
    http.request_timeout = secs(m.timeout);
    http.stream_idle_timeout = secs(m.stream_idle_timeout);
    http.max_retries = m.max_retries;
    Ok(http)
}

/// Load-time validation keeps these positive and finite; fall back rather than panic.
fn secs(v: f64) -> Duration {
    Duration::try_from_secs_f64(v).unwrap_or(Duration::from_secs(600))
}

/// Expands a `$VAR` field; the error names the key and the variable, never a value.
fn field(raw: &str, at: &str, key: &str, env: &Env) -> Result<String, ConfigError> {
    expand(raw, env).map_err(|var| {
        ConfigError::MissingSecret(format!(
            "{at}.{key}: {}; export it, or change {at}.{key} in the config",
            unset_message(&var)
        ))
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

fn unknown_model(spec: &str, cfg: &Config) -> ConfigError {
    ConfigError::Model(format!(
        "unknown model '{spec}': use PROVIDER:MODEL ({}){}",
        providers::spec_examples(),
        configured_hint(cfg)
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
