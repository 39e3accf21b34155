//! Environment access and `$VAR` expansion.
//!
//! Everything reads the environment through [`Env`] so tests can inject variables instead
//! of mutating the process environment (tests run in parallel).

use std::collections::BTreeMap;

use serde_yaml_ng::Value;

/// A source of environment variables: the process's, or a fixed map.
#[derive(Debug, Clone)]
pub struct Env {
    fixed: Option<BTreeMap<String, String>>,
}

impl Env {
    /// The real process environment.
    pub fn process() -> Self {
        Self { fixed: None }
    }

    /// No variables at all (tests).
    pub fn empty() -> Self {
        Self {
            fixed: Some(BTreeMap::new()),
        }
    }

    /// A fixed set of variables (nothing else is visible).
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let map = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        Self { fixed: Some(map) }
    }

    /// The variable's value; an empty value counts as unset (`export KEY=` in a script
    /// usually means "no key", not "the empty key").
    pub fn get(&self, name: &str) -> Option<String> {
        let v = match &self.fixed {
            Some(map) => map.get(name).cloned(),
            None => std::env::var(name).ok(),
        };
        v.filter(|s| !s.is_empty())
    }
}

/// The variable a config string refers to: `$NAME` (the whole value) with a valid name.
pub fn var_name(s: &str) -> Option<&str> {
    let name = s.strip_prefix('$')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    let valid = (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some(name)
}

/// Why a value is refused by [`half_written`] (contract §12).
pub const WHOLE_REFERENCE: &str =
    "a value starting with $ must be a whole $NAME reference (no braces, nothing around it)";

/// A value that starts with `$` but is no whole `$NAME` (`${VAR}`, `$HOME/x`, `$VAR-x`, a
/// lone `$`): a configuration error, since it would otherwise be used literally (§12).
pub fn half_written(raw: &str) -> bool {
    let trimmed = raw.trim();
    trimmed.starts_with('$') && var_name(trimmed).is_none()
}

/// Expands a raw string; `Err(name)` when it names a variable that is unset.
pub fn expand(raw: &str, env: &Env) -> Result<String, String> {
    match var_name(raw) {
        Some(name) => env.get(name).ok_or_else(|| name.to_string()),
        None => Ok(raw.to_string()),
    }
}

pub fn unset_message(name: &str) -> String {
    format!("environment variable {name} is not set")
}

/// A variable's text read as YAML when it is a number or boolean (`max_concurrent: $N`),
/// else kept as a string.
pub fn typed_scalar(text: String) -> Value {
    match serde_yaml_ng::from_str::<Value>(&text) {
        Ok(v @ (Value::Number(_) | Value::Bool(_))) => v,
        _ => Value::String(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn var_names() {
        assert_eq!(var_name("$OPENAI_API_KEY"), Some("OPENAI_API_KEY"));
        assert_eq!(var_name("$_x1"), Some("_x1"));
        assert_eq!(var_name("$"), None);
        assert_eq!(var_name("$1A"), None);
        assert_eq!(var_name("$A B"), None);
        assert_eq!(var_name("sk-$A"), None);
    }

    #[test]
    fn half_written_references() {
        for bad in ["${A}", "$A-x", "$", "$A/b", " $1", "$A B"] {
            assert!(half_written(bad), "{bad}");
        }
        for fine in ["$A", " $A ", "a$b", "", "plain"] {
            assert!(!half_written(fine), "{fine}");
        }
    }

    #[test]
    fn expand_reads_injected_env() {
        let env = Env::from_pairs([("A", "1"), ("EMPTY", "")]);
        assert_eq!(expand("$A", &env), Ok("1".to_string()));
        assert_eq!(expand("plain", &env), Ok("plain".to_string()));
        assert_eq!(expand("$EMPTY", &env), Err("EMPTY".to_string()));
        assert_eq!(expand("$B", &env), Err("B".to_string()));
    }

    #[test]
    fn variables_read_as_numbers_and_booleans_when_they_are() {
        assert_eq!(typed_scalar("4".into()), Value::from(4));
        assert_eq!(typed_scalar("true".into()), Value::from(true));
        assert_eq!(typed_scalar("/x".into()), Value::from("/x"));
        assert_eq!(typed_scalar("[1]".into()), Value::from("[1]"));
    }
}
