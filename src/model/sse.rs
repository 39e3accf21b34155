//! What both HTTP providers share: the HTTP client, one streamed attempt (send, map error
//! statuses, read the SSE body under the idle and request timeouts), the retry wrapper,
//! error-message extraction from error bodies, and turning transport errors into
//! [`ModelError`]s. The provider modules only build request bodies and assemble events.

use std::error::Error as StdError;
use std::time::{Duration, SystemTime};

use eventsource_stream::{Event, Eventsource};
use futures_util::{Stream, StreamExt};
use serde_json::Value;

use super::retry::{parse_retry_after, with_retries, RetryPolicy};
use super::{CallContext, HttpSettings, ModelError, ModelResponse};

/// Whether the assembler has seen the provider's end-of-response marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Done,
}

/// Turns a provider's SSE events into one [`ModelResponse`].
pub trait Assembler: Default {
    /// Takes one event; `Flow::Done` stops reading (the end marker arrived).
    fn on_event(&mut self, event: &Event) -> Result<Flow, ModelError>;
    /// Builds the response once the stream ended: `ended` is `Flow::Done` after the end
    /// marker and `Flow::Continue` on a plain EOF (which may or may not be complete).
    fn finish(self, ended: Flow) -> Result<ModelResponse, ModelError>;
    /// Builds the response from a whole JSON answer: some compatible servers ignore
    /// `stream: true` and answer `application/json`.
    fn from_json(value: &Value) -> Result<ModelResponse, ModelError>;
    /// Text and tool-call argument bytes assembled so far, for [`MAX_RESPONSE_BYTES`].
    fn kept_bytes(&self) -> usize;
}

/// Parses a non-streamed JSON answer; an `error` object in it is a stream error.
pub fn parse_json_answer<A: Assembler>(
    body: &str,
    provider: &str,
) -> Result<ModelResponse, ModelError> {
    let value: Value = serde_json::from_str(body).map_err(|e| {
        stream_error(
            provider,
            format!("malformed JSON answer ({e}): {}", clip(body.trim(), 200)),
        )
    })?;
    if value.get("error").is_some_and(|e| !e.is_null()) {
        let message = json_error_message(&value).unwrap_or_default();
        return Err(stream_error(provider, message));
    }
    A::from_json(&value)
}

/// Reads an SSE byte stream into a response. Generic over the byte stream so tests can
/// feed fixture bytes split at arbitrary points.
pub async fn assemble<A, S, B, E>(
    body: S,
    idle: Duration,
    provider: &str,
) -> Result<ModelResponse, ModelError>
where
    A: Assembler,
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: StdError + 'static,
{
    let mut assembler = A::default();
    let ended = read_events(body, idle, provider, |event| {
        let flow = assembler.on_event(event)?;
        if assembler.kept_bytes() > MAX_RESPONSE_BYTES {
            return Err(stream_error(
                provider,
                "the response is too large (over 32 MiB of text and tool-call arguments)",
            ));
        }
        Ok(flow)
    })
    .await?;
    assembler.finish(ended)
}

/// The longest SSE line, and the most bytes between two blank lines (one event), deerflow
/// buffers: a server that never ends its line or event must not grow memory without bound.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// The most text plus tool-call argument bytes one response may assemble.
pub const MAX_RESPONSE_BYTES: usize = 32 << 20;

/// Feeds every event of `body` to `on_event` until it says `Done` or the stream ends.
/// No byte for `idle` fails with `ModelError::Timeout`; a line or event longer than
/// [`MAX_LINE_BYTES`] fails with `ModelError::Stream`.
pub async fn read_events<S, B, E, F>(
    body: S,
    idle: Duration,
    provider: &str,
    mut on_event: F,
) -> Result<Flow, ModelError>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: StdError + 'static,
    F: FnMut(&Event) -> Result<Flow, ModelError>,
{
    let events = guard_body(body, idle, provider).eventsource();
    futures_util::pin_mut!(events);
    while let Some(next) = events.next().await {
        let event = next.map_err(|err| event_stream_error(provider, err))?;
        if on_event(&event)? == Flow::Done {
            return Ok(Flow::Done);
        }
    }
    Ok(Flow::Continue)
}

