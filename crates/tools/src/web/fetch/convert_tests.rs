use super::*;

const ARTICLE: &str = include_str!("../../../../../tests/fixtures/web/article.html");
const URL: &str = "https://blog.example.com/rust-2026";

fn read(content_type: Option<&str>, body: &[u8]) -> Page {
    page(URL, content_type, body, None).unwrap()
}

/// What the model receives for a blog post wrapped in the usual boilerplate.
#[test]
fn an_article_keeps_its_content_and_drops_the_boilerplate() {
    let p = read(Some("text/html; charset=utf-8"), ARTICLE.as_bytes());
    let md = &p.body;
    assert_eq!(p.title.as_deref(), Some("Rust 2026: What Changed in Async"));
    for kept in [
        "## Async closures are stable",
        "## What to update first",
        "The async ecosystem of Rust matured",
        "- Replace boxed callback futures with async closures.",
        "[official announcement](https://blog.rust-lang.org/async-2026)",
        "```",
        "async fn retry<F>(f: F) where F: AsyncFn() -> Result<(), Error> {",
        "| Version | Requests/s | p99 latency |",
        "| after | 44800 | 2.7 ms |",
        "`async-trait`",
    ] {
        assert!(md.contains(kept), "{kept:?} missing from:\n{md}");
    }
    for dropped in [
        "cookie",
        "Accept all",
        "Newsletter",
        "About us",
        "Trending now",
        "All rights reserved",
        "Privacy policy",
        "dataLayer",
        "font-family",
        "getElementById",
    ] {
        assert!(!md.contains(dropped), "{dropped:?} kept in:\n{md}");
    }
}

/// A page too short for readability to call it an article still loses its boilerplate.
#[test]
fn a_small_page_is_its_body_without_boilerplate() {
    let html = "<html><head><title>Status</title><style>p{}</style></head><body>\
        <nav><a href='/'>Home</a></nav><h1>All systems normal</h1><p>Checked <b>now</b>.</p>\
        <script>track()</script><footer>© corp</footer></body></html>";
    let p = read(Some("text/html"), html.as_bytes());
    assert_eq!(p.title.as_deref(), Some("Status"));
    assert!(p.body.contains("All systems normal"), "{}", p.body);
    assert!(p.body.contains("Checked **now**."), "{}", p.body);
    for gone in ["Home", "track()", "corp", "p{}"] {
        assert!(!p.body.contains(gone), "{gone}: {}", p.body);
    }
}

#[test]
fn the_charset_comes_from_the_header_then_meta_then_utf8() {
    // "café" in Latin-1 and Shift_JIS "日本".
    let latin1 = b"<html><body><p>caf\xe9</p></body></html>";
    assert!(read(Some("text/html; charset=ISO-8859-1"), latin1)
        .body
        .contains("café"));
    let meta =
        b"<html><head><meta charset=\"windows-1252\"></head><body><p>caf\xe9</p></body></html>";
    assert!(read(Some("text/html"), meta).body.contains("café"));
    let equiv = b"<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=Shift_JIS\"></head><body><p>\x93\xfa\x96\x7b</p></body></html>";
    assert!(read(Some("text/html"), equiv).body.contains("日本"));
    // The header wins over <meta>.
    let both =
        b"<html><head><meta charset=\"windows-1252\"></head><body><p>caf\xc3\xa9</p></body></html>";
    assert!(read(Some("text/html; charset=utf-8"), both)
        .body
        .contains("café"));
    // Nothing declared: UTF-8, invalid bytes replaced.
    let bad = b"plain caf\xe9 text";
    assert_eq!(read(Some("text/plain"), bad).body, "plain caf\u{fffd} text");
    let xml = b"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><r>caf\xe9</r>";
    assert!(read(Some("application/xml"), xml)
        .body
        .contains("<r>café</r>"));
}

#[test]
fn json_is_pretty_printed_when_whole() {
    let p = read(Some("application/json"), br#"{"b":1,"a":[true,null]}"#);
    assert_eq!(
        p.body,
        "{\n  \"b\": 1,\n  \"a\": [\n    true,\n    null\n  ]\n}"
    );
    assert_eq!(p.title, None);
    let p = read(Some("application/vnd.api+json"), br#"{"x":1}"#);
    assert_eq!(p.body, "{\n  \"x\": 1\n}");
    // Broken or cut JSON is text as it came.
    assert_eq!(read(Some("application/json"), br#"{"x":"#).body, r#"{"x":"#);
    let cut = page(URL, Some("application/json"), br#"{"x":1}"#, Some("[cut]")).unwrap();
    assert_eq!(cut.body, "{\"x\":1}\n\n[cut]");
}

#[test]
fn text_and_xml_are_text() {
    assert_eq!(read(Some("text/plain"), b"hello\n").body, "hello\n");
    assert_eq!(read(Some("text/csv"), b"a,b\n1,2").body, "a,b\n1,2");
    assert_eq!(read(Some("application/rss+xml"), b"<rss/>").body, "<rss/>");
    assert_eq!(read(None, b"no type, plain").body, "no type, plain");
    assert!(read(None, b"<!DOCTYPE html><title>T</title><p>hi</p>")
        .body
        .contains("hi"));
}

#[test]
fn other_types_are_refused_by_name() {
    for (ct, name) in [
        ("application/pdf", "application/pdf"),
        ("image/png", "image/png"),
        ("application/zip; foo=bar", "application/zip"),
        ("", "application/pdf"),
    ] {
        let err = page(URL, Some(ct), b"%PDF-1.7\0\0binary", None)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("Error: web_fetch cannot read"), "{err}");
        assert!(err.contains(name), "{ct}: {err}");
    }
}

/// Without a type (or with the generic one) a PDF or an image is refused by what its bytes
/// spell, even when no NUL byte in its start gives it away as binary.
#[test]
fn an_untyped_pdf_or_image_is_refused_by_its_bytes() {
    for (body, name) in [
        (
            &b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj"[..],
            "application/pdf",
        ),
        (&b"\x89PNG\r\n\x1a\n\x01\x02"[..], "image/png"),
        (&b"\xff\xd8\xff\xe0JFIF"[..], "image/jpeg"),
        (&b"GIF89a\x01\x01"[..], "image/gif"),
        (&b"RIFF\x10\x10\x10\x10WEBPVP8 "[..], "image/webp"),
        (&b"\x1f\x8b\x08\x08gz"[..], "application/gzip"),
    ] {
        for ct in [None, Some("application/octet-stream")] {
            let err = page(URL, ct, body, None).unwrap_err().to_string();
            assert_eq!(
                err,
                format!("Error: web_fetch cannot read {name} content; it reads HTML, text, XML and JSON"),
                "{ct:?}"
            );
        }
    }
    assert_eq!(
        read(Some("application/octet-stream"), b"plain notes").body,
        "plain notes"
    );
    let err = page(URL, None, b"\0\x01\x02 opaque", None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("content of an unknown binary type"), "{err}");
}
