//! Every backend against a mock of its service on 127.0.0.1 answering the documented shape:
//! the request the mock received (method, path, key header, body) and the text the model
//! gets; then the failures every backend shares (status, retry, malformed, timeout).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::{SandboxLimits, ToolContext, ToolStatus};
use deerflow_model::test_support::{serve, Captured, Reply};
use deerflow_model::ToolCall;
use deerflow_workspace::Workspace;

const KEY: &str = "sk-SECRET-4711";

fn entry(name: &str, use_path: &str, base: &str) -> WebEntry {
    let mut e = WebEntry::new(name, use_path);
    e.base_url = Some(base.to_string());
    e.api_key = Some(KEY.to_string());
    e.max_results = Some(3);
    e.timeout = Duration::from_secs(5);
    e
}

fn web(package: &str, base: &str) -> WebEntry {
    let use_path = format!("deerflow.community.{package}.tools:web_search_tool");
    entry("web_search", &use_path, base)
}

fn images(package: &str, base: &str) -> WebEntry {
    let use_path = format!("deerflow.community.{package}.tools:image_search_tool");
    entry("image_search", &use_path, base)
}

async fn call(entry: &WebEntry, args: Value) -> (ToolStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext {
        workspace: Arc::new(Workspace::new(dir.path(), None).unwrap()),
        limits: Arc::new(SandboxLimits::default()),
        cancel: CancellationToken::new(),
    };
    let tool = build(entry).expect("a served backend");
    let out = tool
        .call(&ToolCall::new("c1", tool.name(), args), &ctx)
        .await;
    (out.status, out.into_text())
}

/// Serves `replies`, calls the tool, and hands back what the mock saw and what the model got
/// (also printed, for the record of each backend's exchange).
async fn exchange(
    mut entry: WebEntry,
    replies: Vec<Reply>,
    args: Value,
) -> (Vec<Captured>, ToolStatus, String) {
    let (base, seen) = serve(replies).await;
    let old = entry.base_url.replace(base.clone());
    // A base with a path keeps it (`http://host/api` + `/search`).
    if let Some(path) = old.as_deref().and_then(|o| o.strip_prefix("MOCK")) {
        entry.base_url = Some(format!("{base}{path}"));
    }
    let (status, text) = call(&entry, args).await;
    let seen: Vec<Captured> = seen.lock().unwrap().clone();
    for c in &seen {
        eprintln!("--- {} request:\n{}\n\n{}", entry.use_path, c.head, c.body);
    }
    eprintln!("--- {} answer ({status:?}):\n{text}", entry.use_path);
    (seen, status, text)
}

fn header<'a>(c: &'a Captured, name: &str) -> Option<&'a str> {
    c.head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn body(c: &Captured) -> Value {
    serde_json::from_str(&c.body).unwrap()
}

fn ok(body: Value) -> Reply {
    Reply::json(200, &body.to_string())
}

const TWO_AND_A_DUP: &str = "1. Rust\n   https://www.rust-lang.org/\n   A language empowering \
everyone.\n\n2. Tokio\n   https://tokio.rs/\n   An asynchronous runtime.\n";

#[tokio::test]
async fn tavily_posts_the_query_with_a_bearer_key() {
    let answer = json!({"query": "rust async", "results": [
        {"title": "Rust", "url": "https://www.rust-lang.org/", "content": "A language empowering everyone.", "score": 0.9},
        {"title": "Rust (dup)", "url": "https://www.rust-lang.org/", "content": "again", "score": 0.8},
        {"title": "Tokio", "url": "https://tokio.rs/", "content": "An asynchronous runtime.", "score": 0.7}
    ], "response_time": 1.2});
    let (seen, status, text) = exchange(
        web("tavily", "x"),
        vec![ok(answer)],
        json!({"query": "rust async"}),
    )
    .await;
    assert_eq!((status, text.as_str()), (ToolStatus::Ok, TWO_AND_A_DUP));
    assert!(seen[0].head.starts_with("POST /search HTTP/1.1"));
    assert_eq!(
        header(&seen[0], "authorization"),
        Some("Bearer sk-SECRET-4711")
    );
    assert_eq!(header(&seen[0], "content-type"), Some("application/json"));
    assert_eq!(
        body(&seen[0]),
        json!({"query": "rust async", "max_results": 3, "search_depth": "basic"})
    );
}

