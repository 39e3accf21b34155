//! The JSON body of a streamed chat completion request.
//!
//! The body is written straight from the agent's history and tool specs: the top-level
//! settings are a small map (so `extra_body` can add or replace any key, in place), while the
//! messages and tools, most of every request, are serialized borrowed. Building them as a
//! `Value` tree first cost hundreds of allocations per call (issue 13).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{json, Map, Value};

use crate::output_schema::OutputSchema;
use crate::{ChatRequest, HttpSettings, Lineage, Message, ToolCall, ToolSpec};

/// A request body ready to serialize: its top-level fields in order, the messages and
/// tools borrowed from the request until they are written.
pub struct Body<'a> {
    req: &'a ChatRequest,
    fields: Vec<(String, Field)>,
}

/// One top-level field's value.
#[derive(Debug)]
enum Field {
    Json(Value),
    /// The request's `messages` array, written from its history.
    Messages,
    /// The request's `tools` array, written from its tool specs.
    Tools,
}

/// The JSON body of a streamed chat completion request (as a `Value`, for tests and callers
/// that edit it; [`body`] serializes without building it).
pub fn request_body(settings: &HttpSettings, req: &ChatRequest) -> Value {
    serde_json::to_value(body(settings, req)).unwrap_or(Value::Null)
}

/// The request body's bytes: what serializing [`body`] gives, with the parts that are the
/// same on every call (the settings, the `tools` array) taken from `cache` once it has them.
/// A cache serves one model's settings.
pub fn request_bytes(settings: &HttpSettings, req: &ChatRequest, cache: &WireCache) -> Vec<u8> {
    let fresh;
    let parts = if req.output_schema.is_none() {
        cache.parts(settings, req)
    } else {
        fresh = parts(&body(settings, req));
        &fresh
    };
    let tools_json = (!req.tools.is_empty()).then(|| cache.tools_json(&req.tools));
    let mut out = Vec::with_capacity(size_hint(req, tools_json.as_deref().map_or(0, <[u8]>::len)));
    for part in parts {
        match (part, &tools_json) {
            (Part::Json(json), _) => out.extend_from_slice(json),
            (Part::Messages, _) => write_messages(&mut out, req, cache),
            (Part::Tools, Some(json)) => out.extend_from_slice(json),
            (Part::Tools, None) => write_json(&mut out, &Tools(&req.tools)),
        }
    }
    out
}

/// The `messages` array, as serializing [`Messages`] writes it.
fn write_messages(out: &mut Vec<u8>, req: &ChatRequest, cache: &WireCache) {
    out.push(b'[');
    if !req.system.is_empty() {
        out.extend_from_slice(&cache.system_json(&req.system));
        if !req.messages.is_empty() {
            out.push(b',');
        }
    }
    match req.lineage {
        Some(lineage) => {
            let mut sent = cache.histories.take(lineage, req.messages.len());
            let separate = !sent.json.is_empty();
            append_messages(&mut sent.json, &req.messages[sent.messages..], separate);
            sent.messages = req.messages.len();
            out.extend_from_slice(&sent.json);
            cache.histories.keep(sent);
        }
        None => append_messages(out, &req.messages, false),
    }
    out.push(b']');
}

/// Writes `messages` comma-separated, after a comma if `separate`.
fn append_messages(out: &mut Vec<u8>, messages: &[Message], mut separate: bool) {
    for m in messages {
        if std::mem::replace(&mut separate, true) {
            out.push(b',');
        }
        write_json(out, &WireMessage(m));
    }
}

/// The body's JSON cut where the borrowed parts go.
#[derive(Debug)]
enum Part {
    Json(Vec<u8>),
    Messages,
    Tools,
}

