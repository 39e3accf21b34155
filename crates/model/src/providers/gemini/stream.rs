//! Assembling the chunks of `streamGenerateContent?alt=sse` into one response. Each `data:`
//! line is a whole `GenerateContentResponse` holding the next parts of the one candidate;
//! `usageMetadata` is cumulative; there is no end marker: the stream ends after the chunk
//! with the `finishReason`.

use eventsource_stream::Event;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{PART_BLOCK, PROVIDER};
use crate::count;
use crate::error_text::{clip, dropped, json_error_message, stream_error};
use crate::http::{self, json_bytes, Assembler, SLOT_BYTES};
use crate::sse::Flow;
use crate::{ModelError, ModelResponse, Reasoning, ToolArgs, ToolCall, Usage};

/// Finish reasons (and prompt block reasons) that mean the provider stopped for safety:
/// `content_filtered`, the response's calls are not run (contract §10).
pub const SAFETY_REASONS: &[&str] = &[
    "SAFETY",
    "RECITATION",
    "PROHIBITED_CONTENT",
    "BLOCKLIST",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
];

/// Finish reasons that leave no usable answer but may well not recur: the model wrote a
/// function call the API could not parse, or called one it was not offered. The shared
/// retry policy asks again.
const RETRY_REASONS: &[&str] = &["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"];

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    #[serde(default, deserialize_with = "count")]
    prompt_token_count: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    candidates_token_count: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    thoughts_token_count: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    tool_use_prompt_token_count: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    cached_content_token_count: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    total_token_count: Option<u64>,
}

impl WireUsage {
    /// A later chunk's numbers replace the earlier ones; absent ones are kept.
    fn update(&mut self, new: WireUsage) {
        let keep = |old: &mut Option<u64>, new: Option<u64>| {
            if new.is_some() {
                *old = new;
            }
        };
        keep(&mut self.prompt_token_count, new.prompt_token_count);
        keep(&mut self.candidates_token_count, new.candidates_token_count);
        keep(&mut self.thoughts_token_count, new.thoughts_token_count);
        keep(
            &mut self.tool_use_prompt_token_count,
            new.tool_use_prompt_token_count,
        );
        keep(
            &mut self.cached_content_token_count,
            new.cached_content_token_count,
        );
        keep(&mut self.total_token_count, new.total_token_count);
    }

    /// Thinking tokens are output (they are billed as output and count against
    /// `maxOutputTokens`); the cached part is inside `promptTokenCount` already.
    fn convert(&self) -> Option<Usage> {
        let input = self
            .prompt_token_count
            .map(|p| p.saturating_add(self.tool_use_prompt_token_count.unwrap_or(0)));
        let output = match (self.candidates_token_count, self.thoughts_token_count) {
            (None, None) => None,
            (c, t) => Some(c.unwrap_or(0).saturating_add(t.unwrap_or(0))),
        };
        Usage::from_counts(
            input,
            output,
            self.total_token_count,
            self.cached_content_token_count,
        )
    }
}

/// A non-call part of the response, in order.
#[derive(Debug)]
struct Kept {
    part: Map<String, Value>,
    /// How many function calls came before it.
    after_calls: usize,
    /// Plain text (no signature, nothing else): the next plain piece of the same kind is
    /// appended to it.
    plain: bool,
}

impl Kept {
    fn is_thought(&self) -> bool {
        self.part.get("thought") == Some(&Value::Bool(true))
    }

