//! The JSON body of a streamed Messages API request.

use serde_json::{json, Map, Value};

use super::DEFAULT_MAX_TOKENS;
use crate::model::{ChatRequest, HttpSettings, Message, ToolCall, ToolSpec};

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
    settings.merge_extra_body(&mut body);
    // Anthropic rejects a temperature other than 1 while thinking is enabled.
    if body.get("thinking").and_then(|t| t.get("type")) == Some(&json!("enabled")) {
        body.remove("temperature");
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
/// Thinking blocks go first, unchanged (their signatures cover them), as the API sent them.
fn wire_assistant(text: Option<&str>, tool_calls: &[ToolCall], kept: &[Value]) -> Option<Value> {
    let text = text.filter(|t| !t.is_empty());
    if text.is_none() && tool_calls.is_empty() {
        return None;
    }
    let mut blocks = Vec::with_capacity(kept.len() + tool_calls.len() + 1);
    blocks.extend(kept.iter().cloned());
    if let Some(text) = text {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for call in tool_calls {
        // `input` must be an object: invalid argument text goes back as `{}`.
        blocks.push(
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}),
        );
    }
    Some(json!({"role": "assistant", "content": blocks}))
}

fn wire_tool(tool: &ToolSpec) -> Value {
    json!({"name": tool.name, "description": tool.description, "input_schema": tool.parameters})
}

#[cfg(test)]
mod tests {
    use super::super::test_data::{request, tool};
    use super::*;

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
}
