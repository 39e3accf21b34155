//! The command line (contract §1), as clap derive definitions.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "deerflow",
    version,
    about = "Run an LLM agent with sub-agents to completion, for scripts and CI",
    long_about = "deerflow builds an LLM agent from flags and a config file, runs it to completion in a \
                  workspace, and reports what happened: NDJSON events on stdout with --json, and an exit \
                  code that tells how the run and every sub-agent ended.",
    after_help = "Exit codes: 0 ok, 1 failed, 2 usage, 3 a sub-agent failed, 4 a sub-agent timed out, \
                  5 a sub-agent was cancelled, 6 needs clarification, 7 max turns, 8 token budget, \
                  78 config, 124 --timeout, 130 SIGINT, 141 stdout closed, 143 SIGTERM."
)]
pub struct Cli {
    /// Config file (else $DEERFLOW_CONFIG, ./deerflow.yaml, $XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)
    #[arg(short = 'c', long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one task to completion (the main job)
    Run(Box<RunArgs>),
    /// List the sub-agent types the config yields, with effective settings
    Agents {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        overrides: ConfigOverrides,
    },
    /// Validate the config, or print the merged config (secrets redacted)
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Print the JSON Schema of the event stream
    Schema,
    /// Print a shell completion script
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff)
    Man,
    /// MCP tool servers: start each configured server, list its tools, stop it
    Mcp {
        #[command(subcommand)]
        action: McpAction,
    },
}

#[derive(Debug, Subcommand)]
pub enum McpAction {
    /// Start every enabled MCP server, list its tools (or why it failed), stop them;
    /// exit 0 when all started, 1 otherwise
    List {
        /// Print JSON (with each tool's input schema) instead of text
        #[arg(long)]
        json: bool,
        /// MCP servers from a JSON file with an `mcpServers` object; repeatable
        #[arg(long = "mcp-config", value_name = "FILE")]
        mcp_config: Vec<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Validate the config: exit 0, or 78 listing every problem
    Check {
        /// Print the report as JSON
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        overrides: ConfigOverrides,
    },
    /// Print the merged config with secrets redacted
    Show {
        /// Print JSON instead of YAML
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        overrides: ConfigOverrides,
    },
}

/// The config sources `run` layers over the file, for the commands that look at a config:
/// a CI job checks exactly what it will run.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigOverrides {
    /// Override a config key by dotted path, as `run --set` does; repeatable
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = crate::config::parse_set)]
    pub set: Vec<crate::config::SetOverride>,
    /// MCP servers from a JSON file with an `mcpServers` object, as `run --mcp-config`
    /// reads them; repeatable
    #[arg(long = "mcp-config", value_name = "FILE")]
    pub mcp_config: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// `--thinking on|off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The task; `-` reads stdin to its end
    #[arg(value_name = "PROMPT", conflicts_with_all = ["prompt", "prompt_file"])]
    pub prompt_arg: Option<String>,

    /// The task (instead of the positional PROMPT)
    #[arg(
        short = 'p',
        long = "prompt",
        value_name = "TEXT",
        conflicts_with = "prompt_file"
    )]
    pub prompt: Option<String>,

    /// Read the task from a file
    #[arg(long, value_name = "PATH")]
    pub prompt_file: Option<PathBuf>,

    /// A models[].name from the config, or PROVIDER:MODEL (openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, replay:PATH)
    #[arg(short = 'm', long, value_name = "NAME")]
    pub model: Option<String>,

    /// Sub-agents running at once (1..=64) [default: 3]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_concurrent: Option<u32>,

    /// Sub-agents started in one run (1..=100000) [default: 16]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub max_tasks: Option<u32>,

    /// Model calls of the lead agent
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: u32,

    /// Deadline for the whole run (90s, 30m, 1h)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<f64>,

    /// Overrides every sub-agent's timeout (90s, 30m, 1h)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub subagent_timeout: Option<f64>,

    /// Token budget for the whole run (lead + sub-agents)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tokens: Option<u64>,

    /// NDJSON events on stdout; nothing else goes to stdout
    #[arg(long)]
    pub json: bool,

    /// The directory tools work in [default: current dir]
    #[arg(short = 'C', long = "workspace", value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Allow the bash tool and the bash sub-agent on the host
    #[arg(long)]
    pub allow_bash: bool,

    /// The lead agent gets no task tool
    #[arg(long)]
    pub no_subagents: bool,

    /// Offer web_fetch and web_search (the config's tools: entries still apply and win)
    #[arg(long)]
    pub web: bool,

    /// Skills directory [default: skills.path]
    #[arg(long, value_name = "DIR")]
    pub skills: Option<PathBuf>,

    /// Write the final answer to FILE (only when the run completed)
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output_last_message: Option<PathBuf>,

    /// A JSON Schema (draft 2020-12) the final answer must satisfy; an answer that does not
    /// is sent back to the model up to 2 times
    #[arg(long, value_name = "FILE")]
    pub output_schema: Option<PathBuf>,

    /// Write every model response of this run to a replay cassette
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,

    /// Override a config key by dotted path (subagents.timeout_seconds=60, models[0].model=x);
    /// an empty VALUE or null restores the default; repeatable
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = crate::config::parse_set)]
    pub set: Vec<crate::config::SetOverride>,

    /// No progress display on stderr
    #[arg(short, long)]
    pub quiet: bool,

    /// MCP servers from a JSON file with an `mcpServers` object (Claude Code's .mcp.json);
    /// repeatable, later files win per server name
    #[arg(long = "mcp-config", value_name = "FILE")]
    pub mcp_config: Vec<PathBuf>,

    /// Colour on stderr (NO_COLOR is honoured)
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,

    /// Extended thinking / reasoning for models with supports_thinking [default: the
    /// model's default, on]
    #[arg(long, value_enum, value_name = "on|off")]
    pub thinking: Option<OnOff>,

    /// Attach an image (PNG, JPEG, GIF or WebP) to the task; the model needs
    /// supports_vision: true; repeatable
    #[arg(long = "image", value_name = "FILE")]
    pub image: Vec<PathBuf>,

    /// Run the prompt once per item of FILE (JSONL, or one item per line; - = stdin), as a
    /// template: {{item}}, {{index}}, {{FIELD}}, {{a.b}}
    #[arg(long, value_name = "FILE")]
    pub each: Option<PathBuf>,

    /// With --each: the sub-agent type each item runs as [default: general-purpose]
    #[arg(long, value_name = "TYPE")]
    pub agent: Option<String>,

    /// With --each: one JSON line per item as it finishes, rewritten in input order at the end
    #[arg(long, value_name = "FILE")]
    pub results: Option<PathBuf>,

    /// With --each: run only the items whose 0-based index mod N is K-1
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,

    /// Keep a ledger in DIR so that the same command, run again, resumes instead of
    /// redoing finished work
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
}

