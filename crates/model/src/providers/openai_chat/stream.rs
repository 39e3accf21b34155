//! Assembling the chunks of a streamed chat completion into one response.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use eventsource_stream::Event;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::PROVIDER;
use crate::count;
use crate::error_text::{clip, dropped, json_error_message, stream_error};
use crate::http::{self, json_bytes, Assembler, SLOT_BYTES};
use crate::sse::Flow;
use crate::{ModelError, ModelResponse, Reasoning, ToolCall, Usage};

/// One `data:` chunk. Every field is optional: compatible servers differ in what they send.
#[derive(Debug, Deserialize)]
struct Chunk {
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    index: Option<u64>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    content: Option<String>,
    /// DeepSeek, Qwen, llama.cpp, vLLM: the reasoning text, which goes back on the
    /// assistant message.
    reasoning_content: Option<String>,
    /// OpenRouter, Groq and newer vLLM spell it `reasoning`.
    reasoning: Option<String>,
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Deserialize)]
struct ToolCallDelta {
    index: Option<u64>,
    id: Option<String>,
    /// Always `function`; deerflow writes it itself, so it is not an extra field.
    #[serde(rename = "type")]
    _type: Option<IgnoredAny>,
    function: Option<FunctionDelta>,
    /// Anything else the server put on the call (Gemini's `extra_content` with its
    /// `thought_signature`): sent back unchanged on the call.
    #[serde(flatten)]
    extra: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    /// A string of JSON as the API says, or (some gateways) the JSON object itself.
    arguments: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default, deserialize_with = "count")]
    prompt_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    completion_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    total_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Debug, Deserialize)]
struct PromptDetails {
    #[serde(default, deserialize_with = "count")]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
    extra: Map<String, Value>,
}

/// Assembles the chunks of one streamed chat completion.
#[derive(Debug, Default)]
pub struct OpenAiAssembler {
    text: String,
    reasoning: String,
    /// Tool calls by their stream `index`, which orders them.
    calls: BTreeMap<u64, PartialCall>,
    /// The index of the call a delta without `index` continues.
    last_call: Option<u64>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    /// Bytes of text, reasoning and arguments so far (the response size limit).
    kept: usize,
}

impl Assembler for OpenAiAssembler {
    fn on_event(&mut self, event: &Event) -> Result<Flow, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(Flow::Done);
        }
        if event.event == "error" {
            return Err(stream_error(PROVIDER, stream_error_text(data)));
        }
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        let chunk: Chunk = http::event_json(data, PROVIDER, "a stream chunk")?;
        self.take_chunk(chunk)?;
        Ok(Flow::Continue)
    }

    fn finish(self, ended: Flow) -> Result<ModelResponse, ModelError> {
        // Some servers close without `[DONE]`; a finish_reason shows the answer is whole.
        if ended == Flow::Continue && self.finish_reason.is_none() {
            return Err(dropped(
                PROVIDER,
                "stream ended before the response was complete",
            ));
        }
        let tool_calls = self
            .calls
            .into_values()
            .map(|c| ToolCall {
                extra: c.extra.into(),
                ..ToolCall::from_raw(c.id, c.name, &c.arguments)
            })
            .collect();
        Ok(ModelResponse {
            text: (!self.text.is_empty()).then_some(self.text),
            tool_calls,
            usage: self.usage,
            finish_reason: self.finish_reason,
            reasoning: Reasoning {
                text: (!self.reasoning.is_empty()).then_some(self.reasoning),
                blocks: Vec::new(),
            },
        })
    }

    fn from_json(value: &Value) -> Result<ModelResponse, ModelError> {
        // A `chat.completion` reads as one chunk whose choices carry `message`, not `delta`.
        let mut chunk = value.clone();
        let Some(choices) = chunk.get_mut("choices").and_then(Value::as_array_mut) else {
            return Err(stream_error(
                PROVIDER,
                format!("unexpected JSON answer: {}", excerpt(&value.to_string())),
            ));
        };
        for choice in choices.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(message) = choice.remove("message") {
                choice.insert("delta".into(), message);
            }
        }
        let chunk: Chunk = serde_json::from_value(chunk)
            .map_err(|e| stream_error(PROVIDER, format!("unexpected JSON answer ({e})")))?;
        let mut assembler = Self::default();
        assembler.take_chunk(chunk)?;
        assembler.finish(Flow::Done)
    }

    fn kept_bytes(&self) -> usize {
        self.kept
    }
}

