//! Anthropic Messages API (`POST {base_url}/v1/messages`, streamed).

use super::http_model::{Auth, HttpModel, Wire};
use crate::http;
use crate::{ChatRequest, HttpSettings};

mod limits;
mod request;
mod stream;

pub use limits::default_max_tokens;
pub use request::{request_body, request_bytes};
pub use stream::AnthropicAssembler;

const PROVIDER: &str = "anthropic";

/// The body keys this client writes that a model's `extra_body` or thinking maps may not
/// replace: the model, the conversation and its system prompt, streaming, the tools.
pub const BODY_KEYS: &[&str] = &["model", "messages", "system", "stream", "tools"];
const API_VERSION: &str = "2023-06-01";

/// The output limit each request carries: the configured one, else the family's.
fn max_tokens(settings: &HttpSettings) -> u64 {
    settings
        .max_tokens
        .unwrap_or_else(|| default_max_tokens(&settings.model))
}

/// Anthropic's Messages API on the wire.
#[derive(Default)]
pub struct MessagesWire;

impl Wire for MessagesWire {
    const PROVIDER: &'static str = PROVIDER;
    const AUTH: Auth = Auth::Header("x-api-key");
    const HEADERS: &'static [(&'static str, &'static str)] = &[("anthropic-version", API_VERSION)];
    type Assembler = AnthropicAssembler;

    fn url(settings: &HttpSettings) -> String {
        http::endpoint(&settings.base_url, "/v1/messages")
    }

    fn body(&self, settings: &HttpSettings, req: &ChatRequest) -> Vec<u8> {
        request_bytes(settings, req)
    }

    /// Every request carries one: the configured limit, else the family's.
    fn max_output_tokens(settings: &HttpSettings) -> Option<u64> {
        Some(max_tokens(settings))
    }
}

/// A Claude model behind the Anthropic Messages API.
pub type AnthropicModel = HttpModel<MessagesWire>;

/// Requests and streams the tests of this provider share.
#[cfg(test)]
mod test_data {
    use serde_json::json;

    use crate::{AgentId, ChatRequest, Message, ToolSpec};

