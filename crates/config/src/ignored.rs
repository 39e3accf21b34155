//! How the keys deerflow does not use are named.
//!
//! Which keys those are is the serde model's answer (`schema.rs`): the decoding walk
//! (`decode.rs`) goes through `serde_ignored`, which names every mapping key that no field
//! (nor a field's alias) takes. So a key is known exactly when a field reads it, and a new
//! field is known the moment it exists. Nothing in an ignored key is read, its `$VAR`s
//! included.

use std::collections::{HashMap, HashSet};

use super::keypath::{KeyPath, Seg};

/// The ignored keys' dotted paths, in document order; a key close to a known one says so:
/// `models[0].temprature (did you mean `temperature`?)`. `fields` are the keys each struct
/// of the walk was read with, by its path.
pub fn name_ignored(
    ignored: &[KeyPath],
    fields: &HashMap<String, &'static [&'static str]>,
) -> Vec<String> {
    ignored
        .iter()
        .map(|p| match nearest_known(fields, p) {
            Some(k) => format!("{p} (did you mean `{k}`?)"),
            None => p.to_string(),
        })
        .collect()
}

/// The known key of the struct holding `path`'s last key that is nearest to it, when it
/// is near enough to be a typo (an edit or two, and not most of a short key).
fn nearest_known(
    fields: &HashMap<String, &'static [&'static str]>,
    path: &KeyPath,
) -> Option<&'static str> {
    let (Seg::Key(key), parent) = path.0.split_last()? else {
        return None;
    };
    let fields = fields.get(&KeyPath(parent.to_vec()).to_string())?;
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

/// A `serde_ignored` path under `at`, as a key path. `serde_ignored` counts the list
/// elements it is given; the walk passes over those on `skip`, so its indexes are mapped
/// back to the tree's.
pub fn key_path(at: &KeyPath, p: &serde_ignored::Path, skip: &HashSet<KeyPath>) -> KeyPath {
    use serde_ignored::Path;
    match p {
        Path::Root => at.clone(),
        Path::Seq { parent, index } => {
            let parent = key_path(at, parent, skip);
            let real = (0..)
                .filter(|i| !skip.contains(&parent.index(*i)))
                .nth(*index)
                .unwrap_or(*index);
            parent.index(real)
        }
        Path::Map { parent, key } => key_path(at, parent, skip).key(key),
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => key_path(at, parent, skip),
    }
}

#[cfg(test)]
mod tests {
    use serde_yaml_ng::Value;

    use super::*;
    use crate::decode::decode_doc;
    use crate::env::Env;
    use crate::schema::Config;

    /// The decoded config and the keys it ignored (no `$VAR` is expanded).
    fn strip(yaml: &str) -> (Config, Vec<String>) {
        let v: Value = serde_yaml_ng::from_str(yaml).unwrap();
        let d = decode_doc::<Config>(&v, &KeyPath::root(), None);
        (d.value, d.ignored)
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
        assert_eq!(v.subagents.max_turns, None);
        assert_eq!(v.models[0].price.as_ref().unwrap().input_per_mtok, 1.0);
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
        assert_eq!(v.subagents.custom_agents["rev"].description, "d");
        assert_eq!(v.subagents.agents["bash"].max_turns, Some(3));
    }

    #[test]
    fn aliases_are_used_keys() {
        let (v, ignored) = strip(
            "models:\n  - {name: a, api_base: http://x, request_timeout: 5, pricing: {input_per_million: 1, output_per_million: 2, input_cache_hit_per_million: 0.5}}\n  - {name: b, default_request_timeout: 7, price: {input_per_mtok: 1, output_per_mtok: 2}}\n",
        );
        assert_eq!(ignored, Vec::<String>::new());
        assert_eq!(v.models[0].base_url.as_deref(), Some("http://x"));
    }

    #[test]
    fn every_model_entry_is_walked() {
        let (_, ignored) = strip(
            "models:\n  - {name: a, display_name: A}\n  - {name: b, supports_audio: true, display_name: B}\n  - {model: no-name, thinking: {}}\n  - 7\n  - {name: d, when_thinking_enabled: {x: 1}}\n",
        );
        assert_eq!(
            ignored,
            [
                "models[0].display_name",
                "models[1].supports_audio",
                "models[1].display_name",
                "models[2].thinking",
            ]
        );
    }

    #[test]
    fn type_errors_and_missing_fields_do_not_stop_the_walk() {
        let (_, ignored) = strip(
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
        let (cfg, ignored) = strip(text);
        assert!(ignored.is_empty(), "{ignored:?}");
        let shown = serde_yaml_ng::to_value(&cfg).unwrap();
        let again = decode_doc::<Config>(&shown, &KeyPath::root(), Some(&Env::empty()));
        assert!(again.errors.is_empty(), "{:?}", again.errors);
        assert_eq!(again.ignored, ["models[0].provider"]);
        assert_eq!(again.value.subagents, cfg.subagents);
    }

    #[test]
    fn non_string_keys_are_named_by_their_text() {
        let (_, ignored) = strip("1: x\ntrue: y\nsubagents: {agents: {7: {max_turns: 1, 8: z}}}\n");
        assert_eq!(ignored, ["1", "true", "subagents.agents.7.8"]);
    }
}
