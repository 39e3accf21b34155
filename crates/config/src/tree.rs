//! The one deserializer the config is read with: the YAML tree, walked by the typed model.
//!
//! It reads values as they are, with four differences from `serde_yaml_ng`'s own:
//! - a whole `$NAME` string is the variable's value wherever a field reads it (a number or
//!   boolean when it reads as one), except under a field marked [`keep_vars`], whose
//!   `$VAR`s are expanded later by what uses them. A key no field reads is never looked at,
//!   so its variables are never read;
//! - `null` for a field (or a map entry) is as if it were absent: the default;
//! - nodes on the `skip` list are absent (the decoder's way past a bad value, so one pass
//!   after another names every problem);
//! - every error carries the key path of the node it came from.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_yaml_ng::Value;

use super::env::{half_written, typed_scalar, unset_message, var_name, Env, WHOLE_REFERENCE};
use super::keypath::{KeyPath, Problem};

/// The newtype name a [`keep_vars`] field asks for.
const KEEP_VARS: &str = "$deerflow::keep_vars";

/// `deserialize_with` for a field whose `$VAR`s stay as written (models' secrets, MCP
/// entries, the container's environment): its user expands them, when and if it needs them.
pub fn keep_vars<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: de::Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Kept<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for Kept<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a value")
        }
        fn visit_newtype_struct<D: de::Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
            T::deserialize(d)
        }
    }
    d.deserialize_newtype_struct(KEEP_VARS, Kept(std::marker::PhantomData))
}

/// An error with the key path of the node it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeError {
    pub message: String,
    pub path: Option<KeyPath>,
    /// The field a struct missed, for `missing field` errors.
    pub missing: Option<&'static str>,
}

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TreeError {}

impl de::Error for TreeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self {
            message: msg.to_string(),
            path: None,
            missing: None,
        }
    }

    fn missing_field(field: &'static str) -> Self {
        Self {
            missing: Some(field),
            ..Self::custom(format_args!("missing field `{field}`"))
        }
    }
}

/// What one walk shares: the environment (`None`: expand nothing), the nodes to pass over,
/// and what it learns on the way.
pub struct Walk<'e> {
    env: Option<&'e Env>,
    skip: &'e HashSet<KeyPath>,
    /// Unset variables, by the key that names them.
    pub unset: RefCell<Vec<Problem>>,
    /// The keys each struct of the tree is read with, by its key path: what an ignored key
    /// may have been meant as.
    pub fields: RefCell<HashMap<String, &'static [&'static str]>>,
}

impl<'e> Walk<'e> {
    pub fn new(env: Option<&'e Env>, skip: &'e HashSet<KeyPath>) -> Self {
        Self {
            env,
            skip,
            unset: RefCell::default(),
            fields: RefCell::default(),
        }
    }

    /// The deserializer for `root`, found at `at`.
    pub fn root<'a>(&'a self, root: &'a Value, at: KeyPath) -> Tree<'a> {
        Tree {
            node: untag(root),
            path: at,
            walk: self,
            expand: self.env.is_some(),
        }
    }
}

/// A node of the tree, where it is and whether its `$VAR`s are expanded.
pub struct Tree<'a> {
    node: &'a Value,
    path: KeyPath,
    walk: &'a Walk<'a>,
    expand: bool,
}

fn untag(mut v: &Value) -> &Value {
    while let Value::Tagged(t) = v {
        v = &t.value;
    }
    v
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

/// Visits a scalar (or anything, as `serde_yaml_ng` would) with its own value.
fn visit<'de, V: Visitor<'de>>(
    node: &Value,
    tree: &Tree,
    visitor: V,
) -> Result<V::Value, TreeError> {
    match node {
        Value::Null => visitor.visit_unit(),
        Value::Bool(b) => visitor.visit_bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => visitor.visit_u64(u),
            (None, Some(i)) => visitor.visit_i64(i),
            (None, None) => visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => visitor.visit_str(s),
        Value::Sequence(items) => visitor.visit_seq(Items {
            items: items.iter().enumerate(),
            tree,
        }),
        Value::Mapping(map) => visitor.visit_map(Entries {
            entries: map.iter(),
            value: None,
            tree,
            fields: None,
        }),
        Value::Tagged(t) => visit(untag(&t.value), tree, visitor),
    }
}

impl Tree<'_> {
    fn child<'b>(&'b self, node: &'b Value, path: KeyPath) -> Tree<'b> {
        Tree {
            node: untag(node),
            path,
            walk: self.walk,
            expand: self.expand,
        }
    }

    fn stamp<T>(&self, r: Result<T, TreeError>) -> Result<T, TreeError> {
        r.map_err(|mut e| {
            e.path.get_or_insert_with(|| self.path.clone());
            e
        })
    }

    /// The node's value, its `$NAME` expanded when this part of the tree is.
    fn any<'de, V: Visitor<'de>>(&self, visitor: V) -> Result<V::Value, TreeError> {
        let name = match (self.expand, self.walk.env, self.node) {
            (true, Some(env), Value::String(s)) => {
                // Used as written it would be a literal `${HOME}/x` path or prompt; §12
                // makes it a configuration error naming the key instead.
                if half_written(s) {
                    let problem = (self.path.clone(), WHOLE_REFERENCE.to_string());
                    self.walk.unset.borrow_mut().push(problem);
                }
                var_name(s).map(|n| (n, env))
            }
            _ => None,
        };
        let r = match name {
            Some((name, env)) => match env.get(name) {
                Some(value) => visit(&typed_scalar(value), self, visitor),
                None => {
                    let problem = (self.path.clone(), unset_message(name));
                    self.walk.unset.borrow_mut().push(problem);
                    visit(self.node, self, visitor)
                }
            },
            None => visit(self.node, self, visitor),
        };
        self.stamp(r)
    }

    fn skipped(&self, path: &KeyPath) -> bool {
        self.walk.skip.contains(path)
    }
}

