//! [`Expandable`]: a config string whose `$NAME` is read when it is used.

use serde::{Deserialize, Serialize};

use super::env::{expand, half_written, var_name, Env};

/// A config string that may be a `$NAME`, read when it is used rather than when the file
/// is loaded: an unset variable hurts only what needs it, and `config show` names the
/// variable instead of printing a secret. The decoding walk never expands it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Expandable(String);

/// Why an [`Expandable`] has no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unexpanded {
    /// Starts with `$` but is no whole `$NAME` (`env::WHOLE_REFERENCE` says how to fix it).
    HalfWritten,
    /// The variable (named) is unset or empty.
    Unset(String),
}

impl Expandable {
    /// The value to use: the variable's for a whole `$NAME`, else the text as written.
    pub fn expand(&self, env: &Env) -> Result<String, Unexpanded> {
        if half_written(&self.0) {
            return Err(Unexpanded::HalfWritten);
        }
        expand(&self.0, env).map_err(Unexpanded::Unset)
    }

    /// The variable it names, if it is a `$NAME`.
    pub fn var(&self) -> Option<&str> {
        var_name(self.0.trim())
    }
}

impl<'de> Deserialize<'de> for Expandable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        super::tree::keep_vars::<D, String>(d).map(Expandable)
    }
}

impl std::ops::Deref for Expandable {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Expandable {
    fn from(s: &str) -> Self {
        Self(s.to_string())
    }
}

impl From<String> for Expandable {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl PartialEq<&str> for Expandable {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use serde_yaml_ng::Value;

    use super::*;

    #[test]
    fn an_expandable_is_read_when_used_by_the_one_rule() {
        let env = Env::from_pairs([("A", "1")]);
        let x = |s: &str| Expandable::from(s).expand(&env);
        assert_eq!(x("$A"), Ok("1".into()));
        assert_eq!(x(" $A "), Ok(" $A ".into()));
        assert_eq!(x("plain a$b"), Ok("plain a$b".into()));
        assert_eq!(x("$B"), Err(Unexpanded::Unset("B".into())));
        for bad in ["${A}", "$A-x", "$"] {
            assert_eq!(x(bad), Err(Unexpanded::HalfWritten), "{bad}");
        }
        assert_eq!(Expandable::from(" $A ").var(), Some("A"));
        assert_eq!(Expandable::from("sk-1").var(), None);
    }

    /// The decoding walk expands what a field reads, but never an `Expandable`: the type
    /// decides, wherever the field is.
    #[test]
    fn the_decoding_walk_keeps_an_expandable_as_written() {
        use crate::decode::decode_doc;
        use crate::keypath::KeyPath;
        #[derive(Debug, Default, Deserialize)]
        struct S {
            k: Expandable,
            n: u32,
        }
        let env = Env::from_pairs([("K", "secret"), ("N", "4")]);
        let v: Value = serde_yaml_ng::from_str("k: $K\nn: $N\n").unwrap();
        let d = decode_doc::<S>(&v, &KeyPath::root(), Some(&env));
        assert!(d.errors.is_empty(), "{d:?}");
        assert_eq!((d.value.k, d.value.n), (Expandable::from("$K"), 4));
    }
}
