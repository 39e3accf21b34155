//! The JSON body of a `streamGenerateContent` request.

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::schema;
use super::PART_BLOCK;
use crate::image::{Format, Image};
use crate::{ChatRequest, HttpSettings, Message, ToolCall, ToolSpec};

/// The body of a `streamGenerateContent` request: what deerflow writes, typed, with the
/// keys of the model's `extra_body` and thinking map that are no Gemini config in `extra`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Body<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<SystemInstruction<'a>>,
    contents: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<[Declarations; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<Value>,
    /// After the built keys, as a JSON object's later keys.
    #[serde(flatten)]
    extra: Map<String, Value>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    generation_config: Map<String, Value>,
}

#[derive(Serialize)]
struct SystemInstruction<'a> {
    parts: [TextPart<'a>; 1],
}

#[derive(Serialize)]
struct TextPart<'a> {
    text: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Declarations {
    function_declarations: Vec<Value>,
}

/// The JSON body of a `streamGenerateContent` request (as a `Value`, for tests).
pub fn request_body(settings: &HttpSettings, req: &ChatRequest) -> Value {
    serde_json::to_value(body(settings, req)).unwrap_or(Value::Null)
}

/// The request body's bytes.
pub fn request_bytes(settings: &HttpSettings, req: &ChatRequest) -> Vec<u8> {
    // Cannot fail: string keys only, and serde_json writes non-finite floats as null.
    serde_json::to_vec(&body(settings, req)).unwrap_or_default()
}

pub fn body<'a>(settings: &HttpSettings, req: &'a ChatRequest) -> Body<'a> {
    let system_instruction = (!req.system.is_empty()).then(|| SystemInstruction {
        parts: [TextPart { text: &req.system }],
    });
    let tools = (!req.tools.is_empty()).then(|| {
        [Declarations {
            function_declarations: req.tools.iter().map(wire_tool).collect(),
        }]
    });
    let tool_config = (!req.tools.is_empty() && req.tool_choice_none)
        .then(|| json!({"functionCallingConfig": {"mode": "NONE"}}));
    let mut generation = Map::new();
    if let Some(max) = settings.max_tokens {
        generation.insert("maxOutputTokens".into(), json!(max));
    }
    if let Some(t) = settings.temperature {
        generation.insert("temperature".into(), json!(t));
    }
    if let Some(schema) = &req.output_schema {
        if native_schema(&settings.model, req) {
            generation.insert("responseMimeType".into(), json!("application/json"));
            generation.insert("responseJsonSchema".into(), schema.schema().clone());
        }
    }
    let mut thinking = Map::new();
    if settings.thinking.is_on() {
        // Without it the API thinks but returns no thought summaries to show.
        thinking.insert("includeThoughts".into(), json!(true));
    }
    if let Some(effort) = &settings.reasoning_effort {
        thinking.insert("thinkingLevel".into(), json!(effort));
    }
    let mut body = Body {
        system_instruction,
        contents: wire_contents(&req.messages),
        tools,
        tool_config,
        extra: Map::new(),
        generation_config: Map::new(),
    };
    merge_user_maps(settings, &mut body, &mut generation, &mut thinking);
    if !thinking.is_empty() {
        generation.insert("thinkingConfig".into(), Value::Object(thinking));
    }
    if !generation.is_empty() {
        match body.extra.get_mut("generationConfig") {
            // A user's `generationConfig` that is no map is replaced where it stands.
            Some(given) => *given = Value::Object(generation),
            None => body.generation_config = generation,
        }
    }
    body
}

impl Body<'_> {
    /// A body key from the model's maps: it replaces the built one, or goes last.
    fn insert(&mut self, key: String, value: Value) {
        match key.as_str() {
            "toolConfig" if self.tool_config.is_some() => self.tool_config = Some(value),
            _ => {
                self.extra.insert(key, value);
            }
        }
    }
}

