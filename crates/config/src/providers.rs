//! The providers a model can be resolved against, as data config is given: config knows
//! no provider of its own. `model::registry` owns the table (one row per provider: this
//! data plus the client's constructor) and the caller hands its [`Providers`] to
//! [`load`](super::load) in [`LoadOptions`](super::LoadOptions); resolution, the DeerFlow
//! class mapping and `config check` read only those rows. So a new provider is a row
//! there and a client file beside it, and config stays a leaf that imports nothing.

use serde_json::{Map, Value};
use std::time::Duration;

/// One provider as config sees it: the name `use:` and `--model PROVIDER:…` accept, where
/// its key and base URL come from, and which DeerFlow classes it serves.
#[derive(Debug)]
pub struct ProviderInfo {
    /// The `use:` value, the `PROVIDER:` of `--model PROVIDER:MODEL`, and the `provider`
    /// of events. Unique in a table: rows are compared by it.
    pub name: &'static str,
    /// A model id for examples in messages (`openai:gpt-4o-mini`); `None` for a provider
    /// whose `--model` part is a path.
    pub example_model: Option<&'static str>,
    /// Where an HTTP provider's key and base URL come from; `None` for a provider whose
    /// `--model` part is a cassette path (replay).
    pub endpoint: Option<Endpoint>,
    /// The DeerFlow (LangChain) `use:` class paths this provider serves.
    pub deerflow_classes: DeerFlowClasses,
}

impl PartialEq for ProviderInfo {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// How an HTTP provider is reached when the config does not say.
#[derive(Debug)]
pub struct Endpoint {
    /// The environment variables holding the API key, the first set one wins; the first
    /// is the one error messages name.
    pub key_vars: &'static [&'static str],
    /// The environment variable that overrides [`Endpoint::default_url`].
    pub url_var: &'static str,
    pub default_url: &'static str,
    /// The hosted API's host: a base URL on it needs a key, any other (a local llama.cpp,
    /// Ollama or vLLM, a gateway) may not.
    pub hosted: &'static str,
    /// The base URL as the client wants it (each client appends its own path); the
    /// [`base_url`] helpers cover the usual shapes.
    pub normalize_base: fn(&str) -> String,
    /// The output limit the client sends for a model id when the config sets none, for a
    /// provider whose API requires one (Anthropic); config checks a thinking budget
    /// against it.
    pub default_max_tokens: Option<fn(&str) -> u64>,
    /// The request body keys the client writes itself for a model's settings: the model,
    /// the conversation, the tools, streaming. `extra_body` and the thinking maps may not
    /// set them (they would replace them silently while events name the configured model).
    pub body_keys: fn(&HttpSettings) -> &'static [&'static str],
}

/// Which DeerFlow class paths (`module:Class`) map to a provider. Classes of Google's own
/// SDKs map to none (`deerflow::provider_of`): they speak an API no row serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeerFlowClasses {
    /// Only `use: NAME` selects it.
    None,
    /// Classes whose name contains this text (`ChatAnthropic`, `PatchedChatAnthropic`).
    NameContains(&'static str),
    /// Every class no other row claims: most LangChain classes speak (or are served
    /// through) the OpenAI chat-completions API. One row of a table at most.
    Rest,
}

/// The provider table config resolves against, in the order messages list the providers.
#[derive(Debug, Clone)]
pub struct Providers {
    rows: Vec<&'static ProviderInfo>,
}

