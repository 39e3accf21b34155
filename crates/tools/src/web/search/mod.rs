//! `web_search` and `image_search` (contract §14): one tool layer that knows no service, and
//! one [`SearchBackend`] per service — a file with its request builder and response parser,
//! plus one row in [`BACKENDS`]. An eighth service is one file and one row.

mod brave;
mod client;
mod ddg;
mod ddg_images;
mod exa;
mod firecrawl;
mod hits;
mod searxng;
mod serper;
mod tavily;
mod tool;

#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use client::{Client, Request};
pub use hits::Hit;

use super::WebEntry;
use crate::{Tool, ToolError};
use deerflow_model::BoxFuture;

/// Which tool a backend serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Web,
    Image,
}

impl Kind {
    /// The tool's name as DeerFlow spells it, and the function in its `use:` path.
    fn tool_name(self) -> &'static str {
        match self {
            Kind::Web => "web_search",
            Kind::Image => "image_search",
        }
    }
}

/// How a service wants its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// No key (DuckDuckGo, SearXNG).
    None,
    /// `Authorization: Bearer KEY`.
    Bearer,
    /// The key as the value of this header.
    Header(&'static str),
}

/// What one query asks of a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub text: String,
    /// Results wanted (already capped by the entry and by the service's own limit).
    pub count: usize,
}

/// One service: how to ask it and how to read its answer. Most services are one request
/// ([`SearchBackend::request`]) and one parse ([`SearchBackend::parse`]); a service that needs
/// more (DuckDuckGo images fetches a token first) overrides [`SearchBackend::search`].
pub trait SearchBackend: Send + Sync {
    /// The request for `query`, its path relative to the entry's `base_url`.
    fn request(&self, query: &Query) -> Request;

    /// The results in the service's order, or what is wrong with the answer.
    fn parse(&self, body: &[u8]) -> Result<Vec<Hit>, String>;

    fn search<'a>(
        &'a self,
        client: &'a Client<'a>,
        query: &'a Query,
    ) -> BoxFuture<'a, Result<Vec<Hit>, ToolError>> {
        Box::pin(async move {
            let body = client.send(self.request(query)).await?;
            self.parse(&body).map_err(|e| client.malformed(&e))
        })
    }
}

/// One row of the table: a service for one tool.
pub struct Row {
    /// Lower case, as errors name it (`tavily`, `brave`, …).
    pub name: &'static str,
    /// The package of DeerFlow's `use:` path (`deerflow.community.<package>.tools:…`).
    pub package: &'static str,
    pub kind: Kind,
    pub default_base_url: &'static str,
    pub auth: Auth,
    /// Where the key comes from when the entry has no `api_key`.
    pub key_var: Option<&'static str>,
    /// The most results the service hands out per request.
    pub max_count: usize,
    /// The entry's own keys this service reads (DeerFlow's, such as Exa's `search_type`),
    /// from [`WebEntry::extra`]; any other key of the entry is not read.
    pub settings: &'static [&'static str],
    pub backend: fn(&Settings) -> Box<dyn SearchBackend>,
}

/// A backend's keys from its entry ([`WebEntry::extra`]).
pub type Settings = serde_json::Map<String, serde_json::Value>;

/// A setting as the text a request carries: strings as they are, numbers and flags written
/// out, anything else absent.
pub fn setting(settings: &Settings, key: &str) -> Option<String> {
    match settings.get(key)? {
        serde_json::Value::String(s) => Some(s.trim().to_string()).filter(|s| !s.is_empty()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Every service deerflow serves, per tool.
pub static BACKENDS: &[Row] = &[
    ddg::ROW,
    searxng::ROW,
    tavily::ROW,
    brave::WEB,
    serper::WEB,
    exa::ROW,
    firecrawl::ROW,
    ddg_images::ROW,
    serper::IMAGES,
    brave::IMAGES,
];

/// The row serving `entry`: the tool by the function of its `use:` path
/// (`…:web_search_tool`, `…:image_search_tool`), else by the entry's name; the service by a
/// package of that path (`deerflow.community.tavily.tools` → `tavily`).
pub fn row_for(entry: &WebEntry) -> Option<&'static Row> {
    let (module, function) = match entry.use_path.split_once(':') {
        Some((m, f)) => (m, Some(f.trim())),
        None => (entry.use_path.as_str(), None),
    };
    // A function that is not a search tool (`…:web_fetch_tool`) is not served here.
    let named = |name: &str| {
        [Kind::Web, Kind::Image]
            .into_iter()
            .find(|k| k.tool_name() == name)
    };
    let kind = match function {
        Some(f) => named(f.strip_suffix("_tool")?)?,
        None => named(&entry.name)?,
    };
    let packages: Vec<&str> = module.trim().split('.').collect();
    BACKENDS
        .iter()
        .find(|row| row.kind == kind && packages.contains(&row.package))
}

/// The variable a backend's key is read from when the entry sets none (`TAVILY_API_KEY`),
/// for the configuration to check and `--web` to pick a backend by.
pub fn key_var(entry: &WebEntry) -> Option<&'static str> {
    row_for(entry).and_then(|row| row.key_var)
}

/// The keys of `entry` besides the common ones (`api_key`, `base_url`, `max_results`,
/// `timeout`, …) that its service reads, so the configuration can tell the others apart
/// (`config_ignored`).
pub fn settings_read(entry: &WebEntry) -> &'static [&'static str] {
    row_for(entry).map_or(&[], |row| row.settings)
}

/// The `web_search` or `image_search` tool `entry` asks for, or `None` when its `use:` names
/// no service deerflow serves.
pub fn build(entry: &WebEntry) -> Option<Arc<dyn Tool>> {
    let row = row_for(entry)?;
    let key = entry.api_key.clone().or_else(|| {
        row.key_var
            .and_then(|var| std::env::var(var).ok())
            .filter(|k| !k.is_empty())
    });
    Some(Arc::new(tool::SearchTool::new(entry, row, key)))
}