/// What the guarded body yields instead of the transport's own error.
#[derive(Debug)]
enum BodyError<E> {
    Transport(E),
    /// The guard's own verdict (idle timeout, line too long), passed through as is.
    Model(ModelError),
}

impl<E: std::fmt::Display> std::fmt::Display for BodyError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Transport(e) => e.fmt(f),
            BodyError::Model(e) => e.fmt(f),
        }
    }
}

impl<E: StdError> StdError for BodyError<E> {}

/// The raw body cut into whole lines, under the idle timeout and the line limit.
///
/// Two things live here rather than around the parsed events: the idle timeout, because
/// SSE comments (`: keepalive`) are traffic but yield no event; and the line cut, because
/// `eventsource-stream` rescans its whole buffer on every chunk, which is quadratic in the
/// length of a line that arrives in many chunks. Fed whole lines, it parses each once.
fn guard_body<S, B, E>(
    body: S,
    idle: Duration,
    provider: &str,
) -> impl Stream<Item = Result<Vec<u8>, BodyError<E>>>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
{
    let guard = BodyGuard {
        body: Box::pin(body),
        lines: LineSplitter::new(MAX_LINE_BYTES),
        idle,
        provider: provider.to_string(),
        done: false,
    };
    futures_util::stream::unfold(guard, |mut guard| async move {
        let item = guard.next_line().await?;
        Some((item, guard))
    })
}

struct BodyGuard<S> {
    body: std::pin::Pin<Box<S>>,
    lines: LineSplitter,
    idle: Duration,
    provider: String,
    /// The body ended or failed: nothing more is read.
    done: bool,
}

impl<S, B, E> BodyGuard<S>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
{
    async fn next_line(&mut self) -> Option<Result<Vec<u8>, BodyError<E>>> {
        loop {
            if let Some(line) = self.lines.pop() {
                return Some(self.checked_utf8(line));
            }
            if self.done {
                return None;
            }
            let next = tokio::time::timeout(self.idle, self.body.next()).await;
            let failure = match next {
                Err(_) => BodyError::Model(idle_timeout(&self.provider, self.idle)),
                Ok(Some(Ok(bytes))) => match self.lines.push(bytes.as_ref()) {
                    Ok(()) => continue,
                    Err(message) => BodyError::Model(stream_error(&self.provider, message)),
                },
                Ok(Some(Err(err))) => BodyError::Transport(err),
                Ok(None) => {
                    self.done = true;
                    return self.lines.finish().map(|rest| self.checked_utf8(rest));
                }
            };
            self.done = true;
            return Some(Err(failure));
        }
    }

    /// Lines are cut at ASCII bytes, so each one on its own must be valid UTF-8. Checking
    /// here also keeps `eventsource-stream` from buffering the rest of the stream behind
    /// an invalid byte, waiting for it to become valid.
    fn checked_utf8(&mut self, line: Vec<u8>) -> Result<Vec<u8>, BodyError<E>> {
        match std::str::from_utf8(&line) {
            Ok(_) => Ok(line),
            Err(e) => {
                self.done = true;
                self.lines = LineSplitter::default();
                let message = format!("the stream is not valid UTF-8: {e}");
                Err(BodyError::Model(stream_error(&self.provider, message)))
            }
        }
    }
}

/// Cuts bytes into SSE lines (ended by `\n`, `\r\n` or a lone `\r`), counting the length
/// of the current line and of the current event (bytes since the last blank line) in
/// one pass over each chunk.
#[derive(Debug, Default)]
struct LineSplitter {
    limit: usize,
    /// The current line, terminator included once seen.
    partial: Vec<u8>,
    /// Whole lines not handed on yet.
    ready: std::collections::VecDeque<Vec<u8>>,
    /// The current line ended with `\r`: a `\n` next belongs to it.
    after_cr: bool,
    /// Content bytes (terminator excluded) of the current line.
    line_bytes: usize,
    /// Content bytes since the last blank line.
    event_bytes: usize,
}

