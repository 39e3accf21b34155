//! A tool call's arguments as the compact JSON text of one object.
//!
//! Arguments are read by exactly one party, the tool that runs them; everyone else (the
//! transcript, the events, the request back to the provider) only carries them. As text
//! they cost one allocation; as a `serde_json::Value` map they cost one per key and value
//! plus the map, three times over in a fan-out (provider, transcript, dispatch). A
//! 100,000-task fan-out held ~90 MiB in those maps.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::LazyLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Always one JSON object without insignificant whitespace, so it can be embedded as is in
/// an NDJSON line or sent back as the provider's argument string.
#[derive(Clone)]
pub struct ToolArgs(Box<RawValue>);

impl ToolArgs {
    /// `{}`: a call the model made without arguments.
    pub fn empty() -> Self {
        // `{}` is valid JSON: this cannot fail.
        Self(RawValue::from_string("{}".to_string()).unwrap_or_else(|_| unreachable!()))
    }

    /// The arguments in `raw` when it is one JSON object (surrounding whitespace allowed),
    /// else `None`.
    pub fn parse(raw: &str) -> Option<Self> {
        let raw = raw.trim();
        if !raw.starts_with('{') {
            return None;
        }
        // Validates the whole text: one value, nothing after it.
        let value: Box<RawValue> = serde_json::from_str(raw).ok()?;
        Some(match compact(value.get()) {
            Some(text) => Self::from_compact(text),
            None => Self(value),
        })
    }

    /// The arguments of an object value; anything else counts as `{}`.
    pub fn from_value(value: &Value) -> Self {
        if value.is_object() {
            // Serializing a value gives compact, valid JSON.
            Self::from_compact(value.to_string())
        } else {
            Self::empty()
        }
    }

    fn from_compact(text: String) -> Self {
        match RawValue::from_string(text) {
            Ok(v) => Self(v),
            // Only reached if a caller passed text that is not JSON, which none does.
            Err(_) => Self::empty(),
        }
    }

    /// The JSON text, e.g. `{"path":"."}`.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    pub fn is_empty_object(&self) -> bool {
        self.as_str() == "{}"
    }

    /// The arguments as a map, for the one party that reads them.
    pub fn to_map(&self) -> Map<String, Value> {
        serde_json::from_str(self.as_str()).unwrap_or_default()
    }

    pub fn to_value(&self) -> Value {
        Value::Object(self.to_map())
    }
}

/// `text` without whitespace outside strings, or `None` when it has none to drop. `text`
/// must be valid JSON, so a string ends at the first unescaped `"`.
fn compact(text: &str) -> Option<String> {
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let bytes = text.as_bytes();
    let mut in_string = false;
    let mut escaped = false;
    let needs = bytes.iter().any(|&b| {
        let space = !in_string && is_space(b);
        step(b, &mut in_string, &mut escaped);
        space
    });
    if !needs {
        return None;
    }
    let (mut in_string, mut escaped) = (false, false);
    let mut out = Vec::with_capacity(bytes.len());
    for &b in bytes {
        if in_string || !is_space(b) {
            out.push(b);
        }
        step(b, &mut in_string, &mut escaped);
    }
    // Only ASCII whitespace was removed between tokens, so the text is still UTF-8.
    String::from_utf8(out).ok()
}

/// Advances the string state over one byte.
fn step(b: u8, in_string: &mut bool, escaped: &mut bool) {
    if !*in_string {
        *in_string = b == b'"';
    } else if *escaped {
        *escaped = false;
    } else if b == b'\\' {
        *escaped = true;
    } else if b == b'"' {
        *in_string = false;
    }
}

impl PartialEq for ToolArgs {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl fmt::Debug for ToolArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Default for ToolArgs {
    fn default() -> Self {
        Self::empty()
    }
}

/// Tests compare a call's arguments with a `json!` value.
impl PartialEq<Value> for ToolArgs {
    fn eq(&self, other: &Value) -> bool {
        &self.to_value() == other
    }
}

impl From<Value> for ToolArgs {
    fn from(v: Value) -> Self {
        Self::from_value(&v)
    }
}

impl Serialize for ToolArgs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ToolArgs {
    /// Any JSON value; what is not an object counts as `{}`, as for a provider's call.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Ok(Self::parse(raw.get()).unwrap_or_default())
    }
}

