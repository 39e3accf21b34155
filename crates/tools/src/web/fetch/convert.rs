//! A fetched body into what the model reads (contract §14): HTML and XHTML as the Markdown of
//! their main content, other text and XML as text, JSON pretty-printed when it is whole;
//! anything else refused by its type. The charset comes from the header, then the document
//! itself (`<meta>`, the XML declaration), then UTF-8 with replacement.

use std::sync::LazyLock;

use dom_smoothie::{Config, Readability, TextMode};
use encoding_rs::{Encoding, UTF_8};
use regex::bytes::Regex;

use super::Page;
use crate::ToolError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Html,
    Json,
    Text,
}

/// A body of `content_type` (the header, if any) from `url` as a page. `cut` says the body
/// was longer than what was read, which is marked after the content.
pub fn page(
    url: &str,
    content_type: Option<&str>,
    body: &[u8],
    cut: Option<&str>,
) -> Result<Page, ToolError> {
    let (essence, charset) = parse_content_type(content_type.unwrap_or_default());
    let kind = kind_of(&essence, body)?;
    let encoding = charset
        .as_deref()
        .and_then(|c| Encoding::for_label(c.as_bytes()))
        .or_else(|| declared_encoding(body, kind))
        .unwrap_or(UTF_8);
    // A BOM wins over both (the HTML and XML rules); then invalid bytes become U+FFFD.
    let (text, _, _) = encoding.decode(body);
    let mut page = match kind {
        Kind::Html => html_page(url, &text),
        Kind::Json if cut.is_none() => json_page(url, &text),
        Kind::Json | Kind::Text => Page::new(url, None, text.into_owned()),
    };
    if let Some(marker) = cut {
        page.body.push_str("\n\n");
        page.body.push_str(marker);
    }
    Ok(page)
}

/// `text/html; charset=ISO-8859-1` → (`text/html`, `Some("ISO-8859-1")`).
fn parse_content_type(header: &str) -> (String, Option<String>) {
    let mut parts = header.split(';');
    let essence = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let charset = parts.find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches(['"', '\'']).to_string())
    });
    (essence, charset)
}

fn kind_of(essence: &str, body: &[u8]) -> Result<Kind, ToolError> {
    // Untyped, a PDF or an image is refused by the type its bytes spell, even when no NUL
    // byte near its start gives it away as binary.
    if matches!(essence, "" | "application/octet-stream") {
        if let Some(sniffed) = sniffed_type(body) {
            return Err(refused(&format!("{sniffed} content")));
        }
    }
    let kind = match essence {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        "application/json" => Kind::Json,
        e if e.ends_with("+json") => Kind::Json,
        e if e.starts_with("text/") => Kind::Text,
        "application/xml" => Kind::Text,
        e if e.ends_with("+xml") => Kind::Text,
        // No type (or the generic one): what the bytes look like.
        "" | "application/octet-stream" if !looks_binary(body) => {
            if looks_like_html(body) {
                Kind::Html
            } else {
                Kind::Text
            }
        }
        "" => return Err(refused("content of an unknown binary type")),
        e => return Err(refused(&format!("{e} content"))),
    };
    Ok(kind)
}

fn refused(what: &str) -> ToolError {
    ToolError::Message(format!(
        "web_fetch cannot read {what}; it reads HTML, text, XML and JSON"
    ))
}

/// The type a body's first bytes spell, for the formats a model cannot read as text.
fn sniffed_type(body: &[u8]) -> Option<&'static str> {
    const SIGNATURES: &[(&[u8], &str)] = &[
        (b"%PDF-", "application/pdf"),
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF87a", "image/gif"),
        (b"GIF89a", "image/gif"),
        (b"PK\x03\x04", "application/zip"),
        (b"\x1f\x8b", "application/gzip"),
    ];
    let webp = body.len() >= 12 && body.starts_with(b"RIFF") && &body[8..12] == b"WEBP";
    if webp {
        return Some("image/webp");
    }
    SIGNATURES
        .iter()
        .find(|(magic, _)| body.starts_with(magic))
        .map(|(_, name)| *name)
}

