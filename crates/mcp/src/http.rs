//! The streamable HTTP client under rmcp's transport: its client is built by deerflow's one
//! HTTP service policy (`model::http::HttpService::client_with`: no redirect to another
//! origin, so no configured header or request body ever reaches one; pooled connections
//! dropped before a server's keep-alive closes them), every answer is read under
//! [`MAX_MESSAGE_BYTES`] (a JSON body whole, an SSE stream per event), and every failure is
//! worded for the user and recorded in the session's [`Fault`].

use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{Response, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};
use tokio_util::sync::CancellationToken;

use deerflow_model::http::HttpService;

use super::fault::{not_json_rpc, too_large, Fault, HttpFault, MAX_MESSAGE_BYTES};

const SESSION_ID: &str = "Mcp-Session-Id";
const LAST_EVENT_ID: &str = "Last-Event-Id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

type Failed = StreamableHttpError<HttpFault>;

/// A server's client: deerflow's one outbound policy and the configured headers, marked
/// sensitive.
pub fn client(headers: &[(String, String)]) -> Result<reqwest::Client, String> {
    let mut map = reqwest::header::HeaderMap::new();
    for (k, v) in headers {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| format!("header '{k}': {e}"))?;
        // The value is a secret: the error never shows it.
        let mut value = reqwest::header::HeaderValue::from_str(v)
            .map_err(|_| format!("header '{k}': the value is not a valid header value"))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    HttpService::client_with(CONNECT_TIMEOUT, map)
        .map_err(|e| format!("cannot set up the HTTP client: {e}"))
}

/// How long connecting to a server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct BoundedHttp {
    pub client: reqwest::Client,
    pub fault: Fault,
    /// Ends the whole transport: an SSE stream that broke its bound leaves a request that
    /// will never be answered, so the session ends with the reason instead of waiting.
    pub stop: CancellationToken,
}

impl BoundedHttp {
    fn fail<T>(&self, why: String) -> Result<T, Failed> {
        self.fault.set(why.clone());
        Err(StreamableHttpError::Client(HttpFault(why)))
    }

    /// Sends `request`; any answer with a status is returned, the rest is an error.
    async fn send(&self, request: reqwest::RequestBuilder, url: &str) -> Result<Response, Failed> {
        match request.send().await {
            Ok(response) => Ok(response),
            Err(e) => self.fail(unreachable(&e, url)),
        }
    }

    /// `response` if its status is a success, else an error naming the status and what the
    /// body says.
    async fn success(&self, response: Response, url: &str) -> Result<Response, Failed> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = read_bounded(response, 64 * 1024).await.unwrap_or_default();
        let said = deerflow_model::error_text::error_body_message(&String::from_utf8_lossy(&body));
        let said = deerflow_base::text::escape_controls(&said).into_owned();
        let reason = status.canonical_reason().unwrap_or("");
        let tail = if said.is_empty() || said == reason {
            String::new()
        } else {
            format!(": {said}")
        };
        self.fail(format!(
            "{url} answered HTTP {} {reason}{tail}",
            status.as_u16()
        ))
    }

    /// The events of an SSE answer, each at most [`MAX_MESSAGE_BYTES`].
    fn events(&self, response: Response) -> BoxStream<'static, Result<Sse, SseError>> {
        let bounded = bounded_events(response.bytes_stream(), self.clone());
        let fault = self.fault.clone();
        SseStream::from_bytes_stream(bounded)
            .inspect(move |item| {
                if let Ok(Sse {
                    data: Some(data),
                    event,
                    ..
                }) = item
                {
                    let message = matches!(event.as_deref(), None | Some("") | Some("message"));
                    if message && serde_json::from_str::<ServerJsonRpcMessage>(data).is_err() {
                        fault.set(not_json_rpc(data.as_bytes()));
                    }
                }
            })
            .boxed()
    }
}

/// Why a request got no answer: a refused redirect (naming its target), or what kept the
/// server out of reach.
fn unreachable(err: &reqwest::Error, url: &str) -> String {
    if let Some(refused) = deerflow_model::http::refused_redirect(err) {
        return refused;
    }
    let why = if err.is_timeout() {
        "timed out".to_string()
    } else {
        root_cause(err)
    };
    format!("cannot reach {url}: {why}")
}

/// The innermost cause of `err`, as the operating system or the TLS layer put it.
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    if let Some(io) = cause.downcast_ref::<std::io::Error>() {
        if io.kind() == std::io::ErrorKind::ConnectionRefused {
            return "connection refused".into();
        }
    }
    cause.to_string()
}

