//! `deerflow run`: flags + config → a `RunSpec`, every check done before `run_started`.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::args::{ColorChoice, OnOff, RunArgs};
use anyhow::{Context, Result};

use super::each_args::EachInputs;
use super::error::{self, usage};
use super::tool_name_warnings;
use crate::agent::compaction::{RunContext, Size, Summarization};
use crate::agent::tool_results::ToolResultStore;
use crate::agent::ContextPolicy;
use crate::config::{self, ConfigError, LoadedConfig};
use crate::events::{ModelInfo, SandboxInfo, WarningCode};
use crate::model::named::Named;
use crate::model::output_schema::OutputSchema;
use crate::model::providers::replay::{RecordLog, Recorder};
use crate::model::rate::RateLimited;
use crate::model::{registry, StopRules};
use crate::run::each::template::Template;
use crate::run::each::EachSpec;
use crate::run::scratch::ScratchDir;
use crate::run::{LeadModel, RunSpec};
use crate::subagent::registry::{effective_types, RegistryInputs};
use crate::subagent::{skills, SubagentSetup};
use crate::tools::web::offer;
use crate::tools::SandboxLimits;
use crate::usage::Price;
use crate::workspace::child_env::ChildEnv;
use crate::workspace::sandbox::{
    find_bwrap, ConfinedSandbox, LocalSandbox, Sandbox, SandboxKind, BWRAP_PACKAGE,
};
use crate::workspace::Workspace;

/// Problems found before the run starts end it here: usage (2) or configuration (78).
pub async fn run(args: RunArgs, config_path: Option<PathBuf>, run_id: String) -> i32 {
    match prepare(args, config_path) {
        Ok(spec) => crate::run::execute(spec, run_id).await,
        Err(e) => error::report(&e),
    }
}

