//! The `--output-schema` file (contract §11): compiled once before the run starts, told to
//! the lead in its system prompt, sent natively by the providers that support it (they read
//! it from [`ChatRequest::output_schema`](super::ChatRequest)), and the judge of the lead's
//! final answer, whichever provider produced it.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

/// How many violations one retry message lists: the first ones are what the model must fix,
/// and a long list would crowd its context.
const MAX_LISTED: usize = 20;

/// A validation message quotes the offending value, which may be the whole answer.
const MAX_MESSAGE_CHARS: usize = 300;

/// A compiled draft 2020-12 schema the lead's final answer must satisfy.
pub struct OutputSchema {
    schema: Value,
    name: String,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSchema")
            .field("name", &self.name)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// One way the answer fails the schema: where (a JSON Pointer into the answer, empty for the
/// whole answer) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() {
            "(root)"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

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

    /// The schema as the file holds it.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// A name for the schema: the file's, made of `[a-zA-Z0-9_-]`, at most 64 characters.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the lead's system prompt says about the final answer.
    pub fn instruction(&self) -> String {
        format!(
            "## Final answer format\n\
             Your final answer (the reply without tool calls that ends the task) must be exactly one \
             JSON value that validates against the JSON Schema below: the JSON alone, with no text \
             before or after it. It is checked; an answer that does not validate is sent back to \
             you with the errors. Use your tools as usual before it.\n\
             ```json\n{}\n```\n",
            self.schema
        )
    }

    /// Checks a final answer. The answer may be wrapped in one code fence (```` ```json ````
    /// or ```` ``` ````); `Ok` is the JSON text without it, `Err` every violation found, in
    /// the validator's order (never empty).
    pub fn check(&self, answer: Option<&str>) -> Result<String, Vec<Violation>> {
        let text = strip_fence(answer.unwrap_or(""));
        if text.is_empty() {
            return Err(vec![Violation {
                path: String::new(),
                message: "the answer is empty; a JSON value is required".into(),
            }]);
        }
        let value: Value = serde_json::from_str(text).map_err(|e| {
            vec![Violation {
                path: String::new(),
                message: format!("the answer is not one JSON value ({e})"),
            }]
        })?;
        let violations: Vec<Violation> = self
            .validator
            .iter_errors(&value)
            .map(|e| Violation {
                path: e.instance_path().to_string(),
                message: deerflow_base::text::clip(&one_line(&e.to_string()), MAX_MESSAGE_CHARS),
            })
            .collect();
        if violations.is_empty() {
            Ok(text.to_string())
        } else {
            Err(violations)
        }
    }
}

/// What the model is told when its answer does not validate.
pub fn retry_message(violations: &[Violation]) -> String {
    let mut s = String::from(
        "[deerflow] Your final answer does not validate against the required JSON Schema:\n",
    );
    for v in violations.iter().take(MAX_LISTED) {
        let _ = writeln!(s, "- {v}");
    }
    if violations.len() > MAX_LISTED {
        let _ = writeln!(s, "- … and {} more", violations.len() - MAX_LISTED);
    }
    s.push_str("Reply with the corrected JSON value alone.");
    s
}

/// The answer without one surrounding code fence: ```` ```json ```` (any case) or a bare
/// ```` ``` ```` on its own line, the closing fence on the last line. Anything else is
/// returned trimmed, as is.
pub fn strip_fence(answer: &str) -> &str {
    let text = answer.trim();
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let Some((info, body)) = rest.split_once('\n') else {
        return text;
    };
    let info = info.trim();
    if !(info.is_empty() || info.eq_ignore_ascii_case("json")) {
        return text;
    }
    match body.trim_end().strip_suffix("```") {
        // The closing fence stands on a line of its own.
        Some(inner) if inner.is_empty() || inner.ends_with('\n') => inner.trim(),
        _ => text,
    }
}

/// The file's name without `.json`, e.g. `verdict.schema.json` → `verdict_schema`.
fn name_from_path(path: &Path) -> String {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    file.strip_suffix(".json").unwrap_or(&file).to_string()
}

