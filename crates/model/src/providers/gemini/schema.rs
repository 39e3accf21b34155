//! Tool parameter schemas as Gemini's `functionDeclarations[].parameters` takes them: a
//! subset of OpenAPI 3.0's Schema object, not JSON Schema. The API answers 400 to keys
//! outside the subset (`$schema`, `additionalProperties`, `$ref`, `const`, `oneOf`,
//! `default`, `examples`, `exclusiveMinimum`, …), to a list as `type`, to string formats
//! other than `enum` and `date-time`, to an object without properties at the top, to an
//! array without `items` and to `required` names that are not properties. Tool schemas are
//! generated JSON Schema (schemars) or come from MCP servers, so they are converted: what
//! has an equivalent is rewritten (`$ref` inlined, `["T", "null"]` and `anyOf` with `null`
//! to `nullable`, `oneOf` to `anyOf`, `allOf` merged, `const` to `enum`), the rest dropped.
//! Dropping only loosens the schema: the tool still checks its own arguments.

use serde_json::{json, Map, Value};

/// References are inlined this deep at most: a recursive schema ends in an untyped one.
const MAX_DEPTH: usize = 24;

const TYPES: &[&str] = &["string", "number", "integer", "boolean", "array", "object"];

/// The `parameters` of a function declaration; `None` when the function takes none (an
/// object without properties, which the API refuses as a `parameters` value).
pub fn parameters(schema: &Value) -> Option<Value> {
    let converted = Converter { root: schema }.convert(schema, 0);
    let has_properties = converted
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    let is_object = converted.get("type").and_then(Value::as_str) == Some("object");
    if is_object && !has_properties {
        return None;
    }
    Some(converted)
}

struct Converter<'a> {
    /// Where `#/$defs/…` and `#/definitions/…` references are looked up.
    root: &'a Value,
}