pub(super) fn prepare(args: RunArgs, config_path: Option<PathBuf>) -> Result<RunSpec> {
    let cwd = std::env::current_dir()
        .map_err(|e| usage(format!("cannot read the current directory: {e}")))?;
    // Usage errors outrank configuration errors (§4), so they are all checked first.
    let (workspace_dir, output_schema, prompt, each) = check_usage(&args, &cwd)?;
    let images = read_images(&args.image, &cwd)?;
    let mut loaded = config::load(&config::LoadOptions {
        explicit: config_path,
        sets: args.set.clone(),
        cwd: cwd.clone(),
        providers: registry::providers(),
        mcp_configs: args.mcp_config.clone(),
        model: args.model.clone(),
    })?;
    super::features::check_mcp(&loaded.config)?;
    let web = super::web::web_tools(&mut loaded, args.web)?;
    let cfg = &loaded.config;
    let allow_bash = cfg.sandbox.bash_allowed(args.allow_bash);
    let skills_dir = args
        .skills
        .clone()
        .map(|d| cwd.join(d))
        .unwrap_or_else(|| loaded.skills_dir());
    let sandbox = sandbox_of(&cfg.sandbox, &workspace_dir, &skills_dir)?;
    let record = args
        .record
        .as_ref()
        .map(|p| (p.clone(), Arc::new(RecordLog::default())));
    let mut models = ModelBuilder::new(&loaded, &cwd, record.as_ref().map(|r| r.1.clone()));
    models.thinking = args.thinking.map(|t| t == OnOff::On);
    // A model's requests in flight start at (and regrow to) the sub-agents' plus the lead's.
    models.concurrency =
        (args.max_concurrent.unwrap_or(cfg.subagents.max_concurrent)).saturating_add(1);
    let choice = config::model_choice(args.model.as_deref(), cfg)?;
    // An `--each` run has no lead: only its items' model is resolved (§15).
    let lead = match &each {
        Some(_) => None,
        None => Some(models.build(&choice)?),
    };
    let (skill_list, skill_warnings) = skills::discover(&skills_dir);
    let mut warnings = config_warnings(&loaded);
    warnings.extend(unused_sandbox_warning(&cfg.sandbox, allow_bash));
    warnings.extend(
        skill_warnings
            .into_iter()
            .map(|m| (WarningCode::SkillSkipped, m)),
    );
    let lead_name = lead.as_ref().map_or(choice, |l| l.info.name.clone());
    let inputs = RegistryInputs {
        allow_bash,
        timeout_flag: args.subagent_timeout,
        lead_model: &lead_name,
    };
    let (lead, subagents) = match (lead, &each) {
        (Some(lead), _) if cfg.subagents.enabled && !args.no_subagents => {
            let setup = subagent_setup(cfg, &inputs, &mut models, &skill_list, &mut warnings)?;
            (lead, Some(setup))
        }
        (Some(lead), _) => (lead, None),
        (None, Some(e)) => {
            let (model, setup) = item_setup(
                cfg,
                &inputs,
                &mut models,
                &skill_list,
                &mut warnings,
                &e.agent,
            )?;
            (model, Some(setup))
        }
        (None, None) => unreachable_lead()?,
    };
    // The model that gets the images: the lead's, or with `--each` every item's.
    if !images.is_empty() && !lead.vision {
        return Err(ConfigError::Model(format!(
            "--image: model '{}' does not take images; set supports_vision: true on its \
             models: entry if it does",
            lead.info.name
        ))
        .into());
    }
    let agent = each.as_ref().map(|e| e.agent.as_str());
    let state = super::state_args::open(&args, &cwd, &prompt, agent, &lead.info.name)?;
    let mut workspace = Workspace::new(&workspace_dir, Some(&skills_dir)).map_err(|e| {
        usage(format!(
            "cannot use workspace {}: {e}",
            workspace_dir.display()
        ))
    })?;
    let (context, tool_results) = context_policy(cfg, &mut models)?;
    if let Some(dir) = &tool_results {
        workspace = workspace
            .with_tool_results(dir.path())
            .context("cannot use the directory for large tool results")?;
    }
    let search_defaults = (web.glob_max_results, web.grep_max_results);
    let tools = super::web::run_tools(allow_bash, web, &models.cassettes, record.as_ref())?;
    let token_budget = cfg
        .token_budget
        .enabled
        .then_some(cfg.token_budget.max_tokens);
    let prompt_text = prompt.clone();
    Ok(RunSpec {
        prompt,
        images,
        model: lead,
        prices: models.prices,
        json: args.json,
        quiet: args.quiet,
        color: use_color(args.color),
        workspace: Arc::new(workspace),
        sandbox: SandboxInfo {
            use_: sandbox.kind(),
            image: sandbox.image().map(str::to_string),
        },
        limits: Arc::new(SandboxLimits {
            glob_max_results: search_defaults.0,
            grep_max_results: search_defaults.1,
            ..sandbox_limits(&loaded, allow_bash, sandbox)
        }),
        tools: Arc::new(tools.registry),
        unavailable_tools: tools.unavailable,
        loop_limits: cfg.loop_detection.clone(),
        stops: StopRules::from_config(&cfg.safety_finish_reason),
        max_turns: args.max_turns,
        max_concurrent: args.max_concurrent.unwrap_or(cfg.subagents.max_concurrent),
        max_tasks: args.max_tasks.unwrap_or(cfg.subagents.max_total_per_run),
        timeout_seconds: args.timeout,
        max_tokens: args.max_tokens.or(token_budget),
        subagents,
        output_last_message: args.output_last_message.clone(),
        output_schema,
        record,
        warnings,
        lead_progress: Default::default(),
        skills: skill_list,
        context,
        tool_results,
        mcp: loaded.mcp.clone(),
        each: each.map(|e| EachSpec {
            input: e.input,
            template: Template::parse(&prompt_text),
            agent: e.agent,
            shard: e.shard,
            results: e.results,
            count_path: e.count_path,
        }),
        state,
    })
}

/// The lead is built whenever there is no `--each`; this only keeps the match whole.
fn unreachable_lead() -> Result<(LeadModel, Option<Arc<SubagentSetup>>)> {
    Err(anyhow::anyhow!(
        "internal error: a run without a lead and without --each"
    ))
}

