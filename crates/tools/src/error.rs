//! A tool's failure as a value: tools name what went wrong, and the `Error: …` text the model
//! reads is rendered here, once.

use std::fmt;

use super::ToolOutput;

#[derive(Debug, Clone, PartialEq)]
pub enum ToolError {
    /// `Error: invalid {what}: {error}` (a regex, a glob).
    Invalid { what: &'static str, error: String },
    /// `Error: {what} not found: {path}`.
    NotFound { what: &'static str, path: String },
    /// `Error: cannot {verb} {path}: {error}`.
    Cannot {
        verb: &'static str,
        path: String,
        error: String,
    },
    /// `Error: {path} is a directory{hint}`.
    IsDirectory { path: String, hint: &'static str },
    /// `Error: {path} is not a regular file`.
    NotRegular { path: String },
    /// `Error: {path} is a binary file; read_file only reads text files`.
    Binary { path: String },
    /// `Error: {what} failed: {error}` (work that could not finish).
    Failed { what: &'static str, error: String },
    /// `Error: the arguments must be a JSON object, not {0}` (a tool whose schema is not ours).
    NotAnObject(String),
    /// `Error: cancelled`: the calling agent stopped while the tool ran.
    Cancelled,
    /// `Error: MCP server '{server}' could not run '{tool}': {why}`.
    Remote {
        server: String,
        tool: String,
        why: String,
    },
    /// `Error: MCP tool '{tool}' of server '{server}' timed out after {secs} seconds
    /// (tool_call_timeout)`.
    RemoteTimedOut {
        server: String,
        tool: String,
        secs: f64,
    },
    /// `Error: {0}`: a refusal in the tool's own words.
    Message(String),
    /// A refusal worded elsewhere (the workspace's path checks, a bad argument), passed on as
    /// it is.
    Refused(String),
}

impl ToolError {
    pub fn invalid(what: &'static str, error: impl fmt::Display) -> Self {
        ToolError::Invalid {
            what,
            error: error.to_string(),
        }
    }

    pub fn cannot(verb: &'static str, path: &str, error: impl fmt::Display) -> Self {
        ToolError::Cannot {
            verb,
            path: path.to_string(),
            error: error.to_string(),
        }
    }

    pub fn failed(what: &'static str, error: impl fmt::Display) -> Self {
        ToolError::Failed {
            what,
            error: error.to_string(),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let ToolError::Refused(text) = self {
            return f.write_str(text);
        }
        f.write_str("Error: ")?;
        match self {
            ToolError::Invalid { what, error } => write!(f, "invalid {what}: {error}"),
            ToolError::NotFound { what, path } => write!(f, "{what} not found: {path}"),
            ToolError::Cannot { verb, path, error } => write!(f, "cannot {verb} {path}: {error}"),
            ToolError::IsDirectory { path, hint } => write!(f, "{path} is a directory{hint}"),
            ToolError::NotRegular { path } => write!(f, "{path} is not a regular file"),
            ToolError::Binary { path } => {
                write!(
                    f,
                    "{path} is a binary file; read_file only reads text files"
                )
            }
            ToolError::Failed { what, error } => write!(f, "{what} failed: {error}"),
            ToolError::NotAnObject(got) => {
                write!(f, "the arguments must be a JSON object, not {got}")
            }
            ToolError::Cancelled => f.write_str("cancelled"),
            ToolError::Remote { server, tool, why } => {
                write!(f, "MCP server '{server}' could not run '{tool}': {why}")
            }
            ToolError::RemoteTimedOut { server, tool, secs } => write!(
                f,
                "MCP tool '{tool}' of server '{server}' timed out after {} seconds (tool_call_timeout)",
                deerflow_base::text::secs(*secs)
            ),
            ToolError::Message(m) => f.write_str(m),
            ToolError::Refused(_) => Ok(()),
        }
    }
}

impl From<ToolError> for ToolOutput {
    fn from(e: ToolError) -> Self {
        ToolOutput::error(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolStatus;

    #[test]
    fn each_error_renders_the_text_the_model_has_always_read() {
        let p = || "a.txt".to_string();
        let cases = [
            (ToolError::invalid("regex", "x"), "Error: invalid regex: x"),
            (
                ToolError::NotFound {
                    what: "file",
                    path: p(),
                },
                "Error: file not found: a.txt",
            ),
            (
                ToolError::cannot("write", "a.txt", "denied"),
                "Error: cannot write a.txt: denied",
            ),
            (
                ToolError::IsDirectory {
                    path: p(),
                    hint: " (use ls to list it)",
                },
                "Error: a.txt is a directory (use ls to list it)",
            ),
            (
                ToolError::NotRegular { path: p() },
                "Error: a.txt is not a regular file",
            ),
            (
                ToolError::Binary { path: p() },
                "Error: a.txt is a binary file; read_file only reads text files",
            ),
            (
                ToolError::failed("search", "panicked"),
                "Error: search failed: panicked",
            ),
            (
                ToolError::NotAnObject("[1]".into()),
                "Error: the arguments must be a JSON object, not [1]",
            ),
            (ToolError::Cancelled, "Error: cancelled"),
            (
                ToolError::Remote {
                    server: "gh".into(),
                    tool: "search".into(),
                    why: "closed".into(),
                },
                "Error: MCP server 'gh' could not run 'search': closed",
            ),
            (
                ToolError::RemoteTimedOut {
                    server: "gh".into(),
                    tool: "search".into(),
                    secs: 1.5,
                },
                "Error: MCP tool 'search' of server 'gh' timed out after 1.5 seconds (tool_call_timeout)",
            ),
            (ToolError::Message("no".into()), "Error: no"),
            (ToolError::Refused("Access denied".into()), "Access denied"),
        ];
        for (e, text) in cases {
            let out = ToolOutput::from(e);
            assert_eq!((out.status, out.text().as_ref()), (ToolStatus::Error, text));
        }
    }
}