fn looks_binary(body: &[u8]) -> bool {
    body.iter().take(8192).any(|&b| b == 0)
}

fn looks_like_html(body: &[u8]) -> bool {
    let head = String::from_utf8_lossy(&body[..body.len().min(1024)]).to_ascii_lowercase();
    let head = head.trim_start_matches('\u{feff}').trim_start();
    head.starts_with("<!doctype html") || head.starts_with("<html") || head.contains("<body")
}

/// The charset a document declares near its start: `<meta charset>` or `http-equiv` for
/// HTML, the XML declaration for XHTML and XML.
fn declared_encoding(body: &[u8], kind: Kind) -> Option<&'static Encoding> {
    static META: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r#"(?i)<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)"#).ok()
    });
    static XML: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r#"^\s*<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9_.:\-]+)"#).ok()
    });
    let head = &body[..body.len().min(4096)];
    let find = |re: &Option<Regex>| {
        let caps = re.as_ref()?.captures(head)?;
        Encoding::for_label(caps.get(1)?.as_bytes())
    };
    let found = match kind {
        Kind::Html => find(&XML).or_else(|| find(&META)),
        Kind::Text => find(&XML),
        Kind::Json => None,
    }?;
    // A page cannot be UTF-16 and still say so in ASCII: the HTML standard reads it as UTF-8.
    if found == encoding_rs::UTF_16LE || found == encoding_rs::UTF_16BE {
        return Some(UTF_8);
    }
    Some(found)
}

fn json_page(url: &str, text: &str) -> Page {
    let pretty = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok());
    Page::new(url, None, pretty.unwrap_or_else(|| text.to_string()))
}

/// Elements that are never a page's content: code, navigation, forms, cookie banners.
const NEVER_CONTENT: &str = "script, style, noscript, template, nav, iframe, svg, canvas, \
     form, button, dialog, [role=navigation], [role=banner], [role=contentinfo], \
     [aria-hidden=true], [id*=cookie-banner], [class*=cookie-banner], [id*=cookie-consent], \
     [class*=cookie-consent], [class*=consent-banner]";

/// The site's frame around the content, unless it sits inside the content itself (an
/// article's own header with its byline).
const FRAME: &str = "header, footer, aside";

/// The main content as Markdown, by readability's scoring over the page without its
/// boilerplate elements (on a short page readability falls back to the whole body, which
/// must not bring the site's menu with it).
fn html_page(url: &str, html: &str) -> Page {
    let doc = dom_query::Document::from(html);
    let head_title = doc.select("head title").text().trim().to_string();
    strip_boilerplate(&doc);
    let cfg = Config {
        text_mode: TextMode::Markdown,
        ..Config::default()
    };
    let article =
        Readability::with_document(doc.clone(), Some(url), Some(cfg)).and_then(|mut r| r.parse());
    let (title, md) = match article {
        Ok(a) if !a.text_content.trim().is_empty() => {
            (a.title.trim().to_string(), a.text_content.to_string())
        }
        _ => (head_title, body_markdown(&doc)),
    };
    Page::new(url, Some(title).filter(|t| !t.is_empty()), tidy(&md))
}

fn strip_boilerplate(doc: &dom_query::Document) {
    doc.select(NEVER_CONTENT).remove();
    for node in doc.select(FRAME).nodes() {
        let in_content = node
            .ancestors_it(None)
            .any(|a| a.has_name("article") || a.has_name("main"));
        if !in_content {
            node.remove_from_parent();
        }
    }
}

fn body_markdown(doc: &dom_query::Document) -> String {
    match doc.select("body").nodes().first() {
        Some(body) => body.md(None).to_string(),
        None => doc.md(None).to_string(),
    }
}

/// Trailing spaces off and runs of blank lines down to one.
fn tidy(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut blank = 0;
    for line in md.trim().lines() {
        let line = line.trim_end();
        blank = if line.is_empty() { blank + 1 } else { 0 };
        if blank <= 1 {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.truncate(out.trim_end().len());
    out
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
