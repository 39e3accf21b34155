//! Command dispatch. Errors before a run (usage 2, configuration 78) are one line on
//! stderr and no events.

mod agents;
pub mod args;
mod config_cmd;
mod docker;
mod docs;
mod each_args;
pub mod error;
mod features;
#[cfg(feature = "mcp")]
mod mcp_cmd;
mod run;
mod state_args;
mod web;

use clap::error::ErrorKind;
use clap::Parser;

pub use args::Cli;
use args::Command;
#[cfg(not(feature = "mcp"))]
use features::mcp_list;
#[cfg(feature = "mcp")]
use mcp_cmd::list as mcp_list;

/// `deerflow --version` (or `-V`) and nothing else: clap's line, printed without building
/// clap's command tree, the async runtime or the log subscriber. Those touch about 2 MiB
/// more of the binary's pages than printing one line does (issue 21: ≤ 5 MiB RSS); every
/// other command line, `--version` among other arguments included, goes through clap.
pub fn version_only() -> Option<i32> {
    version_text(std::env::args_os().skip(1)).map(|text| docs::print(&text))
}

/// What clap prints for `--version` when `args` (the arguments after the program name) are
/// that flag alone.
fn version_text(mut args: impl Iterator<Item = std::ffi::OsString>) -> Option<String> {
    let flag = args.next()?;
    let alone = args.next().is_none();
    (alone && (flag == "--version" || flag == "-V"))
        .then(|| format!("deerflow {}\n", env!("CARGO_PKG_VERSION")))
}

/// Parses the command line before the runtime is built: help, usage errors and clap's other
/// answers need neither it nor the log subscriber. `Err` is the exit code of such an answer,
/// already given.
pub fn parse() -> Result<Cli, i32> {
    Cli::try_parse().map_err(clap_error)
}

/// Runs a parsed command; returns the exit code.
pub async fn main(cli: Cli) -> i32 {
    // Every log line from here on carries the trace id and the level the environment sets,
    // also those written while the run is being set up (contract §1).
    let run_id = crate::run::new_run_id();
    crate::logging::init(&run_id[..8]);
    dispatch(cli, run_id).await
}

/// Runs a parsed command under the run id the log lines carry.
async fn dispatch(cli: Cli, run_id: String) -> i32 {
    match cli.command {
        Command::Run(args) => run::run(*args, cli.config, run_id).await,
        Command::Agents { json, overrides } => agents::agents(cli.config, overrides, json),
        Command::Config { action } => config_cmd::config(cli.config, action),
        Command::Schema => docs::print(
            &serde_json::to_string_pretty(&crate::schema::event_schema()).unwrap_or_default(),
        ),
        Command::Completions { shell } => docs::completions(shell),
        Command::Man => docs::man(),
        Command::Mcp {
            action: args::McpAction::List { json, mcp_config },
        } => mcp_list(cli.config, mcp_config, json).await,
    }
}

fn clap_error(e: clap::Error) -> i32 {
    match e.kind() {
        // Through `print`, so that a full disk or a closed pipe gets its exit code.
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => docs::print(&e.render().to_string()),
        // clap answers a missing subcommand with the whole help text; its first line would
        // be the command's description, which says nothing about the mistake.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            usage_error(&missing_subcommand(&e.render().to_string()))
        }
        _ => {
            let rendered = e.render().to_string();
            // clap's message spans lines (the missing arguments, possible values, a tip);
            // everything before the usage block is joined into the one line.
            let msg = rendered
                .lines()
                .map(str::trim)
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            let msg = msg.trim_start_matches("error: ").to_string();
            usage_error(&msg)
        }
    }
}

/// "a subcommand is required" with the usage line and the subcommands, from clap's help text.
fn missing_subcommand(help: &str) -> String {
    let usage = help
        .lines()
        .find_map(|l| l.trim().strip_prefix("Usage:"))
        .map_or("deerflow <COMMAND>", str::trim);
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // Entries are indented by two spaces; wrapped descriptions by more.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    if commands.is_empty() {
        format!("a subcommand is required: {usage}")
    } else {
        format!(
            "a subcommand is required: {usage} (one of: {})",
            commands.join(", ")
        )
    }
}