/// The model's `extra_body` and active thinking map (contract §10), read the way
/// LangChain's `ChatGoogleGenerativeAI` reads its arguments: `thinking_budget`,
/// `include_thoughts` and `thinking_level` go to `generationConfig.thinkingConfig`, and so
/// does DeerFlow's generic `thinking: {type, budget_tokens}`; a `generationConfig` or
/// `thinkingConfig` map is merged key by key into the one deerflow builds; any other key is
/// a body key.
fn merge_user_maps(
    settings: &HttpSettings,
    body: &mut Body<'_>,
    generation: &mut Map<String, Value>,
    thinking: &mut Map<String, Value>,
) {
    let mut user = Map::new();
    settings.merge_extra_body(&mut user);
    for (key, value) in user {
        match (key.as_str(), value) {
            ("thinking_budget", v) => {
                thinking.insert("thinkingBudget".into(), v);
            }
            ("include_thoughts", v) => {
                thinking.insert("includeThoughts".into(), v);
            }
            ("thinking_level", v) => {
                thinking.insert("thinkingLevel".into(), v);
            }
            ("thinking", Value::Object(generic)) => generic_thinking(&generic, thinking),
            ("thinkingConfig" | "thinking_config", Value::Object(map)) => thinking.extend(map),
            ("generationConfig" | "generation_config", Value::Object(map)) => {
                for (k, v) in map {
                    match (k.as_str(), v) {
                        ("thinkingConfig", Value::Object(t)) => thinking.extend(t),
                        (_, v) => {
                            generation.insert(k, v);
                        }
                    }
                }
            }
            (_, v) => {
                body.insert(key, v);
            }
        }
    }
}

/// `thinking: {type: enabled, budget_tokens: N}` (Anthropic's spelling, which DeerFlow's
/// examples use for every provider) as Gemini's thinking config.
fn generic_thinking(generic: &Map<String, Value>, thinking: &mut Map<String, Value>) {
    match generic.get("type").and_then(Value::as_str) {
        Some("enabled") => {
            thinking.insert("includeThoughts".into(), json!(true));
            if let Some(budget) = generic.get("budget_tokens").filter(|b| b.is_number()) {
                thinking.insert("thinkingBudget".into(), budget.clone());
            }
        }
        Some("disabled") => {
            thinking.remove("includeThoughts");
            thinking.insert("thinkingBudget".into(), json!(0));
        }
        _ => {}
    }
}

/// Whether the answer's schema can be sent as `responseJsonSchema`: Gemini 2.x refuses a
/// JSON response type beside function declarations (HTTP 400); Gemini 3 takes both. The
/// schema is in the system prompt and checked locally either way.
fn native_schema(model: &str, req: &ChatRequest) -> bool {
    if req.tools.is_empty() {
        return true;
    }
    let id = model.rsplit('/').next().unwrap_or_default();
    let major: String = id
        .strip_prefix("gemini-")
        .unwrap_or_default()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    major.parse::<u32>().is_ok_and(|m| m >= 3)
}

fn wire_tool(tool: &ToolSpec) -> Value {
    let mut declaration = json!({"name": tool.name, "description": tool.description});
    if let Some(parameters) = schema::parameters(&tool.parameters) {
        declaration["parameters"] = parameters;
    }
    declaration
}

/// One `contents` entry being built: its parts, each function response with the place of
/// its call in the model turn before it.
struct Turn {
    role: &'static str,
    parts: Vec<(Option<usize>, Value)>,
}

/// The transcript as Gemini's turns: `user` and `model`, with function responses as
/// `user` parts. Consecutive messages of one role become one turn, so the responses to a
/// turn's calls travel together, in the order of the calls (Gemini matches them by
/// position and name: 2.x calls carry no id).
fn wire_contents(messages: &[Message]) -> Vec<Value> {
    let mut turns: Vec<Turn> = Vec::with_capacity(messages.len());
    let mut calls: &[ToolCall] = &[];
    for message in messages {
        match message {
            Message::User(text) => {
                if !text.is_empty() {
                    push(&mut turns, "user", None, json!({"text": text}));
                }
            }
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                calls = tool_calls;
                for part in model_parts(text.as_deref(), tool_calls, &reasoning.blocks) {
                    push(&mut turns, "model", None, part);
                }
            }
            Message::Tool {
                call_id,
                name,
                content,
            } => {
                let found = calls.iter().position(|c| c.id == *call_id);
                let call = found.map(|i| &calls[i]);
                let mut response = Map::new();
                if let Some(id) = call.and_then(provider_id) {
                    response.insert("id".into(), id.clone());
                }
                response.insert(
                    "name".into(),
                    json!(call.map_or(name.as_str(), |c| c.name.as_str())),
                );
                response.insert("response".into(), json!({"result": content}));
                let part = json!({"functionResponse": response});
                push(&mut turns, "user", Some(found.unwrap_or(usize::MAX)), part);
            }
            Message::Images { images, .. } => {
                for image in images {
                    push(&mut turns, "user", None, inline_data(image));
                }
            }
        }
    }
    turns
        .into_iter()
        .map(|t| {
            let parts: Vec<Value> = t.parts.into_iter().map(|(_, p)| p).collect();
            json!({"role": t.role, "parts": parts})
        })
        .collect()
}

