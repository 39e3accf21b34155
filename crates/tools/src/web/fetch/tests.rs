//! `web_fetch` end to end against servers on 127.0.0.1: the guard in front of every hop, the
//! direct fetcher's reading rules, and each remote backend's request and answer. Names
//! resolve through a table, so no lookup or connection leaves the machine.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::*;
use crate::fs::tests::{ctx, ctx_with, run};
use crate::web::guard::tests::Table;
use crate::{SandboxLimits, ToolStatus};
use deerflow_model::test_support::{serve, Captured, Reply};

#[path = "remote_tests.rs"]
mod remote_backends;

const ARTICLE: &str = include_str!("../../../../../tests/fixtures/web/article.html");

pub(super) type Seen = Arc<Mutex<Vec<Captured>>>;

pub(super) fn entry(use_path: &str, allow_private: bool) -> WebEntry {
    let mut e = WebEntry::new("web_fetch", use_path);
    e.allow_private_addresses = allow_private;
    e.timeout = std::time::Duration::from_secs(5);
    e
}

/// A guard that resolves `names` from a table and lets the test server's own address,
/// 127.0.0.1, pass as public (and nothing else private).
fn guard_for_tests(names: &[(&str, &[&str])]) -> Guard {
    let server_is_public =
        |ip: IpAddr| ip == IpAddr::from([127, 0, 0, 1]) || super::super::guard::is_global(ip);
    Guard::with_resolver(false, Table::of(names)).with_policy(server_is_public)
}

pub(super) fn tool(entry: &WebEntry, guard: Guard) -> Arc<dyn Tool> {
    build_with(entry, guard).expect("served")
}

pub(super) async fn fetch(tool: &Arc<dyn Tool>, url: &str) -> (ToolStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    run(tool.as_ref(), &ctx(dir.path()), json!({ "url": url })).await
}

fn html(body: &str) -> Reply {
    Reply {
        status: 200,
        headers: vec![("Content-Type".into(), "text/html; charset=utf-8".into())],
        body: body.to_string(),
    }
}

pub(super) fn typed(content_type: &str, body: &str) -> Reply {
    Reply {
        status: 200,
        headers: vec![("Content-Type".into(), content_type.into())],
        body: body.to_string(),
    }
}

fn redirect(to: &str) -> Reply {
    Reply {
        status: 302,
        headers: vec![("Location".into(), to.into())],
        body: String::new(),
    }
}

fn port(base: &str) -> u16 {
    base.rsplit(':').next().unwrap().parse().unwrap()
}

pub(super) fn heads(seen: &Seen) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|c| c.head.clone())
        .collect()
}

