//! What a failed provider call says, in one line: the message of an error body (JSON or an
//! HTML error page), an error and its causes, and the API key redacted from all of it.

use std::error::Error as StdError;

use serde_json::Value;

use super::ModelError;

pub fn stream_error(provider: &str, message: impl Into<String>) -> ModelError {
    ModelError::Stream {
        provider: provider.to_string(),
        message: message.into(),
    }
}

/// A stream that broke off (see [`ModelError::Dropped`]): retried.
pub fn dropped(provider: &str, message: impl Into<String>) -> ModelError {
    ModelError::Dropped {
        provider: provider.to_string(),
        message: message.into(),
    }
}

/// An error and its sources, `: `-joined, skipping sources already quoted by their parent
/// (reqwest and hyper repeat themselves).
pub fn error_chain(err: &(dyn StdError + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

/// The JSON `{"error":{"message":…}}` / `{"error":"…"}` / `{"message":…}` message of a body.
pub fn json_error_message(value: &Value) -> Option<String> {
    let error = value.get("error");
    let text = match error {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Object(obj)) => match obj.get("message") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => Some(Value::Object(obj.clone()).to_string()),
        },
        _ => value
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string),
    }?;
    Some(clip(text.trim(), 1000))
}

/// What an HTTP error body says: its JSON error message, else a short plain-text excerpt
/// (HTML tags stripped, whitespace collapsed, at most 200 characters).
pub fn error_body_message(body: &str) -> String {
    if let Ok(mut value) = serde_json::from_str::<Value>(body) {
        // Gemini's streaming endpoints wrap the error object in an array.
        if let Value::Array(items) = &mut value {
            if items.len() == 1 {
                value = items.remove(0);
            }
        }
        if let Some(message) = json_error_message(&value) {
            return message;
        }
    }
    let text = collapse_whitespace(&strip_tags(body));
    clip(&text, 200)
}