/// An `--each` run's one sub-agent type (`--agent`), with its model resolved and built;
/// that model is the run's (`run_started.model`). An unknown or unavailable type is a
/// configuration error.
fn item_setup(
    cfg: &config::Config,
    inputs: &RegistryInputs,
    models: &mut ModelBuilder,
    skills: &[crate::subagent::Skill],
    warnings: &mut Vec<(WarningCode, String)>,
    agent: &str,
) -> Result<(LeadModel, Arc<SubagentSetup>)> {
    let (types, reg_warnings) = effective_types(&cfg.subagents, inputs);
    warnings.extend(
        reg_warnings
            .into_iter()
            .map(|m| (WarningCode::ConfigIgnored, m)),
    );
    let names: Vec<&str> = types.iter().map(|t| t.name.as_str()).collect();
    let Some(t) = types.iter().find(|t| t.name == agent) else {
        let bash = if agent == "bash" {
            " (bash needs --allow-bash or sandbox.allow_host_bash: true)"
        } else {
            ""
        };
        return Err(ConfigError::Model(format!(
            "--agent: unknown sub-agent type '{agent}'{bash}. Available: {}",
            names.join(", ")
        ))
        .into());
    };
    let model = models
        .build(&t.model)
        .with_context(|| subagent_model_key(&cfg.subagents, &t.name))?;
    let by_name = [(t.model.clone(), model.model.clone())]
        .into_iter()
        .collect();
    let vision = model.vision.then(|| t.model.clone()).into_iter().collect();
    let setup = SubagentSetup {
        types: vec![Arc::new(t.clone())],
        models: by_name,
        vision,
        skills: skills.to_vec(),
    };
    Ok((model, Arc::new(setup)))
}

/// The run's context policy (`summarization`, `tool_output`), and the run-scoped directory
/// large tool results go to, outside the workspace.
fn context_policy(
    cfg: &config::Config,
    models: &mut ModelBuilder,
) -> Result<(Arc<dyn ContextPolicy>, Option<ScratchDir>)> {
    let s = &cfg.summarization;
    let summarization = if s.enabled {
        let model = match &s.model_name {
            Some(name) => {
                let m = models.build(name).context("summarization.model_name")?;
                Some((m.model, m.info.name))
            }
            None => None,
        };
        Some(Summarization {
            triggers: s.trigger.0.iter().map(size).collect(),
            keep: size(&s.keep),
            trim_tokens: s.trim_tokens_to_summarize,
            prompt: s.summary_prompt.clone(),
            model,
        })
    } else {
        None
    };
    let t = &cfg.tool_output;
    let (store, dir) = if t.enabled {
        let dir = ScratchDir::create_in(&std::env::temp_dir())
            .context("cannot create a directory for large tool results")?;
        let store = ToolResultStore {
            dir: dir.path().to_path_buf(),
            min_chars: t.externalize_min_chars,
            exempt: t.exempt_tools.clone(),
        };
        (Some(store), Some(dir))
    } else {
        (None, None)
    };
    let policy = RunContext {
        summarization,
        tool_results: store,
    };
    Ok((Arc::new(policy), dir))
}

fn size(s: &config::ContextSize) -> Size {
    // Validation made counts whole and non-negative.
    match s.kind {
        config::SizeKind::Tokens => Size::Tokens(s.value as u64),
        config::SizeKind::Messages => Size::Messages(s.value as usize),
        config::SizeKind::Fraction => Size::Fraction(s.value),
    }
}

/// The environment every child (bash, MCP servers) starts from: deerflow's own without the
/// variables secrets were read from — models' `api_key: $VAR`s, MCP servers' `env`/`headers`,
/// the web services' keys (§14) — nor any secret-looking name, unless
/// `sandbox.bash_env_passthrough` lists it (§6).
pub(super) fn child_env(loaded: &LoadedConfig) -> ChildEnv {
    let models = loaded
        .config
        .models
        .iter()
        .filter_map(|m| m.api_key.as_deref())
        .filter_map(|k| config::var_name(k.trim()))
        .map(str::to_string);
    let sources: Vec<String> = models
        .chain(loaded.mcp_secrets.iter().cloned())
        .chain(offer::secret_sources(&loaded.config.tools))
        .collect();
    ChildEnv::from_process(&sources, &loaded.config.sandbox.bash_env_passthrough)
}