impl Providers {
    pub fn new(rows: impl IntoIterator<Item = &'static ProviderInfo>) -> Self {
        Self {
            rows: rows.into_iter().collect(),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &'static ProviderInfo> + '_ {
        self.rows.iter().copied()
    }

    /// The row of a provider by its name (`openai`).
    pub fn by_name(&self, name: &str) -> Option<&'static ProviderInfo> {
        self.iter().find(|p| p.name == name)
    }

    /// The hosted APIs need a key; a custom base URL (Ollama, llama.cpp, vLLM) may not.
    pub fn needs_key(&self, base: &str) -> bool {
        self.iter()
            .filter_map(|p| p.endpoint.as_ref())
            .any(|e| base.contains(&format!("://{}", e.hosted)))
    }

    /// `openai:MODEL, anthropic:MODEL or replay:PATH`: every accepted `--model` form.
    pub fn spec_forms(&self) -> String {
        let forms: Vec<String> = self
            .iter()
            .map(|p| match p.example_model {
                Some(_) => format!("{}:MODEL", p.name),
                None => format!("{}:PATH", p.name),
            })
            .collect();
        match forms.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => forms.join(""),
        }
    }

    /// `openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, replay:PATH`: one example of each.
    pub fn spec_examples(&self) -> String {
        let examples: Vec<String> = self
            .iter()
            .map(|p| format!("{}:{}", p.name, p.example_model.unwrap_or("PATH")))
            .collect();
        examples.join(", ")
    }
}

/// Base-URL normalisations for [`Endpoint::normalize_base`].
pub mod base_url {
    /// Without surrounding blanks or a trailing `/` (a client appending `/chat/completions`
    /// to a base up to `/v1`).
    pub fn trimmed(base: &str) -> String {
        base.trim().trim_end_matches('/').to_string()
    }

    /// [`trimmed`] and without a final `/v1`, for a client that adds `/v1/…` itself.
    pub fn without_v1(base: &str) -> String {
        let trimmed = trimmed(base);
        match trimmed.strip_suffix("/v1") {
            Some(stripped) => stripped.to_string(),
            None => trimmed,
        }
    }
}

/// Connection settings of an HTTP provider, resolved from the config and the environment.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSettings {
    /// The provider's model id (`gpt-4o-mini`).
    pub model: String,
    /// Normalised by the provider's [`Endpoint::normalize_base`]: openai up to `/v1` (the
    /// client adds `/chat/completions`), anthropic without `/v1` (it adds `/v1/messages`).
    pub base_url: String,
    pub api_key: Option<String>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    /// Bound on a whole request, stream included.
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// Silence in a stream longer than this fails the request.
    pub stream_idle_timeout: Duration,
    pub max_retries: u32,
    /// Sent as OpenAI's `reasoning_effort`; also marks the model as a reasoning model.
    pub reasoning_effort: Option<String>,
    /// The model's own `extra_body`, merged into every request.
    pub extra_body: Map<String, Value>,
    pub thinking: ThinkingSettings,
    /// Anthropic: mark the prompt-cache breakpoints (`prompt_cache`, on by default).
    pub prompt_cache: bool,
    /// openai: the Responses API (`/responses`) instead of Chat Completions.
    pub use_responses_api: bool,
}

/// A model's thinking configuration (contract §10) and the run's `--thinking` choice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThinkingSettings {
    pub supported: bool,
    /// `--thinking on|off`; `None` is the model's default (on when supported).
    pub requested: Option<bool>,
    pub when_enabled: Map<String, Value>,
    pub when_disabled: Map<String, Value>,
}

impl ThinkingSettings {
    /// Thinking is on only for a model that supports it: `--thinking on` cannot make a
    /// model think that was not configured to.
    pub fn is_on(&self) -> bool {
        self.supported && self.requested.unwrap_or(true)
    }

    /// The map to merge into each request body now.
    pub fn active(&self) -> &Map<String, Value> {
        if self.is_on() {
            &self.when_enabled
        } else {
            &self.when_disabled
        }
    }
}

impl HttpSettings {
    /// Merges the model's `extra_body` and the active thinking map into a request body
    /// built by a provider: the thinking map's `extra_body` entries and its other keys go to
    /// the top level. Later wins: the built body, then `extra_body`, then thinking.
    pub fn merge_extra_body(&self, body: &mut Map<String, Value>) {
        for (key, value) in &self.extra_body {
            body.insert(key.clone(), value.clone());
        }
        for (key, value) in self.thinking.active() {
            match (key.as_str(), value) {
                ("extra_body", Value::Object(inner)) => {
                    for (k, v) in inner {
                        body.insert(k.clone(), v.clone());
                    }
                }
                _ => {
                    body.insert(key.clone(), value.clone());
                }
            }
        }
    }

