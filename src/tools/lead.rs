//! Tools only the lead agent has: `present_files` and `ask_clarification`.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::{arg_opt_str, arg_str, Control, Tool, ToolContext, ToolOutput};
use crate::model::{BoxFuture, ToolSpec};
use crate::workspace::Access;

/// Marks files as the run's outputs (`run_completed.artifacts`).
pub struct PresentFilesTool {
    pub artifacts: Arc<Mutex<Vec<String>>>,
}

impl Tool for PresentFilesTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "present_files".into(),
            description:
                "Mark files you produced as the outputs of this run. They are listed to the \
                          user when the run ends. Each file must exist in the workspace."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "filepaths": {"type": "array", "items": {"type": "string"},
                                  "description": "Paths of the files, relative to the workspace."}
                },
                "required": ["filepaths"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move { self.present(&args, ctx) })
    }
}

impl PresentFilesTool {
    fn present(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let Some(list) = args.get("filepaths").and_then(Value::as_array) else {
            return ToolOutput::error("Error: missing required array argument 'filepaths'");
        };
        let mut shown = Vec::new();
        for p in list {
            let Some(p) = p.as_str() else {
                return ToolOutput::error("Error: 'filepaths' must be a list of strings");
            };
            let abs = match ctx.workspace.resolve(p, Access::Read) {
                Ok(a) => a,
                // Exactly the workspace's refusal (contract §6), like every other tool.
                Err(e) => return ToolOutput::error(e),
            };
            if abs.is_dir() {
                return ToolOutput::error(format!(
                    "Error: {p} is a directory; present the files in it"
                ));
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

impl Tool for AskClarificationTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ask_clarification".into(),
            description:
                "Ask the user a question when the task cannot be done without the answer. \
                          This ends the run: the question is reported and the run stops."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string", "description": "The question to ask."},
                    "options": {"type": "array", "items": {"type": "string"},
                                "description": "Possible answers to choose from, if any."},
                    "context": {"type": "string", "description": "Why the answer is needed."}
                },
                "required": ["question"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let question = match arg_str(&args, "question") {
                Ok(q) => q.to_string(),
                Err(e) => return e,
            };
            let options: Vec<String> = args
                .get("options")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            let mut text = format!("Clarification requested: {question}");
            if let Some(c) = arg_opt_str(&args, "context") {
                text.push_str(&format!("\nContext: {c}"));
            }
            ToolOutput {
                status: super::ToolStatus::Ok,
                text,
                control: Some(Control::Clarify { question, options }),
            }
        })
    }
}