impl Converter<'_> {
    fn convert(&self, schema: &Value, depth: usize) -> Value {
        let Some(obj) = schema.as_object() else {
            // `true`, `false` or junk: nothing to say about the value.
            return json!({});
        };
        if depth > MAX_DEPTH {
            return describe_only(obj);
        }
        let merged = self.flatten(obj, depth);
        let mut out = Map::new();
        let mut nullable = merged.get("nullable") == Some(&Value::Bool(true));
        let mut any_of: Option<Vec<Value>> = None;

        match merged.get("type") {
            Some(Value::String(t)) if t == "null" => nullable = true,
            Some(Value::String(t)) if TYPES.contains(&t.as_str()) => {
                out.insert("type".into(), json!(t));
            }
            Some(Value::Array(list)) => {
                let types: Vec<&str> = list
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|t| {
                        if *t == "null" {
                            nullable = true;
                        }
                        TYPES.contains(t)
                    })
                    .collect();
                match types.as_slice() {
                    [] => {}
                    [one] => {
                        out.insert("type".into(), json!(one));
                    }
                    many => {
                        any_of = Some(many.iter().map(|t| json!({"type": t})).collect());
                    }
                }
            }
            _ => {}
        }

        let alternatives = merged
            .get("anyOf")
            .or_else(|| merged.get("oneOf"))
            .and_then(Value::as_array);
        if let Some(list) = alternatives {
            let mut kept = Vec::new();
            for alt in list {
                let converted = self.convert(alt, depth + 1);
                if is_null_only(alt) {
                    nullable = true;
                } else {
                    kept.push(converted);
                }
            }
            match kept.len() {
                0 => {}
                1 => {
                    // One alternative left: it is the schema.
                    if let Some(Value::Object(only)) = kept.pop() {
                        for (k, v) in only {
                            out.entry(k).or_insert(v);
                        }
                    }
                }
                _ => any_of = Some(kept),
            }
        }

        if let Some(d) = merged.get("description").and_then(Value::as_str) {
            out.insert("description".into(), json!(d));
        }

        let enum_values = merged
            .get("enum")
            .and_then(Value::as_array)
            .cloned()
            .or_else(|| merged.get("const").map(|c| vec![c.clone()]));
        if let Some(values) = enum_values {
            let strings: Vec<&Value> = values.iter().filter(|v| !v.is_null()).collect();
            if values.iter().any(Value::is_null) {
                nullable = true;
            }
            // Gemini's enums are lists of strings on a string.
            if !strings.is_empty() && strings.iter().all(|v| v.is_string()) {
                let kind = out.get("type").and_then(Value::as_str);
                if kind.is_none() || kind == Some("string") {
                    out.insert("type".into(), json!("string"));
                    out.insert(
                        "enum".into(),
                        Value::Array(strings.into_iter().cloned().collect()),
                    );
                }
            }
        }

        let kind = out
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| {
                (merged.contains_key("properties") && any_of.is_none()).then(|| "object".into())
            });

        if let Some(format) = merged.get("format").and_then(Value::as_str) {
            let supported = match kind.as_deref() {
                Some("string") => matches!(format, "date-time" | "enum"),
                Some("integer") => matches!(format, "int32" | "int64"),
                Some("number") => matches!(format, "float" | "double"),
                _ => false,
            };
            if supported {
                out.insert("format".into(), json!(format));
            }
        }

        match kind.as_deref() {
            Some("object") => {
                out.insert("type".into(), json!("object"));
                let mut props = Map::new();
                if let Some(p) = merged.get("properties").and_then(Value::as_object) {
                    for (name, sub) in p {
                        props.insert(name.clone(), self.convert(sub, depth + 1));
                    }
                }
                let required: Vec<Value> = merged
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .filter(|name| props.contains_key(*name))
                    .map(|name| json!(name))
                    .collect();
                if !props.is_empty() {
                    out.insert("properties".into(), Value::Object(props));
                }
                if !required.is_empty() {
                    out.insert("required".into(), Value::Array(required));
                }
                copy_numbers(&merged, &mut out, &["minProperties", "maxProperties"]);
            }
            Some("array") => {
                let items = match merged.get("items") {
                    Some(Value::Array(tuple)) => tuple.first().map(|i| self.convert(i, depth + 1)),
                    Some(items) => Some(self.convert(items, depth + 1)),
                    None => None,
                };
                // The API needs `items` with a type; unknown items are best sent as text.
                let items = items
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                    .unwrap_or_else(|| json!({"type": "string"}));
                out.insert("items".into(), items);
                copy_numbers(&merged, &mut out, &["minItems", "maxItems"]);
            }
            Some("string") => {
                copy_numbers(&merged, &mut out, &["minLength", "maxLength"]);
                if let Some(p) = merged.get("pattern").and_then(Value::as_str) {
                    out.insert("pattern".into(), json!(p));
                }
            }
            Some("integer" | "number") => {
                copy_numbers(&merged, &mut out, &["minimum", "maximum"]);
            }
            _ => {}
        }

        if let Some(list) = any_of {
            out.remove("type");
            out.insert("anyOf".into(), Value::Array(list));
        }
        if nullable {
            out.insert("nullable".into(), json!(true));
        }
        Value::Object(out)
    }

    /// The schema with its `$ref` resolved and its `allOf` parts merged in, so what is
    /// left to convert is one plain schema.
    fn flatten(&self, obj: &Map<String, Value>, depth: usize) -> Map<String, Value> {
        let mut merged = obj.clone();
        if depth > MAX_DEPTH {
            merged.remove("$ref");
            merged.remove("allOf");
            return merged;
        }
        if let Some(target) = merged
            .remove("$ref")
            .and_then(|r| r.as_str().and_then(|r| self.resolve(r)).cloned())
        {
            if let Some(target) = target.as_object() {
                // Keys beside `$ref` (a description) win over the target's.
                let beside = std::mem::take(&mut merged);
                merged = self.flatten(target, depth + 1);
                merged.extend(beside);
            }
        }
        if let Some(Value::Array(parts)) = merged.remove("allOf") {
            for part in parts.iter().filter_map(Value::as_object) {
                let part = self.flatten(part, depth + 1);
                merge_into(&mut merged, part);
            }
        }
        merged
    }

    /// A local reference (`#/$defs/Name`, `#/definitions/Name`, any JSON Pointer into the
    /// root); remote ones are not followed.
    fn resolve(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        self.root.pointer(pointer)
    }
}

/// Merges an `allOf` part: properties and required names add up, other keys the schema
/// already has win.
fn merge_into(into: &mut Map<String, Value>, part: Map<String, Value>) {
    for (key, value) in part {
        match (key.as_str(), into.get_mut(&key), value) {
            ("properties", Some(Value::Object(have)), Value::Object(add)) => {
                for (k, v) in add {
                    have.entry(k).or_insert(v);
                }
            }
            ("required", Some(Value::Array(have)), Value::Array(add)) => {
                for name in add {
                    if !have.contains(&name) {
                        have.push(name);
                    }
                }
            }
            (_, Some(_), _) => {}
            (_, None, value) => {
                into.insert(key, value);
            }
        }
    }
}

