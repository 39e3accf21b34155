//! One module per provider, each named by its row in `registry::PROVIDERS` (see `registry`
//! for adding one). The HTTP ones are one generic client, [`http_model::HttpModel`], over
//! each protocol's [`http_model::Wire`]: a request body, a stream assembler, an endpoint
//! and how the key is sent; the transport is `model::http`, the SSE framing `model::sse`.

/// A recorded provider stream from tests/fixtures (see their README); defined before the
/// provider modules so each of them can use it.
#[cfg(test)]
macro_rules! capture {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/providers/",
            $name
        ))
    };
}

pub mod anthropic;
pub mod gemini;
pub mod http_model;
pub mod openai_chat;
pub mod openai_responses;
pub mod replay;

#[cfg(test)]
mod image_tests;

use deerflow_config::ResolvedModel;

/// A resolved model that lacks what its provider needs (resolution makes this unreachable
/// for the models `config` resolves against the same table).
pub(crate) fn cannot_serve(r: &ResolvedModel) -> String {
    format!(
        "model '{}' cannot be served (provider {})",
        r.name,
        r.provider()
    )
}
