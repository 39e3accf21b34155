//! Anthropic Messages API (`POST {base_url}/v1/messages`, streamed).

use std::collections::BTreeMap;

use eventsource_stream::Event;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::sse::{self, Assembler, Flow, StreamCall};
use super::{
    BoxFuture, CallContext, ChatModel, ChatRequest, HttpSettings, Message, ModelError,
    ModelResponse, ToolCall, ToolSpec, Usage,
};

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
        let client = sse::build_client(&settings, PROVIDER)?;
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
            url: sse::endpoint(&self.settings.base_url, "/v1/messages"),
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

/// The JSON body of a streamed Messages API request.
pub fn request_body(settings: &HttpSettings, req: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(settings.model));
    body.insert(
        "max_tokens".into(),
        json!(settings.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if !req.system.is_empty() {
        body.insert("system".into(), json!(req.system));
    }
    body.insert(
        "messages".into(),
        Value::Array(wire_messages(&req.messages)),
    );
    if !req.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(req.tools.iter().map(wire_tool).collect()),
        );
        if req.tool_choice_none {
            body.insert("tool_choice".into(), json!({"type": "none"}));
        }
    }
    body.insert("stream".into(), json!(true));
    if let Some(t) = settings.temperature {
        body.insert("temperature".into(), json!(t));
    }
    Value::Object(body)
}

/// Maps the transcript to Anthropic's alternating turns: tool results travel as `user`
/// messages of `tool_result` blocks, so consecutive tool messages (and a user text right
/// after them) are merged into one user message.
fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    for message in messages {
        match message {
            Message::User(text) => {
                if !append_to_user_blocks(&mut out, json!({"type": "text", "text": text})) {
                    out.push(json!({"role": "user", "content": text}));
                }
            }
            Message::Assistant { text, tool_calls } => {
                if let Some(wire) = wire_assistant(text.as_deref(), tool_calls) {
                    out.push(wire);
                }
            }
            Message::Tool {
                call_id, content, ..
            } => {
                let block =
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": content});
                if !append_to_user_blocks(&mut out, block.clone()) {
                    out.push(json!({"role": "user", "content": [block]}));
                }
            }
        }
    }
    out
}

/// Appends `block` to the last message when it is a user message of blocks.
fn append_to_user_blocks(out: &mut [Value], block: Value) -> bool {
    let Some(last) = out.last_mut() else {
        return false;
    };
    if last["role"] != "user" {
        return false;
    }
    match last.get_mut("content") {
        Some(Value::Array(blocks)) => {
            blocks.push(block);
            true
        }
        _ => false,
    }
}

/// `None` for an assistant message with neither text nor calls: the API rejects empty
/// text blocks, and dropping it only merges two user turns, which the API accepts.
fn wire_assistant(text: Option<&str>, tool_calls: &[ToolCall]) -> Option<Value> {
    let mut blocks = Vec::with_capacity(tool_calls.len() + 1);
    if let Some(text) = text.filter(|t| !t.is_empty()) {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for call in tool_calls {
        // `input` must be an object: invalid argument text goes back as `{}`.
        blocks.push(
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}),
        );
    }
    (!blocks.is_empty()).then(|| json!({"role": "assistant", "content": blocks}))
}

fn wire_tool(tool: &ToolSpec) -> Value {
    json!({"name": tool.name, "description": tool.description, "input_schema": tool.parameters})
}

// ---- the stream ----------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        start_input: Value,
        json: String,
    },
    /// Thinking and other block types deerflow does not use.
    Other,
}

/// Assembles the events of one streamed message.
#[derive(Debug, Default)]
pub struct AnthropicAssembler {
    /// Content blocks by their `index`, which orders them.
    blocks: BTreeMap<u64, Block>,
    usage: Option<WireUsage>,
    stop_reason: Option<String>,
    /// Bytes of text and tool input so far (the response size limit).
    kept: usize,
}

