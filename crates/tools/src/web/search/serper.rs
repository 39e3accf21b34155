//! Serper (Google results): `POST {base_url}/search` and `POST {base_url}/images`, the key in
//! `X-API-KEY`, the body `{"q": …, "num": …}` (serper.dev; its OpenAPI description). Web
//! answers carry `organic[]` with `title`, `link`, `snippet`; image answers `images[]` with
//! `title`, `imageUrl`, `imageWidth`, `imageHeight`, `link` (the page).

use serde_json::json;

use super::hits::{json, Hit};
use super::{Auth, Kind, Query, Request, Row, SearchBackend};

pub const WEB: Row = Row {
    name: "serper",
    package: "serper",
    kind: Kind::Web,
    default_base_url: "https://google.serper.dev",
    auth: Auth::Header("X-API-KEY"),
    key_var: Some("SERPER_API_KEY"),
    // DeerFlow's cap for Serper.
    max_count: 10,
    settings: &[],
    backend: |_| Box::new(SerperWeb),
};

pub const IMAGES: Row = Row {
    kind: Kind::Image,
    settings: &[],
    backend: |_| Box::new(SerperImages),
    ..WEB
};

struct SerperWeb;

impl SearchBackend for SerperWeb {
    fn request(&self, query: &Query) -> Request {
        Request::post_json("/search", json!({"q": query.text, "num": query.count}))
    }

    fn parse(&self, body: &[u8]) -> Result<Vec<Hit>, String> {
        let answer = json::object(body)?;
        Ok(json::web_hits(
            json::list(&answer, &["organic"])?,
            ["title", "link", "snippet"],
        ))
    }
}

struct SerperImages;

impl SearchBackend for SerperImages {
    fn request(&self, query: &Query) -> Request {
        Request::post_json("/images", json!({"q": query.text, "num": query.count}))
    }

    fn parse(&self, body: &[u8]) -> Result<Vec<Hit>, String> {
        let answer = json::object(body)?;
        Ok(json::list(&answer, &["images"])?
            .iter()
            .map(|r| {
                // The image itself; its thumbnail only when Serper names no original.
                let (image, size) = match json::text(r, "imageUrl") {
                    "" => (
                        json::text(r, "thumbnailUrl"),
                        json::size(r, "thumbnailWidth", "thumbnailHeight"),
                    ),
                    url => (url, json::size(r, "imageWidth", "imageHeight")),
                };
                Hit::image(json::text(r, "title"), image, json::text(r, "link"), size)
            })
            .collect())
    }
}
