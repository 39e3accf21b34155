//! `use: direct`: deerflow's own fetcher. Each hop is admitted by the guard and sent by a
//! client built for it by the one outbound policy, pinned to the addresses the guard checked
//! (`resolve_to_addrs`: no second lookup), with redirects off so that deerflow follows them
//! itself, each one admitted again. No proxy from the environment, no cookies, no
//! credentials; 429 and 5xx retried like model calls.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use reqwest::header::{
    HeaderValue, ACCEPT, CONTENT_ENCODING, CONTENT_TYPE, HOST, LOCATION, RETRY_AFTER,
};
use reqwest::{Response, Url};

use super::{convert, FetchBackend, Page};
use crate::web::guard::{check_hop, Guard};
use crate::web::WebEntry;
use crate::ToolError;
use deerflow_base::text::clip;
use deerflow_model::http::{fmt_secs, outbound_client};
use deerflow_model::retry::{parse_retry_after, with_retries, RetryPolicy};
use deerflow_model::{BoxFuture, CallContext, ModelError};

/// Redirects followed before giving up (contract §14).
pub const MAX_REDIRECTS: usize = 5;
/// The most of a body read; the rest is cut with [`CUT_MARKER`].
pub const MAX_BODY: usize = 10 << 20;
pub const CUT_MARKER: &str =
    "... [deerflow: the page is larger than 10 MiB; only its first 10 MiB were read] ...";
/// What of an error page the model reads.
const ERROR_BODY_CHARS: usize = 500;
const ACCEPTED: &str =
    "text/html,application/xhtml+xml,application/json;q=0.9,text/*;q=0.8,*/*;q=0.5";
/// Who is asking, and nothing else about the user.
const USER_AGENT: &str = concat!("deerflow/", env!("CARGO_PKG_VERSION"));
/// Who errors name.
const NAME: &str = "web_fetch";

/// Where guarded requests may go through a proxy: only where the entry says so.
#[derive(Debug, Clone, PartialEq)]
enum ProxyRule {
    None,
    /// `proxy:`
    Given(String),
    /// `trust_env: true`: `HTTP(S)_PROXY`/`ALL_PROXY`, read when a request is made.
    Env,
}

pub struct Direct {
    guard: Guard,
    timeout: Duration,
    proxy: ProxyRule,
    retry: RetryPolicy,
}

impl Direct {
    pub fn new(entry: &WebEntry, guard: Guard) -> Self {
        let proxy = match (&entry.proxy, entry.trust_env) {
            (Some(p), _) => ProxyRule::Given(p.clone()),
            (None, true) => ProxyRule::Env,
            (None, false) => ProxyRule::None,
        };
        Self {
            guard,
            timeout: entry.timeout,
            proxy,
            retry: RetryPolicy::new(crate::web::MAX_RETRIES),
        }
    }

    /// Follows `start` through at most [`MAX_REDIRECTS`] redirects, every hop admitted by
    /// the guard; returns the last response and its URL.
    async fn follow(&self, start: &Url, ctx: &CallContext) -> Result<(Response, Url), ToolError> {
        let mut url = start.clone();
        let mut hops = 0;
        loop {
            let addrs = self.guard.admit(&url).await?;
            let response = self.send(&url, &addrs, ctx).await?;
            let Some(next) = redirect_target(&url, &response)? else {
                return Ok((response, url));
            };
            if hops == MAX_REDIRECTS {
                return Err(ToolError::Message(format!(
                    "too many redirects (more than {MAX_REDIRECTS}) from {}",
                    redacted(start)
                )));
            }
            check_hop(&url, &next)?;
            hops += 1;
            url = next;
        }
    }

