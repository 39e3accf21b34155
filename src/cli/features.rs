//! The parts a build may leave out (the cargo features of Cargo.toml: `docker`, `mcp`,
//! `output-schema`), and how a command that needs a missing one says so: one line that names
//! the feature, as the kind of error the input that asked for it is — a config key or an MCP
//! server a configuration error (78), a flag a usage error (2).

use std::path::Path;
#[cfg(not(feature = "mcp"))]
use std::path::PathBuf;

use crate::config::{Config, ConfigError};
use crate::model::output_schema::OutputSchema;

/// A cargo feature of the root crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Feature {
    // Docker and OutputSchema are named only by the code that refuses them, which a build
    // with them does not compile.
    #[cfg_attr(feature = "docker", allow(dead_code))]
    Docker,
    Mcp,
    #[cfg_attr(feature = "output-schema", allow(dead_code))]
    OutputSchema,
}

impl Feature {
    /// Its name in Cargo.toml, as `cargo build --features` takes it.
    fn cargo_name(self) -> &'static str {
        match self {
            Feature::Docker => "docker",
            Feature::Mcp => "mcp",
            Feature::OutputSchema => "output-schema",
        }
    }

    /// What a user goes without.
    fn what(self) -> &'static str {
        match self {
            Feature::Docker => "the docker sandbox",
            Feature::Mcp => "MCP support",
            Feature::OutputSchema => "output schemas",
        }
    }

    /// "this deerflow was built without MCP support (cargo feature `mcp`)".
    pub(super) fn missing(self) -> String {
        format!(
            "this deerflow was built without {} (cargo feature `{}`)",
            self.what(),
            self.cargo_name()
        )
    }
}

/// An enabled MCP server in a build without MCP: a configuration error naming where the
/// first one is configured (contract §9's servers cannot be started). Disabled ones are fine.
pub(super) fn check_mcp(cfg: &Config) -> Result<(), ConfigError> {
    if cfg!(feature = "mcp") {
        return Ok(());
    }
    let mut enabled = cfg.mcp_servers.iter().filter(|(_, e)| e.enabled);
    let Some((name, entry)) = enabled.next() else {
        return Ok(());
    };
    let at = entry.key_path(name);
    let others = match enabled.count() {
        0 => String::new(),
        n => format!(" (and {n} more enabled)"),
    };
    Err(ConfigError::Invalid {
        problems: vec![format!(
            "{at}{others}: {}; disable the server (enabled: false) or use a build with it",
            Feature::Mcp.missing()
        )],
    })
}

/// `deerflow mcp list` in a build without MCP: exit 78, as a configured server would be.
#[cfg(not(feature = "mcp"))]
pub(super) async fn mcp_list(_: Option<PathBuf>, _: Vec<PathBuf>, _: bool) -> i32 {
    super::config_error(&ConfigError::Invalid {
        problems: vec![format!("deerflow mcp list: {}", Feature::Mcp.missing())],
    })
}