#[tokio::test]
async fn loopback_in_every_spelling_is_refused_before_any_connection() {
    let (base, seen) = serve(vec![html("<p>secret</p>")]).await;
    let p = port(&base);
    let direct = tool(&entry("direct", false), Guard::new(false));
    for (host, shown) in [
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.2", "127.0.0.2"),
        ("0.0.0.0", "0.0.0.0"),
        ("[::1]", "[::1]"),
        ("[::ffff:127.0.0.1]", "[::ffff:7f00:1]"),
        ("2130706433", "127.0.0.1"),
        ("0177.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("localhost", "localhost"),
        ("localhost.", "localhost."),
    ] {
        let (status, out) = fetch(&direct, &format!("http://{host}:{p}/")).await;
        assert_eq!(status, ToolStatus::Error, "{host}");
        assert_eq!(
            out,
            format!("Access denied: {shown} resolves to a private address"),
            "{host}"
        );
    }
    assert!(heads(&seen).is_empty(), "a request got through");
}

#[tokio::test]
async fn allow_private_addresses_lifts_the_guard() {
    let spellings = ["127.0.0.1", "2130706433", "0177.1", "0x7f.1", "127.1"];
    let replies = spellings
        .iter()
        .map(|_| html("<title>Local</title><p>inside</p>"))
        .collect();
    let (base, seen) = serve(replies).await;
    let p = port(&base);
    let direct = tool(&entry("direct", true), Guard::new(true));
    for host in spellings {
        let (status, out) = fetch(&direct, &format!("http://{host}:{p}/x")).await;
        assert_eq!(status, ToolStatus::Ok, "{host}: {out}");
        assert_eq!(
            out,
            format!("URL: http://127.0.0.1:{p}/x\nTitle: Local\n\ninside")
        );
    }
    assert_eq!(heads(&seen).len(), spellings.len());
}

/// The connection goes to the address the guard checked: `public.test` exists only in the
/// guard's table, so any second lookup would fail.
#[tokio::test]
async fn the_connection_goes_to_the_checked_address() {
    let (base, seen) = serve(vec![html("<title>T</title><p>pinned</p>")]).await;
    let p = port(&base);
    let guard = guard_for_tests(&[("public.test", &["127.0.0.1"])]);
    let direct = tool(&entry("direct", false), guard);
    let (status, out) = fetch(&direct, &format!("http://public.test:{p}/a")).await;
    assert_eq!(
        (status, out.as_str()),
        (
            ToolStatus::Ok,
            format!("URL: http://public.test:{p}/a\nTitle: T\n\npinned").as_str()
        )
    );
    let head = heads(&seen).remove(0).to_ascii_lowercase();
    assert!(head.starts_with("get /a http/1.1"), "{head}");
    assert!(head.contains(&format!("host: public.test:{p}")), "{head}");
    assert!(
        head.contains(&format!(
            "user-agent: deerflow/{}",
            env!("CARGO_PKG_VERSION")
        )),
        "{head}"
    );
    assert!(
        !head.contains("cookie") && !head.contains("authorization") && !head.contains("proxy"),
        "{head}"
    );
}

#[tokio::test]
async fn a_name_with_one_private_address_among_public_ones_is_refused() {
    let (base, seen) = serve(vec![html("<p>x</p>")]).await;
    let guard = Guard::with_resolver(
        false,
        Table::of(&[("mixed.test", &["93.184.216.34", "127.0.0.1"])]),
    );
    let direct = tool(&entry("direct", false), guard);
    let (status, out) = fetch(&direct, &format!("http://mixed.test:{}/", port(&base))).await;
    assert_eq!(status, ToolStatus::Error);
    assert_eq!(
        out,
        "Access denied: mixed.test resolves to a private address"
    );
    assert!(heads(&seen).is_empty());
}

#[tokio::test]
async fn every_redirect_hop_is_checked_again() {
    for (target, shown) in [
        ("http://127.0.0.2:8080/admin", "127.0.0.2"),
        ("http://[::1]:8080/", "[::1]"),
        ("http://2130706434/", "127.0.0.2"),
        ("http://localhost./", "localhost."),
        (
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254",
        ),
        ("https://rebind.test/", "rebind.test"),
    ] {
        // The first hop is allowed (the guard takes the server's 127.0.0.1 as public); it
        // answers with a redirect to `target`.
        let (base, seen) = serve(vec![redirect(target)]).await;
        let guard = guard_for_tests(&[
            ("start.test", &["127.0.0.1"]),
            ("rebind.test", &["93.184.216.34", "10.0.0.7"]),
        ]);
        let direct = tool(&entry("direct", false), guard);
        let (status, out) = fetch(&direct, &format!("http://start.test:{}/", port(&base))).await;
        assert_eq!(status, ToolStatus::Error, "{target}");
        assert_eq!(
            out,
            format!("Access denied: {shown} resolves to a private address"),
            "{target}"
        );
        assert_eq!(heads(&seen).len(), 1, "only the first hop was requested");
    }
}

#[tokio::test]
async fn five_redirects_are_followed_and_a_sixth_is_refused() {
    let chain = |n: usize| {
        let mut replies: Vec<Reply> = (1..=n).map(|i| redirect(&format!("/hop{i}"))).collect();
        replies.push(html("<title>End</title><p>arrived</p>"));
        replies
    };
    let direct = tool(&entry("direct", true), Guard::new(true));
    let (base, seen) = serve(chain(5)).await;
    let (status, out) = fetch(&direct, &format!("{base}/start")).await;
    assert_eq!(
        (status, out),
        (
            ToolStatus::Ok,
            format!("URL: {base}/hop5\nTitle: End\n\narrived")
        )
    );
    assert_eq!(heads(&seen).len(), 6);

    let (base, seen) = serve(chain(6)).await;
    let (status, out) = fetch(&direct, &format!("{base}/start")).await;
    assert_eq!(status, ToolStatus::Error);
    assert_eq!(
        out,
        format!("Error: too many redirects (more than 5) from {base}/start")
    );
    assert_eq!(heads(&seen).len(), 6, "the sixth redirect was not followed");
}

#[tokio::test]
async fn a_redirect_to_another_scheme_or_with_credentials_is_refused() {
    let direct = tool(&entry("direct", true), Guard::new(true));
    for (target, why) in [
        (
            "file:///etc/passwd",
            "only http and https URLs can be fetched, not file:",
        ),
        (
            "http://user:pw@127.0.0.1/",
            "URLs with credentials (user:pass@) are refused",
        ),
    ] {
        let (base, _) = serve(vec![redirect(target)]).await;
        let (status, out) = fetch(&direct, &base).await;
        assert_eq!((status, out), (ToolStatus::Error, format!("Error: {why}")));
    }
}

/// What the model receives for an article page: header lines, then the article alone.
#[tokio::test]
async fn an_article_page_reaches_the_model_as_markdown() {
    let (base, _) = serve(vec![html(ARTICLE)]).await;
    let direct = tool(&entry("direct", true), Guard::new(true));
    let (status, out) = fetch(&direct, &format!("{base}/rust-2026")).await;
    assert_eq!(status, ToolStatus::Ok);
    let expected_start =
        format!("URL: {base}/rust-2026\nTitle: Rust 2026: What Changed in Async\n\n");
    assert!(out.starts_with(&expected_start), "{out}");
    assert!(out.contains("## Async closures are stable"), "{out}");
    assert!(out.contains("| before | 41200 | 3.1 ms |"), "{out}");
    for gone in ["cookies", "Newsletter", "All rights reserved", "dataLayer"] {
        assert!(!out.contains(gone), "{gone} in {out}");
    }
}

#[tokio::test]
async fn json_text_and_charsets_from_the_server() {
    let (base, _) = serve(vec![
        typed("application/json", r#"{"ok":true,"items":[1,2]}"#),
        typed("text/plain; charset=utf-8", "just text"),
    ])
    .await;
    let direct = tool(&entry("direct", true), Guard::new(true));
    let (_, out) = fetch(&direct, &format!("{base}/api")).await;
    assert_eq!(
        out,
        format!("URL: {base}/api\n\n{{\n  \"ok\": true,\n  \"items\": [\n    1,\n    2\n  ]\n}}")
    );
    let (_, out) = fetch(&direct, &format!("{base}/t.txt")).await;
    assert_eq!(out, format!("URL: {base}/t.txt\n\njust text"));
}

#[tokio::test]
async fn a_pdf_is_refused_by_its_type() {
    let (base, _) = serve(vec![typed("application/pdf", "%PDF-1.7")]).await;
    let direct = tool(&entry("direct", true), Guard::new(true));
    let (status, out) = fetch(&direct, &format!("{base}/paper.pdf")).await;
    assert_eq!(status, ToolStatus::Error);
    assert_eq!(
        out,
        "Error: web_fetch cannot read application/pdf content; it reads HTML, text, XML and JSON"
    );
}

/// deerflow sends no `Accept-Encoding`; a server that compresses anyway is refused by its
/// coding instead of handing the model compressed bytes as text.
#[tokio::test]
async fn a_body_compressed_unasked_is_refused_by_its_coding() {
    let encoded = |coding: &str| {
        let mut reply = html("<title>Z</title><p>readable</p>");
        reply
            .headers
            .push(("Content-Encoding".into(), coding.into()));
        reply
    };
    let (base, _) = serve(vec![encoded("gzip"), encoded("br"), encoded("identity")]).await;
    let direct = tool(&entry("direct", true), Guard::new(true));
    for coding in ["gzip", "br"] {
        let (status, out) = fetch(&direct, &format!("{base}/z")).await;
        assert_eq!(
            (status, out),
            (
                ToolStatus::Error,
                format!(
                    "Error: web_fetch cannot read content the server compressed unasked \
                     (Content-Encoding: {coding})"
                )
            )
        );
    }
    let (status, out) = fetch(&direct, &format!("{base}/z")).await;
    assert_eq!(
        (status, out),
        (
            ToolStatus::Ok,
            format!("URL: {base}/z\nTitle: Z\n\nreadable")
        )
    );
}

#[tokio::test]
async fn an_error_status_names_it_with_the_start_of_the_body() {
    let body = format!("Not here. {}", "x".repeat(2000));
    let (base, seen) = serve(
        vec![typed("text/plain", &body)]
            .into_iter()
            .map(|mut r| {
                r.status = 404;
                r
            })
            .collect(),
    )
    .await;
    let direct = tool(&entry("direct", true), Guard::new(true));
    let (status, out) = fetch(&direct, &format!("{base}/gone")).await;
    assert_eq!(status, ToolStatus::Error);
    let start =
        format!("Error: fetching {base}/gone failed with HTTP 404 Not Found:\nNot here. xxx");
    assert!(out.starts_with(&start), "{out}");
    assert_eq!(
        out.chars().count(),
        start.chars().count() - 13 + 500 + 1,
        "500 characters of the body and …"
    );
    assert_eq!(heads(&seen).len(), 1, "a 404 is not retried");
}

#[tokio::test]
async fn a_503_is_retried_after_retry_after() {
    let mut busy = typed("text/plain", "busy");
    busy.status = 503;
    busy.headers.push(("Retry-After".into(), "0".into()));
    let (base, seen) = serve(vec![busy, typed("text/plain", "fine")]).await;
    let direct = tool(&entry("direct", true), Guard::new(true));
    let (status, out) = fetch(&direct, &base).await;
    assert_eq!(
        (status, out),
        (ToolStatus::Ok, format!("URL: {base}/\n\nfine"))
    );
    assert_eq!(heads(&seen).len(), 2);
}

#[tokio::test]
async fn at_most_10_mib_of_a_body_is_read() {
    let big = "a".repeat(direct::MAX_BODY + 4096);
    let (base, _) = serve(vec![typed("text/plain", &big)]).await;
    let backend = direct::Direct::new(&entry("direct", true), Guard::new(true));
    let url = check_url(&base).unwrap();
    let ctx = CallContext::new(tokio_util::sync::CancellationToken::new());
    let page = backend.fetch(&url, &ctx).await.unwrap();
    let marker = format!("\n\n{}", direct::CUT_MARKER);
    assert!(page.body.ends_with(&marker));
    assert_eq!(page.body.len(), direct::MAX_BODY + marker.len());
}

#[tokio::test]
async fn the_result_is_cut_to_the_tool_output_limit() {
    let (base, _) = serve(vec![typed("text/plain", &"b".repeat(500))]).await;
    let direct = tool(&entry("direct", true), Guard::new(true));
    let dir = tempfile::tempdir().unwrap();
    let limits = SandboxLimits {
        read_file_output_max_chars: 100,
        ..SandboxLimits::default()
    };
    let (_, out) = run(
        direct.as_ref(),
        &ctx_with(dir.path(), limits),
        json!({"url": base}),
    )
    .await;
    let whole = format!("URL: {base}/\n\n").len() + 500;
    let marker = format!("\n... [{} characters truncated] ...", whole - 100);
    assert!(out.starts_with(&format!("URL: {base}/\n\nbbb")), "{out}");
    assert!(out.ends_with(&marker), "{out}");
}

/// Through the entry's proxy, a plain-http request names the checked address, so the proxy
/// has nothing to look up; the page's host stays in `Host`.
#[tokio::test]
async fn a_proxy_gets_the_checked_address() {
    let (proxy, seen) = serve(vec![typed("text/plain", "via proxy")]).await;
    let mut e = entry("direct", false);
    e.proxy = Some(proxy);
    let guard = Guard::with_resolver(false, Table::of(&[("news.test", &["93.184.216.34"])]));
    let direct = tool(&e, guard);
    let (status, out) = fetch(&direct, "http://news.test/today").await;
    assert_eq!(
        (status, out.as_str()),
        (ToolStatus::Ok, "URL: http://news.test/today\n\nvia proxy")
    );
    let head = heads(&seen).remove(0).to_ascii_lowercase();
    assert!(
        head.starts_with("get http://93.184.216.34/today http/1.1"),
        "{head}"
    );
    assert!(head.contains("host: news.test"), "{head}");
}

#[test]
fn only_the_served_backends_are_built() {
    for served in [
        "direct",
        "deerflow.community.jina_ai.tools:web_fetch_tool",
        "deerflow.community.firecrawl.tools:web_fetch_tool",
        "deerflow.community.exa.tools:web_fetch_tool",
        "deerflow.community.crawl4ai.tools:web_fetch_tool",
    ] {
        assert!(build(&entry(served, false)).is_some(), "{served}");
    }
    for not in [
        "deerflow.community.tavily.tools:web_fetch_tool",
        "deerflow.community.example.tools:web_fetch_tool",
        "",
    ] {
        assert!(build(&entry(not, false)).is_none(), "{not}");
    }
}

/// A cancelled agent's fetch ends at once, even in the middle of a body that stalls.
#[tokio::test]
async fn a_cancelled_fetch_ends_at_once() {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let head =
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nstart";
        let _ = socket.write_all(head.as_bytes()).await;
        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    });
    let direct = tool(&entry("direct", true), Guard::new(true));
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    let cancel = c.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = std::time::Instant::now();
    let (status, out) = run(direct.as_ref(), &c, json!({ "url": base })).await;
    assert_eq!(
        (status, out.as_str()),
        (ToolStatus::Error, "Error: the fetch was cancelled")
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
}
