//! Assembling the events of a streamed Responses API call into one response.
//!
//! The stream announces output items (`response.output_item.added`), streams their
//! contents as deltas (text, reasoning summary, function-call arguments), closes each with
//! the whole item (`response.output_item.done`), and ends with one of `response.completed`,
//! `response.incomplete` or `response.failed`, which carries the usage. The whole items
//! win over the deltas where both say something.

use std::collections::BTreeMap;

use eventsource_stream::Event;
use serde::Deserialize;
use serde_json::{json, Value};

use super::request::{MESSAGE_ITEM, REASONING_ITEM};
use super::PROVIDER;
use crate::count;
use crate::error_text::{clip, dropped, stream_error};
use crate::http::{self, json_bytes, Assembler, SLOT_BYTES};
use crate::sse::Flow;
use crate::{ModelError, ModelResponse, Reasoning, ToolCall, Usage};

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default, deserialize_with = "count")]
    input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    output_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    total_tokens: Option<u64>,
    input_tokens_details: Option<InputDetails>,
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Debug, Deserialize)]
struct InputDetails {
    #[serde(default, deserialize_with = "count")]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct OutputDetails {
    #[serde(default, deserialize_with = "count")]
    reasoning_tokens: Option<u64>,
}

#[derive(Debug, Default)]
struct PartialCall {
    call_id: String,
    name: String,
    arguments: String,
}

/// Assembles the events of one streamed response.
#[derive(Debug, Default)]
pub struct ResponsesAssembler {
    /// Output text by the output index of its message item.
    text: BTreeMap<u64, String>,
    /// Reasoning summary text by output index, then summary index.
    summaries: BTreeMap<(u64, u64), String>,
    /// Function calls by output index, which orders them.
    calls: BTreeMap<u64, PartialCall>,
    /// Output indexes by item id, for events that name only the item.
    indexes: BTreeMap<String, u64>,
    /// One past the largest output index in `indexes`: the index of an item that comes
    /// without one.
    next_index: u64,
    /// Whole reasoning items as the API sent them, by output index.
    reasoning_items: BTreeMap<u64, Value>,
    /// The ids of message items, by output index.
    message_ids: BTreeMap<u64, String>,
    /// Any `output_item.done` seen: otherwise the final response's `output` is read.
    saw_items: bool,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    /// Bytes of text, reasoning, arguments, kept items and slots so far (the response size
    /// limit).
    kept: usize,
}

impl Assembler for ResponsesAssembler {
    fn on_event(&mut self, event: &Event) -> Result<Flow, ModelError> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(Flow::Continue);
        }
        let value: Value = http::event_json(data, PROVIDER, "a stream event")?;
        // The `type` field names the event; the SSE event name says the same.
        let kind = value["type"].as_str().unwrap_or(event.event.as_str());
        self.take(kind, &value)
    }

    fn finish(self, ended: Flow) -> Result<ModelResponse, ModelError> {
        if ended == Flow::Continue {
            return Err(dropped(
                PROVIDER,
                "stream ended before the response was complete",
            ));
        }
        // A reasoning item goes back followed by the output it led to, as the same items: so
        // with reasoning, the message's id is kept too (the calls go by their `call_id`).
        let mut kept = self.reasoning_items;
        if !kept.is_empty() {
            for (index, id) in self.message_ids {
                kept.insert(index, json!({"type": MESSAGE_ITEM, "id": id}));
            }
        }
        let blocks: Vec<Value> = kept.into_values().collect();
        let mut summary: Vec<String> = self.summaries.into_values().collect();
        if summary.iter().all(String::is_empty) {
            summary = blocks.iter().flat_map(summary_texts).collect();
        }
        summary.retain(|s| !s.is_empty());
        let text: String = self.text.into_values().collect::<Vec<_>>().join("\n\n");
        // A call item without a name cannot be run, nor sent back (the API would refuse it).
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_values()
            .filter(|c| !c.name.is_empty())
            .map(|c| ToolCall::from_raw(c.call_id, c.name, &c.arguments))
            .collect();
        let finish_reason = self.finish_reason.map(|reason| match reason.as_str() {
            "completed" if tool_calls.is_empty() => "stop".to_string(),
            "completed" => "tool_calls".to_string(),
            _ => reason,
        });
        Ok(ModelResponse {
            text: (!text.is_empty()).then_some(text),
            tool_calls,
            usage: self.usage,
            finish_reason,
            reasoning: Reasoning {
                text: (!summary.is_empty()).then(|| summary.join("\n\n")),
                blocks,
            },
        })
    }

    fn from_json(value: &Value) -> Result<ModelResponse, ModelError> {
        // A server that ignores `stream: true` answers with the response object itself.
        if value["object"] != "response" && value.get("output").is_none() {
            return Err(stream_error(
                PROVIDER,
                format!("unexpected JSON answer: {}", clip(&value.to_string(), 200)),
            ));
        }
        let mut assembler = Self::default();
        let flow = assembler.take_final(value)?;
        assembler.finish(flow)
    }

    fn kept_bytes(&self) -> usize {
        self.kept
    }
}

