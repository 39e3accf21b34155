//! `web_fetch` (contract §14): one tool over a [`FetchBackend`] per service — deerflow's own
//! client (`direct.rs`) or a remote reader (`remote.rs`: Jina, Firecrawl, Exa, Crawl4AI).
//! Every URL the model hands over goes through the network guard first; the direct fetcher
//! also checks every redirect hop, a remote backend's own hops are its business.

mod convert;
mod direct;
mod remote;

use std::sync::Arc;

use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;

use super::guard::{check_url, Guard};
use super::WebEntry;
use crate::args::{spec, with_args};
use crate::{Concurrency, Tool, ToolContext, ToolError, ToolOutput};
use deerflow_base::text::{cut, Keep};
use deerflow_model::{BoxFuture, CallContext, ToolCall, ToolSpec};

/// What a backend read at a URL.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// Where the content came from in the end (after redirects).
    pub url: String,
    pub title: Option<String>,
    pub body: String,
}

impl Page {
    pub fn new(url: &str, title: Option<String>, body: String) -> Self {
        Self {
            url: url.to_string(),
            title,
            body,
        }
    }

    /// `URL: …`, `Title: …` when there is one, a blank line, the content.
    pub fn render(&self) -> String {
        let mut out = format!("URL: {}\n", self.url);
        if let Some(title) = &self.title {
            out.push_str(&format!("Title: {}\n", title.replace(['\r', '\n'], " ")));
        }
        out.push('\n');
        out.push_str(&self.body);
        out
    }
}

/// One way of reading a page.
pub trait FetchBackend: Send + Sync {
    /// Whether the guard's lookup of the URL is the only one deerflow makes (a remote
    /// reader); the direct fetcher admits every hop itself.
    fn remote(&self) -> bool;
    /// Reads `url`, which passed [`check_url`] (and, for a remote backend, the guard).
    fn fetch<'a>(
        &'a self,
        url: &'a Url,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<Page, ToolError>>;
}

/// The `web_fetch` tool of `entry`, or `None` for a `use:` deerflow does not serve.
pub fn build(entry: &WebEntry) -> Option<Arc<dyn Tool>> {
    build_with(entry, Guard::new(entry.allow_private_addresses))
}

/// [`build`] with a given guard (tests give it a resolver of their own).
fn build_with(entry: &WebEntry, guard: Guard) -> Option<Arc<dyn Tool>> {
    let backend: Box<dyn FetchBackend> = if entry.use_path == "direct" {
        Box::new(direct::Direct::new(entry, guard.clone()))
    } else {
        remote::build(entry)?
    };
    Some(Arc::new(WebFetchTool {
        name: entry.name.clone(),
        guard,
        backend,
    }))
}

/// `web_fetch`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WebFetchArgs {
    /// The http(s) URL of the page to read.
    pub url: String,
}

pub struct WebFetchTool {
    name: String,
    guard: Guard,
    backend: Box<dyn FetchBackend>,
}

impl WebFetchTool {
    async fn run(&self, raw: &str, ctx: &CallContext) -> Result<Page, ToolError> {
        let url = check_url(raw)?;
        let fetch = async {
            if self.backend.remote() {
                self.guard.admit(&url).await?;
            }
            self.backend.fetch(&url, ctx).await
        };
        // A lookup or a body being read stops with the agent, not only between retries.
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => Err(ToolError::Message("the fetch was cancelled".into())),
            page = fetch => page,
        }
    }
}

impl Tool for WebFetchTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn spec(&self) -> ToolSpec {
        spec::<WebFetchArgs>(
            &self.name,
            "Read a web page (http or https) and return its final URL, its title and its main \
             content as Markdown. Text, XML and JSON come back as text; other types (PDF, \
             images) are refused. Local and private network addresses are refused. Long pages \
             are truncated at the end.",
        )
    }

    fn concurrency(&self, _call: &ToolCall) -> Concurrency {
        Concurrency::Shared
    }

    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        with_args(&call.arguments, move |a: WebFetchArgs| async move {
            let call_ctx = CallContext::new(ctx.cancel.clone());
            match self.run(&a.url, &call_ctx).await {
                Ok(page) => {
                    ToolOutput::ok(limit(&page.render(), ctx.limits.read_file_output_max_chars))
                }
                Err(e) => e.into(),
            }
        })
    }
}

/// §6's output limit for a page: its start is kept, like `read_file`'s.
fn limit(text: &str, max: usize) -> String {
    cut(text, max, Keep::Head).marked(0)
}

#[cfg(test)]
mod tests;
