//! How a backend's request reaches its service: the shared HTTP service (timeouts, retries
//! with `Retry-After`, bounded bodies, same-origin redirects), the key in the header the
//! service wants, and every failure turned into a tool error naming the service — without
//! the key (contract §14).

use reqwest::header::{HeaderValue, AUTHORIZATION, USER_AGENT};
use reqwest::Method;
use serde_json::Value;

use super::{Auth, Row};
use crate::ToolError;
use deerflow_base::text::without_url_credentials;
use deerflow_model::error_text::redact;
use deerflow_model::http::HttpService;
use deerflow_model::{CallContext, ModelError};

/// A search answer larger than this is no search answer.
const BODY_LIMIT: usize = 8 << 20;

/// What a request carries besides its URL.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Empty,
    Json(Value),
    /// `application/x-www-form-urlencoded`.
    Form(Vec<(&'static str, String)>),
}

/// One request of a backend, its path relative to the entry's `base_url`.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub method: Method,
    pub path: String,
    pub params: Vec<(&'static str, String)>,
    pub headers: Vec<(&'static str, String)>,
    pub body: Body,
}

impl Request {
    pub fn get(path: &str) -> Self {
        Self {
            method: Method::GET,
            path: path.to_string(),
            params: Vec::new(),
            headers: Vec::new(),
            body: Body::Empty,
        }
    }

    pub fn post_json(path: &str, body: Value) -> Self {
        Self {
            method: Method::POST,
            body: Body::Json(body),
            ..Self::get(path)
        }
    }

    pub fn post_form(path: &str, fields: Vec<(&'static str, String)>) -> Self {
        Self {
            method: Method::POST,
            body: Body::Form(fields),
            ..Self::get(path)
        }
    }

    pub fn param(mut self, name: &'static str, value: impl ToString) -> Self {
        self.params.push((name, value.to_string()));
        self
    }

    pub fn header(mut self, name: &'static str, value: impl ToString) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }
}

/// One call's way to its service.
pub struct Client<'a> {
    pub(super) row: &'static Row,
    /// `web search`, `image search`: what failed, in errors.
    pub(super) what: &'static str,
    pub(super) base_url: &'a str,
    pub(super) key: Option<&'a str>,
    pub(super) service: &'a HttpService,
    pub(super) ctx: CallContext,
}

impl Client<'_> {
    /// Sends `request`, retrying 429 and 5xx answers and lost connections, and returns the
    /// body of the successful answer.
    pub async fn send(&self, request: Request) -> Result<Vec<u8>, ToolError> {
        let request = self.prepare(request)?;
        crate::web::retrying(self.service, &self.ctx, || self.attempt(&request))
            .await
            .map_err(|e| self.failure(e))
    }

    /// A successful answer that could not be read.
    pub fn malformed(&self, problem: &str) -> ToolError {
        let problem = deerflow_base::text::clip(problem, 200);
        ToolError::failed(
            self.what,
            format!(
                "{} returned a malformed answer (HTTP 200): {problem}",
                self.row.name
            ),
        )
    }

    /// A failure in the backend's own words (a token it could not find, a bot check).
    pub fn refused(&self, problem: &str) -> ToolError {
        ToolError::failed(self.what, format!("{}: {problem}", self.row.name))
    }

    async fn attempt(&self, request: &reqwest::Request) -> Result<Vec<u8>, ModelError> {
        self.service
            .bounded(self.key, async {
                let response = self.service.send(request).await?;
                self.service.read_body(response, BODY_LIMIT).await
            })
            .await
    }

    fn failure(&self, err: ModelError) -> ToolError {
        if err == ModelError::Cancelled {
            return ToolError::Message(format!("{} cancelled", self.what));
        }
        // `bounded` redacted the attempt's errors already; a request that could not even be
        // built went through no attempt.
        let err = redact(err, self.key).to_string();
        // A `base_url` may carry `user:pass@`; connection errors name the URL (§12).
        ToolError::failed(self.what, without_url_credentials(&err))
    }

    fn prepare(&self, request: Request) -> Result<reqwest::Request, ToolError> {
        let url = format!("{}{}", self.base_url.trim_end_matches('/'), request.path);
        let mut url = reqwest::Url::parse(&url).map_err(|e| {
            let url = without_url_credentials(&url);
            ToolError::failed(
                self.what,
                format!("{}: bad base_url {url}: {e}", self.row.name),
            )
        })?;
        if !request.params.is_empty() {
            url.query_pairs_mut().extend_pairs(&request.params);
        }
        let user_agent = concat!("deerflow/", env!("CARGO_PKG_VERSION"));
        let mut builder = self
            .service
            .client()
            .request(request.method, url)
            .header(USER_AGENT, user_agent);
        for (name, value) in &request.headers {
            builder = builder.header(*name, value);
        }
        builder = match request.body {
            Body::Empty => builder,
            Body::Json(value) => builder
                .header("content-type", "application/json")
                .body(value.to_string()),
            Body::Form(fields) => builder
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form_encode(&fields)),
        };
        if let Some((name, value)) = self.key_header()? {
            builder = builder.header(name, value);
        }
        builder
            .build()
            .map_err(|e| self.failure(self.service.send_error(&e)))
    }

    /// The key where the service wants it, marked sensitive so no rendering of the request
    /// shows it.
    fn key_header(&self) -> Result<Option<(&'static str, HeaderValue)>, ToolError> {
        let (name, value) = match (self.row.auth, self.key) {
            (Auth::None, _) | (_, None) => return Ok(None),
            (Auth::Bearer, Some(key)) => (AUTHORIZATION.as_str(), format!("Bearer {key}")),
            (Auth::Header(name), Some(key)) => (name, key.to_string()),
        };
        let mut value = HeaderValue::from_str(&value)
            .map_err(|_| self.refused("the API key has characters no HTTP header may carry"))?;
        value.set_sensitive(true);
        Ok(Some((name, value)))
    }
}

/// `a=1&b=x+y`: an HTML form's encoding.
fn form_encode(fields: &[(&'static str, String)]) -> String {
    // The URL parser's own serializer, through a throwaway URL: no second encoder to trust.
    match reqwest::Url::parse("http://x/") {
        Ok(mut scratch) => {
            scratch.query_pairs_mut().extend_pairs(fields);
            scratch.query().unwrap_or("").to_string()
        }
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_is_encoded_as_html_forms_are() {
        assert_eq!(form_encode(&[("q", "a b&c".into())]), "q=a+b%26c");
    }
}