impl ResponsesAssembler {
    fn take(&mut self, kind: &str, value: &Value) -> Result<Flow, ModelError> {
        let index = self.output_index(value);
        match kind {
            "response.output_item.added" => self.item_added(index, &value["item"]),
            "response.output_item.done" => self.item_done(index, &value["item"]),
            "response.output_text.delta" | "response.refusal.delta" => {
                self.push_text(index, value["delta"].as_str());
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let part = value["summary_index"]
                    .as_u64()
                    .or_else(|| value["content_index"].as_u64())
                    .unwrap_or(0);
                if let Some(delta) = value["delta"].as_str() {
                    self.kept += delta.len();
                    let kept = &mut self.kept;
                    let text = self.summaries.entry((index, part)).or_insert_with(|| {
                        *kept += SLOT_BYTES;
                        String::new()
                    });
                    text.push_str(delta);
                }
            }
            // Only for a call whose item was added: the API announces every item before
            // its deltas, so arguments for any other index belong to no call (a nameless
            // one would be invented, run and sent back). A whole item that comes later
            // carries its arguments anyway.
            "response.function_call_arguments.delta" => {
                if let (Some(delta), Some(call)) =
                    (value["delta"].as_str(), self.calls.get_mut(&index))
                {
                    self.kept += delta.len();
                    call.arguments.push_str(delta);
                }
            }
            "response.function_call_arguments.done" => {
                if let (Some(whole), Some(call)) =
                    (value["arguments"].as_str(), self.calls.get_mut(&index))
                {
                    self.kept += whole.len().saturating_sub(call.arguments.len());
                    call.arguments = whole.to_string();
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                return self.take_final(&value["response"]);
            }
            "error" => return Err(failure(value.get("error").unwrap_or(value))),
            // created, in_progress, content parts, `.done` events that repeat what the
            // deltas said, and event types added later need nothing.
            _ => {}
        }
        Ok(Flow::Continue)
    }

    /// The output index an event is about: its own, else its item's, else a new one.
    fn output_index(&mut self, value: &Value) -> u64 {
        let item_id = value["item_id"]
            .as_str()
            .or_else(|| value["item"]["id"].as_str());
        if let Some(index) = value["output_index"].as_u64() {
            if let Some(id) = item_id {
                self.remember(id, index);
            }
            return index;
        }
        if let Some(index) = item_id.and_then(|id| self.indexes.get(id)) {
            return *index;
        }
        let next = self.next_index;
        if let Some(id) = item_id {
            self.remember(id, next);
        }
        next
    }

    fn remember(&mut self, id: &str, index: u64) {
        if self.indexes.insert(id.to_string(), index).is_none() {
            self.kept += SLOT_BYTES + id.len();
        }
        self.next_index = self.next_index.max(index.saturating_add(1));
    }

    fn push_text(&mut self, index: u64, delta: Option<&str>) {
        if let Some(delta) = delta {
            self.kept += delta.len();
            let kept = &mut self.kept;
            let text = self.text.entry(index).or_insert_with(|| {
                *kept += SLOT_BYTES;
                String::new()
            });
            text.push_str(delta);
        }
    }

    /// The call at `index`, a new slot counted toward the size limit: a stream could name
    /// thousands of items without a byte in them.
    fn call_slot(&mut self, index: u64) -> &mut PartialCall {
        let kept = &mut self.kept;
        self.calls.entry(index).or_insert_with(|| {
            *kept += SLOT_BYTES;
            PartialCall::default()
        })
    }

    fn item_added(&mut self, index: u64, item: &Value) {
        if item["type"] == "function_call" {
            self.kept += json_bytes(&item["name"]) + json_bytes(&item["call_id"]);
            let call = self.call_slot(index);
            call.call_id = call_id(item);
            call.name = item["name"].as_str().unwrap_or_default().to_string();
            if let Some(arguments) = item["arguments"].as_str() {
                call.arguments = arguments.to_string();
                self.kept += arguments.len();
            }
        }
    }

    /// A whole item: it replaces what its deltas assembled.
    fn item_done(&mut self, index: u64, item: &Value) {
        self.saw_items = true;
        match item["type"].as_str() {
            Some("function_call") => {
                self.kept += json_bytes(&item["name"]) + json_bytes(&item["call_id"]);
                let call = self.call_slot(index);
                call.call_id = call_id(item);
                if let Some(name) = item["name"].as_str() {
                    call.name = name.to_string();
                }
                if let Some(arguments) = item["arguments"].as_str() {
                    let grown = arguments.len().saturating_sub(call.arguments.len());
                    call.arguments = arguments.to_string();
                    self.kept += grown;
                }
            }
            Some(MESSAGE_ITEM) => {
                if let Some(id) = item["id"].as_str() {
                    self.kept += SLOT_BYTES + id.len();
                    self.message_ids.insert(index, id.to_string());
                }
                let whole = message_text(item);
                if !whole.is_empty() {
                    // It replaces what the deltas said: only what it adds counts.
                    let before = self.text.get(&index).map_or(0, String::len);
                    self.kept += whole.len().saturating_sub(before);
                    self.text.insert(index, whole);
                }
            }
            Some(REASONING_ITEM) => {
                // Kept whole and opaque (id, summary, encrypted_content): it goes back to
                // the API unchanged on the agent's later requests.
                self.kept += SLOT_BYTES + json_bytes(item);
                self.reasoning_items.insert(index, item.clone());
            }
            // Items of server-side tools (web search, …) are the API's own business.
            _ => {}
        }
    }

    /// The final response object: its status, usage and, when the stream sent no whole
    /// items, its output.
    fn take_final(&mut self, response: &Value) -> Result<Flow, ModelError> {
        if let Ok(usage) = WireUsage::deserialize(&response["usage"]) {
            self.usage = convert_usage(&usage);
        }
        let status = response["status"].as_str().unwrap_or("completed");
        if status == "failed" || response["error"].is_object() {
            return Err(failure(&response["error"]));
        }
        if !self.saw_items {
            let items = response["output"].as_array().map(Vec::as_slice);
            for (i, item) in items.unwrap_or_default().iter().enumerate() {
                self.item_done(i as u64, item);
            }
        }
        self.finish_reason = Some(match status {
            // `max_output_tokens` or `content_filter`.
            "incomplete" => response["incomplete_details"]["reason"]
                .as_str()
                .unwrap_or("incomplete")
                .to_string(),
            other => other.to_string(),
        });
        Ok(Flow::Done)
    }
}

fn call_id(item: &Value) -> String {
    item["call_id"]
        .as_str()
        .or_else(|| item["id"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The text of a message item: its `output_text` parts (and a refusal, said as text).
fn message_text(item: &Value) -> String {
    let parts = item["content"].as_array().map(Vec::as_slice);
    parts
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p["text"].as_str().or_else(|| p["refusal"].as_str()))
        .collect()
}

fn summary_texts(item: &Value) -> Vec<String> {
    let parts = item["summary"].as_array().map(Vec::as_slice);
    parts
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p["text"].as_str().map(str::to_string))
        .collect()
}

/// Reasoning tokens are output tokens; OpenAI counts them in `output_tokens` already, and
/// a server that reports them apart must not make them vanish.
fn convert_usage(usage: &WireUsage) -> Option<Usage> {
    let reasoning = usage
        .output_tokens_details
        .as_ref()
        .and_then(|d| d.reasoning_tokens);
    let output = match (usage.output_tokens, reasoning) {
        (Some(o), r) => Some(o.max(r.unwrap_or(0))),
        (None, r) => r,
    };
    Usage::from_counts(
        usage.input_tokens,
        output,
        usage.total_tokens,
        usage
            .input_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens),
    )
}

/// A failed response or an `error` event (`{code, message}`, at the top level or under
/// `error`). The server's own trouble (`server_error`, a rate limit, overload) is retried
/// as a 5xx or 429 would be on Chat Completions; any other failure is the request's and is
/// reported as it is. The code stays in the message: "context_length_exceeded" is how an
/// overflow is recognised.
fn failure(error: &Value) -> ModelError {
    let code = error["code"]
        .as_str()
        .or_else(|| error["type"].as_str())
        .unwrap_or_default();
    let message = error["message"].as_str().unwrap_or_default().trim();
    let text = match (code.is_empty(), message.is_empty()) {
        (false, false) => format!("{code}: {message}"),
        (false, true) => code.to_string(),
        (true, false) => message.to_string(),
        (true, true) => "the response failed without an error message".to_string(),
    };
    let text = clip(&text, 1000);
    let retryable = matches!(
        code,
        "server_error"
            | "internal_error"
            | "rate_limit_exceeded"
            | "overloaded"
            | "server_is_overloaded"
            | "slow_down"
    );
    if retryable {
        dropped(PROVIDER, text)
    } else {
        stream_error(PROVIDER, text)
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::http;
    use crate::test_support::usage;

    const SUMMARY: &str = capture!("openai/responses_reasoning_summary.sse");
    const FUNCTION_CALL: &str = capture!("openai/responses_reasoning_function_call.sse");
    const CACHED: &str = capture!("openai/responses_cached_tokens.sse");

    async fn parse_cut(text: &str, cuts: &[usize]) -> Result<ModelResponse, ModelError> {
        crate::test_support::assemble_cut::<ResponsesAssembler>(text, cuts, PROVIDER).await
    }

    async fn parse(text: &str) -> Result<ModelResponse, ModelError> {
        parse_cut(text, &[]).await
    }

    #[tokio::test]
    async fn a_reasoning_item_then_a_function_call() {
        let r = parse(FUNCTION_CALL).await.unwrap();
        assert_eq!(r.text, None);
        assert_eq!(r.tool_calls.len(), 1);
        let call = &r.tool_calls[0];
        assert_eq!(call.id, "call_sNntVegw8ViC8Zc4EIjqEKbo");
        assert_eq!(call.name, "simple_tool");
        assert_eq!(call.arguments, json!({"number": "5"}));
        assert_eq!(call.invalid_arguments, None);
        assert!(call.extra.is_empty());
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        // 128 of the 148 output tokens were reasoning: they are output.
        assert_eq!(r.usage, usage(46, 148, 194, Some(0)));
        // The summary is empty: no reasoning text, but the item is kept whole.
        assert_eq!(r.reasoning.text, None);
        assert_eq!(
            r.reasoning.blocks,
            [
                json!({"id": "rs_68d32fad0e708190a4c3d3664fac0fd7089ed203175045cf",
                    "type": "reasoning", "summary": []})
            ]
        );
    }

    #[tokio::test]
    async fn the_arguments_deltas_alone_assemble_the_call() {
        // Without the `.done` events the deltas are all there is.
        let deltas_only: String = FUNCTION_CALL
            .split_inclusive("\n\n")
            .filter(|e| {
                let whole_call = e.contains("output_item.done") && e.contains("function_call");
                !(whole_call || e.contains("function_call_arguments.done"))
            })
            .collect();
        let r = parse(&deltas_only).await.unwrap();
        assert_eq!(r.tool_calls[0].id, "call_sNntVegw8ViC8Zc4EIjqEKbo");
        assert_eq!(r.tool_calls[0].arguments, json!({"number": "5"}));
    }

    /// Argument deltas for an item the stream never added (or not yet) belong to no call:
    /// no nameless call is made up from them; a whole item still counts.
    #[tokio::test]
    async fn argument_deltas_for_items_never_added_make_no_call() {
        let delta = |index: u64, item: &str, piece: &str| {
            event(json!({"type": "response.function_call_arguments.delta",
                         "output_index": index, "item_id": item, "delta": piece}))
        };
        let call = |kind: &str, index: u64, id: &str, name: &str, args: &str| {
            event(json!({"type": kind, "output_index": index,
                         "item": {"type": "function_call", "id": id, "call_id": format!("call_{id}"),
                                  "name": name, "arguments": args}}))
        };
        let done = terminal(
            "response.completed",
            json!({"status": "completed", "output": []}),
        );
        let text = [
            delta(7, "ghost", "{\"command\": \"rm -rf /\"}"),
            event(
                json!({"type": "response.function_call_arguments.done", "output_index": 8,
                         "item_id": "ghost2", "arguments": "{}"}),
            ),
            // Early deltas of a call added later are dropped; its whole item wins.
            delta(0, "fc_a", "{\"pa"),
            call("response.output_item.added", 0, "fc_a", "ls", ""),
            delta(0, "fc_a", "{\"path\": \".\"}"),
            call(
                "response.output_item.done",
                0,
                "fc_a",
                "ls",
                "{\"path\": \".\"}",
            ),
            call("response.output_item.done", 1, "fc_b", "", "{}"),
            done,
        ]
        .concat();
        let r = parse(&text).await.unwrap();
        let calls: Vec<(&str, &str)> = r
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str()))
            .collect();
        assert_eq!(calls, [("call_fc_a", "ls")]);
        assert_eq!(r.tool_calls[0].arguments, json!({"path": "."}));
        // The deltas alone, with no item at all: no call.
        let text = [
            delta(0, "x", "{}"),
            terminal("response.completed", json!({"status": "completed"})),
        ]
        .concat();
        let r = parse(&text).await.unwrap();
        assert!(r.tool_calls.is_empty(), "{:?}", r.tool_calls);
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    }

