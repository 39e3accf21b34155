//! DuckDuckGo's HTML endpoint (no key): `POST {base_url}/html/` with the form fields `q`,
//! `kl` (the entry's `region`) and `kp` (its `safesearch`), as DeerFlow's `ddgs` library sends
//! them. The page lists each result as a `div.result` (ads
//! carry `result--ad`) with its link in `a.result__a` — the target itself, or DuckDuckGo's
//! redirect `//duckduckgo.com/l/?uddg=TARGET` — and its snippet in `.result__snippet`; a
//! query without results shows `.no-results`, a suspected bot the `anomaly-modal` check.

use dom_query::{Document, Selection};

use super::hits::Hit;
use super::{setting, Auth, Kind, Query, Request, Row, SearchBackend};

pub const ROW: Row = Row {
    name: "duckduckgo",
    package: "ddg_search",
    kind: Kind::Web,
    default_base_url: "https://html.duckduckgo.com",
    auth: Auth::None,
    key_var: None,
    // One page (about 10 results on the HTML endpoint); the count is not sent.
    max_count: usize::MAX,
    settings: &["region", "safesearch"],
    backend: |settings| {
        Box::new(DuckDuckGo {
            region: setting(settings, "region"),
            safesearch: setting(settings, "safesearch").and_then(|s| kp(&s)),
        })
    },
};

struct DuckDuckGo {
    /// DeerFlow's `region` (`wt-wt`, `us-en`, …), the form's `kl`.
    region: Option<String>,
    /// DeerFlow's `safesearch`, the form's `kp`.
    safesearch: Option<&'static str>,
}

/// `on`, `moderate`, `off` as the HTML endpoint's `kp` spells them (as `ddgs` sends them).
fn kp(level: &str) -> Option<&'static str> {
    match level.to_ascii_lowercase().as_str() {
        "on" | "strict" => Some("1"),
        "moderate" => Some("-1"),
        "off" => Some("-2"),
        _ => None,
    }
}

impl SearchBackend for DuckDuckGo {
    fn request(&self, query: &Query) -> Request {
        let mut form = vec![("q", query.text.clone())];
        if let Some(region) = &self.region {
            form.push(("kl", region.clone()));
        }
        if let Some(kp) = self.safesearch {
            form.push(("kp", kp.to_string()));
        }
        Request::post_form("/html/", form).header("accept", "text/html")
    }

    fn parse(&self, body: &[u8]) -> Result<Vec<Hit>, String> {
        let page = Document::from(String::from_utf8_lossy(body).as_ref());
        if page.select(".anomaly-modal, #challenge-form").exists() {
            return Err("DuckDuckGo answered with its bot check instead of results".into());
        }
        let results = page.select("div.result");
        if !results.exists() {
            if page.select(".no-results").exists() {
                return Ok(Vec::new());
            }
            return Err("the page has no result list".into());
        }
        Ok(results
            .iter()
            .filter(|r| !r.has_class("result--ad"))
            .filter_map(|r| hit(&r))
            .collect())
    }
}

fn hit(result: &Selection) -> Option<Hit> {
    let link = result.select("a.result__a");
    let url = target(&link.attr("href")?)?;
    let snippet = result.select(".result__snippet").text();
    Some(Hit::web(&link.text(), &url, &snippet))
}

/// The page a result link leads to: DuckDuckGo's redirect unwrapped, its own ad links
/// (`/y.js`) dropped.
fn target(href: &str) -> Option<String> {
    let absolute = match href.strip_prefix("//") {
        Some(rest) => format!("https://{rest}"),
        None if href.starts_with('/') => format!("https://duckduckgo.com{href}"),
        None => href.to_string(),
    };
    let url = reqwest::Url::parse(&absolute).ok()?;
    let on_ddg = url
        .host_str()
        .is_some_and(|h| h == "duckduckgo.com" || h.ends_with(".duckduckgo.com"));
    if !on_ddg {
        return Some(absolute);
    }
    if url.path() != "/l/" {
        return None;
    }
    url.query_pairs()
        .find(|(k, _)| k == "uddg")
        .map(|(_, v)| v.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_are_unwrapped_and_ads_dropped() {
        assert_eq!(
            target("//duckduckgo.com/l/?uddg=https%3A%2F%2Fa.example%2Fx%3Fy%3D1&rut=abc")
                .as_deref(),
            Some("https://a.example/x?y=1")
        );
        assert_eq!(
            target("https://b.example/").as_deref(),
            Some("https://b.example/")
        );
        assert_eq!(target("//duckduckgo.com/y.js?ad_domain=x"), None);
        assert_eq!(target("not a url"), None);
    }
}
