//! The web tools of contract §14 (`web_search`, `web_fetch`, `image_search`): a config entry
//! resolved into a [`WebEntry`], one backend adapter per service behind a seam per tool, and
//! the network guard every fetched URL goes through.

pub mod entry;
pub mod fetch;
pub mod guard;
pub mod offer;
pub mod replay;
pub mod search;

use std::future::Future;
use std::sync::Arc;

use deerflow_model::http::HttpService;
use deerflow_model::{CallContext, ModelError};
pub use entry::WebEntry;

use super::Tool;

/// How often a web service is asked again, as a model's `max_retries` defaults to.
pub(crate) const MAX_RETRIES: u32 = 3;

/// `attempt` through `http`'s retries (backoff, `Retry-After`), asked again only after a
/// 429, a 5xx or a lost connection (contract §14). Other 4xx — 408 and 409 too, which model
/// calls retry — are the request's fault: asking the same way again cannot help.
pub(crate) async fn retrying<T, F, Fut>(
    http: &HttpService,
    ctx: &CallContext,
    mut attempt: F,
) -> Result<T, ModelError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ModelError>>,
{
    let result = http
        .retrying(ctx, || {
            let call = attempt();
            async move {
                match call.await {
                    Err(e) if e.is_retryable() && !retried(&e) => Ok(Err(e)),
                    other => other.map(Ok),
                }
            }
        })
        .await;
    match result {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) | Err(e) => Err(e),
    }
}

/// Which of the errors a model call retries a web call retries too.
fn retried(err: &ModelError) -> bool {
    match err {
        ModelError::Http { status, .. } => *status == 429 || *status >= 500,
        _ => true,
    }
}

/// The names of the web tools, as the model calls them.
pub const WEB_TOOLS: [&str; 3] = ["web_search", "web_fetch", "image_search"];

/// The tool an entry names, built by its backend; `None` when deerflow cannot serve the
/// entry's `use:` (or the name is no web tool).
pub fn build(entry: &WebEntry) -> Option<Arc<dyn Tool>> {
    match entry.name.as_str() {
        "web_search" | "image_search" => search::build(entry),
        "web_fetch" => fetch::build(entry),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_429_5xx_and_lost_connections_are_asked_again() {
        let http = |status| ModelError::Http {
            provider: "tavily".into(),
            status,
            message: String::new(),
            retry_after: None,
        };
        for (status, again) in [
            (429, true),
            (500, true),
            (503, true),
            (400, false),
            (401, false),
            (408, false),
            (409, false),
        ] {
            assert_eq!(retried(&http(status)), again, "{status}");
        }
        let lost = ModelError::Dropped {
            provider: "jina".into(),
            message: String::new(),
        };
        assert!(retried(&lost));
    }
}
