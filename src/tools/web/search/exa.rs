//! Exa: `POST {base_url}/search` with the key in `x-api-key`; the body's `query`,
//! `numResults`, `type` (`auto`) and `contents.highlights` (what DeerFlow asks for), the
//! answer's `results[]` with `title`, `url` and `highlights[]` (or `text`, `summary`)
//! (exa.ai/docs/reference/search).

use serde_json::{json, Value};

use super::hits::{json, Hit};
use super::{Auth, Kind, Query, Request, Row, SearchBackend};

pub const ROW: Row = Row {
    name: "exa",
    package: "exa",
    kind: Kind::Web,
    default_base_url: "https://api.exa.ai",
    auth: Auth::Header("x-api-key"),
    key_var: Some("EXA_API_KEY"),
    max_count: 100,
    backend: || Box::new(Exa),
};

/// Characters of highlights per result: a snippet, not the page.
const HIGHLIGHT_CHARS: u32 = 1000;

struct Exa;

impl SearchBackend for Exa {
    fn request(&self, query: &Query) -> Request {
        Request::post_json(
            "/search",
            json!({
                "query": query.text,
                "numResults": query.count,
                "type": "auto",
                "contents": {"highlights": {"maxCharacters": HIGHLIGHT_CHARS}},
            }),
        )
    }

    fn parse(&self, body: &[u8]) -> Result<Vec<Hit>, String> {
        let answer = json::object(body)?;
        Ok(json::list(&answer, &["results"])?
            .iter()
            .map(|r| Hit::web(json::text(r, "title"), json::text(r, "url"), &snippet(r)))
            .collect())
    }
}

fn snippet(result: &Value) -> String {
    let highlights: Vec<&str> = json::list(result, &["highlights"])
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if !highlights.is_empty() {
        return highlights.join(" … ");
    }
    [json::text(result, "summary"), json::text(result, "text")]
        .into_iter()
        .find(|t| !t.is_empty())
        .unwrap_or("")
        .to_string()
}
