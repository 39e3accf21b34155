//! One provider call: a JSON POST whose answer is an SSE stream (or, from servers that
//! ignore `stream: true`, a whole JSON answer), sent through the provider's
//! [`HttpService`] and retried by it.

use std::time::Duration;

use super::{assemble, parse_json_answer, Assembler, HttpService, MAX_RESPONSE_BYTES};
use crate::error_text::stream_error;
use crate::{CallContext, HttpSettings, ModelError, ModelResponse};

/// One provider call, retried per the service.
pub struct StreamCall<'a> {
    pub service: &'a HttpService,
    pub settings: &'a HttpSettings,
    pub url: &'a str,
    pub headers: &'a [(&'static str, String)],
    /// The serialized request body, sent as is on every attempt.
    pub body: Vec<u8>,
}

impl StreamCall<'_> {
    /// Runs the call with retries; every error is redacted before anyone sees it.
    pub async fn run<A: Assembler>(
        mut self,
        ctx: &CallContext,
    ) -> Result<ModelResponse, ModelError> {
        let request = self.prepare();
        let key = self.settings.api_key.as_deref();
        self.service
            .retrying(ctx, || async {
                let started = std::time::Instant::now();
                let result = self.service.bounded(key, self.attempt::<A>(&request)).await;
                self.log_attempt(&request, started.elapsed(), &result);
                result
            })
            .await
    }

    /// The request each attempt sends a copy of: the URL parsed and the headers checked
    /// once, the body moved in (a copy shares it rather than copying its bytes). What
    /// reqwest rejects here fails every attempt, as sending it would.
    fn prepare(&mut self) -> Result<reqwest::Request, ModelError> {
        let client = self.service.client();
        let builder = match parsed_url(self.url) {
            Some(url) => client.post(url),
            // reqwest's own parse says why it is not a URL, as sending it would.
            None => client.post(self.url),
        };
        let mut builder = builder.body(std::mem::take(&mut self.body));
        for (name, value) in self.headers {
            builder = builder.header(*name, value);
        }
        builder.build().map_err(|e| self.service.send_error(&e))
    }

    /// One HTTP request; the service bounds it as a whole by the request timeout.
    async fn attempt<A: Assembler>(
        &self,
        request: &Result<reqwest::Request, ModelError>,
    ) -> Result<ModelResponse, ModelError> {
        let provider = self.service.name();
        let idle = self.service.timeouts().idle;
        let request = request.as_ref().map_err(Clone::clone)?;
        let response = self.service.send(request).await?;
        if is_json(&response) {
            let body = self.service.read_body(response, MAX_RESPONSE_BYTES).await?;
            let body = String::from_utf8(body)
                .map_err(|_| stream_error(provider, "the answer is not valid UTF-8"))?;
            return parse_json_answer::<A>(&body, provider);
        }
        assemble::<A, _, _, _>(response.bytes_stream(), idle, provider).await
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
            provider = self.service.name(),
            model = %self.settings.model,
            url = %deerflow_base::text::without_url_credentials(self.url),
            bytes,
            status = %status,
            ms = took.as_millis() as u64,
            outcome = %outcome,
            "model request"
        );
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use eventsource_stream::Event;
    use serde_json::Value;

    use super::*;
    use crate::sse::Flow;

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
        let service = HttpService::for_model(&settings, "openai").unwrap();
        let (ctx, _) = recording();
        for url in ["not a url", "http://", "/v1/chat/completions"] {
            let err = call(&service, &settings, url, &ctx).await.unwrap_err();
            let direct = service.client().post(url).send().await.unwrap_err();
            let ModelError::Connect { message, .. } = err else {
                panic!("{err:?}")
            };
            assert_eq!(
                message,
                super::super::service::root_causes(&direct),
                "{url}"
            );
        }
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

    fn recording() -> (CallContext, Arc<std::sync::Mutex<Vec<crate::RetryNotice>>>) {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = seen.clone();
        let mut ctx = CallContext::new(tokio_util::sync::CancellationToken::new());
        ctx.on_retry = Arc::new(move |n| sink.lock().unwrap().push(n));
        (ctx, seen)
    }

    async fn call(
        service: &HttpService,
        settings: &HttpSettings,
        url: &str,
        ctx: &CallContext,
    ) -> Result<ModelResponse, ModelError> {
        StreamCall {
            service,
            settings,
            url,
            headers: &[],
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
        let service = HttpService::for_model(&settings, "openai").unwrap();
        let (ctx, notices) = recording();
        for _ in 0..3 {
            let response = call(&service, &settings, &url, &ctx).await;
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
        let service = HttpService::for_model(&settings, "openai").unwrap();
        let (ctx, notices) = recording();
        let err = call(&service, &settings, &url, &ctx).await.unwrap_err();
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
