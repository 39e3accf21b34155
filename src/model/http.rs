//! The HTTP transport every provider shares: the client, one streamed attempt (send, map
//! error statuses, read the body under the idle and request timeouts and the size limits),
//! and the retry wrapper around it. Providers only build request bodies and assemble
//! events (an [`Assembler`]); SSE framing is `sse.rs`.

use std::error::Error as StdError;
use std::time::{Duration, SystemTime};

use eventsource_stream::Event;
use futures_util::{Stream, StreamExt};
use serde_json::Value;

use super::error_text::{
    clip, dropped, error_body_message, error_chain, json_error_message, redact, stream_error,
};
use super::retry::{parse_retry_after, with_retries, RetryPolicy};
use super::sse::{self, Flow};
use super::{CallContext, HttpSettings, ModelError, ModelResponse};

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
    /// Text, reasoning and tool-call argument bytes assembled so far, with what the slots
    /// and kept JSON values count ([`SLOT_BYTES`], [`json_bytes`]), for
    /// [`MAX_RESPONSE_BYTES`].
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
    let ended = read_stream(body, idle, provider, |event| {
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

/// The most text, reasoning and tool-call argument bytes one response may assemble.
pub const MAX_RESPONSE_BYTES: usize = 32 << 20;

/// What one tool-call, content-block or output-item slot counts toward
/// [`MAX_RESPONSE_BYTES`] besides its contents, about its memory when empty: a stream of
/// thousands of distinct indexes with nothing in them is bounded like one of text.
pub const SLOT_BYTES: usize = 128;

/// What a JSON value a provider streamed and deerflow keeps (extra fields of a call, a
/// block's start object) counts toward [`MAX_RESPONSE_BYTES`]: about its compact size.
pub fn json_bytes(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(|v| json_bytes(v) + 1).sum::<usize>() + 2,
        Value::Object(map) => {
            let fields = map.iter().map(|(k, v)| k.len() + 4 + json_bytes(v));
            fields.sum::<usize>() + 2
        }
    }
}

/// Feeds every SSE event of a response body to `on_event`, as [`sse::read_events`] does,
/// with no byte for `idle` failing with `ModelError::Timeout`. The timeout is on the
/// bytes, not the events: SSE comments (`: keepalive`) are traffic but yield no event.
pub async fn read_stream<S, B, E, F>(
    body: S,
    idle: Duration,
    provider: &str,
    on_event: F,
) -> Result<Flow, ModelError>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: StdError + 'static,
    F: FnMut(&Event) -> Result<Flow, ModelError>,
{
    sse::read_events(idle_bounded(body, idle, provider), provider, on_event).await
}

/// The body's chunks, each awaited under the idle timeout once the first byte of the body
/// has come; a transport error mid-stream becomes a stream error. The first failure ends
/// the stream.
fn idle_bounded<S, B, E>(
    body: S,
    idle: Duration,
    provider: &str,
) -> impl Stream<Item = Result<B, ModelError>>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: StdError + 'static,
{
    // (body, provider, failed, started)
    let state = (Box::pin(body), provider.to_string(), false, false);
    futures_util::stream::unfold(
        state,
        move |(mut body, provider, failed, started)| async move {
            if failed {
                return None;
            }
            let next = match idle_for(started, idle) {
                Some(idle) => tokio::time::timeout(idle, body.next()).await,
                None => Ok(body.next().await),
            };
            let item = match next {
                Err(_) => Err(idle_timeout(&provider, idle)),
                Ok(None) => return None,
                Ok(Some(Ok(bytes))) => Ok(bytes),
                Ok(Some(Err(err))) => Err(dropped(
                    &provider,
                    format!("connection lost mid-stream: {}", error_chain(&err)),
                )),
            };
            let failed = item.is_err();
            let started = started || item.as_ref().is_ok_and(|b| !b.as_ref().is_empty());
            Some((item, (body, provider, failed, started)))
        },
    )
}

/// The idle bound on the next chunk of a body: none before its first byte, when a local
/// server may still be reading a long prompt after sending its headers (llama.cpp does);
/// the whole-request timeout governs until then (contract §12).
fn idle_for(started: bool, idle: Duration) -> Option<Duration> {
    started.then_some(idle)
}

fn idle_timeout(provider: &str, idle: Duration) -> ModelError {
    dropped(
        provider,
        format!(
            "timed out: no data for {} s (stream_idle_timeout)",
            fmt_secs(idle)
        ),
    )
}

/// `120`, `0.5`: seconds as a person would write them.
pub fn fmt_secs(d: Duration) -> String {
    crate::text::secs(d.as_secs_f64())
}

/// The HTTP client of one provider instance. Only the connect timeout lives here: the
/// request and idle timeouts are applied per attempt so they produce clear errors.
pub fn build_client(
    settings: &HttpSettings,
    provider: &str,
) -> Result<reqwest::Client, ModelError> {
    client_builder(settings)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .build()
        .map_err(|e| client_error(provider, &e))
}

/// How long an idle connection stays in the pool. Under the 5 s keep-alive of llama.cpp
/// (cpp-httplib), uvicorn (vLLM) and Node, so deerflow drops an idle connection before those
/// servers close it rather than racing their close; a new connection after a longer pause
/// costs a handshake, nothing next to a model call.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// A client that never reuses a connection, for the one resend after a pooled connection
/// turned out closed: it must not be handed another stale one from the pool.
fn fresh_client(settings: &HttpSettings, provider: &str) -> Result<reqwest::Client, ModelError> {
    client_builder(settings)
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| client_error(provider, &e))
}

