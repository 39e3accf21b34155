//! The JSON body of a streamed Responses API request. The API is used statelessly: every
//! call carries the whole history as input items and nothing is stored on OpenAI's side
//! (`store: false`, no `previous_response_id`), so a call depends on its request alone —
//! as with every other provider, which replay, `--record` and sub-agents rely on.

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::super::openai_chat::{is_reasoning_model, strict};
use crate::output_schema::OutputSchema;
use crate::{ChatRequest, HttpSettings, Message, ToolCall, ToolSpec};

/// The item type of the reasoning the API returns; only these of an assistant message's
/// blocks are the Responses API's own (another provider's blocks never go to it).
pub(super) const REASONING_ITEM: &str = "reasoning";
/// The item type of a message. After a reasoning item, the message it led to is kept as
/// `{type: message, id}` among the blocks: it goes back with that id.
pub(super) const MESSAGE_ITEM: &str = "message";

/// The body of one `POST /responses`: what deerflow writes, typed. A key of the model's
/// `extra_body` or thinking map replaces a built one where it stands (these are `Value`s
/// for that) or goes in `extra`, after them, as in a JSON object built key by key.
#[derive(Serialize)]
pub struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    input: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<Value>,
    stream: bool,
    store: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    include: Option<Value>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// The JSON body of one `POST /responses` (as a `Value`, for tests).
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
    // Reasoning models reject `temperature` here as on Chat Completions (HTTP 400).
    let reasoning_model = is_reasoning_model(settings);
    let reasons = reasoning_model || settings.thinking.is_on();
    let mut body = Body {
        model: &settings.model,
        instructions: (!req.system.is_empty()).then_some(&*req.system),
        input: input_items(&req.messages),
        tools: has_tools.then(|| req.tools.iter().map(wire_tool).collect()),
        tool_choice: (has_tools && req.tool_choice_none).then(|| json!("none")),
        text: req
            .output_schema
            .as_ref()
            .map(|schema| json!({ "format": text_format(schema) })),
        stream: true,
        store: json!(false),
        max_output_tokens: settings.max_tokens.map(|max| json!(max)),
        temperature: settings
            .temperature
            .filter(|_| !reasoning_model)
            .map(|t| json!(t)),
        reasoning: reasons.then(|| reasoning(settings)).flatten(),
        // Without storage, a reasoning item can go back to the model only encrypted.
        include: reasons.then(|| json!(["reasoning.encrypted_content"])),
        extra: Map::new(),
    };
    let mut user = Map::new();
    settings.merge_extra_body(&mut user);
    for (key, value) in user {
        body.insert(key, value);
    }
    chat_spellings_to_responses(&mut body);
    body
}

/// The `reasoning` object: the effort, and summaries (what `reasoning` events show) asked
/// for only with thinking on: OpenAI serves them to verified organizations only.
fn reasoning(settings: &HttpSettings) -> Option<Value> {
    let mut reasoning = Map::new();
    if let Some(effort) = &settings.reasoning_effort {
        reasoning.insert("effort".into(), json!(effort));
    }
    if settings.thinking.is_on() {
        reasoning.insert("summary".into(), json!("auto"));
    }
    (!reasoning.is_empty()).then_some(Value::Object(reasoning))
}

impl Body<'_> {
    /// A key from the model's maps: it replaces the built one where it stands, or goes
    /// last. (`model`, `input`, `instructions`, `stream` and `tools` are the client's:
    /// config refuses them in those maps.)
    fn insert(&mut self, key: String, value: Value) {
        match self.slot(&key) {
            Some(slot) => *slot = value,
            None => {
                self.extra.insert(key, value);
            }
        }
    }

    /// The built value of a replaceable key, if the body has one.
    fn slot(&mut self, key: &str) -> Option<&mut Value> {
        match key {
            "store" => Some(&mut self.store),
            "tool_choice" => self.tool_choice.as_mut(),
            "text" => self.text.as_mut(),
            "max_output_tokens" => self.max_output_tokens.as_mut(),
            "temperature" => self.temperature.as_mut(),
            "reasoning" => self.reasoning.as_mut(),
            "include" => self.include.as_mut(),
            _ => self.extra.get_mut(key),
        }
    }
}

