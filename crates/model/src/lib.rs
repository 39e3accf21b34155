//! The `ChatModel` trait and the provider-neutral message types every provider maps to.
//!
//! Providers stream internally (SSE) but hand the agent loop one assembled
//! [`ModelResponse`] per call: events are per response, not per token.

// Events are the only output channel: nothing prints to stdout but the event writer,
// the human view and the plain-text commands, all through one explicit writer each.
#![deny(clippy::print_stdout)]
// stderr too: `eprintln!` panics on a closed stderr, which must change no exit code (§12).
#![cfg_attr(not(test), deny(clippy::print_stderr))]

pub mod error_text;
pub mod http;
pub mod image;
pub mod named;
pub mod output_schema;
pub mod providers;
pub mod rate;
pub mod registry;
pub mod retry;
pub mod sse;
#[cfg(any(test, feature = "testing"))]
pub mod test_support;
pub mod tool_args;

/// Connection settings are resolved by `config`, which stays a leaf: it does not know
/// the clients, only what they need.
pub use deerflow_config::HttpSettings;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use tool_args::{CallExtra, ToolArgs};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One message of a conversation, provider-neutral.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    User(String),
    Assistant {
        text: Option<String>,
        tool_calls: Vec<ToolCall>,
        /// What the provider needs back with this message on later requests.
        reasoning: Reasoning,
    },
    Tool {
        call_id: String,
        name: String,
        content: String,
    },
    /// Images the model is shown with the message before them (contract §14): the result
    /// of the tool call `call_id` (`view_image`; they follow the results of their response's
    /// calls), or, with `None`, the user's task (`--image`). Each provider renders them in
    /// its own form; they never reach events or cassettes.
    Images {
        call_id: Option<String>,
        images: Vec<image::Image>,
    },
}

/// What a provider sent beside the text and tool calls of a response that it needs back,
/// unchanged, with that assistant message on the agent's later requests. Providers that
/// send none leave it empty; each provider reads back only the part it wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reasoning {
    /// Reasoning text, as OpenAI-compatible servers stream it in `reasoning_content`.
    pub text: Option<String>,
    /// Whole provider blocks as raw JSON, in response order: Anthropic `thinking` (with its
    /// `signature`) and `redacted_thinking` blocks.
    pub blocks: Vec<Value>,
}

/// A tool call as the model made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments; `{}` when the model sent none or sent broken JSON.
    pub arguments: ToolArgs,
    /// The raw argument text when it was not valid JSON (the tool then answers with an error
    /// instead of running, and the raw text is what goes back to the provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_arguments: Option<String>,
    /// Fields of the call the provider added beyond id, name and arguments, sent back
    /// unchanged on the call (Gemini's `extra_content.google.thought_signature` through
    /// its OpenAI-compatible API).
    #[serde(default, skip_serializing_if = "CallExtra::is_empty")]
    pub extra: CallExtra,
}

impl ToolCall {
    /// A call with well-formed arguments.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<ToolArgs>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
            invalid_arguments: None,
            extra: CallExtra::default(),
        }
    }

    /// Builds a call from the argument text a provider streamed.
    pub fn from_raw(id: String, name: String, raw: &str) -> Self {
        let (arguments, invalid_arguments) = if raw.trim().is_empty() {
            (ToolArgs::empty(), None)
        } else {
            match ToolArgs::parse(raw) {
                Some(a) => (a, None),
                None => (ToolArgs::empty(), Some(raw.to_string())),
            }
        };
        Self {
            id,
            name,
            arguments,
            invalid_arguments,
            extra: CallExtra::default(),
        }
    }

    /// The argument text to send back to a provider in the transcript.
    pub fn arguments_text(&self) -> &str {
        match &self.invalid_arguments {
            Some(raw) => raw,
            None => self.arguments.as_str(),
        }
    }
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the parameters object.
    pub parameters: Value,
}

/// Token usage of one model response, as the provider reported it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Every prompt token, cached ones included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// The cached part of `input_tokens`, when the provider says.
    pub cache_read_tokens: Option<u64>,
    /// The part of `input_tokens` written to the provider's prompt cache (Anthropic's
    /// `cache_creation_input_tokens`), billed at its own price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Which counts the provider did not report as a non-negative integer: 0 above (they
    /// add nothing to totals and budgets), `null` in the `usage` event (contract §12).
    #[serde(skip)]
    pub unreported: Unreported,
}

/// The counts of a [`Usage`] the provider left out or gave as no non-negative integer.
/// The total is never among them: it is at least the sum of the counts that were given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unreported {
    pub input: bool,
    pub output: bool,
}

