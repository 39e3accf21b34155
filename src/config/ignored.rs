//! Which keys of a config file deerflow does not use, and their removal before anything in
//! the file is expanded or decoded.
//!
//! The answer comes from the serde model itself (`schema.rs`): the raw tree is walked into
//! `Config` through `serde_ignored`, which names every mapping key that no field (nor a
//! field's alias) takes. So a key is known exactly when a field reads it, and a new field
//! is known the moment it exists. The walk uses the lenient deserializer, so a value of the
//! wrong type (or a `$VAR` not yet expanded) does not stop it.

use std::borrow::Cow;

use serde_yaml_ng::{Mapping, Value};

use super::keypath::{KeyPath, Seg};
use super::lenient::{fields, key_text, Lenient, WalkError};
use super::schema::Config;

/// How many times the walk may supply a missing required field and start again (each
/// pass supplies one; a file would need this many broken entries to exhaust it).
const MAX_PASSES: usize = 1000;

/// Removes every key deerflow does not use and every `null` value of a used key (null
/// means "default", as if absent), returning the removed keys' dotted paths in document
/// order. Runs before `$VAR` expansion, so variables inside ignored keys are never read.
/// A key close to a known one says so: `models[0].temprature (did you mean `temperature`?)`.
pub fn strip_ignored(root: &mut Value) -> Vec<String> {
    let ignored = ignored_paths(root);
    for (path, _) in &ignored {
        remove(root, path);
    }
    drop_nulls(root);
    ignored
        .iter()
        .map(|(p, near)| match near {
            Some(k) => format!("{p} (did you mean `{k}`?)"),
            None => p.to_string(),
        })
        .collect()
}

/// The paths of the keys `Config` does not take, in document order.
///
/// Only a struct's own checks can fail the lenient walk: a required field that is missing
/// (the walk supplies it as `null` in a scratch copy and starts again, so the entries after
/// it are still seen) or a field given twice under two aliases (the node is blanked: its
/// decoding fails anyway, and the rest of the file is still walked).
fn ignored_paths(root: &Value) -> Vec<(KeyPath, Option<&'static str>)> {
    let mut tree = Cow::Borrowed(root);
    let mut ignored = Vec::new();
    let mut known = fields::Known::new();
    for _ in 0..MAX_PASSES {
        ignored.clear();
        let mut record = |p: serde_ignored::Path| ignored.push(key_path(&p));
        let walker = serde_ignored::Deserializer::new(Lenient(&tree), &mut record);
        let (walked, met) =
            fields::collect(|| serde_path_to_error::deserialize::<_, Config>(walker));
        known = met;
        let err = match walked {
            Ok(_) => break,
            Err(e) => e,
        };
        let at = KeyPath::root().join_serde(err.path());
        let progressed = match err.into_inner() {
            WalkError::MissingField(field) => supply(tree.to_mut(), &at, field),
            WalkError::Other(_) => blank(tree.to_mut(), &at),
        };
        if !progressed {
            break;
        }
    }
    ignored
        .into_iter()
        .map(|p| {
            let near = nearest_known(&tree, &known, &p);
            (p, near)
        })
        .collect()
}

/// The known key of the mapping holding `path`'s last key that is nearest to it, when it
/// is near enough to be a typo (an edit or two, and not most of a short key).
fn nearest_known(tree: &Value, known: &fields::Known, path: &KeyPath) -> Option<&'static str> {
    let (Seg::Key(key), parent) = path.0.split_last()? else {
        return None;
    };
    let node = node_ref(tree, parent)?;
    let fields = known.get(&(node as *const Value as usize))?;
    fields
        .iter()
        .map(|f| (edit_distance(key, f), *f))
        .filter(|(d, _)| *d <= 2 && *d * 3 <= key.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, f)| f)
}

/// Levenshtein distance by characters (keys are short: one row of memory).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// The node at `path`, as [`node_mut`] finds it.
fn node_ref<'v>(root: &'v Value, path: &[Seg]) -> Option<&'v Value> {
    let untag = |mut v: &'v Value| {
        while let Value::Tagged(t) = v {
            v = &t.value;
        }
        v
    };
    let mut node = untag(root);
    for seg in path {
        node = match (seg, node) {
            (Seg::Key(k), Value::Mapping(map)) => map
                .iter()
                .find(|(key, _)| key_text(key) == *k)
                .map(|(_, v)| v)?,
            (Seg::Index(i), Value::Sequence(items)) => items.get(*i)?,
            _ => return None,
        };
        node = untag(node);
    }
    Some(node)
}

fn key_path(p: &serde_ignored::Path) -> KeyPath {
    use serde_ignored::Path;
    match p {
        Path::Root => KeyPath::root(),
        Path::Seq { parent, index } => key_path(parent).index(*index),
        Path::Map { parent, key } => key_path(parent).key(key),
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => key_path(parent),
    }
}

