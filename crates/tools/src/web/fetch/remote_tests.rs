//! Each remote `web_fetch` backend against a mock of its service: the request it got
//! (method, path, key, body) and what the model read.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{entry, fetch, heads, tool, typed};
use crate::web::guard::tests::Table;
use crate::web::guard::Guard;
use crate::{Tool, ToolStatus};
use deerflow_model::test_support::{serve, Captured, Reply};

/// A remote backend's tool with its `base_url` at the mock, the page's host public.
fn remote_tool(use_path: &str, base: &str, key: Option<&str>) -> Arc<dyn Tool> {
    let mut e = entry(use_path, false);
    e.base_url = Some(base.to_string());
    e.api_key = key.map(String::from);
    let guard = Guard::with_resolver(false, Table::of(&[("example.com", &["93.184.216.34"])]));
    tool(&e, guard)
}

fn body_json(c: &Captured) -> Value {
    serde_json::from_str(&c.body).unwrap()
}

#[tokio::test]
async fn jina_gets_the_url_as_its_path_with_the_bearer_key() {
    let answer = "Title: Example Domain\n\nURL Source: https://example.com/\n\nMarkdown Content:\nThis domain is for use in examples.\n";
    let (base, seen) = serve(vec![typed("text/plain", answer)]).await;
    let t = remote_tool(
        "deerflow.community.jina_ai.tools:web_fetch_tool",
        &base,
        Some("jina_k"),
    );
    let (status, out) = fetch(&t, "https://example.com/").await;
    assert_eq!((status, out.as_str()), (ToolStatus::Ok, "URL: https://example.com/\nTitle: Example Domain\n\nThis domain is for use in examples."));
    let head = heads(&seen).remove(0);
    assert!(
        head.starts_with("GET /https://example.com/ HTTP/1.1"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("authorization: bearer jina_k"),
        "{head}"
    );
}

#[tokio::test]
async fn firecrawl_scrapes_markdown() {
    let answer = r##"{"success":true,"data":{"markdown":"# Example\n\nBody text.","metadata":{"title":"Example Domain","sourceURL":"https://example.com/a"}}}"##;
    let (base, seen) = serve(vec![Reply::json(200, answer)]).await;
    let t = remote_tool(
        "deerflow.community.firecrawl.tools:web_fetch_tool",
        &base,
        Some("fc-key"),
    );
    let (status, out) = fetch(&t, "https://example.com/a").await;
    assert_eq!(
        (status, out.as_str()),
        (
            ToolStatus::Ok,
            "URL: https://example.com/a\nTitle: Example Domain\n\n# Example\n\nBody text."
        )
    );
    let c = seen.lock().unwrap().remove(0);
    assert!(c.head.starts_with("POST /v1/scrape HTTP/1.1"), "{}", c.head);
    assert!(
        c.head
            .to_ascii_lowercase()
            .contains("authorization: bearer fc-key"),
        "{}",
        c.head
    );
    assert_eq!(
        body_json(&c),
        json!({"url": "https://example.com/a", "formats": ["markdown"], "onlyMainContent": true})
    );
}

#[tokio::test]
async fn exa_reads_contents_with_its_key_header() {
    let answer = r#"{"requestId":"r1","results":[{"id":"https://example.com/b","url":"https://example.com/b","title":"B page","text":"Text of B."}],"statuses":[{"id":"https://example.com/b","status":"success"}]}"#;
    let (base, seen) = serve(vec![Reply::json(200, answer)]).await;
    let t = remote_tool(
        "deerflow.community.exa.tools:web_fetch_tool",
        &base,
        Some("exa-key"),
    );
    let (status, out) = fetch(&t, "https://example.com/b").await;
    assert_eq!(
        (status, out.as_str()),
        (
            ToolStatus::Ok,
            "URL: https://example.com/b\nTitle: B page\n\nText of B."
        )
    );
    let c = seen.lock().unwrap().remove(0);
    assert!(c.head.starts_with("POST /contents HTTP/1.1"), "{}", c.head);
    assert!(
        c.head.to_ascii_lowercase().contains("x-api-key: exa-key"),
        "{}",
        c.head
    );
    assert!(
        !c.head.to_ascii_lowercase().contains("authorization"),
        "{}",
        c.head
    );
    assert_eq!(
        body_json(&c),
        json!({"urls": ["https://example.com/b"], "text": true})
    );
}

#[tokio::test]
async fn crawl4ai_posts_to_md_with_its_token() {
    let answer = r###"{"url":"https://example.com/c","filter":"fit","query":null,"cache":"0","markdown":"## C\n\nFit markdown.","success":true}"###;
    let (base, seen) = serve(vec![Reply::json(200, answer)]).await;
    let mut e = entry("deerflow.community.crawl4ai.tools:web_fetch_tool", false);
    e.base_url = Some(base.clone());
    e.extra.insert("token".into(), json!("c4-token"));
    let guard = Guard::with_resolver(false, Table::of(&[("example.com", &["93.184.216.34"])]));
    let t = tool(&e, guard);
    let (status, out) = fetch(&t, "https://example.com/c").await;
    assert_eq!(
        (status, out.as_str()),
        (
            ToolStatus::Ok,
            "URL: https://example.com/c\n\n## C\n\nFit markdown."
        )
    );
    let c = seen.lock().unwrap().remove(0);
    assert!(c.head.starts_with("POST /md HTTP/1.1"), "{}", c.head);
    assert!(
        c.head
            .to_ascii_lowercase()
            .contains("authorization: bearer c4-token"),
        "{}",
        c.head
    );
    assert_eq!(
        body_json(&c),
        json!({"url": "https://example.com/c", "f": "fit"})
    );
}

#[tokio::test]
async fn a_remote_backend_is_handed_only_checked_urls() {
    let (base, seen) = serve(vec![typed("text/plain", "never")]).await;
    let t = remote_tool(
        "deerflow.community.jina_ai.tools:web_fetch_tool",
        &base,
        None,
    );
    let (status, out) = fetch(&t, "http://169.254.169.254/latest/meta-data/").await;
    assert_eq!(
        (status, out.as_str()),
        (
            ToolStatus::Error,
            "Access denied: 169.254.169.254 resolves to a private address"
        )
    );
    assert!(heads(&seen).is_empty());
}

#[tokio::test]
async fn a_backend_error_names_the_backend_and_status_without_the_key() {
    let (base, _) = serve(vec![Reply::json(
        401,
        r#"{"error":"Unauthorized: invalid token fc-secret-key"}"#,
    )])
    .await;
    let t = remote_tool(
        "deerflow.community.firecrawl.tools:web_fetch_tool",
        &base,
        Some("fc-secret-key"),
    );
    let (status, out) = fetch(&t, "https://example.com/").await;
    assert_eq!(status, ToolStatus::Error);
    assert!(
        out.starts_with("Error: firecrawl returned HTTP 401"),
        "{out}"
    );
    assert!(!out.contains("fc-secret-key"), "{out}");
}

#[tokio::test]
async fn a_malformed_or_failed_answer_is_a_tool_error_naming_the_backend() {
    for (use_path, answer, expected) in [
        (
            "deerflow.community.firecrawl.tools:web_fetch_tool",
            r#"{"success":false,"error":"blocked by robots.txt"}"#,
            "Error: firecrawl could not read the page: blocked by robots.txt",
        ),
        (
            "deerflow.community.exa.tools:web_fetch_tool",
            r#"{"results":[],"statuses":[{"id":"x","status":"error","error":{"tag":"CRAWL_NOT_FOUND"}}]}"#,
            "Error: exa could not read the page: CRAWL_NOT_FOUND",
        ),
        (
            "deerflow.community.crawl4ai.tools:web_fetch_tool",
            "<html>gateway</html>",
            "Error: crawl4ai returned a malformed answer: the answer is not JSON",
        ),
    ] {
        let (base, _) = serve(vec![Reply::json(200, answer)]).await;
        let t = remote_tool(use_path, &base, Some("k"));
        let (status, out) = fetch(&t, "https://example.com/").await;
        assert_eq!(status, ToolStatus::Error);
        assert!(out.starts_with(expected), "{out}");
    }
}

/// Only 429 and 5xx are asked again (§14): a 408 or 409, which model calls retry, is the
/// request's fault and ends the call at once.
#[tokio::test]
async fn a_remote_backend_retries_5xx_but_not_other_4xx() {
    let jina = "deerflow.community.jina_ai.tools:web_fetch_tool";
    let page = "Title: T\n\nURL Source: https://example.com/\n\nMarkdown Content:\nBody.\n";
    let (base, seen) = serve(vec![
        Reply::json(503, r#"{"error":"busy"}"#),
        typed("text/plain", page),
    ])
    .await;
    let (status, out) = fetch(&remote_tool(jina, &base, None), "https://example.com/").await;
    assert_eq!(status, ToolStatus::Ok, "{out}");
    assert_eq!(seen.lock().unwrap().len(), 2);
    for code in [408, 409] {
        let (base, seen) = serve(vec![
            Reply::json(code, r#"{"error":"no"}"#),
            typed("text/plain", page),
        ])
        .await;
        let (status, out) = fetch(&remote_tool(jina, &base, None), "https://example.com/").await;
        assert_eq!(status, ToolStatus::Error, "{code}: {out}");
        assert!(out.contains(&format!("HTTP {code}")), "{out}");
        assert_eq!(seen.lock().unwrap().len(), 1, "{code} was asked again");
    }
}
