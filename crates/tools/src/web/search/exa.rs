//! Exa: `POST {base_url}/search` with the key in `x-api-key`; the body's `query`,
//! `numResults`, `type` (the entry's `search_type`, else `auto`) and
//! `contents.highlights.maxCharacters` (`contents_max_characters`, else 1000), as DeerFlow asks; the
//! answer's `results[]` with `title`, `url` and `highlights[]` (or `text`, `summary`)
//! (exa.ai/docs/reference/search).

use serde_json::{json, Value};

use super::hits::{json, Hit};
use super::{setting, Auth, Kind, Query, Request, Row, SearchBackend};

pub const ROW: Row = Row {
    name: "exa",
    package: "exa",
    kind: Kind::Web,
    default_base_url: "https://api.exa.ai",
    auth: Auth::Header("x-api-key"),
    key_var: Some("EXA_API_KEY"),
    max_count: 100,
    settings: &["search_type", "contents_max_characters"],
    backend: |settings| {
        Box::new(Exa {
            search_type: setting(settings, "search_type").unwrap_or_else(|| "auto".into()),
            highlight_chars: setting(settings, "contents_max_characters")
                .and_then(|n| n.parse().ok())
                .filter(|n| *n > 0)
                .unwrap_or(HIGHLIGHT_CHARS),
        })
    },
};

/// Characters of highlights per result: a snippet, not the page (DeerFlow's default for
/// `contents_max_characters`).
const HIGHLIGHT_CHARS: u64 = 1000;

struct Exa {
    /// DeerFlow's `search_type`: `auto`, `neural`, `keyword`, …
    search_type: String,
    highlight_chars: u64,
}

impl SearchBackend for Exa {
    fn request(&self, query: &Query) -> Request {
        Request::post_json(
            "/search",
            json!({
                "query": query.text,
                "numResults": query.count,
                "type": self.search_type,
                "contents": {"highlights": {"maxCharacters": self.highlight_chars}},
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
