//! The JSON body of a streamed Messages API request.

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::max_tokens;
use crate::image::Image;
use crate::{ChatRequest, HttpSettings, Message, ToolCall, ToolSpec};

/// The body of one `POST /v1/messages`: what deerflow writes, typed. A key of the model's
/// `extra_body` or thinking map replaces a built one where it stands (these are `Value`s
/// for that) or goes in `extra`, after them, as in a JSON object built key by key.
#[derive(Serialize)]
pub struct Body<'a> {
    model: &'a str,
    max_tokens: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<System<'a>>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<WireTool<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<Value>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// The system prompt: plain text, or one text block when it carries a cache breakpoint.
#[derive(Serialize)]
#[serde(untagged)]
enum System<'a> {
    Text(&'a str),
    Blocks([Block<'a>; 1]),
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: Role,
    content: Content<'a>,
}

#[derive(Serialize, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Role {
    User,
    Assistant,
}

/// A message's content: a user's plain text, or blocks.
#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(&'a str),
    Blocks(Vec<Block<'a>>),
}

/// One content block: those deerflow writes, and those the API sent that go back as they
/// came (thinking blocks, whose signatures cover them).
#[derive(Serialize)]
#[serde(untagged)]
enum Block<'a> {
    Own {
        #[serde(flatten)]
        block: OwnBlock<'a>,
        #[serde(flatten)]
        mark: Option<CacheMark>,
    },
    Kept(Value),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OwnBlock<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: ResultContent<'a>,
    },
    Image {
        source: ImageSource<'a>,
    },
}

/// A tool result's content: its text, or its text and the images it showed.
#[derive(Serialize)]
#[serde(untagged)]
enum ResultContent<'a> {
    Text(&'a str),
    Blocks(Vec<Block<'a>>),
}

#[derive(Serialize)]
struct ImageSource<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'static str,
    data: &'a str,
}

/// A prompt-cache breakpoint, written after the block's own keys.
#[derive(Serialize, Clone, Copy)]
struct CacheMark {
    cache_control: Ephemeral,
}

#[derive(Serialize, Clone, Copy)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Ephemeral {
    Ephemeral,
}

const MARK: CacheMark = CacheMark {
    cache_control: Ephemeral::Ephemeral,
};

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(flatten)]
    mark: Option<CacheMark>,
}

impl<'a> Block<'a> {
    fn own(block: OwnBlock<'a>) -> Self {
        Block::Own { block, mark: None }
    }

    /// Puts a breakpoint on the block; thinking blocks may not carry one.
    fn mark(&mut self) -> bool {
        match self {
            Block::Own { mark, .. } => {
                *mark = Some(MARK);
                true
            }
            Block::Kept(value) => {
                let thinking = matches!(
                    value.get("type").and_then(Value::as_str),
                    Some("thinking" | "redacted_thinking")
                );
                match value.as_object_mut() {
                    Some(block) if !thinking => {
                        block.insert("cache_control".into(), json!({"type": "ephemeral"}));
                        true
                    }
                    _ => false,
                }
            }
        }
    }
}

/// The JSON body of a streamed Messages API request (as a `Value`, for tests).
pub fn request_body(settings: &HttpSettings, req: &ChatRequest) -> Value {
    serde_json::to_value(body(settings, req)).unwrap_or(Value::Null)
}

/// The request body's bytes.
pub fn request_bytes(settings: &HttpSettings, req: &ChatRequest) -> Vec<u8> {
    // Cannot fail: string keys only, and serde_json writes non-finite floats as null.
    serde_json::to_vec(&body(settings, req)).unwrap_or_default()
}

pub fn body<'a>(settings: &'a HttpSettings, req: &'a ChatRequest) -> Body<'a> {
    let has_tools = !req.tools.is_empty();
    let mut body = Body {
        model: &settings.model,
        max_tokens: json!(max_tokens(settings)),
        system: (!req.system.is_empty()).then_some(System::Text(&req.system)),
        messages: wire_messages(&req.messages),
        tools: has_tools.then(|| req.tools.iter().map(wire_tool).collect()),
        tool_choice: (has_tools && req.tool_choice_none).then(|| json!({"type": "none"})),
        stream: true,
        temperature: settings.temperature.map(|t| json!(t)),
        extra: Map::new(),
    };
    if settings.prompt_cache {
        body.mark_cache_breakpoints();
    }
    let mut user = Map::new();
    settings.merge_extra_body(&mut user);
    for (key, value) in user {
        body.insert(key, value);
    }
    // Anthropic rejects a temperature other than 1 while thinking is enabled.
    let thinking = body.extra.get("thinking").and_then(|t| t.get("type"));
    if thinking == Some(&json!("enabled")) {
        body.temperature = None;
        body.extra.remove("temperature");
    }
    body
}

