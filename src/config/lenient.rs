//! A deserializer over a YAML tree that gives every type a value of its own, whatever the
//! tree holds there: a `$VAR` where a number goes, a list where a mapping goes.
//!
//! The ignored-key pass (`ignored.rs`) walks the raw tree into `Config` with it, so a type
//! error in one key cannot stop the walk before the keys after it are seen (type errors are
//! the typed decoding's job, later). The values it produces are meaningless; only the walk
//! matters: which mapping keys a struct takes and which it skips.

use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde_yaml_ng::mapping::Iter;
use serde_yaml_ng::Value;

/// What can still go wrong with every type satisfied: the struct's own checks. A missing
/// required field is kept apart so the caller can supply it and walk again.
#[derive(Debug, Clone, PartialEq)]
pub enum WalkError {
    MissingField(&'static str),
    Other(String),
}

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WalkError::MissingField(name) => write!(f, "missing field `{name}`"),
            WalkError::Other(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for WalkError {}

impl de::Error for WalkError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        WalkError::Other(msg.to_string())
    }

    fn missing_field(field: &'static str) -> Self {
        WalkError::MissingField(field)
    }
}

/// The keys each mapping of the walked tree is read with, by the node's address: what a key
/// nobody takes may have been meant as (`temprature` → `temperature`). Collected only while
/// [`fields::collect`] runs, on the walking thread.
pub mod fields {
    use std::cell::RefCell;
    use std::collections::HashMap;

    use serde_yaml_ng::Value;

    pub type Known = HashMap<usize, &'static [&'static str]>;

    thread_local! {
        static KNOWN: RefCell<Option<Known>> = const { RefCell::new(None) };
    }

    pub(super) fn record(node: &Value, fields: &'static [&'static str]) {
        KNOWN.with(|k| {
            if let Some(map) = k.borrow_mut().as_mut() {
                map.insert(node as *const Value as usize, fields);
            }
        });
    }

    /// Runs `walk` and returns what it returned with the fields it met.
    pub fn collect<T>(walk: impl FnOnce() -> T) -> (T, Known) {
        KNOWN.with(|k| *k.borrow_mut() = Some(Known::new()));
        let out = walk();
        let known = KNOWN.with(|k| k.borrow_mut().take()).unwrap_or_default();
        (out, known)
    }
}

/// Deserializes any type from any node (see the module docs).
#[derive(Clone, Copy)]
pub struct Lenient<'v>(pub &'v Value);

static NULL: Value = Value::Null;

impl<'v> Lenient<'v> {
    /// The node without YAML tags (`!tag value` reads as `value`).
    fn node(self) -> &'v Value {
        let mut v = self.0;
        while let Value::Tagged(t) = v {
            v = &t.value;
        }
        v
    }
}

/// A mapping key as text, the way key paths spell it (`1: x` is the key `1`).
pub fn key_text(k: &Value) -> String {
    match k {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Tagged(t) => key_text(&t.value),
        other => serde_yaml_ng::to_string(other)
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
    }
}

