//! Typed tool arguments. A tool's arguments are one `Deserialize + JsonSchema` struct: the
//! parameters schema the model is offered is generated from it ([`schema_for`]) and a call's
//! arguments are parsed into it ([`parse`]), so the two cannot drift. A bad argument is the
//! tool error that names it.
//!
//! Models are sloppy with types, and the tools have always forgiven some of it: a count may
//! come as a whole float or a numeric string ([`Count`]), and an optional text or flag of the
//! wrong type counts as absent ([`lenient`]). A required argument that is missing, null or of
//! the wrong type is refused.

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::ToolOutput;
use deerflow_model::{BoxFuture, ToolArgs, ToolSpec};

/// A refused argument: the text the model sees, which names the argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(pub String);

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<ArgError> for ToolOutput {
    fn from(e: ArgError) -> Self {
        super::ToolError::Refused(e.0).into()
    }
}

/// A tool's spec, its parameters schema generated from its argument type `A`.
pub fn spec<A: JsonSchema + 'static>(name: &str, description: &str) -> ToolSpec {
    ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        parameters: schema_for::<A>(),
    }
}

/// A tool call's body: parses the arguments into `A` and runs `body`, or answers with the
/// error naming the bad argument.
pub fn with_args<'a, A, F>(args: &ToolArgs, body: impl FnOnce(A) -> F) -> BoxFuture<'a, ToolOutput>
where
    A: DeserializeOwned + JsonSchema + 'static,
    F: Future<Output = ToolOutput> + Send + 'a,
{
    match parse::<A>(args) {
        Ok(a) => Box::pin(body(a)),
        Err(e) => {
            let out = ToolOutput::from(e);
            Box::pin(async move { out })
        }
    }
}

/// The parameters schema the model sees for `A`, in the shape every provider accepts: an
/// object with `properties` and `required` (always present, maybe empty), sub-schemas inline,
/// no `$schema`, `title` or `null` types (an optional argument is simply not required), and
/// wrapped doc comments joined into one line.
pub fn schema_for<A: JsonSchema + 'static>() -> Value {
    Value::clone(&cached_schema::<A>())
}

/// Every agent start asks for each of its tools' schemas, and every call checks its
/// arguments against one: each type's is generated once.
fn cached_schema<A: JsonSchema + 'static>() -> Arc<Value> {
    static CACHE: OnceLock<Mutex<HashMap<TypeId, Arc<Value>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    let id = TypeId::of::<A>();
    if let Some(v) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&id) {
        return v.clone();
    }
    let schema = Arc::new(generate::<A>());
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, schema.clone());
    schema
}

fn generate<A: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<A>()
        .to_value();
    if let Some(root) = schema.as_object_mut() {
        // The tool's own description is the spec's; the struct's doc is for readers.
        root.remove("description");
        root.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        root.entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
    }
    tidy(&mut schema);
    schema
}

/// Rewrites one (sub)schema as providers want it, then its property and item schemas.
fn tidy(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    obj.remove("title");
    if obj.get("default") == Some(&Value::Null) {
        obj.remove("default");
    }
    // `["string", "null"]` (an Option) becomes `"string"`: absence is what `required` says.
    if let Some(Value::Array(types)) = obj.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            obj.insert("type".into(), only);
        }
    }
    if let Some(Value::String(d)) = obj.get_mut("description") {
        if d.contains('\n') {
            *d = d
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
        }
    }
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        props.values_mut().for_each(tidy);
    }
    if let Some(items) = obj.get_mut("items") {
        tidy(items);
    }
}

/// Parses a call's arguments into `A`, or says which argument is wrong.
pub fn parse<A: DeserializeOwned + JsonSchema + 'static>(args: &ToolArgs) -> Result<A, ArgError> {
    // Straight from the text: no map of the arguments is built for a call that is fine.
    let mut text = serde_json::Deserializer::from_str(args.as_str());
    match A::deserialize(&mut text) {
        Ok(a) => Ok(a),
        // The refusal is worded from the arguments as a map, which also takes a repeated
        // key the way a map does (the last one counts).
        Err(_) => parse_value(args.to_value()),
    }
}