fn parts(body: &Body<'_>) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut json = vec![b'{'];
    for (i, (key, value)) in body.fields.iter().enumerate() {
        if i > 0 {
            json.push(b',');
        }
        write_json(&mut json, key);
        json.push(b':');
        let borrowed = match value {
            Field::Messages => Part::Messages,
            Field::Tools => Part::Tools,
            Field::Json(value) => {
                write_json(&mut json, value);
                continue;
            }
        };
        parts.push(Part::Json(std::mem::take(&mut json)));
        parts.push(borrowed);
    }
    json.push(b'}');
    parts.push(Part::Json(json));
    parts
}

fn write_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Cannot fail: string keys only, serde_json writes non-finite floats as null, and
    // writing to a Vec does not fail.
    let _ = serde_json::to_writer(out, value);
}

/// Roughly the body's length, so it is written into one allocation rather than grown by
/// doubling: the tools' JSON, the texts, and some room for each message's keys.
fn size_hint(req: &ChatRequest, tools_json: usize) -> usize {
    let texts: usize = req
        .messages
        .iter()
        .map(|m| match m {
            Message::User(text) => text.len(),
            Message::Assistant {
                text, tool_calls, ..
            } => text.as_ref().map_or(0, String::len) + 128 * tool_calls.len(),
            Message::Tool { content, .. } => content.len(),
            Message::Images { images, .. } => images.iter().map(|i| i.base64().len() + 64).sum(),
        } + 64)
        .sum();
    512 + tools_json + req.system.len() + texts + texts / 8
}

/// What one model's request bodies have in common, serialized once (issue 13: writing
/// them out on every call was most of each body's cost).
#[derive(Debug, Default)]
pub struct WireCache {
    /// The `tools` array of each tool list the model was recently called with: an agent
    /// offers one `Arc` of tool specs for its whole run (`tools::Toolset`, shared by every
    /// sub-agent of a type).
    tools: ByIdentity<[ToolSpec]>,
    /// The system message of each recent system prompt, one `Arc` per agent type too.
    system: ByIdentity<str>,
    /// The body's settings around the messages and tools, by request shape (tools or
    /// none, `tool_choice: none` or not); a request with an output schema builds its own.
    shapes: [OnceLock<Vec<Part>>; 4],
    /// The messages recent requests sent, by their history's lineage: the next request of
    /// that history writes only its new messages.
    histories: SentHistories,
}

impl WireCache {
    fn parts(&self, settings: &HttpSettings, req: &ChatRequest) -> &[Part] {
        let shape = 2 * usize::from(req.tools.is_empty()) + usize::from(req.tool_choice_none);
        self.shapes[shape].get_or_init(|| parts(&body(settings, req)))
    }

    /// The JSON of `tools` as the request's `tools` array.
    fn tools_json(&self, tools: &Arc<[ToolSpec]>) -> Arc<[u8]> {
        self.tools.json(tools, |t, out| write_json(out, &Tools(t)))
    }

    /// The JSON of the system message with `system` as its content.
    fn system_json(&self, system: &Arc<str>) -> Arc<[u8]> {
        self.system
            .json(system, |text, out| write_json(out, &SystemMessage(text)))
    }
}

/// The JSON of the messages requests sent, by lineage ([`ChatRequest::lineage`]: within
/// one, sent messages never change, so their JSON stays right for every later request).
/// Most recently used last; kept to a count and a size, enough for one entry per agent of a
/// wide fan-out.
#[derive(Debug, Default)]
struct SentHistories {
    entries: Mutex<VecDeque<Sent>>,
}

/// The first `messages` messages of a lineage, comma-separated as in the `messages` array.
#[derive(Debug)]
struct Sent {
    lineage: Lineage,
    messages: usize,
    json: Vec<u8>,
}

/// Histories kept, and their bytes (a little more than the largest entry may be kept).
const HISTORIES: usize = 256;
const HISTORY_BYTES: usize = 64 << 20;

impl SentHistories {
    /// The lineage's entry, taken out while its request is written (empty if there is none,
    /// or if it covers more messages than `messages`, which a lineage never loses).
    fn take(&self, lineage: Lineage, messages: usize) -> Sent {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let found = entries.iter().position(|e| e.lineage == lineage);
        match found.and_then(|i| entries.remove(i)) {
            Some(sent) if sent.messages <= messages => sent,
            _ => Sent {
                lineage,
                messages: 0,
                json: Vec::new(),
            },
        }
    }

