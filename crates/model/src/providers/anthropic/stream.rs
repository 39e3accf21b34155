//! Assembling the events of a streamed message into one response.

use std::collections::BTreeMap;

use eventsource_stream::Event;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::PROVIDER;
use crate::count;
use crate::error_text::{clip, dropped, json_error_message, stream_error};
use crate::http::{self, json_bytes, Assembler, SLOT_BYTES};
use crate::sse::Flow;
use crate::{ModelError, ModelResponse, Reasoning, ToolArgs, ToolCall, Usage};

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    #[serde(default, deserialize_with = "count")]
    input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    output_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    cache_read_input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        start_input: Value,
        json: String,
    },
    /// A `thinking` block: its start object, with the text and signature its deltas
    /// add, goes back whole on later requests.
    Thinking {
        start: Map<String, Value>,
        thinking: String,
        signature: String,
    },
    /// A `redacted_thinking` block, which has no deltas and goes back verbatim.
    Redacted(Value),
    /// Block types deerflow does not use (server tools, citations).
    Other,
}

/// Assembles the events of one streamed message.
#[derive(Debug, Default)]
pub struct AnthropicAssembler {
    /// Content blocks by their `index`, which orders them.
    blocks: BTreeMap<u64, Block>,
    usage: Option<WireUsage>,
    stop_reason: Option<String>,
    /// Bytes of text, tool input, kept blocks and slots so far (the response size limit).
    kept: usize,
}

impl Assembler for AnthropicAssembler {
    fn on_event(&mut self, event: &Event) -> Result<Flow, ModelError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        let what = format!("a `{}` event", event.event);
        let value: Value = http::event_json(data, PROVIDER, &what)?;
        // The `event:` line names the event; the data's `type` says the same and covers
        // servers that leave the line out.
        let kind = match event.event.as_str() {
            "message" => value["type"].as_str().unwrap_or("message"),
            name => name,
        };
        self.take(kind, &value)
    }

    fn finish(self, ended: Flow) -> Result<ModelResponse, ModelError> {
        if ended == Flow::Continue {
            return Err(dropped(
                PROVIDER,
                "stream ended before the response was complete",
            ));
        }
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        let mut reasoning = Reasoning::default();
        for block in self.blocks.into_values() {
            match block {
                Block::Text(t) => text.push_str(&t),
                Block::ToolUse {
                    id,
                    name,
                    start_input,
                    json,
                } => {
                    tool_calls.push(tool_call(id, name, &start_input, &json));
                }
                Block::Thinking {
                    mut start,
                    thinking,
                    signature,
                } => {
                    if !thinking.is_empty() {
                        let all = reasoning.text.get_or_insert_with(String::new);
                        if !all.is_empty() {
                            all.push_str("\n\n");
                        }
                        all.push_str(&thinking);
                    }
                    // Anthropic requires a thinking block sent back to carry the signature
                    // it was given (a missing one is "Field required", an empty one "Invalid
                    // signature"), and Claude signs every block. An unsigned block comes
                    // from a compatible server that checks no signature, so it is not kept:
                    // its text was shown, and nothing made up is sent back.
                    if signature.is_empty() {
                        continue;
                    }
                    start.insert("thinking".into(), Value::String(thinking));
                    start.insert("signature".into(), Value::String(signature));
                    reasoning.blocks.push(Value::Object(start));
                }
                Block::Redacted(block) => reasoning.blocks.push(block),
                Block::Other => {}
            }
        }
        Ok(ModelResponse {
            text: (!text.is_empty()).then_some(text),
            tool_calls,
            usage: self.usage.as_ref().and_then(convert_usage),
            finish_reason: self.stop_reason,
            reasoning,
        })
    }

    fn from_json(value: &Value) -> Result<ModelResponse, ModelError> {
        let Some(content) = value["content"].as_array() else {
            return Err(stream_error(
                PROVIDER,
                format!("unexpected JSON answer: {}", excerpt(&value.to_string())),
            ));
        };
        let mut assembler = Self::default();
        for (index, block) in content.iter().enumerate() {
            assembler.start_block(&json!({"index": index, "content_block": block}));
        }
        assembler.merge_usage(&value["usage"]);
        assembler.stop_reason = value["stop_reason"].as_str().map(str::to_string);
        assembler.finish(Flow::Done)
    }

    fn kept_bytes(&self) -> usize {
        self.kept
    }
}