    #[tokio::test]
    async fn a_reasoning_summary_then_text() {
        let r = parse(SUMMARY).await.unwrap();
        assert_eq!(
            r.text.as_deref(),
            Some("The number is 9, since 1 + x = 10 ⇒ x = 10 − 1 = 9.")
        );
        let summary = r.reasoning.text.clone().unwrap();
        assert!(
            summary.starts_with("**Solving for the number**"),
            "{summary}"
        );
        assert!(summary.ends_with("calculated as x = 10 - 1."), "{summary}");
        assert_eq!(summary.chars().count(), 399);
        assert_eq!(r.reasoning.blocks.len(), 2);
        assert_eq!(
            r.reasoning.blocks[0]["id"],
            "rs_6877c00e9a24819d81db1f21b0dc3b8c014f759afd995257"
        );
        assert_eq!(r.reasoning.blocks[0]["summary"][0]["text"], json!(summary));
        // The message the reasoning led to is named by its id, to go back after it.
        assert_eq!(
            r.reasoning.blocks[1],
            json!({"type": "message", "id": "msg_6877c013ce50819d8933b430052e5fff014f759afd995257"})
        );
        assert!(r.tool_calls.is_empty());
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
        assert_eq!(r.usage, usage(20, 166, 186, Some(0)));
    }