/// The `--output-schema` file compiled, or why it cannot be (a usage error, as a schema
/// that does not compile is: contract §11).
pub(super) fn output_schema(path: &Path) -> Result<OutputSchema, String> {
    #[cfg(feature = "output-schema")]
    return OutputSchema::load(path);
    #[cfg(not(feature = "output-schema"))]
    {
        let _ = path;
        Err(format!(
            "cannot be checked: {}",
            Feature::OutputSchema.missing()
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use clap::Parser;

    use super::super::args::Cli;

    /// The exit code `deerflow ARGS…` ends with.
    async fn exit_code(args: &[&str]) -> i32 {
        let cli = Cli::try_parse_from([&["deerflow"], args].concat()).unwrap();
        super::super::dispatch(cli, "0123456789abcdef".into()).await
    }

    /// What `deerflow run ARGS…` stops with before the run: its line (the error chain) and
    /// exit code.
    #[cfg(any(not(feature = "mcp"), not(feature = "output-schema")))]
    fn run_refused(args: &[&str], config: &Path) -> (String, i32) {
        let cli = Cli::try_parse_from([&["deerflow", "run", "-p", "hi"], args].concat()).unwrap();
        let super::super::args::Command::Run(run) = cli.command else {
            panic!("parsed as run");
        };
        let Err(e) = super::super::run::prepare(*run, Some(config.to_path_buf())) else {
            panic!("the run was prepared");
        };
        (format!("{e:#}"), super::super::error::report(&e))
    }

    fn config_file(dir: &Path, yaml: &str) -> PathBuf {
        let path = dir.join("config.yaml");
        std::fs::write(&path, yaml).unwrap();
        path
    }

    #[cfg(not(feature = "mcp"))]
    #[test]
    fn an_enabled_mcp_server_is_a_configuration_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_file(
            dir.path(),
            "mcp_servers:\n  time: {command: mcp-server-time}\n  off: {command: x, enabled: false}\n",
        );
        let (line, code) = run_refused(&[], &config);
        assert_eq!(code, 78, "{line}");
        assert!(
            line.contains(
                "mcp_servers.time: this deerflow was built without MCP support (cargo feature `mcp`)"
            ),
            "{line}"
        );
        assert!(!line.contains("off") && !line.contains('\n'), "{line}");
    }

    #[cfg(not(feature = "mcp"))]
    #[test]
    fn a_server_from_an_mcp_file_is_named_by_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_file(dir.path(), "{}\n");
        let file = dir.path().join("servers.json");
        std::fs::write(
            &file,
            r#"{"mcpServers": {"a": {"command": "x"}, "b": {"url": "http://127.0.0.1:9/mcp"}}}"#,
        )
        .unwrap();
        let (line, code) = run_refused(&["--mcp-config", file.to_str().unwrap()], &config);
        assert_eq!(code, 78, "{line}");
        let at = format!("{}: mcpServers.a (and 1 more enabled): ", file.display());
        assert!(line.contains(&at), "{line}");
        assert!(line.contains("built without MCP support"), "{line}");
    }

    #[cfg(not(feature = "mcp"))]
    #[tokio::test]
    async fn config_check_and_mcp_list_say_mcp_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_file(
            dir.path(),
            "mcp_servers:\n  t: {command: x, enabled: false}\n",
        );
        let config = config.to_str().unwrap();
        // Disabled servers need nothing: the same file checks clean until one is enabled.
        assert_eq!(exit_code(&["-c", config, "config", "check"]).await, 0);
        let on = "mcp_servers.t.enabled=true";
        assert_eq!(
            exit_code(&["-c", config, "config", "check", "--set", on]).await,
            78
        );
        assert_eq!(exit_code(&["-c", config, "mcp", "list"]).await, 78);
        assert_eq!(exit_code(&["mcp", "list", "--json"]).await, 78);
    }

    #[cfg(feature = "mcp")]
    #[tokio::test]
    async fn a_build_with_mcp_takes_an_enabled_server() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_file(dir.path(), "mcp_servers:\n  t: {command: x}\n");
        let config = config.to_str().unwrap();
        assert_eq!(exit_code(&["-c", config, "config", "check"]).await, 0);
    }

    #[cfg(not(feature = "output-schema"))]
    #[test]
    fn output_schema_is_a_usage_error_naming_the_feature() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_file(dir.path(), "{}\n");
        let schema = dir.path().join("s.json");
        std::fs::write(&schema, r#"{"type": "object"}"#).unwrap();
        let (line, code) = run_refused(&["--output-schema", schema.to_str().unwrap()], &config);
        assert_eq!(code, 2, "{line}");
        assert_eq!(
            line,
            format!(
                "--output-schema {} cannot be checked: this deerflow was built without output \
                 schemas (cargo feature `output-schema`)",
                schema.display()
            )
        );
    }
}
