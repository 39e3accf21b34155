//! Firecrawl: `POST {base_url}/v1/search`, bearer key; the body's `query` and `limit`, the
//! answer `{"success": true, "data": [{url, title, description}]}`
//! (docs.firecrawl.dev/api-reference/endpoint/search). The v2 shape, `data.web[]`, is read too,
//! for a `base_url` pointing at a newer server.

use serde_json::{json, Value};

use super::hits::{json, Hit};
use super::{Auth, Kind, Query, Request, Row, SearchBackend};

pub const ROW: Row = Row {
    name: "firecrawl",
    package: "firecrawl",
    kind: Kind::Web,
    default_base_url: "https://api.firecrawl.dev",
    auth: Auth::Bearer,
    key_var: Some("FIRECRAWL_API_KEY"),
    max_count: 100,
    settings: &[],
    backend: |_| Box::new(Firecrawl),
};

struct Firecrawl;

impl SearchBackend for Firecrawl {
    fn request(&self, query: &Query) -> Request {
        Request::post_json(
            "/v1/search",
            json!({"query": query.text, "limit": query.count}),
        )
    }

    fn parse(&self, body: &[u8]) -> Result<Vec<Hit>, String> {
        let answer = json::object(body)?;
        if answer.get("success") == Some(&Value::Bool(false)) {
            let error = json::text(&answer, "error");
            return Err(format!("success: false: {error}"));
        }
        let results = match answer.get("data") {
            Some(Value::Object(_)) => json::list(&answer, &["data", "web"])?,
            _ => json::list(&answer, &["data"])?,
        };
        Ok(json::web_hits(results, ["title", "url", "description"]))
    }
}
