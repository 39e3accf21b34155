//! The `web_search` / `image_search` tool itself: arguments, the cap, the answer. It knows
//! no service: the row it was built with does the asking.

use std::sync::OnceLock;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::client::Client;
use super::hits::render;
use super::{Auth, Kind, Query, Row, SearchBackend};
use crate::args::{spec, with_args, Count};
use crate::web::WebEntry;
use crate::{Concurrency, Tool, ToolContext, ToolError, ToolOutput};
use deerflow_model::http::{HttpService, Timeouts};
use deerflow_model::{BoxFuture, CallContext, ToolCall, ToolSpec};

/// `web_search`'s and `image_search`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// What to search for.
    pub query: String,
    /// Most results to return. Defaults to, and is capped at, the configured maximum (5
    /// unless configured).
    #[schemars(range(min = 1))]
    pub max_results: Option<Count>,
}

pub struct SearchTool {
    name: String,
    row: &'static Row,
    backend: Box<dyn SearchBackend>,
    base_url: String,
    /// A credential: only ever handed to the client, which sends it as a sensitive header.
    key: Option<String>,
    max_results: usize,
    timeout: Duration,
    /// Built at the first call (a client that cannot be built is that call's error, not a
    /// failed start), then shared by every call: one pool per entry.
    service: OnceLock<Result<HttpService, String>>,
}

impl SearchTool {
    pub fn new(entry: &WebEntry, row: &'static Row, key: Option<String>) -> Self {
        Self {
            name: entry.name.clone(),
            row,
            backend: (row.backend)(&entry.extra),
            base_url: entry
                .base_url
                .clone()
                .unwrap_or_else(|| row.default_base_url.to_string()),
            key,
            max_results: entry.max_results().max(1),
            timeout: entry.timeout,
            service: OnceLock::new(),
        }
    }

    fn what(&self) -> &'static str {
        match self.row.kind {
            Kind::Web => "web search",
            Kind::Image => "image search",
        }
    }

    fn service(&self) -> Result<&HttpService, ToolError> {
        let built = self.service.get_or_init(|| {
            let t = self.timeout;
            let timeouts = Timeouts {
                connect: t,
                request: t,
                idle: t,
            };
            HttpService::new(self.row.name, timeouts, crate::web::MAX_RETRIES)
                .map_err(|e| e.to_string())
        });
        built
            .as_ref()
            .map_err(|e| ToolError::failed(self.what(), e))
    }

    async fn run(&self, args: SearchArgs, ctx: &ToolContext) -> Result<String, ToolError> {
        let text = args.query.trim();
        if text.is_empty() {
            return Err(ToolError::Refused(
                "Error: 'query' must not be empty".to_string(),
            ));
        }
        if self.row.auth != Auth::None && self.key.is_none() {
            let var = self.row.key_var.unwrap_or("api_key");
            return Err(ToolError::failed(
                self.what(),
                format!(
                    "{} needs an API key: set {var} or the entry's api_key",
                    self.row.name
                ),
            ));
        }
        let wanted = args
            .max_results
            .map_or(self.max_results, |Count(n)| {
                usize::try_from(n).unwrap_or(usize::MAX)
            })
            .clamp(1, self.max_results);
        let query = Query {
            text: text.to_string(),
            count: wanted.min(self.row.max_count),
        };
        let client = Client {
            row: self.row,
            what: self.what(),
            base_url: &self.base_url,
            key: self.key.as_deref(),
            service: self.service()?,
            ctx: CallContext::new(ctx.cancel.clone()),
        };
        let hits = self.backend.search(&client, &query).await?;
        Ok(render(hits, self.row.kind, text, wanted))
    }
}

impl Tool for SearchTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn spec(&self) -> ToolSpec {
        let description = match self.row.kind {
            Kind::Web => {
                "Search the web. Answers a numbered list of results, each with its title, \
                 URL and a snippet, in the search engine's order. Read a result's page with \
                 web_fetch when the snippet is not enough."
            }
            Kind::Image => {
                "Search for images on the web. Answers a numbered list of images, each with \
                 its title, the image's URL with its size in pixels when known, and the page \
                 it is on."
            }
        };
        spec::<SearchArgs>(&self.name, description)
    }

    fn concurrency(&self, _call: &ToolCall) -> Concurrency {
        Concurrency::Shared
    }

    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        with_args(&call.arguments, move |args: SearchArgs| async move {
            match self.run(args, ctx).await {
                Ok(text) => ToolOutput::ok(text),
                Err(e) => e.into(),
            }
        })
    }
}