    fn keep(&self, sent: Sent) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.push_back(sent);
        let mut bytes: usize = entries.iter().map(|e| e.json.len()).sum();
        while entries.len() > HISTORIES || (bytes > HISTORY_BYTES && entries.len() > 1) {
            if let Some(old) = entries.pop_front() {
                bytes -= old.json.len();
            }
        }
    }
}

/// JSON written from shared values, by the identity of their `Arc`. Oldest first. Holding
/// the `Arc` keeps its address from being reused by another value (and the value from
/// being changed through `Arc::get_mut`) while it is here.
#[derive(Debug)]
struct ByIdentity<T: ?Sized> {
    entries: Mutex<VecDeque<Cached<T>>>,
}

/// A value and its JSON.
type Cached<T> = (Arc<T>, Arc<[u8]>);

impl<T: ?Sized> Default for ByIdentity<T> {
    fn default() -> Self {
        Self {
            entries: Mutex::default(),
        }
    }
}

/// Values kept: one per agent type of a run is the usual need.
const CACHED: usize = 8;

impl<T: ?Sized> ByIdentity<T> {
    fn json(&self, value: &Arc<T>, write: impl FnOnce(&T, &mut Vec<u8>)) -> Arc<[u8]> {
        if let Some(json) = self.find(value) {
            return json;
        }
        // Written outside the lock: two callers racing both write it, one is kept.
        let mut out = Vec::new();
        write(value, &mut out);
        let json: Arc<[u8]> = out.into();
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if !entries.iter().any(|(v, _)| Arc::ptr_eq(v, value)) {
            if entries.len() >= CACHED {
                entries.pop_front();
            }
            entries.push_back((value.clone(), json.clone()));
        }
        json
    }

    fn find(&self, value: &Arc<T>) -> Option<Arc<[u8]>> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .iter()
            .find(|(v, _)| Arc::ptr_eq(v, value))
            .map(|(_, json)| json.clone())
    }
}

pub fn body<'a>(settings: &HttpSettings, req: &'a ChatRequest) -> Body<'a> {
    let mut body = Fields::default();
    body.insert("model".into(), json!(settings.model));
    body.push("messages", Field::Messages);
    if !req.tools.is_empty() {
        body.push("tools", Field::Tools);
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
    let mut extra = Map::new();
    settings.merge_extra_body(&mut extra);
    for (key, value) in extra {
        body.insert(key, value);
    }
    Body {
        req,
        fields: body.0,
    }
}

/// The body's fields as a JSON object's: a key set again keeps its place and takes the
/// new value, a new key goes last (how `extra_body` adds or replaces keys).
#[derive(Default)]
struct Fields(Vec<(String, Field)>);

impl Fields {
    fn insert(&mut self, key: String, value: Value) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, field)) => *field = Field::Json(value),
            None => self.0.push((key, Field::Json(value))),
        }
    }

    /// A key the body writes first (no two are the same).
    fn push(&mut self, key: &str, field: Field) {
        self.0.push((key.to_string(), field));
    }
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.fields.len()))?;
        for (key, value) in &self.fields {
            match value {
                Field::Messages => map.serialize_entry(key, &Messages(self.req))?,
                Field::Tools => map.serialize_entry(key, &Tools(&self.req.tools))?,
                Field::Json(value) => map.serialize_entry(key, value)?,
            }
        }
        map.end()
    }
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

struct Messages<'a>(&'a ChatRequest);

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let req = self.0;
        let system = !req.system.is_empty();
        let mut seq = s.serialize_seq(Some(req.messages.len() + usize::from(system)))?;
        if system {
            seq.serialize_element(&SystemMessage(&req.system))?;
        }
        for m in req.messages.iter() {
            seq.serialize_element(&WireMessage(m))?;
        }
        seq.end()
    }
}

struct SystemMessage<'a>(&'a str);

impl Serialize for SystemMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("role", "system")?;
        m.serialize_entry("content", self.0)?;
        m.end()
    }
}

struct WireMessage<'a>(&'a Message);