impl OpenAiAssembler {
    fn take_chunk(&mut self, chunk: Chunk) -> Result<(), ModelError> {
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            let message = json_error_message(&json!({ "error": error }))
                .unwrap_or_else(|| "error event".into());
            // An error after the finish_reason restates why the answer ended (OpenRouter
            // sends "Token limit reached" after `length`, with the usage): the answer is
            // whole, and its stop reason says what happened.
            if self.finish_reason.is_none() {
                return Err(stream_error(PROVIDER, message));
            }
            deerflow_base::logging::debug(&format!(
                "{PROVIDER}: error chunk after the finish_reason, kept as the end: {message}"
            ));
        }
        if let Some(usage) = chunk.usage {
            self.usage = convert_usage(&usage);
        }
        // Only the first choice: deerflow never asks for `n > 1`.
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) == 0 {
                self.take_choice(choice);
            }
        }
        Ok(())
    }

    fn take_choice(&mut self, choice: Choice) {
        if let Some(reason) = choice.finish_reason {
            self.finish_reason = Some(reason);
        }
        let Some(delta) = choice.delta else { return };
        if let Some(text) = delta.content {
            self.kept += text.len();
            self.text.push_str(&text);
        }
        if let Some(reasoning) = delta.reasoning_content.or(delta.reasoning) {
            self.kept += reasoning.len();
            self.reasoning.push_str(&reasoning);
        }
        for call in delta.tool_calls.unwrap_or_default() {
            self.take_call_delta(call);
        }
    }

    fn take_call_delta(&mut self, delta: ToolCallDelta) {
        // Servers that omit `index` start a call with an `id` and continue it without one.
        let index = match (delta.index, &delta.id, self.last_call) {
            (Some(i), _, _) => i,
            (None, None, Some(last)) if !starts_a_call(&delta, self.calls.get(&last)) => last,
            (None, _, _) => self
                .calls
                .keys()
                .next_back()
                .map_or(0, |k| k.saturating_add(1)),
        };
        self.last_call = Some(index);
        // A slot counts toward the size limit even empty: a hostile stream could name
        // thousands of indexes, or any index up to u64::MAX, without a byte of arguments.
        let call = match self.calls.entry(index) {
            Entry::Occupied(slot) => slot.into_mut(),
            Entry::Vacant(slot) => {
                self.kept += SLOT_BYTES;
                slot.insert(PartialCall::default())
            }
        };
        if let Some(id) = delta.id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        // A later delta's value wins; `null`s say nothing and are not kept. Every value
        // counts toward the size limit as it comes, replaced or not.
        for (key, value) in delta.extra.into_iter().filter(|(_, v)| !v.is_null()) {
            self.kept += key.len() + json_bytes(&value);
            call.extra.insert(key, value);
        }
        let Some(function) = delta.function else {
            return;
        };
        if let Some(name) = function.name.filter(|n| !n.is_empty()) {
            // The name normally comes once; servers that repeat it must not double it.
            if call.name != name {
                call.name.push_str(&name);
            }
        }
        let arguments = match function.arguments {
            Some(Value::String(text)) => text,
            Some(Value::Null) | None => String::new(),
            Some(object) => object.to_string(),
        };
        self.kept += arguments.len();
        call.arguments.push_str(&arguments);
    }
}

/// A delta with neither `index` nor `id` continues the last call, unless it names a tool
/// while the last call already has a whole name and arguments: then it is the next call (a
/// server that numbers nothing sends each call whole), not more of the same one.
fn starts_a_call(delta: &ToolCallDelta, last: Option<&PartialCall>) -> bool {
    let named = delta
        .function
        .as_ref()
        .and_then(|f| f.name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let Some(last) = last else { return false };
    named
        && !last.name.is_empty()
        && serde_json::from_str::<Value>(last.arguments.trim()).is_ok_and(|v| v.is_object())
}

fn convert_usage(usage: &WireUsage) -> Option<Usage> {
    Usage::from_counts(
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.total_tokens,
        usage
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens),
    )
}

fn stream_error_text(data: &str) -> String {
    serde_json::from_str::<Value>(data)
        .ok()
        .and_then(|v| json_error_message(&v))
        .unwrap_or_else(|| excerpt(data))
}

/// A bad chunk as quoted in an error message.
fn excerpt(data: &str) -> String {
    clip(data, 200)
}

#[cfg(test)]
mod tests {

