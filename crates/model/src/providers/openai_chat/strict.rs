//! Whether a JSON Schema fits OpenAI's strict structured-output mode. With `strict: true`
//! OpenAI constrains decoding to the schema, but it refuses (HTTP 400) a schema outside its
//! subset; so `strict` is sent only for a schema inside it, and any other schema goes with
//! `strict: false`, as guidance (the answer is validated locally either way). The Responses
//! API's `text.format` takes the same rules.
//!
//! The subset, as OpenAI documents it: the root is an object schema; every object schema
//! says `additionalProperties: false` and lists every property in `required`; composition
//! is `anyOf` only. Keywords it does not take make a schema non-strict here too — a false
//! "no" costs only the decoding constraint, a false "yes" fails the run.

use serde_json::{Map, Value};

/// Keywords OpenAI's strict mode does not take.
const UNSUPPORTED: &[&str] = &[
    "allOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "$dynamicRef",
    "$dynamicAnchor",
];

/// Keywords whose value is one schema.
const ONE_SCHEMA: &[&str] = &["items", "additionalProperties"];
/// Keywords whose value is a list of schemas.
const SCHEMA_LIST: &[&str] = &["prefixItems", "anyOf"];
/// Keywords whose value maps names to schemas.
const SCHEMA_MAP: &[&str] = &["properties", "$defs", "definitions"];

/// Whether `schema` may be sent with `strict: true`.
pub fn compatible(schema: &Value) -> bool {
    match schema.as_object() {
        Some(root) => is_object_schema(root) && fits(root),
        None => false,
    }
}

/// A schema whose `type` is (or includes) `object`, or that lists properties.
fn is_object_schema(s: &Map<String, Value>) -> bool {
    let typed = match s.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => false,
    };
    typed || s.contains_key("properties")
}

fn fits(s: &Map<String, Value>) -> bool {
    if UNSUPPORTED.iter().any(|k| s.contains_key(*k)) {
        return false;
    }
    if is_object_schema(s) && !closed_and_all_required(s) {
        return false;
    }
    subschemas(s).all(|sub| sub.as_object().is_some_and(fits))
}

fn closed_and_all_required(s: &Map<String, Value>) -> bool {
    if s.get("additionalProperties") != Some(&Value::Bool(false)) {
        return false;
    }
    let required: Vec<&str> = match s.get("required") {
        Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
        None => Vec::new(),
        Some(_) => return false,
    };
    match s.get("properties") {
        Some(Value::Object(props)) => props.keys().all(|k| required.contains(&k.as_str())),
        None => true,
        Some(_) => false,
    }
}

/// The schemas directly inside `s` (a boolean one among them fails [`fits`]: strict mode
/// takes only object schemas). `additionalProperties: false` is a keyword value here, not
/// a subschema.
fn subschemas(s: &Map<String, Value>) -> impl Iterator<Item = &Value> {
    let one = ONE_SCHEMA
        .iter()
        .filter_map(|k| s.get(*k))
        .filter(|v| !matches!(v, Value::Bool(false)));
    let lists = SCHEMA_LIST
        .iter()
        .filter_map(|k| s.get(*k))
        .flat_map(|v| match v {
            Value::Array(items) => items.iter().collect(),
            // Not a list: not strict (a schema that compiled never has this).
            other => vec![other],
        });
    let maps = SCHEMA_MAP
        .iter()
        .filter_map(|k| s.get(*k))
        .flat_map(|v| match v {
            Value::Object(m) => m.values().collect(),
            other => vec![other],
        });
    one.chain(lists).chain(maps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn verdict() -> Value {
        json!({
            "type": "object",
            "properties": {
                "verdict": {"type": "string", "enum": ["pass", "fail"]},
                "reasons": {"type": "array", "items": {"type": "string"}},
                "note": {"type": ["string", "null"]}
            },
            "required": ["verdict", "reasons", "note"],
            "additionalProperties": false
        })
    }

    #[test]
    fn a_closed_object_with_every_property_required_is_strict() {
        assert!(compatible(&verdict()));
        assert!(compatible(
            &json!({"type": "object", "properties": {}, "additionalProperties": false})
        ));
    }

    #[test]
    fn the_root_must_be_an_object_schema() {
        for root in [
            json!({"type": "array", "items": {"type": "string"}}),
            json!({"type": "string"}),
            json!({"anyOf": [verdict(), verdict()]}),
            json!(true),
        ] {
            assert!(!compatible(&root), "{root}");
        }
    }

    #[test]
    fn an_open_object_anywhere_is_not_strict() {
        let mut open_root = verdict();
        open_root
            .as_object_mut()
            .unwrap()
            .remove("additionalProperties");
        assert!(!compatible(&open_root));
        let mut allows_more = verdict();
        allows_more["additionalProperties"] = json!(true);
        assert!(!compatible(&allows_more));
        let mut nested = verdict();
        nested["properties"]["detail"] =
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
        nested["required"] = json!(["verdict", "reasons", "note", "detail"]);
        assert!(!compatible(&nested));
        nested["properties"]["detail"]["additionalProperties"] = json!(false);
        assert!(compatible(&nested));
    }

    #[test]
    fn an_optional_property_anywhere_is_not_strict() {
        let mut optional = verdict();
        optional["required"] = json!(["verdict", "reasons"]);
        assert!(!compatible(&optional));
        let closed = |required: Value| {
            json!({"type": "object", "properties": {"x": {"type": "integer"}},
                   "required": required, "additionalProperties": false})
        };
        for (at, inner) in [
            (
                "items",
                json!({"type": "array", "items": closed(json!([]))}),
            ),
            (
                "prefixItems",
                json!({"type": "array", "prefixItems": [closed(json!([]))]}),
            ),
            (
                "anyOf",
                json!({"anyOf": [{"type": "null"}, closed(json!([]))]}),
            ),
            ("$ref", json!({"$ref": "#/$defs/x"})),
        ] {
            let mut s = verdict();
            s["properties"]["inner"] = inner;
            s["required"] = json!(["verdict", "reasons", "note", "inner"]);
            if at == "$ref" {
                s["$defs"] = json!({"x": closed(json!([]))});
            }
            assert!(!compatible(&s), "optional property under {at}");
            let fixed = s
                .to_string()
                .replace(r#""required":[]"#, r#""required":["x"]"#);
            assert!(
                compatible(&serde_json::from_str(&fixed).unwrap()),
                "all required under {at}: {fixed}"
            );
        }
    }

    #[test]
    fn keywords_outside_the_subset_are_not_strict() {
        for (k, v) in [
            ("allOf", json!([{"type": "string"}])),
            ("oneOf", json!([{"type": "string"}])),
            ("not", json!({"type": "null"})),
            ("patternProperties", json!({"^x": {"type": "string"}})),
            ("uniqueItems", json!(true)),
        ] {
            let mut s = verdict();
            s["properties"]["reasons"][k] = v;
            assert!(!compatible(&s), "{k}");
        }
        let mut boolean_sub = verdict();
        boolean_sub["properties"]["note"] = json!(true);
        assert!(!compatible(&boolean_sub));
    }
}