/// The formats Gemini takes (of those deerflow reads): a GIF goes as a PNG.
const GEMINI_FORMATS: &[Format] = &[Format::Png, Format::Jpeg, Format::Webp];

/// An image as an `inline_data` part.
fn inline_data(image: &Image) -> Value {
    let image = image.in_formats(GEMINI_FORMATS);
    json!({"inline_data": {"mime_type": image.mime(), "data": image.base64()}})
}

/// Adds a part to the last turn when it has `role`, else starts a turn. A function
/// response goes before the responses to later calls already there.
fn push(turns: &mut Vec<Turn>, role: &'static str, order: Option<usize>, part: Value) {
    if turns.last().is_none_or(|t| t.role != role) {
        turns.push(Turn {
            role,
            parts: Vec::new(),
        });
    }
    let Some(turn) = turns.last_mut() else { return };
    let at = order.and_then(|pos| {
        turn.parts
            .iter()
            .position(|(o, _)| o.is_some_and(|other| other > pos))
    });
    match at {
        Some(i) => turn.parts.insert(i, (order, part)),
        None => turn.parts.push((order, part)),
    }
}

/// The id the API gave a call (Gemini 3), which its response must carry.
fn provider_id(call: &ToolCall) -> Option<&Value> {
    call.extra.get("functionCall")?.get("id")
}

/// A model turn's parts: the parts the API sent, in their order, when the response had
/// any beyond plain text (thought signatures must go back on the part they came on);
/// else the text and the calls.
fn model_parts(text: Option<&str>, calls: &[ToolCall], blocks: &[Value]) -> Vec<Value> {
    let kept: Vec<(&Value, usize)> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some(PART_BLOCK))
        .filter_map(|b| {
            let after = b.get("after_calls").and_then(Value::as_u64).unwrap_or(0);
            Some((b.get("part")?, usize::try_from(after).unwrap_or(usize::MAX)))
        })
        .collect();
    let is_thought = |p: &Value| p.get("thought") == Some(&Value::Bool(true));
    let kept_text: String = kept
        .iter()
        .filter(|(p, _)| !is_thought(p))
        .filter_map(|(p, _)| p.get("text").and_then(Value::as_str))
        .collect();
    let text = text.unwrap_or_default();
    let mut parts = Vec::with_capacity(kept.len() + calls.len() + 1);
    // The kept parts hold the text as the API sent it, unless the message's text is not
    // theirs any more (then only their thoughts go back, beside the message's text).
    if !kept.is_empty() && kept_text.trim() == text.trim() {
        for (i, call) in calls.iter().enumerate() {
            parts.extend(
                kept.iter()
                    .filter(|(_, a)| *a == i)
                    .map(|(p, _)| (*p).clone()),
            );
            parts.push(call_part(call));
        }
        parts.extend(
            kept.iter()
                .filter(|(_, a)| *a >= calls.len())
                .map(|(p, _)| (*p).clone()),
        );
        return parts;
    }
    parts.extend(
        kept.iter()
            .filter(|(p, _)| is_thought(p))
            .map(|(p, _)| (*p).clone()),
    );
    if !text.is_empty() {
        parts.push(json!({"text": text}));
    }
    parts.extend(calls.iter().map(call_part));
    parts
}

/// A call as the model made it: the fields its part and its `functionCall` had beyond
/// name and args go back unchanged. Arguments that were no JSON object go back as `{}`
/// (the API takes only an object).
fn call_part(call: &ToolCall) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), json!(call.name));
    function.insert("args".into(), call.arguments.to_value());
    if let Some(Value::Object(own)) = call.extra.get("functionCall") {
        for (k, v) in own {
            function.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    let mut part = Map::new();
    part.insert("functionCall".into(), Value::Object(function));
    for (k, v) in &call.extra {
        if k != "functionCall" {
            part.insert(k.clone(), v.clone());
        }
    }
    Value::Object(part)
}