#[tokio::test]
async fn brave_gets_web_results_with_the_subscription_token() {
    let answer = json!({"type": "search", "web": {"type": "search", "results": [
        {"title": "Rust", "url": "https://www.rust-lang.org/", "description": "A language empowering everyone."},
        {"title": "Tokio", "url": "https://tokio.rs/", "description": "An asynchronous runtime."},
        {"title": "Third", "url": "https://third.example/", "description": "cut by max_results"}
    ]}});
    let (seen, status, text) = exchange(
        web("brave", "x"),
        vec![ok(answer)],
        json!({"query": "rust async", "max_results": 2}),
    )
    .await;
    assert_eq!((status, text.as_str()), (ToolStatus::Ok, TWO_AND_A_DUP));
    assert!(
        seen[0]
            .head
            .starts_with("GET /res/v1/web/search?q=rust+async&count=2&text_decorations=false "),
        "{}",
        seen[0].head
    );
    assert_eq!(header(&seen[0], "x-subscription-token"), Some(KEY));
    assert_eq!(header(&seen[0], "accept"), Some("application/json"));
}

#[tokio::test]
async fn serper_posts_q_and_num_with_x_api_key() {
    let answer = json!({"searchParameters": {"q": "rust async", "type": "search"}, "organic": [
        {"title": "Rust", "link": "https://www.rust-lang.org/", "snippet": "A language empowering everyone.", "position": 1},
        {"title": "Tokio", "link": "https://tokio.rs/", "snippet": "An asynchronous runtime.", "position": 2}
    ]});
    let (seen, status, text) = exchange(
        web("serper", "x"),
        vec![ok(answer)],
        json!({"query": "rust async"}),
    )
    .await;
    assert_eq!((status, text.as_str()), (ToolStatus::Ok, TWO_AND_A_DUP));
    assert!(seen[0].head.starts_with("POST /search HTTP/1.1"));
    assert_eq!(header(&seen[0], "x-api-key"), Some(KEY));
    assert_eq!(body(&seen[0]), json!({"q": "rust async", "num": 3}));
}

#[tokio::test]
async fn exa_posts_num_results_and_asks_for_highlights() {
    let answer = json!({"requestId": "r1", "results": [
        {"id": "1", "title": "Rust", "url": "https://www.rust-lang.org/", "highlights": ["A language empowering everyone."]},
        {"id": "2", "title": "Tokio", "url": "https://tokio.rs/", "text": "An asynchronous runtime."}
    ]});
    let (seen, status, text) = exchange(
        web("exa", "x"),
        vec![ok(answer)],
        json!({"query": "rust async"}),
    )
    .await;
    assert_eq!((status, text.as_str()), (ToolStatus::Ok, TWO_AND_A_DUP));
    assert!(seen[0].head.starts_with("POST /search HTTP/1.1"));
    assert_eq!(header(&seen[0], "x-api-key"), Some(KEY));
    assert_eq!(
        body(&seen[0]),
        json!({"query": "rust async", "numResults": 3, "type": "auto",
               "contents": {"highlights": {"maxCharacters": 1000}}})
    );
}

