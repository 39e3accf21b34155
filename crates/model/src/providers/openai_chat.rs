//! OpenAI-compatible chat completions (`POST {base_url}/chat/completions`, streamed):
//! OpenAI itself, llama.cpp's `llama-server`, vLLM, Ollama's `/v1`, DeepSeek, …

use super::http_model::{Auth, HttpModel, Wire};
use crate::http;
use crate::{ChatRequest, HttpSettings};

/// A llama-server capture from tests/fixtures.
#[cfg(any(test, feature = "testing"))]
macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/llama-server/",
            $name
        ))
    };
}

mod request;
mod stream;
pub mod strict;

pub use request::{is_reasoning_model, request_body, request_bytes, WireCache};
pub use stream::OpenAiAssembler;

const PROVIDER: &str = "openai";

/// The body keys this client writes that a model's `extra_body` or thinking maps may not
/// replace: the model, the conversation, streaming, the tools.
pub const BODY_KEYS: &[&str] = &["model", "messages", "stream", "tools"];

/// OpenAI-compatible Chat Completions on the wire.
#[derive(Default)]
pub struct ChatWire {
    cache: WireCache,
}

impl Wire for ChatWire {
    const PROVIDER: &'static str = PROVIDER;
    const AUTH: Auth = Auth::Bearer;
    type Assembler = OpenAiAssembler;

    fn url(settings: &HttpSettings) -> String {
        http::endpoint(&settings.base_url, "/chat/completions")
    }

    fn body(&self, settings: &HttpSettings, req: &ChatRequest) -> Vec<u8> {
        request_bytes(settings, req, &self.cache)
    }
}

/// A model behind an OpenAI-compatible `/chat/completions` endpoint.
pub type OpenAiModel = HttpModel<ChatWire>;

/// Requests and captures the tests of this provider share.
#[cfg(any(test, feature = "testing"))]
pub mod test_data {
    use serde_json::json;

    use crate::{AgentId, ChatRequest, Message, ToolSpec};

    pub const USAGE: &str = fixture!("chat_stream_usage.sse.txt");
    pub const ECHO: &str = fixture!("toolcall_echo_stream.sse.txt");

    pub fn request(messages: Vec<Message>, tools: Vec<ToolSpec>, none: bool) -> ChatRequest {
        ChatRequest {
            system: "be brief".into(),
            messages: std::sync::Arc::new(messages),
            tools: tools.into(),
            tool_choice_none: none,
            agent: AgentId::Lead,
            turn: 0,
            output_schema: None,
            purpose: Default::default(),
            lineage: None,
        }
    }