impl Usage {
    /// Usage as a provider reported it. The total is `input + output` when the provider
    /// gave none or one smaller than that sum: a budget must not be evaded by a provider that
    /// reports `total_tokens: 0` (contract §12).
    pub fn reported(input: u64, output: u64, total: Option<u64>, cache_read: Option<u64>) -> Self {
        let sum = input.saturating_add(output);
        Self {
            input_tokens: input,
            output_tokens: output,
            total_tokens: total.filter(|t| *t >= sum).unwrap_or(sum),
            cache_read_tokens: cache_read,
            cache_write_tokens: None,
            unreported: Unreported::default(),
        }
    }

    /// Usage from the counts a provider gave, each `None` when it was absent or not a
    /// non-negative integer (see [`count`]); `None` when not one of input, output and total
    /// was given: a usage object with no valid field is no report (contract §12).
    pub fn from_counts(
        input: Option<u64>,
        output: Option<u64>,
        total: Option<u64>,
        cache_read: Option<u64>,
    ) -> Option<Self> {
        if input.is_none() && output.is_none() && total.is_none() {
            return None;
        }
        Some(Self {
            unreported: Unreported {
                input: input.is_none(),
                output: output.is_none(),
            },
            ..Self::reported(input.unwrap_or(0), output.unwrap_or(0), total, cache_read)
        })
    }

    /// The input count as reported, `None` when the provider gave none.
    pub fn input(&self) -> Option<u64> {
        (!self.unreported.input).then_some(self.input_tokens)
    }

    /// The output count as reported, `None` when the provider gave none.
    pub fn output(&self) -> Option<u64> {
        (!self.unreported.output).then_some(self.output_tokens)
    }
}

/// Deserializes a token count leniently: anything but a non-negative integer (a negative
/// number, a fraction, a string) is "not reported" for that field, never a failed response.
pub fn count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1.8e19)
                .map(|f| f as u64)
        }),
        _ => None,
    })
}

/// One assembled model response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelResponse {
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    /// `None` when the provider reported no usage.
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    /// Goes into the assistant message, for the provider's later requests.
    pub reasoning: Reasoning,
}

/// Why a response ended, as far as the agent loop cares (contract §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopKind {
    /// A natural end, tool calls, or a reason deerflow does not know.
    Normal,
    /// Cut at the output limit: OpenAI `length`, Anthropic `max_tokens`.
    OutputLimit,
    /// Stopped for safety: OpenAI `content_filter`, Anthropic `refusal`, Gemini `SAFETY`, …
    ContentFilter,
}

impl ModelResponse {
    /// The stop kind under the built-in rules.
    pub fn stop_kind(&self) -> StopKind {
        StopRules::default().kind(self.finish_reason.as_deref())
    }
}

/// Which finish reasons mean what: the built-in names of each provider, with DeerFlow's
/// `safety_finish_reason` section applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopRules {
    /// Safety stops are detected (`safety_finish_reason.enabled`).
    pub safety: bool,
    /// Finish reasons besides the built-in ones that mean a safety stop, lowercase
    /// (the detectors' `finish_reasons`).
    pub extra_safety: Vec<String>,
}

impl Default for StopRules {
    fn default() -> Self {
        Self {
            safety: true,
            extra_safety: Vec::new(),
        }
    }
}

/// Safety stops: OpenAI-compatible `content_filter`, Anthropic `refusal`, Gemini's
/// safety reasons (DeerFlow's built-in detector set).
const SAFETY_STOPS: &[&str] = &[
    "content_filter",
    "refusal",
    "safety",
    "blocklist",
    "prohibited_content",
    "spii",
    "recitation",
    // Gemini's image safety stops (`providers::gemini::SAFETY_REASONS`).
    "image_safety",
    "image_prohibited_content",
    "image_recitation",
];

/// Output-limit stops: OpenAI `length`, Anthropic `max_tokens` (and
/// `model_context_window_exceeded`, the output cut by the context window), Gemini
/// `MAX_TOKENS`, the Responses API's `max_output_tokens`.
const OUTPUT_LIMIT_STOPS: &[&str] = &[
    "length",
    "max_tokens",
    "max_output_tokens",
    "model_context_window_exceeded",
];

impl StopRules {
    pub fn from_config(section: &deerflow_config::SafetyFinishReasonConfig) -> Self {
        Self {
            safety: section.enabled,
            extra_safety: section.extra_finish_reasons(),
        }
    }