/// Everything a usage error can come from, before any configuration is read: the
/// workspace, the output paths, the skills flag, the output schema and the prompt (stdin
/// last, so nothing is consumed for a run that cannot start).
type Checked = (
    PathBuf,
    Option<Arc<OutputSchema>>,
    String,
    Option<EachInputs>,
);

fn check_usage(args: &RunArgs, cwd: &Path) -> Result<Checked> {
    let workspace_dir = workspace_dir(args.workspace.as_deref(), cwd)?;
    check_output_path("--output-last-message", args.output_last_message.as_deref())?;
    check_output_path("--record", args.record.as_deref())?;
    if let Some(dir) = args.skills.as_deref().filter(|d| !cwd.join(d).is_dir()) {
        return Err(usage(format!(
            "--skills {} is not a directory",
            dir.display()
        )));
    }
    let schema = args
        .output_schema
        .as_deref()
        .map(|path| {
            super::features::output_schema(&cwd.join(path))
                .map(Arc::new)
                .map_err(|why| usage(format!("--output-schema {} {why}", path.display())))
        })
        .transpose()?;
    let each = super::each_args::check(args)?;
    Ok((workspace_dir, schema, read_prompt(args)?, each))
}

/// The `--image` files, each read and made ready to send; one that cannot be read or is no
/// image is a usage error naming it.
fn read_images(paths: &[PathBuf], cwd: &Path) -> Result<Vec<crate::model::image::Image>> {
    paths
        .iter()
        .map(|path| {
            let why = |e: &dyn std::fmt::Display| usage(format!("--image {}: {e}", path.display()));
            let file = std::fs::File::open(cwd.join(path)).map_err(|e| why(&e))?;
            let bytes = crate::tools::fs::read_capped(file)
                .map_err(|e| why(&e))?
                .ok_or_else(|| why(&"larger than 20 MiB, the image limit"))?;
            crate::model::image::Image::from_bytes(bytes).map_err(|e| why(&e))
        })
        .collect()
}

/// Ignored keys and entries the config names but deerflow sets aside (a duplicate model
/// name, a tool name no tool has) are all `config_ignored`.
fn config_warnings(loaded: &LoadedConfig) -> Vec<(WarningCode, String)> {
    loaded
        .ignored_warning()
        .into_iter()
        .chain(loaded.warnings.iter().cloned())
        .chain(tool_name_warnings(&loaded.config))
        .map(|m| (WarningCode::ConfigIgnored, m))
        .collect()
}

/// A sandbox for bash while bash is not allowed confines nothing: said once, before the
/// model learns it the hard way ("unknown tool 'bash'").
fn unused_sandbox_warning(
    s: &config::SandboxConfig,
    allow_bash: bool,
) -> Option<(WarningCode, String)> {
    (s.kind == SandboxKind::Confined && !allow_bash).then(|| {
        (
            WarningCode::SandboxUnused,
            "sandbox.use: confined has no effect without --allow-bash (or \
             sandbox.allow_host_bash: true): the bash tool is not offered"
                .to_string(),
        )
    })
}

/// The available sub-agent types, with every model they can reach resolved and built now,
/// so a configuration error never surfaces mid-run.
fn subagent_setup(
    cfg: &config::Config,
    inputs: &RegistryInputs,
    models: &mut ModelBuilder,
    skills: &[crate::subagent::Skill],
    warnings: &mut Vec<(WarningCode, String)>,
) -> Result<Arc<SubagentSetup>> {
    let (types, reg_warnings) = effective_types(&cfg.subagents, inputs);
    warnings.extend(
        reg_warnings
            .into_iter()
            .map(|m| (WarningCode::ConfigIgnored, m)),
    );
    for t in &types {
        // The one line points at the key that named the model.
        models
            .build(&t.model)
            .with_context(|| subagent_model_key(&cfg.subagents, &t.name))?;
    }
    let by_name = models
        .built
        .iter()
        .map(|(k, v)| (k.clone(), v.model.clone()))
        .collect();
    let vision = models
        .built
        .iter()
        .filter(|(_, m)| m.vision)
        .map(|(k, _)| k.clone())
        .collect();
    Ok(Arc::new(SubagentSetup {
        types: types.into_iter().map(Arc::new).collect(),
        models: by_name,
        vision,
        skills: skills.to_vec(),
    }))
}

