//! Gemini's native API (`POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`,
//! the key in the `x-goog-api-key` header): what DeerFlow's
//! `langchain_google_genai:ChatGoogleGenerativeAI` talks to.
//!
//! Gemini differs from the other providers in three ways this client hides: function calls
//! carry no id before Gemini 3 (one is made up, and responses go back by position and
//! name), a call's or text's `thoughtSignature` must come back on the very part it came on
//! (kept in the call's `extra` and in reasoning blocks of type [`PART_BLOCK`]), and tool
//! parameters must be OpenAPI's schema subset, not JSON Schema (`schema.rs`).

use super::http_model::{Auth, HttpModel, Wire};
use crate::http;
use crate::{ChatRequest, HttpSettings};

mod request;
mod schema;
mod stream;

pub use request::{request_body, request_bytes};
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

/// Gemini's native API on the wire.
#[derive(Default)]
pub struct GeminiWire;

impl Wire for GeminiWire {
    const PROVIDER: &'static str = PROVIDER;
    const AUTH: Auth = Auth::Header("x-goog-api-key");
    type Assembler = GeminiAssembler;

    fn url(settings: &HttpSettings) -> String {
        stream_url(&settings.base_url, &settings.model)
    }

    fn body(&self, settings: &HttpSettings, req: &ChatRequest) -> Vec<u8> {
        request_bytes(settings, req)
    }
}

/// A Gemini model behind the Gemini API (Google AI Studio keys).
pub type GeminiModel = HttpModel<GeminiWire>;

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