/// `90s`, `30m`, `1h`, `1h30m`, or plain seconds; positive and at most a year.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let secs = match t.parse::<f64>() {
        Ok(secs) => secs,
        Err(_) => humantime::parse_duration(t)
            .map_err(|e| format!("'{s}' is not a duration like 90s, 30m or 1h ({e})"))?
            .as_secs_f64(),
    };
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(format!("'{s}' must be a positive duration"));
    }
    if secs > crate::text::MAX_SECONDS {
        return Err(format!("'{s}' is longer than a year (31536000 s)"));
    }
    Ok(secs)
}

impl ConfigOverrides {
    /// How the config is loaded: as `run` loads it, without `--model` (these commands
    /// look at every model).
    pub fn load_options(&self, explicit: Option<PathBuf>) -> crate::config::LoadOptions {
        crate::config::LoadOptions {
            explicit,
            sets: self.set.clone(),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            providers: crate::model::registry::providers(),
            mcp_configs: self.mcp_config.clone(),
            model: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(90.0));
        assert_eq!(parse_duration("30m"), Ok(1800.0));
        assert_eq!(parse_duration("1h"), Ok(3600.0));
        assert_eq!(parse_duration("2.5"), Ok(2.5));
        assert!(parse_duration("0s").is_err());
        assert_eq!(parse_duration("365d"), Ok(31_536_000.0));
        for long in ["1e30", "366d", "18446744073709551615s", "31536001"] {
            assert!(
                parse_duration(long)
                    .unwrap_err()
                    .contains("longer than a year"),
                "{long}"
            );
        }
        assert!(parse_duration("NaN").is_err());
        assert!(parse_duration("soon").is_err());
    }
}