    fn text(&self) -> &str {
        self.part
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

/// Assembles the chunks of one streamed `generateContent`.
#[derive(Debug, Default)]
pub struct GeminiAssembler {
    parts: Vec<Kept>,
    calls: Vec<ToolCall>,
    /// A part carried more than plain text (a `thoughtSignature`, or content deerflow does
    /// not read): the parts go back whole with the message.
    special: bool,
    finish_reason: Option<String>,
    finish_message: Option<String>,
    /// `promptFeedback.blockReason`: the prompt was refused before any candidate.
    blocked: Option<String>,
    usage: Option<WireUsage>,
    kept: usize,
}

impl Assembler for GeminiAssembler {
    fn on_event(&mut self, event: &Event) -> Result<Flow, ModelError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        let value: Value = http::event_json(data, PROVIDER, "a stream chunk")?;
        self.take(&value)?;
        Ok(Flow::Continue)
    }

    fn finish(self, ended: Flow) -> Result<ModelResponse, ModelError> {
        if ended == Flow::Continue && self.finish_reason.is_none() && self.blocked.is_none() {
            return Err(dropped(
                PROVIDER,
                "stream ended before the response was complete",
            ));
        }
        if let Some(reason) = self
            .finish_reason
            .as_deref()
            .filter(|r| RETRY_REASONS.contains(r))
        {
            let said = self
                .finish_message
                .as_deref()
                .map(|m| format!(": {}", clip(m, 300)))
                .unwrap_or_default();
            return Err(dropped(
                PROVIDER,
                format!("the model's function call was not usable (finishReason {reason}){said}"),
            ));
        }
        let finish_reason = match &self.blocked {
            Some(reason) if SAFETY_REASONS.contains(&reason.as_str()) => Some(reason.clone()),
            // BLOCK_REASON_UNSPECIFIED, OTHER, …: still a refusal of the prompt.
            Some(_) => Some("content_filter".to_string()),
            None => self.finish_reason,
        };
        let mut text = String::new();
        let mut thought = String::new();
        for kept in &self.parts {
            if kept.is_thought() {
                thought.push_str(kept.text());
            } else {
                text.push_str(kept.text());
            }
        }
        let blocks = if self.special {
            self.parts.into_iter().map(block_of).collect()
        } else {
            Vec::new()
        };
        Ok(ModelResponse {
            text: (!text.is_empty()).then_some(text),
            tool_calls: self.calls,
            usage: self.usage.as_ref().and_then(WireUsage::convert),
            finish_reason,
            reasoning: Reasoning {
                text: (!thought.is_empty()).then_some(thought),
                blocks,
            },
        })
    }

    fn from_json(value: &Value) -> Result<ModelResponse, ModelError> {
        // `generateContent` answers one object; `streamGenerateContent` without `alt=sse`
        // a JSON array of the chunks.
        let mut assembler = Self::default();
        match value {
            Value::Array(chunks) => {
                for chunk in chunks {
                    assembler.take(chunk)?;
                }
            }
            Value::Object(_) => assembler.take(value)?,
            _ => {
                return Err(stream_error(
                    PROVIDER,
                    format!("unexpected JSON answer: {}", clip(&value.to_string(), 200)),
                ))
            }
        }
        assembler.finish(Flow::Done)
    }

    fn kept_bytes(&self) -> usize {
        self.kept
    }
}

/// The reasoning block a kept part travels in (see `request.rs`, which reads it back).
fn block_of(kept: Kept) -> Value {
    let mut block = json!({"type": PART_BLOCK, "part": kept.part});
    if kept.after_calls > 0 {
        block["after_calls"] = json!(kept.after_calls);
    }
    block
}

impl GeminiAssembler {
    fn take(&mut self, chunk: &Value) -> Result<(), ModelError> {
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(chunk_error(error, chunk));
        }
        if let Some(usage) = chunk.get("usageMetadata") {
            if let Ok(new) = WireUsage::deserialize(usage) {
                self.usage
                    .get_or_insert_with(WireUsage::default)
                    .update(new);
            }
        }
        if let Some(reason) = chunk
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
        {
            self.blocked = Some(reason.to_string());
        }
        // Only the first candidate: deerflow never asks for more.
        let Some(candidate) = chunk
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(());
        };
        if let Some(parts) = candidate
            .pointer("/content/parts")
            .and_then(Value::as_array)
        {
            for part in parts.iter().filter_map(Value::as_object) {
                self.take_part(part);
            }
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        if let Some(message) = candidate.get("finishMessage").and_then(Value::as_str) {
            self.finish_message = Some(message.to_string());
        }
        Ok(())
    }

