//! The check an agent with an output schema (the lead under `--output-schema`, contract
//! §11) puts its final answer through before the answer ends the loop.

use super::{Agent, AgentEnd};
use deerflow_events::{Event, WarningCode};
use deerflow_model::output_schema::{retry_message, Violation};

/// How many times an answer that does not validate is sent back before the agent fails.
pub const MAX_SCHEMA_RETRIES: u32 = 2;

/// How the failure of an answer that never validated starts; the first violation follows.
const SCHEMA_FAILED: &str = "the final answer does not match the output schema after 2 retries: ";

/// The first violation, when `error` is the failure of an answer that never validated (an
/// `--each` item reports it alone, §15).
pub fn schema_violation(error: &str) -> Option<&str> {
    error.strip_prefix(SCHEMA_FAILED)
}

/// What becomes of an ending.
pub enum Checked {
    End(AgentEnd),
    /// Send this to the model and let it answer again.
    Retry(String),
}

/// Passes every ending but a final answer through; a final answer must validate. A valid
/// one ends the agent with the JSON text (its code fence stripped). An invalid one goes
/// back to the model — unless the retries are spent (the agent fails, naming the first
/// violation) or `limit` says no model call may follow (the agent ends that way).
pub fn check(agent: &Agent, end: AgentEnd, retries: u32, limit: Option<AgentEnd>) -> Checked {
    let Some(schema) = &agent.output_schema else {
        return Checked::End(end);
    };
    let AgentEnd::Final { text, stop_reason } = end else {
        return Checked::End(end);
    };
    let violations = match schema.check(text.as_deref()) {
        Ok(json) => {
            return Checked::End(AgentEnd::Final {
                text: Some(json),
                stop_reason,
            })
        }
        Err(v) => v,
    };
    let first = first(&violations);
    if retries >= MAX_SCHEMA_RETRIES {
        return Checked::End(AgentEnd::Failed(format!("{SCHEMA_FAILED}{first}")));
    }
    if let Some(end) = limit {
        return Checked::End(end);
    }
    agent.events.emit(Event::warning(
        WarningCode::SchemaRetry,
        format!(
            "the final answer does not match the output schema, retry {} of \
             {MAX_SCHEMA_RETRIES}: {first}",
            retries + 1
        ),
    ));
    Checked::Retry(retry_message(&violations))
}

fn first(violations: &[Violation]) -> String {
    violations
        .first()
        .map(|v| v.to_string())
        .unwrap_or_else(|| "the answer does not validate".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failure_text_names_the_retries_and_gives_back_the_violation() {
        assert!(SCHEMA_FAILED.contains(&format!("after {MAX_SCHEMA_RETRIES} retries")));
        let e = format!("{SCHEMA_FAILED}/n: 3 is not of type \"string\"");
        assert_eq!(
            schema_violation(&e),
            Some("/n: 3 is not of type \"string\"")
        );
        assert_eq!(schema_violation("provider error"), None);
    }
}
