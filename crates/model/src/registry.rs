//! The provider table: one row per provider, from its name to its client's constructor,
//! with what config needs to resolve and check a model of it (key and base-URL variables,
//! default URL, base-URL normalisation, the DeerFlow classes it serves) as
//! [`ProviderInfo`] data. cli hands [`providers`] to `config::load`, which knows no
//! provider of its own; [`build`] turns the model config resolved into a client.
//!
//! Adding a provider:
//! 1. a file `providers/NAME.rs` declared in `providers/mod.rs` (`pub mod NAME;`): for an
//!    HTTP API, its [`Wire`](super::providers::http_model::Wire) (request body, stream
//!    assembler, endpoint path, how the key is sent); otherwise a [`ChatModel`] and its
//!    `build(&ResolvedModel) -> Result<Arc<dyn ChatModel>, String>`;
//! 2. a row in [`PROVIDERS`], whose `build` is `HttpModel::<NAME::ItsWire>::build` for an
//!    HTTP API.
//!
//! Nothing else: `use: NAME`, `--model NAME:MODEL`, the error messages listing the
//! `--model` forms, `config check`'s missing-key warnings and the DeerFlow class mapping
//! all read the row.

use std::sync::Arc;

use super::providers::http_model::HttpModel;
use super::providers::{anthropic, cannot_serve, gemini, openai_chat, openai_responses, replay};
use super::ChatModel;
use deerflow_config::{
    base_url, DeerFlowClasses, Endpoint, HttpSettings, ProviderInfo, Providers, ResolvedModel,
};

/// Builds a client from a resolved model. The error is one line for the user.
pub type Constructor = fn(&ResolvedModel) -> Result<Arc<dyn ChatModel>, String>;

/// One row of the table.
#[derive(Debug)]
pub struct Provider {
    pub info: ProviderInfo,
    pub build: Constructor,
}

/// Every provider, in the order messages list them.
pub static PROVIDERS: &[Provider] = &[
    Provider {
        info: ProviderInfo {
            name: "openai",
            example_model: Some("gpt-4o-mini"),
            endpoint: Some(Endpoint {
                key_vars: &["OPENAI_API_KEY"],
                url_var: "OPENAI_BASE_URL",
                default_url: "https://api.openai.com/v1",
                hosted: "api.openai.com",
                normalize_base: base_url::trimmed,
                default_max_tokens: None,
                body_keys: openai_body_keys,
            }),
            // ChatOpenAI, ChatDeepSeek, DeerFlow's patched classes, vLLM, Ollama, …
            deerflow_classes: DeerFlowClasses::Rest,
        },
        build: openai,
    },
    Provider {
        info: ProviderInfo {
            name: "anthropic",
            example_model: Some("claude-sonnet-4-5"),
            endpoint: Some(Endpoint {
                key_vars: &["ANTHROPIC_API_KEY"],
                url_var: "ANTHROPIC_BASE_URL",
                default_url: "https://api.anthropic.com",
                hosted: "api.anthropic.com",
                normalize_base: base_url::without_v1,
                default_max_tokens: Some(anthropic::default_max_tokens),
                body_keys: |_| anthropic::BODY_KEYS,
            }),
            deerflow_classes: DeerFlowClasses::NameContains("Anthropic"),
        },
        build: HttpModel::<anthropic::MessagesWire>::build,
    },
    Provider {
        info: ProviderInfo {
            name: "gemini",
            example_model: Some("gemini-2.5-flash"),
            endpoint: Some(Endpoint {
                // LangChain's ChatGoogleGenerativeAI reads GOOGLE_API_KEY.
                key_vars: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
                url_var: "GEMINI_BASE_URL",
                default_url: "https://generativelanguage.googleapis.com",
                hosted: "generativelanguage.googleapis.com",
                normalize_base: gemini::normalize_base,
                // Gemini's output limit is optional: the server's default applies.
                default_max_tokens: None,
                body_keys: |_| gemini::BODY_KEYS,
            }),
            // langchain_google_genai:ChatGoogleGenerativeAI (never Vertex AI's classes).
            deerflow_classes: DeerFlowClasses::NameContains("GoogleGenerativeAI"),
        },
        build: HttpModel::<gemini::GeminiWire>::build,
    },
    Provider {
        info: ProviderInfo {
            name: "replay",
            example_model: None,
            endpoint: None,
            deerflow_classes: DeerFlowClasses::None,
        },
        build: replay::build,
    },
];

/// `use: openai` speaks Chat Completions, or the Responses API when the model asks for it
/// (`use_responses_api`): one provider, two wire protocols.
fn openai(r: &ResolvedModel) -> Result<Arc<dyn ChatModel>, String> {
    if r.http.as_ref().is_some_and(|h| h.use_responses_api) {
        HttpModel::<openai_responses::ResponsesWire>::build(r)
    } else {
        HttpModel::<openai_chat::ChatWire>::build(r)
    }
}

/// The body keys of the wire protocol the `openai` row speaks for these settings.
fn openai_body_keys(h: &HttpSettings) -> &'static [&'static str] {
    if h.use_responses_api {
        openai_responses::BODY_KEYS
    } else {
        openai_chat::BODY_KEYS
    }
}

/// A provider table: deerflow's own ([`Registry::STANDARD`]), or another in tests.
#[derive(Debug, Clone, Copy)]
pub struct Registry {
    rows: &'static [Provider],
}

impl Registry {
    pub const STANDARD: Registry = Registry::new(PROVIDERS);

    pub const fn new(rows: &'static [Provider]) -> Self {
        Self { rows }
    }

    /// The rows as config sees them, for `config::LoadOptions::providers`.
    pub fn providers(&self) -> Providers {
        Providers::new(self.rows.iter().map(|p| &p.info))
    }

    /// The client for a model config resolved against [`Registry::providers`].
    pub fn build(&self, r: &ResolvedModel) -> Result<Arc<dyn ChatModel>, String> {
        match self.rows.iter().find(|p| p.info == *r.row) {
            Some(p) => (p.build)(r),
            None => Err(cannot_serve(r)),
        }
    }
}

/// deerflow's providers, for `config::LoadOptions::providers`.
pub fn providers() -> Providers {
    Registry::STANDARD.providers()
}

/// The client for a resolved model.
pub fn build(r: &ResolvedModel) -> Result<Arc<dyn ChatModel>, String> {
    Registry::STANDARD.build(r)
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
