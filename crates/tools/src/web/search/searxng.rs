//! SearXNG (self-hosted, no key): `GET {base_url}/search?q=…&format=json`, the answer's
//! `results[]` with `url`, `title`, `content` (docs.searxng.org, "Search API"). An instance
//! answers 403 until `json` is among its `search.formats`.

use super::hits::{json, Hit};
use super::{Auth, Kind, Query, Request, Row, SearchBackend};

pub const ROW: Row = Row {
    name: "searxng",
    package: "searxng",
    kind: Kind::Web,
    default_base_url: "http://localhost:8088",
    auth: Auth::None,
    key_var: None,
    // One page of ~20; SearXNG takes no count.
    max_count: usize::MAX,
    settings: &[],
    backend: |_| Box::new(Searxng),
};

struct Searxng;

impl SearchBackend for Searxng {
    fn request(&self, query: &Query) -> Request {
        Request::get("/search")
            .param("q", &query.text)
            .param("format", "json")
            .param("pageno", 1)
            .header("accept", "application/json")
    }

    fn parse(&self, body: &[u8]) -> Result<Vec<Hit>, String> {
        let answer = json::object(body)?;
        Ok(json::web_hits(
            json::list(&answer, &["results"])?,
            ["title", "url", "content"],
        ))
    }
}
