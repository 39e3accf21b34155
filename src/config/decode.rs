//! Typed decoding of the prepared YAML tree, section by section and entry by entry, so one
//! bad model or agent does not hide the problems of the others (`config check` lists all).
//!
//! The sections are `Config`'s own fields as serde lists them, and every section that
//! decodes is read into `Config` by serde itself: a new field is decoded the moment it
//! exists, with no list here to forget it in.

use std::collections::BTreeMap;

use serde::de::{self, DeserializeOwned, Visitor};
use serde::Deserialize;
use serde_yaml_ng::{Mapping, Value};

use super::keypath::{KeyPath, Problem, Seg};
use super::schema::{Config, CustomAgent, ModelEntry, SubagentsConfig};

/// Decodes the whole tree; `problems` gets every type error (value checks are
/// `validate`'s).
pub fn decode(root: &Mapping, problems: &mut Vec<Problem>) -> Config {
    let top = KeyPath::root();
    let mut good = Mapping::new();
    let (mut models, mut subagents) = (None, None);
    for &section in field_names::<Config>() {
        let Some(v) = root.get(section) else {
            continue;
        };
        let at = top.key(section);
        // These two decode entry by entry, so each bad model or custom agent is named.
        match section {
            "models" => models = Some(decode_models(v, &at, problems)),
            "subagents" => subagents = Some(decode_subagents(v, &at, problems)),
            _ => {
                let alone = Mapping::from_iter([(Value::from(section), v.clone())]);
                if decode_as::<Config>(Value::Mapping(alone), &top, problems).is_some() {
                    good.insert(Value::from(section), v.clone());
                }
            }
        }
    }
    // Each section in `good` decoded on its own above, so together they decode too.
    let mut cfg: Config = decode_as(Value::Mapping(good), &top, problems).unwrap_or_default();
    if let Some(models) = models {
        cfg.models = models;
    }
    if let Some(subagents) = subagents {
        cfg.subagents = subagents;
    }
    cfg
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

/// Decodes one sub-tree, recording the first type error with its full key path.
pub fn decode_as<T: DeserializeOwned>(
    value: Value,
    at: &KeyPath,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    match serde_path_to_error::deserialize::<_, T>(value) {
        Ok(t) => Some(t),
        Err(e) => {
            let path = at.join_serde(e.path());
            problems.push(humanize(path, &e.into_inner().to_string()));
            None
        }
    }
}

fn decode_models(v: &Value, at: &KeyPath, problems: &mut Vec<Problem>) -> Vec<ModelEntry> {
    let Some(items) = decode_as::<Vec<Value>>(v.clone(), at, problems) else {
        return Vec::new();
    };
    let mut models = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        if let Some(entry) = decode_as::<ModelEntry>(item, &at.index(i), problems) {
            models.push(entry);
        }
    }
    models
}

fn decode_subagents(v: &Value, at: &KeyPath, problems: &mut Vec<Problem>) -> SubagentsConfig {
    let Value::Mapping(map) = v else {
        return decode_as(v.clone(), at, problems).unwrap_or_default();
    };
    // Custom agents decode one by one so each bad agent is reported.
    let mut rest = map.clone();
    let custom = rest.remove("custom_agents");
    let mut sub: SubagentsConfig =
        decode_as(Value::Mapping(rest), at, problems).unwrap_or_default();
    if let Some(custom) = custom {
        let at = at.key("custom_agents");
        let entries: BTreeMap<String, Value> = decode_as(custom, &at, problems).unwrap_or_default();
        for (name, value) in entries {
            if let Some(agent) = decode_as::<CustomAgent>(value, &at.key(&name), problems) {
                sub.custom_agents.insert(name, agent);
            }
        }
    }
    sub
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
        let root: Mapping = serde_yaml_ng::from_str(text).unwrap();
        let mut problems = Vec::new();
        let cfg = decode(&root, &mut problems);
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
                    safety_finish_reason: {enabled: false}\nmcp_servers: {x: {command: c}}\n";
        let root: Mapping = serde_yaml_ng::from_str(text).unwrap();
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
        let fields = field_names::<ModelEntry>();
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
        assert_eq!(cfg.models.len(), 1);
        assert!(cfg.subagents.custom_agents.contains_key("ok"));
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