/// [`parse`] from a value. Arguments that are not a JSON object count as an empty object,
/// as they always have.
fn parse_value<A: DeserializeOwned + JsonSchema + 'static>(args: Value) -> Result<A, ArgError> {
    let args = match args {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let cached = cached_schema::<A>();
    let schema: &Value = &cached;
    // Missing required arguments first, in the order the struct declares them.
    if let Some(name) = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|name| args.get(*name).is_none_or(Value::is_null))
    {
        return Err(ArgError(missing(schema, name)));
    }
    let args = Value::Object(args);
    serde_path_to_error::deserialize(args).map_err(|e| {
        let mut path = e.path().iter();
        let field = match path.next() {
            Some(serde_path_to_error::Segment::Map { key }) => key.clone(),
            _ => return ArgError(format!("Error: invalid arguments: {}", e.inner())),
        };
        let prop = &schema["properties"][field.as_str()];
        if let Some(serde_path_to_error::Segment::Seq { .. }) = path.next() {
            let item = prop["items"]["type"].as_str().unwrap_or("value");
            return ArgError(format!("Error: '{field}' must be a list of {item}s"));
        }
        if is_required(schema, &field) {
            return ArgError(missing(schema, &field));
        }
        // A type of this module words its own refusal ("must be a non-negative integer");
        // serde's own wording is replaced by the type the schema asks for.
        let inner = e.inner().to_string();
        if inner.starts_with("must ") {
            ArgError(format!("Error: '{field}' {inner}"))
        } else {
            ArgError(format!(
                "Error: '{field}' must be {}",
                with_article(type_of(prop))
            ))
        }
    })
}

fn is_required(schema: &Value, field: &str) -> bool {
    schema["required"]
        .as_array()
        .is_some_and(|r| r.iter().any(|n| n == field))
}

fn type_of(prop: &Value) -> &str {
    prop["type"].as_str().unwrap_or("value")
}

fn with_article(noun: &str) -> String {
    let article = if noun.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {noun}")
}

fn missing(schema: &Value, field: &str) -> String {
    let kind = type_of(&schema["properties"][field]);
    format!("Error: missing required {kind} argument '{field}'")
}

/// A non-negative whole number, given as a number, a whole float (`3.0`) or a numeric
/// string (`"3"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count(pub u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .or_else(|| {
                v.as_f64()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                    .map(|f| f as u64)
            })
            .map(Count)
            .ok_or_else(|| D::Error::custom("must be a non-negative integer"))
    }
}

impl JsonSchema for Count {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Count".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({"type": "integer", "minimum": 0})
    }
}

/// Optional arguments that count as absent when they have the wrong type. Use with
/// `#[serde(default, deserialize_with = "…")]`.
pub mod lenient {
    use super::*;

    /// A string, else `None`.
    pub fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::String(s) => Some(s),
            _ => None,
        })
    }

    /// `true` or `false`, else `false`.
    pub fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        Ok(Value::deserialize(d)?.as_bool().unwrap_or(false))
    }

    /// The strings of a list (other items left out); anything but a list is `None`.
    pub fn opt_strings<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Array(items) => Some(
                items
                    .into_iter()
                    .filter_map(|v| match v {
                        Value::String(s) => Some(s),
                        _ => None,
                    })
                    .collect(),
            ),
            _ => None,
        })
    }
}

