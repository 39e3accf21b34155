//! Gemini's native API (`POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`,
//! the key in the `x-goog-api-key` header): what DeerFlow's
//! `langchain_google_genai:ChatGoogleGenerativeAI` talks to.
//!
//! Gemini differs from the other providers in three ways this client hides: function calls
//! carry no id before Gemini 3 (one is made up, and responses go back by position and
//! name), a call's or text's `thoughtSignature` must come back on the very part it came on
//! (kept in the call's `extra` and in reasoning blocks of type [`PART_BLOCK`]), and tool
//! parameters must be OpenAPI's schema subset, not JSON Schema (`schema.rs`).

use std::sync::Arc;

use super::build_http;
use crate::config::ResolvedModel;
use crate::model::http::{self, StreamCall};
use crate::model::{
    BoxFuture, CallContext, ChatModel, ChatRequest, HttpSettings, ModelError, ModelLimits,
    ModelResponse,
};

/// A recorded provider stream from tests/fixtures (see their README).
#[cfg(test)]
macro_rules! capture {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/providers/gemini/",
            $name
        ))
    };
}

mod request;
mod schema;
mod stream;

pub use request::request_body;
pub use stream::{GeminiAssembler, SAFETY_REASONS};

const PROVIDER: &str = "gemini";

/// The body keys this client writes that a model's `extra_body` or thinking maps may not
/// replace: the model, the conversation and its system instruction (the API reads either spelling), the tools.
pub const BODY_KEYS: &[&str] = &[
    "model",
    "contents",
    "systemInstruction",
    "system_instruction",
    "tools",
];

/// The `type` of a reasoning block holding one part of a Gemini response as the API sent
/// it (`{"type": "gemini_part", "part": {…}, "after_calls": N}`): only this provider reads
/// such blocks back.
pub const PART_BLOCK: &str = "gemini_part";

/// A Gemini model behind the Gemini API (Google AI Studio keys).
pub struct GeminiModel {
    settings: HttpSettings,
    client: reqwest::Client,
    /// As configured (`context_window`), for the context policy.
    context_window: Option<u64>,
}

impl GeminiModel {
    pub fn new(settings: HttpSettings) -> Result<Self, ModelError> {
        let client = http::build_client(&settings, PROVIDER)?;
        Ok(Self {
            settings,
            client,
            context_window: None,
        })
    }

    fn call(&self, req: &ChatRequest) -> StreamCall<'_> {
        let mut headers = vec![("content-type", "application/json".to_string())];
        // In a header, never in the URL: URLs end up in error messages and logs.
        if let Some(key) = &self.settings.api_key {
            headers.push(("x-goog-api-key", key.clone()));
        }
        StreamCall {
            client: &self.client,
            settings: &self.settings,
            provider: PROVIDER,
            url: stream_url(&self.settings.base_url, &self.settings.model),
            headers,
            body: request_body(&self.settings, req).to_string().into_bytes(),
        }
    }
}

impl ChatModel for GeminiModel {
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move { self.call(req).run::<GeminiAssembler>(ctx).await })
    }

    fn limits(&self) -> ModelLimits {
        ModelLimits {
            context_window: self.context_window,
            max_output_tokens: self.settings.max_tokens,
        }
    }
}

/// The registry's constructor: a resolved `gemini` model.
pub fn build(r: &ResolvedModel) -> Result<Arc<dyn ChatModel>, String> {
    build_http(r, |settings, context_window| {
        Ok(GeminiModel {
            context_window,
            ..GeminiModel::new(settings)?
        })
    })
}

/// The base URL as the client wants it: without a trailing `/` or an API version, which
/// the client adds (`https://generativelanguage.googleapis.com/v1beta/` works as well).
pub fn normalize_base(base: &str) -> String {
    let trimmed = base.trim().trim_end_matches('/');
    for version in ["/v1beta", "/v1alpha", "/v1"] {
        if let Some(stripped) = trimmed.strip_suffix(version) {
            return stripped.to_string();
        }
    }
    trimmed.to_string()
}

/// `{base}/v1beta/models/{model}:streamGenerateContent?alt=sse`. The model id may be
/// written `models/NAME` (Google's resource name); it is one path segment either way.
fn stream_url(base: &str, model: &str) -> String {
    let id = model.trim();
    let id = id.strip_prefix("models/").unwrap_or(id);
    let mut segment = String::with_capacity(id.len());
    for byte in id.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            segment.push(char::from(byte));
        } else {
            segment.push_str(&format!("%{byte:02X}"));
        }
    }
    http::endpoint(
        base,
        &format!("/v1beta/models/{segment}:streamGenerateContent?alt=sse"),
    )
}

#[cfg(test)]
mod tests;
