//! The configuration (contract §2): the YAML model, lookup order, `--set`, `$VAR`
//! expansion, DeerFlow compatibility, model resolution, and `config check`/`show`.
//!
//! Pipeline of `load`: find the file → parse to a YAML tree → apply `--set` → decode once
//! into the serde model (`schema.rs`): the keys it does not take are named, the `$VAR`s of
//! those it takes are expanded (but where a field keeps them for later: models' secrets,
//! MCP entries, the container's environment) → validate. Each step's errors carry the key
//! path; the file line is looked up in the original text at the end.
//!
//! The module is a leaf: it imports nothing from the rest of the crate, so every layer can
//! read the configuration. Checks that need another module's knowledge (which tools exist)
//! live with that module and take the loaded config; knowledge it needs while loading (the
//! provider table, owned by `model::registry`) it is given in [`LoadOptions`].

// Events are the only output channel: nothing prints to stdout but the event writer,
// the human view and the plain-text commands, all through one explicit writer each.
#![deny(clippy::print_stdout)]
// stderr too: `eprintln!` panics on a closed stderr, which must change no exit code (§12).
#![cfg_attr(not(test), deny(clippy::print_stderr))]

mod decode;
mod deerflow;
mod dollar;
mod env;
mod error;
mod expandable;
mod ignored;
mod keypath;
mod load;
mod locate;
mod mcp;
mod models;
mod providers;
mod report;
mod sandbox_kind;
mod schema;
mod set;
mod tools;
mod tree;
mod validate;

pub use deerflow::provider_of;
pub use env::{var_name, Env, WHOLE_REFERENCE};
pub use error::ConfigError;
pub use expandable::{Expandable, Unexpanded};
pub use load::{config_source, load, load_with, LoadOptions, LoadedConfig};
pub use mcp::{McpServer, McpTransport};
pub use models::{
    model_choice, model_choice_with, resolve_model, resolve_model_with, ResolvedModel,
};
#[cfg(any(test, feature = "testing"))]
pub use providers::testing;
pub use providers::{
    base_url, DeerFlowClasses, Endpoint, HttpSettings, ProviderInfo, Providers, ThinkingSettings,
};
pub use report::{check_report, check_report_with, check_with, show_json, show_yaml, CheckReport};
pub use sandbox_kind::SandboxKind;
pub use schema::McpServerEntry;
pub use schema::{
    AgentOverride, Config, ContextSize, CustomAgent, LoopDetectionConfig, ModelEntry, Price,
    RateLimit, SafetyDetector, SafetyDetectorConfig, SafetyFinishReasonConfig, SandboxConfig,
    SandboxMount, SizeKind, SkillsConfig, SubagentsConfig, SummarizationConfig, TokenBudgetConfig,
    ToolOutputConfig, Triggers,
};
pub use set::{parse_set, SetOverride};
pub use tools::{ToolEntry, ToolGroup};
pub use validate::duration_problem;
