//! The JSON body of a streamed Messages API request.

use serde_json::{json, Map, Value};

use super::max_tokens;
use crate::model::{ChatRequest, HttpSettings, Message, ToolCall, ToolSpec};

/// The JSON body of a streamed Messages API request.
pub fn request_body(settings: &HttpSettings, req: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(settings.model));
    body.insert("max_tokens".into(), json!(max_tokens(settings)));
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
    if settings.prompt_cache {
        mark_cache_breakpoints(&mut body);
    }
    settings.merge_extra_body(&mut body);
    // Anthropic rejects a temperature other than 1 while thinking is enabled.
    if body.get("thinking").and_then(|t| t.get("type")) == Some(&json!("enabled")) {
        body.remove("temperature");
    }
    Value::Object(body)
}

/// The API allows four `cache_control` breakpoints per request.
const MAX_BREAKPOINTS: usize = 4;

/// Marks prompt-cache breakpoints (contract §2 `prompt_cache`), in the API's prefix order:
/// the last tool (the tool list), the system prompt, the user turn the previous call of this
/// conversation ended with, and the latest turn. A call then reads everything up to the
/// previous call's end from the cache and writes its own end for the next one; the lead's
/// turns share their prefix, and so does every sub-agent of one type (same prompt, same
/// tools). The previous turn's mark keeps that hit even when the latest turn adds more
/// blocks than the API looks back over from one breakpoint.
fn mark_cache_breakpoints(body: &mut Map<String, Value>) {
    let mut left = MAX_BREAKPOINTS;
    if let Some(Value::Array(tools)) = body.get_mut("tools") {
        if let Some(Value::Object(last)) = tools.last_mut() {
            last.insert("cache_control".into(), ephemeral());
            left -= 1;
        }
    }
    if let Some(Value::String(system)) = body.get("system") {
        let block = json!([{"type": "text", "text": system, "cache_control": ephemeral()}]);
        body.insert("system".into(), block);
        left -= 1;
    }
    let Some(Value::Array(messages)) = body.get_mut("messages") else {
        return;
    };
    // A text content as one text block, marked or not, so a turn is the same bytes
    // (apart from its mark) in every request that carries it.
    for message in messages.iter_mut() {
        if let Some(Value::String(text)) = message.get("content") {
            if !text.is_empty() {
                let block = json!([{"type": "text", "text": text}]);
                message["content"] = block;
            }
        }
    }
    // The latest turn, then the user turn before the latest assistant turn.
    let mut marked = 0;
    let mut want_user = false;
    for message in messages.iter_mut().rev() {
        if marked == left.min(2) {
            break;
        }
        let is_user = message["role"] == "user";
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

/// Puts the breakpoint on the message's last block that may carry one (thinking blocks may
/// not).
fn mark_last_block(message: &mut Value) -> bool {
    let Some(Value::Array(blocks)) = message.get_mut("content") else {
        return false;
    };
    let markable = blocks
        .iter_mut()
        .rev()
        .find(|b| !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")));
    match markable.and_then(Value::as_object_mut) {
        Some(block) => {
            block.insert("cache_control".into(), ephemeral());
            true
        }
        None => false,
    }
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
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
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments.to_value()}),
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
                    reasoning: crate::model::Reasoning {
                        text: None,
                        blocks: vec![thinking.clone()],
                    },
                },
                Message::Assistant {
                    text: Some("Done.".into()),
                    tool_calls: vec![],
                    reasoning: crate::model::Reasoning {
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
