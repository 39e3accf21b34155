//! One module per provider, each a [`ChatModel`](super::ChatModel) and a `build`
//! constructor, which its row in `registry::PROVIDERS` names (see `registry` for adding
//! one). The HTTP ones share `http` (transport) and `sse` (framing) and only build request
//! bodies and assemble stream events.

pub mod anthropic;
pub mod gemini;
pub mod openai_chat;
pub mod openai_responses;
pub mod replay;

use crate::config::ResolvedModel;

/// A resolved model that lacks what its provider needs (resolution makes this unreachable
/// for the models `config` resolves against the same table).
pub(crate) fn cannot_serve(r: &ResolvedModel) -> String {
    format!(
        "model '{}' cannot be served (provider {})",
        r.name,
        r.provider()
    )
}
