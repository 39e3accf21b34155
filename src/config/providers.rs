//! The providers deerflow can serve, as data: the names `use:` and `--model PROVIDER:…`
//! accept, where each finds its key and base URL, and the connection settings a model
//! resolves to. The clients themselves live in `model::providers`, and
//! `model::registry` maps each [`ProviderKind`] to its constructor; config only needs to
//! know enough to resolve and check a model without building it, so it stays a leaf.

use std::time::Duration;

use super::schema::ProviderKind;

/// One provider deerflow has a client for.
#[derive(Debug)]
pub struct Provider {
    pub kind: ProviderKind,
    /// A model id for examples in messages (`openai:gpt-4o-mini`); `None` for a provider
    /// whose `--model` part is a path.
    pub example_model: Option<&'static str>,
    /// Where an HTTP provider's key and base URL come from; `None` for replay.
    pub endpoint: Option<Endpoint>,
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
    /// The base URL as the client wants it (each client appends its own path).
    pub normalize_base: fn(&str) -> String,
}

/// Every provider, in the order messages list them. Adding one = a [`ProviderKind`]
/// variant (its name is `ProviderKind::as_str`), a row here, and its constructor in
/// `model::registry` (a `match` there fails to compile until it has one).
pub static PROVIDERS: &[Provider] = &[
    Provider {
        kind: ProviderKind::OpenAi,
        example_model: Some("gpt-4o-mini"),
        endpoint: Some(Endpoint {
            key_vars: &["OPENAI_API_KEY"],
            url_var: "OPENAI_BASE_URL",
            default_url: "https://api.openai.com/v1",
            hosted: "api.openai.com",
            normalize_base: no_trailing_slash,
        }),
    },
    Provider {
        kind: ProviderKind::Anthropic,
        example_model: Some("claude-sonnet-4-5"),
        endpoint: Some(Endpoint {
            key_vars: &["ANTHROPIC_API_KEY"],
            url_var: "ANTHROPIC_BASE_URL",
            default_url: "https://api.anthropic.com",
            hosted: "api.anthropic.com",
            normalize_base: without_v1,
        }),
    },
    Provider {
        kind: ProviderKind::Replay,
        example_model: None,
        endpoint: None,
    },
];

impl Provider {
    /// The `use:` value, the `PROVIDER:` of `--model PROVIDER:MODEL`, and the `provider`
    /// of events.
    pub fn name(&self) -> &'static str {
        self.kind.as_str()
    }
}

/// The row of a provider by its name (`openai`).
pub fn by_name(name: &str) -> Option<&'static Provider> {
    PROVIDERS.iter().find(|p| p.name() == name)
}

/// The row of a kind; `None` for [`ProviderKind::Unsupported`].
pub fn of_kind(kind: &ProviderKind) -> Option<&'static Provider> {
    PROVIDERS.iter().find(|p| p.kind == *kind)
}

/// The hosted APIs need a key; a custom base URL (Ollama, llama.cpp, vLLM) may not.
pub fn needs_key(base: &str) -> bool {
    PROVIDERS
        .iter()
        .filter_map(|p| p.endpoint.as_ref())
        .any(|e| base.contains(&format!("://{}", e.hosted)))
}

/// `openai:MODEL, anthropic:MODEL or replay:PATH`: every accepted `--model` form.
pub fn spec_forms() -> String {
    let forms: Vec<String> = PROVIDERS
        .iter()
        .map(|p| match p.example_model {
            Some(_) => format!("{}:MODEL", p.name()),
            None => format!("{}:PATH", p.name()),
        })
        .collect();
    match forms.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => forms.join(""),
    }
}

/// `openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, replay:PATH`: one example of each.
pub fn spec_examples() -> String {
    let examples: Vec<String> = PROVIDERS
        .iter()
        .map(|p| format!("{}:{}", p.name(), p.example_model.unwrap_or("PATH")))
        .collect();
    examples.join(", ")
}

fn no_trailing_slash(base: &str) -> String {
    base.trim().trim_end_matches('/').to_string()
}

/// Anthropic's base goes without `/v1` (the client adds `/v1/messages`).
fn without_v1(base: &str) -> String {
    let trimmed = no_trailing_slash(base);
    match trimmed.strip_suffix("/v1") {
        Some(stripped) => stripped.to_string(),
        None => trimmed,
    }
}

/// Connection settings of an HTTP provider, resolved from the config and the environment.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSettings {
    /// The provider's model id (`gpt-4o-mini`).
    pub model: String,
    /// openai: up to `/v1` (the client adds `/chat/completions`);
    /// anthropic: without `/v1` (the client adds `/v1/messages`).
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
}

impl HttpSettings {
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_list_every_provider() {
        assert_eq!(spec_forms(), "openai:MODEL, anthropic:MODEL or replay:PATH");
        assert_eq!(
            spec_examples(),
            "openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, replay:PATH"
        );
    }

    #[test]
    fn rows_are_found_by_name_and_kind() {
        assert_eq!(by_name("openai").map(Provider::name), Some("openai"));
        assert!(by_name("gemini").is_none());
        assert!(by_name("OpenAI").is_none());
        for p in PROVIDERS {
            assert!(std::ptr::eq(of_kind(&p.kind).unwrap(), p));
        }
        assert!(of_kind(&ProviderKind::Unsupported("x".into())).is_none());
    }

    #[test]
    fn keys_are_needed_on_hosted_apis_only() {
        assert!(needs_key("https://api.openai.com/v1"));
        assert!(needs_key("https://api.anthropic.com"));
        assert!(!needs_key("http://127.0.0.1:8080/v1"));
        assert!(!needs_key("https://gateway.example/v1"));
    }

    #[test]
    fn base_urls_are_normalized_per_provider() {
        let norm = |name: &str, url: &str| {
            (by_name(name)
                .unwrap()
                .endpoint
                .as_ref()
                .unwrap()
                .normalize_base)(url)
        };
        assert_eq!(norm("openai", " http://h/v1/ "), "http://h/v1");
        assert_eq!(
            norm("anthropic", "https://api.anthropic.com/v1/"),
            "https://api.anthropic.com"
        );
        assert_eq!(norm("anthropic", "http://h/"), "http://h");
    }
}
