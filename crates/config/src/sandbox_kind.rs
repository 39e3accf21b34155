//! `sandbox.use` as a type: the three sandboxes deerflow has, read from what a config may
//! say (DeerFlow's provider classes included). Config owns it so every layer above matches
//! on the enum, never on the text.

/// Where a run's commands run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SandboxKind {
    #[default]
    Local,
    Confined,
    Docker,
}

impl SandboxKind {
    /// DeerFlow's local provider is `local`, its container provider (`AioSandboxProvider`)
    /// is `docker`; `confined` is deerflow's own (bubblewrap). None for anything else.
    pub fn from_use(use_: &str) -> Option<Self> {
        match use_.trim() {
            "local" | "deerflow.sandbox.local:LocalSandboxProvider" => Some(Self::Local),
            "confined" => Some(Self::Confined),
            "docker" | "deerflow.community.aio_sandbox:AioSandboxProvider" => Some(Self::Docker),
            _ => None,
        }
    }

    /// The name `run_started.sandbox.use` and `config show` report.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Confined => "confined",
            Self::Docker => "docker",
        }
    }
}

impl std::fmt::Display for SandboxKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for SandboxKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::SandboxKind::{self, *};

    #[test]
    fn deerflow_s_provider_classes_and_our_names() {
        let cases = [
            ("local", Some(Local)),
            ("deerflow.sandbox.local:LocalSandboxProvider", Some(Local)),
            (" confined ", Some(Confined)),
            ("docker", Some(Docker)),
            (
                "deerflow.community.aio_sandbox:AioSandboxProvider",
                Some(Docker),
            ),
            ("deerflow.community.boxlite:BoxliteProvider", None),
        ];
        for (text, kind) in cases {
            assert_eq!(SandboxKind::from_use(text), kind, "{text}");
        }
        assert_eq!(Docker.to_string(), "docker");
    }
}