impl Body<'_> {
    /// A key from the model's maps: it replaces the built one where it stands, or goes
    /// last. (`model`, `messages`, `system`, `stream` and `tools` are the client's: config
    /// refuses them in those maps.)
    fn insert(&mut self, key: String, value: Value) {
        let slot = match key.as_str() {
            "max_tokens" => Some(&mut self.max_tokens),
            "tool_choice" => self.tool_choice.as_mut(),
            "temperature" => self.temperature.as_mut(),
            _ => None,
        };
        match slot {
            Some(slot) => *slot = value,
            None => {
                self.extra.insert(key, value);
            }
        }
    }

    /// Marks prompt-cache breakpoints (contract §2 `prompt_cache`), in the API's prefix
    /// order: the last tool (the tool list), the system prompt, the user turn the previous
    /// call of this conversation ended with, and the latest turn. A call then reads
    /// everything up to the previous call's end from the cache and writes its own end for
    /// the next one; the lead's turns share their prefix, and so does every sub-agent of one
    /// type (same prompt, same tools). The previous turn's mark keeps that hit even when the
    /// latest turn adds more blocks than the API looks back over from one breakpoint.
    fn mark_cache_breakpoints(&mut self) {
        let mut left = MAX_BREAKPOINTS;
        if let Some(last) = self.tools.as_mut().and_then(|t| t.last_mut()) {
            last.mark = Some(MARK);
            left -= 1;
        }
        if let Some(System::Text(system)) = self.system {
            self.system = Some(System::Blocks([Block::Own {
                block: OwnBlock::Text { text: system },
                mark: Some(MARK),
            }]));
            left -= 1;
        }
        // A text content as one text block, marked or not, so a turn is the same bytes
        // (apart from its mark) in every request that carries it.
        for message in self.messages.iter_mut() {
            if let Content::Text(text) = message.content {
                if !text.is_empty() {
                    message.content = Content::Blocks(vec![Block::own(OwnBlock::Text { text })]);
                }
            }
        }
        // The latest turn, then the user turn before the latest assistant turn.
        let mut marked = 0;
        let mut want_user = false;
        for message in self.messages.iter_mut().rev() {
            if marked == left.min(2) {
                break;
            }
            let is_user = message.role == Role::User;
            if marked == 0 || (want_user && is_user) {
                if mark_last_block(message) {
                    marked += 1;
                }
                want_user = false;
            }
            if !is_user && marked > 0 {
                want_user = true;
            }
        }
    }
}

/// The API allows four `cache_control` breakpoints per request.
const MAX_BREAKPOINTS: usize = 4;

/// Puts the breakpoint on the message's last block that may carry one.
fn mark_last_block(message: &mut WireMessage<'_>) -> bool {
    let Content::Blocks(blocks) = &mut message.content else {
        return false;
    };
    blocks.iter_mut().rev().any(Block::mark)
}

/// Maps the transcript to Anthropic's alternating turns: tool results travel as `user`
/// messages of `tool_result` blocks, so consecutive tool messages (and a user text right
/// after them) are merged into one user message.
fn wire_messages(messages: &[Message]) -> Vec<WireMessage<'_>> {
    let mut out: Vec<WireMessage<'_>> = Vec::with_capacity(messages.len());
    for message in messages {
        match message {
            Message::User(text) => {
                if let Some(blocks) = last_user_blocks(&mut out) {
                    blocks.push(Block::own(OwnBlock::Text { text }));
                } else {
                    out.push(WireMessage {
                        role: Role::User,
                        content: Content::Text(text),
                    });
                }
            }
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                if let Some(wire) = wire_assistant(text.as_deref(), tool_calls, &reasoning.blocks) {
                    out.push(wire);
                }
            }
            Message::Tool {
                call_id, content, ..
            } => {
                let block = Block::own(OwnBlock::ToolResult {
                    tool_use_id: call_id,
                    content: ResultContent::Text(content),
                });
                if let Some(blocks) = last_user_blocks(&mut out) {
                    blocks.push(block);
                } else {
                    out.push(WireMessage {
                        role: Role::User,
                        content: Content::Blocks(vec![block]),
                    });
                }
            }
            Message::Images { call_id, images } => {
                attach_images(&mut out, call_id.as_deref(), images)
            }
        }
    }
    out
}

