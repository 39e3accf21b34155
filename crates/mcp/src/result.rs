//! A `tools/call` result as the tool result the model gets (contract §9), read from its JSON
//! leniently: rmcp's typed model rejects a whole result for one odd part, and the model
//! would get nothing useful. What can be read is kept, what cannot is named in one line.
//!
//! Readings of what the protocol does not allow:
//! - `content`: `null` or absent is no block; a string is one text block; an object is one
//!   block.
//! - `isError`: `true`, the string `"true"` (any case) and a non-zero number mean an error;
//!   anything else (`false`, `"false"`, `0`, `null`, other strings, objects) does not — a
//!   server that does not say "error" clearly is taken at its content.
//! - a text block's `text` that is no string: a number, boolean, array or object is shown
//!   as JSON; `null` or absent is named.

use serde_json::Value;

use deerflow_tools::{Content, Media, ToolError, ToolOutput, ToolStatus};

/// Text blocks joined by newlines, other blocks one line each, `structuredContent` as JSON
/// text when no block is text, `isError` makes it an error.
pub fn output(result: &Value) -> ToolOutput {
    let Some(map) = result.as_object() else {
        return ToolError::Message(format!(
            "the MCP server answered tools/call with {} instead of a result object",
            kind_of(result)
        ))
        .into();
    };
    let status = if map.get("isError").is_some_and(is_true) {
        ToolStatus::Error
    } else {
        ToolStatus::Ok
    };
    let mut blocks: Vec<Content> = match map.get("content") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.iter().map(block).collect(),
        Some(Value::String(s)) => vec![Content::Text(s.clone())],
        Some(one) => vec![block(one)],
    };
    let has_text = blocks.iter().any(|b| matches!(b, Content::Text(_)));
    match map.get("structuredContent") {
        Some(s) if !has_text && !s.is_null() => blocks.insert(0, Content::Text(s.to_string())),
        _ => {}
    }
    ToolOutput::with_content(status, blocks)
}

fn is_true(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => s.trim().eq_ignore_ascii_case("true"),
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        _ => false,
    }
}

fn block(v: &Value) -> Content {
    let Some(map) = v.as_object() else {
        return named(format!("unsupported content block: {}", kind_of(v)));
    };
    let str_of = |key: &str| map.get(key).and_then(Value::as_str);
    let media = |kind: &str, mime: Option<&str>, description: String| {
        Content::Media(Media {
            kind: kind.into(),
            mime_type: Some(shown(mime.unwrap_or("unknown type"))),
            description,
        })
    };
    match str_of("type") {
        Some("text") => match map.get("text") {
            Some(Value::String(t)) => Content::Text(t.clone()),
            None | Some(Value::Null) => named("text block without text".into()),
            Some(other) => Content::Text(other.to_string()),
        },
        Some(kind @ ("image" | "audio")) => media(
            kind,
            str_of("mimeType"),
            bytes(str_of("data").unwrap_or("")),
        ),
        Some("resource") => resource(
            map.get("resource")
                .and_then(|r| r.get("uri"))
                .and_then(Value::as_str),
        ),
        Some("resource_link") => resource(str_of("uri")),
        Some(other) => named(format!(
            "unsupported content block of type '{}'",
            shown(other)
        )),
        None => named("content block without a type".into()),
    }
}

fn resource(uri: Option<&str>) -> Content {
    Content::Media(Media {
        kind: "resource".into(),
        mime_type: None,
        description: uri.map_or_else(|| "without a URI".into(), shown),
    })
}

/// A block described by `what` alone: `[what]`.
fn named(what: String) -> Content {
    Content::Media(Media {
        kind: what,
        mime_type: None,
        description: String::new(),
    })
}

/// A server's word inside a one-line description: on one line, and short.
fn shown(s: &str) -> String {
    const MAX: usize = 200;
    let one_line = deerflow_base::text::escape_controls(s);
    if one_line.chars().count() <= MAX {
        one_line.into_owned()
    } else {
        let cut: String = one_line.chars().take(MAX).collect();
        format!("{cut}…")
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The decoded size of base64 data, without decoding it.
fn bytes(b64: &str) -> String {
    let clean = b64.trim_end_matches('=').len();
    format!("{} bytes", clean * 3 / 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(v: Value) -> (ToolStatus, String) {
        let out = output(&v);
        (out.status, out.text().into_owned())
    }

    #[test]
    fn results_map_as_the_contract_says() {
        let r = json!({"content": [
            {"type": "text", "text": "a"},
            {"type": "image", "data": "AAAA".repeat(3), "mimeType": "image/png"},
            {"type": "text", "text": "b"},
        ], "structuredContent": {"x": 1}});
        assert_eq!(
            shown(r),
            (ToolStatus::Ok, "a\n[image: image/png, 9 bytes]\nb".into())
        );
        let r = json!({"content": [], "structuredContent": {"x": 1}, "isError": true});
        assert_eq!(shown(r), (ToolStatus::Error, r#"{"x":1}"#.into()));
    }

    #[test]
    fn odd_parts_are_kept_or_named_never_dumped() {
        let r = json!({"content": [
            {"type": "text", "text": "kept"},
            {"type": "foo", "x": 1},
            {"type": "text", "text": 42},
            {"type": "text"},
            "loose",
            {"no": "type"},
            {"type": "resource_link", "uri": "file:///a"},
            {"type": "resource", "resource": {}},
        ]});
        let (status, text) = shown(r);
        assert_eq!(status, ToolStatus::Ok);
        assert_eq!(
            text,
            "kept\n[unsupported content block of type 'foo']\n42\n[text block without text]\n\
             [unsupported content block: a string]\n[content block without a type]\n\
             [resource: file:///a]\n[resource: without a URI]"
        );
        assert_eq!(shown(json!({"content": null})), (ToolStatus::Ok, "".into()));
        assert_eq!(shown(json!({})), (ToolStatus::Ok, "".into()));
        assert_eq!(
            shown(json!({"content": "just text"})),
            (ToolStatus::Ok, "just text".into())
        );
        let (s, t) = shown(json!("nope"));
        assert_eq!(s, ToolStatus::Error);
        assert!(t.contains("a string instead of a result object"), "{t}");
    }

    #[test]
    fn is_error_reads_clear_yeses_only() {
        let with = |e: Value| shown(json!({"content": [], "isError": e})).0;
        for yes in [json!(true), json!("true"), json!("TRUE"), json!(1)] {
            assert_eq!(with(yes.clone()), ToolStatus::Error, "{yes}");
        }
        for no in [
            json!(false),
            json!("false"),
            json!(0),
            json!(null),
            json!("yes"),
            json!({}),
        ] {
            assert_eq!(with(no.clone()), ToolStatus::Ok, "{no}");
        }
    }

    #[test]
    fn a_server_s_type_name_is_one_short_line() {
        let r = json!({"content": [{"type": format!("\u{1b}]52;c;aGk=\u{7}{}", "x".repeat(500))}]});
        let (_, text) = shown(r);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text}"
        );
        assert!(text.chars().count() < 300, "{text}");
    }
}
