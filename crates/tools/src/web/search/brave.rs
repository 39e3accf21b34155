//! Brave Search: `GET {base_url}/res/v1/web/search?q=…&count=…` and
//! `GET {base_url}/res/v1/images/search?q=…&count=…`, the key in `X-Subscription-Token`
//! (api-dashboard.search.brave.com/docs). Web answers carry `web.results[]` with `title`,
//! `url`, `description` (`text_decorations=false` keeps `<strong>` out of them); image
//! answers `results[]` with `title`, `url` (the page), `properties.url` (the image) and, for
//! most images since 2025-06, `properties.width`/`height`.

use super::hits::{json, Hit};
use super::{setting, Auth, Kind, Query, Request, Row, SearchBackend};

pub const WEB: Row = Row {
    name: "brave",
    package: "brave",
    kind: Kind::Web,
    default_base_url: "https://api.search.brave.com",
    auth: Auth::Header("X-Subscription-Token"),
    key_var: Some("BRAVE_SEARCH_API_KEY"),
    max_count: 20,
    settings: &[],
    backend: |_| Box::new(BraveWeb),
};

pub const IMAGES: Row = Row {
    kind: Kind::Image,
    max_count: 200,
    settings: IMAGE_SETTINGS,
    backend: |settings| {
        Box::new(BraveImages {
            params: IMAGE_SETTINGS
                .iter()
                .filter_map(|key| Some((*key, setting(settings, key)?)))
                .collect(),
        })
    },
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
        Ok(json::web_hits(
            json::list(&answer, &["web", "results"])?,
            ["title", "url", "description"],
        ))
    }
}

/// DeerFlow's Brave image keys, sent as the query parameters of the same names.
const IMAGE_SETTINGS: &[&str] = &["country", "search_lang", "safesearch", "spellcheck"];

struct BraveImages {
    params: Vec<(&'static str, String)>,
}

impl SearchBackend for BraveImages {
    fn request(&self, query: &Query) -> Request {
        let mut request = Request::get("/res/v1/images/search")
            .param("q", &query.text)
            .param("count", query.count)
            .header("accept", "application/json");
        request.params.extend(self.params.iter().cloned());
        request
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