/// Fields a provider added to a call beside id, name and arguments (see `ToolCall::extra`).
/// Most calls have none, so the map is only allocated for one that has: a fan-out's
/// transcript holds every call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallExtra(Option<Box<Map<String, Value>>>);

impl CallExtra {
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|m| m.is_empty())
    }

    pub fn to_map(&self) -> Map<String, Value> {
        self.0.as_deref().cloned().unwrap_or_default()
    }
}

impl Deref for CallExtra {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        static NONE: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);
        self.0.as_deref().unwrap_or(&NONE)
    }
}

impl DerefMut for CallExtra {
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        self.0.get_or_insert_with(Box::default)
    }
}

impl From<Map<String, Value>> for CallExtra {
    fn from(m: Map<String, Value>) -> Self {
        Self((!m.is_empty()).then(|| Box::new(m)))
    }
}

impl<'a> IntoIterator for &'a CallExtra {
    type Item = (&'a String, &'a Value);
    type IntoIter = serde_json::map::Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.deref().iter()
    }
}

impl Serialize for CallExtra {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.deref().serialize(s)
    }
}

impl<'de> Deserialize<'de> for CallExtra {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Map::deserialize(d).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_are_kept_compact_and_everything_else_refused() {
        let a = ToolArgs::parse(" {\n  \"path\" : \"a b\\\" {x}\",\t\"n\": [1, 2]\r\n}\n").unwrap();
        assert_eq!(a.as_str(), r#"{"path":"a b\" {x}","n":[1,2]}"#);
        assert_eq!(a.to_value(), json!({"path": "a b\" {x}", "n": [1, 2]}));
        let already = r#"{"a":"x\\","b":"  "}"#;
        assert_eq!(ToolArgs::parse(already).unwrap().as_str(), already);
        for bad in [
            "",
            "[1]",
            "\"{}\"",
            "{\"a\":",
            "{} {}",
            "{\"a\":1}x",
            "null",
        ] {
            assert!(ToolArgs::parse(bad).is_none(), "{bad:?}");
        }
        assert!(ToolArgs::parse("{}").unwrap().is_empty_object());
    }

    #[test]
    fn a_value_becomes_its_compact_text_and_serializes_raw() {
        let a = ToolArgs::from_value(&json!({"z": 1, "a": {"y": [1, 2], "b": null}}));
        assert_eq!(a.as_str(), r#"{"z":1,"a":{"y":[1,2],"b":null}}"#);
        assert_eq!(ToolArgs::from_value(&json!([1])), ToolArgs::empty());
        let line = serde_json::to_string(&json!({"arguments": a.to_value()})).unwrap();
        #[derive(Serialize)]
        struct E<'a> {
            arguments: &'a ToolArgs,
        }
        assert_eq!(serde_json::to_string(&E { arguments: &a }).unwrap(), line);
    }

    #[test]
    fn deserializing_takes_objects_and_counts_the_rest_as_empty() {
        let a: ToolArgs = serde_json::from_str("{ \"k\" : [ true ] }").unwrap();
        assert_eq!(a.as_str(), r#"{"k":[true]}"#);
        let s: ToolArgs = serde_json::from_str("\"text\"").unwrap();
        assert!(s.is_empty_object());
    }

    #[test]
    fn extra_fields_are_allocated_only_when_there_are_some() {
        let mut e = CallExtra::default();
        assert!(e.is_empty() && e.0.is_none() && e.get("x").is_none());
        assert!(CallExtra::from(Map::new()).0.is_none());
        e.insert("sig".into(), json!("s"));
        assert_eq!(e.to_map(), *json!({"sig": "s"}).as_object().unwrap());
        assert_eq!(serde_json::to_string(&e).unwrap(), r#"{"sig":"s"}"#);
        let back: CallExtra = serde_json::from_str(r#"{"sig":"s"}"#).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn non_ascii_text_survives_compaction() {
        let a = ToolArgs::parse("{ \"t\": \"héllo — 世界\" }").unwrap();
        assert_eq!(a.as_str(), "{\"t\":\"héllo — 世界\"}");
    }
}