/// The config key that chose a sub-agent type's model: its per-type override, else its
/// custom definition (a built-in without an override inherits the lead's model).
fn subagent_model_key(cfg: &config::SubagentsConfig, name: &str) -> String {
    if cfg.agents.get(name).is_some_and(|o| o.model.is_some()) {
        format!("subagents.agents.{name}.model")
    } else {
        format!("subagents.custom_agents.{name}.model")
    }
}

/// A file the run will write at its end must be writable before the run starts: finding
/// out after `run_completed` would leave a pipeline with exit 0 and no file.
fn check_output_path(flag: &str, path: Option<&Path>) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    crate::run::output_file::check(path).map_err(|why| {
        // "-o out is a directory", but "-o out: directory x does not exist".
        let sep = if why.starts_with("is a ") { " " } else { ": " };
        usage(format!("{flag} {}{sep}{why}", path.display()))
    })
}

fn workspace_dir(flag: Option<&Path>, cwd: &Path) -> Result<PathBuf> {
    let dir = flag
        .map(|d| cwd.join(d))
        .unwrap_or_else(|| cwd.to_path_buf());
    if !dir.is_dir() {
        return Err(usage(format!(
            "workspace {} is not a directory",
            dir.display()
        )));
    }
    Ok(dir)
}

/// The prompt from the positional argument, `-p`, `--prompt-file` or stdin. stdin is read
/// only for `-` (as the prompt or as the file) or when no prompt is given and stdin is not a
/// terminal.
fn read_prompt(args: &RunArgs) -> Result<String> {
    let text = match (&args.prompt_arg, &args.prompt, &args.prompt_file) {
        (Some(p), _, _) | (None, Some(p), _) if p != "-" => p.clone(),
        (Some(_), _, _) | (None, Some(_), _) => read_stdin()?,
        (None, None, Some(f)) if f.as_os_str() == "-" => read_stdin()?,
        (None, None, Some(f)) => std::fs::File::open(f)
            .and_then(crate::text::read_text_at_most)
            .map_err(|e| usage(format!("cannot read --prompt-file {}: {e}", f.display())))?,
        (None, None, None) => {
            if std::io::stdin().is_terminal() {
                return Err(usage(
                    "no prompt: pass PROMPT, -p TEXT, --prompt-file PATH, or pipe it on stdin",
                ));
            }
            read_stdin()?
        }
    };
    if text.trim().is_empty() {
        return Err(usage("the prompt is empty"));
    }
    Ok(text)
}

fn read_stdin() -> Result<String> {
    crate::text::read_text_at_most(std::io::stdin().lock())
        .map_err(|e| usage(format!("cannot read the prompt from stdin: {e}")))
}

fn use_color(c: ColorChoice) -> bool {
    match c {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
                && std::io::stderr().is_terminal()
        }
    }
}

/// The sandbox `sandbox.use` names (already validated to one deerflow has) for a run in
/// `workspace`, or a configuration error when this machine cannot provide it (§13). A
/// docker daemon is not contacted here: one that cannot be reached fails the run (exit 1).
pub(super) fn sandbox_of(
    s: &config::SandboxConfig,
    workspace: &Path,
    skills: &Path,
) -> Result<Arc<dyn Sandbox>, ConfigError> {
    match s.kind {
        SandboxKind::Confined => {
            let bwrap = find_bwrap(std::env::var_os("PATH").as_deref()).ok_or_else(|| {
                ConfigError::Sandbox(format!(
                    "sandbox.use: confined needs bwrap on PATH; install the {BWRAP_PACKAGE} \
                     package (e.g. apt-get install {BWRAP_PACKAGE})"
                ))
            })?;
            let home = std::env::var_os("HOME").map(PathBuf::from);
            Ok(Arc::new(ConfinedSandbox::new(bwrap, s.network, home)))
        }
        SandboxKind::Docker => super::docker::sandbox(s, workspace, skills),
        SandboxKind::Local => Ok(Arc::new(LocalSandbox)),
    }
}