/// Puts images where Anthropic takes them: inside the `tool_result` of the call that showed
/// them, else (the task's) at the end of the last user message.
fn attach_images<'a>(out: &mut Vec<WireMessage<'a>>, call_id: Option<&str>, images: &'a [Image]) {
    let blocks = images.iter().map(|image| {
        Block::own(OwnBlock::Image {
            source: ImageSource {
                kind: "base64",
                media_type: image.mime(),
                data: image.base64(),
            },
        })
    });
    if let (Some(id), Some(user)) = (call_id, last_user_blocks(out)) {
        let result = user.iter_mut().rev().find_map(|b| match b {
            Block::Own {
                block:
                    OwnBlock::ToolResult {
                        tool_use_id,
                        content,
                    },
                ..
            } if *tool_use_id == id => Some(content),
            _ => None,
        });
        if let Some(content) = result {
            if let ResultContent::Text(text) = *content {
                *content = ResultContent::Blocks(vec![Block::own(OwnBlock::Text { text })]);
            }
            if let ResultContent::Blocks(inner) = content {
                inner.extend(blocks);
            }
            return;
        }
    }
    match out.last_mut() {
        Some(WireMessage {
            role: Role::User,
            content,
        }) => {
            if let Content::Text(text) = *content {
                *content = Content::Blocks(vec![Block::own(OwnBlock::Text { text })]);
            }
            if let Content::Blocks(inner) = content {
                inner.extend(blocks);
            }
        }
        _ => out.push(WireMessage {
            role: Role::User,
            content: Content::Blocks(blocks.collect()),
        }),
    }
}

/// The blocks of the last message when it is a user message of blocks.
fn last_user_blocks<'m, 'a>(out: &'m mut [WireMessage<'a>]) -> Option<&'m mut Vec<Block<'a>>> {
    match out.last_mut() {
        Some(WireMessage {
            role: Role::User,
            content: Content::Blocks(blocks),
        }) => Some(blocks),
        _ => None,
    }
}

/// `None` for an assistant message with neither text nor calls: the API rejects empty
/// text blocks, and dropping it only merges two user turns, which the API accepts.
/// Thinking blocks go first, unchanged (their signatures cover them), as the API sent them.
fn wire_assistant<'a>(
    text: Option<&'a str>,
    tool_calls: &'a [ToolCall],
    kept: &[Value],
) -> Option<WireMessage<'a>> {
    let text = text.filter(|t| !t.is_empty());
    if text.is_none() && tool_calls.is_empty() {
        return None;
    }
    let mut blocks = Vec::with_capacity(kept.len() + tool_calls.len() + 1);
    blocks.extend(kept.iter().cloned().map(Block::Kept));
    if let Some(text) = text {
        blocks.push(Block::own(OwnBlock::Text { text }));
    }
    for call in tool_calls {
        // `input` must be an object: invalid argument text goes back as `{}`.
        blocks.push(Block::own(OwnBlock::ToolUse {
            id: &call.id,
            name: &call.name,
            input: call.arguments.to_value(),
        }));
    }
    Some(WireMessage {
        role: Role::Assistant,
        content: Content::Blocks(blocks),
    })
}

