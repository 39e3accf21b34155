//! The one outbound HTTP policy of deerflow (contract §12): the connect timeout, the pool's
//! idle bound, and redirects only within the origin, so that no key header or request body
//! ever reaches another server. [`HttpService`](super::HttpService) builds every client
//! through it; so does MCP's HTTP transport.

use std::time::Duration;

/// How long an idle connection stays in the pool. Under the 5 s keep-alive of llama.cpp
/// (cpp-httplib), uvicorn (vLLM) and Node, so deerflow drops an idle connection before those
/// servers close it rather than racing their close; a new connection after a longer pause
/// costs a handshake, nothing next to a model call.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// Where every outbound HTTP client of deerflow starts (model providers, MCP servers, web
/// backends): one policy for all — the connect timeout, pooled connections dropped before
/// the servers' keep-alive closes them, and redirects only within the origin (§12).
pub fn outbound_client(connect_timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .redirect(same_origin_redirects())
}

/// The refusal of a cross-origin redirect in `err`, in a user's words (naming the target).
pub fn refused_redirect(err: &reqwest::Error) -> Option<String> {
    find_source::<CrossOrigin>(err).map(ToString::to_string)
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