impl LineSplitter {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    fn pop(&mut self) -> Option<Vec<u8>> {
        self.ready.pop_front()
    }

    /// The unterminated rest at the end of the stream, if any.
    fn finish(&mut self) -> Option<Vec<u8>> {
        self.after_cr = false;
        (!self.partial.is_empty()).then(|| std::mem::take(&mut self.partial))
    }

    fn push(&mut self, mut chunk: &[u8]) -> Result<(), &'static str> {
        while !chunk.is_empty() {
            if self.after_cr {
                // `\r` ended the line; only now is it known whether `\n` completes `\r\n`.
                self.after_cr = false;
                if chunk[0] == b'\n' {
                    self.partial.push(b'\n');
                    chunk = &chunk[1..];
                }
                self.hand_on();
                continue;
            }
            let end = chunk.iter().position(|&b| b == b'\n' || b == b'\r');
            let content = end.unwrap_or(chunk.len());
            self.count(content)?;
            let Some(at) = end else {
                self.partial.extend_from_slice(chunk);
                return Ok(());
            };
            self.partial.extend_from_slice(&chunk[..=at]);
            self.end_line();
            if chunk[at] == b'\r' {
                self.after_cr = true;
            } else {
                self.hand_on();
            }
            chunk = &chunk[at + 1..];
        }
        Ok(())
    }

    fn count(&mut self, content: usize) -> Result<(), &'static str> {
        self.line_bytes += content;
        self.event_bytes += content;
        if self.line_bytes > self.limit {
            return Err("stream line longer than 16 MiB");
        }
        if self.event_bytes > self.limit {
            return Err("stream event longer than 16 MiB");
        }
        Ok(())
    }

    /// A line terminator: a blank line ends the event.
    fn end_line(&mut self) {
        if self.line_bytes == 0 {
            self.event_bytes = 0;
        }
        self.line_bytes = 0;
    }

    fn hand_on(&mut self) {
        self.ready.push_back(std::mem::take(&mut self.partial));
    }
}

fn event_stream_error<E: StdError + 'static>(
    provider: &str,
    err: eventsource_stream::EventStreamError<BodyError<E>>,
) -> ModelError {
    use eventsource_stream::EventStreamError as Ese;
    let message = match err {
        Ese::Transport(BodyError::Model(e)) => return e,
        Ese::Transport(BodyError::Transport(e)) => {
            format!("connection lost mid-stream: {}", error_chain(&e))
        }
        Ese::Utf8(e) => format!("the stream is not valid UTF-8: {e}"),
        Ese::Parser(e) => format!("the stream is not valid server-sent events: {e}"),
    };
    stream_error(provider, message)
}

pub fn stream_error(provider: &str, message: impl Into<String>) -> ModelError {
    ModelError::Stream {
        provider: provider.to_string(),
        message: message.into(),
    }
}

fn idle_timeout(provider: &str, idle: Duration) -> ModelError {
    ModelError::Timeout {
        provider: provider.to_string(),
        message: format!("no data for {} s (stream_idle_timeout)", fmt_secs(idle)),
    }
}

/// `120`, `0.5`: seconds as a person would write them.
pub fn fmt_secs(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0}")
    } else {
        let text = format!("{secs:.3}");
        text.trim_end_matches('0').to_string()
    }
}

/// An error and its sources, `: `-joined, skipping sources already quoted by their parent
/// (reqwest and hyper repeat themselves).
pub fn error_chain(err: &(dyn StdError + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

/// The JSON `{"error":{"message":…}}` / `{"error":"…"}` / `{"message":…}` message of a body.
pub fn json_error_message(value: &Value) -> Option<String> {
    let error = value.get("error");
    let text = match error {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Object(obj)) => match obj.get("message") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => Some(Value::Object(obj.clone()).to_string()),
        },
        _ => value
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string),
    }?;
    Some(clip(text.trim(), 1000))
}

