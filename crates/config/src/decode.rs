//! Typed decoding: the YAML tree is read once into the typed model (`schema.rs`), through
//! the config's own deserializer (`tree.rs`) wrapped in `serde_ignored`, so one walk names
//! the keys no field reads, expands the `$VAR`s of the keys that are read, and decodes.
//!
//! A value of the wrong type stops serde; the walk then starts again with that value left
//! out (its default applies), so one bad model or agent does not hide the problems of the
//! others (`config check` lists all). Nothing here names a section: a new field is
//! decoded the moment it exists.

use std::collections::{HashMap, HashSet};

use serde::de::{self, DeserializeOwned, Visitor};
use serde::Deserialize;
use serde_yaml_ng::Value;

use super::env::Env;
use super::ignored::{key_path, name_ignored};
use super::keypath::{KeyPath, Problem, Seg};
use super::schema::Config;
use super::tree::Walk;

/// How many bad values one decoding steps past (each costs a walk of the tree).
const MAX_PASSES: usize = 1000;

/// What a decoding found.
#[derive(Debug)]
pub struct Decoded<T> {
    /// `T::default()` when some value could not be stepped past.
    pub value: T,
    /// The keys no field reads, in document order (`models[0].temprature (did you mean
    /// `temperature`?)`); in a value that was left out, those met before it failed.
    pub ignored: Vec<String>,
    /// Unset variables, in the order they were met.
    pub unset: Vec<Problem>,
    /// Type errors and missing required keys, in the order they were met.
    pub errors: Vec<Problem>,
}

/// Decodes the config file's tree, expanding the `$VAR`s of the keys it reads from `env`.
/// `problems` gets the unset variables, then the type errors section by section; the
/// value checks are `validate`'s.
pub fn decode(root: &Value, env: &Env, problems: &mut Vec<Problem>) -> (Config, Vec<String>) {
    let mut d = decode_doc::<Config>(root, &KeyPath::root(), Some(env));
    let sections = field_names::<Config>();
    d.errors.sort_by_key(|(path, _)| match path.0.first() {
        Some(Seg::Key(k)) => sections.iter().position(|s| s == k),
        _ => None,
    });
    problems.append(&mut d.unset);
    problems.append(&mut d.errors);
    (d.value, d.ignored)
}

/// Decodes `root`, found at `at`, into `T`; `env: None` expands no `$VAR`.
pub fn decode_doc<T: DeserializeOwned + Default>(
    root: &Value,
    at: &KeyPath,
    env: Option<&Env>,
) -> Decoded<T> {
    let mut skip: HashSet<KeyPath> = HashSet::new();
    let mut unset: Vec<Problem> = Vec::new();
    let mut errors = Vec::new();
    // Every walk names the ignored keys it met before it stopped: together, those of
    // entries that fail too (what the fields of each struct are, likewise).
    let mut ignored: Vec<KeyPath> = Vec::new();
    let mut seen = HashSet::new();
    let mut seen_unset = HashSet::new();
    let mut fields = HashMap::new();
    for _ in 0..MAX_PASSES {
        let walk = Walk::new(env, &skip);
        let tree = walk.root(root, at.clone());
        let mut record = |p: serde_ignored::Path| {
            let p = key_path(at, &p, &skip);
            if seen.insert(p.clone()) {
                ignored.push(p);
            }
        };
        let result = T::deserialize(serde_ignored::Deserializer::new(tree, &mut record));
        // Later walks meet the variables of the earlier ones again.
        for (path, message) in walk.unset.take() {
            if seen_unset.insert(path.clone()) {
                unset.push((path, message));
            }
        }
        fields.extend(walk.fields.take());
        let e = match result {
            Ok(value) => {
                let ignored = name_ignored(&ignored, &fields);
                return Decoded {
                    value,
                    ignored,
                    unset,
                    errors,
                };
            }
            Err(e) => e,
        };
        let path = e.path.clone().unwrap_or_else(|| at.clone());
        // A struct misses a required key because that key's bad value was left out:
        // already reported.
        let left_out = e.missing.is_some_and(|f| skip.contains(&path.key(f)));
        if !left_out {
            errors.push(humanize(path.clone(), &e.message));
        }
        if path == *at || skip.contains(&path) {
            break;
        }
        skip.insert(path);
    }
    Decoded {
        value: T::default(),
        ignored: name_ignored(&ignored, &fields),
        unset,
        errors,
    }
}

/// The keys a struct reads, as serde's derive lists them (renamed, aliases included).
pub fn field_names<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    // The probe fails on purpose once it has seen the list; the error says nothing.
    let _ = T::deserialize(FieldProbe(&mut fields));
    fields
}

