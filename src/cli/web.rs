//! The web tools a run offers (contract §14): the config's `tools:` entries and `--web`,
//! resolved for `run`, `agents` and `config check` alike, and wrapped for replay.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;

use crate::config::{self, ConfigError, LoadedConfig};
use crate::model::providers::replay::{recorded_tool_results, RecordLog};
use crate::tools::registry::ToolRegistry;
use crate::tools::web::offer::{self, WebTools};
use crate::tools::web::replay as web_replay;

/// The web tools the config's `tools:` entries and `--web` offer (§14). An offered entry's
/// problem (an unset `$VAR`) is a configuration error now; the keys the entries' tools do
/// not read join the config's ignored keys, and a second entry for a tool its notes.
pub fn web_tools(loaded: &mut LoadedConfig, web_flag: bool) -> Result<WebTools, ConfigError> {
    let web = offer::offer(&loaded.config.tools, web_flag, &config::Env::process())
        .map_err(|problems| ConfigError::Invalid { problems })?;
    // An entry that is not offered is reported once, as unavailable: its unknown keys are
    // not listed as ignored besides.
    let unavailable: Vec<String> = web
        .unavailable
        .iter()
        .filter_map(|u| u.entry.map(|i| format!("tools[{i}].")))
        .collect();
    loaded
        .ignored
        .retain(|k| !unavailable.iter().any(|at| k.starts_with(at.as_str())));
    loaded.ignored.extend(web.ignored.iter().cloned());
    loaded.warnings.extend(web.notes.iter().cloned());
    Ok(web)
}

/// The config as `agents` and `config show` read it: loaded, its web entries judged as a
/// run would, and every note printed; a problem is the configuration error's exit code.
pub fn load_listed(opts: &config::LoadOptions) -> Result<(LoadedConfig, WebTools), i32> {
    let mut loaded = config::load(opts).map_err(|e| super::config_error(&e))?;
    let web = web_tools(&mut loaded, false).map_err(|e| super::config_error(&e))?;
    super::load_warnings(&loaded);
    warn_unavailable(&web);
    Ok((loaded, web))
}

/// The run's tool registry and the `tool_unavailable` warnings (tool, message).
pub struct RunTools {
    pub registry: ToolRegistry,
    pub unavailable: Vec<(String, String)>,
}

/// The built-in tools and the offered web tools, each web tool answering from the run's
/// cassettes where they recorded its call, and recording with `--record`.
pub fn run_tools(
    allow_bash: bool,
    web: WebTools,
    cassettes: &[PathBuf],
    record: Option<&(PathBuf, Arc<RecordLog>)>,
) -> Result<RunTools> {
    let mut recorded = std::collections::BTreeMap::new();
    // The first cassette to record a key wins (the lead's model is built first).
    for path in cassettes.iter().rev() {
        recorded.extend(recorded_tool_results(path).map_err(ConfigError::Model)?);
    }
    let recorded = Arc::new(recorded);
    let mut registry = ToolRegistry::builtin(allow_bash);
    for tool in web.tools {
        let tool = web_replay::wrap(tool, &recorded, record.map(|r| &r.1));
        // Web tools' names are no built-in's, and each is offered once.
        registry.register(tool)?;
    }
    let unavailable = web
        .unavailable
        .iter()
        .map(|u| (u.tool.clone(), u.message()))
        .collect();
    Ok(RunTools {
        registry,
        unavailable,
    })
}

/// The `tool_unavailable` notes of a command without an event stream: a stderr line each.
pub fn warn_unavailable(web: &WebTools) {
    for u in &web.unavailable {
        super::warning(&u.message());
    }
}