#[tokio::test]
async fn firecrawl_posts_query_and_limit_to_v1_search() {
    let answer = json!({"success": true, "data": [
        {"title": "Rust", "url": "https://www.rust-lang.org/", "description": "A language empowering everyone."},
        {"title": "Tokio", "url": "https://tokio.rs/", "description": "An asynchronous runtime."}
    ]});
    let (seen, status, text) = exchange(
        web("firecrawl", "x"),
        vec![ok(answer)],
        json!({"query": "rust async"}),
    )
    .await;
    assert_eq!((status, text.as_str()), (ToolStatus::Ok, TWO_AND_A_DUP));
    assert!(seen[0].head.starts_with("POST /v1/search HTTP/1.1"));
    assert_eq!(
        header(&seen[0], "authorization"),
        Some("Bearer sk-SECRET-4711")
    );
    assert_eq!(body(&seen[0]), json!({"query": "rust async", "limit": 3}));
    // The v2 shape reads the same.
    let v2 = json!({"success": true, "data": {"web": [
        {"title": "Tokio", "url": "https://tokio.rs/", "description": "An asynchronous runtime."}
    ]}});
    let (_, status, text) =
        exchange(web("firecrawl", "x"), vec![ok(v2)], json!({"query": "q"})).await;
    assert_eq!(status, ToolStatus::Ok);
    assert!(text.starts_with("1. Tokio\n   https://tokio.rs/"), "{text}");
}

#[tokio::test]
async fn searxng_gets_json_without_a_key_under_its_base_path() {
    let answer = json!({"query": "rust async", "number_of_results": 0, "results": [
        {"url": "https://www.rust-lang.org/", "title": "Rust", "content": "A language empowering everyone.", "engine": "duckduckgo"},
        {"url": "https://tokio.rs/", "title": "Tokio", "content": "An asynchronous runtime.", "engine": "brave"}
    ], "answers": [], "suggestions": []});
    let mut e = web("searxng", "MOCK/searx");
    e.api_key = None;
    let (seen, status, text) = exchange(e, vec![ok(answer)], json!({"query": "rust async"})).await;
    assert_eq!((status, text.as_str()), (ToolStatus::Ok, TWO_AND_A_DUP));
    assert!(
        seen[0]
            .head
            .starts_with("GET /searx/search?q=rust+async&format=json&pageno=1 "),
        "{}",
        seen[0].head
    );
    assert_eq!(header(&seen[0], "authorization"), None);
}

/// The HTML endpoint's page as it comes: results, an ad, redirect links, markup in titles.
const DDG_PAGE: &str = r#"<!DOCTYPE html><html><body><div id="links" class="results">
<div class="result results_links results_links_deep result--ad">
  <div class="links_main links_deep result__body"><h2 class="result__title">
  <a rel="nofollow" class="result__a" href="https://duckduckgo.com/y.js?ad_domain=ads.example">Buy now</a></h2>
  <a class="result__snippet" href="https://duckduckgo.com/y.js?x">An ad.</a></div></div>
<div class="result results_links results_links_deep web-result">
  <div class="links_main links_deep result__body"><h2 class="result__title">
  <a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.rust%2Dlang.org%2F&amp;rut=abc"><b>Rust</b></a></h2>
  <div class="result__extras"><a class="result__url" href="x">www.rust-lang.org</a></div>
  <a class="result__snippet" href="x">A language <b>empowering</b>
  everyone.</a></div></div>
<div class="result results_links results_links_deep web-result">
  <div class="links_main links_deep result__body"><h2 class="result__title">
  <a rel="nofollow" class="result__a" href="https://www.rust-lang.org/">Rust again</a></h2>
  <a class="result__snippet" href="x">Duplicate.</a></div></div>
<div class="result results_links results_links_deep web-result">
  <div class="links_main links_deep result__body"><h2 class="result__title">
  <a rel="nofollow" class="result__a" href="https://tokio.rs/">Tokio</a></h2>
  <a class="result__snippet" href="x">An asynchronous runtime.</a></div></div>
</div></body></html>"#;

fn html(status: u16, page: &str) -> Reply {
    Reply {
        status,
        headers: vec![("Content-Type".into(), "text/html; charset=UTF-8".into())],
        body: page.to_string(),
    }
}

