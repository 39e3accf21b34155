//! The typed configuration (contract §2). Defaults live here, next to the fields.
//!
//! These structs are the one list of the keys deerflow reads: a key (or alias) that no field
//! takes is reported as ignored (`ignored.rs`), so adding a field is all it takes for
//! deerflow to read a key. Keys of sections to come get their field with the behaviour
//! that reads them.
//!
//! They are read with the config's own deserializer (`tree.rs`), for which a `null` is an
//! absent key, so `#[serde(default)]` covers both; a whole `$NAME` value is expanded
//! wherever a field reads it, except under `keep_vars`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::expandable::Expandable;
use super::providers::ProviderInfo;
use super::sandbox_kind::SandboxKind;
use super::tools::{ToolEntry, ToolGroup};
use super::tree::keep_vars;

/// The whole configuration deerflow uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// The first entry is the default model. Its `$VAR`s expand when a model is resolved,
    /// so an unset one hurts only the model that needs it.
    #[serde(deserialize_with = "keep_vars")]
    pub models: Vec<ModelEntry>,
    pub subagents: SubagentsConfig,
    pub sandbox: SandboxConfig,
    pub skills: SkillsConfig,
    pub loop_detection: LoopDetectionConfig,
    pub token_budget: TokenBudgetConfig,
    pub summarization: SummarizationConfig,
    pub tool_output: ToolOutputConfig,
    pub safety_finish_reason: SafetyFinishReasonConfig,
    /// MCP servers by name (contract §9), merged with the servers of the extensions file
    /// and `--mcp-config` files after loading. Its `$VAR`s expand for enabled servers only.
    #[serde(
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "keep_vars"
    )]
    pub mcp_servers: BTreeMap<String, McpServerEntry>,
    /// DeerFlow's tool entries (contract §14). Nothing in them is expanded while decoding:
    /// only an offered entry's `$VAR`s are read (`tools::web::offer`).
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "keep_vars")]
    pub tools: Vec<ToolEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_groups: Vec<ToolGroup>,
}

/// One `models:` entry. The strings that may hold a secret's `$VAR` are [`Expandable`]:
/// expanded only when the model is resolved, so an unset variable hurts only the model that
/// needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelEntry {
    pub name: String,
    /// The raw `use:` text: `openai`, `anthropic`, `replay` or a DeerFlow class path.
    #[serde(rename = "use", default = "default_use")]
    pub use_: String,
    /// The provider table's row for `use_`, set after decoding (`deerflow::provider_of`);
    /// `None` for a DeerFlow class no provider serves (Vertex AI).
    #[serde(skip_deserializing, serialize_with = "provider_name")]
    pub provider: Option<&'static ProviderInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Expandable>,
    /// `gemini_api_key` / `google_api_key`: DeerFlow's and LangChain's names for a Gemini
    /// entry's key.
    #[serde(
        default,
        alias = "gemini_api_key",
        alias = "google_api_key",
        skip_serializing_if = "Option::is_none"
    )]
    pub api_key: Option<Expandable>,
    #[serde(default, alias = "api_base", skip_serializing_if = "Option::is_none")]
    pub base_url: Option<Expandable>,
    /// Replay only; relative to the config file's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cassette: Option<Expandable>,
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
    /// Prompt + completion capacity in tokens; drives `fraction` sizes of summarization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// The model can think / reason: `--thinking` applies, and thinking is on by default.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub supports_thinking: bool,
    /// The model takes images: agents on it get `view_image`, and `--image` may be used
    /// (contract §14).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub supports_vision: bool,
    /// Merged into each request body while thinking is on: its `extra_body` map at the top
    /// level, any other key as a body key (DeerFlow's / LangChain's meaning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_thinking_enabled: Option<serde_json::Map<String, serde_json::Value>>,
    /// The same while thinking is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_thinking_disabled: Option<serde_json::Map<String, serde_json::Value>>,
    /// `low`, `medium`, `high`, …: sent as OpenAI's `reasoning_effort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Merged at the top level of every request body of this model.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Anthropic: `cache_control` breakpoints on the system prompt, the tools and the
    /// latest turns, so later calls with the same prefix read it from the prompt cache.
    #[serde(default = "default_true")]
    pub prompt_cache: bool,
    /// openai only: talk to `/responses` instead of `/chat/completions`. Unset, DeerFlow's
    /// `output_version: responses/v1` means the same (LangChain's rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_responses_api: Option<bool>,
    /// Requests and tokens per minute for this model, all agents of a run together (§15).
    #[serde(default, skip_serializing_if = "RateLimit::is_unset")]
    pub rate_limit: RateLimit,
    /// LangChain's message format (`v0`, `v1`, `responses/v1`); only `responses/v1` means
    /// anything here (see `use_responses_api`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_version: Option<String>,
}