impl Assembler for AnthropicAssembler {
    fn on_event(&mut self, event: &Event) -> Result<Flow, ModelError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        let value: Value = serde_json::from_str(data).map_err(|e| {
            sse::stream_error(
                PROVIDER,
                format!(
                    "malformed JSON in a `{}` event ({e}): {}",
                    event.event,
                    excerpt(data)
                ),
            )
        })?;
        // The `event:` line names the event; the data's `type` says the same and covers
        // servers that leave the line out.
        let kind = match event.event.as_str() {
            "message" => value["type"].as_str().unwrap_or("message"),
            name => name,
        };
        self.take(kind, &value)
    }

    fn finish(self, ended: Flow) -> Result<ModelResponse, ModelError> {
        if ended == Flow::Continue {
            return Err(sse::stream_error(
                PROVIDER,
                "stream ended before the response was complete",
            ));
        }
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        for block in self.blocks.into_values() {
            match block {
                Block::Text(t) => text.push_str(&t),
                Block::ToolUse {
                    id,
                    name,
                    start_input,
                    json,
                } => {
                    tool_calls.push(tool_call(id, name, &start_input, &json));
                }
                Block::Other => {}
            }
        }
        Ok(ModelResponse {
            text: (!text.is_empty()).then_some(text),
            tool_calls,
            usage: self.usage.as_ref().map(convert_usage),
            finish_reason: self.stop_reason,
        })
    }

    fn from_json(value: &Value) -> Result<ModelResponse, ModelError> {
        let Some(content) = value["content"].as_array() else {
            return Err(sse::stream_error(
                PROVIDER,
                format!("unexpected JSON answer: {}", excerpt(&value.to_string())),
            ));
        };
        let mut assembler = Self::default();
        for (index, block) in content.iter().enumerate() {
            assembler.start_block(&json!({"index": index, "content_block": block}));
        }
        assembler.merge_usage(&value["usage"]);
        assembler.stop_reason = value["stop_reason"].as_str().map(str::to_string);
        assembler.finish(Flow::Done)
    }

    fn kept_bytes(&self) -> usize {
        self.kept
    }
}

impl AnthropicAssembler {
    fn take(&mut self, kind: &str, value: &Value) -> Result<Flow, ModelError> {
        match kind {
            "message_start" => self.merge_usage(&value["message"]["usage"]),
            "content_block_start" => self.start_block(value),
            "content_block_delta" => self.delta(value)?,
            "message_delta" => {
                if let Some(reason) = value["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_string());
                }
                self.merge_usage(&value["usage"]);
            }
            "message_stop" => return Ok(Flow::Done),
            "error" => {
                let message = sse::json_error_message(value).unwrap_or_else(|| value.to_string());
                return Err(sse::stream_error(PROVIDER, message));
            }
            // ping, content_block_stop and event types added later need nothing.
            _ => {}
        }
        Ok(Flow::Continue)
    }

    /// Usage numbers arrive in `message_start` and (cumulative) in `message_delta`; a
    /// field present later replaces the earlier value, absent ones are kept.
    fn merge_usage(&mut self, usage: &Value) {
        let Ok(new) = WireUsage::deserialize(usage) else {
            return;
        };
        let current = self.usage.get_or_insert_with(WireUsage::default);
        let keep = |old: &mut Option<u64>, new: Option<u64>| {
            if new.is_some() {
                *old = new;
            }
        };
        keep(&mut current.input_tokens, new.input_tokens);
        keep(&mut current.output_tokens, new.output_tokens);
        keep(
            &mut current.cache_read_input_tokens,
            new.cache_read_input_tokens,
        );
        keep(
            &mut current.cache_creation_input_tokens,
            new.cache_creation_input_tokens,
        );
    }