#[tokio::test]
async fn duckduckgo_posts_the_form_and_reads_the_result_page() {
    let mut e = web("ddg_search", "x");
    e.api_key = None;
    let (seen, status, text) =
        exchange(e, vec![html(200, DDG_PAGE)], json!({"query": "rust async"})).await;
    assert_eq!((status, text.as_str()), (ToolStatus::Ok, TWO_AND_A_DUP));
    assert!(seen[0].head.starts_with("POST /html/ HTTP/1.1"));
    assert_eq!(
        header(&seen[0], "content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(seen[0].body, "q=rust+async");
}

#[tokio::test]
async fn duckduckgo_without_results_and_with_a_bot_check() {
    let mut e = web("ddg_search", "x");
    e.api_key = None;
    let none = r#"<html><body><div class="no-results">No results.</div></body></html>"#;
    let (_, status, text) =
        exchange(e.clone(), vec![html(200, none)], json!({"query": "zzqx"})).await;
    assert_eq!(
        (status, text.as_str()),
        (ToolStatus::Ok, "No results for \"zzqx\".")
    );
    let check = r#"<html><body><div class="anomaly-modal__modal">x</div><form id="challenge-form"></form></body></html>"#;
    let (_, status, text) = exchange(e, vec![html(202, check)], json!({"query": "q"})).await;
    assert_eq!(status, ToolStatus::Error);
    assert_eq!(
        text,
        "Error: web search failed: duckduckgo returned a malformed answer (HTTP 200): \
         DuckDuckGo answered with its bot check instead of results"
    );
}

const IMAGES_TEXT: &str = "1. Ferris\n   https://img.example/ferris.png (1200x800)\n   Page: \
https://rustacean.net/\n\n2. Logo\n   https://img.example/logo.svg\n   Page: https://www.rust-lang.org/\n";

#[tokio::test]
async fn duckduckgo_images_fetch_the_token_then_the_json() {
    let token_page = html(200, r#"<html><script>vqd="4-31337";</script></html>"#);
    let answer = json!({"query": "ferris", "results": [
        {"title": "Ferris", "image": "https://img.example/ferris.png", "thumbnail": "https://t.example/1.jpg", "url": "https://rustacean.net/", "width": 1200, "height": 800, "source": "Bing"},
        {"title": "Ferris dup", "image": "https://img.example/ferris.png", "thumbnail": "x", "url": "https://other/", "width": 1, "height": 1, "source": "Bing"},
        {"title": "Logo", "image": "https://img.example/logo.svg", "thumbnail": "x", "url": "https://www.rust-lang.org/", "source": "Bing"}
    ], "next": "i.js?q=ferris&s=100"});
    let mut e = images("image_search", "x");
    e.api_key = None;
    let (seen, status, text) =
        exchange(e, vec![token_page, ok(answer)], json!({"query": "ferris"})).await;
    assert_eq!((status, text.as_str()), (ToolStatus::Ok, IMAGES_TEXT));
    assert!(
        seen[0].head.starts_with("GET /?q=ferris "),
        "{}",
        seen[0].head
    );
    assert!(
        seen[1]
            .head
            .starts_with("GET /i.js?o=json&q=ferris&vqd=4-31337&l=wt-wt&p=1&f=%2C%2C%2C%2C%2C "),
        "{}",
        seen[1].head
    );
    assert!(header(&seen[1], "referer").is_some_and(|r| r.starts_with("http://127.0.0.1:")));
}

#[tokio::test]
async fn serper_images_post_to_images() {
    let answer = json!({"searchParameters": {"q": "ferris", "type": "images"}, "images": [
        {"title": "Ferris", "imageUrl": "https://img.example/ferris.png", "imageWidth": 1200, "imageHeight": 800, "thumbnailUrl": "https://t/1", "source": "rustacean.net", "domain": "rustacean.net", "link": "https://rustacean.net/", "position": 1},
        {"title": "Logo", "imageUrl": "https://img.example/logo.svg", "link": "https://www.rust-lang.org/", "position": 2}
    ]});
    let (seen, status, text) = exchange(
        images("serper", "x"),
        vec![ok(answer)],
        json!({"query": "ferris"}),
    )
    .await;
    assert_eq!((status, text.as_str()), (ToolStatus::Ok, IMAGES_TEXT));
    assert!(seen[0].head.starts_with("POST /images HTTP/1.1"));
    assert_eq!(header(&seen[0], "x-api-key"), Some(KEY));
    assert_eq!(body(&seen[0]), json!({"q": "ferris", "num": 3}));
}

#[tokio::test]
async fn brave_images_get_images_search() {
    let answer = json!({"type": "images", "results": [
        {"type": "image_result", "title": "Ferris", "url": "https://rustacean.net/", "source": "rustacean.net",
         "thumbnail": {"src": "https://imgs.search.brave.com/t1", "width": 500, "height": 333},
         "properties": {"url": "https://img.example/ferris.png", "placeholder": "p", "width": 1200, "height": 800}},
        {"type": "image_result", "title": "Logo", "url": "https://www.rust-lang.org/",
         "thumbnail": {"src": "https://imgs.search.brave.com/t2"},
         "properties": {"url": "https://img.example/logo.svg"}}
    ]});
    let (seen, status, text) = exchange(
        images("brave", "x"),
        vec![ok(answer)],
        json!({"query": "ferris"}),
    )
    .await;
    assert_eq!((status, text.as_str()), (ToolStatus::Ok, IMAGES_TEXT));
    assert!(
        seen[0]
            .head
            .starts_with("GET /res/v1/images/search?q=ferris&count=3 "),
        "{}",
        seen[0].head
    );
    assert_eq!(header(&seen[0], "x-subscription-token"), Some(KEY));
}

fn status_reply(status: u16, retry_after: Option<&str>, message: &str) -> Reply {
    let mut r = Reply::json(status, &json!({"error": {"message": message}}).to_string());
    if let Some(secs) = retry_after {
        r.headers.push(("Retry-After".into(), secs.into()));
    }
    r
}

#[tokio::test]
async fn a_429_is_asked_again_after_retry_after() {
    let answer = json!({"results": [{"title": "T", "url": "https://t.example/", "content": "c"}]});
    let (seen, status, text) = exchange(
        web("tavily", "x"),
        vec![status_reply(429, Some("0"), "slow down"), ok(answer)],
        json!({"query": "q"}),
    )
    .await;
    assert_eq!(seen.len(), 2);
    assert_eq!(
        (status, text.as_str()),
        (ToolStatus::Ok, "1. T\n   https://t.example/\n   c\n")
    );
}

#[tokio::test]
async fn a_5xx_is_asked_again_until_the_retries_run_out() {
    let busy = || status_reply(503, Some("0"), "overloaded");
    let (seen, status, text) = exchange(
        web("brave", "x"),
        vec![busy(), busy(), busy(), busy()],
        json!({"query": "q"}),
    )
    .await;
    assert_eq!(seen.len(), 4, "the first attempt and 3 retries");
    assert_eq!(status, ToolStatus::Error);
    assert_eq!(
        text,
        "Error: web search failed: brave returned HTTP 503: overloaded"
    );
}

#[tokio::test]
async fn other_4xx_are_not_asked_again_and_never_show_the_key() {
    for status in [401, 408] {
        let echo = format!("invalid key {KEY}");
        let (seen, out, text) = exchange(
            web("serper", "x"),
            vec![
                status_reply(status, Some("0"), &echo),
                status_reply(200, None, ""),
            ],
            json!({"query": "q"}),
        )
        .await;
        assert_eq!(seen.len(), 1, "{status} is not retried");
        assert_eq!(out, ToolStatus::Error);
        assert!(
            text.starts_with(&format!(
                "Error: web search failed: serper returned HTTP {status}: invalid key "
            )),
            "{text}"
        );
        assert!(!text.contains("SECRET"), "{text}");
    }
}

#[tokio::test]
async fn a_malformed_answer_is_a_tool_error_naming_the_backend() {
    for (package, body) in [
        ("exa", "{not json"),
        ("tavily", r#"{"results": {"title": "x"}}"#),
        (
            "firecrawl",
            r#"{"success": false, "error": "Insufficient credits"}"#,
        ),
    ] {
        let (_, status, text) = exchange(
            web(package, "x"),
            vec![Reply::json(200, body)],
            json!({"query": "q"}),
        )
        .await;
        assert_eq!(status, ToolStatus::Error);
        assert!(
            text.starts_with(&format!(
                "Error: web search failed: {package} returned a malformed answer (HTTP 200): "
            )),
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_silent_service_times_out_as_a_tool_error() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = held.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            keep.lock().unwrap().push(socket);
        }
    });
    let mut e = web("exa", &format!("http://{addr}"));
    e.timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let (status, text) = call(&e, json!({"query": "q"})).await;
    assert_eq!(status, ToolStatus::Error);
    assert_eq!(
        text,
        "Error: web search failed: exa request timed out: no complete response within 0.3 s"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_missing_key_and_an_empty_query_are_refused_before_any_request() {
    let mut e = web("tavily", "http://127.0.0.1:9");
    e.api_key = None;
    // The variable is read when the entry is built; this one is never set.
    let row = row_for(&e).unwrap();
    let tool = tool::SearchTool::new(&e, row, None);
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext {
        workspace: Arc::new(Workspace::new(dir.path(), None).unwrap()),
        limits: Arc::new(SandboxLimits::default()),
        cancel: CancellationToken::new(),
    };
    let out = tool
        .call(
            &ToolCall::new("c", "web_search", json!({"query": "q"})),
            &ctx,
        )
        .await;
    assert_eq!(
        out.into_text(),
        "Error: web search failed: tavily needs an API key: set TAVILY_API_KEY or the entry's api_key"
    );
    let (status, text) = call(&web("exa", "http://127.0.0.1:9"), json!({"query": "  "})).await;
    assert_eq!(
        (status, text.as_str()),
        (ToolStatus::Error, "Error: 'query' must not be empty")
    );
}

#[test]
fn use_paths_pick_tool_and_service_as_deerflow_writes_them() {
    let pick = |name: &str, use_path: &str| {
        row_for(&WebEntry::new(name, use_path)).map(|r| (r.name, r.kind))
    };
    let cases = [
        (
            "web_search",
            "deerflow.community.ddg_search.tools:web_search_tool",
            Some(("duckduckgo", Kind::Web)),
        ),
        (
            "web_search",
            "deerflow.community.searxng.tools:web_search_tool",
            Some(("searxng", Kind::Web)),
        ),
        (
            "web_search",
            "deerflow.community.tavily.tools:web_search_tool",
            Some(("tavily", Kind::Web)),
        ),
        (
            "web_search",
            "deerflow.community.brave.tools:web_search_tool",
            Some(("brave", Kind::Web)),
        ),
        (
            "web_search",
            "deerflow.community.serper.tools:web_search_tool",
            Some(("serper", Kind::Web)),
        ),
        (
            "web_search",
            "deerflow.community.exa.tools:web_search_tool",
            Some(("exa", Kind::Web)),
        ),
        (
            "web_search",
            "deerflow.community.firecrawl.tools:web_search_tool",
            Some(("firecrawl", Kind::Web)),
        ),
        (
            "image_search",
            "deerflow.community.image_search.tools:image_search_tool",
            Some(("duckduckgo", Kind::Image)),
        ),
        (
            "image_search",
            "deerflow.community.serper.tools:image_search_tool",
            Some(("serper", Kind::Image)),
        ),
        (
            "image_search",
            "deerflow.community.brave.tools:image_search_tool",
            Some(("brave", Kind::Image)),
        ),
        // The function decides the tool; without one, the entry's name does.
        (
            "search",
            "deerflow.community.tavily.tools:web_search_tool",
            Some(("tavily", Kind::Web)),
        ),
        (
            "web_search",
            "deerflow.community.tavily",
            Some(("tavily", Kind::Web)),
        ),
        // Services deerflow does not serve, and near misses.
        (
            "web_search",
            "deerflow.community.infoquest.tools:web_search_tool",
            None,
        ),
        (
            "image_search",
            "deerflow.community.exa.tools:image_search_tool",
            None,
        ),
        (
            "web_search",
            "deerflow.community.example.tools:web_search_tool",
            None,
        ),
        (
            "web_fetch",
            "deerflow.community.jina_ai.tools:web_fetch_tool",
            None,
        ),
    ];
    for (name, use_path, want) in cases {
        assert_eq!(pick(name, use_path), want, "{use_path}");
    }
    assert_eq!(
        key_var(&WebEntry::new(
            "web_search",
            "deerflow.community.brave.tools:web_search_tool"
        )),
        Some("BRAVE_SEARCH_API_KEY")
    );
}

#[test]
fn the_spec_offers_query_and_max_results() {
    crate::args::assert_schema_matches::<tool::SearchArgs>(
        &["query"],
        json!({"query": "q", "max_results": 2}),
    );
    let tool = build(&WebEntry::new(
        "image_search",
        "deerflow.community.image_search.tools:image_search_tool",
    ))
    .unwrap();
    assert_eq!(tool.spec().name, "image_search");
}

#[tokio::test]
async fn credentials_in_a_base_url_stay_out_of_errors() {
    // A port nothing listens on: refused at once, asked again, then the error names the URL.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut e = web("searxng", &format!("http://admin:hunter2@127.0.0.1:{port}"));
    e.api_key = None;
    let (status, text) = call(&e, json!({"query": "q"})).await;
    assert_eq!(status, ToolStatus::Error);
    assert!(
        text.starts_with("Error: web search failed: cannot reach searxng: "),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
}

#[tokio::test]
async fn deerflow_backend_keys_reach_the_request() {
    let set = |e: &mut WebEntry, pairs: Value| {
        e.extra = pairs.as_object().unwrap().clone();
    };
    // Exa: `search_type` and `contents_max_characters` (a `$VAR` makes the latter a string).
    let mut exa = web("exa", "x");
    set(
        &mut exa,
        json!({"search_type": "neural", "contents_max_characters": "500"}),
    );
    assert_eq!(
        settings_read(&exa),
        ["search_type", "contents_max_characters"]
    );
    let (seen, ..) = exchange(exa, vec![ok(json!({"results": []}))], json!({"query": "q"})).await;
    assert_eq!(body(&seen[0])["type"], "neural");
    assert_eq!(
        body(&seen[0])["contents"]["highlights"]["maxCharacters"],
        500
    );
    // Brave images: the entry's country, language, safe search and spellcheck.
    let mut brave = images("brave", "x");
    set(
        &mut brave,
        json!({"country": "US", "safesearch": "strict", "spellcheck": true, "other": 1}),
    );
    let (seen, ..) = exchange(
        brave,
        vec![ok(json!({"results": []}))],
        json!({"query": "q"}),
    )
    .await;
    assert!(
        seen[0].head.starts_with(
            "GET /res/v1/images/search?q=q&count=3&country=US&safesearch=strict&spellcheck=true "
        ),
        "{}",
        seen[0].head
    );
    // DuckDuckGo: `region` and `safesearch` as the form's `kl` and `kp`.
    let mut ddg = web("ddg_search", "x");
    ddg.api_key = None;
    set(&mut ddg, json!({"region": "us-en", "safesearch": "off"}));
    let none = r#"<html><body><div class="no-results">No results.</div></body></html>"#;
    let (seen, status, _) =
        exchange(ddg, vec![html(200, none)], json!({"query": "rust async"})).await;
    assert_eq!(status, ToolStatus::Ok);
    assert_eq!(seen[0].body, "q=rust+async&kl=us-en&kp=-2");
    assert!(settings_read(&web("tavily", "x")).is_empty());
}
