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
    if let Some(max) = settings.max_tokens {
        body.insert("max_tokens".into(), json!(max));
    }
    if let Some(t) = settings.temperature {
        body.insert("temperature".into(), json!(t));
    }
    Value::Object(body)
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
        ] {
            assert!(!obj.contains_key(key), "{key}");
        }
    }
}