/// `config show` prints the provider's name.
fn provider_name<S: serde::Serializer>(
    provider: &Option<&'static ProviderInfo>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(provider.map_or("unsupported", |p| p.name))
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
fn default_true() -> bool {
    true
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
        alias = "cache_read_per_mtok",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_cache_hit_per_mtok: Option<f64>,
    /// Price of input written to the prompt cache (Anthropic bills it above the input
    /// price); absent means those tokens are billed at the input price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
}

/// `models[].rate_limit` (contract §15); unset fields mean no limit of that kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RateLimit {
    pub requests_per_minute: Option<u64>,
    pub tokens_per_minute: Option<u64>,
}

impl RateLimit {
    pub fn is_unset(&self) -> bool {
        self.requests_per_minute.is_none() && self.tokens_per_minute.is_none()
    }
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
    /// As written: `local`, `confined`, `docker` or one of DeerFlow's provider classes;
    /// `local`, `confined` or `docker` after loading.
    #[serde(rename = "use")]
    pub use_: String,
    /// What `use_` names, set when the config is validated (which refuses anything else).
    #[serde(skip)]
    pub kind: SandboxKind,
    pub allow_host_bash: bool,
    /// Whether sandboxed commands may use the network (§13); off by default.
    pub network: bool,
    pub bash_command_timeout: f64,
    pub bash_output_max_chars: usize,
    pub read_file_output_max_chars: usize,
    pub ls_output_max_chars: usize,
    /// Variables bash may see although their names look secret (§6).
    pub bash_env_passthrough: Vec<String>,
    /// docker: the container image (required there).
    pub image: Option<String>,
    /// docker: one container per sub-agent instead of one per run.
    pub per_task: bool,
    /// docker: how many sub-agent containers may run at once.
    pub replicas: u32,
    /// docker: the start of every container's name.
    pub container_prefix: String,
    /// docker: DeerFlow's extra bind mounts (host paths absolute after loading).
    pub mounts: Vec<SandboxMount>,
    /// docker: the container's whole environment. `$VAR` values stay unexpanded here (so
    /// `config show` can name them instead of printing secrets) and are read from the
    /// host when a docker sandbox is built.
    pub environment: BTreeMap<String, Expandable>,
}

impl SandboxConfig {
    /// `environment` with every `$VAR` value read from `env`; an unset one, or a value that
    /// is no whole `$NAME` but starts with `$`, is an error naming its key.
    pub fn environment_with(&self, env: &super::env::Env) -> Result<Vec<(String, String)>, String> {
        use super::env::{unset_message, WHOLE_REFERENCE};
        use super::expandable::Unexpanded;
        self.environment
            .iter()
            .map(|(k, raw)| match raw.expand(env) {
                Ok(v) => Ok((k.clone(), v)),
                Err(Unexpanded::HalfWritten) => {
                    Err(format!("sandbox.environment.{k}: {WHOLE_REFERENCE}"))
                }
                Err(Unexpanded::Unset(name)) => {
                    Err(format!("sandbox.environment.{k}: {}", unset_message(&name)))
                }
            })
            .collect()
    }