/// Adds `field: null` to the mapping at `at` (making the node a mapping if it is not one).
fn supply(root: &mut Value, at: &KeyPath, field: &str) -> bool {
    let Some(node) = node_mut(root, &at.0) else {
        return false;
    };
    if !node.is_mapping() {
        *node = Value::Mapping(Mapping::new());
    }
    match node {
        Value::Mapping(map) if !map.contains_key(field) => {
            map.insert(Value::from(field), Value::Null);
            true
        }
        _ => false,
    }
}

/// Replaces the node at `at` with `null`, which every type reads as empty.
fn blank(root: &mut Value, at: &KeyPath) -> bool {
    match node_mut(root, &at.0) {
        Some(node) if !node.is_null() => {
            *node = Value::Null;
            true
        }
        _ => false,
    }
}

fn remove(root: &mut Value, path: &KeyPath) {
    let Some((last, parent)) = path.0.split_last() else {
        return;
    };
    match (last, node_mut(root, parent)) {
        (Seg::Key(k), Some(Value::Mapping(map))) => map.retain(|key, _| key_text(key) != *k),
        // Not produced by this schema (no list ignores an element); blank rather than
        // shift the indexes of the paths after it.
        (Seg::Index(i), Some(Value::Sequence(items))) => {
            if let Some(item) = items.get_mut(*i) {
                *item = Value::Null;
            }
        }
        _ => {}
    }
}

/// The node at `path`, looking through YAML tags as the walk does.
fn node_mut<'v>(root: &'v mut Value, path: &[Seg]) -> Option<&'v mut Value> {
    let mut node = untagged(root);
    for seg in path {
        node = match (seg, node) {
            (Seg::Key(k), Value::Mapping(map)) => map
                .iter_mut()
                .find(|(key, _)| key_text(key) == *k)
                .map(|(_, v)| v)?,
            (Seg::Index(i), Value::Sequence(items)) => items.get_mut(*i)?,
            _ => return None,
        };
        node = untagged(node);
    }
    Some(node)
}

fn untagged(v: &mut Value) -> &mut Value {
    match v {
        Value::Tagged(t) => untagged(&mut t.value),
        other => other,
    }
}