/// A thinking map or `extra_body` written for Chat Completions (DeerFlow's examples set
/// `reasoning_effort` there) says `reasoning_effort`; the Responses API rejects that key and
/// takes `reasoning.effort` (as LangChain translates it).
fn chat_spellings_to_responses(body: &mut Body<'_>) {
    // Only a model's map writes it, so it is in `extra`.
    let Some(effort) = body.extra.remove("reasoning_effort") else {
        return;
    };
    let reasoning = match body.slot("reasoning") {
        Some(reasoning) => reasoning,
        None => body
            .extra
            .entry("reasoning")
            .or_insert_with(|| Value::Object(Map::new())),
    };
    if let Value::Object(fields) = reasoning {
        fields.entry("effort").or_insert(effort);
    }
}

/// Structured output: `text.format` with the same strictness rule as Chat Completions.
fn text_format(schema: &OutputSchema) -> Value {
    json!({
        "type": "json_schema",
        "name": schema.name(),
        "schema": schema.schema(),
        "strict": strict::compatible(schema.schema()),
    })
}

fn input_items(messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        match message {
            Message::User(text) => out.push(json!({"role": "user", "content": text})),
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => assistant_items(&mut out, text.as_deref(), tool_calls, &reasoning.blocks),
            Message::Tool {
                call_id, content, ..
            } => out.push(json!({
                "type": "function_call_output",
                "call_id": call_id,
                "output": content,
            })),
            // As a user message of `input_image` parts after the call outputs: every
            // Responses model that sees takes those, not all take images in an output.
            Message::Images { images, .. } => {
                let parts: Vec<Value> = images
                    .iter()
                    .map(|i| json!({"type": "input_image", "image_url": i.data_url()}))
                    .collect();
                out.push(json!({"role": "user", "content": parts}));
            }
        }
    }
    out
}

/// An assistant turn as the items the API produced it as: its reasoning items, its text,
/// its function calls.
fn assistant_items(out: &mut Vec<Value>, text: Option<&str>, calls: &[ToolCall], blocks: &[Value]) {
    let text = text.filter(|t| !t.is_empty());
    // A reasoning item must be followed by the output it led to; a turn that produced
    // nothing else has nothing to follow it.
    if text.is_some() || !calls.is_empty() {
        out.extend(blocks.iter().filter(|b| goes_back(b)).cloned());
    }
    if let Some(text) = text {
        let mut message =
            json!({"role": "assistant", "content": [{"type": "output_text", "text": text}]});
        let id = blocks
            .iter()
            .find(|b| b["type"] == MESSAGE_ITEM)
            .and_then(|b| b["id"].as_str());
        if let Some(id) = id {
            message["id"] = json!(id);
        }
        out.push(message);
    }
    for call in calls {
        // Without the item id (`fc_…`): the call is identified by `call_id`, and an id
        // would make the API demand the reasoning item it came with.
        out.push(json!({
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments_text(),
        }));
    }
}

/// A reasoning item goes back unchanged when it is encrypted: with `store: false` the API
/// keeps nothing, so one without `encrypted_content` would be looked up by its id and not
/// be found (HTTP 400).
fn goes_back(block: &Value) -> bool {
    block["type"] == REASONING_ITEM && block["encrypted_content"].is_string()
}

