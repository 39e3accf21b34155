//! Tools only the lead agent has: `present_files` and `ask_clarification`.

use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Deserialize;

use super::args::{lenient, spec, with_args};
use super::{Control, Tool, ToolContext, ToolOutput};
use crate::ToolError;
use deerflow_model::{BoxFuture, ToolCall, ToolSpec};
use deerflow_workspace::Access;

/// Marks files as the run's outputs (`run_completed.artifacts`).
pub struct PresentFilesTool {
    pub artifacts: Arc<Mutex<Vec<String>>>,
}

/// `present_files`' arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PresentFilesArgs {
    /// Paths of the files, relative to the workspace.
    pub filepaths: Vec<String>,
}

impl Tool for PresentFilesTool {
    fn name(&self) -> &str {
        "present_files"
    }

    fn spec(&self) -> ToolSpec {
        spec::<PresentFilesArgs>(
            "present_files",
            "Mark files you produced as the outputs of this run. They are listed to the \
                          user when the run ends. Each file must exist in the workspace.",
        )
    }

    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        with_args(
            &call.arguments,
            move |a| async move { self.present(a, ctx) },
        )
    }
}

impl PresentFilesTool {
    fn present(&self, args: PresentFilesArgs, ctx: &ToolContext) -> ToolOutput {
        let mut shown = Vec::new();
        for p in &args.filepaths {
            let abs = match ctx.workspace.resolve(p, Access::Read) {
                Ok(a) => a,
                // Exactly the workspace's refusal (contract §6), like every other tool.
                Err(e) => return ToolError::Refused(e).into(),
            };
            if abs.is_dir() {
                return ToolError::IsDirectory {
                    path: p.clone(),
                    hint: "; present the files in it",
                }
                .into();
            }
            // A file that does not exist yet may be written by a call of the same response
            // (tools run in parallel): it is listed if it exists when the run ends.
            shown.push(ctx.workspace.display_path(&abs));
        }
        let mut g = self.artifacts.lock().unwrap_or_else(|p| p.into_inner());
        for s in &shown {
            if !g.contains(s) {
                g.push(s.clone());
            }
        }
        ToolOutput::ok(format!(
            "Presented {} file(s): {}",
            shown.len(),
            shown.join(", ")
        ))
    }
}

/// Asks the user a question. Nobody can answer during a run, so this ends it (exit 6).
pub struct AskClarificationTool;

/// `ask_clarification`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskClarificationArgs {
    /// The question to ask.
    pub question: String,
    /// Possible answers to choose from, if any.
    #[serde(default, deserialize_with = "options")]
    pub options: Option<Vec<String>>,
    /// Why the answer is needed.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub context: Option<String>,
}

/// The options as models send them: a list; a list written as a JSON string
/// (`"[\"a\",\"b\"]"`); or one plain string, which is one option (DeerFlow reads them the
/// same way since real models did both). Items that are not strings are left out.
fn options<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    use serde::de::IntoDeserializer;
    use serde_json::Value;
    let v = Value::deserialize(d)?;
    let v = match v {
        Value::String(s) if s.trim().is_empty() => return Ok(None),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(list @ Value::Array(_)) => list,
            _ => return Ok(Some(vec![s])),
        },
        other => other,
    };
    lenient::opt_strings(v.into_deserializer()).map_err(serde::de::Error::custom)
}

impl Tool for AskClarificationTool {
    fn name(&self) -> &str {
        "ask_clarification"
    }

    fn spec(&self) -> ToolSpec {
        spec::<AskClarificationArgs>(
            "ask_clarification",
            "Ask the user a question when the task cannot be done without the answer. \
                          This ends the run: the question is reported and the run stops.",
        )
    }

