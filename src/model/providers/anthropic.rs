//! Anthropic Messages API (`POST {base_url}/v1/messages`, streamed).

use std::sync::Arc;

use crate::config::ResolvedModel;
use crate::model::http::{self, StreamCall};
use crate::model::registry::cannot_serve;
use crate::model::{
    BoxFuture, CallContext, ChatModel, ChatRequest, HttpSettings, ModelError, ModelResponse,
};

mod request;
mod stream;

pub use request::request_body;
pub use stream::AnthropicAssembler;

const PROVIDER: &str = "anthropic";
const API_VERSION: &str = "2023-06-01";
/// The API requires `max_tokens`; this applies when the config sets none.
const DEFAULT_MAX_TOKENS: u64 = 4096;

/// A Claude model behind the Anthropic Messages API.
pub struct AnthropicModel {
    settings: HttpSettings,
    client: reqwest::Client,
}

impl AnthropicModel {
    pub fn new(settings: HttpSettings) -> Result<Self, ModelError> {
        let client = http::build_client(&settings, PROVIDER)?;
        Ok(Self { settings, client })
    }

    fn call(&self, req: &ChatRequest) -> StreamCall<'_> {
        let mut headers = vec![
            ("content-type", "application/json".to_string()),
            ("anthropic-version", API_VERSION.to_string()),
        ];
        if let Some(key) = &self.settings.api_key {
            headers.push(("x-api-key", key.clone()));
        }
        StreamCall {
            client: &self.client,
            settings: &self.settings,
            provider: PROVIDER,
            url: http::endpoint(&self.settings.base_url, "/v1/messages"),
            headers,
            body: request_body(&self.settings, req).to_string().into_bytes(),
        }
    }
}

impl ChatModel for AnthropicModel {
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move { self.call(req).run::<AnthropicAssembler>(ctx).await })
    }
}

/// The registry's constructor: a resolved `anthropic` model.
pub fn build(r: &ResolvedModel) -> Result<Arc<dyn ChatModel>, String> {
    let Some(settings) = &r.http else {
        return Err(cannot_serve(r));
    };
    let model = AnthropicModel::new(settings.clone()).map_err(|e| e.to_string())?;
    Ok(Arc::new(model))
}

/// Requests and streams the tests of this provider share.
#[cfg(test)]
mod test_data {
    use serde_json::json;

    use crate::model::{AgentId, ChatRequest, Message, ToolSpec};

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
            messages,
            tools,
            tool_choice_none: none,
            agent: AgentId::Lead,
            turn: 2,
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
    use tokio_util::sync::CancellationToken;

    use super::test_data::{request, TWO_TOOLS};
    use super::*;
    use crate::model::test_support::{serve, Reply};
    use crate::model::Message;

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
}