    pub fn time_tool() -> ToolSpec {
        ToolSpec {
            name: "get_time".into(),
            description: "Current time".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use serde_json::{json, Value};
    use tokio_util::sync::CancellationToken;

    use super::test_data::{request, time_tool, ECHO, USAGE};
    use super::*;
    use crate::test_support::{serve, Reply};
    use crate::{CallContext, ChatModel, Message, ModelError, ModelResponse};

    fn settings(base: &str, key: Option<&str>) -> HttpSettings {
        HttpSettings::new("smollm2", format!("{base}/v1/"), key.map(str::to_string))
    }

    fn notices_ctx() -> (CallContext, Arc<Mutex<Vec<crate::RetryNotice>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let mut ctx = CallContext::new(CancellationToken::new());
        ctx.on_retry = Arc::new(move |n| sink.lock().unwrap().push(n));
        (ctx, seen)
    }

    #[tokio::test]
    async fn end_to_end_text_answer() {
        let (base, seen) = serve(vec![Reply::sse(USAGE)]).await;
        let model = OpenAiModel::new(settings(&base, Some("sk-test-key"))).unwrap();
        let req = request(vec![Message::User("hi".into())], vec![], false);
        let r = model
            .complete(&req, &CallContext::new(CancellationToken::new()))
            .await
            .unwrap();
        assert_eq!(r.text.as_deref(), Some("I'm glad you're here!"));
        let seen = seen.lock().unwrap();
        assert!(
            seen[0]
                .head
                .starts_with("POST /v1/chat/completions HTTP/1.1"),
            "{}",
            seen[0].head
        );
        assert!(seen[0]
            .head
            .to_ascii_lowercase()
            .contains("authorization: bearer sk-test-key"));
        let body: Value = serde_json::from_str(&seen[0].body).unwrap();
        assert_eq!(body["stream"], json!(true));
    }

    #[tokio::test]
    async fn end_to_end_server_that_ignores_stream_true() {
        let (base, _) = serve(vec![Reply::json(200, fixture!("chat_nonstream.json.txt"))]).await;
        let model = OpenAiModel::new(settings(&base, None)).unwrap();
        let req = request(vec![Message::User("hi".into())], vec![], false);
        let r = model
            .complete(&req, &CallContext::new(CancellationToken::new()))
            .await
            .unwrap();
        assert_eq!(r.text.as_deref(), Some("Hello, hello, hello!"));
    }

    #[tokio::test]
    async fn end_to_end_429_then_success() {
        let mut limited = Reply::json(429, r#"{"error":{"message":"slow down"}}"#);
        limited.headers.push(("Retry-After".into(), "1".into()));
        let (base, _) = serve(vec![limited, Reply::sse(ECHO)]).await;
        let model = OpenAiModel::new(settings(&base, None)).unwrap();
        let (ctx, notices) = notices_ctx();
        let start = std::time::Instant::now();
        let r = model
            .complete(&request(vec![], vec![time_tool()], false), &ctx)
            .await
            .unwrap();
        assert!(start.elapsed() >= Duration::from_millis(950));
        assert_eq!(r.tool_calls[0].name, "get_time");
        let notices = notices.lock().unwrap();
        assert_eq!(notices.len(), 1);
        assert_eq!(
            (notices[0].attempt, notices[0].delay_ms, notices[0].status),
            (1, 1000, Some(429))
        );
        assert!(
            notices[0].message.contains("slow down"),
            "{}",
            notices[0].message
        );
    }

    #[tokio::test]
    async fn end_to_end_context_overflow_is_not_retried() {
        let raw = fixture!("error_context_overflow.txt");
        let body = raw.split("\r\n\r\n").nth(1).unwrap();
        let (base, seen) = serve(vec![Reply::json(400, body), Reply::sse(USAGE)]).await;
        let model = OpenAiModel::new(settings(&base, Some("sk-test-key"))).unwrap();
        let (ctx, notices) = notices_ctx();
        let err = model
            .complete(&request(vec![], vec![], false), &ctx)
            .await
            .unwrap_err();
        match &err {
            ModelError::Http {
                provider,
                status,
                message,
                retry_after,
            } => {
                assert_eq!(
                    (provider.as_str(), *status, *retry_after),
                    ("openai", 400, None)
                );
                assert!(message.contains("exceeds the available context size"));
            }
            other => panic!("{other:?}"),
        }
        assert!(!err.to_string().contains("sk-test-key"));
        assert!(notices.lock().unwrap().is_empty());
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn connection_refused_is_a_connect_error_after_retries() {
        // Bind then drop a listener so the port is (very likely) closed.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let mut s = settings(&format!("http://127.0.0.1:{port}"), None);
        s.max_retries = 1;
        let model = OpenAiModel::new(s).unwrap();
        let (ctx, notices) = notices_ctx();
        let err = model
            .complete(&request(vec![], vec![], false), &ctx)
            .await
            .unwrap_err();
        assert!(
            matches!(err, ModelError::Connect { ref provider, .. } if provider == "openai"),
            "{err:?}"
        );
        let text = err.to_string();
        let prefix = format!("cannot reach openai: http://127.0.0.1:{port}/v1/chat/completions: ");
        assert!(text.starts_with(&prefix), "{text}");
        assert!(text.contains("Connection refused"), "{text}");
        let notices = notices.lock().unwrap();
        assert_eq!(notices.len(), 1);
        assert_eq!(notices[0].status, None);
    }

    #[tokio::test]
    async fn cancellation_stops_a_hanging_request() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        // Accept and never answer.
        let hold = tokio::spawn(async move {
            let conn = listener.accept().await;
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(conn);
        });
        let model = OpenAiModel::new(settings(&base, None)).unwrap();
        let ctx = CallContext::new(CancellationToken::new());
        let cancel = ctx.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            cancel.cancel();
        });
        let start = std::time::Instant::now();
        let err = model
            .complete(&request(vec![], vec![], false), &ctx)
            .await
            .unwrap_err();
        assert_eq!(err, ModelError::Cancelled);
        assert!(start.elapsed() < Duration::from_secs(2));
        hold.abort();
    }

    #[tokio::test]
    async fn request_timeout_bounds_the_whole_call() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let hold = tokio::spawn(async move {
            let conn = listener.accept().await;
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(conn);
        });
        let mut s = settings(&base, None);
        s.request_timeout = Duration::from_millis(200);
        let model = OpenAiModel::new(s).unwrap();
        let err = model
            .complete(
                &request(vec![], vec![], false),
                &CallContext::new(CancellationToken::new()),
            )
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ModelError::Timeout {
                provider: "openai".into(),
                message: "no complete response within 0.2 s".into()
            }
        );
        hold.abort();
    }

    async fn parse(text: &str) -> ModelResponse {
        crate::test_support::assemble_cut::<OpenAiAssembler>(text, &[], PROVIDER)
            .await
            .unwrap()
    }

    /// The assistant message the agent loop makes of a response.
    fn assistant(r: ModelResponse) -> Message {
        Message::Assistant {
            text: r.text,
            tool_calls: r.tool_calls,
            reasoning: r.reasoning,
        }
    }

    fn assistant_on_the_wire(r: ModelResponse) -> Value {
        let req = request(
            vec![Message::User("date?".into()), assistant(r)],
            vec![],
            false,
        );
        request_body(&HttpSettings::new("m", "http://x/v1", None), &req)["messages"][2].clone()
    }

    #[tokio::test]
    async fn reasoning_content_goes_back_on_the_assistant_message() {
        let r = parse(capture!("deepseek/reasoning_then_tool_call.sse")).await;
        assert_eq!(
            r.reasoning.text.as_deref(),
            Some("Let me get the current date.")
        );
        assert!(r.reasoning.blocks.is_empty());
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].name, "get_date");
        assert_eq!(r.tool_calls[0].arguments, json!({}));
        assert!(
            r.tool_calls[0].extra.is_empty(),
            "{:?}",
            r.tool_calls[0].extra
        );
        assert_eq!(
            assistant_on_the_wire(r),
            json!({
                "role": "assistant",
                "content": null,
                "reasoning_content": "Let me get the current date.",
                "tool_calls": [{"id": "call_00_tz6Vq4aG59EtpFCVbpoY3635", "type": "function",
                                "function": {"name": "get_date", "arguments": "{}"}}],
            })
        );

        let r = parse(capture!("deepseek/reasoner_text.sse")).await;
        assert_eq!(
            r.text.as_deref(),
            Some("Hello there! 😊 How can I help you today?")
        );
        let reasoning = r.reasoning.text.clone().unwrap();
        assert_eq!(reasoning.chars().count(), 882);
        assert_eq!(
            assistant_on_the_wire(r)["reasoning_content"],
            json!(reasoning)
        );
    }

    #[tokio::test]
    async fn no_reasoning_and_no_extra_fields_add_nothing() {
        // Azure adds `type` and filter results around the call; neither is the call's own.
        let r = parse(capture!("azure-openai/chat_tool_call_filter_results.sse")).await;
        assert_eq!(r.reasoning, Default::default());
        assert_eq!(r.tool_calls[0].arguments, json!({"city": "San Francisco"}));
        assert!(
            r.tool_calls[0].extra.is_empty(),
            "{:?}",
            r.tool_calls[0].extra
        );
        let wire = assistant_on_the_wire(r);
        assert!(wire.get("reasoning_content").is_none());
        assert_eq!(
            wire["tool_calls"][0].as_object().unwrap().len(),
            3,
            "{wire}"
        );
    }

    /// Gemini's OpenAI-compatible API puts the call's thought signature in
    /// `extra_content`, and wants it back on the call.
    const SIGNED_CALL: &str = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,",
        "\"id\":\"call_g1\",\"type\":\"function\",\"function\":{\"name\":\"get_country\",\"arguments\":\"\"},",
        "\"extra_content\":{\"google\":{\"thought_signature\":\"CiQB0e2Kb+sig==\"}}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"},",
        "\"cache_hint\":null}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );

    #[tokio::test]
    async fn extra_fields_of_a_streamed_call_go_back_unchanged() {
        let r = parse(SIGNED_CALL).await;
        let extra = json!({"extra_content": {"google": {"thought_signature": "CiQB0e2Kb+sig=="}}});
        assert_eq!(Value::Object(r.tool_calls[0].extra.to_map()), extra);
        assert_eq!(
            assistant_on_the_wire(r)["tool_calls"][0],
            json!({
                "id": "call_g1",
                "type": "function",
                "function": {"name": "get_country", "arguments": "{}"},
                "extra_content": {"google": {"thought_signature": "CiQB0e2Kb+sig=="}},
            })
        );
    }

    #[tokio::test]
    async fn a_reasoning_delta_is_reasoning_too() {
        // OpenRouter's and Groq's spelling.
        let r = parse(concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"Think\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"ing.\",\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        ))
        .await;
        assert_eq!(r.reasoning.text.as_deref(), Some("Thinking."));
        assert_eq!(r.text.as_deref(), Some("Hi"));
    }

    #[test]
    fn a_non_streamed_answer_keeps_reasoning_and_extra_fields() {
        let body = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "reasoning_content": "Think.",
            "tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                            "extra_content": {"google": {"thought_signature": "s"}}}]}}]});
        let r = http::parse_json_answer::<OpenAiAssembler>(&body.to_string(), PROVIDER).unwrap();
        assert_eq!(r.reasoning.text.as_deref(), Some("Think."));
        assert_eq!(
            r.tool_calls[0].extra.get("extra_content"),
            Some(&json!({"google": {"thought_signature": "s"}}))
        );
    }
}