    fn call<'a>(&'a self, call: &'a ToolCall, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        with_args(&call.arguments, |a: AskClarificationArgs| async move {
            let mut text = format!("Clarification requested: {}", a.question);
            if let Some(c) = &a.context {
                text.push_str(&format!("\nContext: {c}"));
            }
            ToolOutput {
                control: Some(Control::Clarify {
                    question: a.question,
                    options: a.options.unwrap_or_default(),
                }),
                ..ToolOutput::ok(text)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::assert_schema_matches;
    use crate::fs::tests::ctx;
    use crate::ToolStatus::{Error as E, Ok as O};
    use serde_json::json;

    #[test]
    fn schemas_match_what_the_argument_types_accept() {
        assert_schema_matches::<PresentFilesArgs>(&["filepaths"], json!({"filepaths": ["a"]}));
        assert_schema_matches::<AskClarificationArgs>(
            &["question"],
            json!({"question": "q", "options": ["a"], "context": "c"}),
        );
        assert_eq!(
            AskClarificationTool.spec().parameters,
            json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string", "description": "The question to ask."},
                    "options": {"type": "array", "items": {"type": "string"},
                                "description": "Possible answers to choose from, if any."},
                    "context": {"type": "string", "description": "Why the answer is needed."}
                },
                "required": ["question"]
            })
        );
    }

    #[tokio::test]
    async fn clarification_keeps_its_leniency() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let out = AskClarificationTool
            .call(
                &ToolCall::new(
                    "c",
                    "ask_clarification",
                    json!({"question": "Which?", "options": ["a", 1, "b"], "context": "why"}),
                ),
                &c,
            )
            .await;
        assert_eq!(out.text(), "Clarification requested: Which?\nContext: why");
        assert_eq!(
            out.control,
            Some(Control::Clarify {
                question: "Which?".into(),
                options: vec!["a".into(), "b".into()]
            })
        );
        let out = AskClarificationTool
            .call(
                &ToolCall::new(
                    "c",
                    "",
                    json!({"question": "Q", "options": 7, "context": 3}),
                ),
                &c,
            )
            .await;
        assert_eq!(
            (out.status, &*out.text()),
            (O, "Clarification requested: Q")
        );
        assert_eq!(
            out.control,
            Some(Control::Clarify {
                question: "Q".into(),
                options: vec![]
            })
        );
        let out = AskClarificationTool
            .call(&ToolCall::new("c", "", json!({})), &c)
            .await;
        assert_eq!(
            (out.status, out.into_text()),
            (
                E,
                "Error: missing required string argument 'question'".into()
            )
        );
    }

    #[tokio::test]
    async fn options_sent_as_a_json_string_or_one_string_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let cases = [
            (json!("[\"a\", \"b\"]"), vec!["a", "b"]),
            (json!("a"), vec!["a"]),
            (json!("[not json"), vec!["[not json"]),
            (json!(" "), vec![]),
            (json!("[\"a\", 2]"), vec!["a"]),
        ];
        for (options, want) in cases {
            let args = json!({"question": "Q", "options": options});
            let out = AskClarificationTool
                .call(&ToolCall::new("c", "ask_clarification", args), &c)
                .await;
            let Some(Control::Clarify { options: got, .. }) = out.control else {
                panic!("no clarification for {options}");
            };
            assert_eq!(got, want, "{options}");
        }
    }

    #[tokio::test]
    async fn present_files_refuses_bad_lists_naming_the_argument() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let c = ctx(dir.path());
        let tool = PresentFilesTool {
            artifacts: Arc::default(),
        };
        let cases = [
            (
                json!({}),
                E,
                "Error: missing required array argument 'filepaths'",
            ),
            (
                json!({"filepaths": "a.txt"}),
                E,
                "Error: missing required array argument 'filepaths'",
            ),
            (
                json!({"filepaths": ["a.txt", 1]}),
                E,
                "Error: 'filepaths' must be a list of strings",
            ),
            (
                json!({"filepaths": ["a.txt"]}),
                O,
                "Presented 1 file(s): a.txt",
            ),
        ];
        for (args, status, want) in cases {
            let out = tool.call(&ToolCall::new("c", "", args.clone()), &c).await;
            assert_eq!(
                (out.status, out.into_text()),
                (status, want.to_string()),
                "{args}"
            );
        }
        assert_eq!(*tool.artifacts.lock().unwrap(), ["a.txt"]);
    }
}
