//! The scripting vocabulary: a `Rule` decides which requests it answers and how often, a
//! `Reply` describes what is sent back and with which timing faults.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::gate::Gate;
use super::RecordedRequest;

type Matcher = Arc<dyn Fn(&RecordedRequest) -> bool + Send + Sync>;

/// One scripted answer: requests accepted by the matcher get `reply`, at most `times` times.
#[derive(Clone)]
pub struct Rule {
    matcher: Matcher,
    /// `None` means unlimited (`.always()`).
    remaining: Option<usize>,
    pub(crate) reply: Option<Reply>,
}

impl Rule {
    /// Matches every request.
    pub fn any() -> Self {
        Self::when(|_| true)
    }

    /// Matches requests whose raw (undecoded) body contains `needle`.
    pub fn body_contains(needle: impl Into<String>) -> Self {
        let needle = needle.into();
        Self::when(move |req| req.raw_body.contains(&needle))
    }

    /// Matches requests whose path (including any query string) contains `needle`.
    pub fn path_contains(needle: impl Into<String>) -> Self {
        let needle = needle.into();
        Self::when(move |req| req.path.contains(&needle))
    }

    /// Matches requests accepted by an arbitrary predicate.
    pub fn when(pred: impl Fn(&RecordedRequest) -> bool + Send + Sync + 'static) -> Self {
        Rule {
            matcher: Arc::new(pred),
            remaining: Some(1),
            reply: None,
        }
    }

    /// Answer at most `n` matching requests (default 1).
    pub fn times(mut self, n: usize) -> Self {
        self.remaining = Some(n);
        self
    }

    /// Answer every matching request, never running out.
    pub fn always(mut self) -> Self {
        self.remaining = None;
        self
    }

    /// What to send back.
    pub fn reply(mut self, reply: Reply) -> Self {
        self.reply = Some(reply);
        self
    }

    /// Whether this rule still has uses left and accepts `req`.
    pub(crate) fn accepts(&self, req: &RecordedRequest) -> bool {
        self.remaining != Some(0) && (self.matcher)(req)
    }

    /// Uses the rule up once (unlimited rules never run out).
    pub(crate) fn consume(&mut self) {
        if let Some(n) = self.remaining.as_mut() {
            *n = n.saturating_sub(1);
        }
    }

    /// Whether a finite rule has answers left that no request has taken yet.
    pub(crate) fn is_unused(&self) -> bool {
        matches!(self.remaining, Some(n) if n > 0)
    }
}

/// A tool call to script: (id, name, arguments).
pub type Call = (String, String, Value);

/// Converts the tuple forms tests like to write into owned calls.
pub(crate) fn own_calls<I: Into<String>, N: Into<String>>(calls: Vec<(I, N, Value)>) -> Vec<Call> {
    calls
        .into_iter()
        .map(|(id, name, args)| (id.into(), name.into(), args))
        .collect()
}

#[derive(Clone, Debug)]
pub(crate) enum Body {
    /// OpenAI Chat Completions SSE.
    OpenAi {
        text: Option<String>,
        calls: Vec<Call>,
    },
    /// Anthropic Messages SSE.
    Anthropic {
        text: Option<String>,
        calls: Vec<Call>,
    },
    /// Anthropic `message_start` followed by an `error` event.
    AnthropicError { kind: String, message: String },
    /// OpenAI Responses API SSE (see `responses.rs`).
    Responses(super::responses::ResponsesBody),
    /// Gemini `streamGenerateContent?alt=sse` (see `gemini.rs`).
    Gemini(super::gemini::GeminiReply),
    /// SSE chunks written verbatim.
    RawSse(Vec<String>),
    /// A plain response with a `Content-Length` body.
    Status {
        code: u16,
        body: String,
        content_type: String,
    },
}

/// What the server sends back, plus timing and failure injection.
#[derive(Clone, Debug)]
pub struct Reply {
    pub(crate) body: Body,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) usage: Option<(u64, u64)>,
    pub(crate) cached: Option<u64>,
    pub(crate) cache_creation: Option<u64>,
    pub(crate) delay: Duration,
    pub(crate) body_delay: Duration,
    pub(crate) chunk_delay: Duration,
    pub(crate) gate: Option<Gate>,
    pub(crate) cut: Option<Cut>,
}

/// How a stream is cut short after some chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cut {
    /// Clean close (FIN): the client sees an early EOF.
    Disconnect(usize),
    /// Abortive close (RST): the client sees a connection-reset error.
    Reset(usize),
    /// Keep the socket open and silent until the client gives up.
    Stall(usize),
}

impl Cut {
    pub(crate) fn after(self) -> usize {
        match self {
            Cut::Disconnect(n) | Cut::Reset(n) | Cut::Stall(n) => n,
        }
    }
}

impl Reply {
    fn new(body: Body) -> Self {
        Reply {
            body,
            headers: Vec::new(),
            usage: None,
            cached: None,
            cache_creation: None,
            delay: Duration::ZERO,
            body_delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            gate: None,
            cut: None,
        }
    }

    /// A reply of this body with no faults (the provider files' constructors use it).
    pub(crate) fn from_body(body: Body) -> Self {
        Self::new(body)
    }