/// What an HTTP error body says: its JSON error message, else a short plain-text excerpt
/// (HTML tags stripped, whitespace collapsed, at most 200 characters).
pub fn error_body_message(body: &str) -> String {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        if let Some(message) = json_error_message(&value) {
            return message;
        }
    }
    let text = collapse_whitespace(&strip_tags(body));
    clip(&text, 200)
}

/// Drops tags, and the contents of `<script>` and `<style>` elements (error pages of CDNs
/// and proxies carry kilobytes of them before the one sentence that matters).
fn strip_tags(text: &str) -> String {
    // ASCII lowercasing keeps byte offsets, so indices found in `lower` apply to `text`.
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    while let Some(offset) = text[rest..].find('<') {
        let start = rest + offset;
        out.push_str(&text[rest..start]);
        let Some(close) = text[start..].find('>') else {
            // An unterminated tag: nothing after it is text.
            return out;
        };
        rest = start + close + 1;
        let name: String = lower[start + 1..]
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        if name == "script" || name == "style" {
            let end_tag = format!("</{name}");
            rest = match lower[rest..].find(&end_tag) {
                Some(at) => {
                    let at = rest + at;
                    lower[at..].find('>').map_or(text.len(), |gt| at + gt + 1)
                }
                None => text.len(),
            };
        }
        // A space keeps `<td>a</td><td>b</td>` from gluing into `ab`.
        out.push(' ');
    }
    out.push_str(&text[rest..]);
    out
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Cuts `text` to `max` characters, marking the cut with `…`.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

/// Replaces the API key wherever it appears in an error's message: servers sometimes echo
/// request headers back, and error messages end up in logs and event streams.
pub fn redact(err: ModelError, api_key: Option<&str>) -> ModelError {
    let Some(key) = api_key.filter(|k| k.len() >= 4) else {
        return err;
    };
    let clean = |m: String| m.replace(key, "[redacted]");
    match err {
        ModelError::Http {
            provider,
            status,
            message,
            retry_after,
        } => ModelError::Http {
            provider,
            status,
            message: clean(message),
            retry_after,
        },
        ModelError::Connect { provider, message } => ModelError::Connect {
            provider,
            message: clean(message),
        },
        ModelError::Timeout { provider, message } => ModelError::Timeout {
            provider,
            message: clean(message),
        },
        ModelError::Stream { provider, message } => ModelError::Stream {
            provider,
            message: clean(message),
        },
        ModelError::Script(message) => ModelError::Script(clean(message)),
        ModelError::Cancelled => ModelError::Cancelled,
    }
}

/// The HTTP client of one provider instance. Only the connect timeout lives here: the
/// request and idle timeouts are applied per attempt so they produce clear errors.
pub fn build_client(
    settings: &HttpSettings,
    provider: &str,
) -> Result<reqwest::Client, ModelError> {
    reqwest::Client::builder()
        .connect_timeout(settings.connect_timeout)
        .build()
        .map_err(|e| ModelError::Connect {
            provider: provider.to_string(),
            message: format!("cannot set up the HTTP client: {}", error_chain(&e)),
        })
}

/// `base_url` + `path`, without a doubled `/`.
pub fn endpoint(base_url: &str, path: &str) -> String {
    format!("{}{}", base_url.trim_end_matches('/'), path)
}

/// One provider call: a JSON POST whose answer is an SSE stream, retried per the settings.
pub struct StreamCall<'a> {
    pub client: &'a reqwest::Client,
    pub settings: &'a HttpSettings,
    pub provider: &'static str,
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    /// The serialized request body, sent as is on every attempt.
    pub body: Vec<u8>,
}