/// A function tool. The Responses API makes tools strict unless told otherwise, and
/// strict mode refuses schemas with optional properties, which most tools have.
fn wire_tool(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": false,
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_data::{request, time_tool};
    use super::*;
    use crate::Reasoning;

    fn reasoning_item(encrypted: Option<&str>) -> Value {
        let mut item = json!({"id": "rs_1", "type": "reasoning",
                              "summary": [{"type": "summary_text", "text": "Think."}]});
        if let Some(e) = encrypted {
            item["encrypted_content"] = json!(e);
        }
        item
    }

    fn history() -> Vec<Message> {
        let call = ToolCall::from_raw("call_1".into(), "get_time".into(), "{}");
        let bad = ToolCall::from_raw("call_2".into(), "get_time".into(), "{oops");
        vec![
            Message::User("time?".into()),
            Message::Assistant {
                text: Some("Checking.".into()),
                tool_calls: vec![call, bad],
                reasoning: Reasoning {
                    text: Some("Think.".into()),
                    blocks: vec![
                        reasoning_item(Some("gAAAA==")),
                        json!({"type": "message", "id": "msg_1"}),
                        // Another provider's block, and one the API could not find again.
                        json!({"type": "thinking", "thinking": "x", "signature": "s"}),
                        reasoning_item(None),
                    ],
                },
            },
            Message::Tool {
                call_id: "call_1".into(),
                name: "get_time".into(),
                content: "12:34".into(),
            },
            Message::Tool {
                call_id: "call_2".into(),
                name: "get_time".into(),
                content: "bad args".into(),
            },
            Message::Assistant {
                text: Some("It is 12:34.".into()),
                tool_calls: vec![],
                reasoning: Default::default(),
            },
            Message::User("thanks".into()),
        ]
    }

    #[test]
    fn the_whole_history_becomes_input_items() {
        let mut settings = HttpSettings::new("gpt-4.1", "http://x/v1", None);
        settings.max_tokens = Some(64);
        settings.temperature = Some(0.2);
        let body = request_body(&settings, &request(history(), vec![time_tool()], true));
        assert_eq!(
            body,
            json!({
                "model": "gpt-4.1",
                "instructions": "be brief",
                "input": [
                    {"role": "user", "content": "time?"},
                    reasoning_item(Some("gAAAA==")),
                    {"role": "assistant", "content": [{"type": "output_text", "text": "Checking."}],
                     "id": "msg_1"},
                    {"type": "function_call", "call_id": "call_1", "name": "get_time", "arguments": "{}"},
                    {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{oops"},
                    {"type": "function_call_output", "call_id": "call_1", "output": "12:34"},
                    {"type": "function_call_output", "call_id": "call_2", "output": "bad args"},
                    {"role": "assistant", "content": [{"type": "output_text", "text": "It is 12:34."}]},
                    {"role": "user", "content": "thanks"},
                ],
                "tools": [{"type": "function", "name": "get_time", "description": "Current time",
                           "parameters": {"type": "object", "properties": {}}, "strict": false}],
                "tool_choice": "none",
                "stream": true,
                "store": false,
                "max_output_tokens": 64,
                "temperature": 0.2,
            })
        );
    }

    #[test]
    fn a_turn_with_only_reasoning_sends_nothing() {
        let messages = vec![
            Message::User("hi".into()),
            Message::Assistant {
                text: None,
                tool_calls: vec![],
                reasoning: Reasoning {
                    text: None,
                    blocks: vec![reasoning_item(Some("e"))],
                },
            },
            Message::User("again".into()),
        ];
        let settings = HttpSettings::new("o3", "http://x/v1", None);
        let body = request_body(&settings, &request(messages, vec![], false));
        assert_eq!(
            body["input"],
            json!([{"role": "user", "content": "hi"}, {"role": "user", "content": "again"}])
        );
        for key in [
            "instructions",
            "tools",
            "tool_choice",
            "text",
            "temperature",
        ] {
            let mut req = request(vec![], vec![], false);
            req.system = "".into();
            assert!(request_body(&settings, &req).get(key).is_none(), "{key}");
        }
    }

    #[test]
    fn reasoning_models_get_encrypted_reasoning_and_no_temperature() {
        let mut settings = HttpSettings::new("o4-mini", "http://x/v1", None);
        settings.max_tokens = Some(100);
        settings.temperature = Some(0.2);
        let body = request_body(&settings, &request(vec![], vec![], false));
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["max_output_tokens"], json!(100));
        assert!(body.get("temperature").is_none());
        // No effort and no thinking: nothing to say in `reasoning`.
        assert!(body.get("reasoning").is_none());

        settings.reasoning_effort = Some("high".into());
        let body = request_body(&settings, &request(vec![], vec![], false));
        assert_eq!(body["reasoning"], json!({"effort": "high"}));
        for key in ["reasoning_effort", "max_tokens", "max_completion_tokens"] {
            assert!(body.get(key).is_none(), "{key}");
        }

        settings.thinking.supported = true;
        let body = request_body(&settings, &request(vec![], vec![], false));
        assert_eq!(
            body["reasoning"],
            json!({"effort": "high", "summary": "auto"})
        );
        settings.thinking.requested = Some(false);
        let body = request_body(&settings, &request(vec![], vec![], false));
        assert_eq!(body["reasoning"], json!({"effort": "high"}));

        // Not a reasoning model: no reasoning, no include.
        let mut plain = HttpSettings::new("gpt-4o", "http://x/v1", None);
        plain.temperature = Some(0.2);
        let body = request_body(&plain, &request(vec![], vec![], false));
        assert_eq!(body["temperature"], json!(0.2));
        assert!(body.get("include").is_none() && body.get("reasoning").is_none());
    }

    #[test]
    fn a_thinking_maps_reasoning_effort_is_spelled_the_responses_way() {
        let map = |v: Value| v.as_object().unwrap().clone();
        let mut settings = HttpSettings::new("gpt-5", "http://x/v1", None);
        settings.thinking.supported = true;
        settings.thinking.when_enabled =
            map(json!({"reasoning_effort": "high", "extra_body": {"verbosity": "low"}}));
        settings.extra_body = map(json!({"service_tier": "flex"}));
        let body = request_body(&settings, &request(vec![], vec![], false));
        assert_eq!(
            body["reasoning"],
            json!({"summary": "auto", "effort": "high"})
        );
        assert!(body.get("reasoning_effort").is_none());
        assert_eq!(body["verbosity"], json!("low"));
        assert_eq!(body["service_tier"], json!("flex"));
        // A `reasoning` object the user wrote wins over the translated effort.
        settings.extra_body = map(json!({"reasoning": {"effort": "low"}}));
        let body = request_body(&settings, &request(vec![], vec![], false));
        assert_eq!(body["reasoning"], json!({"effort": "low"}));
    }

    /// The body's keys in the order a JSON object built key by key had them: a model's key
    /// replaces a built one where it stands, a new one goes last.
    #[test]
    fn the_bytes_keep_the_key_order_of_the_merged_maps() {
        let mut settings = HttpSettings::new("gpt-4.1", "http://x/v1", None);
        settings.temperature = Some(0.2);
        settings.max_tokens = Some(9);
        settings.extra_body = json!({"service_tier": "flex", "temperature": 1, "store": true,
                                     "reasoning_effort": "low", "top_p": 0.5})
        .as_object()
        .unwrap()
        .clone();
        let req = request(vec![Message::User("hi".into())], vec![time_tool()], true);
        let bytes = String::from_utf8(request_bytes(&settings, &req)).unwrap();
        let sent: Value = serde_json::from_str(&bytes).unwrap();
        let keys: Vec<&str> = sent
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        // `reasoning_effort` left with a swap: the last key took its place.
        let expected = [
            "model",
            "instructions",
            "input",
            "tools",
            "tool_choice",
            "stream",
            "store",
            "max_output_tokens",
            "temperature",
            "service_tier",
            "top_p",
            "reasoning",
        ];
        assert_eq!(keys, expected);
        assert_eq!(
            (&sent["temperature"], &sent["store"]),
            (&json!(1), &json!(true))
        );
        assert_eq!(sent["reasoning"], json!({"effort": "low"}));
        assert_eq!(request_body(&settings, &req).to_string(), bytes);
    }

    #[cfg(feature = "output-schema")]
    #[test]
    fn an_output_schema_becomes_the_text_format() {
        use std::sync::Arc;
        let settings = HttpSettings::new("gpt-4.1", "http://x/v1", None);
        let closed = json!({"type": "object", "properties": {"ok": {"type": "boolean"}},
                            "required": ["ok"], "additionalProperties": false});
        let open = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
        for (schema, strict) in [(closed, true), (open, false)] {
            let mut req = request(vec![Message::User("hi".into())], vec![], false);
            req.output_schema = Some(Arc::new(
                OutputSchema::new("verdict", schema.clone()).unwrap(),
            ));
            assert_eq!(
                request_body(&settings, &req)["text"],
                json!({"format": {"type": "json_schema", "name": "verdict",
                                  "schema": schema, "strict": strict}})
            );
        }
    }
}