/// One line on stderr, exit 2.
pub fn usage_error(msg: &str) -> i32 {
    error::usage_line(msg)
}

/// A non-fatal note outside a run: one line on stderr.
pub fn warning(msg: &str) {
    crate::logging::stderr_line(&format!(
        "deerflow: warning: {}",
        crate::text::escape_controls(&msg.replace('\n', " "))
    ));
}

/// The notes loading produced (the one `config_ignored` line naming every ignored key, then
/// the others), for commands that have no event stream to put them in.
pub fn load_warnings(loaded: &crate::config::LoadedConfig) {
    let tools = tool_name_warnings(&loaded.config);
    for w in loaded
        .ignored_warning()
        .iter()
        .chain(&loaded.warnings)
        .chain(&tools)
    {
        warning(w);
    }
}

/// The config notes only other modules can make (config knows no tools): custom agents'
/// tool names checked against every tool deerflow has. They follow the loader's own notes.
pub fn tool_name_warnings(cfg: &crate::config::Config) -> Vec<String> {
    let registry = crate::tools::registry::ToolRegistry::builtin(true);
    // A web tool is known whether or not this config offers it (`--web` may).
    let known: Vec<&str> = registry
        .names()
        .into_iter()
        .chain(crate::tools::registry::LEAD_ONLY_TOOLS)
        // Offered by the model (supports_vision), not the registry.
        .chain([crate::tools::fs::VIEW_IMAGE])
        .chain(crate::tools::web::WEB_TOOLS)
        .collect();
    // MCP tools are known only once their servers run: a name that may be one is not
    // called unknown (`SERVER_…` for a prefixed server, any name beside an unprefixed one).
    let servers: Vec<(&String, &crate::config::McpServerEntry)> =
        cfg.mcp_servers.iter().filter(|(_, e)| e.enabled).collect();
    let maybe_mcp = |tool: &str| {
        servers.iter().any(|(name, e)| {
            !e.tool_name_prefix
                || tool
                    .strip_prefix(name.as_str())
                    .is_some_and(|rest| rest.starts_with('_'))
        })
    };
    let mut subagents = cfg.subagents.clone();
    for agent in subagents.custom_agents.values_mut() {
        if let Some(tools) = &mut agent.tools {
            tools.retain(|t| !maybe_mcp(t));
        }
    }
    crate::subagent::registry::custom_agent_tool_warnings(&subagents, &known)
}

/// One line on stderr, exit 78.
pub fn config_error(e: &crate::config::ConfigError) -> i32 {
    let msg = e.to_string();
    error::config_line(msg.trim_start_matches("config error: "))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn version_of(args: &[&str]) -> Option<String> {
        version_text(args.iter().map(std::ffi::OsString::from))
    }

    #[test]
    fn the_early_version_is_clap_s_own_line() {
        let clap_line = Cli::command().render_version().to_string();
        assert_eq!(
            version_of(&["--version"]).as_deref(),
            Some(clap_line.as_str())
        );
        assert_eq!(version_of(&["-V"]).as_deref(), Some(clap_line.as_str()));
    }

    // A plain test, no tokio runtime around it: parsing must not need one (main.rs builds
    // the runtime only for a command line that parsed).
    #[test]
    fn a_command_line_parses_without_a_runtime() {
        let cli = Cli::try_parse_from(["deerflow", "-c", "x.yaml", "run", "--json", "go"]);
        let cli = cli.map_err(|e| e.to_string()).unwrap();
        assert!(matches!(cli.command, Command::Run(_)));
        assert_eq!(cli.config.as_deref(), Some(std::path::Path::new("x.yaml")));
    }

    #[test]
    fn any_other_command_line_goes_through_clap() {
        for args in [
            &[][..],
            &["--version", "run"],
            &["-c", "x.yaml", "--version"],
            &["run", "--version"],
            &["--versio"],
            &["-v"],
            &["--help"],
        ] {
            assert_eq!(version_of(args), None, "{args:?}");
        }
    }
}