    /// Whether runs offer `bash`: the flag or `allow_host_bash`, or a docker sandbox,
    /// where the container is the boundary (§13).
    pub fn bash_allowed(&self, flag: bool) -> bool {
        flag || self.allow_host_bash || self.kind == SandboxKind::Docker
    }
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            use_: "local".to_string(),
            kind: SandboxKind::Local,
            allow_host_bash: false,
            network: false,
            bash_command_timeout: 600.0,
            bash_output_max_chars: 20_000,
            read_file_output_max_chars: 50_000,
            ls_output_max_chars: 20_000,
            bash_env_passthrough: Vec::new(),
            image: None,
            per_task: false,
            replicas: 3,
            container_prefix: "deerflow-sandbox".to_string(),
            mounts: Vec::new(),
            environment: BTreeMap::new(),
        }
    }
}

/// One of DeerFlow's `sandbox.mounts`: a host directory shown in the container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxMount {
    pub host_path: PathBuf,
    pub container_path: String,
    #[serde(default)]
    pub read_only: bool,
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

/// DeerFlow's `summarization` section (contract §10), read as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SummarizationConfig {
    pub enabled: bool,
    /// A `models[].name`; `None` summarizes with the model of the agent being compacted.
    pub model_name: Option<String>,
    /// Any one fires.
    pub trigger: Triggers,
    /// What stays verbatim after the summary.
    pub keep: ContextSize,
    /// Bound, in tokens, on the transcript sent to the summarizer. (DeerFlow reads `null`
    /// as "no trimming"; here, as everywhere in this file, `null` means the default.)
    pub trim_tokens_to_summarize: u64,
    /// Replaces the built-in instruction; `{messages}` in it is replaced by the transcript.
    pub summary_prompt: Option<String>,
}

impl Default for SummarizationConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            model_name: None,
            trigger: Triggers(vec![ContextSize {
                kind: SizeKind::Fraction,
                value: 0.8,
            }]),
            keep: ContextSize {
                kind: SizeKind::Messages,
                value: 10.0,
            },
            trim_tokens_to_summarize: 15_564,
            summary_prompt: None,
        }
    }
}

/// A size of history: `{type: tokens | messages | fraction, value: N}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ContextSize {
    #[serde(rename = "type")]
    pub kind: SizeKind,
    /// A count for `tokens` and `messages`, a share of `context_window` for `fraction`.
    pub value: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SizeKind {
    Tokens,
    Messages,
    Fraction,
}

/// `trigger:` is one size or a list of them (DeerFlow accepts both).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Triggers(pub Vec<ContextSize>);

impl Default for Triggers {
    fn default() -> Self {
        SummarizationConfig::default().trigger
    }
}

impl<'de> Deserialize<'de> for Triggers {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct OneOrMany;
        impl<'de> serde::de::Visitor<'de> for OneOrMany {
            type Value = Triggers;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a {type, value} mapping or a list of them")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Triggers, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element()? {
                    out.push(item);
                }
                Ok(Triggers(out))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Triggers, A::Error> {
                let one =
                    ContextSize::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(Triggers(vec![one]))
            }
        }
        d.deserialize_any(OneOrMany)
    }
}

/// DeerFlow's `tool_output` section (contract §10), read as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolOutputConfig {
    pub enabled: bool,
    /// A result longer than this (in characters) is moved to a file.
    pub externalize_min_chars: usize,
    /// Accepted for DeerFlow's sake; the files live outside the workspace.
    pub storage_subdir: String,
    /// Tools whose results always stay inline.
    pub exempt_tools: Vec<String>,
}

impl Default for ToolOutputConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            externalize_min_chars: 12_000,
            storage_subdir: ".tool-results".to_string(),
            exempt_tools: vec!["read_file".to_string()],
        }
    }
}

