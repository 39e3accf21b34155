//! How a command that stops before it runs tells the user: one line on stderr and the exit
//! code of what went wrong (contract §1, §4). Commands return `anyhow::Result`, adding
//! context as they go (which flag, which config key); the kind of the root cause picks the
//! code: a [`UsageError`] is 2, a [`ConfigError`] 78, anything else 1.

use crate::config::ConfigError;
use crate::logging::stderr_line;
use crate::outcome::{EXIT_CONFIG, EXIT_USAGE};
use crate::text::escape_controls;

/// A mistake in the command line (flags, prompt, paths given on it).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

/// Prints `e` as one line and returns its exit code.
pub fn report(e: &anyhow::Error) -> i32 {
    let line = one_line(e);
    if e.downcast_ref::<UsageError>().is_some() {
        usage_line(&line)
    } else if e.downcast_ref::<ConfigError>().is_some() {
        config_line(&line)
    } else {
        stderr_line(&format!("deerflow: error: {}", escape_controls(&line)));
        1
    }
}

/// The context chain, outermost first, joined with `: ` (a config error's own prefix left
/// out: the line says "config error" once).
fn one_line(e: &anyhow::Error) -> String {
    e.chain()
        .map(|c| {
            let text = c.to_string();
            text.strip_prefix("config error: ")
                .unwrap_or(&text)
                .replace('\n', " ")
        })
        .collect::<Vec<_>>()
        .join(": ")
}

/// One line on stderr, exit 2.
pub fn usage_line(msg: &str) -> i32 {
    stderr_line(&format!(
        "deerflow: usage error: {} (see deerflow --help)",
        escape_controls(msg)
    ));
    EXIT_USAGE
}

/// One line on stderr, exit 78.
pub fn config_line(msg: &str) -> i32 {
    stderr_line(&format!(
        "deerflow: config error: {}",
        escape_controls(&msg.replace('\n', " "))
    ));
    EXIT_CONFIG
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn the_root_cause_picks_the_code_and_context_leads_the_line() {
        let e = Err::<(), _>(ConfigError::Model("unknown model 'x'".into()))
            .context("subagents.agents.bash.model")
            .unwrap_err();
        assert_eq!(
            one_line(&e),
            "subagents.agents.bash.model: unknown model 'x'"
        );
        assert!(e.downcast_ref::<ConfigError>().is_some());
        let u = Err::<(), _>(UsageError("the prompt is empty".into()))
            .context("--prompt-file p")
            .unwrap_err();
        assert!(u.downcast_ref::<UsageError>().is_some());
        assert_eq!(one_line(&u), "--prompt-file p: the prompt is empty");
        let other = anyhow::anyhow!("disk on fire").context("writing the man page");
        assert!(other.downcast_ref::<UsageError>().is_none());
        assert_eq!(one_line(&other), "writing the man page: disk on fire");
    }
}
