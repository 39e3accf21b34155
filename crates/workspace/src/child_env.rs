//! The environment deerflow hands the processes it starts (bash, MCP servers): its own,
//! minus every credential (contract §6), so a model that runs `env` never sees one.

use std::ffi::OsString;

/// Name parts that mark a variable as a secret, compared case-insensitively.
const SECRET_MARKS: [&str; 5] = ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"];

/// A scrubbed environment, computed once per run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildEnv {
    vars: Vec<(OsString, OsString)>,
}

impl ChildEnv {
    /// `from` minus the variables named in `sources` (where a configured key was read from,
    /// whatever their names) and every variable whose name looks secret, unless
    /// `passthrough` lists it.
    pub fn scrubbed(
        from: impl IntoIterator<Item = (OsString, OsString)>,
        sources: &[String],
        passthrough: &[String],
    ) -> Self {
        let vars = from
            .into_iter()
            .filter(|(name, _)| {
                let name = name.to_string_lossy();
                let allowed = passthrough.iter().any(|p| *p == name);
                allowed || !(sources.iter().any(|s| *s == name) || looks_secret(&name))
            })
            .collect();
        Self { vars }
    }

    /// This process's environment, scrubbed.
    pub fn from_process(sources: &[String], passthrough: &[String]) -> Self {
        Self::scrubbed(std::env::vars_os(), sources, passthrough)
    }

    pub fn vars(&self) -> &[(OsString, OsString)] {
        &self.vars
    }

    /// Gives `cmd` exactly this environment.
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        cmd.env_clear();
        cmd.envs(self.vars.iter().map(|(k, v)| (k, v)));
    }
}

fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_MARKS.iter().any(|m| upper.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    fn names(e: &ChildEnv) -> Vec<String> {
        e.vars()
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn secrets_go_and_the_rest_stays() {
        let from = env(&[
            ("PATH", "/bin"),
            ("OPENAI_API_KEY", "sk"),
            ("github_token", "t"),
            ("DB_Password", "p"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/c"),
            ("MY_LLM", "from a config's api_key: $MY_LLM"),
            ("KEYBOARD_LAYOUT", "a name that only looks secret"),
            ("HOME", "/root"),
        ]);
        let e = ChildEnv::scrubbed(
            from,
            &["MY_LLM".to_string()],
            &["KEYBOARD_LAYOUT".to_string()],
        );
        assert_eq!(names(&e), ["PATH", "KEYBOARD_LAYOUT", "HOME"]);
    }
}