    fn take_part(&mut self, part: &Map<String, Value>) {
        if let Some(Value::Object(call)) = part.get("functionCall") {
            self.take_call(part, call);
            return;
        }
        let text = part.get("text").and_then(Value::as_str);
        let plain = text.is_some()
            && part
                .keys()
                .all(|k| k == "text" || (k == "thought" && part[k].is_boolean()));
        if !plain {
            // Kept whole, whatever fields it has; each counts toward the size limit, as
            // does the slot (a stream could send thousands of empty parts).
            self.kept += SLOT_BYTES
                + part
                    .iter()
                    .map(|(k, v)| k.len() + json_bytes(v))
                    .sum::<usize>();
            self.special = true;
            self.parts.push(Kept {
                part: part.clone(),
                after_calls: self.calls.len(),
                plain: false,
            });
            return;
        }
        let piece = text.unwrap_or_default();
        self.kept += piece.len();
        if piece.is_empty() {
            return;
        }
        let thought = part.get("thought") == Some(&Value::Bool(true));
        let calls = self.calls.len();
        if let Some(last) = self
            .parts
            .last_mut()
            .filter(|k| k.plain && k.after_calls == calls && k.is_thought() == thought)
        {
            let joined = format!("{}{piece}", last.text());
            last.part.insert("text".into(), json!(joined));
            return;
        }
        self.kept += SLOT_BYTES;
        self.parts.push(Kept {
            part: part.clone(),
            after_calls: calls,
            plain: true,
        });
    }

    /// A function call arrives whole in one part. Its part's other fields (the
    /// `thoughtSignature`) and the call's own beyond name and args (Gemini 3's `id`) are
    /// kept on the call, to go back exactly as they came.
    fn take_call(&mut self, part: &Map<String, Value>, call: &Map<String, Value>) {
        let name = call
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.trim().is_empty())
            .map_or_else(new_call_id, str::to_string);
        let mut tool_call = match call.get("args") {
            Some(Value::Object(_)) | None | Some(Value::Null) => {
                let arguments = match call.get("args") {
                    Some(args) => ToolArgs::from_value(args),
                    None => ToolArgs::empty(),
                };
                self.kept += arguments.as_str().len();
                ToolCall {
                    id,
                    name,
                    arguments,
                    invalid_arguments: None,
                    extra: Default::default(),
                }
            }
            Some(Value::String(raw)) => {
                self.kept += raw.len();
                ToolCall::from_raw(id, name, raw)
            }
            Some(other) => {
                let raw = other.to_string();
                self.kept += raw.len();
                ToolCall::from_raw(id, name, &raw)
            }
        };
        let mut extra: Map<String, Value> = part
            .iter()
            .filter(|(k, _)| *k != "functionCall")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        // The call's slot and every field kept with it count toward the size limit.
        self.kept += SLOT_BYTES
            + extra
                .iter()
                .map(|(k, v)| k.len() + json_bytes(v))
                .sum::<usize>();
        let own: Map<String, Value> = call
            .iter()
            .filter(|(k, _)| *k != "name" && *k != "args")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !own.is_empty() {
            self.kept += own
                .iter()
                .map(|(k, v)| k.len() + json_bytes(v))
                .sum::<usize>();
            extra.insert("functionCall".into(), Value::Object(own));
        }
        tool_call.extra = extra.into();
        self.calls.push(tool_call);
    }
}

/// Gemini 2.x calls carry no id: one is made up, unique enough for a run (the agent loop
/// makes ids unique within a transcript anyway). It never goes back to the API.
fn new_call_id() -> String {
    format!("call_{:016x}", fastrand::u64(..))
}

/// An `error` object inside the stream: the server's trouble (overloaded, quota, internal)
/// is retried like a dropped stream, anything else is the request's and final.
fn chunk_error(error: &Value, chunk: &Value) -> ModelError {
    let message = json_error_message(chunk).unwrap_or_else(|| clip(&error.to_string(), 300));
    let status = error
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let code = error.get("code").and_then(Value::as_u64).unwrap_or(0);
    let transient = matches!(
        status,
        "UNAVAILABLE" | "RESOURCE_EXHAUSTED" | "INTERNAL" | "DEADLINE_EXCEEDED"
    ) || code == 429
        || code >= 500;
    if transient {
        dropped(PROVIDER, message)
    } else {
        stream_error(PROVIDER, message)
    }
}