/// Drops tags, and the contents of `<script>` and `<style>` elements (error pages of CDNs
/// and proxies carry kilobytes of them before the one sentence that matters).
fn strip_tags(text: &str) -> String {
    // ASCII lowercasing keeps byte offsets, so indices found in `lower` apply to `text`.
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    while let Some(offset) = text[rest..].find('<') {
        let start = rest + offset;
        out.push_str(&text[rest..start]);
        let Some(close) = text[start..].find('>') else {
            // An unterminated tag: nothing after it is text.
            return out;
        };
        rest = start + close + 1;
        let name: String = lower[start + 1..]
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        if name == "script" || name == "style" {
            let end_tag = format!("</{name}");
            rest = match lower[rest..].find(&end_tag) {
                Some(at) => {
                    let at = rest + at;
                    lower[at..].find('>').map_or(text.len(), |gt| at + gt + 1)
                }
                None => text.len(),
            };
        }
        // A space keeps `<td>a</td><td>b</td>` from gluing into `ab`.
        out.push(' ');
    }
    out.push_str(&text[rest..]);
    out
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub use deerflow_base::text::clip;

/// Replaces the API key wherever it appears in an error's message: servers sometimes echo
/// request headers back, and error messages end up in logs and event streams.
pub fn redact(err: ModelError, api_key: Option<&str>) -> ModelError {
    let Some(key) = api_key.filter(|k| k.len() >= 4) else {
        return err;
    };
    let clean = |m: String| scrub(&m, key);
    match err {
        ModelError::Http {
            provider,
            status,
            message,
            retry_after,
        } => ModelError::Http {
            provider,
            status,
            message: clean(message),
            retry_after,
        },
        ModelError::Connect { provider, message } => ModelError::Connect {
            provider,
            message: clean(message),
        },
        ModelError::Timeout { provider, message } => ModelError::Timeout {
            provider,
            message: clean(message),
        },
        ModelError::Stream { provider, message } => ModelError::Stream {
            provider,
            message: clean(message),
        },
        ModelError::Dropped { provider, message } => ModelError::Dropped {
            provider,
            message: clean(message),
        },
        ModelError::Refused { provider, message } => ModelError::Refused {
            provider,
            message: clean(message),
        },
        ModelError::Script(message) => ModelError::Script(clean(message)),
        ModelError::Cancelled => ModelError::Cancelled,
    }
}

/// `message` without `key`: every whole occurrence, and a start of it left at the end by an
/// earlier cut (`…sk-abcd…`), which would otherwise leak a prefix of the key.
fn scrub(message: &str, key: &str) -> String {
    let mut out = message.replace(key, "[redacted]");
    let (body, mark) = match out.strip_suffix('…') {
        Some(b) => (b.to_string(), "…"),
        None => (out.clone(), ""),
    };
    for len in (4..key.len()).rev() {
        if key.is_char_boundary(len) && body.ends_with(&key[..len]) {
            out = format!("{}[redacted]{mark}", &body[..body.len() - len]);
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_cut_by_a_clip_is_still_redacted() {
        let key = "sk-secret-1234567890";
        let clipped = clip(&format!("bad key {key} echoed"), 16);
        assert_eq!(clipped, "bad key sk-secre…");
        assert_eq!(scrub(&clipped, key), "bad key [redacted]…");
        assert_eq!(
            scrub(&format!("{key} and {key}"), key),
            "[redacted] and [redacted]"
        );
        assert_eq!(scrub("nothing here", key), "nothing here");
        // Three characters of a key say nothing; a word that happens to end like one stays.
        assert_eq!(scrub("ask-", key), "ask-");
    }

    #[test]
    fn an_error_in_an_array_is_read_too() {
        let body =
            r#"[{"error": {"code": 400, "message": "Bad schema.", "status": "INVALID_ARGUMENT"}}]"#;
        assert_eq!(error_body_message(body), "Bad schema.");
    }

    const OVERFLOW: &str =
        include_str!("../../../tests/fixtures/llama-server/error_context_overflow.txt");

    #[test]
    fn extracts_json_error_messages() {
        assert_eq!(
            error_body_message(r#"{"error":{"message":"bad key","type":"x"}}"#),
            "bad key"
        );
        assert_eq!(
            error_body_message(r#"{"error":"overloaded"}"#),
            "overloaded"
        );
        assert_eq!(
            error_body_message(r#"{"message":"Forbidden"}"#),
            "Forbidden"
        );
        assert_eq!(
            error_body_message(r#"{"error":{"code":7}}"#),
            r#"{"code":7}"#
        );
    }

    #[test]
    fn the_context_overflow_capture_keeps_its_message() {
        let body = OVERFLOW.split("\r\n\r\n").nth(1).unwrap();
        let message = error_body_message(body);
        assert!(
            message.contains("exceeds the available context size"),
            "{message}"
        );
        assert_eq!(
            message,
            "request (6033 tokens) exceeds the available context size (4096 tokens), try increasing it"
        );
    }

    #[test]
    fn html_bodies_become_short_plain_text() {
        let html = "<html><head><title>502 Bad Gateway</title></head>\n<body>\n<center><h1>502 \
                    Bad Gateway</h1></center>\n<hr><center>nginx</center></body></html>";
        assert_eq!(
            error_body_message(html),
            "502 Bad Gateway 502 Bad Gateway nginx"
        );
        let long = format!("<p>{}</p>", "word ".repeat(100));
        let message = error_body_message(&long);
        assert_eq!(message.chars().count(), 201);
        assert!(message.ends_with('…'));
        assert_eq!(error_body_message(""), "");
    }

    #[test]
    fn html_scripts_and_styles_are_dropped() {
        let html = "<html><head><STYLE type=\"text/css\">body { color: red }</STYLE>\
                    <script>var a = 1 < 2;</script></head><body><h1>Error 522</h1>\
                    <p>Connection timed out</p><script src=x></script></body></html>";
        assert_eq!(error_body_message(html), "Error 522 Connection timed out");
        assert_eq!(error_body_message("a <style>never closed"), "a");
        assert_eq!(error_body_message("ok <b"), "ok");
        assert_eq!(error_body_message("x > y <i>é</i>"), "x > y é");
    }

    #[test]
    fn redacts_the_api_key_everywhere() {
        let err = ModelError::Http {
            provider: "openai".into(),
            status: 401,
            message: "Incorrect API key provided: sk-secret-123".into(),
            retry_after: None,
        };
        let text = redact(err, Some("sk-secret-123")).to_string();
        assert!(!text.contains("sk-secret-123"), "{text}");
        assert!(text.contains("[redacted]"));
    }
}