fn wire_name(name: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn verdict() -> OutputSchema {
        OutputSchema::new(
            "verdict",
            json!({
                "type": "object",
                "properties": {
                    "verdict": {"enum": ["pass", "fail"]},
                    "reasons": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["verdict", "reasons"],
                "additionalProperties": false
            }),
        )
        .unwrap()
    }

    #[test]
    fn a_valid_answer_is_returned_without_its_fence() {
        let s = verdict();
        let plain = r#"{"verdict": "pass", "reasons": []}"#;
        assert_eq!(s.check(Some(plain)).unwrap(), plain);
        for fenced in [
            format!("```json\n{plain}\n```"),
            format!("```\n{plain}\n```\n"),
            format!("  ```JSON\n{plain}\n```  "),
        ] {
            assert_eq!(s.check(Some(&fenced)).unwrap(), plain, "{fenced}");
        }
    }

    #[test]
    fn only_one_well_formed_fence_is_stripped() {
        assert_eq!(strip_fence("```json\n1\n```"), "1");
        assert_eq!(strip_fence("```\n```\n1\n```\n```"), "```\n1\n```");
        // Another language, no closing fence, a fence not on its own line: left as they are.
        for kept in [
            "```yaml\na: 1\n```",
            "```json\n1",
            "```json\n1```",
            "```1```",
        ] {
            assert_eq!(strip_fence(kept), kept);
        }
        assert_eq!(strip_fence("  {}\n"), "{}");
    }

    #[test]
    fn violations_name_the_path_and_the_problem() {
        let s = verdict();
        let errs = s
            .check(Some(r#"{"verdict": "maybe", "extra": 1}"#))
            .unwrap_err();
        let lines: Vec<String> = errs.iter().map(|v| v.to_string()).collect();
        assert!(
            lines.iter().any(|l| l.starts_with("/verdict: ")
                && l.contains("\"maybe\"")
                && l.contains("pass")),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("(root): ") && l.contains("reasons")),
            "{lines:?}"
        );
        let msg = retry_message(&errs);
        assert!(msg.contains("- /verdict: "), "{msg}");
        assert!(msg.ends_with("Reply with the corrected JSON value alone."));
    }

    #[test]
    fn prose_and_empty_answers_are_violations_of_the_whole_answer() {
        let s = verdict();
        let prose = s.check(Some("The verdict is pass.")).unwrap_err();
        assert_eq!(prose.len(), 1);
        assert_eq!(prose[0].path, "");
        assert!(prose[0].message.contains("not one JSON value"));
        let two = s.check(Some(r#"{"verdict":"pass","reasons":[]} {}"#));
        assert!(two.unwrap_err()[0].message.contains("not one JSON value"));
        for empty in [None, Some(""), Some("```json\n```")] {
            assert!(s.check(empty).unwrap_err()[0].message.contains("empty"));
        }
    }

    #[test]
    fn long_violation_lists_and_messages_are_bounded() {
        let s =
            OutputSchema::new("n", json!({"type": "array", "items": {"type": "integer"}})).unwrap();
        let answer = serde_json::to_string(&vec!["x".repeat(1000); 30]).unwrap();
        let errs = s.check(Some(&answer)).unwrap_err();
        assert_eq!(errs.len(), 30);
        // The cut is marked with one `…`.
        assert!(errs
            .iter()
            .all(|v| v.message.chars().count() <= MAX_MESSAGE_CHARS + 1));
        assert!(errs[0].message.ends_with('…'));
        let msg = retry_message(&errs);
        assert_eq!(msg.matches("\n- /").count(), MAX_LISTED);
        assert!(msg.contains("- … and 10 more"));
    }

    #[test]
    fn formats_are_asserted() {
        let s = OutputSchema::new("d", json!({"type": "string", "format": "date"})).unwrap();
        assert!(s.check(Some(r#""2026-12-01""#)).is_ok());
        assert!(s.check(Some(r#""tomorrow""#)).is_err());
    }

    #[test]
    fn schemas_that_do_not_compile_are_refused() {
        for (bad, why) in [
            (json!({"type": "nope"}), "not a valid JSON Schema"),
            (json!({"minLength": -1}), "not a valid JSON Schema"),
            (json!({"pattern": "("}), "not a valid JSON Schema"),
            (json!([1, 2]), "an object or a boolean"),
            (json!("string"), "an object or a boolean"),
            // Nothing is fetched: a reference outside the file cannot be resolved.
            (
                json!({"$ref": "https://example.com/schema.json"}),
                "not a valid JSON Schema",
            ),
            (
                json!({"$ref": "#/$defs/missing"}),
                "not a valid JSON Schema",
            ),
            (
                json!({"properties": {"a": {"type": "bogus"}}}),
                "at /properties/a/type: ",
            ),
        ] {
            let err = OutputSchema::new("x", bad.clone()).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
        let remote = OutputSchema::new("x", json!({"$ref": "https://example.com/s.json"}));
        assert_eq!(
            remote.unwrap_err(),
            "is not a valid JSON Schema (draft 2020-12): $ref https://example.com/s.json is \
             outside the file, and schemas are never fetched (put it under $defs)"
        );
        assert!(OutputSchema::new("x", json!(true)).is_ok());
        // Draft 2020-12 whatever `$schema` says.
        let d7 = json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"});
        assert!(OutputSchema::new("x", d7).is_ok());
    }

    #[test]
    fn files_are_read_bounded_and_named() {
        let d = tempfile::tempdir().unwrap();
        let ok = d.path().join("verdict.schema.json");
        std::fs::write(&ok, r#"{"type": "object"}"#).unwrap();
        let s = OutputSchema::load(&ok).unwrap();
        assert_eq!(s.name(), "verdict_schema");
        assert_eq!(s.schema(), &json!({"type": "object"}));
        assert!(s.instruction().contains(r#"{"type":"object"}"#));
        let not_json = d.path().join("x.json");
        std::fs::write(&not_json, "type: object").unwrap();
        assert!(OutputSchema::load(&not_json)
            .unwrap_err()
            .starts_with("is not JSON"));
        let missing = OutputSchema::load(&d.path().join("missing.json")).unwrap_err();
        assert!(missing.starts_with("cannot be read"), "{missing}");
        let big = d.path().join("big.json");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(deerflow_base::text::MAX_INPUT_BYTES + 1).unwrap();
        assert_eq!(
            OutputSchema::load(&big).unwrap_err(),
            "is larger than 16 MiB"
        );
        assert!(OutputSchema::load(d.path())
            .unwrap_err()
            .starts_with("cannot be read"));
    }

    #[test]
    fn names_fit_openai() {
        assert_eq!(wire_name("a b/c.d"), "a_b_c_d");
        assert_eq!(wire_name(""), "final_answer");
        assert_eq!(wire_name(&"x".repeat(100)).len(), 64);
        assert_eq!(name_from_path(Path::new("/a/out.json")), "out");
    }
}
