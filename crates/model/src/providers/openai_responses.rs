//! OpenAI's Responses API (`POST {base_url}/responses`, streamed), for `use: openai`
//! models with `use_responses_api: true` (or DeerFlow's `output_version: responses/v1`).
//! Stateless like every other provider: each call sends the whole history as input items
//! with `store: false`, and reasoning items come back encrypted and opaque, to be sent again
//! unchanged. The transport, retries and limits are every provider's (`http_model.rs`,
//! `model::http`).

use super::http_model::{Auth, HttpModel, Wire};
use crate::http;
use crate::{ChatRequest, HttpSettings};

mod request;
mod stream;

pub use request::{request_body, request_bytes};
pub use stream::ResponsesAssembler;

/// The provider's name in events and errors: it is OpenAI's, whichever API it talks to.
const PROVIDER: &str = "openai";

/// The body keys this client writes that a model's `extra_body` or thinking maps may not
/// replace: the model, the conversation and its instructions, streaming, the tools.
pub const BODY_KEYS: &[&str] = &["model", "input", "instructions", "stream", "tools"];

/// OpenAI's Responses API on the wire.
#[derive(Default)]
pub struct ResponsesWire;

impl Wire for ResponsesWire {
    const PROVIDER: &'static str = PROVIDER;
    const AUTH: Auth = Auth::Bearer;
    type Assembler = ResponsesAssembler;

    fn url(settings: &HttpSettings) -> String {
        http::endpoint(&settings.base_url, "/responses")
    }

    fn body(&self, settings: &HttpSettings, req: &ChatRequest) -> Vec<u8> {
        request_bytes(settings, req)
    }
}

/// A model behind an OpenAI `/responses` endpoint.
pub type ResponsesModel = HttpModel<ResponsesWire>;

/// The requests the tests share are Chat Completions' (the same `ChatRequest`s).
#[cfg(test)]
use super::openai_chat::test_data;

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::{json, Value};
    use tokio_util::sync::CancellationToken;

    use super::test_data::{request, time_tool};
    use super::*;
    use crate::test_support::{serve, Reply};
    use crate::{CallContext, ChatModel, Message, ModelError, ModelLimits, RetryNotice};

    const CALL: &str = capture!("openai/responses_reasoning_function_call.sse");
    const CACHED: &str = capture!("openai/responses_cached_tokens.sse");

    fn settings(base: &str) -> HttpSettings {
        let mut s = HttpSettings::new("gpt-5-mini", format!("{base}/v1"), Some("sk-r".into()));
        s.use_responses_api = true;
        s
    }

    fn notices_ctx() -> (CallContext, Arc<Mutex<Vec<RetryNotice>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let mut ctx = CallContext::new(CancellationToken::new());
        ctx.on_retry = Arc::new(move |n| sink.lock().unwrap().push(n));
        (ctx, seen)
    }

    #[tokio::test]
    async fn posts_to_responses_and_assembles_the_stream() {
        let (base, seen) = serve(vec![Reply::sse(CALL)]).await;
        let model = ResponsesModel::new(settings(&base)).unwrap();
        let req = request(vec![Message::User("five".into())], vec![time_tool()], false);
        let r = model
            .complete(&req, &CallContext::new(CancellationToken::new()))
            .await
            .unwrap();
        assert_eq!(r.tool_calls[0].name, "simple_tool");
        let seen = seen.lock().unwrap();
        assert!(
            seen[0].head.starts_with("POST /v1/responses HTTP/1.1"),
            "{}",
            seen[0].head
        );
        assert!(seen[0]
            .head
            .to_ascii_lowercase()
            .contains("authorization: bearer sk-r"));
        let body: Value = serde_json::from_str(&seen[0].body).unwrap();
        assert_eq!(
            (&body["stream"], &body["store"]),
            (&json!(true), &json!(false))
        );
        assert!(body.get("previous_response_id").is_none());
    }

    #[tokio::test]
    async fn a_failed_response_is_retried_like_a_server_error() {
        let failed = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":\
                      {\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"Try again.\"}}}\n\n";
        let (base, seen) = serve(vec![Reply::sse(failed), Reply::sse(CACHED)]).await;
        let model = ResponsesModel::new(settings(&base)).unwrap();
        let (ctx, notices) = notices_ctx();
        let r = model
            .complete(&request(vec![], vec![], false), &ctx)
            .await
            .unwrap();
        assert_eq!(r.text.as_deref(), Some("2, 3, 4"));
        assert_eq!(seen.lock().unwrap().len(), 2);
        let notices = notices.lock().unwrap();
        assert_eq!(notices.len(), 1);
        assert_eq!(notices[0].status, None);
        assert!(notices[0].message.contains("server_error: Try again."));
    }

    #[tokio::test]
    async fn an_http_error_is_classified_as_on_chat_completions() {
        let body = capture!("openai/error_400_unsupported_parameter.json");
        let (base, seen) = serve(vec![Reply::json(400, body), Reply::sse(CACHED)]).await;
        let model = ResponsesModel::new(settings(&base)).unwrap();
        let (ctx, notices) = notices_ctx();
        let err = model
            .complete(&request(vec![], vec![], false), &ctx)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ModelError::Http {
                provider: "openai".into(),
                status: 400,
                message: "Unsupported parameter: 'stop' is not supported with this model.".into(),
                retry_after: None,
            }
        );
        assert!(notices.lock().unwrap().is_empty());
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    #[test]
    fn the_client_reports_its_limits() {
        let mut s = settings("http://127.0.0.1:1");
        s.max_tokens = Some(300);
        let mut model = ResponsesModel::new(s).unwrap();
        model.context_window = Some(400_000);
        assert_eq!(
            model.limits(),
            ModelLimits {
                context_window: Some(400_000),
                max_output_tokens: Some(300)
            }
        );
    }
}