fn client_builder(settings: &HttpSettings) -> reqwest::ClientBuilder {
    outbound_client(settings.connect_timeout)
}

/// Where every outbound HTTP client of deerflow starts (model providers, MCP servers): one
/// policy for all — the connect timeout, and redirects only within the origin (§12).
pub fn outbound_client(connect_timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .redirect(same_origin_redirects())
}

/// The refusal of a cross-origin redirect in `err`, in a user's words (naming the target).
pub fn refused_redirect(err: &reqwest::Error) -> Option<String> {
    find_source::<CrossOrigin>(err).map(ToString::to_string)
}

fn client_error(provider: &str, err: &reqwest::Error) -> ModelError {
    ModelError::Connect {
        provider: provider.to_string(),
        message: format!("cannot set up the HTTP client: {}", error_chain(err)),
    }
}

/// Redirects are followed only within the origin (scheme, host, port) of the request: the
/// key headers and the whole conversation must never reach another server (contract §12).
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let origin = |u: &reqwest::Url| {
            (
                u.scheme().to_string(),
                u.host_str().map(String::from),
                u.port_or_known_default(),
            )
        };
        let same = attempt
            .previous()
            .first()
            .is_some_and(|first| origin(first) == origin(attempt.url()));
        if attempt.previous().len() > 10 {
            attempt.error("too many redirects")
        } else if same {
            attempt.follow()
        } else {
            let target = redact_url(attempt.url());
            attempt.error(CrossOrigin(target))
        }
    })
}

/// The error a cross-origin redirect ends a request with.
#[derive(Debug)]
struct CrossOrigin(String);

impl std::fmt::Display for CrossOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the server redirected to another origin ({}); deerflow does not follow it",
            self.0
        )
    }
}

impl std::error::Error for CrossOrigin {}