    #[tokio::test]
    async fn cached_tokens_are_cache_reads() {
        let r = parse(CACHED).await.unwrap();
        assert_eq!(r.text.as_deref(), Some("2, 3, 4"));
        assert_eq!(r.usage, usage(1515, 8, 1523, Some(1390)));
        assert_eq!(r.reasoning, Reasoning::default());
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    }

    #[tokio::test]
    async fn every_split_point_gives_the_same_response() {
        for text in [FUNCTION_CALL, CACHED] {
            let whole = parse(text).await.unwrap();
            for cut in 0..=text.len() {
                assert_eq!(
                    parse_cut(text, &[cut]).await.unwrap(),
                    whole,
                    "cut at {cut}"
                );
            }
        }
        let whole = parse(SUMMARY).await.unwrap();
        let mut rng = fastrand::Rng::with_seed(11);
        for _ in 0..100 {
            let mut cuts: Vec<usize> = (0..rng.usize(1..60))
                .map(|_| rng.usize(0..=SUMMARY.len()))
                .collect();
            cuts.sort_unstable();
            assert_eq!(
                parse_cut(SUMMARY, &cuts).await.unwrap(),
                whole,
                "cuts {cuts:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_stream_cut_before_its_end_is_dropped() {
        let cut = CACHED.find("event: response.completed").unwrap();
        assert_eq!(
            parse(&CACHED[..cut]).await,
            Err(ModelError::Dropped {
                provider: "openai".into(),
                message: "stream ended before the response was complete".into()
            })
        );
        assert!(parse("").await.is_err());
    }

    fn event(value: Value) -> String {
        format!(
            "event: {}\ndata: {value}\n\n",
            value["type"].as_str().unwrap()
        )
    }

    fn terminal(kind: &str, response: Value) -> String {
        event(json!({"type": kind, "response": response}))
    }

    #[tokio::test]
    async fn an_incomplete_response_says_why() {
        for (reason, kind) in [
            ("max_output_tokens", crate::StopKind::OutputLimit),
            ("content_filter", crate::StopKind::ContentFilter),
        ] {
            let text = [
                event(
                    json!({"type": "response.output_text.delta", "output_index": 0, "item_id": "m", "delta": "Part"}),
                ),
                terminal(
                    "response.incomplete",
                    json!({"status": "incomplete", "incomplete_details": {"reason": reason},
                           "usage": {"input_tokens": 5, "output_tokens": 50, "total_tokens": 55}}),
                ),
            ]
            .concat();
            let r = parse(&text).await.unwrap();
            assert_eq!(r.finish_reason.as_deref(), Some(reason));
            assert_eq!(r.stop_kind(), kind);
            assert_eq!(r.text.as_deref(), Some("Part"));
            assert_eq!(r.usage, usage(5, 50, 55, None));
        }
    }

    #[tokio::test]
    async fn failures_are_retried_only_when_they_are_the_servers() {
        let failed = |code: &str, message: &str| {
            terminal(
                "response.failed",
                json!({"status": "failed", "error": {"code": code, "message": message}}),
            )
        };
        assert_eq!(
            parse(&failed("server_error", "The server had an error.")).await,
            Err(ModelError::Dropped {
                provider: "openai".into(),
                message: "server_error: The server had an error.".into()
            })
        );
        let err = parse(&failed("invalid_prompt", "Nope.")).await.unwrap_err();
        assert_eq!(
            err,
            ModelError::Stream {
                provider: "openai".into(),
                message: "invalid_prompt: Nope.".into()
            }
        );
        assert!(!err.is_retryable());
        let overflow = parse(&failed(
            "context_length_exceeded",
            "Your input exceeds the context window of this model.",
        ))
        .await
        .unwrap_err();
        assert!(overflow.is_context_overflow(), "{overflow}");
        assert!(!overflow.is_retryable());

        // An `error` event, in both of its shapes.
        let flat = event(json!({"type": "error", "code": "rate_limit_exceeded",
                                "message": "Slow down.", "param": null, "sequence_number": 3}));
        let err = parse(&flat).await.unwrap_err();
        assert!(err.is_retryable(), "{err:?}");
        assert_eq!(
            err.to_string(),
            "openai stream dropped: rate_limit_exceeded: Slow down."
        );
        let nested = event(
            json!({"type": "error", "error": {"type": "invalid_request_error",
                                  "code": null, "message": "Bad input."}}),
        );
        assert_eq!(
            parse(&nested).await.unwrap_err().to_string(),
            "openai stream error: invalid_request_error: Bad input."
        );
    }

    #[tokio::test]
    async fn malformed_json_is_a_stream_error() {
        let err = parse("event: response.created\ndata: {\"type\":\n\n")
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("malformed JSON in a stream event"),
            "{err}"
        );
    }

    #[test]
    fn a_non_streamed_response_object_parses_too() {
        // The final `response` object of the function-call capture, on its own.
        let completed = FUNCTION_CALL
            .split_inclusive("\n\n")
            .find(|e| e.starts_with("event: response.completed"))
            .unwrap();
        let data = completed.split_once("data: ").unwrap().1.trim();
        let value: Value = serde_json::from_str(data).unwrap();
        let body = value["response"].to_string();
        let r = http::parse_json_answer::<ResponsesAssembler>(&body, PROVIDER).unwrap();
        assert_eq!(r.tool_calls[0].id, "call_sNntVegw8ViC8Zc4EIjqEKbo");
        assert_eq!(r.tool_calls[0].arguments, json!({"number": "5"}));
        assert_eq!(r.reasoning.blocks.len(), 1);
        assert_eq!(r.usage, usage(46, 148, 194, Some(0)));
        assert!(http::parse_json_answer::<ResponsesAssembler>("{\"id\": 1}", PROVIDER).is_err());
    }

    #[tokio::test]
    async fn reasoning_tokens_reported_apart_still_count_as_output() {
        let text = terminal(
            "response.completed",
            json!({"status": "completed", "output": [],
                   "usage": {"input_tokens": 10, "output_tokens": 3,
                             "output_tokens_details": {"reasoning_tokens": 40}}}),
        );
        assert_eq!(parse(&text).await.unwrap().usage, usage(10, 40, 50, None));
    }

    /// Items count toward the size limit whatever they hold: hundreds of thousands of
    /// empty ones, or reasoning items with large opaque fields, are refused like too much
    /// text. Items without an index are numbered after the largest, which may be u64::MAX.
    #[tokio::test]
    async fn item_slots_and_kept_items_are_bounded_by_the_size_limit() {
        let empty: Vec<Value> = (0..300_000)
            .map(|i| json!({"type": "message", "id": format!("m{i}"), "content": []}))
            .collect();
        let one_event = terminal(
            "response.completed",
            json!({"status": "completed", "output": empty}),
        );
        let err = parse(&one_event).await.unwrap_err();
        assert!(err.to_string().contains("too large"), "{err}");
        let filler = "x".repeat(1 << 20);
        let reasoning: String = (0..40)
            .map(|i| {
                event(json!({"type": "response.output_item.done", "output_index": i,
                             "item": {"type": "reasoning", "id": "rs", "encrypted_content": filler}}))
            })
            .collect();
        let err = parse(&reasoning).await.unwrap_err();
        assert!(err.to_string().contains("too large"), "{err}");
        let unnumbered: String = (0..1_000)
            .map(|i| {
                event(json!({"type": "response.output_text.delta", "item_id": format!("m{i}"), "delta": "a"}))
            })
            .collect();
        let last = event(json!({"type": "response.output_text.delta", "item_id": "z",
                                "output_index": u64::MAX, "delta": "z"}));
        let whole = format!(
            "{unnumbered}{last}{}{}",
            event(json!({"type": "response.output_text.delta", "item_id": "after", "delta": "!"})),
            terminal("response.completed", json!({"status": "completed"}))
        );
        let r = parse(&whole).await.unwrap();
        let text = r.text.unwrap();
        assert_eq!(text.len(), 1_000 * 3 + 2);
        assert!(text.ends_with("a\n\nz!"), "{}", &text[text.len() - 8..]);
    }

    #[tokio::test]
    async fn a_response_over_32_mib_is_a_stream_error() {
        let piece = "a".repeat(1 << 20);
        let delta =
            event(json!({"type": "response.output_text.delta", "output_index": 0, "delta": piece}));
        let err = parse(&delta.repeat(33)).await.unwrap_err();
        assert!(err.to_string().contains("too large"), "{err}");
    }
}
