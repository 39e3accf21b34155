//! The typed configuration (contract §2). Defaults live here, next to the fields.
//!
//! These structs are the one list of the keys deerflow reads: a key (or alias) that no field
//! takes is reported as ignored and removed before decoding (`ignored.rs`), so adding a
//! field is all it takes for deerflow to read a key. Keys of sections to come (DeerFlow's
//! `summarization`, `mcp_servers`, …) get their field with the behaviour that reads them.
//!
//! The tree they are deserialized from has had its `null`s removed too, so
//! `#[serde(default)]` covers both "absent" and "null".

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The whole configuration deerflow uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// The first entry is the default model.
    pub models: Vec<ModelEntry>,
    pub subagents: SubagentsConfig,
    pub sandbox: SandboxConfig,
    pub skills: SkillsConfig,
    pub loop_detection: LoopDetectionConfig,
    pub token_budget: TokenBudgetConfig,
    /// MCP servers by name (contract §9), merged with the servers of the extensions file
    /// and `--mcp-config` files after loading.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, super::mcp::McpServerEntry>,
}

/// Which client serves a model entry, derived from its `use:`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ProviderKind {
    #[default]
    OpenAi,
    Anthropic,
    Replay,
    /// A DeerFlow class deerflow cannot serve (Gemini's native API); holds the class path.
    Unsupported(String),
}

impl ProviderKind {
    /// The provider name used in events and reports.
    pub fn as_str(&self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Replay => "replay",
            ProviderKind::Unsupported(_) => "unsupported",
        }
    }
}

impl Serialize for ProviderKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One `models:` entry. String fields that may hold a `$VAR` stay raw: they are expanded
/// only when the model is resolved, so an unset variable hurts only the model that needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelEntry {
    pub name: String,
    /// The raw `use:` text: `openai`, `anthropic`, `replay` or a DeerFlow class path.
    #[serde(rename = "use", default = "default_use")]
    pub use_: String,
    /// Derived from `use_` after decoding (`deerflow::provider_of`).
    #[serde(skip_deserializing)]
    pub provider: ProviderKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    #[serde(default, alias = "api_base", skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Replay only; relative to the config file's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cassette: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Seconds for a whole request.
    #[serde(
        default = "default_timeout",
        alias = "request_timeout",
        alias = "default_request_timeout"
    )]
    pub timeout: f64,
    /// Seconds of stream silence before the request counts as failed.
    #[serde(default = "default_stream_idle")]
    pub stream_idle_timeout: f64,
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    /// `price:` or DeerFlow's `pricing:` (same meaning, per million tokens).
    #[serde(default, alias = "pricing", skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
}

fn default_use() -> String {
    "openai".to_string()
}
fn default_timeout() -> f64 {
    600.0
}
fn default_stream_idle() -> f64 {
    120.0
}
fn default_retries() -> u32 {
    3
}

/// Prices per million tokens, enabling cost figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Price {
    #[serde(alias = "input_per_million")]
    pub input_per_mtok: f64,
    #[serde(alias = "output_per_million")]
    pub output_per_mtok: f64,
    /// Cache-hit input price; absent means hits are billed at the input price.
    #[serde(
        default,
        alias = "input_cache_hit_per_million",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_cache_hit_per_mtok: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubagentsConfig {
    pub enabled: bool,
    pub max_concurrent: u32,
    pub max_total_per_run: u32,
    /// Default for built-in types, in seconds.
    pub timeout_seconds: f64,
    /// Optional global override for built-in types.
    pub max_turns: Option<u32>,
    /// Per-type overrides (built-in or custom).
    pub agents: BTreeMap<String, AgentOverride>,
    pub custom_agents: BTreeMap<String, CustomAgent>,
}

impl Default for SubagentsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_concurrent: 3,
            max_total_per_run: 16,
            timeout_seconds: 1800.0,
            max_turns: None,
            agents: BTreeMap::new(),
            custom_agents: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentOverride {
    pub timeout_seconds: Option<f64>,
    pub max_turns: Option<u32>,
    pub model: Option<String>,
    pub skills: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomAgent {
    pub description: String,
    pub system_prompt: String,
    /// Allow-list; `None` inherits all of the lead's tools.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    #[serde(default)]
    pub disallowed_tools: Vec<String>,
    /// `None` = all skills, `Some([])` = none.
    #[serde(default)]
    pub skills: Option<Vec<String>>,
    /// `inherit` or a `models[].name`.
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub max_turns: Option<u32>,
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxConfig {
    /// Always `local` after loading (DeerFlow's local provider class is normalized).
    #[serde(rename = "use")]
    pub use_: String,
    pub allow_host_bash: bool,
    pub bash_command_timeout: f64,
    pub bash_output_max_chars: usize,
    pub read_file_output_max_chars: usize,
    pub ls_output_max_chars: usize,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            use_: "local".to_string(),
            allow_host_bash: false,
            bash_command_timeout: 600.0,
            bash_output_max_chars: 20_000,
            read_file_output_max_chars: 50_000,
            ls_output_max_chars: 20_000,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SkillsConfig {
    /// Absolute after loading when set in a file (relative paths are joined to the file's
    /// directory); `None` means `<config dir>/skills` (see `LoadedConfig::skills_dir`).
    pub path: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoopDetectionConfig {
    pub enabled: bool,
    pub warn_threshold: u32,
    pub hard_limit: u32,
    pub window_size: u32,
    pub tool_freq_warn: u32,
    pub tool_freq_hard_limit: u32,
}

impl Default for LoopDetectionConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            warn_threshold: 3,
            hard_limit: 5,
            window_size: 20,
            tool_freq_warn: 30,
            tool_freq_hard_limit: 50,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TokenBudgetConfig {
    pub enabled: bool,
    pub max_tokens: u64,
}

impl Default for TokenBudgetConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            max_tokens: 200_000,
        }
    }
}
