//! The remote readers of `web_fetch` (contract §14): a service fetches the page and answers
//! Markdown. Each is a row of data (name, `use:` word, default address, how the key is sent)
//! plus a request builder and a response parser; all share one [`HttpService`] per entry —
//! the outbound policy (same-origin redirects, the key never resent elsewhere), timeouts,
//! and retries of 429/5xx with `Retry-After`.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use reqwest::Url;
use serde_json::{json, Value};

use super::{FetchBackend, Page};
use crate::web::WebEntry;
use crate::ToolError;
use deerflow_model::http::{endpoint, HttpService, Timeouts};
use deerflow_model::{BoxFuture, CallContext, ModelError};

/// The most of a service's answer read (a page of Markdown in JSON).
const MAX_ANSWER: usize = 16 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Service {
    Jina,
    Firecrawl,
    Exa,
    Crawl4ai,
}

/// How a service takes its key.
enum KeyHeader {
    Bearer,
    Named(&'static str),
}

/// One row per service: the name errors carry, the word of DeerFlow's `use:` that picks it,
/// the default address, the variable the key is read from when the entry has none, and how
/// the key is sent.
struct Row {
    service: Service,
    name: &'static str,
    word: &'static str,
    base_url: &'static str,
    key_var: Option<&'static str>,
    key_header: KeyHeader,
}

const ROWS: &[Row] = &[
    Row {
        service: Service::Jina,
        name: "jina",
        word: "jina_ai",
        base_url: "https://r.jina.ai",
        key_var: Some("JINA_API_KEY"),
        key_header: KeyHeader::Bearer,
    },
    Row {
        service: Service::Firecrawl,
        name: "firecrawl",
        word: "firecrawl",
        base_url: "https://api.firecrawl.dev",
        key_var: Some("FIRECRAWL_API_KEY"),
        key_header: KeyHeader::Bearer,
    },
    Row {
        service: Service::Exa,
        name: "exa",
        word: "exa",
        base_url: "https://api.exa.ai",
        key_var: Some("EXA_API_KEY"),
        key_header: KeyHeader::Named("x-api-key"),
    },
    Row {
        service: Service::Crawl4ai,
        name: "crawl4ai",
        word: "crawl4ai",
        base_url: "http://localhost:11235",
        key_var: None,
        key_header: KeyHeader::Bearer,
    },
];

/// The remote backend `entry.use_path` names (`deerflow.community.jina_ai.tools:…`: a word
/// between the dots), if deerflow serves it.
pub fn build(entry: &WebEntry) -> Option<Box<dyn FetchBackend>> {
    let words: Vec<&str> = entry.use_path.split(['.', ':']).collect();
    let row = ROWS.iter().find(|r| words.contains(&r.word))?;
    Some(Box::new(Remote::new(row, entry)))
}

pub struct Remote {
    service: Service,
    base_url: String,
    /// `None` when the client could not be set up: every call then says why.
    http: Result<HttpService, ModelError>,
    key: Option<String>,
}

impl Remote {
    fn new(row: &Row, entry: &WebEntry) -> Self {
        let key = match row.service {
            // Crawl4AI's bearer is its `token:` key.
            Service::Crawl4ai => entry
                .extra
                .get("token")
                .and_then(Value::as_str)
                .map(String::from)
                .or_else(|| entry.api_key.clone()),
            _ => entry
                .api_key
                .clone()
                .or_else(|| row.key_var.and_then(|v| std::env::var(v).ok())),
        }
        .filter(|k| !k.is_empty());
        let timeouts = Timeouts {
            connect: entry.timeout.min(Duration::from_secs(10)),
            request: entry.timeout,
            idle: entry.timeout,
        };
        let http = HttpService::with_headers(
            row.name,
            timeouts,
            crate::web::MAX_RETRIES,
            key_headers(&row.key_header, key.as_deref()),
        );
        Self {
            service: row.service,
            base_url: entry
                .base_url
                .clone()
                .unwrap_or_else(|| row.base_url.to_string()),
            http,
            key,
        }
    }

    /// The request the service documents for reading `url`.
    fn request(&self, http: &HttpService, url: &Url) -> reqwest::RequestBuilder {
        let client = http.client();
        let post = |path: &str, body: Value| {
            client
                .post(endpoint(&self.base_url, path))
                .header(CONTENT_TYPE, "application/json")
                .body(body.to_string())
        };
        match self.service {
            // The page's URL as the path, as r.jina.ai documents (`GET /https://…`).
            Service::Jina => client
                .get(endpoint(&self.base_url, &format!("/{url}")))
                .header("X-Return-Format", "markdown"),
            Service::Firecrawl => post(
                "/v1/scrape",
                json!({"url": url.as_str(), "formats": ["markdown"], "onlyMainContent": true}),
            ),
            Service::Exa => post("/contents", json!({"urls": [url.as_str()], "text": true})),
            Service::Crawl4ai => post("/md", json!({"url": url.as_str(), "f": "fit"})),
        }
    }

    async fn call(&self, url: &Url, ctx: &CallContext) -> Result<Vec<u8>, ModelError> {
        let http = self.http.as_ref().map_err(Clone::clone)?;
        crate::web::retrying(http, ctx, || {
            http.bounded(self.key.as_deref(), async {
                let request = self
                    .request(http, url)
                    .build()
                    .map_err(|e| http.send_error(&e))?;
                let response = http.send(&request).await?;
                http.read_body(response, MAX_ANSWER).await
            })
        })
        .await
    }

