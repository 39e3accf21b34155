//! The JSON body of a streamed chat completion request.

use serde_json::{json, Map, Value};

use crate::model::output_schema::OutputSchema;
use crate::model::{ChatRequest, HttpSettings, Message, ToolCall, ToolSpec};

/// The JSON body of a streamed chat completion request.
pub fn request_body(settings: &HttpSettings, req: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(settings.model));
    body.insert("messages".into(), Value::Array(wire_messages(req)));
    if !req.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(req.tools.iter().map(wire_tool).collect()),
        );
        if req.tool_choice_none {
            body.insert("tool_choice".into(), json!("none"));
        }
    }
    if let Some(schema) = &req.output_schema {
        body.insert("response_format".into(), response_format(schema));
    }
    body.insert("stream".into(), json!(true));
    // Without this, OpenAI (and llama-server) report no usage for streamed answers.
    body.insert("stream_options".into(), json!({"include_usage": true}));
    // OpenAI's reasoning models reject `max_tokens` and `temperature` (HTTP 400).
    let reasoning_model = is_reasoning_model(settings);
    if let Some(max) = settings.max_tokens {
        let key = if reasoning_model {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body.insert(key.into(), json!(max));
    }
    if let Some(t) = settings.temperature.filter(|_| !reasoning_model) {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(effort) = &settings.reasoning_effort {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    settings.merge_extra_body(&mut body);
    Value::Object(body)
}

/// OpenAI's `o1`…`o4` and `gpt-5` families (also behind a gateway's `vendor/` prefix), or
/// any model configured with a `reasoning_effort`. The Responses API client applies the
/// same rule.
pub fn is_reasoning_model(settings: &HttpSettings) -> bool {
    if settings.reasoning_effort.is_some() {
        return true;
    }
    let id = settings.model.rsplit('/').next().unwrap_or_default();
    let id = id.to_ascii_lowercase();
    let family = |prefix: &str| {
        id.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '.', ':', '_']))
    };
    ["o1", "o2", "o3", "o4", "gpt-5"].into_iter().any(family)
}

/// Structured output: the schema constrains the answer's text (tool calls stay possible),
/// strictly only when OpenAI's strict mode takes the schema.
fn response_format(schema: &OutputSchema) -> Value {
    json!({
        "type": "json_schema",
        "json_schema": {
            "name": schema.name(),
            "schema": schema.schema(),
            "strict": super::strict::compatible(schema.schema()),
        },
    })
}

fn wire_messages(req: &ChatRequest) -> Vec<Value> {
    let mut out = Vec::with_capacity(req.messages.len() + 1);
    if !req.system.is_empty() {
        out.push(json!({"role": "system", "content": req.system}));
    }
    out.extend(req.messages.iter().map(wire_message));
    out
}

fn wire_message(message: &Message) -> Value {
    match message {
        Message::User(text) => json!({"role": "user", "content": text}),
        Message::Assistant {
            text,
            tool_calls,
            reasoning,
        } => wire_assistant(text.as_deref(), tool_calls, reasoning.text.as_deref()),
        Message::Tool {
            call_id, content, ..
        } => {
            json!({"role": "tool", "tool_call_id": call_id, "content": content})
        }
    }
}

fn wire_assistant(text: Option<&str>, tool_calls: &[ToolCall], reasoning: Option<&str>) -> Value {
    let text = text.filter(|t| !t.is_empty());
    let mut message = if tool_calls.is_empty() {
        // An assistant message needs content or tool calls: keep it valid even when empty.
        json!({"role": "assistant", "content": text.unwrap_or("")})
    } else {
        let calls: Vec<Value> = tool_calls.iter().map(wire_call).collect();
        json!({"role": "assistant", "content": text, "tool_calls": calls})
    };
    // The servers that stream `reasoning_content` want it back on the message.
    if let (Some(reasoning), Value::Object(fields)) = (reasoning, &mut message) {
        fields.insert("reasoning_content".into(), json!(reasoning));
    }
    message
}

/// A call as the model made it, with the fields the server added to it.
fn wire_call(call: &ToolCall) -> Value {
    let mut wire = Map::new();
    wire.insert("id".into(), json!(call.id));
    wire.insert("type".into(), json!("function"));
    wire.insert(
        "function".into(),
        json!({"name": call.name, "arguments": call.arguments_text()}),
    );
    for (key, value) in &call.extra {
        wire.entry(key.clone()).or_insert_with(|| value.clone());
    }
    Value::Object(wire)
}

