//! The HTTP service client every outbound HTTP user of deerflow shares: model providers,
//! MCP's HTTP transport and the web backends. It owns the client built by the one policy
//! (`policy.rs`), the connect, request and idle timeouts, the retry loop with
//! `Retry-After` (`retry.rs`), bounded bodies and the one silent resend after a pooled
//! connection turned out closed. Callers build requests and read what comes back.

use std::error::Error as StdError;
use std::future::Future;
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

use super::policy::{outbound_client, refused_redirect};
use super::{fmt_secs, idle_for, idle_timeout};
use crate::error_text::{error_body_message, error_chain, redact, stream_error};
use crate::retry::{parse_retry_after, with_retries, RetryPolicy};
use crate::{CallContext, HttpSettings, ModelError};

/// The time bounds of a service's requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeouts {
    /// Bound on setting up a connection (TCP and TLS).
    pub connect: Duration,
    /// Bound on one whole attempt, body included ([`HttpService::bounded`]).
    pub request: Duration,
    /// Bound on silence inside a body once its first byte has come.
    pub idle: Duration,
}

impl Timeouts {
    /// A model's, as configured.
    pub fn of(settings: &HttpSettings) -> Self {
        Self {
            connect: settings.connect_timeout,
            request: settings.request_timeout,
            idle: settings.stream_idle_timeout,
        }
    }
}

/// One HTTP service (a provider instance, a web backend): its client and how its requests
/// are bounded and retried. Cloning shares the client and its pool.
#[derive(Clone)]
pub struct HttpService {
    client: reqwest::Client,
    /// Who the requests are to, in errors (`openai`, `anthropic`, a backend's name).
    name: &'static str,
    timeouts: Timeouts,
    retry: RetryPolicy,
    /// Sent with every request; kept for the resend's fresh client.
    headers: HeaderMap,
}

impl HttpService {
    pub fn new(
        name: &'static str,
        timeouts: Timeouts,
        max_retries: u32,
    ) -> Result<Self, ModelError> {
        Self::with_headers(name, timeouts, max_retries, HeaderMap::new())
    }

    /// A service whose every request carries `headers` (mark secret values sensitive).
    pub fn with_headers(
        name: &'static str,
        timeouts: Timeouts,
        max_retries: u32,
        headers: HeaderMap,
    ) -> Result<Self, ModelError> {
        let client = Self::client_with(timeouts.connect, headers.clone())
            .map_err(|e| client_error(name, &e))?;
        Ok(Self {
            client,
            name,
            timeouts,
            retry: RetryPolicy::new(max_retries),
            headers,
        })
    }

    /// A model provider's service, from its resolved settings.
    pub fn for_model(settings: &HttpSettings, name: &'static str) -> Result<Self, ModelError> {
        Self::new(name, Timeouts::of(settings), settings.max_retries)
    }

