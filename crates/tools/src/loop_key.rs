//! The keys the loop detector compares calls by (contract §4, reference "Guards"): a tool
//! says which of its arguments make two calls the same call ([`super::Tool::loop_key`]).
//! By default that is all of them, so a tool whose arguments differ is never a repeat.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use serde_json::Value;

use deerflow_model::ToolArgs;

/// All the arguments, in canonical form: key order and spacing do not make two calls
/// different.
pub fn all_arguments(args: &ToolArgs) -> u64 {
    let mut h = DefaultHasher::new();
    canonical(&args.to_value(), &mut h);
    h.finish()
}

/// Only the named arguments (an absent one is not a `null` one).
pub fn arguments(args: &ToolArgs, names: &[&str]) -> u64 {
    let value = args.to_value();
    let mut h = DefaultHasher::new();
    for name in names {
        match value.get(name) {
            Some(v) => {
                1u8.hash(&mut h);
                canonical(v, &mut h);
            }
            None => 0u8.hash(&mut h),
        }
    }
    h.finish()
}

/// `path` and the 200-line stretch the read starts in (`start_line`): paging on through a
/// file is progress, reading the same stretch again is a repeat.
pub fn path_and_line_stretch(args: &ToolArgs) -> u64 {
    let value = args.to_value();
    let start = value.get("start_line").and_then(Value::as_u64).unwrap_or(1);
    let mut h = DefaultHasher::new();
    canonical(value.get("path").unwrap_or(&Value::Null), &mut h);
    (start / 200).hash(&mut h);
    h.finish()
}

/// Feeds `v` to `h` with object keys in sorted order (the arguments keep the model's
/// order, `preserve_order`), each part tagged so that different shapes never collide by
/// concatenation.
fn canonical(v: &Value, h: &mut DefaultHasher) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => (2u8, n.to_string()).hash(h),
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(items) => {
            (4u8, items.len()).hash(h);
            for item in items {
                canonical(item, h);
            }
        }
        Value::Object(map) => {
            (5u8, map.len()).hash(h);
            let mut fields: Vec<(&String, &Value)> = map.iter().collect();
            fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (k, v) in fields {
                k.hash(h);
                canonical(v, h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(v: Value) -> ToolArgs {
        ToolArgs::from_value(&v)
    }

    #[test]
    fn the_whole_arguments_ignore_key_order_but_not_values() {
        let a = args(json!({"path": "a", "n": [1, {"x": 1, "y": 2}]}));
        let b = ToolArgs::parse(r#"{ "n": [1, {"y": 2, "x": 1}], "path": "a" }"#).unwrap();
        assert_eq!(all_arguments(&a), all_arguments(&b));
        let c = args(json!({"path": "a", "n": [1, {"x": 1, "y": 3}]}));
        assert_ne!(all_arguments(&a), all_arguments(&c));
        assert_ne!(
            all_arguments(&args(json!({"a": "bc"}))),
            all_arguments(&args(json!({"ab": "c"})))
        );
    }

    #[test]
    fn named_arguments_ignore_the_others() {
        let a = args(json!({"command": "ls", "description": "list"}));
        let b = args(json!({"command": "ls", "description": "look again"}));
        assert_eq!(arguments(&a, &["command"]), arguments(&b, &["command"]));
        let c = args(json!({"command": "ls -l"}));
        assert_ne!(arguments(&a, &["command"]), arguments(&c, &["command"]));
        let null = args(json!({"path": null}));
        let absent = args(json!({}));
        assert_ne!(arguments(&null, &["path"]), arguments(&absent, &["path"]));
    }
}
