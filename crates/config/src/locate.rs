//! Finds the line of a key path in the original YAML text.
//!
//! `serde_yaml_ng::Value` keeps no positions, but the streaming deserializer stamps every
//! error with the position of the node being read. So we walk the raw text down the path
//! with a seed that fails on purpose at the target node, and read the line off the error.
//! This follows YAML's real structure (flow maps, anchors, quoting) without a parser of our own.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::keypath::{KeyPath, Seg};

/// Text of the deliberate failure, so it cannot be confused with a real one.
const MARKER: &str = "__deerflow_locate_target__";

/// The 1-based line where the value at `path` starts, if the text has it.
pub fn line_of(text: &str, path: &KeyPath) -> Option<usize> {
    let de = serde_yaml_ng::Deserializer::from_str(text);
    match (Locate { path: &path.0 }).deserialize(de) {
        Err(e) if e.to_string().contains(MARKER) => e.location().map(|l| l.line()),
        _ => None,
    }
}

struct Locate<'p> {
    path: &'p [Seg],
}

impl<'de> DeserializeSeed<'de> for Locate<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Locate<'_> {
    type Value = ();

    // At the target every visit falls through to serde's default `invalid_type` error,
    // whose text carries this "expected" string: that is the deliberate failure.
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(MARKER)
        } else {
            f.write_str("a mapping or a list")
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Seg::Key(want), rest)) = self.path.split_first() else {
            return Err(de::Error::invalid_type(de::Unexpected::Map, &self));
        };
        while let Some(key) = map.next_key::<serde_yaml_ng::Value>()? {
            if key_matches(&key, want) {
                return map.next_value_seed(Locate { path: rest });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Seg::Index(want), rest)) = self.path.split_first() else {
            return Err(de::Error::invalid_type(de::Unexpected::Seq, &self));
        };
        for _ in 0..*want {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        seq.next_element_seed(Locate { path: rest }).map(|_| ())
    }
}

fn key_matches(key: &serde_yaml_ng::Value, want: &str) -> bool {
    match key {
        serde_yaml_ng::Value::String(s) => s == want,
        serde_yaml_ng::Value::Number(n) => n.to_string() == want,
        serde_yaml_ng::Value::Bool(b) => b.to_string() == want,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(segs: &[&str]) -> KeyPath {
        KeyPath(
            segs.iter()
                .map(|s| match s.parse::<usize>() {
                    Ok(i) => Seg::Index(i),
                    Err(_) => Seg::Key(s.to_string()),
                })
                .collect(),
        )
    }

    const TEXT: &str = "# comment\nmodels:\n  - name: a\n    timeout: 5\n  - name: b\n    timeout: abc\nsandbox: {use: local, allow_host_bash: x}\n";

    #[test]
    fn finds_nested_lines() {
        assert_eq!(line_of(TEXT, &path(&["models"])), Some(3));
        assert_eq!(line_of(TEXT, &path(&["models", "1", "timeout"])), Some(6));
        assert_eq!(line_of(TEXT, &path(&["models", "0", "timeout"])), Some(4));
        assert_eq!(
            line_of(TEXT, &path(&["sandbox", "allow_host_bash"])),
            Some(7)
        );
    }

    #[test]
    fn missing_paths_have_no_line() {
        assert_eq!(line_of(TEXT, &path(&["models", "5", "timeout"])), None);
        assert_eq!(line_of(TEXT, &path(&["nope"])), None);
        assert_eq!(line_of(TEXT, &path(&["models", "0", "timeout", "x"])), None);
    }
}
