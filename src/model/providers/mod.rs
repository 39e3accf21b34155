//! One module per provider, each a [`ChatModel`](super::ChatModel) and a `build`
//! constructor, which its row in `registry::PROVIDERS` names (see `registry` for adding
//! one). The HTTP ones share `http` (transport) and `sse` (framing) and only build request
//! bodies and assemble stream events.

pub mod anthropic;
pub mod gemini;
pub mod openai_chat;
pub mod openai_responses;
pub mod replay;

use std::sync::Arc;

use super::{ChatModel, HttpSettings, ModelError};
use crate::config::ResolvedModel;

/// The `build` of an HTTP provider: its client made from the resolved settings (`new` gets
/// them and the model's context window).
pub(crate) fn build_http<M: ChatModel + 'static>(
    r: &ResolvedModel,
    new: impl FnOnce(HttpSettings, Option<u64>) -> Result<M, ModelError>,
) -> Result<Arc<dyn ChatModel>, String> {
    let Some(settings) = &r.http else {
        return Err(cannot_serve(r));
    };
    let model = new(settings.clone(), r.context_window).map_err(|e| e.to_string())?;
    Ok(Arc::new(model))
}

/// A resolved model that lacks what its provider needs (resolution makes this unreachable
/// for the models `config` resolves against the same table).
pub(crate) fn cannot_serve(r: &ResolvedModel) -> String {
    format!(
        "model '{}' cannot be served (provider {})",
        r.name,
        r.provider()
    )
}
