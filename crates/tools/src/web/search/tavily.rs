//! Tavily: `POST {base_url}/search`, the key as `Authorization: Bearer`; the body's `query`,
//! `max_results` (0–20) and `search_depth` (`basic`, one credit), the answer's `results[]`
//! with `title`, `url`, `content` (docs.tavily.com/api-reference/endpoint/search).

use serde_json::json;

use super::hits::{json, Hit};
use super::{Auth, Kind, Query, Request, Row, SearchBackend};

pub const ROW: Row = Row {
    name: "tavily",
    package: "tavily",
    kind: Kind::Web,
    default_base_url: "https://api.tavily.com",
    auth: Auth::Bearer,
    key_var: Some("TAVILY_API_KEY"),
    max_count: 20,
    settings: &[],
    backend: |_| Box::new(Tavily),
};

struct Tavily;

impl SearchBackend for Tavily {
    fn request(&self, query: &Query) -> Request {
        Request::post_json(
            "/search",
            json!({"query": query.text, "max_results": query.count, "search_depth": "basic"}),
        )
    }

    fn parse(&self, body: &[u8]) -> Result<Vec<Hit>, String> {
        let answer = json::object(body)?;
        Ok(json::web_hits(
            json::list(&answer, &["results"])?,
            ["title", "url", "content"],
        ))
    }
}