    pub fn kind(&self, finish_reason: Option<&str>) -> StopKind {
        let Some(reason) = finish_reason else {
            return StopKind::Normal;
        };
        let reason = reason.trim().to_ascii_lowercase();
        if OUTPUT_LIMIT_STOPS.contains(&reason.as_str()) {
            return StopKind::OutputLimit;
        }
        let safety = SAFETY_STOPS.contains(&reason.as_str()) || self.extra_safety.contains(&reason);
        if self.safety && safety {
            StopKind::ContentFilter
        } else {
            StopKind::Normal
        }
    }
}

/// Which agent makes a call; replay cassettes script per agent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AgentId {
    Lead,
    /// A sub-agent, keyed by its task description (and its unique task id).
    Task {
        description: String,
        task_id: String,
    },
}

impl std::fmt::Display for AgentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgentId::Lead => write!(f, "lead"),
            AgentId::Task { description, .. } => write!(f, "task '{description}'"),
        }
    }
}

/// Everything one model call needs. The prompt, history and tools are shared with the
/// agent that sends them (`Arc`), so a turn does not copy the conversation.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub system: Arc<str>,
    pub messages: Arc<Vec<Message>>,
    pub tools: Arc<[ToolSpec]>,
    /// Ask for a final answer: tools are listed (for the transcript's sake) but not callable.
    pub tool_choice_none: bool,
    pub agent: AgentId,
    /// 0-based index of this call among the agent's calls.
    pub turn: usize,
    /// The schema the answer must satisfy (`--output-schema`, the lead only). Providers
    /// with a native structured-output mode send it; the others rely on the system prompt,
    /// which states it in every case.
    pub output_schema: Option<Arc<output_schema::OutputSchema>>,
    pub purpose: CallPurpose,
    /// Names the history `messages` come from, for providers that keep the wire form of the
    /// messages they sent (issue 13: re-serializing the whole history was most of a request's
    /// cost). Under one lineage a message, once sent, never changes: later requests only add
    /// messages after it (`agent::History` starts a new lineage when that would not hold).
    /// `None`: a one-off request, written whole.
    pub lineage: Option<Lineage>,
}

/// See [`ChatRequest::lineage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lineage(u64);

impl Lineage {
    /// A lineage no other history of this process has had.
    pub fn fresh() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Lineage(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

/// Why a model call is made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CallPurpose {
    /// One of the agent's turns.
    #[default]
    Turn,
    /// A summary of the agent's older history (compaction): not a turn, so a replay
    /// cassette's script is not used up by it and `--record` leaves it out.
    Summary,
}

/// A retry the provider layer is about to make (becomes a `model_retry` warning).
#[derive(Debug, Clone, PartialEq)]
pub struct RetryNotice {
    pub attempt: u32,
    pub delay_ms: u64,
    /// HTTP status, `None` for a connection error.
    pub status: Option<u16>,
    pub message: String,
}

/// Per-call context: cancellation, a way to report retries and rate limiting, and the
/// gate each attempt passes (set by `rate::RateLimited`, read by the retry loop).
#[derive(Clone)]
pub struct CallContext {
    pub cancel: CancellationToken,
    pub on_retry: Arc<dyn Fn(RetryNotice) + Send + Sync>,
    /// A 429 made the model's limiter halve its concurrency (a `rate_limited` warning).
    pub on_rate_limited: Arc<dyn Fn(rate::RateNotice) + Send + Sync>,
    pub gate: Option<Arc<dyn rate::AttemptGate>>,
}

impl CallContext {
    pub fn new(cancel: CancellationToken) -> Self {
        Self {
            cancel,
            on_retry: Arc::new(|_| {}),
            on_rate_limited: Arc::new(|_| {}),
            gate: None,
        }
    }
}

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ModelError {
    /// The provider answered with an HTTP error status.
    #[error("{provider} returned HTTP {status}: {message}")]
    Http {
        provider: String,
        status: u16,
        message: String,
        /// Seconds the server asked us to wait (`Retry-After`).
        retry_after: Option<f64>,
    },
    #[error("cannot reach {provider}: {message}")]
    Connect { provider: String, message: String },
    /// A stream that broke off before its response was whole (the connection lost, silence
    /// past `stream_idle_timeout`, the end before the last event, a provider's overloaded
    /// event). Nothing of that response reached anyone yet, so it is retried like a
    /// connection error (contract §2).
    #[error("{provider} stream dropped: {message}")]
    Dropped { provider: String, message: String },
    /// A request deerflow will not make: a redirect to another origin (it would carry the
    /// key and the conversation there). Never retried.
    #[error("{provider} request refused: {message}")]
    Refused { provider: String, message: String },
    #[error("{provider} request timed out: {message}")]
    Timeout { provider: String, message: String },
    /// A malformed or interrupted stream, or an error event inside it.
    #[error("{provider} stream error: {message}")]
    Stream { provider: String, message: String },
    /// A replay cassette error, or a scripted failure.
    #[error("{0}")]
    Script(String),
    #[error("model call cancelled")]
    Cancelled,
}

impl ModelError {
    /// Whether a retry may help: 408/409/429/5xx and connection failures.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Http { status, .. } => matches!(status, 408 | 409 | 429) || *status >= 500,
            ModelError::Connect { .. } | ModelError::Dropped { .. } => true,
            _ => false,
        }
    }

    /// Whether the provider refused the request because its prompt does not fit the
    /// model's context (then compacting the history and asking again can help). Providers
    /// say so in a 400 (413 for some gateways) or in an error event inside the stream:
    /// OpenAI `context_length_exceeded` ("maximum context length is …", also vLLM and
    /// DeepSeek), Anthropic "prompt is too long", llama.cpp "exceeds the available context
    /// size", and "… context window" from the Responses API and others.
    pub fn is_context_overflow(&self) -> bool {
        let message = match self {
            ModelError::Http {
                status: 400 | 413 | 422,
                message,
                ..
            } => message,
            ModelError::Stream { message, .. } => message,
            _ => return false,
        };
        let m = message.to_ascii_lowercase();
        const SAYINGS: &[&str] = &[
            "context_length_exceeded",
            "maximum context length",
            "prompt is too long",
            "exceeds the available context size",
            "exceed_context_size",
            "exceeds the context window",
            "exceeds the model's context window",
            "input exceeds the context window",
            "context window exceeded",
            // Ollama.
            "exceeds the context length",
            // Gemini's OpenAI-compatible endpoint.
            "exceeds the maximum number of tokens allowed",
            // Groq and OpenAI put the code beside a message that says only this.
            "reduce the length of the messages",
        ];
        SAYINGS.iter().any(|s| m.contains(s))
    }
}