    /// A client by the one policy, for a transport that drives requests itself (MCP's).
    pub fn client_with(
        connect: Duration,
        headers: HeaderMap,
    ) -> Result<reqwest::Client, reqwest::Error> {
        outbound_client(connect).default_headers(headers).build()
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Runs `attempt` until it succeeds, fails for good, or the retries run out, after the
    /// server's `Retry-After` or a backoff; each retry is announced through `ctx`.
    pub async fn retrying<T, F, Fut>(&self, ctx: &CallContext, attempt: F) -> Result<T, ModelError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ModelError>>,
    {
        with_retries(&self.retry, ctx, attempt).await
    }

    /// One attempt bounded as a whole by the request timeout, its error redacted of
    /// `secret` (the key) before anyone sees it.
    pub async fn bounded<T>(
        &self,
        secret: Option<&str>,
        attempt: impl Future<Output = Result<T, ModelError>>,
    ) -> Result<T, ModelError> {
        let limit = self.timeouts.request;
        let result = tokio::time::timeout(limit, attempt)
            .await
            .unwrap_or_else(|_| {
                Err(ModelError::Timeout {
                    provider: self.name.to_string(),
                    message: format!("no complete response within {} s", fmt_secs(limit)),
                })
            });
        result.map_err(|e| redact(e, secret))
    }

    /// A GET of `url` whose body is read whole, at most `limit` bytes, retried and bounded
    /// like every request of the service: what a web backend (search, fetch) needs.
    pub async fn get(
        &self,
        url: &str,
        headers: &[(&'static str, &str)],
        limit: usize,
        ctx: &CallContext,
    ) -> Result<Vec<u8>, ModelError> {
        self.retrying(ctx, || {
            self.bounded(None, async {
                let mut builder = self.client.get(url);
                for (name, value) in headers {
                    builder = builder.header(*name, *value);
                }
                let request = builder.build().map_err(|e| self.send_error(&e))?;
                let response = self.send(&request).await?;
                self.read_body(response, limit).await
            })
        })
        .await
    }

    /// Sends the request and returns the response once its status is a success.
    pub async fn send(&self, request: &reqwest::Request) -> Result<reqwest::Response, ModelError> {
        // No idle bound before the first byte: a local server may think about a long prompt
        // for minutes; the whole-request timeout governs until the response starts (§12).
        let idle = self.timeouts.idle;
        let response = match self.client.execute(self.copy(request)?).await {
            Ok(response) => response,
            // A pooled connection the server had closed while it sat idle (llama.cpp closes
            // after every streamed answer, others after their keep-alive timeout): no byte
            // of an answer came, so the request goes again at once on a new connection,
            // unannounced and not counted as a retry (§12). Only once per attempt, so a
            // server that closes every connection still fails like any other.
            Err(e) if closed_before_answer(&e) => {
                // No error text: it carries the URL, which may hold credentials.
                deerflow_base::logging::debug(&format!(
                    "{}: the connection closed before an answer; sending again on a new one",
                    self.name
                ));
                let fresh = self.fresh_client()?;
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
        Err(http_error(self.name, response, idle).await)
    }

    /// A copy of the prepared request to send.
    fn copy(&self, request: &reqwest::Request) -> Result<reqwest::Request, ModelError> {
        // Only a streamed body cannot be copied, and this one is bytes.
        request.try_clone().ok_or_else(|| ModelError::Connect {
            provider: self.name.to_string(),
            message: "the request body cannot be sent again".into(),
        })
    }

    /// A request that got no response at all: refused, reset, DNS, TLS, connect timeout,
    /// or a redirect deerflow would not follow.
    pub fn send_error(&self, err: &reqwest::Error) -> ModelError {
        if let Some(message) = refused_redirect(err) {
            return ModelError::Refused {
                provider: self.name.to_string(),
                message,
            };
        }
        let message = if err.is_timeout() {
            format!(
                "connection timed out after {} s",
                fmt_secs(self.timeouts.connect)
            )
        } else {
            root_causes(err)
        };
        ModelError::Connect {
            provider: self.name.to_string(),
            message,
        }
    }

    /// A client that never reuses a connection, for the one resend after a pooled
    /// connection turned out closed: it must not be handed another stale one from the pool.
    fn fresh_client(&self) -> Result<reqwest::Client, ModelError> {
        outbound_client(self.timeouts.connect)
            .default_headers(self.headers.clone())
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| client_error(self.name, &e))
    }

    /// A whole successful body, at most `limit` bytes, read under the idle timeout once
    /// its first byte has come.
    pub async fn read_body(
        &self,
        mut response: reqwest::Response,
        limit: usize,
    ) -> Result<Vec<u8>, ModelError> {
        let (idle, name) = (self.timeouts.idle, self.name);
        let mut body = Vec::new();
        loop {
            let chunk = match idle_for(!body.is_empty(), idle) {
                Some(idle) => tokio::time::timeout(idle, response.chunk())
                    .await
                    .map_err(|_| idle_timeout(name, idle))?,
                None => response.chunk().await,
            };
            let chunk = chunk.map_err(|e| {
                stream_error(
                    name,
                    format!("connection lost mid-response: {}", error_chain(&e)),
                )
            })?;
            match chunk {
                Some(chunk) => body.extend_from_slice(&chunk),
                None => return Ok(body),
            }
            if body.len() > limit {
                let size = mib_or_bytes(limit);
                return Err(stream_error(
                    name,
                    format!("the answer is larger than {size}"),
                ));
            }
        }
    }
}

/// `32 MiB`, `1000 bytes`: a size limit as a person would write it.
fn mib_or_bytes(limit: usize) -> String {
    if limit >= 1 << 20 && limit.is_multiple_of(1 << 20) {
        format!("{} MiB", limit >> 20)
    } else {
        format!("{limit} bytes")
    }
}

fn client_error(name: &str, err: &reqwest::Error) -> ModelError {
    ModelError::Connect {
        provider: name.to_string(),
        message: format!("cannot set up the HTTP client: {}", error_chain(err)),
    }
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

/// `URL: tcp connect error: Connection refused (os error 111)`: the request's URL and the
/// causes under reqwest's and hyper's generic wrappers, which only repeat what failed.
pub(super) fn root_causes(err: &reqwest::Error) -> String {
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
    use std::sync::Arc;

    use super::*;
    use crate::test_support::{serve, Reply};

    fn timeouts() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(5),
            request: Duration::from_secs(5),
            idle: Duration::from_secs(5),
        }
    }

    fn counting_ctx() -> (CallContext, Arc<std::sync::atomic::AtomicUsize>) {
        let retries = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let sink = retries.clone();
        let mut ctx = CallContext::new(tokio_util::sync::CancellationToken::new());
        ctx.on_retry = Arc::new(move |_| {
            sink.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        (ctx, retries)
    }

    #[tokio::test]
    async fn a_get_is_retried_after_retry_after_and_returns_the_body() {
        let mut busy = Reply::json(503, r#"{"error":{"message":"busy"}}"#);
        busy.headers.push(("Retry-After".into(), "0".into()));
        let (base, seen) = serve(vec![busy, Reply::json(200, "hello")]).await;
        let service = HttpService::new("web", timeouts(), 1).unwrap();
        let (ctx, retries) = counting_ctx();
        let body = service
            .get(&format!("{base}/search?q=x"), &[("x-key", "k")], 100, &ctx)
            .await
            .unwrap();
        assert_eq!(body, b"hello");
        assert_eq!(retries.load(std::sync::atomic::Ordering::SeqCst), 1);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert!(seen[1].head.starts_with("GET /search?q=x HTTP/1.1"));
        assert!(seen[1].head.to_ascii_lowercase().contains("x-key: k"));
    }

    #[tokio::test]
    async fn a_body_over_the_limit_fails() {
        let (base, _) = serve(vec![Reply::json(200, "0123456789")]).await;
        let service = HttpService::new("web", timeouts(), 0).unwrap();
        let (ctx, _) = counting_ctx();
        let err = service.get(&base, &[], 4, &ctx).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("the answer is larger than 4 bytes"),
            "{err}"
        );
        assert_eq!(mib_or_bytes(32 << 20), "32 MiB");
    }

    #[tokio::test]
    async fn a_cross_origin_redirect_is_refused() {
        let mut moved = Reply::json(302, "");
        moved
            .headers
            .push(("Location".into(), "http://elsewhere.invalid/x".into()));
        let (base, _) = serve(vec![moved]).await;
        let service = HttpService::new("web", timeouts(), 0).unwrap();
        let (ctx, _) = counting_ctx();
        let err = service.get(&base, &[], 100, &ctx).await.unwrap_err();
        assert!(
            matches!(&err, ModelError::Refused { message, .. }
                if message.contains("redirected to another origin (http://elsewhere.invalid/x)")),
            "{err:?}"
        );
    }
}