fn drop_nulls(v: &mut Value) {
    match v {
        Value::Mapping(map) => {
            map.retain(|_, v| !v.is_null());
            for (_, v) in map.iter_mut() {
                drop_nulls(v);
            }
        }
        Value::Sequence(items) => items.iter_mut().for_each(drop_nulls),
        Value::Tagged(t) => drop_nulls(&mut t.value),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(yaml: &str) -> (Value, Vec<String>) {
        let mut v: Value = serde_yaml_ng::from_str(yaml).unwrap();
        let ignored = strip_ignored(&mut v);
        (v, ignored)
    }

    #[test]
    fn a_near_miss_names_the_key_it_may_have_meant() {
        let (_, ignored) = strip(
            "models:\n  - {name: a, temprature: 0.2, display_name: A}\nsandbox: {bash_timeout: 5, x: 1}\nsubagents: {max_concurent: 2}\nmemory: {}\n",
        );
        assert_eq!(
            ignored,
            [
                "models[0].temprature (did you mean `temperature`?)",
                "models[0].display_name",
                "sandbox.bash_timeout",
                "sandbox.x",
                "subagents.max_concurent (did you mean `max_concurrent`?)",
                "memory",
            ]
        );
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
    }

    #[test]
    fn strips_unknown_keys_and_nulls() {
        let (v, ignored) = strip(
            "memory: {enabled: true, key: $SECRET}\nmodels:\n  - {name: a, display_name: A, pricing: {currency: CNY, input_per_million: 1, output_per_million: 2}}\n\
             token_budget: {enabled: false, max_input_tokens: null}\nsubagents: {max_turns: null, agents: {bash: {token_budget: {}}}}\n",
        );
        assert_eq!(
            ignored,
            [
                "memory",
                "models[0].display_name",
                "models[0].pricing.currency",
                "token_budget.max_input_tokens",
                "subagents.agents.bash.token_budget",
            ]
        );
        assert!(v.get("memory").is_none());
        assert!(v["subagents"].get("max_turns").is_none());
        assert_eq!(
            v["models"][0]["pricing"]["input_per_million"],
            Value::from(1)
        );
    }

    #[test]
    fn nested_unknown_keys_are_named_at_their_depth() {
        let (v, ignored) = strip(
            "subagents:\n  custom_agents:\n    rev:\n      description: d\n      system_prompt: p\n      color: red\n      extra: {deep: {deeper: 1}}\n  agents:\n    bash: {max_turns: 3, memory: on}\nsandbox: {use: local, port: 8080}\n",
        );
        assert_eq!(
            ignored,
            [
                "subagents.custom_agents.rev.color",
                "subagents.custom_agents.rev.extra",
                "subagents.agents.bash.memory",
                "sandbox.port",
            ]
        );
        let rev = &v["subagents"]["custom_agents"]["rev"];
        assert!(rev.get("color").is_none() && rev.get("extra").is_none());
        assert_eq!(rev["description"], Value::from("d"));
        assert_eq!(
            v["subagents"]["agents"]["bash"]["max_turns"],
            Value::from(3)
        );
    }

    #[test]
    fn aliases_are_used_keys() {
        let (v, ignored) = strip(
            "models:\n  - {name: a, api_base: http://x, request_timeout: 5, pricing: {input_per_million: 1, output_per_million: 2, input_cache_hit_per_million: 0.5}}\n  - {name: b, default_request_timeout: 7, price: {input_per_mtok: 1, output_per_mtok: 2}}\n",
        );
        assert_eq!(ignored, Vec::<String>::new());
        assert_eq!(v["models"][0]["api_base"], Value::from("http://x"));
    }

    #[test]
    fn every_model_entry_is_walked() {
        let (_, ignored) = strip(
            "models:\n  - {name: a, display_name: A}\n  - {name: b, supports_vision: true, display_name: B}\n  - {model: no-name, thinking: {}}\n  - 7\n  - {name: d, when_thinking_enabled: {x: 1}}\n",
        );
        assert_eq!(
            ignored,
            [
                "models[0].display_name",
                "models[1].supports_vision",
                "models[1].display_name",
                "models[2].thinking",
            ]
        );
    }

    #[test]
    fn type_errors_and_missing_fields_do_not_stop_the_walk() {
        let (v, ignored) = strip(
            "subagents:\n  max_concurrent: $N\n  timeout_seconds: [1]\n  custom_agents:\n    r: {tools: x, color: $UNSET_1}\n    s: 5\n    t: {description: d, system_prompt: p, shade: $UNSET_2}\n  shiny: $UNSET_3\n\
             models:\n  - {name: a, timeout: 1, request_timeout: 2, nick: n}\n  - {pricing: {currency: EUR}}\nmemory: {key: $UNSET_4}\n",
        );
        assert_eq!(
            ignored,
            [
                "subagents.custom_agents.r.color",
                "subagents.custom_agents.t.shade",
                "subagents.shiny",
                // models[0] gives `timeout` twice: its decoding fails, so its own keys are
                // not listed, but the walk goes on.
                "models[1].pricing.currency",
                "memory",
            ]
        );
        // The real tree is untouched but for the removals: nothing was supplied.
        let r = &v["subagents"]["custom_agents"]["r"];
        assert!(r.get("description").is_none() && r.get("color").is_none());
        assert_eq!(v["subagents"]["custom_agents"]["s"], Value::from(5));
        assert_eq!(v["subagents"]["max_concurrent"], Value::from("$N"));
        assert_eq!(v["models"][0]["nick"], Value::from("n"));
    }

    #[test]
    fn sections_to_come_are_ignored_until_they_have_fields() {
        let (_, ignored) = strip(
            "summarization: {enabled: true, trigger: {type: tokens, value: 5, x: 1}, keep: {type: messages, value: 2}, skill_file_read_tool_names: []}\ntool_output: {enabled: true, preview_head_chars: 10}\nmodels:\n  - {name: a, context_window: 1000, supports_thinking: true, when_thinking_enabled: {}, extra_body: {}}\n",
        );
        assert_eq!(
            ignored,
            [
                "summarization.trigger.x",
                "summarization.skill_file_read_tool_names",
                "tool_output.preview_head_chars",
            ]
        );
    }

    #[test]
    fn what_deerflow_writes_it_reads_back() {
        // `config show` prints the model; every key it prints but the derived `provider`
        // is one the model reads.
        let text = "models: [{name: a, price: {input_per_mtok: 1, output_per_mtok: 2, input_cache_hit_per_mtok: 0.1}}]\n\
                    subagents: {max_turns: 4, agents: {bash: {model: a, skills: []}}, custom_agents: {r: {description: d, system_prompt: p, tools: [ls], model: a}}}\n";
        let (v, _) = strip(text);
        let cfg: Config = serde_yaml_ng::from_value(v).unwrap();
        let mut shown = serde_yaml_ng::to_value(&cfg).unwrap();
        assert_eq!(strip_ignored(&mut shown), ["models[0].provider"]);
    }

    #[test]
    fn non_string_keys_are_named_by_their_text() {
        let (_, ignored) = strip("1: x\ntrue: y\nsubagents: {agents: {7: {max_turns: 1, 8: z}}}\n");
        assert_eq!(ignored, ["1", "true", "subagents.agents.7.8"]);
    }
}