/// A URL without its user and password.
pub fn redact_url(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.to_string()
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
    pub async fn run<A: Assembler>(
        mut self,
        ctx: &CallContext,
    ) -> Result<ModelResponse, ModelError> {
        let policy = RetryPolicy::new(self.settings.max_retries);
        let request = self.prepare();
        let key = self.settings.api_key.as_deref();
        with_retries(&policy, ctx, || async {
            let started = std::time::Instant::now();
            let result = self
                .attempt::<A>(&request)
                .await
                .map_err(|e| redact(e, key));
            self.log_attempt(&request, started.elapsed(), &result);
            result
        })
        .await
    }

    /// The request each attempt sends a copy of: the URL parsed and the headers checked
    /// once, the body moved in (a copy shares it rather than copying its bytes). What
    /// reqwest rejects here fails every attempt, as sending it would.
    fn prepare(&mut self) -> Result<reqwest::Request, ModelError> {
        let builder = match parsed_url(&self.url) {
            Some(url) => self.client.post(url),
            // reqwest's own parse says why it is not a URL, as sending it would.
            None => self.client.post(&self.url),
        };
        let mut builder = builder.body(std::mem::take(&mut self.body));
        for (name, value) in &self.headers {
            builder = builder.header(*name, value);
        }
        builder.build().map_err(|e| self.send_error(&e))
    }

    /// One HTTP request, bounded as a whole by `request_timeout`.
    async fn attempt<A: Assembler>(
        &self,
        request: &Result<reqwest::Request, ModelError>,
    ) -> Result<ModelResponse, ModelError> {
        let idle = self.settings.stream_idle_timeout;
        let whole = async {
            let response = self.send(request).await?;
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

    /// One debug line per attempt: who was asked, how much was sent, how it ended. The
    /// URL is logged without credentials, the error redacted; headers (the key) never are.
    fn log_attempt(
        &self,
        request: &Result<reqwest::Request, ModelError>,
        took: Duration,
        result: &Result<ModelResponse, ModelError>,
    ) {
        if !tracing::enabled!(tracing::Level::DEBUG) {
            return;
        }
        let bytes = request
            .as_ref()
            .ok()
            .and_then(|r| r.body())
            .and_then(|b| b.as_bytes())
            .map_or(0, <[u8]>::len);
        let (status, outcome) = match result {
            Ok(_) => ("200".to_string(), "ok".to_string()),
            Err(ModelError::Http { status, .. }) => (status.to_string(), "http error".into()),
            Err(e) => ("-".to_string(), e.to_string()),
        };
        tracing::debug!(
            provider = self.provider,
            model = %self.settings.model,
            url = %crate::text::without_url_credentials(&self.url),
            bytes,
            status = %status,
            ms = took.as_millis() as u64,
            outcome = %outcome,
            "model request"
        );
    }

    /// Sends the request and returns the response once its status is a success.
    async fn send(
        &self,
        request: &Result<reqwest::Request, ModelError>,
    ) -> Result<reqwest::Response, ModelError> {
        // No idle bound before the first byte: a local server may think about a long prompt
        // for minutes; the whole-request timeout governs until the response starts (§12).
        let idle = self.settings.stream_idle_timeout;
        let response = match self.client.execute(self.copy(request)?).await {
            Ok(response) => response,
            // A pooled connection the server had closed while it sat idle (llama.cpp closes
            // after every streamed answer, others after their keep-alive timeout): no byte
            // of an answer came, so the request goes again at once on a new connection,
            // unannounced and not counted as a retry (§12). Only once per attempt, so a
            // server that closes every connection still fails like any other.
            Err(e) if closed_before_answer(&e) => {
                // No error text: it carries the URL, which may hold credentials.
                crate::logging::debug(&format!(
                    "{}: the connection closed before an answer; sending again on a new one",
                    self.provider
                ));
                let fresh = fresh_client(self.settings, self.provider)?;
                fresh
                    .execute(self.copy(request)?)
                    .await
                    .map_err(|e| self.send_error(&e))?
            }
            Err(e) => return Err(self.send_error(&e)),
        };
        if response.status().is_success() {
            return Ok(response);
        }
        Err(http_error(self.provider, response, idle).await)
    }

    /// A copy of the prepared request to send.
    fn copy(
        &self,
        request: &Result<reqwest::Request, ModelError>,
    ) -> Result<reqwest::Request, ModelError> {
        let request = request.as_ref().map_err(Clone::clone)?;
        // Only a streamed body cannot be copied, and this one is bytes.
        request.try_clone().ok_or_else(|| ModelError::Connect {
            provider: self.provider.to_string(),
            message: "the request body cannot be sent again".into(),
        })
    }

    /// A request that got no response at all: refused, reset, DNS, TLS, connect timeout,
    /// or a redirect deerflow would not follow.
    fn send_error(&self, err: &reqwest::Error) -> ModelError {
        if let Some(message) = refused_redirect(err) {
            return ModelError::Refused {
                provider: self.provider.to_string(),
                message,
            };
        }
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

/// `url` parsed, through a per-thread memo of the last one: a model posts to one endpoint
/// on every call, and parsing it anew was a fair part of preparing each request (issue 13).
fn parsed_url(url: &str) -> Option<reqwest::Url> {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(String, reqwest::Url)>> =
            const { std::cell::RefCell::new(None) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((text, parsed)) = last.as_ref() {
            if text == url {
                return Some(parsed.clone());
            }
        }
        let parsed = reqwest::Url::parse(url).ok()?;
        *last = Some((url.to_string(), parsed.clone()));
        Some(parsed)
    })
}

/// Whether a request failed as one sent on a connection the server had already closed
/// fails: the connection was there (no connect error), but it ended before any byte of a
/// response — hyper's "connection closed before message completed", a reset, a broken pipe.
fn closed_before_answer(err: &reqwest::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    if err.is_connect() || err.is_timeout() || err.is_redirect() || err.is_builder() {
        return false;
    }
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if e.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message)
        {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(io.kind(), ConnectionReset | BrokenPipe | ConnectionAborted) {
                return true;
            }
        }
        cur = e.source();
    }
    false
}

/// The first error of type `E` in `err`'s source chain.
fn find_source<'a, E: std::error::Error + 'static>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a E> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(found) = e.downcast_ref::<E>() {
            return Some(found);
        }
        cur = e.source();
    }
    None
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
        let chunk = match idle_for(!body.is_empty(), idle) {
            Some(idle) => tokio::time::timeout(idle, response.chunk())
                .await
                .map_err(|_| idle_timeout(provider, idle))?,
            None => response.chunk().await,
        };
        let chunk = chunk.map_err(|e| {
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
mod tests {
    use super::*;
    use std::sync::Arc;

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

    #[test]
    fn urls_are_parsed_as_reqwest_parses_them_whatever_came_before() {
        let urls = [
            "http://127.0.0.1:8080/v1/chat/completions",
            "https://user:pw@example.com/v1/x?q=1",
            "http://127.0.0.1:8080/v1/chat/completions",
            "not a url",
            "http://[::1]:9/v1",
            "http://127.0.0.1:8080/v1/chat/completions",
        ];
        for _ in 0..2 {
            for url in urls {
                assert_eq!(parsed_url(url), reqwest::Url::parse(url).ok(), "{url}");
            }
        }
    }

    #[tokio::test]
    async fn a_url_reqwest_rejects_fails_as_sending_it_did() {
        let mut settings = HttpSettings::new("m", "http://unused", None);
        settings.max_retries = 0;
        let client = build_client(&settings, "openai").unwrap();
        let (ctx, _) = recording();
        for url in ["not a url", "http://", "/v1/chat/completions"] {
            let err = call(&client, &settings, url, &ctx).await.unwrap_err();
            let direct = client.post(url).send().await.unwrap_err();
            let ModelError::Connect { message, .. } = err else {
                panic!("{err:?}")
            };
            assert_eq!(message, root_causes(&direct), "{url}");
        }
    }

    #[tokio::test]
    async fn silence_longer_than_the_idle_timeout_fails() {
        let stream = futures_util::stream::iter(vec![Ok::<_, std::convert::Infallible>(
            b"data: {}\n\n".to_vec(),
        )])
        .chain(futures_util::stream::pending());
        let result = read_stream(stream, Duration::from_millis(50), "openai", |_| {
            Ok(Flow::Continue)
        })
        .await;
        assert_eq!(
            result,
            Err(ModelError::Dropped {
                provider: "openai".into(),
                message: "timed out: no data for 0.05 s (stream_idle_timeout)".into()
            })
        );
    }

    /// Silence before the body's first byte is the whole-request timeout's business (a
    /// server reading a long prompt after its headers); after it, the idle timeout's.
    #[tokio::test]
    async fn the_idle_timeout_starts_with_the_first_body_byte() {
        let late_first = futures_util::stream::once(async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok::<_, std::convert::Infallible>(b"data: first\n\n".to_vec())
        })
        .chain(futures_util::stream::pending());
        let mut seen = Vec::new();
        let result = read_stream(late_first, Duration::from_millis(50), "openai", |event| {
            seen.push(event.data.clone());
            Ok(Flow::Continue)
        })
        .await;
        assert_eq!(
            seen,
            ["first"],
            "the first byte waited past the idle timeout"
        );
        assert_eq!(
            result.unwrap_err().to_string(),
            "openai stream dropped: timed out: no data for 0.05 s (stream_idle_timeout)"
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

    #[tokio::test]
    async fn keepalive_comments_reset_the_idle_timeout() {
        // 12 keepalives 40 ms apart: 480 ms in all, well past the 200 ms idle timeout,
        // but never 200 ms of silence on the wire.
        let mut chunks = vec![": keepalive\n\n".to_string(); 12];
        chunks.push("data: answer\n\n".into());
        let mut seen = Vec::new();
        let result = read_stream(
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

    /// A whole JSON answer is enough to see which requests were made.
    #[derive(Default)]
    struct JsonOnly;

    impl Assembler for JsonOnly {
        fn on_event(&mut self, _: &Event) -> Result<Flow, ModelError> {
            Ok(Flow::Continue)
        }
        fn finish(self, _: Flow) -> Result<ModelResponse, ModelError> {
            Ok(ModelResponse::default())
        }
        fn from_json(value: &Value) -> Result<ModelResponse, ModelError> {
            Ok(ModelResponse {
                text: value["text"].as_str().map(String::from),
                ..ModelResponse::default()
            })
        }
        fn kept_bytes(&self) -> usize {
            0
        }
    }

    /// What a test server does with the `n`th request (0-based) of one connection.
    #[derive(Clone, Copy)]
    enum OnRequest {
        Answer,
        Close,
    }

    /// A keep-alive HTTP/1.1 server: `plan(n)` for the `n`th request of each connection.
    /// Returns its address, the count of requests it read and of those it closed on.
    async fn keep_alive_server(
        plan: fn(usize) -> OnRequest,
    ) -> (
        String,
        Arc<std::sync::atomic::AtomicUsize>,
        Arc<std::sync::atomic::AtomicUsize>,
    ) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/x", listener.local_addr().unwrap());
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let closed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (count, closes) = (seen.clone(), closed.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                let (count, closes) = (count.clone(), closes.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    for n in 0.. {
                        // Every test request has a body `{}` behind its head.
                        loop {
                            if let Some(end) = buf.windows(6).position(|w| w == b"\r\n\r\n{}") {
                                buf.drain(..end + 6);
                                break;
                            }
                            let mut chunk = [0u8; 4096];
                            match conn.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(k) => buf.extend_from_slice(&chunk[..k]),
                            }
                        }
                        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        match plan(n) {
                            OnRequest::Close => {
                                closes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                return;
                            }
                            OnRequest::Answer => {
                                let body = r#"{"text":"ok"}"#;
                                let reply = format!(
                                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                                     content-length: {}\r\n\r\n{body}",
                                    body.len()
                                );
                                if conn.write_all(reply.as_bytes()).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        (url, seen, closed)
    }

    fn recording() -> (
        CallContext,
        Arc<std::sync::Mutex<Vec<super::super::RetryNotice>>>,
    ) {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = seen.clone();
        let mut ctx = CallContext::new(tokio_util::sync::CancellationToken::new());
        ctx.on_retry = Arc::new(move |n| sink.lock().unwrap().push(n));
        (ctx, seen)
    }

    async fn call(
        client: &reqwest::Client,
        settings: &HttpSettings,
        url: &str,
        ctx: &CallContext,
    ) -> Result<ModelResponse, ModelError> {
        StreamCall {
            client,
            settings,
            provider: "openai",
            url: url.to_string(),
            headers: Vec::new(),
            body: b"{}".to_vec(),
        }
        .run::<JsonOnly>(ctx)
        .await
    }

    #[tokio::test]
    async fn a_pooled_connection_closed_by_the_server_is_resent_silently() {
        // Answers the first request of a connection, then closes it when the next one comes:
        // what a client sees when it reuses a connection llama.cpp closed after an answer.
        let (url, seen, closed) = keep_alive_server(|n| match n {
            0 => OnRequest::Answer,
            _ => OnRequest::Close,
        })
        .await;
        let mut settings = HttpSettings::new("m", "http://unused", None);
        settings.max_retries = 0;
        let client = build_client(&settings, "openai").unwrap();
        let (ctx, notices) = recording();
        for _ in 0..3 {
            let response = call(&client, &settings, &url, &ctx).await;
            assert_eq!(response.unwrap().text.as_deref(), Some("ok"));
            // The client puts an answered connection back in its pool in the background.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(notices.lock().unwrap().is_empty(), "no retry is announced");
        // Call 1 is answered on connection A; call 2 meets A closed and goes again on B,
        // which is never pooled; call 3 finds the pool empty, so a new connection answers.
        let closed = closed.load(std::sync::atomic::Ordering::SeqCst);
        assert!(closed >= 1, "no call reused a pooled connection");
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 3 + closed);
    }

    #[tokio::test]
    async fn a_server_that_closes_every_connection_gets_one_resend_per_attempt() {
        let (url, seen, _) = keep_alive_server(|_| OnRequest::Close).await;
        let mut settings = HttpSettings::new("m", "http://unused", None);
        settings.max_retries = 1;
        let client = build_client(&settings, "openai").unwrap();
        let (ctx, notices) = recording();
        let err = call(&client, &settings, &url, &ctx).await.unwrap_err();
        assert!(matches!(err, ModelError::Connect { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("connection closed before message completed"),
            "{err}"
        );
        // Two attempts (max_retries 1), each resent once; the one retry is announced.
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 4);
        assert_eq!(notices.lock().unwrap().len(), 1);
    }
}