macro_rules! as_any {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
                self.any(visitor)
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for Tree<'_> {
    type Error = TreeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        self.any(visitor)
    }

    as_any! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char deserialize_str
        deserialize_string deserialize_bytes deserialize_byte_buf deserialize_seq
        deserialize_identifier
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        match self.node {
            Value::Null => visitor.visit_none(),
            _ => {
                let path = self.path.clone();
                visitor.visit_some(self).map_err(|mut e| {
                    e.path.get_or_insert(path);
                    e
                })
            }
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        self.any(visitor)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, TreeError> {
        self.any(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        mut self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, TreeError> {
        if name == KEEP_VARS {
            self.expand = false;
        }
        let path = self.path.clone();
        visitor.visit_newtype_struct(self).map_err(|mut e| {
            e.path.get_or_insert(path);
            e
        })
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, TreeError> {
        self.any(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, TreeError> {
        self.any(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        self.any(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TreeError> {
        let map = match self.node {
            Value::Mapping(map) => map,
            // serde's derived structs also take their fields as a list, by position: a
            // section written as a list would be read, not refused as the wrong type (§2).
            Value::Sequence(_) => {
                let e = de::Error::invalid_type(de::Unexpected::Seq, &visitor);
                return self.stamp(Err(e));
            }
            _ => return self.any(visitor),
        };
        self.walk
            .fields
            .borrow_mut()
            .insert(self.path.to_string(), fields);
        let r = visitor.visit_map(Entries {
            entries: map.iter(),
            value: None,
            tree: &self,
            fields: Some(fields),
        });
        self.stamp(r)
    }

    /// A unit variant named by a string (`type: tokens`).
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TreeError> {
        match self.node {
            Value::String(s) => {
                let r = visitor.visit_enum(s.as_str().into_deserializer());
                self.stamp(r)
            }
            _ => self.any(visitor),
        }
    }

    /// What no field reads is not looked at: no `$VAR` in it is read.
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        visitor.visit_unit()
    }
}

struct Items<'t, 'a> {
    items: std::iter::Enumerate<std::slice::Iter<'a, Value>>,
    tree: &'t Tree<'a>,
}

impl<'de> SeqAccess<'de> for Items<'_, '_> {
    type Error = TreeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, TreeError> {
        for (i, item) in self.items.by_ref() {
            let path = self.tree.path.index(i);
            if !self.tree.skipped(&path) {
                return seed.deserialize(self.tree.child(item, path)).map(Some);
            }
        }
        Ok(None)
    }
}

struct Entries<'t, 'a> {
    entries: serde_yaml_ng::mapping::Iter<'a>,
    value: Option<(&'a Value, KeyPath)>,
    tree: &'t Tree<'a>,
    /// A struct's fields: only their `null`s are dropped, so an unknown key is still seen.
    fields: Option<&'static [&'static str]>,
}

impl<'de> MapAccess<'de> for Entries<'_, '_> {
    type Error = TreeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, TreeError> {
        for (k, v) in self.entries.by_ref() {
            let key = key_text(k);
            let path = self.tree.path.key(&key);
            let read = self.fields.is_none_or(|f| f.contains(&key.as_str()));
            if self.tree.skipped(&path) || (read && untag(v).is_null()) {
                continue;
            }
            self.value = Some((v, path));
            let key: serde::de::value::StringDeserializer<TreeError> = key.into_deserializer();
            return seed.deserialize(key).map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, TreeError> {
        match self.value.take() {
            Some((v, path)) => seed.deserialize(self.tree.child(v, path)),
            None => Err(de::Error::custom("a value without its key")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::decode_doc;
    use crate::schema::Config;

    fn decode(yaml: &str, env: &Env) -> crate::decode::Decoded<Config> {
        let v: Value = serde_yaml_ng::from_str(yaml).unwrap();
        decode_doc::<Config>(&v, &KeyPath::root(), Some(env))
    }

    #[test]
    fn keep_vars_fields_keep_their_variables_the_rest_are_read() {
        let env = Env::from_pairs([("K", "key"), ("N", "4"), ("B", "true")]);
        let d = decode(
            "models: [{name: a, api_key: $K, model: $N}]\n\
             sandbox: {image: $K, allow_host_bash: $B, environment: {A: $K}}\n\
             subagents: {max_concurrent: $N, agents: {bash: {model: $K}}}\n\
             mcp_servers: {s: {command: $K, env: {T: $K}}}\n",
            &env,
        );
        assert!(d.errors.is_empty() && d.unset.is_empty(), "{d:?}");
        let c = d.value;
        assert_eq!(c.models[0].api_key.as_deref(), Some("$K"));
        assert_eq!(c.models[0].model.as_deref(), Some("$N"));
        assert_eq!(c.sandbox.image.as_deref(), Some("key"));
        assert!(c.sandbox.allow_host_bash);
        assert_eq!(c.sandbox.environment["A"], "$K");
        assert_eq!(c.subagents.max_concurrent, 4);
        assert_eq!(c.subagents.agents["bash"].model.as_deref(), Some("key"));
        assert_eq!(c.mcp_servers["s"].command.as_deref(), Some("$K"));
        assert_eq!(c.mcp_servers["s"].env["T"], "$K");
    }

    #[test]
    fn null_is_the_default_and_an_unknown_null_is_still_named() {
        let d = decode(
            "subagents: {max_concurrent: null, agents: {bash: null}}\nmemory: null\nsandbox: {x: null}\n",
            &Env::empty(),
        );
        assert!(d.errors.is_empty(), "{d:?}");
        assert_eq!(d.value.subagents.max_concurrent, 3);
        assert!(d.value.subagents.agents.is_empty());
        assert_eq!(d.ignored, ["memory", "sandbox.x"]);
    }

    #[test]
    fn an_unset_variable_is_named_once_where_a_field_reads_it() {
        let d = decode(
            "skills: {path: $NOPE}\nsubagents: {timeout_seconds: $NOPE, shiny: $ALSO_NOPE}\n",
            &Env::empty(),
        );
        let unset: Vec<String> = d.unset.iter().map(|(p, m)| format!("{p}: {m}")).collect();
        assert_eq!(
            unset,
            [
                "skills.path: environment variable NOPE is not set",
                "subagents.timeout_seconds: environment variable NOPE is not set",
            ]
        );
        // A number's place keeps the text, which is no number.
        assert_eq!(d.errors.len(), 1, "{:?}", d.errors);
        assert_eq!(d.errors[0].0.to_string(), "subagents.timeout_seconds");
    }

    #[test]
    fn a_half_written_reference_where_a_field_reads_it_is_a_problem_naming_the_key() {
        let d = decode(
            "skills: {path: \"${HOME}/skills\"}\n\
             subagents: {custom_agents: {r: {description: \"$D-x\", system_prompt: s}}}\n\
             models: [{name: a, extra: \"${X}\"}]\nmemory: {k: \"${Y}\"}\n",
            &Env::from_pairs([("HOME", "/h")]),
        );
        let problems: Vec<String> = d.unset.iter().map(|(p, _)| p.to_string()).collect();
        assert_eq!(
            problems,
            ["skills.path", "subagents.custom_agents.r.description"]
        );
        assert!(d.unset.iter().all(|(_, m)| m == WHOLE_REFERENCE));
    }

    #[test]
    fn a_section_or_entry_written_as_a_list_is_the_wrong_type() {
        let d = decode(
            "subagents: [true, 5]\nmodels: [[a, openai]]\nloop_detection: []\n",
            &Env::empty(),
        );
        let errors: Vec<String> = d.errors.iter().map(|(p, m)| format!("{p}: {m}")).collect();
        assert_eq!(
            errors,
            [
                "subagents: expected a mapping, found a list",
                "models[0]: expected a mapping, found a list",
                "loop_detection: expected a mapping, found a list",
            ]
        );
        assert_eq!(d.value.subagents.max_concurrent, 3);
    }

    #[test]
    fn tags_are_looked_through_and_keys_read_as_text() {
        let d = decode(
            "subagents: {max_turns: !int 4, agents: {7: {max_turns: 2}}}\n",
            &Env::empty(),
        );
        assert!(d.errors.is_empty(), "{d:?}");
        assert_eq!(d.value.subagents.max_turns, Some(4));
        assert_eq!(d.value.subagents.agents["7"].max_turns, Some(2));
    }
}