    /// A synthetic stream in the shape the API documents: ping, text, two tool_use blocks
    /// with fragmented input, cache tokens, usage updated in message_delta.
    pub const TWO_TOOLS: &str = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",",
        "\"content\":[],\"model\":\"claude-x\",\"stop_reason\":null,\"usage\":{\"input_tokens\":12,",
        "\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":2000,\"output_tokens\":1}}}\n\n",
        "event: ping\ndata: {\"type\": \"ping\"}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me \"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"look.\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_A\",\"name\":\"read_file\",\"input\":{}}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"sr\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"c/main.rs\\\"}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: ping\ndata: {\"type\": \"ping\"}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_B\",\"name\":\"get_time\",\"input\":{}}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":57}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    pub fn request(messages: Vec<Message>, tools: Vec<ToolSpec>, none: bool) -> ChatRequest {
        ChatRequest {
            system: "be brief".into(),
            messages: std::sync::Arc::new(messages),
            tools: tools.into(),
            tool_choice_none: none,
            agent: AgentId::Lead,
            turn: 2,
            output_schema: None,
            purpose: Default::default(),
            lineage: None,
        }
    }

    pub fn tool(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: format!("{name} tool"),
            parameters: json!({"type": "object"}),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};
    use tokio_util::sync::CancellationToken;

    use super::test_data::{request, TWO_TOOLS};
    use super::*;
    use crate::test_support::{serve, Reply};
    use crate::{CallContext, ChatModel, Message, ModelResponse};

    #[tokio::test]
    async fn end_to_end_with_headers() {
        let (base, seen) = serve(vec![Reply::sse(TWO_TOOLS)]).await;
        let model = AnthropicModel::new(HttpSettings::new(
            "claude-x",
            format!("{base}/"),
            Some("sk-ant-1".into()),
        ))
        .unwrap();
        let r = model
            .complete(
                &request(vec![Message::User("hi".into())], vec![], false),
                &CallContext::new(CancellationToken::new()),
            )
            .await
            .unwrap();
        assert_eq!(r.tool_calls.len(), 2);
        let head = seen.lock().unwrap()[0].head.to_ascii_lowercase();
        assert!(head.starts_with("post /v1/messages http/1.1"), "{head}");
        assert!(head.contains("x-api-key: sk-ant-1"));
        assert!(head.contains("anthropic-version: 2023-06-01"));
        assert!(head.contains("content-type: application/json"));
    }

    #[tokio::test]
    async fn end_to_end_auth_error_is_not_retried_and_redacted() {
        let body = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-ant-1"}}"#;
        let (base, seen) = serve(vec![Reply::json(401, body), Reply::sse(TWO_TOOLS)]).await;
        let model =
            AnthropicModel::new(HttpSettings::new("claude-x", base, Some("sk-ant-1".into())))
                .unwrap();
        let err = model
            .complete(
                &request(vec![], vec![], false),
                &CallContext::new(CancellationToken::new()),
            )
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "anthropic returned HTTP 401: invalid x-api-key [redacted]"
        );
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    async fn parse(text: &str) -> ModelResponse {
        crate::test_support::assemble_cut::<AnthropicAssembler>(text, &[], PROVIDER)
            .await
            .unwrap()
    }

    /// The messages of a request whose history holds the assistant message the agent
    /// loop makes of `r`.
    fn history_on_the_wire(r: ModelResponse) -> Value {
        let assistant = Message::Assistant {
            text: r.text,
            tool_calls: r.tool_calls,
            reasoning: r.reasoning,
        };
        let req = request(vec![Message::User("go".into()), assistant], vec![], false);
        let mut settings = HttpSettings::new("claude-x", "https://api.anthropic.com", None);
        settings.prompt_cache = false;
        request_body(&settings, &req)["messages"].clone()
    }

    /// Every `content_block` of a stream's `content_block_start` events, as sent.
    fn started_blocks(stream: &str) -> Vec<Value> {
        stream
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter(|v| v["type"] == "content_block_start")
            .map(|v| v["content_block"].clone())
            .collect()
    }

    #[tokio::test]
    async fn thinking_blocks_go_back_whole_before_the_tool_use() {
        let r = parse(capture!("anthropic/thinking_then_tool_use.sse")).await;
        let thinking = "The user wants me to:\n1. Use the fixed_version tool\n2. Tell them the \
                        version\n3. Make a short joke about it\n\nLet me first call the \
                        fixed_version tool to see what version it returns.";
        assert_eq!(r.reasoning.text.as_deref(), Some(thinking));
        assert_eq!(r.reasoning.blocks.len(), 1);
        let block = &r.reasoning.blocks[0];
        assert_eq!(block["type"], "thinking");
        assert_eq!(block["thinking"], thinking);
        let signature = block["signature"].as_str().unwrap().to_string();
        assert_eq!(signature.len(), 524);
        assert!(signature.starts_with("EoQDCm0IDhgC"), "{signature}");
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].arguments, json!({}));
        let messages = history_on_the_wire(r);
        assert_eq!(
            messages[1]["content"],
            json!([
                {"type": "thinking", "thinking": thinking, "signature": signature},
                {"type": "tool_use", "id": "toolu_01825dXWLSoJwCst1qTsiWdb",
                 "name": "fixed_version", "input": {}},
            ])
        );
    }

    /// A thinking block that never got a signature (a compatible server's) is shown as
    /// reasoning but not sent back: Anthropic refuses a thinking block without a valid
    /// signature, and an empty one would be made up.
    #[tokio::test]
    async fn an_unsigned_thinking_block_is_not_sent_back() {
        let stream = capture!("anthropic/thinking_then_tool_use.sse");
        let unsigned: String = stream
            .split_inclusive("\n\n")
            .filter(|e| !e.contains("signature_delta"))
            .collect();
        assert!(unsigned.len() < stream.len());
        let r = parse(&unsigned).await;
        assert!(r
            .reasoning
            .text
            .as_deref()
            .unwrap()
            .starts_with("The user wants me to"));
        assert!(r.reasoning.blocks.is_empty(), "{:?}", r.reasoning.blocks);
        let messages = history_on_the_wire(r);
        assert_eq!(
            messages[1]["content"],
            json!([{"type": "tool_use", "id": "toolu_01825dXWLSoJwCst1qTsiWdb",
                    "name": "fixed_version", "input": {}}])
        );
        assert!(!messages.to_string().contains("signature"), "{messages}");
    }

    #[tokio::test]
    async fn redacted_thinking_goes_back_verbatim() {
        let stream = capture!("anthropic/redacted_thinking.sse");
        let r = parse(stream).await;
        let started = started_blocks(stream);
        assert_eq!(r.reasoning.blocks, started[..2]);
        let sizes: Vec<usize> = r
            .reasoning
            .blocks
            .iter()
            .map(|b| b["data"].as_str().unwrap().len())
            .collect();
        assert_eq!(sizes, [744, 296]);
        assert_eq!(r.reasoning.text, None);
        let text = r.text.clone().unwrap();
        let content = &history_on_the_wire(r)[1]["content"];
        assert_eq!(content[0], started[0]);
        assert_eq!(content[1], started[1]);
        assert_eq!(content[2], json!({"type": "text", "text": text}));
    }

    #[test]
    fn a_non_streamed_message_keeps_its_thinking() {
        let body = json!({"type": "message", "role": "assistant", "stop_reason": "end_turn",
            "content": [{"type": "thinking", "thinking": "Hmm.", "signature": "c2ln"},
                        {"type": "text", "text": "Hi."}],
            "usage": {"input_tokens": 1, "output_tokens": 2}});
        let r = http::parse_json_answer::<AnthropicAssembler>(&body.to_string(), PROVIDER).unwrap();
        assert_eq!(r.reasoning.text.as_deref(), Some("Hmm."));
        assert_eq!(
            r.reasoning.blocks,
            [json!({"type": "thinking", "thinking": "Hmm.", "signature": "c2ln"})]
        );
    }

    #[test]
    fn kept_blocks_never_make_an_empty_assistant_message() {
        let r = ModelResponse {
            reasoning: crate::Reasoning {
                text: None,
                blocks: vec![json!({"type": "redacted_thinking", "data": "x"})],
            },
            ..Default::default()
        };
        assert_eq!(history_on_the_wire(r).as_array().map(Vec::len), Some(1));
    }
}