/// Test helper for every tool family: the schema generated from `A` describes what `A`
/// accepts. Its `required` list is exactly `required` (the non-`Option`, non-default fields,
/// in declaration order), each listed property parses alone with the others supplied, and an
/// object with only the required fields parses.
#[cfg(any(test, feature = "testing"))]
pub fn assert_schema_matches<A: DeserializeOwned + JsonSchema + 'static>(
    required: &[&str],
    sample: Value,
) {
    let schema = schema_for::<A>();
    assert_eq!(schema["type"], "object", "{schema}");
    assert!(schema.get("$schema").is_none() && schema.get("title").is_none());
    let listed: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(listed, required, "{schema}");
    let props = schema["properties"].as_object().unwrap();
    let sample = sample.as_object().unwrap().clone();
    // The sample names every property, and nothing else.
    let mut names: Vec<&String> = props.keys().collect();
    let mut given: Vec<&String> = sample.keys().collect();
    names.sort();
    given.sort();
    assert_eq!(names, given, "the sample must give every property");
    for (name, prop) in props {
        assert!(
            prop["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{name} has no description"
        );
        assert!(prop["type"].is_string(), "{name}: {prop}");
    }
    parse::<A>(&ToolArgs::from(Value::Object(sample.clone()))).expect("the full sample parses");
    let only_required: Map<String, Value> = sample
        .iter()
        .filter(|(k, _)| required.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    parse::<A>(&ToolArgs::from(Value::Object(only_required.clone())))
        .expect("the required fields suffice");
    for name in required {
        let mut without = only_required.clone();
        without.remove(*name);
        let err = parse::<A>(&ToolArgs::from(Value::Object(without))).err();
        assert!(
            err.as_ref()
                .is_some_and(|e| e.0.contains(&format!("'{name}'"))),
            "leaving out {name} must be refused naming it: {err:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An argument struct with one field of each kind.
    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    #[allow(dead_code)]
    struct Sample {
        /// The name,
        /// on two lines.
        name: String,
        /// The items.
        items: Vec<String>,
        /// How many.
        #[schemars(range(min = 1))]
        count: Option<Count>,
        /// A label.
        #[serde(default, deserialize_with = "lenient::opt_string")]
        label: Option<String>,
        /// A switch.
        #[serde(default, deserialize_with = "lenient::flag")]
        on: bool,
    }

    #[test]
    fn schema_has_the_shape_providers_accept() {
        assert_eq!(
            schema_for::<Sample>(),
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The name, on two lines."},
                    "items": {"type": "array", "items": {"type": "string"}, "description": "The items."},
                    "count": {"type": "integer", "minimum": 1, "description": "How many."},
                    "label": {"type": "string", "description": "A label."},
                    "on": {"type": "boolean", "default": false, "description": "A switch."}
                },
                "required": ["name", "items"]
            })
        );
        assert_schema_matches::<Sample>(
            &["name", "items"],
            json!({"name": "n", "items": [], "count": 1, "label": "l", "on": true}),
        );
    }

    #[test]
    fn an_empty_struct_still_lists_properties_and_required() {
        #[derive(Deserialize, JsonSchema)]
        struct Nothing {}
        assert_eq!(
            schema_for::<Nothing>(),
            json!({"type": "object", "properties": {}, "required": []})
        );
    }

    #[test]
    fn bad_arguments_are_refused_naming_the_field() {
        let err = |args: Value| parse::<Sample>(&ToolArgs::from(args)).unwrap_err().0;
        let cases = [
            (
                json!({"items": []}),
                "Error: missing required string argument 'name'",
            ),
            (
                json!({"name": null, "items": []}),
                "Error: missing required string argument 'name'",
            ),
            (
                json!({"name": 5, "items": []}),
                "Error: missing required string argument 'name'",
            ),
            (
                json!({"name": "n"}),
                "Error: missing required array argument 'items'",
            ),
            (
                json!({"name": "n", "items": "a"}),
                "Error: missing required array argument 'items'",
            ),
            (
                json!({"name": "n", "items": ["a", 1]}),
                "Error: 'items' must be a list of strings",
            ),
            (
                json!({"name": "n", "items": [], "count": -1}),
                "Error: 'count' must be a non-negative integer",
            ),
            (
                json!({"name": "n", "items": [], "count": "x"}),
                "Error: 'count' must be a non-negative integer",
            ),
            (
                json!({"name": "n", "items": [], "count": 1.5}),
                "Error: 'count' must be a non-negative integer",
            ),
            (
                json!("not an object"),
                "Error: missing required string argument 'name'",
            ),
        ];
        for (args, want) in cases {
            assert_eq!(err(args.clone()), want, "{args}");
        }
    }

    #[test]
    fn arguments_parse_from_their_text_the_way_a_map_of_them_does() {
        let args = |text: &str| ToolArgs::parse(text).unwrap();
        let a: Sample = parse(&args(r#"{"name":"n","items":["a"],"on":"yes"}"#)).unwrap();
        assert_eq!((a.name.as_str(), a.items.len()), ("n", 1));
        // A repeated key fails the straight parse; as a map the last one counts.
        let a: Sample = parse(&args(r#"{"name":"first","items":[],"name":"last"}"#)).unwrap();
        assert_eq!(a.name, "last");
        // A refusal names the first missing field in declaration order, whatever came first.
        let err = parse::<Sample>(&args(r#"{"count":"x","items":3}"#)).unwrap_err();
        assert_eq!(err.0, "Error: missing required string argument 'name'");
    }

    #[test]
    fn leniency_is_kept() {
        let ok = |args: Value| parse::<Sample>(&ToolArgs::from(args)).unwrap();
        let base = |extra: Value| {
            let mut m = json!({"name": "n", "items": ["a"]});
            m.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            m
        };
        for (given, want) in [
            (json!(3), Some(3)),
            (json!("3"), Some(3)),
            (json!(3.0), Some(3)),
            (json!(0), Some(0)),
            (json!(null), None),
        ] {
            assert_eq!(ok(base(json!({"count": given}))).count.map(|c| c.0), want);
        }
        let s = ok(base(json!({"label": 5, "on": "yes", "unknown": 1})));
        assert_eq!((s.label, s.on), (None, false));
        let s = ok(base(json!({"label": "l", "on": true})));
        assert_eq!((s.label.as_deref(), s.on), (Some("l"), true));
    }

    #[test]
    fn wrong_type_of_a_strict_optional_field_names_the_type() {
        #[derive(Debug, Deserialize, JsonSchema)]
        #[allow(dead_code)]
        struct Strict {
            /// Optional but strict.
            x: Option<String>,
            /// Optional integer.
            n: Option<i64>,
        }
        assert_eq!(
            parse::<Strict>(&ToolArgs::from(json!({"x": 1})))
                .unwrap_err()
                .0,
            "Error: 'x' must be a string"
        );
        assert_eq!(
            parse::<Strict>(&ToolArgs::from(json!({"n": "a"})))
                .unwrap_err()
                .0,
            "Error: 'n' must be an integer"
        );
    }
}
