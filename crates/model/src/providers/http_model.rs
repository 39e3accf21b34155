//! The one HTTP provider: the shell every HTTP protocol shares (its [`HttpService`], the
//! headers with the key, the endpoint, `limits()`, `build()` from a resolved model),
//! written once over a per-protocol [`Wire`]: the request body, the stream assembler, the
//! endpoint path and how the key is sent. A provider is its `Wire` impl plus its row in
//! `registry::PROVIDERS` (`build: HttpModel::<ItsWire>::build`).

use std::sync::Arc;

use crate::http::{Assembler, HttpService, StreamCall};
use crate::{
    BoxFuture, CallContext, ChatModel, ChatRequest, HttpSettings, ModelError, ModelLimits,
    ModelResponse,
};
use deerflow_config::ResolvedModel;

use super::cannot_serve;

/// How a protocol sends the API key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Auth {
    /// `authorization: Bearer KEY`.
    Bearer,
    /// The key alone in this header (`x-api-key`, `x-goog-api-key`). Never in the URL:
    /// URLs end up in error messages and logs.
    Header(&'static str),
}

/// One wire protocol: what differs between HTTP providers.
pub trait Wire: Default + Send + Sync + 'static {
    /// The provider's name in events and errors.
    const PROVIDER: &'static str;
    const AUTH: Auth;
    /// Sent on every request after the content type, before the key.
    const HEADERS: &'static [(&'static str, &'static str)] = &[];
    type Assembler: Assembler + Send;

    /// The URL every request of this model posts to.
    fn url(settings: &HttpSettings) -> String;

    /// The serialized request body. `&self` holds what a protocol keeps between calls
    /// (openai_chat's cache of serialized messages).
    fn body(&self, settings: &HttpSettings, req: &ChatRequest) -> Vec<u8>;

    /// The output limit the model reports.
    fn max_output_tokens(settings: &HttpSettings) -> Option<u64> {
        settings.max_tokens
    }
}

/// A model behind an HTTP API speaking `W`.
pub struct HttpModel<W: Wire> {
    settings: HttpSettings,
    service: HttpService,
    /// Made once: the same on every call.
    url: String,
    headers: Vec<(&'static str, String)>,
    /// As configured (`context_window`), for the context policy.
    pub(crate) context_window: Option<u64>,
    wire: W,
}

impl<W: Wire> HttpModel<W> {
    pub fn new(settings: HttpSettings) -> Result<Self, ModelError> {
        let service = HttpService::for_model(&settings, W::PROVIDER)?;
        let mut headers = vec![("content-type", "application/json".to_string())];
        headers.extend(W::HEADERS.iter().map(|(k, v)| (*k, v.to_string())));
        if let Some(key) = &settings.api_key {
            headers.push(match W::AUTH {
                Auth::Bearer => ("authorization", format!("Bearer {key}")),
                Auth::Header(name) => (name, key.clone()),
            });
        }
        Ok(Self {
            url: W::url(&settings),
            headers,
            settings,
            service,
            context_window: None,
            wire: W::default(),
        })
    }

    /// The registry's constructor: a resolved model of a provider speaking `W`.
    pub fn build(r: &ResolvedModel) -> Result<Arc<dyn ChatModel>, String> {
        let Some(settings) = &r.http else {
            return Err(cannot_serve(r));
        };
        let mut model = Self::new(settings.clone()).map_err(|e| e.to_string())?;
        model.context_window = r.context_window;
        Ok(Arc::new(model))
    }

    fn call(&self, req: &ChatRequest) -> StreamCall<'_> {
        StreamCall {
            service: &self.service,
            settings: &self.settings,
            url: &self.url,
            headers: &self.headers,
            body: self.wire.body(&self.settings, req),
        }
    }
}

impl<W: Wire> ChatModel for HttpModel<W> {
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move { self.call(req).run::<W::Assembler>(ctx).await })
    }

    fn limits(&self) -> ModelLimits {
        ModelLimits {
            context_window: self.context_window,
            max_output_tokens: W::max_output_tokens(&self.settings),
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::http;
    use crate::providers::openai_chat::{test_data, OpenAiAssembler};
    use crate::test_support::{serve, Reply};

    /// A whole provider, as a new one would be written: its wire and nothing else.
    #[derive(Default)]
    struct EchoWire;

    impl Wire for EchoWire {
        const PROVIDER: &'static str = "echo";
        const AUTH: Auth = Auth::Header("x-echo-key");
        const HEADERS: &'static [(&'static str, &'static str)] = &[("echo-version", "7")];
        type Assembler = OpenAiAssembler;

        fn url(settings: &HttpSettings) -> String {
            http::endpoint(&settings.base_url, "/v2/echo")
        }

        fn body(&self, settings: &HttpSettings, _: &ChatRequest) -> Vec<u8> {
            format!("{{\"model\":\"{}\"}}", settings.model).into_bytes()
        }

        fn max_output_tokens(_: &HttpSettings) -> Option<u64> {
            Some(77)
        }
    }

    #[tokio::test]
    async fn a_wire_is_a_whole_provider() {
        let (base, seen) = serve(vec![Reply::sse(test_data::USAGE)]).await;
        let settings = HttpSettings::new("e-1", format!("{base}/"), Some("k-1".into()));
        let mut model = HttpModel::<EchoWire>::new(settings).unwrap();
        model.context_window = Some(1000);
        let req = test_data::request(vec![], vec![], false);
        let ctx = CallContext::new(CancellationToken::new());
        let answer = model.complete(&req, &ctx).await.unwrap();
        assert_eq!(answer.text.as_deref(), Some("I'm glad you're here!"));
        let seen = seen.lock().unwrap();
        let head = seen[0].head.to_ascii_lowercase();
        assert!(head.starts_with("post /v2/echo http/1.1"), "{head}");
        let at = |h: &str| head.find(h).unwrap_or_else(|| panic!("no {h} in {head}"));
        assert!(at("content-type: application/json") < at("echo-version: 7"));
        assert!(at("echo-version: 7") < at("x-echo-key: k-1"));
        assert!(!head.contains("authorization"));
        assert_eq!(seen[0].body, r#"{"model":"e-1"}"#);
        assert_eq!(
            model.limits(),
            ModelLimits {
                context_window: Some(1000),
                max_output_tokens: Some(77)
            }
        );
    }
}