fn wire_tool(tool: &ToolSpec) -> WireTool<'_> {
    WireTool {
        name: &tool.name,
        description: &tool.description,
        input_schema: &tool.parameters,
        mark: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_data::{request, tool};
    use super::*;

    #[test]
    fn request_body_merges_tool_results_into_one_user_message() {
        let mut settings =
            HttpSettings::new("claude-x", "https://api.anthropic.com", Some("k".into()));
        // The breakpoints have their own tests.
        settings.prompt_cache = false;
        let a = ToolCall::from_raw("toolu_A".into(), "read_file".into(), r#"{"path":"a"}"#);
        let b = ToolCall::from_raw("toolu_B".into(), "get_time".into(), "{broken");
        let req = request(
            vec![
                Message::User("look".into()),
                Message::Assistant {
                    text: Some("Sure.".into()),
                    tool_calls: vec![a, b],
                    reasoning: Default::default(),
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
                    reasoning: Default::default(),
                },
            ],
            vec![tool("read_file"), tool("get_time")],
            true,
        );
        assert_eq!(
            request_body(&settings, &req),
            json!({
                "model": "claude-x",
                "max_tokens": 32000,
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
        for key in ["system", "tools", "tool_choice", "thinking"] {
            assert!(body.get(key).is_none(), "{key}");
        }
    }

    #[test]
    fn the_thinking_map_becomes_body_keys() {
        let mut settings = HttpSettings::new("claude-x", "https://api.anthropic.com", None);
        settings.max_tokens = Some(16000);
        settings.extra_body = json!({"metadata": {"user_id": "u"}})
            .as_object()
            .unwrap()
            .clone();
        settings.thinking.supported = true;
        settings.thinking.when_enabled =
            json!({"thinking": {"type": "enabled", "budget_tokens": 10000}})
                .as_object()
                .unwrap()
                .clone();
        let req = request(vec![Message::User("hi".into())], vec![], false);
        let body = request_body(&settings, &req);
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 10000})
        );
        assert_eq!(body["metadata"], json!({"user_id": "u"}));
        settings.thinking.requested = Some(false);
        assert!(request_body(&settings, &req).get("thinking").is_none());
    }

    #[test]
    fn no_temperature_while_thinking_is_enabled() {
        let mut settings = HttpSettings::new("claude-x", "https://api.anthropic.com", None);
        settings.temperature = Some(0.2);
        settings.thinking.supported = true;
        settings.thinking.when_enabled =
            json!({"thinking": {"type": "enabled", "budget_tokens": 1024}})
                .as_object()
                .unwrap()
                .clone();
        settings.thinking.when_disabled = json!({"thinking": {"type": "disabled"}})
            .as_object()
            .unwrap()
            .clone();
        let req = request(vec![Message::User("hi".into())], vec![], false);
        assert!(request_body(&settings, &req).get("temperature").is_none());
        settings.thinking.requested = Some(false);
        let body = request_body(&settings, &req);
        assert_eq!(body["temperature"], json!(0.2));
        assert_eq!(body["thinking"], json!({"type": "disabled"}));
    }

    /// Where the request carries `cache_control`, as (place, index) pairs.
    fn breakpoints(body: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
            if tool.get("cache_control").is_some() {
                out.push(format!("tools[{i}]"));
            }
        }
        for (i, block) in body["system"].as_array().into_iter().flatten().enumerate() {
            if block.get("cache_control").is_some() {
                out.push(format!("system[{i}]"));
            }
        }
        for (m, message) in body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            for (b, block) in message["content"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                if block.get("cache_control").is_some() {
                    out.push(format!("messages[{m}][{b}]"));
                }
            }
        }
        out
    }

    fn turn(call: &str) -> Vec<Message> {
        vec![
            Message::Assistant {
                text: None,
                tool_calls: vec![ToolCall::from_raw(call.into(), "read_file".into(), "{}")],
                reasoning: Default::default(),
            },
            Message::Tool {
                call_id: call.into(),
                name: "read_file".into(),
                content: format!("result {call}"),
            },
        ]
    }

    #[test]
    fn the_first_call_marks_tools_system_and_the_prompt() {
        let settings = HttpSettings::new("claude-x", "https://api.anthropic.com", None);
        let req = request(
            vec![Message::User("task".into())],
            vec![tool("read_file"), tool("get_time")],
            false,
        );
        let body = request_body(&settings, &req);
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(
            body["tools"][1]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [
                {"type": "text", "text": "task", "cache_control": {"type": "ephemeral"}}]}])
        );
        assert_eq!(
            breakpoints(&body),
            ["tools[1]", "system[0]", "messages[0][0]"]
        );
    }

    #[test]
    fn later_calls_mark_the_latest_turn_and_the_previous_call_s_end() {
        let settings = HttpSettings::new("claude-x", "https://api.anthropic.com", None);
        let mut history = vec![Message::User("task".into())];
        history.extend(turn("toolu_1"));
        let second = request_body(
            &settings,
            &request(history.clone(), vec![tool("read_file")], false),
        );
        assert_eq!(
            breakpoints(&second),
            ["tools[0]", "system[0]", "messages[0][0]", "messages[2][0]"]
        );
        assert_eq!(
            second["messages"][2]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "result toolu_1",
                   "cache_control": {"type": "ephemeral"}})
        );
        history.extend(turn("toolu_2"));
        let third = request_body(&settings, &request(history, vec![tool("read_file")], false));
        // Never more than the API's four.
        assert_eq!(
            breakpoints(&third),
            ["tools[0]", "system[0]", "messages[2][0]", "messages[4][0]"]
        );
        // The prefix the second call wrote is the third call's, byte for byte, up to its mark.
        let strip = |mut v: Value| {
            for m in v.as_array_mut().unwrap() {
                if let Some(blocks) = m["content"].as_array_mut() {
                    for b in blocks {
                        b.as_object_mut().unwrap().remove("cache_control");
                    }
                }
            }
            v
        };
        let upto = |body: &Value, n: usize| strip(json!(body["messages"].as_array().unwrap()[..n]));
        assert_eq!(upto(&second, 3), upto(&third, 3));
    }

    #[test]
    fn no_tools_or_no_system_leave_their_breakpoint_out() {
        let settings = HttpSettings::new("claude-x", "https://api.anthropic.com", None);
        let mut req = request(vec![Message::User("task".into())], vec![], false);
        req.system = "".into();
        let body = request_body(&settings, &req);
        assert_eq!(breakpoints(&body), ["messages[0][0]"]);
        assert!(body.get("system").is_none() && body.get("tools").is_none());
    }

    #[test]
    fn thinking_blocks_never_carry_a_breakpoint() {
        let settings = HttpSettings::new("claude-x", "https://api.anthropic.com", None);
        let thinking = json!({"type": "thinking", "thinking": "hm", "signature": "sig"});
        let req = request(
            vec![
                Message::User("task".into()),
                Message::Assistant {
                    text: None,
                    tool_calls: vec![],
                    reasoning: crate::Reasoning {
                        text: None,
                        blocks: vec![thinking.clone()],
                    },
                },
                Message::Assistant {
                    text: Some("Done.".into()),
                    tool_calls: vec![],
                    reasoning: crate::Reasoning {
                        text: Some("hm".into()),
                        blocks: vec![thinking.clone()],
                    },
                },
            ],
            vec![],
            false,
        );
        let body = request_body(&settings, &req);
        let last = &body["messages"][1]["content"];
        assert_eq!(last[0], thinking);
        assert_eq!(last[1]["cache_control"], json!({"type": "ephemeral"}));
    }

    #[test]
    fn prompt_cache_off_sends_no_breakpoint() {
        let mut settings = HttpSettings::new("claude-x", "https://api.anthropic.com", None);
        settings.prompt_cache = false;
        let mut history = vec![Message::User("task".into())];
        history.extend(turn("toolu_1"));
        let body = request_body(&settings, &request(history, vec![tool("read_file")], false));
        assert!(!body.to_string().contains("cache_control"), "{body}");
        assert_eq!(body["system"], json!("be brief"));
        assert_eq!(body["messages"][0]["content"], json!("task"));
    }

    #[test]
    fn max_tokens_defaults_to_the_model_family_s_limit() {
        let settings = HttpSettings::new("claude-sonnet-4-5", "https://api.anthropic.com", None);
        let req = request(vec![Message::User("hi".into())], vec![], false);
        assert_eq!(request_body(&settings, &req)["max_tokens"], json!(64_000));
        let settings = HttpSettings::new("claude-3-5-haiku-latest", "https://x", None);
        assert_eq!(request_body(&settings, &req)["max_tokens"], json!(8_192));
    }
}