fn sandbox_limits(
    loaded: &LoadedConfig,
    allow_bash: bool,
    sandbox: Arc<dyn Sandbox>,
) -> SandboxLimits {
    let s = &loaded.config.sandbox;
    SandboxLimits {
        allow_host_bash: allow_bash,
        child_env: Arc::new(child_env(loaded)),
        sandbox,
        bash_command_timeout_secs: s.bash_command_timeout,
        bash_output_max_chars: output_limit(s.bash_output_max_chars),
        read_file_output_max_chars: output_limit(s.read_file_output_max_chars),
        ls_output_max_chars: output_limit(s.ls_output_max_chars),
        glob_max_results: None,
        grep_max_results: None,
        task_mark: None,
        task_id: None,
    }
}

/// A `sandbox.*_output_max_chars` as tools apply it. DeerFlow's config reads 0 as "do not
/// truncate"; it stays finite here so that a runaway command's capture and a huge file's
/// read stay bounded (4 Mi characters is far beyond any model's context).
fn output_limit(chars: usize) -> usize {
    const UNTRUNCATED: usize = 4 << 20;
    if chars == 0 {
        UNTRUNCATED
    } else {
        chars
    }
}

/// Resolves and builds each model once, by the name the user gave it.
struct ModelBuilder<'a> {
    loaded: &'a LoadedConfig,
    cwd: &'a Path,
    record: Option<Arc<RecordLog>>,
    /// `--thinking`, for every model of the run.
    thinking: Option<bool>,
    /// Requests in flight each model's rate limiter starts with (§15).
    concurrency: u32,
    built: HashMap<String, LeadModel>,
    prices: HashMap<String, Price>,
    /// The cassettes of the replay models built, in order: their recorded web results.
    cassettes: Vec<PathBuf>,
}

impl<'a> ModelBuilder<'a> {
    fn new(loaded: &'a LoadedConfig, cwd: &'a Path, record: Option<Arc<RecordLog>>) -> Self {
        Self {
            loaded,
            cwd,
            record,
            thinking: None,
            concurrency: 1,
            built: HashMap::new(),
            prices: HashMap::new(),
            cassettes: Vec::new(),
        }
    }

    fn build(&mut self, name: &str) -> Result<LeadModel> {
        if let Some(m) = self.built.get(name) {
            return Ok(m.clone());
        }
        let mut r = config::resolve_model(self.loaded, name, self.cwd)?;
        if let Some(http) = &mut r.http {
            http.thinking.requested = self.thinking;
        }
        // Provider-side problems found here (an unreadable cassette, a client that cannot
        // be built) are configuration errors: nothing has run yet.
        let mut model = registry::build(&r).map_err(ConfigError::Model)?;
        self.cassettes.extend(r.cassette.clone());
        model = Named::wrap(model, &r.name);
        // A configured name wins over `PROVIDER:MODEL` (as in resolution); the first entry.
        let limits = (self.loaded.config.models.iter())
            .find(|m| m.name == name)
            .map_or_else(Default::default, |m| m.rate_limit);
        model = RateLimited::wrap(model, &r.name, limits, self.concurrency);
        if let Some(log) = &self.record {
            model = Arc::new(Recorder::new(model, log.clone()));
        }
        if let Some(p) = &r.price {
            let price = Price {
                input_per_mtok: p.input_per_mtok,
                output_per_mtok: p.output_per_mtok,
                cache_hit_per_mtok: p.input_cache_hit_per_mtok,
                cache_write_per_mtok: p.cache_write_per_mtok,
            };
            self.prices.insert(r.name.clone(), price);
        }
        let m = LeadModel {
            info: ModelInfo {
                name: r.name.clone(),
                provider: r.provider().to_string(),
                model: r.model.clone(),
            },
            model,
            vision: r.supports_vision,
        };
        self.built.insert(name.to_string(), m.clone());
        Ok(m)
    }
}