fn is_null_only(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

fn copy_numbers(from: &Map<String, Value>, to: &mut Map<String, Value>, keys: &[&str]) {
    for key in keys {
        if let Some(n) = from.get(*key).filter(|v| v.is_number()) {
            to.insert((*key).to_string(), n.clone());
        }
    }
}

/// What is left of a schema nested too deep to expand: its description.
fn describe_only(obj: &Map<String, Value>) -> Value {
    match obj.get("description").and_then(Value::as_str) {
        Some(d) => json!({"description": d}),
        None => json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key the API's Schema subset accepts; the converter may send no other.
    const ACCEPTED: &[&str] = &[
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "properties",
        "required",
        "items",
        "anyOf",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "minProperties",
        "maxProperties",
    ];

    /// Walks a converted schema and fails on any key outside [`ACCEPTED`].
    fn assert_accepted(schema: &Value, at: &str) {
        let obj = schema
            .as_object()
            .unwrap_or_else(|| panic!("{at}: {schema}"));
        for (key, value) in obj {
            assert!(ACCEPTED.contains(&key.as_str()), "{at}.{key} in {schema}");
            match key.as_str() {
                "properties" => {
                    for (name, sub) in value.as_object().unwrap() {
                        assert_accepted(sub, &format!("{at}.{name}"));
                    }
                }
                "items" => assert_accepted(value, &format!("{at}[]")),
                "anyOf" => {
                    for sub in value.as_array().unwrap() {
                        assert_accepted(sub, &format!("{at}|"));
                    }
                }
                "type" => assert!(value.is_string(), "{at}: {value}"),
                "enum" => assert!(value.as_array().unwrap().iter().all(Value::is_string)),
                _ => {}
            }
        }
    }

    #[test]
    fn generated_json_schema_becomes_the_openapi_subset() {
        // What schemars writes for an argument struct with optional fields and a nested
        // type, plus what MCP servers write.
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "ReadFileArgs",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "path": {"type": "string", "description": "The file", "examples": ["a.txt"]},
                "start_line": {"type": ["integer", "null"], "format": "uint", "minimum": 0,
                               "default": null},
                "mode": {"$ref": "#/$defs/Mode", "description": "How to read"},
                "when": {"type": "string", "format": "date-time"},
                "url": {"type": "string", "format": "uri", "pattern": "^https?:"},
                "kind": {"const": "text"},
                "limit": {"anyOf": [{"type": "integer", "exclusiveMinimum": 0}, {"type": "null"}]},
                "target": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                "tags": {"type": "array", "maxItems": 3},
                "pairs": {"type": "array", "items": [{"type": "number"}, {"type": "number"}]},
                "meta": {"type": "object", "additionalProperties": {"type": "string"}},
                "level": {"type": "integer", "enum": [1, 2, 3]},
                "both": {"allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "boolean"}}, "required": ["b"]},
                ]},
                "anything": true,
            },
            "required": ["path", "ghost"],
            "$defs": {"Mode": {"type": "string", "enum": ["head", "tail"], "title": "Mode"}},
        });
        let converted = parameters(&schema).unwrap();
        assert_accepted(&converted, "$");
        assert_eq!(
            converted,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file"},
                    "start_line": {"type": "integer", "minimum": 0, "nullable": true},
                    "mode": {"type": "string", "description": "How to read",
                             "enum": ["head", "tail"]},
                    "when": {"type": "string", "format": "date-time"},
                    "url": {"type": "string", "pattern": "^https?:"},
                    "kind": {"type": "string", "enum": ["text"]},
                    "limit": {"type": "integer", "nullable": true},
                    "target": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                    "pairs": {"type": "array", "items": {"type": "number"}},
                    "meta": {"type": "object"},
                    "level": {"type": "integer"},
                    "both": {"type": "object",
                             "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}},
                             "required": ["a", "b"]},
                    "anything": {},
                },
                "required": ["path"],
            })
        );
    }

    #[test]
    fn a_function_without_parameters_sends_none() {
        for schema in [
            json!({"type": "object"}),
            json!({"type": "object", "properties": {}}),
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ] {
            assert_eq!(parameters(&schema), None, "{schema}");
        }
    }

    #[test]
    fn recursive_references_end() {
        let schema = json!({
            "type": "object",
            "properties": {"tree": {"$ref": "#/definitions/Node"}},
            "definitions": {"Node": {"type": "object", "description": "A node",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/definitions/Node"}}}}},
        });
        let converted = parameters(&schema).unwrap();
        assert_accepted(&converted, "$");
        assert_eq!(converted["properties"]["tree"]["description"], "A node");
        // A reference to itself ends too.
        let looping = json!({"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}});
        assert_eq!(parameters(&looping).unwrap()["properties"]["a"], json!({}));
        // Unknown references are dropped, not followed.
        let remote = json!({"type": "object", "properties": {"x": {"$ref": "https://e/x.json"}}});
        assert_eq!(parameters(&remote).unwrap()["properties"]["x"], json!({}));
    }
}