/// What a model can take, as configured (context policies read it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelLimits {
    /// Prompt + completion capacity in tokens.
    pub context_window: Option<u64>,
    /// The output limit sent with each request.
    pub max_output_tokens: Option<u64>,
}

/// A chat model. One call = one assembled response; retries happen inside.
pub trait ChatModel: Send + Sync {
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>>;

    /// The model's capacity; unknown unless its configuration says.
    fn limits(&self) -> ModelLimits {
        ModelLimits::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, message: &str) -> ModelError {
        ModelError::Http {
            provider: "p".into(),
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The llama.cpp 400 recorded in tests/fixtures, as the provider reads its body.
    const LLAMA: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/llama-server/error_context_overflow.txt"
    ));

    #[test]
    fn context_overflow_is_recognised_from_what_providers_say() {
        let body = LLAMA.split("\r\n\r\n").nth(1).unwrap();
        let llama = error_text::error_body_message(body);
        assert!(http(400, &llama).is_context_overflow(), "{llama}");
        for m in [
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130567 tokens. Please reduce the length of the messages.",
            "context_length_exceeded",
            "prompt is too long: 215304 tokens > 200000 maximum",
            "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "the input length exceeds the context length",
            "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            "Please reduce the length of the messages or completion.",
        ] {
            assert!(http(400, m).is_context_overflow(), "{m}");
        }
        let stream = ModelError::Stream {
            provider: "anthropic".into(),
            message: "invalid_request_error: prompt is too long: 9 tokens > 8 maximum".into(),
        };
        assert!(stream.is_context_overflow());
    }

    #[test]
    fn stop_kinds_of_what_providers_say() {
        let kind = |reason: Option<&str>| {
            ModelResponse {
                finish_reason: reason.map(str::to_string),
                ..Default::default()
            }
            .stop_kind()
        };
        for r in ["length", "max_tokens", "MAX_TOKENS"] {
            assert_eq!(kind(Some(r)), StopKind::OutputLimit, "{r}");
        }
        for r in [
            "content_filter",
            "refusal",
            "SAFETY",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
            "SPII",
            "RECITATION",
        ] {
            assert_eq!(kind(Some(r)), StopKind::ContentFilter, "{r}");
        }
        assert_eq!(
            kind(Some("model_context_window_exceeded")),
            StopKind::OutputLimit
        );
        for r in [
            None,
            Some("stop"),
            Some("tool_calls"),
            Some("end_turn"),
            Some("tool_use"),
        ] {
            assert_eq!(kind(r), StopKind::Normal, "{r:?}");
        }
    }

