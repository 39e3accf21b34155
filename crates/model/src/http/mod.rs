//! deerflow's outbound HTTP: the one client policy (`policy.rs`), the service client every
//! HTTP user shares (`service.rs`: timeouts, retries, bounded bodies, the stale-connection
//! resend), and a provider's streamed call over it (`call.rs`). Here: reading an SSE body
//! under the idle timeout and the size limit into an [`Assembler`]; SSE framing is
//! `sse.rs`.

use std::error::Error as StdError;
use std::time::Duration;

use eventsource_stream::Event;
use futures_util::{Stream, StreamExt};
use serde_json::Value;

use super::error_text::{clip, dropped, error_chain, json_error_message, stream_error};
use super::sse::{self, Flow};
use super::{ModelError, ModelResponse};

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

/// Parses one SSE event's JSON data; `what` names it in the error (`a stream chunk`, …),
/// which quotes the start of the bad data.
pub fn event_json<T: serde::de::DeserializeOwned>(
    data: &str,
    provider: &str,
    what: &str,
) -> Result<T, ModelError> {
    serde_json::from_str(data).map_err(|e| {
        stream_error(
            provider,
            format!("malformed JSON in {what} ({e}): {}", clip(data, 200)),
        )
    })
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
    deerflow_base::text::secs(d.as_secs_f64())
}

/// `base_url` + `path`, without a doubled `/`.
pub fn endpoint(base_url: &str, path: &str) -> String {
    format!("{}{}", base_url.trim_end_matches('/'), path)
}

mod call;
mod policy;
mod service;

pub use call::StreamCall;
pub use policy::{outbound_client, redact_url, refused_redirect};
pub use service::{HttpService, Timeouts};

#[cfg(test)]
mod tests {
    use super::*;

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
}