    /// One hop: a response with a status under 400, after retrying 429 and 5xx.
    async fn send(
        &self,
        url: &Url,
        addrs: &[SocketAddr],
        ctx: &CallContext,
    ) -> Result<Response, ToolError> {
        let attempt = || async {
            let client = self.client(url, addrs)?;
            let request = self.request(&client, url, addrs)?;
            let sent = tokio::time::timeout(self.timeout, client.execute(request)).await;
            let response = sent
                .map_err(|_| self.timed_out())?
                .map_err(|e| connect_error(&e))?;
            if response.status().as_u16() >= 400 {
                return Err(status_error(response, self.timeout).await);
            }
            Ok(response)
        };
        with_retries(&self.retry, ctx, attempt)
            .await
            .map_err(|e| tool_error(e, url))
    }

    /// A client for one request to `url`, by the one outbound policy, that connects only to
    /// `addrs`.
    fn client(&self, url: &Url, addrs: &[SocketAddr]) -> Result<reqwest::Client, ModelError> {
        let connect = self.timeout.min(Duration::from_secs(10));
        let mut builder = outbound_client(connect)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .user_agent(USER_AGENT)
            .pool_max_idle_per_host(0);
        if let Some(host) = url.domain() {
            builder = builder.resolve_to_addrs(host, addrs);
        }
        if let Some(proxy) = self.proxy_for(url) {
            let proxy = reqwest::Proxy::all(proxy.as_str()).map_err(|_| ModelError::Refused {
                provider: NAME.into(),
                message: "the entry's proxy is not a valid URL".into(),
            })?;
            builder = builder.proxy(proxy);
        }
        builder.build().map_err(|e| connect_error(&e))
    }

    /// The GET of `url`. Through a proxy, a plain-http request names the checked address
    /// instead of the host, so the proxy cannot look the name up again (the `Host` header
    /// keeps the name); an https one tunnels to the name (its certificate is for it).
    fn request(
        &self,
        client: &reqwest::Client,
        url: &Url,
        addrs: &[SocketAddr],
    ) -> Result<reqwest::Request, ModelError> {
        let mut target = url.clone();
        let mut host_header = None;
        if self.proxy_for(url).is_some() && url.scheme() == "http" && url.domain().is_some() {
            if let Some(addr) = addrs.first() {
                host_header = HeaderValue::from_str(&host_and_port(url)).ok();
                let _ = target.set_ip_host(addr.ip());
            }
        }
        let mut builder = client.get(target).header(ACCEPT, ACCEPTED);
        if let Some(host) = host_header {
            builder = builder.header(HOST, host);
        }
        builder.build().map_err(|e| connect_error(&e))
    }

