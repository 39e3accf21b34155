//! The `--output-schema` file (contract §11): compiled once before the run starts, told to
//! the lead in its system prompt, sent natively by the providers that support it (they read
//! it from [`ChatRequest::output_schema`](super::ChatRequest)), and the judge of the lead's
//! final answer, whichever provider produced it.
//!
//! The validator is the cargo feature `output-schema` (`compile.rs`). A build without it has
//! no way to make an `OutputSchema` (the binary refuses the flag first), so every agent,
//! provider and scheduler that carries an `Option<Arc<OutputSchema>>` compiles unchanged and
//! only ever sees `None`.

use std::fmt::Write as _;

use serde_json::Value;

#[cfg(feature = "output-schema")]
mod compile;
#[cfg(all(test, feature = "output-schema"))]
mod tests;

#[cfg(feature = "output-schema")]
use compile::{violations, Validator};

/// Nothing: no value of it exists, so neither does an `OutputSchema`.
#[cfg(not(feature = "output-schema"))]
type Validator = std::convert::Infallible;

#[cfg(not(feature = "output-schema"))]
fn violations(validator: &Validator, _: &Value) -> Vec<Violation> {
    match *validator {}
}

/// How many violations one retry message lists: the first ones are what the model must fix,
/// and a long list would crowd its context.
const MAX_LISTED: usize = 20;

/// A compiled draft 2020-12 schema the lead's final answer must satisfy.
pub struct OutputSchema {
    schema: Value,
    name: String,
    validator: Validator,
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
        let violations = violations(&self.validator, &value);
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

#[cfg(test)]
mod fence_tests {
    use super::strip_fence;

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
}