impl Serialize for WireMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Message::User(text) => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("role", "user")?;
                m.serialize_entry("content", text)?;
                m.end()
            }
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                let text = text.as_deref().filter(|t| !t.is_empty());
                let mut m = s.serialize_map(None)?;
                m.serialize_entry("role", "assistant")?;
                if tool_calls.is_empty() {
                    // An assistant message needs content or tool calls: keep it valid even
                    // when empty.
                    m.serialize_entry("content", text.unwrap_or(""))?;
                } else {
                    m.serialize_entry("content", &text)?;
                    let calls: Vec<WireCall<'_>> = tool_calls.iter().map(WireCall).collect();
                    m.serialize_entry("tool_calls", &calls)?;
                }
                // The servers that stream `reasoning_content` want it back on the message.
                if let Some(r) = &reasoning.text {
                    m.serialize_entry("reasoning_content", r)?;
                }
                m.end()
            }
            Message::Tool {
                call_id, content, ..
            } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("role", "tool")?;
                m.serialize_entry("tool_call_id", call_id)?;
                m.serialize_entry("content", content)?;
                m.end()
            }
            // Tool messages cannot carry images: a user message of them follows the results.
            Message::Images { images, .. } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("role", "user")?;
                let parts: Vec<Value> = images
                    .iter()
                    .map(|i| json!({"type": "image_url", "image_url": {"url": i.data_url()}}))
                    .collect();
                m.serialize_entry("content", &parts)?;
                m.end()
            }
        }
    }
}

/// A call as the model made it, with the fields the server added to it.
struct WireCall<'a>(&'a ToolCall);

impl Serialize for WireCall<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let call = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("id", &call.id)?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry(
            "function",
            &WireFunction {
                name: &call.name,
                arguments: call.arguments_text(),
            },
        )?;
        for (key, value) in &call.extra {
            if !matches!(key.as_str(), "id" | "type" | "function") {
                m.serialize_entry(key, value)?;
            }
        }
        m.end()
    }
}

struct WireFunction<'a, A> {
    name: &'a str,
    arguments: A,
}

impl<A: Serialize> Serialize for WireFunction<'_, A> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("name", self.name)?;
        m.serialize_entry("arguments", &self.arguments)?;
        m.end()
    }
}

struct Tools<'a>(&'a [ToolSpec]);

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for tool in self.0 {
            seq.serialize_element(&WireTool(tool))?;
        }
        seq.end()
    }
}

struct WireTool<'a>(&'a ToolSpec);