    use super::super::test_data::{ECHO, USAGE};
    use super::*;
    use crate::http;
    use crate::test_support::usage;

    const NOUSAGE: &str = fixture!("chat_stream_nousage.sse.txt");
    const FOLLOWUP: &str = fixture!("tool_result_followup.sse.txt");
    const ARGS: &str = fixture!("toolcall_args_stream.sse.txt");

    async fn parse_cut(text: &str, cuts: &[usize]) -> Result<ModelResponse, ModelError> {
        crate::test_support::assemble_cut::<OpenAiAssembler>(text, cuts, PROVIDER).await
    }

    async fn parse(text: &str) -> Result<ModelResponse, ModelError> {
        parse_cut(text, &[]).await
    }

    #[tokio::test]
    async fn text_answer_with_usage() {
        let r = parse(USAGE).await.unwrap();
        assert_eq!(r.text.as_deref(), Some("I'm glad you're here!"));
        assert!(r.tool_calls.is_empty());
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
        assert_eq!(r.usage, usage(38, 8, 46, Some(5)));
    }

    #[tokio::test]
    async fn text_answer_without_usage() {
        let r = parse(NOUSAGE).await.unwrap();
        assert_eq!(
            r.text.as_deref(),
            Some("I'm glad you're here. I'm glad you're here. What can")
        );
        assert!(r.tool_calls.is_empty());
        assert_eq!(r.finish_reason.as_deref(), Some("length"));
        assert_eq!(r.usage, None);
    }

    #[tokio::test]
    async fn tool_result_followup_text() {
        let r = parse(FOLLOWUP).await.unwrap();
        assert_eq!(
            r.text.as_deref(),
            Some("<tool_response>\n12:34\n</tool_response>")
        );
        assert!(r.tool_calls.is_empty());
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
        assert_eq!(r.usage, usage(238, 18, 256, Some(174)));
    }

    #[tokio::test]
    async fn tool_call_with_fragmented_arguments() {
        let r = parse(ARGS).await.unwrap();
        assert_eq!(r.text, None);
        assert_eq!(
            r.tool_calls,
            vec![ToolCall {
                id: "CI14PD3wfNqhlR5idWlW7fYaLyNXikDw".into(),
                name: "read_file".into(),
                arguments: json!({"path": "src/main.rs"}).into(),
                invalid_arguments: None,
                extra: Default::default(),
            }]
        );
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(r.usage, usage(239, 35, 274, Some(76)));
    }

