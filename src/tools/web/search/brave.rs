//! Brave Search: `GET {base_url}/res/v1/web/search?q=…&count=…` and
//! `GET {base_url}/res/v1/images/search?q=…&count=…`, the key in `X-Subscription-Token`
//! (api-dashboard.search.brave.com/docs). Web answers carry `web.results[]` with `title`,
//! `url`, `description` (`text_decorations=false` keeps `<strong>` out of them); image
//! answers `results[]` with `title`, `url` (the page), `properties.url` (the image) and, for
//! most images since 2025-06, `properties.width`/`height`.

use super::hits::{json, Hit};
use super::{Auth, Kind, Query, Request, Row, SearchBackend};

pub const WEB: Row = Row {
    name: "brave",
    package: "brave",
    kind: Kind::Web,
    default_base_url: "https://api.search.brave.com",
    auth: Auth::Header("X-Subscription-Token"),
    key_var: Some("BRAVE_SEARCH_API_KEY"),
    max_count: 20,
    backend: || Box::new(BraveWeb),
};

pub const IMAGES: Row = Row {
    kind: Kind::Image,
    max_count: 200,
    backend: || Box::new(BraveImages),
    ..WEB
};

struct BraveWeb;

impl SearchBackend for BraveWeb {
    fn request(&self, query: &Query) -> Request {
        Request::get("/res/v1/web/search")
            .param("q", &query.text)
            .param("count", query.count)
            .param("text_decorations", "false")
            .header("accept", "application/json")
    }

    fn parse(&self, body: &[u8]) -> Result<Vec<Hit>, String> {
        let answer = json::object(body)?;
        Ok(json::list(&answer, &["web", "results"])?
            .iter()
            .map(|r| {
                Hit::web(
                    json::text(r, "title"),
                    json::text(r, "url"),
                    json::text(r, "description"),
                )
            })
            .collect())
    }
}

struct BraveImages;

impl SearchBackend for BraveImages {
    fn request(&self, query: &Query) -> Request {
        Request::get("/res/v1/images/search")
            .param("q", &query.text)
            .param("count", query.count)
            .header("accept", "application/json")
    }

    fn parse(&self, body: &[u8]) -> Result<Vec<Hit>, String> {
        let answer = json::object(body)?;
        Ok(json::list(&answer, &["results"])?
            .iter()
            .map(|r| {
                let properties = r.get("properties").cloned().unwrap_or_default();
                let thumbnail = r.get("thumbnail").cloned().unwrap_or_default();
                // The image itself; its thumbnail only when Brave names no original.
                let (image, size) = match json::text(&properties, "url") {
                    "" => (
                        json::text(&thumbnail, "src"),
                        json::size(&thumbnail, "width", "height"),
                    ),
                    url => (url, json::size(&properties, "width", "height")),
                };
                Hit::image(json::text(r, "title"), image, json::text(r, "url"), size)
            })
            .collect())
    }
}