    /// OpenAI SSE: a text answer, `finish_reason: "stop"`.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(Body::OpenAi {
            text: Some(text.into()),
            calls: Vec::new(),
        })
    }

    /// OpenAI SSE: tool calls `(id, name, arguments)`, `finish_reason: "tool_calls"`.
    pub fn tool_calls<I: Into<String>, N: Into<String>>(calls: Vec<(I, N, Value)>) -> Self {
        Self::new(Body::OpenAi {
            text: None,
            calls: own_calls(calls),
        })
    }

    /// OpenAI SSE: some text followed by tool calls in the same response.
    pub fn text_and_tools<I: Into<String>, N: Into<String>>(
        text: impl Into<String>,
        calls: Vec<(I, N, Value)>,
    ) -> Self {
        Self::new(Body::OpenAi {
            text: Some(text.into()),
            calls: own_calls(calls),
        })
    }

    /// Anthropic SSE: a text answer, `stop_reason: "end_turn"`.
    pub fn anthropic_text(text: impl Into<String>) -> Self {
        Self::new(Body::Anthropic {
            text: Some(text.into()),
            calls: Vec::new(),
        })
    }

    /// Anthropic SSE: `tool_use` blocks `(id, name, input)`, `stop_reason: "tool_use"`.
    pub fn anthropic_tool_uses<I: Into<String>, N: Into<String>>(
        calls: Vec<(I, N, Value)>,
    ) -> Self {
        Self::new(Body::Anthropic {
            text: None,
            calls: own_calls(calls),
        })
    }

    /// Anthropic SSE: a text block followed by `tool_use` blocks.
    pub fn anthropic_text_and_tools<I: Into<String>, N: Into<String>>(
        text: impl Into<String>,
        calls: Vec<(I, N, Value)>,
    ) -> Self {
        Self::new(Body::Anthropic {
            text: Some(text.into()),
            calls: own_calls(calls),
        })
    }

    /// Anthropic SSE: `message_start`, then `event: error` with this error type and message.
    pub fn anthropic_error_event(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(Body::AnthropicError {
            kind: kind.into(),
            message: message.into(),
        })
    }

    /// SSE chunks written verbatim (include the `data: ` prefix and `\n\n` yourself).
    pub fn raw_sse<S: Into<String>>(chunks: Vec<S>) -> Self {
        Self::new(Body::RawSse(chunks.into_iter().map(Into::into).collect()))
    }

    /// A non-streamed response with this status; JSON content type and a generic error body
    /// unless `.body()` / `.html_body()` say otherwise.
    pub fn status(code: u16) -> Self {
        let body = format!(r#"{{"error":{{"message":"mock status {code}"}}}}"#);
        let content_type = "application/json".to_string();
        Self::new(Body::Status {
            code,
            body,
            content_type,
        })
    }

    /// A 200 response with a JSON body (e.g. a non-streamed completion).
    pub fn json(value: Value) -> Self {
        Self::status(200).body(value.to_string())
    }

    /// Sets the body of a `status` reply (keeps its content type).
    pub fn body(mut self, text: impl Into<String>) -> Self {
        match &mut self.body {
            Body::Status { body, .. } => *body = text.into(),
            other => panic!("mock: .body() only applies to Reply::status, not {other:?}"),
        }
        self
    }

    /// Sets an HTML body (`content-type: text/html`), like a proxy's error page.
    pub fn html_body(mut self, text: impl Into<String>) -> Self {
        self = self.body(text);
        if let Body::Status { content_type, .. } = &mut self.body {
            *content_type = "text/html; charset=utf-8".to_string();
        }
        self
    }

    /// Adds a response header (any reply type).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Reported token usage: `input` prompt tokens, `output` completion tokens. OpenAI replies
    /// send a usage chunk only when this is set.
    pub fn usage(mut self, input: u64, output: u64) -> Self {
        self.usage = Some((input, output));
        self
    }

    /// OpenAI `prompt_tokens_details.cached_tokens` (also Anthropic cache-read tokens).
    pub fn cached(mut self, n: u64) -> Self {
        self.cached = Some(n);
        self
    }

    /// Anthropic `cache_read_input_tokens` / `cache_creation_input_tokens`.
    pub fn cache(mut self, read: u64, creation: u64) -> Self {
        self.cached = Some(read);
        self.cache_creation = Some(creation);
        self
    }

    /// Waits this long before sending the response headers.
    pub fn delay_ms(mut self, ms: u64) -> Self {
        self.delay = Duration::from_millis(ms);
        self
    }

    /// Sends the headers at once, then waits this long before the first SSE chunk (a
    /// server reading a long prompt, as llama.cpp does).
    pub fn body_delay_ms(mut self, ms: u64) -> Self {
        self.body_delay = Duration::from_millis(ms);
        self
    }

    /// Waits this long between consecutive SSE chunks.
    pub fn chunk_delay_ms(mut self, ms: u64) -> Self {
        self.chunk_delay = Duration::from_millis(ms);
        self
    }

    /// Blocks before the response headers until the gate is opened.
    pub fn wait_for(mut self, gate: &Gate) -> Self {
        self.gate = Some(gate.clone());
        self
    }

    /// Sends `n` chunks, then closes the socket cleanly (early EOF, no `[DONE]`).
    pub fn disconnect_after_chunks(mut self, n: usize) -> Self {
        self.cut = Some(Cut::Disconnect(n));
        self
    }

    /// Sends `n` chunks, then resets the connection (the client gets a read error).
    pub fn reset_after_chunks(mut self, n: usize) -> Self {
        self.cut = Some(Cut::Reset(n));
        self
    }

    /// Sends `n` chunks, then keeps the socket open and silent until the client closes it.
    pub fn stall_after_chunks(mut self, n: usize) -> Self {
        self.cut = Some(Cut::Stall(n));
        self
    }
}