/// A deserializer that only records the field list a struct asks for.
struct FieldProbe<'a>(&'a mut &'static [&'static str]);

impl<'de> de::Deserializer<'de> for FieldProbe<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("probed"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
        identifier ignored_any
    }
}

/// Turns serde's wording into the contract's: `expected a number, found "abc"`, and a
/// missing field into a problem at that field's own path.
fn humanize(path: KeyPath, msg: &str) -> Problem {
    if let Some(field) = msg
        .strip_prefix("missing field `")
        .and_then(|r| r.strip_suffix('`'))
    {
        return (path.key(field), "required key is missing".to_string());
    }
    let body = msg
        .strip_prefix("invalid type: ")
        .or_else(|| msg.strip_prefix("invalid value: "));
    if let Some((found, expected)) = body.and_then(|b| b.rsplit_once(", expected ")) {
        // Never echo what was found in a secret's place.
        let secret = ["api_key", "gemini_api_key", "google_api_key"].map(|k| Seg::Key(k.into()));
        let found = if path.0.last().is_some_and(|seg| secret.contains(seg)) {
            "a value of another type".to_string()
        } else {
            found_text(found)
        };
        let text = format!("expected {}, found {found}", expected_text(expected));
        return (path, text);
    }
    (path, msg.to_string())
}

fn expected_text(e: &str) -> String {
    match e {
        "f64" | "f32" => "a number".into(),
        "u8" | "u16" | "u32" | "u64" | "usize" => "a non-negative integer".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "an integer".into(),
        "a sequence" => "a list".into(),
        "a map" => "a mapping".into(),
        s if s.starts_with("struct ") => "a mapping".into(),
        s => s.to_string(),
    }
}

