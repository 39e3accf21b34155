//! The JSON Schema validator behind `OutputSchema` (cargo feature `output-schema`): a schema
//! file compiled, an answer's violations listed.

use std::path::Path;

use serde_json::Value;

use super::{OutputSchema, Violation};

/// A validation message quotes the offending value, which may be the whole answer.
pub(super) const MAX_MESSAGE_CHARS: usize = 300;

pub(super) type Validator = jsonschema::Validator;

impl OutputSchema {
    /// Reads and compiles a schema file. `Err` names the problem (not the file: the caller
    /// knows which flag named it).
    pub fn load(path: &Path) -> Result<Self, String> {
        let bytes = std::fs::File::open(path)
            .and_then(deerflow_base::text::read_at_most)
            .map_err(|e| format!("cannot be read: {e}"))?
            .ok_or("is larger than 16 MiB")?;
        let schema: Value =
            serde_json::from_slice(&bytes).map_err(|e| format!("is not JSON: {e}"))?;
        Self::new(&name_from_path(path), schema)
    }

    /// Compiles `schema` (draft 2020-12, formats asserted). `name` is what providers that
    /// want a name for the schema get, made fit for OpenAI's `^[a-zA-Z0-9_-]{1,64}$`.
    pub fn new(name: &str, schema: Value) -> Result<Self, String> {
        if !(schema.is_object() || schema.is_boolean()) {
            return Err("is not a JSON Schema: a schema is an object or a boolean".into());
        }
        // A pipeline that asks for `"format": "date"` means it: formats are checked, not
        // just annotations as draft 2020-12 would have them by default.
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&schema)
            .map_err(|e| format!("is not a valid JSON Schema (draft 2020-12): {}", why(&e)))?;
        Ok(Self {
            schema,
            name: wire_name(name),
            validator,
        })
    }
}

/// Every way `value` fails the schema, in the validator's order.
pub(super) fn violations(validator: &Validator, value: &Value) -> Vec<Violation> {
    validator
        .iter_errors(value)
        .map(|e| Violation {
            path: e.instance_path().to_string(),
            message: deerflow_base::text::clip(&one_line(&e.to_string()), MAX_MESSAGE_CHARS),
        })
        .collect()
}

/// The file's name without `.json`, e.g. `verdict.schema.json` → `verdict_schema`.
pub(super) fn name_from_path(path: &Path) -> String {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    file.strip_suffix(".json").unwrap_or(&file).to_string()
}

pub(super) fn wire_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if s.is_empty() {
        "final_answer".into()
    } else {
        s
    }
}

/// Why a schema does not compile: where in the schema, and what.
fn why(e: &jsonschema::ValidationError<'_>) -> String {
    if let jsonschema::error::ValidationErrorKind::Referencing(
        jsonschema::ReferencingError::Unretrievable { uri, .. },
    ) = e.kind()
    {
        return format!(
            "$ref {uri} is outside the file, and schemas are never fetched (put it under $defs)"
        );
    }
    let at = e.instance_path().to_string();
    let what = deerflow_base::text::clip(&one_line(&e.to_string()), MAX_MESSAGE_CHARS);
    if at.is_empty() {
        what
    } else {
        format!("at {at}: {what}")
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