    fn start_block(&mut self, value: &Value) {
        let index = value["index"].as_u64().unwrap_or(self.blocks.len() as u64);
        let block = &value["content_block"];
        let new = match block["type"].as_str() {
            Some("text") => {
                let text = block["text"].as_str().unwrap_or_default();
                self.kept += text.len();
                Block::Text(text.to_string())
            }
            Some("tool_use") => Block::ToolUse {
                id: block["id"].as_str().unwrap_or_default().to_string(),
                name: block["name"].as_str().unwrap_or_default().to_string(),
                start_input: block["input"].clone(),
                json: String::new(),
            },
            _ => Block::Other,
        };
        self.blocks.insert(index, new);
    }

    fn delta(&mut self, value: &Value) -> Result<(), ModelError> {
        let index = value["index"].as_u64().unwrap_or(0);
        let delta = &value["delta"];
        let Some(block) = self.blocks.get_mut(&index) else {
            return Err(sse::stream_error(
                PROVIDER,
                format!("a content_block_delta for block {index}, which never started"),
            ));
        };
        match (block, delta["type"].as_str()) {
            (Block::Text(text), Some("text_delta")) => {
                let piece = delta["text"].as_str().unwrap_or_default();
                self.kept += piece.len();
                text.push_str(piece);
            }
            (Block::ToolUse { json, .. }, Some("input_json_delta")) => {
                let piece = delta["partial_json"].as_str().unwrap_or_default();
                self.kept += piece.len();
                json.push_str(piece);
            }
            // Thinking, signature and citation deltas carry nothing deerflow keeps.
            _ => {}
        }
        Ok(())
    }
}

/// The streamed JSON fragments when there were any, else the `input` of the start event.
fn tool_call(id: String, name: String, start_input: &Value, json: &str) -> ToolCall {
    if json.trim().is_empty() {
        match start_input {
            Value::Object(_) => ToolCall {
                id,
                name,
                arguments: start_input.clone(),
                invalid_arguments: None,
            },
            _ => ToolCall::from_raw(id, name, ""),
        }
    } else {
        ToolCall::from_raw(id, name, json)
    }
}

/// `input_tokens` counts every prompt token: Anthropic reports the cached and the
/// cache-writing parts separately from the uncached rest.
fn convert_usage(usage: &WireUsage) -> Usage {
    let read = usage.cache_read_input_tokens;
    let input = usage
        .input_tokens
        .unwrap_or(0)
        .saturating_add(read.unwrap_or(0))
        .saturating_add(usage.cache_creation_input_tokens.unwrap_or(0));
    let output = usage.output_tokens.unwrap_or(0);
    Usage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: input.saturating_add(output),
        cache_read_tokens: read,
    }
}