fn found_text(f: &str) -> String {
    let unquote = |s: &str| s.trim_matches('`').to_string();
    if let Some(s) = f.strip_prefix("string ") {
        return s.to_string();
    }
    for prefix in ["integer ", "floating point ", "boolean "] {
        if let Some(s) = f.strip_prefix(prefix) {
            return unquote(s);
        }
    }
    match f {
        "unit value" => "null".into(),
        "sequence" => "a list".into(),
        "map" => "a mapping".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> (Config, Vec<String>) {
        let root: Value = serde_yaml_ng::from_str(text).unwrap();
        let mut problems = Vec::new();
        let (cfg, _) = decode(&root, &Env::empty(), &mut problems);
        (
            cfg,
            problems
                .into_iter()
                .map(|(p, m)| format!("{p}: {m}"))
                .collect(),
        )
    }

    /// Every field of `Config` is a section `decode` reads: a value of the wrong type in
    /// any of them is a problem at that key (a section nobody decoded would pass silently).
    #[test]
    fn every_config_field_is_decoded() {
        let sections = field_names::<Config>();
        assert!(sections.contains(&"models") && sections.contains(&"mcp_servers"));
        for section in sections {
            let (_, p) = run(&format!("{section}: not-a-section"));
            assert_eq!(p.len(), 1, "{section}: {p:?}");
            assert!(p[0].starts_with(&format!("{section}: expected ")), "{p:?}");
        }
    }

    /// What a section says reaches the config. The text has one non-default value per
    /// section; a new `Config` field makes this test fail until it has its own line.
    #[test]
    fn every_section_reaches_the_config() {
        let text = "models: [{name: a}]\nsubagents: {max_concurrent: 5}\n\
                    sandbox: {allow_host_bash: true}\nskills: {path: /s}\n\
                    loop_detection: {hard_limit: 9}\ntoken_budget: {enabled: true}\n\
                    summarization: {enabled: false}\ntool_output: {enabled: false}\n\
                    safety_finish_reason: {enabled: false}\nmcp_servers: {x: {command: c}}\n\
                    tools: [{name: web_search}]\ntool_groups: [{name: web}]\n";
        let root: serde_yaml_ng::Mapping = serde_yaml_ng::from_str(text).unwrap();
        let mut written: Vec<&str> = root.keys().filter_map(Value::as_str).collect();
        let mut fields = field_names::<Config>().to_vec();
        written.sort_unstable();
        fields.sort_unstable();
        assert_eq!(written, fields, "give each Config field a line here");
        let (cfg, p) = run(text);
        assert!(p.is_empty(), "{p:?}");
        let got = serde_yaml_ng::to_value(&cfg).unwrap();
        let default = serde_yaml_ng::to_value(Config::default()).unwrap();
        for section in fields {
            assert_ne!(got.get(section), default.get(section), "{section}");
        }
    }

    #[test]
    fn field_names_include_aliases() {
        let fields = field_names::<crate::ModelEntry>();
        assert!(
            fields.contains(&"use") && fields.contains(&"api_base"),
            "{fields:?}"
        );
        assert!(!fields.contains(&"provider"), "{fields:?}");
        assert!(field_names::<String>().is_empty());
    }

    #[test]
    fn type_errors_name_the_key() {
        let (_, p) = run("models: [{name: a, timeout: abc}]\nsandbox: {allow_host_bash: 3}\nsubagents: {max_concurrent: -1}");
        assert_eq!(
            p,
            [
                "models[0].timeout: expected a number, found \"abc\"",
                "subagents.max_concurrent: expected a non-negative integer, found -1",
                "sandbox.allow_host_bash: expected a boolean, found 3",
            ]
        );
    }

    #[test]
    fn every_bad_entry_is_reported() {
        let (cfg, p) = run(
            "models: [{name: a, max_retries: x}, {name: b}, {model: m}]\n\
             subagents: {custom_agents: {r: {description: d}, s: {system_prompt: p}, ok: {description: d, system_prompt: p}}}",
        );
        assert_eq!(
            p,
            [
                "models[0].max_retries: expected a non-negative integer, found \"x\"",
                "models[2].name: required key is missing",
                "subagents.custom_agents.r.system_prompt: required key is missing",
                "subagents.custom_agents.s.description: required key is missing",
            ]
        );
        // A bad value is left out (its default applies), a nameless entry altogether.
        let names: Vec<&str> = cfg.models.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(cfg.models[0].max_retries, 3);
        let agents: Vec<&String> = cfg.subagents.custom_agents.keys().collect();
        assert_eq!(agents, ["ok"]);
    }

    #[test]
    fn api_key_type_errors_do_not_echo_the_value() {
        let (_, p) = run("models: [{name: a, api_key: 123456789}]");
        assert_eq!(
            p,
            ["models[0].api_key: expected a string, found a value of another type"]
        );
        let (_, p) = run("models: [{name: a, gemini_api_key: 123456789}]");
        assert_eq!(
            p,
            ["models[0].gemini_api_key: expected a string, found a value of another type"]
        );
    }

    #[test]
    fn durations_accept_ints_and_floats_and_aliases() {
        let (cfg, p) = run(
            "models:\n - {name: a, timeout: 30}\n - {name: b, request_timeout: 600.0}\n - {name: c, default_request_timeout: 1.5, stream_idle_timeout: 7}\n\
             subagents: {timeout_seconds: 60.5}\nsandbox: {bash_command_timeout: 10}",
        );
        assert!(p.is_empty(), "{p:?}");
        let t: Vec<f64> = cfg.models.iter().map(|m| m.timeout).collect();
        assert_eq!(t, [30.0, 600.0, 1.5]);
        assert_eq!(cfg.models[2].stream_idle_timeout, 7.0);
        assert_eq!(cfg.models[0].stream_idle_timeout, 120.0);
        assert_eq!(cfg.subagents.timeout_seconds, 60.5);
        assert_eq!(cfg.sandbox.bash_command_timeout, 10.0);
    }

    #[test]
    fn aliases_and_pricing() {
        let (cfg, p) = run(
            concat!(
                "models:\n",
                " - {name: a, use: langchain_openai:ChatOpenAI, api_base: http://x/v1,\n",
                "    pricing: {input_per_million: 8.0, output_per_million: 32, input_cache_hit_per_million: 0.8}}\n",
                " - {name: b, price: {input_per_mtok: 0.15, output_per_mtok: 0.6}}\n",
                " - {name: c, use: anthropic, price: {input_per_mtok: 3, output_per_mtok: 15,\n",
                "    cache_read_per_mtok: 0.3, cache_write_per_mtok: 3.75}}\n",
            ),
        );
        assert!(p.is_empty(), "{p:?}");
        let a = &cfg.models[0];
        assert_eq!(a.base_url.as_deref(), Some("http://x/v1"));
        let price = a.price.as_ref().unwrap();
        assert_eq!((price.input_per_mtok, price.output_per_mtok), (8.0, 32.0));
        assert_eq!(price.input_cache_hit_per_mtok, Some(0.8));
        assert_eq!(cfg.models[1].price.as_ref().unwrap().output_per_mtok, 0.6);
        assert_eq!(cfg.models[1].use_, "openai");
        let c = cfg.models[2].price.as_ref().unwrap();
        assert_eq!(c.input_cache_hit_per_mtok, Some(0.3));
        assert_eq!(c.cache_write_per_mtok, Some(3.75));
    }
}