    #[test]
    fn deerflow_s_safety_section_adds_reasons_or_turns_safety_stops_off() {
        use deerflow_config::{SafetyDetector, SafetyDetectorConfig, SafetyFinishReasonConfig};
        let detector = |class: &str, reasons: &[&str]| SafetyDetector {
            use_: format!("deerflow.agents.middlewares.safety_termination_detectors:{class}"),
            config: SafetyDetectorConfig {
                finish_reasons: reasons.iter().map(|r| r.to_string()).collect(),
            },
        };
        let section = SafetyFinishReasonConfig {
            enabled: true,
            detectors: Some(vec![
                detector(
                    "OpenAICompatibleContentFilterDetector",
                    &["content_filter", " Sensitive ", "risk_control"],
                ),
                detector("AnthropicRefusalDetector", &[]),
                // A class deerflow does not have: its reasons are not used.
                detector("WenxinSafetyDetector", &["wenxin_block"]),
            ]),
        };
        let rules = StopRules::from_config(&section);
        assert_eq!(
            rules.extra_safety,
            ["content_filter", "sensitive", "risk_control"]
        );
        for r in [
            "sensitive",
            "RISK_CONTROL",
            "refusal",
            "SAFETY",
            "content_filter",
        ] {
            assert_eq!(rules.kind(Some(r)), StopKind::ContentFilter, "{r}");
        }
        assert_eq!(rules.kind(Some("wenxin_block")), StopKind::Normal);
        assert_eq!(rules.kind(Some("sensitive")), StopKind::ContentFilter);
        assert_eq!(
            StopRules::default().kind(Some("sensitive")),
            StopKind::Normal
        );
        // `enabled: false`: no safety stop at all; the output limit still counts.
        let off = StopRules::from_config(&SafetyFinishReasonConfig {
            enabled: false,
            ..section
        });
        for r in ["sensitive", "refusal", "content_filter"] {
            assert_eq!(off.kind(Some(r)), StopKind::Normal, "{r}");
        }
        assert_eq!(off.kind(Some("length")), StopKind::OutputLimit);
    }

    #[test]
    fn other_errors_are_not_overflows() {
        let unsupported = "Unsupported parameter: 'stop' is not supported with this model.";
        assert!(!http(400, unsupported).is_context_overflow());
        // A rate limit on tokens per minute is not about the context.
        assert!(!http(
            429,
            "Request too large: too many tokens per min; maximum context length"
        )
        .is_context_overflow());
        assert!(!http(500, "prompt is too long").is_context_overflow());
        assert!(!ModelError::Script("prompt is too long".into()).is_context_overflow());
        assert!(!ModelError::Cancelled.is_context_overflow());
    }

    #[test]
    fn clients_report_the_configured_context_window() {
        use deerflow_config::{load_with, resolve_model_with, Env, LoadOptions};
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("c.json"), r#"{"version": 1}"#).unwrap();
        let file = dir.path().join("config.yaml");
        std::fs::write(
            &file,
            "models:\n\
             - {name: o, use: openai, model: x, base_url: 'http://127.0.0.1:1/v1', context_window: 4096, max_tokens: 512}\n\
             - {name: a, use: anthropic, model: y, base_url: 'http://127.0.0.1:1', context_window: 200000}\n\
             - {name: r, use: replay, cassette: c.json, context_window: 1000}\n\
             - {name: n, use: openai, model: z, base_url: 'http://127.0.0.1:1/v1'}\n",
        )
        .unwrap();
        let opts = LoadOptions {
            explicit: Some(file),
            sets: Vec::new(),
            cwd: dir.path().to_path_buf(),
            providers: registry::providers(),
            mcp_configs: Vec::new(),
            model: None,
        };
        let loaded = load_with(&opts, &Env::empty()).unwrap();
        let limits = |name: &str| {
            let r = resolve_model_with(&loaded, name, dir.path(), &Env::empty()).unwrap();
            registry::build(&r).unwrap().limits()
        };
        let l = |w, out| ModelLimits {
            context_window: w,
            max_output_tokens: out,
        };
        assert_eq!(limits("o"), l(Some(4096), Some(512)));
        // Anthropic requires an output limit: the family default when unset.
        assert_eq!(limits("a"), l(Some(200_000), Some(32_000)));
        assert_eq!(limits("r"), l(Some(1000), None));
        assert_eq!(limits("n"), l(None, None));
        // `--record` wraps a client without hiding its limits.
        let r = resolve_model_with(&loaded, "r", dir.path(), &Env::empty()).unwrap();
        let rec =
            providers::replay::Recorder::new(registry::build(&r).unwrap(), Default::default());
        assert_eq!(rec.limits(), l(Some(1000), None));
    }
}