impl AnthropicAssembler {
    fn take(&mut self, kind: &str, value: &Value) -> Result<Flow, ModelError> {
        match kind {
            "message_start" => self.merge_usage(&value["message"]["usage"]),
            "content_block_start" => self.start_block(value),
            "content_block_delta" => self.delta(value)?,
            "message_delta" => {
                if let Some(reason) = value["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_string());
                }
                self.merge_usage(&value["usage"]);
            }
            "message_stop" => return Ok(Flow::Done),
            "error" => {
                let message = json_error_message(value).unwrap_or_else(|| value.to_string());
                // An overloaded or internal error is the server's trouble, not the request's.
                let kind = value["error"]["type"].as_str().unwrap_or_default();
                if matches!(kind, "overloaded_error" | "api_error") {
                    return Err(dropped(PROVIDER, message));
                }
                return Err(stream_error(PROVIDER, message));
            }
            // ping, content_block_stop and event types added later need nothing.
            _ => {}
        }
        Ok(Flow::Continue)
    }

    /// Usage numbers arrive in `message_start` and (cumulative) in `message_delta`; a
    /// field present later replaces the earlier value, absent ones are kept.
    fn merge_usage(&mut self, usage: &Value) {
        let Ok(new) = WireUsage::deserialize(usage) else {
            return;
        };
        let current = self.usage.get_or_insert_with(WireUsage::default);
        let keep = |old: &mut Option<u64>, new: Option<u64>| {
            if new.is_some() {
                *old = new;
            }
        };
        keep(&mut current.input_tokens, new.input_tokens);
        keep(&mut current.output_tokens, new.output_tokens);
        keep(
            &mut current.cache_read_input_tokens,
            new.cache_read_input_tokens,
        );
        keep(
            &mut current.cache_creation_input_tokens,
            new.cache_creation_input_tokens,
        );
    }

    fn start_block(&mut self, value: &Value) {
        let index = value["index"].as_u64().unwrap_or(self.blocks.len() as u64);
        let block = &value["content_block"];
        // Every block counts toward the size limit, an empty or unused one too: a stream
        // could start thousands of them.
        self.kept += SLOT_BYTES;
        let new = match block["type"].as_str() {
            Some("text") => {
                let text = block["text"].as_str().unwrap_or_default();
                self.kept += text.len();
                Block::Text(text.to_string())
            }
            Some("tool_use") => {
                self.kept += json_bytes(block);
                Block::ToolUse {
                    id: block["id"].as_str().unwrap_or_default().to_string(),
                    name: block["name"].as_str().unwrap_or_default().to_string(),
                    start_input: block["input"].clone(),
                    json: String::new(),
                }
            }
            Some("thinking") => {
                let text = |key: &str| block[key].as_str().unwrap_or_default().to_string();
                let (thinking, signature) = (text("thinking"), text("signature"));
                // The whole start object is kept, its extra fields included.
                self.kept += json_bytes(block);
                Block::Thinking {
                    start: block.as_object().cloned().unwrap_or_default(),
                    thinking,
                    signature,
                }
            }
            Some("redacted_thinking") => {
                self.kept += json_bytes(block);
                Block::Redacted(block.clone())
            }
            _ => Block::Other,
        };
        self.blocks.insert(index, new);
    }