fn wire_tool(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_data::{request, time_tool};
    use super::*;

    #[test]
    fn request_body_with_tool_calls_and_results() {
        let mut settings = HttpSettings::new("smollm2", "http://x/v1", None);
        settings.max_tokens = Some(64);
        settings.temperature = Some(0.2);
        let call = ToolCall::from_raw("c1".into(), "get_time".into(), "{}");
        let bad = ToolCall::from_raw("c2".into(), "get_time".into(), "{oops");
        let req = request(
            vec![
                Message::User("time?".into()),
                Message::Assistant {
                    text: None,
                    tool_calls: vec![call, bad],
                    reasoning: Default::default(),
                },
                Message::Tool {
                    call_id: "c1".into(),
                    name: "get_time".into(),
                    content: "12:34".into(),
                },
                Message::Tool {
                    call_id: "c2".into(),
                    name: "get_time".into(),
                    content: "bad args".into(),
                },
                Message::Assistant {
                    text: Some("It is 12:34.".into()),
                    tool_calls: vec![],
                    reasoning: Default::default(),
                },
            ],
            vec![time_tool()],
            true,
        );
        let body = request_body(&settings, &req);
        assert_eq!(
            body,
            json!({
                "model": "smollm2",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "time?"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
                        {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": "{oops"}},
                    ]},
                    {"role": "tool", "tool_call_id": "c1", "content": "12:34"},
                    {"role": "tool", "tool_call_id": "c2", "content": "bad args"},
                    {"role": "assistant", "content": "It is 12:34."},
                ],
                "tools": [{"type": "function", "function": {
                    "name": "get_time", "description": "Current time",
                    "parameters": {"type": "object", "properties": {}}}}],
                "tool_choice": "none",
                "stream": true,
                "stream_options": {"include_usage": true},
                "max_tokens": 64,
                "temperature": 0.2,
            })
        );
    }

    #[test]
    fn an_output_schema_becomes_the_response_format() {
        let settings = HttpSettings::new("m", "http://x/v1", None);
        let closed = json!({"type": "object", "properties": {"ok": {"type": "boolean"}},
                            "required": ["ok"], "additionalProperties": false});
        let open = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
        for (schema, strict) in [(closed, true), (open, false)] {
            let mut req = request(vec![Message::User("hi".into())], vec![], false);
            req.output_schema = Some(std::sync::Arc::new(
                OutputSchema::new("verdict", schema.clone()).unwrap(),
            ));
            let body = request_body(&settings, &req);
            assert_eq!(
                body["response_format"],
                json!({"type": "json_schema", "json_schema": {
                    "name": "verdict", "schema": schema, "strict": strict}})
            );
        }
    }

    fn body_of(settings: &HttpSettings) -> Value {
        request_body(
            settings,
            &request(vec![Message::User("hi".into())], vec![], false),
        )
    }

    #[test]
    fn reasoning_models_get_max_completion_tokens_and_no_temperature() {
        for model in [
            "o1",
            "o1-mini",
            "o3-mini",
            "o4-mini-2025-04-16",
            "gpt-5",
            "gpt-5-mini",
            "gpt-5.1",
            "openai/o3",
            "GPT-5-nano",
        ] {
            let mut settings = HttpSettings::new(model, "http://x/v1", None);
            settings.max_tokens = Some(64);
            settings.temperature = Some(0.2);
            let body = body_of(&settings);
            assert_eq!(body["max_completion_tokens"], json!(64), "{model}");
            for key in ["max_tokens", "temperature", "reasoning_effort"] {
                assert!(body.get(key).is_none(), "{model}: {key}");
            }
        }
        for model in [
            "gpt-4o-mini",
            "o10",
            "oss-20b",
            "gpt-50",
            "qwen3",
            "gpt-4.1",
        ] {
            let mut settings = HttpSettings::new(model, "http://x/v1", None);
            settings.max_tokens = Some(64);
            settings.temperature = Some(0.2);
            let body = body_of(&settings);
            assert_eq!(body["max_tokens"], json!(64), "{model}");
            assert_eq!(body["temperature"], json!(0.2), "{model}");
            assert!(body.get("max_completion_tokens").is_none(), "{model}");
        }
    }

    #[test]
    fn a_reasoning_effort_is_sent_and_makes_a_reasoning_model() {
        let mut settings = HttpSettings::new("deepseek-v4", "http://x/v1", None);
        settings.max_tokens = Some(64);
        settings.temperature = Some(0.2);
        settings.reasoning_effort = Some("high".into());
        let body = body_of(&settings);
        assert_eq!(body["reasoning_effort"], json!("high"));
        assert_eq!(body["max_completion_tokens"], json!(64));
        assert!(body.get("max_tokens").is_none() && body.get("temperature").is_none());
    }

    #[test]
    fn extra_body_and_the_thinking_map_are_merged_at_the_top_level() {
        let map = |v: Value| v.as_object().unwrap().clone();
        let mut settings = HttpSettings::new("deepseek-v4", "http://x/v1", None);
        settings.extra_body = map(json!({"top_k": 20, "thinking": {"type": "auto"}}));
        settings.thinking.when_enabled = map(json!({
            "extra_body": {"thinking": {"type": "enabled"}},
            "reasoning_effort": "high",
        }));
        settings.thinking.when_disabled =
            map(json!({"extra_body": {"thinking": {"type": "disabled"}}}));
        // Not supported: the disabled map applies, whatever was asked for.
        for requested in [None, Some(true), Some(false)] {
            settings.thinking.requested = requested;
            let body = body_of(&settings);
            assert_eq!(body["thinking"], json!({"type": "disabled"}));
            assert_eq!(body["top_k"], json!(20));
            assert!(body.get("reasoning_effort").is_none());
        }
        settings.thinking.supported = true;
        for (requested, on) in [(None, true), (Some(true), true), (Some(false), false)] {
            settings.thinking.requested = requested;
            let body = body_of(&settings);
            let kind = if on { "enabled" } else { "disabled" };
            assert_eq!(body["thinking"], json!({"type": kind}), "{requested:?}");
            assert_eq!(body["top_k"], json!(20));
            assert_eq!(body.get("reasoning_effort").is_some(), on);
            assert!(body.get("extra_body").is_none());
            assert_eq!(body["stream"], json!(true));
        }
    }

    #[test]
    fn request_body_omits_empty_tools_and_unset_options() {
        let settings = HttpSettings::new("m", "http://x/v1", None);
        let body = request_body(
            &settings,
            &request(vec![Message::User("hi".into())], vec![], true),
        );
        let obj = body.as_object().unwrap();
        for key in [
            "tools",
            "tool_choice",
            "max_tokens",
            "temperature",
            "response_format",
            "max_completion_tokens",
            "reasoning_effort",
            "thinking",
        ] {
            assert!(!obj.contains_key(key), "{key}");
        }
    }
}