/// A bad chunk as quoted in an error message.
fn excerpt(data: &str) -> String {
    sse::clip(data, 200)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sse::test_support::{chunked, serve, Reply};
    use crate::model::AgentId;
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    /// A synthetic stream in the shape the API documents: ping, text, two tool_use blocks
    /// with fragmented input, cache tokens, usage updated in message_delta.
    const TWO_TOOLS: &str = concat!(
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

    async fn parse_cut(text: &str, cuts: &[usize]) -> Result<ModelResponse, ModelError> {
        sse::assemble::<AnthropicAssembler, _, _, _>(
            chunked(text, cuts),
            Duration::from_secs(5),
            PROVIDER,
        )
        .await
    }

    async fn parse(text: &str) -> Result<ModelResponse, ModelError> {
        parse_cut(text, &[]).await
    }

    #[tokio::test]
    async fn text_and_two_tool_uses_with_cache_usage() {
        let r = parse(TWO_TOOLS).await.unwrap();
        assert_eq!(r.text.as_deref(), Some("Let me look."));
        assert_eq!(
            r.tool_calls,
            vec![
                ToolCall {
                    id: "toolu_A".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "src/main.rs"}),
                    invalid_arguments: None
                },
                ToolCall {
                    id: "toolu_B".into(),
                    name: "get_time".into(),
                    arguments: json!({}),
                    invalid_arguments: None
                },
            ]
        );
        assert_eq!(r.finish_reason.as_deref(), Some("tool_use"));
        assert_eq!(
            r.usage,
            Some(Usage {
                input_tokens: 2112,
                output_tokens: 57,
                total_tokens: 2169,
                cache_read_tokens: Some(2000)
            })
        );
    }

    #[tokio::test]
    async fn random_splits_give_the_same_response() {
        let whole = parse(TWO_TOOLS).await.unwrap();
        for cut in 0..=TWO_TOOLS.len() {
            assert_eq!(
                parse_cut(TWO_TOOLS, &[cut]).await.unwrap(),
                whole,
                "cut at {cut}"
            );
        }
        let mut rng = fastrand::Rng::with_seed(11);
        for _ in 0..200 {
            let mut cuts: Vec<usize> = (0..rng.usize(1..60))
                .map(|_| rng.usize(0..=TWO_TOOLS.len()))
                .collect();
            cuts.sort_unstable();
            assert_eq!(
                parse_cut(TWO_TOOLS, &cuts).await.unwrap(),
                whole,
                "cuts {cuts:?}"
            );
        }
    }

    #[tokio::test]
    async fn crlf_line_endings_split_anywhere() {
        let text = TWO_TOOLS.replace('\n', "\r\n");
        let whole = parse(TWO_TOOLS).await.unwrap();
        for cut in 0..=text.len() {
            assert_eq!(
                parse_cut(&text, &[cut]).await.unwrap(),
                whole,
                "cut at {cut}"
            );
        }
    }

    #[tokio::test]
    async fn message_delta_may_carry_input_numbers_and_no_cache_means_none() {
        let text = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":0}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"input_tokens\":7,\"output_tokens\":3}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let r = parse(text).await.unwrap();
        assert_eq!(r.text.as_deref(), Some("Hi"));
        assert_eq!(r.finish_reason.as_deref(), Some("end_turn"));
        assert_eq!(
            r.usage,
            Some(Usage {
                input_tokens: 7,
                output_tokens: 3,
                total_tokens: 10,
                cache_read_tokens: None
            })
        );
    }

    #[tokio::test]
    async fn error_event_mid_stream() {
        let cut = TWO_TOOLS.find("event: content_block_start").unwrap();
        let text = format!(
            "{}event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}}}\n\n",
            &TWO_TOOLS[..cut]
        );
        assert_eq!(
            parse(&text).await,
            Err(ModelError::Stream {
                provider: "anthropic".into(),
                message: "Overloaded".into()
            })
        );
    }

    #[tokio::test]
    async fn malformed_json_is_a_stream_error() {
        let text = "event: message_start\ndata: {\"type\":\"message_start\",\n\n";
        match parse(text).await {
            Err(ModelError::Stream { message, .. }) => {
                assert!(
                    message.starts_with("malformed JSON in a `message_start` event"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn eof_before_message_stop_is_an_error() {
        let cut = TWO_TOOLS.find("event: message_stop").unwrap();
        assert_eq!(
            parse(&TWO_TOOLS[..cut]).await,
            Err(ModelError::Stream {
                provider: "anthropic".into(),
                message: "stream ended before the response was complete".into()
            })
        );
    }

    #[test]
    fn non_streamed_message_parses_too() {
        let body = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x",
            "content":[{"type":"text","text":"Checking."},
                       {"type":"tool_use","id":"toolu_A","name":"ls","input":{"path":"."}}],
            "stop_reason":"tool_use","usage":{"input_tokens":10,"cache_read_input_tokens":0,"output_tokens":4}}"#;
        let r = sse::parse_json_answer::<AnthropicAssembler>(body, PROVIDER).unwrap();
        assert_eq!(r.text.as_deref(), Some("Checking."));
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].arguments, json!({"path": "."}));
        assert_eq!(r.finish_reason.as_deref(), Some("tool_use"));
        assert_eq!(
            r.usage,
            Some(Usage {
                input_tokens: 10,
                output_tokens: 4,
                total_tokens: 14,
                cache_read_tokens: Some(0)
            })
        );
        let err = sse::parse_json_answer::<AnthropicAssembler>(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            PROVIDER,
        );
        assert_eq!(
            err,
            Err(ModelError::Stream {
                provider: "anthropic".into(),
                message: "Overloaded".into()
            })
        );
    }

    fn request(messages: Vec<Message>, tools: Vec<ToolSpec>, none: bool) -> ChatRequest {
        ChatRequest {
            system: "be brief".into(),
            messages: std::sync::Arc::new(messages),
            tools: tools.into(),
            tool_choice_none: none,
            agent: AgentId::Lead,
            turn: 2,
        }
    }

    fn tool(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: format!("{name} tool"),
            parameters: json!({"type": "object"}),
        }
    }

    #[test]
    fn request_body_merges_tool_results_into_one_user_message() {
        let settings = HttpSettings::new("claude-x", "https://api.anthropic.com", Some("k".into()));
        let a = ToolCall::from_raw("toolu_A".into(), "read_file".into(), r#"{"path":"a"}"#);
        let b = ToolCall::from_raw("toolu_B".into(), "get_time".into(), "{broken");
        let req = request(
            vec![
                Message::User("look".into()),
                Message::Assistant {
                    text: Some("Sure.".into()),
                    tool_calls: vec![a, b],
                },
                Message::Tool {
                    call_id: "toolu_A".into(),
                    name: "read_file".into(),
                    content: "A".into(),
                },
                Message::Tool {
                    call_id: "toolu_B".into(),
                    name: "get_time".into(),
                    content: "bad".into(),
                },
                Message::User("and?".into()),
                Message::Assistant {
                    text: Some("Done.".into()),
                    tool_calls: vec![],
                },
            ],
            vec![tool("read_file"), tool("get_time")],
            true,
        );
        assert_eq!(
            request_body(&settings, &req),
            json!({
                "model": "claude-x",
                "max_tokens": 4096,
                "system": "be brief",
                "messages": [
                    {"role": "user", "content": "look"},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Sure."},
                        {"type": "tool_use", "id": "toolu_A", "name": "read_file", "input": {"path": "a"}},
                        {"type": "tool_use", "id": "toolu_B", "name": "get_time", "input": {}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_A", "content": "A"},
                        {"type": "tool_result", "tool_use_id": "toolu_B", "content": "bad"},
                        {"type": "text", "text": "and?"},
                    ]},
                    {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
                ],
                "tools": [
                    {"name": "read_file", "description": "read_file tool", "input_schema": {"type": "object"}},
                    {"name": "get_time", "description": "get_time tool", "input_schema": {"type": "object"}},
                ],
                "tool_choice": {"type": "none"},
                "stream": true,
            })
        );
    }

    #[test]
    fn request_body_options() {
        let mut settings = HttpSettings::new("claude-x", "https://api.anthropic.com", None);
        settings.max_tokens = Some(100);
        settings.temperature = Some(0.5);
        let mut req = request(vec![Message::User("hi".into())], vec![], true);
        req.system = "".into();
        let body = request_body(&settings, &req);
        assert_eq!(body["max_tokens"], json!(100));
        assert_eq!(body["temperature"], json!(0.5));
        for key in ["system", "tools", "tool_choice"] {
            assert!(body.get(key).is_none(), "{key}");
        }
    }

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
    #[tokio::test]
    async fn a_response_over_32_mib_is_a_stream_error() {
        let start = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\
                     \"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
        let delta = format!(
            "event: content_block_delta\ndata: {}\n\n",
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": "b".repeat(1 << 20)}})
        );
        let body = format!("{start}{}", delta.repeat(33));
        let err = parse_cut(&body, &[]).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "anthropic stream error: the response is too large (over 32 MiB of text and \
             tool-call arguments)"
        );
    }
}