    fn proxy_for(&self, url: &Url) -> Option<String> {
        match &self.proxy {
            ProxyRule::None => None,
            ProxyRule::Given(p) => Some(p.clone()),
            ProxyRule::Env => {
                let names: &[&str] = if url.scheme() == "https" {
                    &["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
                } else {
                    &["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
                };
                names
                    .iter()
                    .find_map(|n| std::env::var(n).ok().filter(|v| !v.is_empty()))
            }
        }
    }

    fn timed_out(&self) -> ModelError {
        ModelError::Timeout {
            provider: NAME.into(),
            message: format!("no response within {} s", fmt_secs(self.timeout)),
        }
    }

    /// The body, at most [`MAX_BODY`] bytes, and whether more was left unread.
    async fn read(&self, mut response: Response) -> Result<(Vec<u8>, bool), ToolError> {
        let mut body = Vec::new();
        let read = async {
            while let Some(chunk) = response.chunk().await? {
                let room = MAX_BODY - body.len();
                if chunk.len() > room {
                    body.extend_from_slice(&chunk[..room]);
                    return Ok(true);
                }
                body.extend_from_slice(&chunk);
            }
            Ok::<_, reqwest::Error>(false)
        };
        let cut = tokio::time::timeout(self.timeout, read)
            .await
            .map_err(|_| {
                ToolError::Message(format!(
                    "the page did not arrive within {} s",
                    fmt_secs(self.timeout)
                ))
            })?
            .map_err(|e| {
                ToolError::Message(format!(
                    "the connection broke mid-page: {}",
                    deerflow_model::error_text::error_chain(&e)
                ))
            })?;
        Ok((body, cut))
    }
}

impl FetchBackend for Direct {
    fn remote(&self) -> bool {
        false
    }

    fn fetch<'a>(
        &'a self,
        url: &'a Url,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<Page, ToolError>> {
        Box::pin(async move {
            let (response, last) = self.follow(url, ctx).await?;
            check_encoding(&response)?;
            let content_type = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(String::from);
            let (body, cut) = self.read(response).await?;
            let marker = cut.then_some(CUT_MARKER);
            let shown = redacted(&last);
            // Parsing and scoring up to 10 MiB of HTML is CPU work: off the runtime's thread,
            // which every agent of the run shares.
            let convert = move || convert::page(&shown, content_type.as_deref(), &body, marker);
            tokio::task::spawn_blocking(convert)
                .await
                .map_err(|e| ToolError::failed("reading the page", e))?
        })
    }
}

/// deerflow asks for no compression (no `Accept-Encoding`) and decodes none, so a body a
/// server compressed anyway would reach the model as bytes it cannot read: refused by name.
fn check_encoding(response: &Response) -> Result<(), ToolError> {
    let Some(value) = response.headers().get(CONTENT_ENCODING) else {
        return Ok(());
    };
    let coding = String::from_utf8_lossy(value.as_bytes())
        .trim()
        .to_ascii_lowercase();
    if coding.is_empty() || coding == "identity" {
        return Ok(());
    }
    Err(ToolError::Message(format!(
        "web_fetch cannot read content the server compressed unasked (Content-Encoding: {})",
        clip(&deerflow_base::text::escape_controls(&coding), 40)
    )))
}

/// Where a redirect response points, resolved against the URL it answered.
fn redirect_target(url: &Url, response: &Response) -> Result<Option<Url>, ToolError> {
    if !response.status().is_redirection() {
        return Ok(None);
    }
    let Some(location) = response.headers().get(LOCATION) else {
        return Ok(None);
    };
    let location = String::from_utf8_lossy(location.as_bytes());
    url.join(&location)
        .map(Some)
        .map_err(|e| ToolError::invalid("redirect target", e))
}

fn host_and_port(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

fn redacted(url: &Url) -> String {
    deerflow_model::http::redact_url(url)
}

fn connect_error(err: &reqwest::Error) -> ModelError {
    ModelError::Connect {
        provider: NAME.into(),
        message: deerflow_model::error_text::error_chain(err),
    }
}

/// A status of 400 or more with the start of its body: retried when 429 or 5xx (with the
/// server's `Retry-After`), else final.
async fn status_error(mut response: Response, timeout: Duration) -> ModelError {
    let status = response.status();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, SystemTime::now()));
    let mut body = Vec::new();
    while body.len() < 4 * ERROR_BODY_CHARS {
        match tokio::time::timeout(timeout, response.chunk()).await {
            Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&body);
    let excerpt = clip(text.trim(), ERROR_BODY_CHARS);
    let code = status.as_u16();
    let heading = match status.canonical_reason() {
        Some(reason) => format!("HTTP {code} {reason}"),
        None => format!("HTTP {code}"),
    };
    let message = if excerpt.is_empty() {
        heading
    } else {
        format!("{heading}:\n{excerpt}")
    };
    if code == 429 || code >= 500 {
        ModelError::Http {
            provider: NAME.into(),
            status: code,
            message,
            retry_after,
        }
    } else {
        // Not retried: only 429 and 5xx are (contract §14).
        ModelError::Refused {
            provider: NAME.into(),
            message,
        }
    }
}

/// The model's text for a hop that failed for good.
fn tool_error(err: ModelError, url: &Url) -> ToolError {
    let url = redacted(url);
    let message = match err {
        ModelError::Http { message, .. } | ModelError::Refused { message, .. } => {
            format!("fetching {url} failed with {message}")
        }
        ModelError::Timeout { message, .. } => format!("fetching {url} timed out: {message}"),
        ModelError::Connect { message, .. } => format!("cannot fetch {url}: {message}"),
        ModelError::Cancelled => format!("fetching {url} was cancelled"),
        other => format!("fetching {url} failed: {other}"),
    };
    ToolError::Message(message)
}