    fn delta(&mut self, value: &Value) -> Result<(), ModelError> {
        let index = value["index"].as_u64().unwrap_or(0);
        let delta = &value["delta"];
        let Some(block) = self.blocks.get_mut(&index) else {
            return Err(stream_error(
                PROVIDER,
                format!("a content_block_delta for block {index}, which never started"),
            ));
        };
        match (block, delta["type"].as_str()) {
            (Block::Text(text), Some("text_delta")) => {
                let piece = delta["text"].as_str().unwrap_or_default();
                self.kept += piece.len();
                text.push_str(piece);
            }
            (Block::ToolUse { json, .. }, Some("input_json_delta")) => {
                let piece = delta["partial_json"].as_str().unwrap_or_default();
                self.kept += piece.len();
                json.push_str(piece);
            }
            (Block::Thinking { thinking, .. }, Some("thinking_delta")) => {
                let piece = delta["thinking"].as_str().unwrap_or_default();
                self.kept += piece.len();
                thinking.push_str(piece);
            }
            (Block::Thinking { signature, .. }, Some("signature_delta")) => {
                let piece = delta["signature"].as_str().unwrap_or_default();
                self.kept += piece.len();
                signature.push_str(piece);
            }
            // Citation deltas and deltas of unused blocks carry nothing deerflow keeps.
            _ => {}
        }
        Ok(())
    }
}

/// The streamed JSON fragments when there were any, else the `input` of the start event.
fn tool_call(id: String, name: String, start_input: &Value, json: &str) -> ToolCall {
    if json.trim().is_empty() {
        match start_input {
            Value::Object(_) => ToolCall {
                id,
                name,
                arguments: ToolArgs::from_value(start_input),
                invalid_arguments: None,
                extra: Default::default(),
            },
            _ => ToolCall::from_raw(id, name, ""),
        }
    } else {
        ToolCall::from_raw(id, name, json)
    }
}

/// `input_tokens` counts every prompt token (contract §3): Anthropic reports the cached
/// and the cache-writing parts separately from the uncached rest.
/// An input count that was not reported stays unreported, whatever the cache counts say.
fn convert_usage(usage: &WireUsage) -> Option<Usage> {
    let read = usage.cache_read_input_tokens;
    let write = usage.cache_creation_input_tokens;
    let input = usage.input_tokens.map(|i| {
        i.saturating_add(read.unwrap_or(0))
            .saturating_add(write.unwrap_or(0))
    });
    let usage = Usage::from_counts(input, usage.output_tokens, None, read)?;
    Some(Usage {
        cache_write_tokens: write,
        ..usage
    })
}

/// A bad chunk as quoted in an error message.
fn excerpt(data: &str) -> String {
    clip(data, 200)
}

#[cfg(test)]
mod tests {

    use super::super::test_data::TWO_TOOLS;
    use super::*;
    use crate::http;

    async fn parse_cut(text: &str, cuts: &[usize]) -> Result<ModelResponse, ModelError> {
        crate::test_support::assemble_cut::<AnthropicAssembler>(text, cuts, PROVIDER).await
    }

    async fn parse(text: &str) -> Result<ModelResponse, ModelError> {
        parse_cut(text, &[]).await
    }