/// DeerFlow's `safety_finish_reason` section (contract §10): which finish reasons mean the
/// provider stopped for safety, so the response's tool calls are not run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SafetyFinishReasonConfig {
    /// `false` turns the check off: such a response's calls run like any other.
    pub enabled: bool,
    /// DeerFlow's detector classes. deerflow always applies the built-in set (OpenAI
    /// `content_filter`, Anthropic `refusal`, Gemini's safety reasons); a known detector's
    /// `config.finish_reasons` adds to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detectors: Option<Vec<SafetyDetector>>,
}

impl Default for SafetyFinishReasonConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            detectors: None,
        }
    }
}

/// One `safety_finish_reason.detectors` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SafetyDetector {
    /// A DeerFlow class path (`…safety_termination_detectors:OpenAICompatibleContentFilterDetector`).
    #[serde(rename = "use")]
    pub use_: String,
    #[serde(default)]
    pub config: SafetyDetectorConfig,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SafetyDetectorConfig {
    /// More finish reasons that mean a safety stop (a gateway's own tokens).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub finish_reasons: Vec<String>,
}

impl SafetyFinishReasonConfig {
    /// The detector classes deerflow implements (their built-in reasons are always on).
    pub const KNOWN_DETECTORS: [&'static str; 3] = [
        "OpenAICompatibleContentFilterDetector",
        "AnthropicRefusalDetector",
        "GeminiSafetyDetector",
    ];

    /// Whether a detector's class is one deerflow implements (matched by class name, so
    /// a re-exported module path works too).
    pub fn is_known(detector: &SafetyDetector) -> bool {
        let class = detector
            .use_
            .rsplit([':', '.'])
            .next()
            .unwrap_or_default()
            .trim();
        Self::KNOWN_DETECTORS.contains(&class)
    }

    /// The finish reasons the known detectors add, trimmed and lowercase.
    pub fn extra_finish_reasons(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for d in self
            .detectors
            .iter()
            .flatten()
            .filter(|d| Self::is_known(d))
        {
            for r in &d.config.finish_reasons {
                let r = r.trim().to_ascii_lowercase();
                if !r.is_empty() && !out.contains(&r) {
                    out.push(r);
                }
            }
        }
        out
    }
}

/// One server as configured: the same keys in YAML and in an `mcpServers` JSON object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct McpServerEntry {
    /// `stdio` or `http`; absent means stdio with `command`, http with `url`.
    #[serde(
        rename = "type",
        alias = "transport",
        skip_serializing_if = "Option::is_none"
    )]
    pub type_: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    pub enabled: bool,
    pub required: bool,
    pub tool_name_prefix: bool,
    pub session_init_timeout: f64,
    pub tool_call_timeout: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled_tools: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disabled_tools: Vec<String>,
    /// DeerFlow's note on the server; shown, not used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Where the entry was read (not a key): it decides the `$` rule and how messages name
    /// the entry's keys.
    #[serde(skip)]
    pub origin: McpOrigin,
}

/// The source of an MCP server entry (contract §9).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum McpOrigin {
    /// `mcp_servers:` in the config (§2's `$NAME` rule).
    #[default]
    Config,
    /// DeerFlow's `extensions_config.json` (§2's `$NAME` rule, as DeerFlow reads it).
    Extensions(PathBuf),
    /// A `--mcp-config` file: Claude Code's `.mcp.json`, so its `${VAR}` rule too.
    McpConfig(PathBuf),
}

impl Default for McpServerEntry {
    fn default() -> Self {
        Self {
            type_: None,
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            url: None,
            headers: BTreeMap::new(),
            enabled: true,
            required: false,
            tool_name_prefix: true,
            session_init_timeout: 60.0,
            tool_call_timeout: 60.0,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            description: None,
            origin: McpOrigin::Config,
        }
    }
}