impl StreamCall<'_> {
    /// Runs the call with retries; every error is redacted before anyone sees it.
    pub async fn run<A: Assembler>(&self, ctx: &CallContext) -> Result<ModelResponse, ModelError> {
        let policy = RetryPolicy::new(self.settings.max_retries);
        let key = self.settings.api_key.as_deref();
        with_retries(&policy, ctx, || async {
            self.attempt::<A>().await.map_err(|e| redact(e, key))
        })
        .await
    }

    /// One HTTP request, bounded as a whole by `request_timeout`.
    async fn attempt<A: Assembler>(&self) -> Result<ModelResponse, ModelError> {
        let idle = self.settings.stream_idle_timeout;
        let whole = async {
            let response = self.send().await?;
            if is_json(&response) {
                let body = read_success_body(response, idle, self.provider).await?;
                return parse_json_answer::<A>(&body, self.provider);
            }
            assemble::<A, _, _, _>(response.bytes_stream(), idle, self.provider).await
        };
        let limit = self.settings.request_timeout;
        tokio::time::timeout(limit, whole)
            .await
            .unwrap_or_else(|_| {
                Err(ModelError::Timeout {
                    provider: self.provider.to_string(),
                    message: format!("no complete response within {} s", fmt_secs(limit)),
                })
            })
    }

    /// Sends the request and returns the response once its status is a success.
    async fn send(&self) -> Result<reqwest::Response, ModelError> {
        let mut request = self.client.post(&self.url).body(self.body.clone());
        for (name, value) in &self.headers {
            request = request.header(*name, value);
        }
        let idle = self.settings.stream_idle_timeout;
        let response = tokio::time::timeout(idle, request.send())
            .await
            .map_err(|_| idle_timeout(self.provider, idle))?
            .map_err(|e| self.send_error(&e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(http_error(self.provider, response, idle).await)
    }

    /// A request that got no response at all: refused, reset, DNS, TLS, connect timeout.
    fn send_error(&self, err: &reqwest::Error) -> ModelError {
        let message = if err.is_timeout() {
            format!(
                "connection timed out after {} s",
                fmt_secs(self.settings.connect_timeout)
            )
        } else {
            root_causes(err)
        };
        ModelError::Connect {
            provider: self.provider.to_string(),
            message,
        }
    }
}

fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
}

/// Reads a whole successful (non-streamed) body under the idle timeout.
async fn read_success_body(
    mut response: reqwest::Response,
    idle: Duration,
    provider: &str,
) -> Result<String, ModelError> {
    const LIMIT: usize = 32 * 1024 * 1024;
    let mut body = Vec::new();
    loop {
        let chunk = tokio::time::timeout(idle, response.chunk())
            .await
            .map_err(|_| idle_timeout(provider, idle))?
            .map_err(|e| {
                stream_error(
                    provider,
                    format!("connection lost mid-response: {}", error_chain(&e)),
                )
            })?;
        match chunk {
            Some(chunk) => body.extend_from_slice(&chunk),
            None => break,
        }
        if body.len() > LIMIT {
            return Err(stream_error(provider, "the answer is larger than 32 MiB"));
        }
    }
    String::from_utf8(body).map_err(|_| stream_error(provider, "the answer is not valid UTF-8"))
}

/// `URL: tcp connect error: Connection refused (os error 111)`: the request's URL and the
/// causes under reqwest's and hyper's generic wrappers, which only repeat what failed.
fn root_causes(err: &reqwest::Error) -> String {
    let mut parts: Vec<String> = err.url().map(|u| u.to_string()).into_iter().collect();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.starts_with("client error (") && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    if parts.len() <= 1 {
        return error_chain(err);
    }
    parts.join(": ")
}

/// Reads an error response (bounded in size and time) into `ModelError::Http`.
async fn http_error(provider: &str, response: reqwest::Response, idle: Duration) -> ModelError {
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, SystemTime::now()));
    let body = read_error_body(response, idle).await;
    let mut message = error_body_message(&body);
    if message.is_empty() {
        message = status
            .canonical_reason()
            .unwrap_or("no details")
            .to_string();
    }
    ModelError::Http {
        provider: provider.to_string(),
        status: status.as_u16(),
        message,
        retry_after,
    }
}

