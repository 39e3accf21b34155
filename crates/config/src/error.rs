//! `ConfigError`: every configuration problem, one line each, exit code 78.

use std::path::PathBuf;

/// A configuration error. Display is one line; secrets never appear in it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A config file that was named (or found) but cannot be read.
    #[error("config error: cannot read {} ({origin}): {reason}; {}", path.display(), unreadable_fix(origin))]
    Unreadable {
        path: PathBuf,
        origin: String,
        reason: String,
    },
    /// The file is not valid YAML.
    #[error("config error: {}: invalid YAML: {message}", path.display())]
    Syntax { path: PathBuf, message: String },
    /// Keys with wrong types or values; each problem names its key path (and line).
    #[error("config error: {}", summarize(problems))]
    Invalid { problems: Vec<String> },
    /// A model that cannot be resolved (unknown name, unsupported class, missing cassette…).
    #[error("config error: {0}")]
    Model(String),
    /// A secret the chosen model needs is missing (unset `$VAR`, no API key). `config check`
    /// reports these as warnings, since they only matter when the model is used.
    #[error("config error: {0}")]
    MissingSecret(String),
    /// The configured sandbox cannot be had on this machine (e.g. `bwrap` missing).
    #[error("config error: {0}")]
    Sandbox(String),
}

impl ConfigError {
    /// Every problem as its own line (without the `config error: ` prefix).
    pub fn problems(&self) -> Vec<String> {
        match self {
            ConfigError::Invalid { problems } => problems.clone(),
            other => {
                let text = other.to_string();
                vec![text
                    .strip_prefix("config error: ")
                    .unwrap_or(&text)
                    .to_string()]
            }
        }
    }

    /// Always 78 (EX_CONFIG); here so callers need not hard-code it.
    pub fn exit_code(&self) -> i32 {
        78
    }
}

/// What to do about a config file that cannot be read, by where its path came from.
fn unreadable_fix(origin: &str) -> &'static str {
    match origin {
        "--config" => "check the path given to --config",
        "$DEERFLOW_CONFIG" => "check the path in DEERFLOW_CONFIG, or unset it",
        _ => "make the file readable, or remove it to use the next one in the lookup order",
    }
}

fn summarize(problems: &[String]) -> String {
    match problems {
        [] => "invalid configuration".to_string(),
        [one] => one.clone(),
        [first, rest @ ..] => format!(
            "{first} (and {} more; run `deerflow config check` to list them)",
            rest.len()
        ),
    }
}