impl Serialize for WireTool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Function<'a>(&'a ToolSpec);
        impl Serialize for Function<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("name", &self.0.name)?;
                m.serialize_entry("description", &self.0.description)?;
                m.serialize_entry("parameters", &self.0.parameters)?;
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry("function", &Function(self.0))?;
        m.end()
    }
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

    #[cfg(feature = "output-schema")]
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

    fn tool(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: format!("the \"{name}\" tool"),
            parameters: json!({"type": "object", "properties": {"p": {"type": "string"}}}),
        }
    }

    /// The sent messages are kept for a bounded number of histories, the most recent ones;
    /// an entry covering more messages than a request carries is not used.
    #[test]
    fn sent_histories_are_bounded_and_never_longer_than_the_request() {
        let settings = HttpSettings::new("m", "http://x/v1", None);
        let cache = WireCache::default();
        let lineages: Vec<Lineage> = (0..HISTORIES + 10).map(|_| Lineage::fresh()).collect();
        let mut req = request(
            vec![Message::User("a".into()), Message::User("b".into())],
            vec![],
            false,
        );
        for l in &lineages {
            req.lineage = Some(*l);
            request_bytes(&settings, &req, &cache);
        }
        let kept: Vec<Lineage> = cache
            .histories
            .entries
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.lineage)
            .collect();
        assert_eq!(kept, lineages[10..], "the oldest went first");
        // Not a history's own doing, but never trusted: fewer messages under a kept lineage.
        req.messages = Arc::new(vec![Message::User("c".into())]);
        assert_bytes_of_body(&settings, &req, &cache, "fewer messages");
    }

    /// What `request_bytes` writes from `cache` is what serializing the body writes.
    fn assert_bytes_of_body(
        settings: &HttpSettings,
        req: &ChatRequest,
        cache: &WireCache,
        case: &str,
    ) {
        let bytes = request_bytes(settings, req, cache);
        let expected = serde_json::to_vec(&body(settings, req)).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            String::from_utf8(expected).unwrap(),
            "{case}"
        );
    }

    #[test]
    fn cached_tools_give_the_same_bytes_as_serializing_the_body() {
        let settings = HttpSettings::new("m", "http://x/v1", None);
        let cache = WireCache::default();
        let mut req = request(vec![Message::User("hi".into())], vec![], false);
        let lists: Vec<Arc<[ToolSpec]>> = vec![
            Arc::from([tool("a"), tool("b")]),
            Arc::from([tool("c")]),
            // The same specs in another list: kept apart, as they are told apart by identity.
            Arc::from([tool("a"), tool("b")]),
        ];
        for round in 0..2 {
            for tools in &lists {
                req.tools = tools.clone();
                assert_bytes_of_body(&settings, &req, &cache, &format!("round {round}"));
            }
        }
        assert_eq!(cache.tools.entries.lock().unwrap().len(), 3);
    }

    /// An output schema, in a build that can make one.
    fn a_schema() -> Option<Arc<OutputSchema>> {
        #[cfg(feature = "output-schema")]
        return Some(Arc::new(
            OutputSchema::new("s", json!({"type": "object"})).unwrap(),
        ));
        #[cfg(not(feature = "output-schema"))]
        None
    }

    #[test]
    fn every_request_shape_gives_the_bytes_of_its_body_from_one_cache() {
        let replacing = json!({"tools": [], "messages": "m", "temperature": 1, "x": [1]});
        for extra in [json!({}), replacing] {
            let mut settings = HttpSettings::new("m", "http://x/v1", None);
            settings.max_tokens = Some(9);
            settings.extra_body = extra.as_object().unwrap().clone();
            let cache = WireCache::default();
            let specs: Arc<[ToolSpec]> = Arc::from([tool("a")]);
            for round in 0..2 {
                for tools in [Arc::from([]), specs.clone()] {
                    for (none, schema) in [(false, None), (true, None), (false, a_schema())] {
                        let mut req = request(vec![Message::User("hi".into())], vec![], none);
                        req.tools = tools.clone();
                        let case = format!(
                            "round {round}, extra {extra}, tools {}, none {none}, schema {}",
                            tools.len(),
                            schema.is_some()
                        );
                        req.output_schema = schema;
                        assert_bytes_of_body(&settings, &req, &cache, &case);
                    }
                }
            }
        }
    }

    #[test]
    fn system_messages_are_cached_by_prompt_and_give_the_same_bytes() {
        let settings = HttpSettings::new("m", "http://x/v1", None);
        let cache = WireCache::default();
        let mut req = request(vec![Message::User("hi".into())], vec![], false);
        let prompts: [Arc<str>; 4] = [
            Arc::from("be brief"),
            Arc::from(""),
            Arc::from("say \"why\"\n\tin one line"),
            Arc::from("be brief"),
        ];
        for round in 0..2 {
            for system in &prompts {
                req.system = system.clone();
                for history in [vec![], vec![Message::User("hi".into())]] {
                    req.messages = Arc::new(history);
                    let case = format!("round {round}, {system:?}");
                    assert_bytes_of_body(&settings, &req, &cache, &case);
                }
            }
        }
        // The empty prompt sends no system message, so it is not kept.
        assert_eq!(cache.system.entries.lock().unwrap().len(), 3);
    }

    #[test]
    fn the_tools_cache_keeps_the_latest_lists() {
        let cache = WireCache::default();
        let lists: Vec<Arc<[ToolSpec]>> = (0..CACHED + 2)
            .map(|i| Arc::from([tool(&format!("t{i}"))]))
            .collect();
        for tools in &lists {
            let json = cache.tools_json(tools);
            assert_eq!(
                &*json,
                serde_json::to_vec(&Tools(tools)).unwrap().as_slice()
            );
            // A second call is the cached copy itself.
            assert!(Arc::ptr_eq(&json, &cache.tools_json(tools)));
        }
        let entries = cache.tools.entries.lock().unwrap();
        assert_eq!(entries.len(), CACHED);
        assert!(Arc::ptr_eq(&entries[0].0, &lists[2]));
        drop(entries);
        // An evicted list is written again, not lost.
        let json = cache.tools_json(&lists[0]);
        assert_eq!(
            &*json,
            serde_json::to_vec(&Tools(&lists[0])).unwrap().as_slice()
        );
    }

    #[test]
    fn a_request_without_tools_leaves_the_cache_alone() {
        let settings = HttpSettings::new("m", "http://x/v1", None);
        let cache = WireCache::default();
        let req = request(vec![Message::User("hi".into())], vec![], false);
        let bytes = request_bytes(&settings, &req, &cache);
        assert_eq!(bytes, serde_json::to_vec(&body(&settings, &req)).unwrap());
        assert!(cache.tools.entries.lock().unwrap().is_empty());
    }

    /// The messages and tools are typed fields of the body, not strings standing for them:
    /// no `extra_body` value can be taken for one.
    #[test]
    fn an_extra_body_string_is_sent_as_given_whatever_it_says() {
        let mut settings = HttpSettings::new("m", "http://x/v1", None);
        let markers = json!({"note": "\u{0}deerflow:messages", "tag": "\u{0}deerflow:tools"});
        settings.extra_body = markers.as_object().unwrap().clone();
        let req = request(vec![Message::User("hi".into())], vec![time_tool()], false);
        let bytes = request_bytes(&settings, &req, &WireCache::default());
        let sent: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(sent["note"], markers["note"]);
        assert_eq!(sent["tag"], markers["tag"]);
        assert_eq!(sent["messages"][1]["content"], "hi");
        assert_eq!(sent["tools"][0]["function"]["name"], "get_time");
        assert_eq!(request_body(&settings, &req), sent);
    }

    #[test]
    fn the_bytes_are_the_body_in_order_and_extra_body_replaces_any_key_in_place() {
        let mut settings = HttpSettings::new("m", "http://x/v1", None);
        settings.temperature = Some(0.5);
        let calls = vec![ToolCall {
            id: "c1".into(),
            name: "time".into(),
            arguments: json!({"b": 1, "a": 2}).into(),
            invalid_arguments: None,
            extra: json!({"id": "not this", "extra_content": {"sig": "s"}})
                .as_object()
                .unwrap()
                .clone()
                .into(),
        }];
        let req = request(
            vec![
                Message::User("hi".into()),
                Message::Assistant {
                    text: None,
                    tool_calls: calls,
                    reasoning: Default::default(),
                },
                Message::Tool {
                    call_id: "c1".into(),
                    name: "time".into(),
                    content: "noon".into(),
                },
            ],
            vec![time_tool()],
            false,
        );
        let bytes =
            String::from_utf8(request_bytes(&settings, &req, &WireCache::default())).unwrap();
        assert_eq!(bytes, request_body(&settings, &req).to_string());
        let keys: Vec<String> = request_body(&settings, &req)
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(
            keys,
            [
                "model",
                "messages",
                "tools",
                "stream",
                "stream_options",
                "temperature"
            ]
        );
        assert!(bytes.contains(
            r#"{"id":"c1","type":"function","function":{"name":"time","arguments":"{\"b\":1,\"a\":2}"},"extra_content":{"sig":"s"}}"#
        ), "{bytes}");
        // A key of extra_body replaces the built one where it stands, even the borrowed parts.
        settings.extra_body = json!({"tools": [], "temperature": 1})
            .as_object()
            .unwrap()
            .clone();
        let body = request_body(&settings, &req);
        assert_eq!(body["tools"], json!([]));
        assert_eq!(body["temperature"], json!(1));
        assert_eq!(body["messages"][3]["content"], json!("noon"));
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(keys[2], "tools");
    }
}