/// Best effort: an error body that breaks off or never ends still yields what arrived.
async fn read_error_body(mut response: reqwest::Response, idle: Duration) -> String {
    const LIMIT: usize = 64 * 1024;
    let mut body = Vec::new();
    while body.len() < LIMIT {
        match tokio::time::timeout(idle, response.chunk()).await {
            Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Helpers shared by the provider tests: feeding bytes in chunks, and a tiny scripted
    //! HTTP responder on 127.0.0.1.

    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// `text` as a stream of byte chunks cut at `cuts` (sorted offsets).
    pub fn chunked(
        text: &str,
        cuts: &[usize],
    ) -> impl futures_util::Stream<Item = Result<Vec<u8>, Infallible>> {
        let bytes = text.as_bytes();
        let mut pieces = Vec::new();
        let mut start = 0;
        for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
            let cut = cut.clamp(start, bytes.len());
            pieces.push(Ok(bytes[start..cut].to_vec()));
            start = cut;
        }
        futures_util::stream::iter(pieces)
    }

    /// One canned HTTP response.
    pub struct Reply {
        pub status: u16,
        pub headers: Vec<(String, String)>,
        pub body: String,
    }

    impl Reply {
        pub fn sse(body: &str) -> Self {
            Self {
                status: 200,
                headers: vec![("Content-Type".into(), "text/event-stream".into())],
                body: body.to_string(),
            }
        }
        pub fn json(status: u16, body: &str) -> Self {
            Self {
                status,
                headers: vec![("Content-Type".into(), "application/json".into())],
                body: body.to_string(),
            }
        }
    }

    /// A captured request: head (request line + headers) and body.
    #[derive(Debug, Clone)]
    pub struct Captured {
        pub head: String,
        pub body: String,
    }

    /// Serves `replies` in order, one per connection, then stops accepting.
    /// Returns the base URL and the requests it saw.
    pub async fn serve(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<Captured>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            for reply in replies {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let captured = read_request(&mut socket).await;
                log.lock().unwrap().push(captured);
                let mut out = format!("HTTP/1.1 {} X\r\n", reply.status);
                for (k, v) in &reply.headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str(&format!(
                    "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
                    reply.body.len(),
                    reply.body
                ));
                let _ = socket.write_all(out.as_bytes()).await;
                let _ = socket.shutdown().await;
            }
        });
        (format!("http://{addr}"), seen)
    }

    async fn read_request(socket: &mut tokio::net::TcpStream) -> Captured {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = find(&buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                let len = content_length(&head);
                while buf.len() < end + 4 + len {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body = String::from_utf8_lossy(&buf[end + 4..]).to_string();
                return Captured { head, body };
            }
            let n = socket.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                return Captured {
                    head: String::from_utf8_lossy(&buf).to_string(),
                    body: String::new(),
                };
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
        hay.windows(needle.len()).position(|w| w == needle)
    }

    fn content_length(head: &str) -> usize {
        head.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::chunked;
    use super::*;

    const OVERFLOW: &str =
        include_str!("../../../shared/fixtures/llama-server/error_context_overflow.txt");

    #[test]
    fn extracts_json_error_messages() {
        assert_eq!(
            error_body_message(r#"{"error":{"message":"bad key","type":"x"}}"#),
            "bad key"
        );
        assert_eq!(
            error_body_message(r#"{"error":"overloaded"}"#),
            "overloaded"
        );
        assert_eq!(
            error_body_message(r#"{"message":"Forbidden"}"#),
            "Forbidden"
        );
        assert_eq!(
            error_body_message(r#"{"error":{"code":7}}"#),
            r#"{"code":7}"#
        );
    }

    #[test]
    fn the_context_overflow_capture_keeps_its_message() {
        let body = OVERFLOW.split("\r\n\r\n").nth(1).unwrap();
        let message = error_body_message(body);
        assert!(
            message.contains("exceeds the available context size"),
            "{message}"
        );
        assert_eq!(
            message,
            "request (6033 tokens) exceeds the available context size (4096 tokens), try increasing it"
        );
    }

    #[test]
    fn html_bodies_become_short_plain_text() {
        let html = "<html><head><title>502 Bad Gateway</title></head>\n<body>\n<center><h1>502 \
                    Bad Gateway</h1></center>\n<hr><center>nginx</center></body></html>";
        assert_eq!(
            error_body_message(html),
            "502 Bad Gateway 502 Bad Gateway nginx"
        );
        let long = format!("<p>{}</p>", "word ".repeat(100));
        let message = error_body_message(&long);
        assert_eq!(message.chars().count(), 201);
        assert!(message.ends_with('…'));
        assert_eq!(error_body_message(""), "");
    }

    #[test]
    fn html_scripts_and_styles_are_dropped() {
        let html = "<html><head><STYLE type=\"text/css\">body { color: red }</STYLE>\
                    <script>var a = 1 < 2;</script></head><body><h1>Error 522</h1>\
                    <p>Connection timed out</p><script src=x></script></body></html>";
        assert_eq!(error_body_message(html), "Error 522 Connection timed out");
        assert_eq!(error_body_message("a <style>never closed"), "a");
        assert_eq!(error_body_message("ok <b"), "ok");
        assert_eq!(error_body_message("x > y <i>é</i>"), "x > y é");
    }

    #[test]
    fn redacts_the_api_key_everywhere() {
        let err = ModelError::Http {
            provider: "openai".into(),
            status: 401,
            message: "Incorrect API key provided: sk-secret-123".into(),
            retry_after: None,
        };
        let text = redact(err, Some("sk-secret-123")).to_string();
        assert!(!text.contains("sk-secret-123"), "{text}");
        assert!(text.contains("[redacted]"));
    }

    #[test]
    fn formats_seconds_and_endpoints() {
        assert_eq!(fmt_secs(Duration::from_secs(120)), "120");
        assert_eq!(fmt_secs(Duration::from_millis(250)), "0.25");
        assert_eq!(
            endpoint("http://h/v1/", "/chat/completions"),
            "http://h/v1/chat/completions"
        );
        assert_eq!(endpoint("http://h", "/v1/messages"), "http://h/v1/messages");
    }

    #[tokio::test]
    async fn silence_longer_than_the_idle_timeout_fails() {
        let stream = futures_util::stream::iter(vec![Ok::<_, std::convert::Infallible>(
            b"data: {}\n\n".to_vec(),
        )])
        .chain(futures_util::stream::pending());
        let result = read_events(stream, Duration::from_millis(50), "openai", |_| {
            Ok(Flow::Continue)
        })
        .await;
        assert_eq!(
            result,
            Err(ModelError::Timeout {
                provider: "openai".into(),
                message: "no data for 0.05 s (stream_idle_timeout)".into()
            })
        );
    }

    /// `chunks` as a byte stream, each chunk after `gap` of silence.
    fn paced(
        chunks: Vec<String>,
        gap: Duration,
    ) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::convert::Infallible>> {
        futures_util::stream::iter(chunks).then(move |chunk| async move {
            tokio::time::sleep(gap).await;
            Ok(chunk.into_bytes())
        })
    }

    fn message_of(result: Result<Flow, ModelError>) -> String {
        match result {
            Err(ModelError::Stream { message, .. }) => message,
            other => panic!("expected a stream error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn keepalive_comments_reset_the_idle_timeout() {
        // 12 keepalives 40 ms apart: 480 ms in all, well past the 200 ms idle timeout,
        // but never 200 ms of silence on the wire.
        let mut chunks = vec![": keepalive\n\n".to_string(); 12];
        chunks.push("data: answer\n\n".into());
        let mut seen = Vec::new();
        let result = read_events(
            paced(chunks, Duration::from_millis(40)),
            Duration::from_millis(200),
            "openai",
            |event| {
                seen.push(event.data.clone());
                Ok(Flow::Continue)
            },
        )
        .await;
        assert_eq!(result, Ok(Flow::Continue));
        assert_eq!(seen, ["answer"]);
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_a_stream_error() {
        let line = format!("data: {}", "x".repeat(MAX_LINE_BYTES));
        // No newline at all: the limit must fire without waiting for the line's end.
        let stream = chunked(&line, &[]).chain(futures_util::stream::pending());
        let result = read_events(stream, Duration::from_secs(30), "openai", |_| {
            Ok(Flow::Continue)
        })
        .await;
        assert_eq!(message_of(result), "stream line longer than 16 MiB");
    }

    #[tokio::test]
    async fn an_event_over_the_limit_is_a_stream_error() {
        // Short lines, but no blank line to end the event: the data buffer would grow
        // without bound.
        let line = format!("data: {}\n", "y".repeat(1000));
        let body = line.repeat(MAX_LINE_BYTES / 1000 + 1);
        let result = read_events(
            chunked(&body, &[]),
            Duration::from_secs(30),
            "openai",
            |_| Ok(Flow::Continue),
        )
        .await;
        assert_eq!(message_of(result), "stream event longer than 16 MiB");
    }

    #[tokio::test]
    async fn a_long_line_in_small_chunks_is_read_in_linear_time() {
        // 4 MiB in 1 KiB chunks: rescanning the buffered line on every chunk (the old
        // behaviour) takes minutes here; reading it once takes well under a second.
        let payload = "z".repeat(4 << 20);
        let body = format!("data: {payload}\n\n");
        let cuts: Vec<usize> = (1..body.len() / 1024).map(|i| i * 1024).collect();
        let started = std::time::Instant::now();
        let mut size = 0;
        let result = read_events(
            chunked(&body, &cuts),
            Duration::from_secs(30),
            "openai",
            |event| {
                size = event.data.len();
                Ok(Flow::Continue)
            },
        )
        .await;
        assert_eq!(result, Ok(Flow::Continue));
        assert_eq!(size, payload.len());
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }

    fn split(chunks: &[&str], limit: usize) -> Result<Vec<String>, &'static str> {
        let mut splitter = LineSplitter::new(limit);
        let mut lines = Vec::new();
        for chunk in chunks {
            splitter.push(chunk.as_bytes())?;
            while let Some(line) = splitter.pop() {
                lines.push(String::from_utf8(line).unwrap());
            }
        }
        lines.extend(splitter.finish().map(|l| String::from_utf8(l).unwrap()));
        Ok(lines)
    }

    #[test]
    fn lines_are_cut_after_every_kind_of_terminator() {
        assert_eq!(
            split(&["data: a\r", "\ndata: b\rdata: c\n\r\n", "tail"], 100),
            Ok(vec![
                "data: a\r\n".to_string(),
                "data: b\r".into(),
                "data: c\n".into(),
                "\r\n".into(),
                "tail".into()
            ])
        );
        assert_eq!(split(&["a\r"], 100), Ok(vec!["a\r".to_string()]));
    }

    #[test]
    fn line_and_event_limits_count_content_bytes_only() {
        assert_eq!(split(&["12345678\r\n"], 8).map(|l| l.len()), Ok(1));
        assert_eq!(
            split(&["1234", "56789"], 8),
            Err("stream line longer than 16 MiB")
        );
        // Blank lines (`\r\n\r\n`, `\r\r`) reset the event count; `\r\n` alone does not.
        assert!(split(&["1234\r\n1234\r\n\r\n1234\r\r1234\n"], 8).is_ok());
        assert_eq!(
            split(&["1234\r\n1234\r\n1"], 8),
            Err("stream event longer than 16 MiB")
        );
    }

    #[tokio::test]
    async fn invalid_utf8_is_a_stream_error() {
        let stream = futures_util::stream::iter(vec![Ok::<_, std::convert::Infallible>(
            b"data: \xff\n\ndata: x\n\n".to_vec(),
        )]);
        let result = read_events(stream, Duration::from_secs(5), "openai", |_| {
            Ok(Flow::Continue)
        })
        .await;
        assert!(message_of(result).starts_with("the stream is not valid UTF-8"));
    }

    #[tokio::test]
    async fn transport_errors_mid_stream_are_stream_errors() {
        let stream = futures_util::stream::iter(vec![
            Ok(b"data: {}\n\n".to_vec()),
            Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "reset by peer",
            )),
        ]);
        let result = read_events(stream, Duration::from_secs(5), "anthropic", |_| {
            Ok(Flow::Continue)
        })
        .await;
        match result {
            Err(ModelError::Stream { message, .. }) => assert!(message.contains("reset by peer")),
            other => panic!("{other:?}"),
        }
    }
}