/// The whole body, or `None` once it passes `max` bytes or breaks off.
async fn read_bounded(mut response: Response, max: usize) -> Option<Vec<u8>> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return None;
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.ok()? {
        if body.len() + chunk.len() > max {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    Some(body)
}

fn content_type(response: &Response) -> String {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

fn session_id(response: &Response) -> Option<String> {
    response
        .headers()
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

impl StreamableHttpClient for BoundedHttp {
    type Error = HttpFault;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session: Option<Arc<str>>,
        auth: Option<String>,
    ) -> Result<StreamableHttpPostResponse, Failed> {
        let url = deerflow_base::text::without_url_credentials(&uri).into_owned();
        let mut request = self
            .client
            .post(uri.as_ref())
            .header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"))
            .json(&message);
        if let Some(auth) = auth {
            request = request.bearer_auth(auth);
        }
        if let Some(session) = session {
            request = request.header(SESSION_ID, session.as_ref());
        }
        let response = self.send(request, &url).await?;
        let response = self.success(response, &url).await?;
        if matches!(
            response.status(),
            StatusCode::ACCEPTED | StatusCode::NO_CONTENT
        ) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        let kind = content_type(&response);
        let session = session_id(&response);
        if kind.starts_with(EVENT_STREAM) {
            return Ok(StreamableHttpPostResponse::Sse(
                self.events(response),
                session,
            ));
        }
        let is_json = kind.starts_with(JSON);
        let Some(body) = read_bounded(response, MAX_MESSAGE_BYTES).await else {
            return self.fail(format!("{url} {}", too_large_or_broken()));
        };
        match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
            Ok(message) if is_json => Ok(StreamableHttpPostResponse::Json(message, session)),
            _ => self.fail(not_json_rpc(&body)),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session: Arc<str>,
        auth: Option<String>,
    ) -> Result<(), Failed> {
        let url = deerflow_base::text::without_url_credentials(&uri).into_owned();
        let mut request = self.client.delete(uri.as_ref());
        if let Some(auth) = auth {
            request = request.bearer_auth(auth);
        }
        let request = request.header(SESSION_ID, session.as_ref());
        // A failed goodbye is no news for the run: only the debug log hears of it.
        match request.send().await {
            Ok(r) if r.status().is_success() || r.status() == StatusCode::METHOD_NOT_ALLOWED => {}
            Ok(r) => deerflow_base::logging::debug(&format!(
                "mcp: ending the session at {url} answered HTTP {}",
                r.status().as_u16()
            )),
            Err(e) => deerflow_base::logging::debug(&format!(
                "mcp: ending the session: {}",
                unreachable(&e, &url)
            )),
        }
        Ok(())
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session: Arc<str>,
        last_event_id: Option<String>,
        auth: Option<String>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failed> {
        let url = deerflow_base::text::without_url_credentials(&uri).into_owned();
        let mut request = self
            .client
            .get(uri.as_ref())
            .header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"))
            .header(SESSION_ID, session.as_ref());
        if let Some(id) = last_event_id {
            request = request.header(LAST_EVENT_ID, id);
        }
        if let Some(auth) = auth {
            request = request.bearer_auth(auth);
        }
        // Not `send`: a server without the optional stream is no fault of the session.
        let response = match request.send().await {
            Ok(r) if r.status() == StatusCode::METHOD_NOT_ALLOWED => {
                return Err(StreamableHttpError::ServerDoesNotSupportSse)
            }
            Ok(r) => r,
            Err(e) => return self.fail(unreachable(&e, &url)),
        };
        let response = self.success(response, &url).await?;
        let kind = content_type(&response);
        if !kind.starts_with(EVENT_STREAM) && !kind.starts_with(JSON) {
            return self.fail(format!(
                "{url} answered its event stream with content type '{}'",
                deerflow_base::text::escape_controls(&kind)
            ));
        }
        Ok(self.events(response))
    }
}

fn too_large_or_broken() -> String {
    format!(
        "sent an answer larger than {} MiB (the limit of one MCP message), or it broke off",
        MAX_MESSAGE_BYTES >> 20
    )
}

/// Where one SSE event ends: the bytes since the last blank line are counted, and a stream
/// that goes past [`MAX_MESSAGE_BYTES`] without one fails (and ends the session).
#[derive(Default)]
struct EventBound {
    line: usize,
    event: usize,
    after_cr: bool,
}

impl EventBound {
    /// Whether the event in progress is still within the bound after `chunk`.
    fn feed(&mut self, chunk: &[u8]) -> bool {
        for &b in chunk {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\r' | b'\n' => {
                    if self.line == 0 {
                        self.event = 0;
                    }
                    self.line = 0;
                    self.after_cr = b == b'\r';
                }
                _ => {
                    self.line += 1;
                    self.event += 1;
                    self.after_cr = false;
                }
            }
        }
        self.event <= MAX_MESSAGE_BYTES
    }
}

fn bounded_events<S, B>(
    body: S,
    http: BoundedHttp,
) -> impl Stream<Item = Result<B, HttpFault>> + Send + 'static
where
    S: Stream<Item = reqwest::Result<B>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
{
    let state = (Box::pin(body), EventBound::default(), http, false);
    futures_util::stream::unfold(state, |(mut body, mut bound, http, done)| async move {
        if done {
            return None;
        }
        let item = match body.next().await? {
            Ok(chunk) if bound.feed(chunk.as_ref()) => Ok(chunk),
            Ok(_) => {
                http.fault.set(too_large());
                http.stop.cancel();
                Err(HttpFault(too_large()))
            }
            Err(e) => Err(HttpFault(format!(
                "the event stream broke off: {}",
                root_cause(&e)
            ))),
        };
        let done = item.is_err();
        Some((item, (body, bound, http, done)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_bounded_between_blank_lines() {
        let mut b = EventBound::default();
        let line = vec![b'x'; 1 << 20];
        for _ in 0..40 {
            assert!(b.feed(b"data: "));
            assert!(b.feed(&line));
            assert!(b.feed(b"\r\n\r\n"), "a blank line ends the event");
        }
        let mut b = EventBound::default();
        let mut ok = true;
        for _ in 0..20 {
            ok &= b.feed(&line) && b.feed(b"\n");
        }
        assert!(!ok, "one event of 20 lines of 1 MiB is over the bound");
    }
}