/// Scalars get a neutral value, never the node's own: a node of the wrong type (or out of
/// range) must not fail the walk.
macro_rules! neutral {
    ($($method:ident => $visit:ident($($value:expr)?);)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
                visitor.$visit($($value)?)
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for Lenient<'_> {
    type Error = WalkError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
        match self.node() {
            Value::Null | Value::Tagged(_) => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => visitor.visit_u64(u),
                (None, Some(i)) => visitor.visit_i64(i),
                (None, None) => visitor.visit_f64(n.as_f64().unwrap_or(0.0)),
            },
            Value::String(s) => visitor.visit_str(s),
            Value::Sequence(items) => visitor.visit_seq(Items(items.iter())),
            Value::Mapping(map) => visitor.visit_map(Entries::of(Some(map.iter()))),
        }
    }

    neutral! {
        deserialize_bool => visit_bool(false);
        deserialize_i8 => visit_i64(0);
        deserialize_i16 => visit_i64(0);
        deserialize_i32 => visit_i64(0);
        deserialize_i64 => visit_i64(0);
        deserialize_i128 => visit_i128(0);
        deserialize_u8 => visit_u64(0);
        deserialize_u16 => visit_u64(0);
        deserialize_u32 => visit_u64(0);
        deserialize_u64 => visit_u64(0);
        deserialize_u128 => visit_u128(0);
        deserialize_f32 => visit_f64(0.0);
        deserialize_f64 => visit_f64(0.0);
        deserialize_char => visit_char(' ');
        deserialize_bytes => visit_bytes(&[]);
        deserialize_byte_buf => visit_bytes(&[]);
        deserialize_unit => visit_unit();
        deserialize_ignored_any => visit_unit();
    }

    // Strings are the one scalar whose text matters: map keys (agent names) are read with
    // these, and the ignored-key report names them.
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
        match self.node() {
            v @ (Value::String(_) | Value::Number(_) | Value::Bool(_)) => {
                visitor.visit_str(&key_text(v))
            }
            _ => visitor.visit_str(""),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
        match self.node() {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, WalkError> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, WalkError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
        match self.node() {
            Value::Sequence(items) => visitor.visit_seq(Items(items.iter())),
            _ => visitor.visit_seq(Items([].iter())),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, WalkError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, WalkError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
        match self.node() {
            Value::Mapping(map) => visitor.visit_map(Entries::of(Some(map.iter()))),
            _ => visitor.visit_map(Entries::of(None)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, WalkError> {
        fields::record(self.node(), fields);
        self.deserialize_map(visitor)
    }

    /// A unit variant: the one the node names, else the first.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, WalkError> {
        let named = match self.node() {
            Value::String(s) => variants.iter().find(|v| **v == s.as_str()),
            _ => None,
        };
        match named.or(variants.first()) {
            Some(variant) => visitor.visit_enum((*variant).into_deserializer()),
            None => Err(de::Error::custom("an enum without variants")),
        }
    }
}

struct Items<'v>(std::slice::Iter<'v, Value>);

impl<'de> SeqAccess<'de> for Items<'_> {
    type Error = WalkError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, WalkError> {
        self.0
            .next()
            .map(|item| seed.deserialize(Lenient(item)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct Entries<'v> {
    iter: Option<Iter<'v>>,
    value: &'v Value,
}

impl<'v> Entries<'v> {
    fn of(iter: Option<Iter<'v>>) -> Self {
        Self { iter, value: &NULL }
    }
}

impl<'de> MapAccess<'de> for Entries<'_> {
    type Error = WalkError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, WalkError> {
        match self.iter.as_mut().and_then(Iterator::next) {
            Some((k, v)) => {
                self.value = v;
                seed.deserialize(Lenient(k)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, WalkError> {
        seed.deserialize(Lenient(std::mem::replace(&mut self.value, &NULL)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default)]
    struct Inner {
        n: u32,
        f: f64,
        on: bool,
        list: Vec<String>,
        maybe: Option<u8>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Outer {
        #[serde(alias = "title")]
        name: String,
        inner: Inner,
        #[serde(default)]
        agents: BTreeMap<String, Inner>,
    }

    fn walk<T: for<'de> Deserialize<'de>>(yaml: &str) -> Result<T, WalkError> {
        let v: Value = serde_yaml_ng::from_str(yaml).unwrap();
        T::deserialize(Lenient(&v))
    }

    #[test]
    fn every_type_accepts_every_node() {
        let got: Outer = walk(
            "name: [not, a, string]\ninner: {n: $N, f: abc, on: 3, list: {a: 1}, maybe: -4}\nagents: {x: 5, 7: {n: -1}}",
        )
        .unwrap();
        assert_eq!(got.name, "");
        assert_eq!(got.inner.maybe, Some(0));
        assert_eq!(got.inner.list, Vec::<String>::new());
        // Keys keep their text: the walk reports paths by them.
        assert_eq!(got.agents.keys().collect::<Vec<_>>(), ["7", "x"]);
        let got: Outer = walk("name: !tagged x\ninner: null").unwrap();
        assert_eq!((got.name.as_str(), got.inner), ("x", Inner::default()));
    }

    #[test]
    fn a_missing_required_field_is_its_own_error() {
        assert_eq!(
            walk::<Outer>("inner: {}"),
            Err(WalkError::MissingField("name"))
        );
        let e = walk::<Outer>("name: a\ntitle: b\ninner: {}").unwrap_err();
        assert!(matches!(e, WalkError::Other(_)), "{e:?}");
    }
}
