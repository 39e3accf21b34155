//! DuckDuckGo images (no key), as DeerFlow's `ddgs` library asks for them: first
//! `GET {base_url}/?q=…` for the page's `vqd` token, then
//! `GET {base_url}/i.js?o=json&q=…&vqd=…&l=wt-wt&p=1&f=,,,,,` with that page as `Referer`,
//! whose answer lists `results[]` with `title`, `image`, `thumbnail`, `url` (the page),
//! `width`, `height`.

use super::client::Client;
use super::hits::{json, Hit};
use super::{Auth, Kind, Query, Request, Row, SearchBackend};
use crate::ToolError;
use deerflow_model::BoxFuture;

pub const ROW: Row = Row {
    name: "duckduckgo",
    package: "image_search",
    kind: Kind::Image,
    default_base_url: "https://duckduckgo.com",
    auth: Auth::None,
    key_var: None,
    // One page (100 images); the count is not sent.
    max_count: usize::MAX,
    settings: &[],
    backend: |_| Box::new(DuckDuckGoImages),
};

struct DuckDuckGoImages;

impl SearchBackend for DuckDuckGoImages {
    /// The page that carries the token.
    fn request(&self, query: &Query) -> Request {
        Request::get("/").param("q", &query.text)
    }

    fn parse(&self, body: &[u8]) -> Result<Vec<Hit>, String> {
        let answer = json::object(body)?;
        Ok(json::list(&answer, &["results"])?
            .iter()
            .map(|r| {
                let image = match json::text(r, "image") {
                    "" => json::text(r, "thumbnail"),
                    url => url,
                };
                let size = json::size(r, "width", "height");
                Hit::image(json::text(r, "title"), image, json::text(r, "url"), size)
            })
            .collect())
    }

    fn search<'a>(
        &'a self,
        client: &'a Client<'a>,
        query: &'a Query,
    ) -> BoxFuture<'a, Result<Vec<Hit>, ToolError>> {
        Box::pin(async move {
            let page = client.send(self.request(query)).await?;
            let vqd = vqd(&page)
                .ok_or_else(|| client.refused("no search token (vqd) in DuckDuckGo's page"))?;
            let referer = format!("{}/", client.base_url.trim_end_matches('/'));
            let images = Request::get("/i.js")
                .param("o", "json")
                .param("q", &query.text)
                .param("vqd", vqd)
                .param("l", "wt-wt")
                .param("p", "1")
                .param("f", ",,,,,")
                .header("referer", referer)
                .header("accept", "application/json");
            let body = client.send(images).await?;
            self.parse(&body).map_err(|e| client.malformed(&e))
        })
    }
}

/// The token in the page: `vqd="…"`, `vqd='…'` or `vqd=…&`.
fn vqd(page: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(page);
    for (open, close) in [("vqd=\"", '"'), ("vqd='", '\''), ("vqd=", '&')] {
        if let Some(start) = text.find(open).map(|i| i + open.len()) {
            if let Some(len) = text[start..].find(close) {
                let token = &text[start..start + len];
                if !token.is_empty() && token.len() < 200 {
                    return Some(token.to_string());
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_found_in_each_spelling() {
        assert_eq!(
            vqd(br#"<script>vqd="4-123",x</script>"#).as_deref(),
            Some("4-123")
        );
        assert_eq!(vqd(b"vqd='4-9'").as_deref(), Some("4-9"));
        assert_eq!(vqd(b"/d.js?vqd=4-77&kl=x").as_deref(), Some("4-77"));
        assert_eq!(vqd(b"<html>nothing</html>"), None);
    }
}