    pub fn new(
        model: impl Into<String>,
        base_url: impl Into<String>,
        api_key: Option<String>,
    ) -> Self {
        Self {
            model: model.into(),
            base_url: base_url.into(),
            api_key,
            max_tokens: None,
            temperature: None,
            request_timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(10),
            stream_idle_timeout: Duration::from_secs(120),
            max_retries: 3,
            reasoning_effort: None,
            extra_body: Map::new(),
            thinking: ThinkingSettings::default(),
            prompt_cache: true,
            use_responses_api: false,
        }
    }
}

/// A table shaped like deerflow's own for config's tests, which cannot see
/// `model::registry` (a test there checks the two agree).
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use super::*;

    pub static ROWS: [ProviderInfo; 3] = [
        ProviderInfo {
            name: "openai",
            example_model: Some("gpt-4o-mini"),
            endpoint: Some(Endpoint {
                key_vars: &["OPENAI_API_KEY"],
                url_var: "OPENAI_BASE_URL",
                default_url: "https://api.openai.com/v1",
                hosted: "api.openai.com",
                normalize_base: base_url::trimmed,
                default_max_tokens: None,
                body_keys: |_| &["model", "messages", "stream", "tools"],
            }),
            deerflow_classes: DeerFlowClasses::Rest,
        },
        ProviderInfo {
            name: "anthropic",
            example_model: Some("claude-sonnet-4-5"),
            endpoint: Some(Endpoint {
                key_vars: &["ANTHROPIC_API_KEY"],
                url_var: "ANTHROPIC_BASE_URL",
                default_url: "https://api.anthropic.com",
                hosted: "api.anthropic.com",
                normalize_base: base_url::without_v1,
                default_max_tokens: Some(|_| 32_000),
                body_keys: |_| &["model", "messages", "system", "stream", "tools"],
            }),
            deerflow_classes: DeerFlowClasses::NameContains("Anthropic"),
        },
        ProviderInfo {
            name: "replay",
            example_model: None,
            endpoint: None,
            deerflow_classes: DeerFlowClasses::None,
        },
    ];

    pub fn providers() -> Providers {
        Providers::new(&ROWS)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::providers;
    use super::*;

    #[test]
    fn messages_list_every_provider() {
        let p = providers();
        assert_eq!(
            p.spec_forms(),
            "openai:MODEL, anthropic:MODEL or replay:PATH"
        );
        assert_eq!(
            p.spec_examples(),
            "openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, replay:PATH"
        );
        let one = Providers::new(&testing::ROWS[2..]);
        assert_eq!(one.spec_forms(), "replay:PATH");
        assert_eq!(Providers::new([]).spec_forms(), "");
    }

    #[test]
    fn rows_are_found_by_name() {
        let p = providers();
        assert_eq!(p.by_name("openai").map(|r| r.name), Some("openai"));
        assert!(p.by_name("gemini").is_none());
        assert!(p.by_name("OpenAI").is_none());
    }

    #[test]
    fn keys_are_needed_on_hosted_apis_only() {
        let p = providers();
        assert!(p.needs_key("https://api.openai.com/v1"));
        assert!(p.needs_key("https://api.anthropic.com"));
        assert!(!p.needs_key("http://127.0.0.1:8080/v1"));
        assert!(!p.needs_key("https://gateway.example/v1"));
    }

    #[test]
    fn base_urls_are_normalized() {
        assert_eq!(base_url::trimmed(" http://h/v1/ "), "http://h/v1");
        assert_eq!(
            base_url::without_v1("https://api.anthropic.com/v1/"),
            "https://api.anthropic.com"
        );
        assert_eq!(base_url::without_v1("http://h/"), "http://h");
    }
}
