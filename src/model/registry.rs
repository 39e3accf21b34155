//! From a resolved model to its client. `config::PROVIDERS` holds what each provider is as
//! data (its name, key and base-URL variables, default URL, URL normalisation); this is
//! the other half, the constructor of each kind. The `match` is exhaustive, so a new
//! `ProviderKind` does not compile until it has a client here.

use std::sync::Arc;

use super::providers::{anthropic, openai_chat, replay};
use super::ChatModel;
use crate::config::{ProviderKind, ResolvedModel};

/// Builds a client from a resolved model. The error is one line for the user.
pub type Constructor = fn(&ResolvedModel) -> Result<Arc<dyn ChatModel>, String>;

/// The constructor of a kind; `None` for a kind deerflow has no client for.
pub fn constructor(kind: &ProviderKind) -> Option<Constructor> {
    match kind {
        ProviderKind::OpenAi => Some(openai_chat::build),
        ProviderKind::Anthropic => Some(anthropic::build),
        ProviderKind::Replay => Some(replay::build),
        ProviderKind::Unsupported(_) => None,
    }
}

/// The client for a resolved model.
pub fn build(r: &ResolvedModel) -> Result<Arc<dyn ChatModel>, String> {
    match constructor(&r.kind) {
        Some(construct) => construct(r),
        None => Err(cannot_serve(r)),
    }
}

/// A resolved model that lacks what its provider needs (resolution makes this unreachable
/// for the models `config` resolves).
pub(crate) fn cannot_serve(r: &ResolvedModel) -> String {
    format!(
        "model '{}' cannot be served (provider {})",
        r.name,
        r.provider()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{HttpSettings, PROVIDERS};

    fn resolved(kind: ProviderKind, http: Option<HttpSettings>) -> ResolvedModel {
        ResolvedModel {
            name: "m".into(),
            kind,
            model: "x".into(),
            http,
            cassette: None,
            price: None,
            context_window: None,
        }
    }

    #[test]
    fn every_provider_row_has_a_constructor() {
        for row in PROVIDERS {
            assert!(constructor(&row.kind).is_some(), "{}", row.name());
        }
        assert!(constructor(&ProviderKind::Unsupported("x:Y".into())).is_none());
    }

    #[test]
    fn http_kinds_build_from_their_settings() {
        for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
            let http = HttpSettings::new("x", "http://127.0.0.1:1/v1", None);
            assert!(build(&resolved(kind, Some(http))).is_ok());
        }
    }

    #[test]
    fn a_model_without_what_its_provider_needs_cannot_be_served() {
        for kind in [
            ProviderKind::OpenAi,
            ProviderKind::Replay,
            ProviderKind::Unsupported("a:B".into()),
        ] {
            let name = kind.as_str();
            let err = build(&resolved(kind, None)).err();
            assert_eq!(
                err.as_deref(),
                Some(format!("model 'm' cannot be served (provider {name})").as_str())
            );
        }
    }
}