    #[tokio::test]
    async fn tool_call_without_arguments() {
        let r = parse(ECHO).await.unwrap();
        assert_eq!(r.text, None);
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].id, "HKIG0oOYmg5tdF8nmwDrcoeGs4YuJ6uG");
        assert_eq!(r.tool_calls[0].name, "get_time");
        assert_eq!(r.tool_calls[0].arguments, json!({}));
        assert_eq!(r.tool_calls[0].arguments_text(), "{}");
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(r.usage, usage(216, 26, 242, Some(215)));
    }

    #[tokio::test]
    async fn every_split_point_gives_the_same_response() {
        for text in [ECHO, USAGE] {
            let whole = parse(text).await.unwrap();
            for cut in 0..=text.len() {
                assert_eq!(
                    parse_cut(text, &[cut]).await.unwrap(),
                    whole,
                    "cut at {cut}"
                );
            }
        }
        for text in [ARGS, NOUSAGE, FOLLOWUP] {
            let whole = parse(text).await.unwrap();
            let mut rng = fastrand::Rng::with_seed(7);
            for _ in 0..200 {
                let mut cuts: Vec<usize> = (0..rng.usize(1..40))
                    .map(|_| rng.usize(0..=text.len()))
                    .collect();
                cuts.sort_unstable();
                assert_eq!(
                    parse_cut(text, &cuts).await.unwrap(),
                    whole,
                    "cuts {cuts:?}"
                );
            }
        }
    }

    /// Any split of a real llama-server stream into chunks (LF or CRLF line endings)
    /// assembles into the same response as the whole stream.
    #[test]
    fn any_chunking_of_a_capture_assembles_the_same() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};

        macro_rules! capture {
            ($name:literal) => {
                include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../../tests/fixtures/llama-server/",
                    $name
                ))
            };
        }
        let captures = [
            capture!("toolcall_args_stream.sse.txt"),
            capture!("toolcall_echo_stream.sse.txt"),
            capture!("chat_stream_usage.sse.txt"),
            capture!("chat_stream_nousage.sse.txt"),
            capture!("tool_result_followup.sse.txt"),
        ];
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let wholes: Vec<ModelResponse> = captures
            .iter()
            .map(|c| rt.block_on(parse(c)).unwrap())
            .collect();
        let strategy = (
            0..captures.len(),
            any::<bool>(),
            proptest::collection::vec(any::<proptest::sample::Index>(), 0..64),
        );
        let mut runner = TestRunner::new(Config {
            cases: 256,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&strategy, |(which, crlf, cuts)| {
                let text = if crlf {
                    captures[which].replace('\n', "\r\n")
                } else {
                    captures[which].to_string()
                };
                let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(text.len() + 1)).collect();
                cuts.sort_unstable();
                let got = rt.block_on(parse_cut(&text, &cuts));
                prop_assert_eq!(got.as_ref(), Ok(&wholes[which]), "cuts {:?}", cuts);
                Ok(())
            })
            .unwrap();
    }

    #[tokio::test]
    async fn crlf_line_endings_split_anywhere() {
        let text = ARGS.replace('\n', "\r\n");
        let whole = parse(ARGS).await.unwrap();
        for cut in 0..=text.len() {
            assert_eq!(
                parse_cut(&text, &[cut]).await.unwrap(),
                whole,
                "cut at {cut}"
            );
        }
    }

    #[tokio::test]
    async fn several_tool_calls_by_index_and_null_content() {
        let text = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[",
            "{\"index\":0,\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"\"}},",
            "{\"index\":1,\"id\":\"b\",\"type\":\"function\",\"function\":{\"name\":\"grep\",\"arguments\":\"{\\\"pat\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"tern\\\": \\\"x\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{not json\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let r = parse(text).await.unwrap();
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(
            (r.tool_calls[0].id.as_str(), r.tool_calls[0].name.as_str()),
            ("a", "ls")
        );
        assert_eq!(
            r.tool_calls[0].invalid_arguments.as_deref(),
            Some("{not json")
        );
        assert_eq!(
            (r.tool_calls[1].id.as_str(), r.tool_calls[1].name.as_str()),
            ("b", "grep")
        );
        assert_eq!(r.tool_calls[1].arguments, json!({"pattern": "x"}));
        assert_eq!(r.usage, None);
    }

    #[tokio::test]
    async fn unnumbered_whole_calls_stay_separate_and_object_arguments_are_accepted() {
        let text = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[",
            "{\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[",
            "{\"function\":{\"name\":\"glob\",\"arguments\":{\"pattern\":\"*.rs\"}}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let r = parse(text).await.unwrap();
        let names: Vec<&str> = r.tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["ls", "glob"]);
        assert_eq!(r.tool_calls[1].arguments, json!({"pattern": "*.rs"}));
        assert_eq!(r.tool_calls[0].invalid_arguments, None);
    }

    #[tokio::test]
    async fn odd_usage_numbers_are_unreported_fields_and_a_low_total_is_the_sum() {
        let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}],\
                    \"usage\":{\"prompt_tokens\":-3,\"completion_tokens\":2.5,\"total_tokens\":0,\
                    \"prompt_tokens_details\":{\"cached_tokens\":\"many\"}}}\n\ndata: [DONE]\n\n";
        let r = parse(text).await.unwrap();
        // The total is the one valid count: input and output are unreported, not 0.
        let u = r.usage.unwrap();
        assert_eq!((u.input(), u.output(), u.total_tokens), (None, None, 0));
        assert_eq!(u.cache_read_tokens, None);
        // No valid count at all: no usage reported.
        let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}],\
                    \"usage\":{\"prompt_tokens\":-5,\"completion_tokens\":\"x\",\"total_tokens\":null}}\n\ndata: [DONE]\n\n";
        assert_eq!(parse(text).await.unwrap().usage, None);
        let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}],\
                    \"usage\":{\"prompt_tokens\":-5,\"completion_tokens\":7}}\n\ndata: [DONE]\n\n";
        let u = parse(text).await.unwrap().usage.unwrap();
        assert_eq!((u.input(), u.output(), u.total_tokens), (None, Some(7), 7));
        let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}],\
                    \"usage\":{\"prompt_tokens\":30,\"completion_tokens\":20.0,\"total_tokens\":1}}\n\ndata: [DONE]\n\n";
        let r = parse(text).await.unwrap();
        assert_eq!(r.usage, usage(30, 20, 50, None));
    }

    #[tokio::test]
    async fn usage_without_total_or_cache_details() {
        let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}],\
                    \"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
        let r = parse(text).await.unwrap();
        assert_eq!(r.usage, usage(3, 2, 5, None));
    }

    /// The recorded OpenRouter stream: reasoning, `length` twice, then an in-band error
    /// chunk carrying the usage (the fixtures' README).
    #[tokio::test]
    async fn an_error_chunk_after_the_finish_reason_keeps_the_answer() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/providers/openrouter/length_then_inline_error.sse"
        ));
        let r = parse(text).await.unwrap();
        assert_eq!(r.finish_reason.as_deref(), Some("length"));
        assert_eq!(r.stop_kind(), crate::StopKind::OutputLimit);
        assert_eq!(r.text, None);
        assert_eq!(
            r.reasoning.text.as_deref(),
            Some("We need to respond to a greeting. The user")
        );
        assert_eq!(r.usage, usage(43, 10, 53, Some(0)));
        // Before any finish_reason the same chunk is the stream's failure.
        let cut = text.find("\"finish_reason\":\"length\"").unwrap();
        let start = text[..cut].rfind("data: ").unwrap();
        let error = text.rfind("data: {\"id\"").unwrap();
        let early = format!("{}{}", &text[..start], &text[error..]);
        match parse(&early).await {
            Err(ModelError::Stream { message, .. }) => {
                assert!(message.contains("Token limit reached"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    /// The recorded stream of a server that spent the whole output limit on reasoning.
    #[tokio::test]
    async fn a_length_stop_with_only_hidden_reasoning() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/providers/openai/chat_length_all_reasoning.sse"
        ));
        let r = parse(text).await.unwrap();
        assert_eq!(r.finish_reason.as_deref(), Some("length"));
        assert_eq!(r.text, None);
        assert!(r.tool_calls.is_empty());
        assert_eq!(
            r.usage.map(|u| (u.input_tokens, u.output_tokens)),
            Some((13, 50))
        );
    }

    /// vLLM's recorded `length` stop: no usage chunk, the extra `stop_reason` ignored.
    #[tokio::test]
    async fn a_vllm_length_stop_keeps_its_text() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/providers/vllm/chat_length.sse"
        ));
        let r = parse(text).await.unwrap();
        assert_eq!(r.finish_reason.as_deref(), Some("length"));
        assert_eq!(r.stop_kind(), crate::StopKind::OutputLimit);
        assert!(!r.text.unwrap_or_default().is_empty());
        assert_eq!(r.usage, None);
    }

    /// Azure's recorded tool call: the filter annotations are no stop, the call is whole.
    #[tokio::test]
    async fn azure_filter_results_are_no_safety_stop() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/providers/azure-openai/chat_tool_call_filter_results.sse"
        ));
        let r = parse(text).await.unwrap();
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(r.stop_kind(), crate::StopKind::Normal);
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].id, "call_A6XpaIHt5uNwiDqVxyvKoXMa");
        assert_eq!(r.tool_calls[0].name, "get_current_temperature");
        assert_eq!(r.tool_calls[0].arguments, json!({"city": "San Francisco"}));
        assert_eq!(r.usage, usage(66, 17, 83, Some(0)));
    }

    #[tokio::test]
    async fn error_object_inside_the_stream() {
        let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n\
                    data: {\"error\":{\"message\":\"model overloaded\",\"type\":\"server_error\"}}\n\n";
        assert_eq!(
            parse(text).await,
            Err(ModelError::Stream {
                provider: "openai".into(),
                message: "model overloaded".into()
            })
        );
    }

    #[tokio::test]
    async fn malformed_json_is_a_stream_error() {
        let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\": [\n\n";
        match parse(text).await {
            Err(ModelError::Stream { message, .. }) => {
                assert!(
                    message.starts_with("malformed JSON in a stream chunk"),
                    "{message}"
                );
                assert!(message.contains("{\"choices\": ["), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn eof_without_done_or_finish_reason_is_an_error() {
        let cut = USAGE
            .find("data: {\"choices\":[{\"finish_reason\":\"stop\"")
            .unwrap();
        assert_eq!(
            parse(&USAGE[..cut]).await,
            Err(ModelError::Dropped {
                provider: "openai".into(),
                message: "stream ended before the response was complete".into()
            })
        );
        // A finish_reason without [DONE] is a whole answer.
        let cut = USAGE.find("data: [DONE]").unwrap();
        assert_eq!(
            parse(&USAGE[..cut]).await.unwrap().text.as_deref(),
            Some("I'm glad you're here!")
        );
        assert!(parse("").await.is_err());
    }

    #[test]
    fn non_streamed_answers_parse_too() {
        let parse_json = |body: &str| http::parse_json_answer::<OpenAiAssembler>(body, PROVIDER);
        let r = parse_json(fixture!("chat_nonstream.json.txt")).unwrap();
        assert_eq!(r.text.as_deref(), Some("Hello, hello, hello!"));
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
        assert_eq!(r.usage, usage(26, 7, 33, Some(0)));

        let r = parse_json(fixture!("toolcall_echo_nonstream.json.txt")).unwrap();
        assert_eq!(r.text, None);
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].id, "ynMPZLuIAmkcbWRWT9jhDpmjMAeSapTR");
        assert_eq!(r.tool_calls[0].name, "get_time");
        assert_eq!(r.tool_calls[0].arguments, json!({}));
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(r.usage, usage(216, 26, 242, Some(174)));

        let r = parse_json(fixture!("tools_nonstream.json.txt")).unwrap();
        assert!(r
            .text
            .as_deref()
            .unwrap()
            .starts_with("You can use the get_time tool"));
        assert!(r
            .text
            .as_deref()
            .unwrap()
            .ends_with("You can also use the get"));
        assert_eq!(r.finish_reason.as_deref(), Some("length"));
        assert_eq!(r.usage, usage(192, 128, 320, Some(21)));

        assert_eq!(
            parse_json(r#"{"error":{"message":"nope"}}"#),
            Err(ModelError::Stream {
                provider: "openai".into(),
                message: "nope".into()
            })
        );
        assert!(parse_json("{\"id\": 1}").is_err());
        assert!(parse_json("not json").is_err());
    }

    /// `count` chunks of `piece`-sized content or tool-call arguments, then `[DONE]`.
    fn big_stream(count: usize, piece: usize, as_arguments: bool) -> String {
        let filler = "a".repeat(piece);
        let delta = if as_arguments {
            json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "x", "arguments": filler}}]})
        } else {
            json!({ "content": filler })
        };
        let event = format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": delta}]})
        );
        format!("{}data: [DONE]\n\n", event.repeat(count))
    }

    /// Empty call slots and extra fields count toward the size limit too: a stream naming
    /// hundreds of thousands of indexes, or piling up extra fields, is refused like one of
    /// too much text.
    #[tokio::test]
    async fn call_slots_and_extra_fields_are_bounded_by_the_size_limit() {
        let too_large = "openai stream error: the response is too large (over 32 MiB of text \
                         and tool-call arguments)";
        let slots: Vec<Value> = (0..300_000u64)
            .map(|i| json!({"index": i * 3_000}))
            .collect();
        let many = format!(
            "data: {}\n\ndata: [DONE]\n\n",
            json!({"choices": [{"index": 0, "delta": {"tool_calls": slots}}]})
        );
        assert_eq!(parse(&many).await.unwrap_err().to_string(), too_large);
        let filler = "x".repeat(1 << 20);
        let extras: String = (0..40)
            .map(|i| {
                let call = json!({"index": 0, "id": "c", "function": {"name": "ls"},
                                  format!("x_field_{i}"): filler});
                let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]});
                format!("data: {chunk}\n\n")
            })
            .collect();
        let err = parse(&format!("{extras}data: [DONE]\n\n"))
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), too_large);
        // The largest index, then a call without one: no overflow.
        let text = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[",
            "{\"index\":18446744073709551615,\"id\":\"a\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}},",
            "{\"id\":\"b\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]},",
            "\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
        );
        assert!(!parse(text).await.unwrap().tool_calls.is_empty());
    }

    #[tokio::test]
    async fn a_response_over_32_mib_is_a_stream_error() {
        for as_arguments in [false, true] {
            let err = parse(&big_stream(33, 1 << 20, as_arguments))
                .await
                .unwrap_err();
            assert_eq!(
                err.to_string(),
                "openai stream error: the response is too large (over 32 MiB of text and \
                 tool-call arguments)"
            );
        }
        let ok = parse(&big_stream(3, 1 << 20, false)).await.unwrap();
        assert_eq!(ok.text.map(|t| t.len()), Some(3 << 20));
    }
}