    #[tokio::test]
    async fn text_and_two_tool_uses_with_cache_usage() {
        let r = parse(TWO_TOOLS).await.unwrap();
        assert_eq!(r.text.as_deref(), Some("Let me look."));
        assert_eq!(
            r.tool_calls,
            vec![
                ToolCall {
                    id: "toolu_A".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "src/main.rs"}).into(),
                    invalid_arguments: None,
                    extra: Default::default(),
                },
                ToolCall {
                    id: "toolu_B".into(),
                    name: "get_time".into(),
                    arguments: json!({}).into(),
                    invalid_arguments: None,
                    extra: Default::default(),
                },
            ]
        );
        assert_eq!(r.finish_reason.as_deref(), Some("tool_use"));
        assert_eq!(
            r.usage,
            Some(Usage {
                input_tokens: 2112,
                output_tokens: 57,
                total_tokens: 2169,
                cache_read_tokens: Some(2000),
                cache_write_tokens: Some(100),
                unreported: Default::default(),
            })
        );
    }

    #[tokio::test]
    async fn recorded_cache_hit_counts_every_prompt_token() {
        let r = parse(capture!("anthropic/cache_read.sse")).await.unwrap();
        assert_eq!(r.text.as_deref(), Some("Goodbye."));
        assert_eq!(r.finish_reason.as_deref(), Some("end_turn"));
        // 3 uncached + 1217 read + 0 written (the fixtures' README).
        assert_eq!(
            r.usage,
            Some(Usage {
                input_tokens: 1220,
                output_tokens: 6,
                total_tokens: 1226,
                cache_read_tokens: Some(1217),
                cache_write_tokens: Some(0),
                unreported: Default::default(),
            })
        );
    }

    #[tokio::test]
    async fn recorded_max_tokens_stop_keeps_the_cut_text() {
        let r = parse(capture!("anthropic/max_tokens.sse")).await.unwrap();
        let text = r.text.clone().unwrap();
        assert!(
            text.starts_with("Here are all 50 U.S. states in alphabetical order:\n\n1. Alabama"),
            "{text}"
        );
        assert!(text.ends_with("8. Delaware\n9"), "{text}");
        assert_eq!(r.finish_reason.as_deref(), Some("max_tokens"));
        assert_eq!(r.stop_kind(), crate::StopKind::OutputLimit);
        assert!(r.tool_calls.is_empty());
        let u = r.usage.unwrap();
        assert_eq!((u.input_tokens, u.output_tokens), (15, 50));
    }

    /// A `tool_use` whose input the output limit cut: the call keeps the raw text as
    /// invalid arguments, so the agent loop answers it with the cut-off error.
    #[tokio::test]
    async fn a_tool_use_cut_at_max_tokens_has_invalid_arguments() {
        let cut = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_W\",\"name\":\"write_file\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"a.txt\\\", \\\"content\\\": \\\"lo\"}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":64}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let r = parse(cut).await.unwrap();
        assert_eq!(r.stop_kind(), crate::StopKind::OutputLimit);
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(
            r.tool_calls[0].invalid_arguments.as_deref(),
            Some(r#"{"path": "a.txt", "content": "lo"#)
        );
    }

    #[tokio::test]
    async fn a_refusal_stop_is_a_content_filter_stop() {
        let text = TWO_TOOLS.replace(
            "\"stop_reason\":\"tool_use\"",
            "\"stop_reason\":\"refusal\"",
        );
        let r = parse(&text).await.unwrap();
        assert_eq!(r.finish_reason.as_deref(), Some("refusal"));
        assert_eq!(r.stop_kind(), crate::StopKind::ContentFilter);
    }

    #[tokio::test]
    async fn random_splits_give_the_same_response() {
        let whole = parse(TWO_TOOLS).await.unwrap();
        for cut in 0..=TWO_TOOLS.len() {
            assert_eq!(
                parse_cut(TWO_TOOLS, &[cut]).await.unwrap(),
                whole,
                "cut at {cut}"
            );
        }
        let mut rng = fastrand::Rng::with_seed(11);
        for _ in 0..200 {
            let mut cuts: Vec<usize> = (0..rng.usize(1..60))
                .map(|_| rng.usize(0..=TWO_TOOLS.len()))
                .collect();
            cuts.sort_unstable();
            assert_eq!(
                parse_cut(TWO_TOOLS, &cuts).await.unwrap(),
                whole,
                "cuts {cuts:?}"
            );
        }
    }

    #[tokio::test]
    async fn crlf_line_endings_split_anywhere() {
        let text = TWO_TOOLS.replace('\n', "\r\n");
        let whole = parse(TWO_TOOLS).await.unwrap();
        for cut in 0..=text.len() {
            assert_eq!(
                parse_cut(&text, &[cut]).await.unwrap(),
                whole,
                "cut at {cut}"
            );
        }
    }

    #[tokio::test]
    async fn message_delta_may_carry_input_numbers_and_no_cache_means_none() {
        let text = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":0}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"input_tokens\":7,\"output_tokens\":3}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let r = parse(text).await.unwrap();
        assert_eq!(r.text.as_deref(), Some("Hi"));
        assert_eq!(r.finish_reason.as_deref(), Some("end_turn"));
        assert_eq!(
            r.usage,
            Some(Usage {
                input_tokens: 7,
                output_tokens: 3,
                total_tokens: 10,
                cache_read_tokens: None,
                cache_write_tokens: None,
                unreported: Default::default(),
            })
        );
    }

    #[tokio::test]
    async fn error_event_mid_stream() {
        let cut = TWO_TOOLS.find("event: content_block_start").unwrap();
        let text = format!(
            "{}event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}}}\n\n",
            &TWO_TOOLS[..cut]
        );
        // Overloaded is the server's trouble: a dropped stream, retried.
        assert_eq!(
            parse(&text).await,
            Err(ModelError::Dropped {
                provider: "anthropic".into(),
                message: "Overloaded".into()
            })
        );
        let invalid = text.replace("overloaded_error", "invalid_request_error");
        assert!(matches!(
            parse(&invalid).await,
            Err(ModelError::Stream { .. })
        ));
    }

    #[tokio::test]
    async fn malformed_json_is_a_stream_error() {
        let text = "event: message_start\ndata: {\"type\":\"message_start\",\n\n";
        match parse(text).await {
            Err(ModelError::Stream { message, .. }) => {
                assert!(
                    message.starts_with("malformed JSON in a `message_start` event"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn eof_before_message_stop_is_an_error() {
        let cut = TWO_TOOLS.find("event: message_stop").unwrap();
        assert_eq!(
            parse(&TWO_TOOLS[..cut]).await,
            Err(ModelError::Dropped {
                provider: "anthropic".into(),
                message: "stream ended before the response was complete".into()
            })
        );
    }

    #[test]
    fn non_streamed_message_parses_too() {
        let body = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x",
            "content":[{"type":"text","text":"Checking."},
                       {"type":"tool_use","id":"toolu_A","name":"ls","input":{"path":"."}}],
            "stop_reason":"tool_use","usage":{"input_tokens":10,"cache_read_input_tokens":0,"output_tokens":4}}"#;
        let r = http::parse_json_answer::<AnthropicAssembler>(body, PROVIDER).unwrap();
        assert_eq!(r.text.as_deref(), Some("Checking."));
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].arguments, json!({"path": "."}));
        assert_eq!(r.finish_reason.as_deref(), Some("tool_use"));
        assert_eq!(
            r.usage,
            Some(Usage {
                input_tokens: 10,
                output_tokens: 4,
                total_tokens: 14,
                cache_read_tokens: Some(0),
                cache_write_tokens: None,
                unreported: Default::default(),
            })
        );
        let err = http::parse_json_answer::<AnthropicAssembler>(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            PROVIDER,
        );
        assert_eq!(
            err,
            Err(ModelError::Stream {
                provider: "anthropic".into(),
                message: "Overloaded".into()
            })
        );
    }

    /// Blocks count toward the size limit whatever they hold: thousands of empty ones, or
    /// start objects carrying large fields, are refused like too much text.
    #[tokio::test]
    async fn block_slots_and_start_objects_are_bounded_by_the_size_limit() {
        let too_large = "anthropic stream error: the response is too large (over 32 MiB of \
                         text and tool-call arguments)";
        let start = |index: usize, block: Value| {
            let data =
                json!({"type": "content_block_start", "index": index, "content_block": block});
            format!("event: content_block_start\ndata: {data}\n\n")
        };
        let empty: String = (0..300_000)
            .map(|i| start(i * 7, json!({"type": "server_tool_use"})))
            .collect();
        let err = parse(&empty).await.unwrap_err();
        assert_eq!(err.to_string(), too_large);
        let filler = "x".repeat(1 << 20);
        let large: String = (0..40)
            .map(|i| {
                let input = json!({"note": filler});
                start(
                    i,
                    json!({"type": "tool_use", "id": "t", "name": "ls", "input": input}),
                )
            })
            .collect();
        assert_eq!(parse(&large).await.unwrap_err().to_string(), too_large);
    }

    #[tokio::test]
    async fn a_response_over_32_mib_is_a_stream_error() {
        let start = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\
                     \"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
        let delta = format!(
            "event: content_block_delta\ndata: {}\n\n",
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": "b".repeat(1 << 20)}})
        );
        let body = format!("{start}{}", delta.repeat(33));
        let err = parse_cut(&body, &[]).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "anthropic stream error: the response is too large (over 32 MiB of text and \
             tool-call arguments)"
        );
    }
}