    fn parse(&self, url: &Url, body: &[u8]) -> Result<Page, Problem> {
        let text = String::from_utf8_lossy(body);
        if self.service == Service::Jina {
            return Ok(jina_page(url.as_str(), &text));
        }
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| Problem::Malformed(format!("the answer is not JSON ({e})")))?;
        match self.service {
            Service::Firecrawl => firecrawl_page(url.as_str(), &v),
            Service::Exa => exa_page(url.as_str(), &v),
            Service::Crawl4ai | Service::Jina => crawl4ai_page(url.as_str(), &v),
        }
    }

    fn name(&self) -> &'static str {
        ROWS.iter()
            .find(|r| r.service == self.service)
            .map_or("web_fetch", |r| r.name)
    }
}

impl FetchBackend for Remote {
    fn remote(&self) -> bool {
        true
    }

    fn fetch<'a>(
        &'a self,
        url: &'a Url,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<Page, ToolError>> {
        Box::pin(async move {
            let body = self
                .call(url, ctx)
                .await
                .map_err(|e| ToolError::Message(e.to_string()))?;
            self.parse(url, &body).map_err(|problem| {
                let name = self.name();
                ToolError::Message(match problem {
                    Problem::Failed(why) => format!("{name} could not read the page: {why}"),
                    Problem::Malformed(why) => format!("{name} returned a malformed answer: {why}"),
                })
            })
        })
    }
}

/// Why a service's answer gave no page.
enum Problem {
    /// The service says it could not read the page.
    Failed(String),
    /// The answer is not what the service documents.
    Malformed(String),
}

impl Problem {
    fn missing(field: &str) -> Self {
        Problem::Malformed(format!("no {field}"))
    }
}

fn key_headers(how: &KeyHeader, key: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let Some(key) = key else {
        return headers;
    };
    let (name, value) = match how {
        KeyHeader::Bearer => (AUTHORIZATION, format!("Bearer {key}")),
        KeyHeader::Named(name) => match reqwest::header::HeaderName::from_bytes(name.as_bytes()) {
            Ok(n) => (n, key.to_string()),
            Err(_) => return headers,
        },
    };
    // A key with bytes a header cannot carry is left out; the service then says 401.
    if let Ok(mut value) = HeaderValue::from_str(&value) {
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    headers
}

/// Jina's text answer: `Title: …`, `URL Source: …`, then `Markdown Content:` and the page.
fn jina_page(url: &str, text: &str) -> Page {
    let mut title = None;
    let mut source = None;
    let mut rest = text;
    while let Some((line, after)) = rest.split_once('\n') {
        if let Some(t) = line.strip_prefix("Title:") {
            title = Some(t.trim().to_string()).filter(|t| !t.is_empty());
        } else if let Some(u) = line.strip_prefix("URL Source:") {
            source = Some(u.trim().to_string());
        } else if line.starts_with("Markdown Content:") {
            return Page::new(
                source.as_deref().unwrap_or(url),
                title,
                after.trim().to_string(),
            );
        } else if !line.trim().is_empty() && !line.contains(':') {
            break;
        }
        rest = after;
    }
    Page::new(url, None, text.trim().to_string())
}

/// `{"success": true, "data": {"markdown": …, "metadata": {"title", "sourceURL"}}}`.
fn firecrawl_page(url: &str, v: &Value) -> Result<Page, Problem> {
    if v["success"] == Value::Bool(false) {
        let error = v["error"].as_str().unwrap_or("no details");
        return Err(Problem::Failed(error.to_string()));
    }
    let data = &v["data"];
    let markdown = data["markdown"]
        .as_str()
        .ok_or(Problem::missing("data.markdown"))?;
    let meta = &data["metadata"];
    let source = meta["sourceURL"]
        .as_str()
        .or(meta["url"].as_str())
        .unwrap_or(url);
    Ok(Page::new(
        source,
        text_field(&meta["title"]),
        markdown.trim().to_string(),
    ))
}

/// `{"results": [{"url", "title", "text"}], "statuses": [{"status": "error", "error": …}]}`.
fn exa_page(url: &str, v: &Value) -> Result<Page, Problem> {
    let Some(first) = v["results"].as_array().and_then(|r| r.first()) else {
        let status = v["statuses"][0]["error"]["tag"]
            .as_str()
            .or(v["statuses"][0]["status"].as_str())
            .unwrap_or("no results");
        return Err(Problem::Failed(status.to_string()));
    };
    let text = first["text"]
        .as_str()
        .ok_or(Problem::missing("results[0].text"))?;
    let source = first["url"].as_str().unwrap_or(url);
    Ok(Page::new(
        source,
        text_field(&first["title"]),
        text.trim().to_string(),
    ))
}

/// `{"url": …, "markdown": …, "success": true}`.
fn crawl4ai_page(url: &str, v: &Value) -> Result<Page, Problem> {
    if v["success"] == Value::Bool(false) {
        return Err(Problem::Failed("no details".into()));
    }
    let markdown = v["markdown"].as_str().ok_or(Problem::missing("markdown"))?;
    let source = v["url"].as_str().unwrap_or(url);
    Ok(Page::new(source, None, markdown.trim().to_string()))
}

fn text_field(v: &Value) -> Option<String> {
    v.as_str()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}
