//! Lookup, parsing and layering: defaults → file → `--set` (env and flags are layered by
//! the caller through `model_choice` and the run's flags).

use std::path::{Path, PathBuf};

use serde_yaml_ng::{Mapping, Value};

use super::decode::decode;
use super::deerflow::provider_of;
use super::env::{var_name, Env};
use super::error::ConfigError;
use super::keypath::Problem;
use super::locate::line_of;
use super::mcp::{extensions_file, read_mcp_file, resolve_mcp, McpFileKind, McpServer};
use super::providers::Providers;
use super::schema::Config;
use super::set::{apply_set, SetOverride};
use super::validate::validate;

/// What `load` needs from the command line, and the providers models resolve against.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// `--config PATH` (relative to `cwd`).
    pub explicit: Option<PathBuf>,
    /// `--set KEY=VALUE`, in order (later wins).
    pub sets: Vec<SetOverride>,
    /// The process's current directory (not `-C`).
    pub cwd: PathBuf,
    /// The provider table (`model::registry::providers()`): `use:` maps to its rows.
    pub providers: Providers,
    /// `--mcp-config FILE`s, in order (later files win per server name).
    pub mcp_configs: Vec<PathBuf>,
    /// `--model`, for a command that has it (else `$DEERFLOW_MODEL` is the choice): with no
    /// configured models, `--set models[0].…` edits the model a `PROVIDER:NAME` choice
    /// stands for (`spec_entry`).
    pub model: Option<String>,
}

/// The effective configuration and where it came from.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: Config,
    /// The file read, if any.
    pub source: Option<PathBuf>,
    /// The file's directory (relative paths in it are relative to this), else the cwd.
    pub base_dir: PathBuf,
    /// Dotted paths of the keys deerflow ignored (`memory`, `models[0].display_name`).
    pub ignored: Vec<String>,
    /// Other non-fatal notes.
    pub warnings: Vec<String>,
    /// The table the models were mapped with and resolve against.
    pub providers: Providers,
    /// The enabled MCP servers, their `$VAR`s expanded (contract §9).
    pub mcp: Vec<McpServer>,
    /// The environment variables MCP servers' `env` and `headers` were read from: no tool's
    /// child process may inherit them (contract §6).
    pub mcp_secrets: Vec<String>,
}

impl LoadedConfig {
    /// One `config_ignored` message naming every ignored key, or `None` when there are none.
    /// Paths that differ only in a list index are grouped (`models[*].display_name`).
    pub fn ignored_warning(&self) -> Option<String> {
        if self.ignored.is_empty() {
            return None;
        }
        Some(format!(
            "ignored config keys deerflow does not use: {}",
            group_ignored(&self.ignored).join(", ")
        ))
    }

    /// The skills directory: `skills.path`, else `skills` beside the config file (or in the cwd).
    pub fn skills_dir(&self) -> PathBuf {
        self.config
            .skills
            .path
            .clone()
            .unwrap_or_else(|| self.base_dir.join("skills"))
    }
}

/// Loads the configuration from the process environment.
pub fn load(opts: &LoadOptions) -> Result<LoadedConfig, ConfigError> {
    load_with(opts, &Env::process())
}

/// `load` with an explicit environment (lookup variables, `$VAR`s).
pub fn load_with(opts: &LoadOptions, env: &Env) -> Result<LoadedConfig, ConfigError> {
    let found = find_config(opts, env)?;
    let (source, text) = match found {
        Some((path, text)) => (Some(path), Some(text)),
        None => (None, None),
    };
    let base_dir = source
        .as_deref()
        .and_then(Path::parent)
        .map_or_else(|| opts.cwd.clone(), Path::to_path_buf);
    let mut root = parse_root(text.as_deref(), source.as_deref())?;
    let choice = spec_choice(opts, env);
    let model_sets: Vec<&SetOverride> = opts.sets.iter().filter(|s| edits_a_model(s)).collect();
    let synthesized = match &choice {
        Some(spec) if !model_sets.is_empty() => spec_entry(&mut root, spec, opts),
        _ => false,
    };
    for set in &opts.sets {
        apply_set(&mut root, set).map_err(|m| ConfigError::Invalid { problems: vec![m] })?;
    }
    let mut problems = Vec::new();
    let (mut config, mut ignored) = decode(&root, env, &mut problems);
    for m in &mut config.models {
        // `use: $PROVIDER` is read from the environment as DeerFlow reads it; unset, it
        // stays as written and the model fails when used (`models::resolve_entry`), rather
        // than being taken for a class name and served as OpenAI-compatible.
        match var_name(&m.use_).map(|var| env.get(var)) {
            Some(Some(value)) => m.use_ = value,
            Some(None) => continue,
            None => {}
        }
        m.provider = provider_of(&m.use_, &opts.providers);
    }
    let mut warnings = Vec::new();
    if let Some(spec) = choice.filter(|_| !synthesized && !model_sets.is_empty()) {
        if !config.models.iter().any(|m| m.name == spec) {
            warnings.push(sets_miss_the_model(&model_sets, &spec));
        }
    }
    validate(&mut config, &mut problems, &mut warnings);
    let mut mcp_problems = Vec::new();
    let mcp_files = extensions_file(&base_dir, &opts.cwd, env)
        .map(|p| (p, McpFileKind::Extensions))
        .into_iter()
        .chain(
            opts.mcp_configs
                .iter()
                .map(|p| (opts.cwd.join(p), McpFileKind::McpConfig)),
        );
    for (path, kind) in mcp_files {
        match read_mcp_file(&path, kind) {
            Ok(file) => {
                ignored.extend(file.ignored);
                config.mcp_servers.extend(file.servers);
            }
            Err(p) => mcp_problems.extend(p),
        }
    }
    let (mcp, mcp_secrets) = match resolve_mcp(&config.mcp_servers, env) {
        Ok(r) => r,
        Err(p) => {
            mcp_problems.extend(p);
            Default::default()
        }
    };
    if !problems.is_empty() || !mcp_problems.is_empty() {
        let origin = Origin {
            text: text.as_deref(),
            source: source.as_deref(),
            sets: &opts.sets,
        };
        let problems = problems
            .iter()
            .map(|p| origin.describe(p))
            .chain(mcp_problems)
            .collect();
        return Err(ConfigError::Invalid { problems });
    }
    if let Some(p) = config.skills.path.take() {
        config.skills.path = Some(anchor(&p, &base_dir, env));
    }
    for m in &mut config.sandbox.mounts {
        m.host_path = anchor(&m.host_path, &base_dir, env);
    }
    Ok(LoadedConfig {
        config,
        source,
        base_dir,
        ignored,
        warnings,
        providers: opts.providers.clone(),
        mcp,
        mcp_secrets,
    })
}

/// The run's model when it is a `PROVIDER:NAME` spec: `--model`, else `$DEERFLOW_MODEL`
/// (a configured name is no spec, and is checked against the entries later).
fn spec_choice(opts: &LoadOptions, env: &Env) -> Option<String> {
    let choice = opts
        .model
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(String::from)
        .or_else(|| env.get("DEERFLOW_MODEL").map(|m| m.trim().to_string()))?;
    let (provider, name) = choice.split_once(':')?;
    (opts.providers.by_name(provider).is_some() && !name.trim().is_empty()).then_some(choice)
}

/// `models.N.…`: a `--set` that edits one model entry.
fn edits_a_model(set: &SetOverride) -> bool {
    matches!(set.path.as_slice(), [models, index, ..]
        if models == "models" && index.bytes().all(|b| b.is_ascii_digit()))
}

/// With no configured models, `--model PROVIDER:NAME` stands for an entry
/// `{name: PROVIDER:NAME, use: PROVIDER, model: NAME}` (a replay cassette relative to the
/// current directory), its endpoint and key from the environment as without one. It is
/// written into the tree as `models[0]` so that `--set models[0].KEY=VALUE` edits it; only
/// then, so a run without such a `--set` is untouched. Whether it was written.
fn spec_entry(root: &mut Value, spec: &str, opts: &LoadOptions) -> bool {
    let Value::Mapping(map) = root else {
        return false;
    };
    let configured = match map.get("models") {
        None | Some(Value::Null) => false,
        Some(Value::Sequence(items)) => !items.is_empty(),
        Some(_) => true,
    };
    let (Some((provider, name)), false) = (spec.split_once(':'), configured) else {
        return false;
    };
    let Some(row) = opts.providers.by_name(provider) else {
        return false;
    };
    let mut entry = Mapping::new();
    entry.insert("name".into(), spec.into());
    entry.insert("use".into(), row.name.into());
    if row.endpoint.is_some() {
        entry.insert("model".into(), name.into());
    } else {
        let Some(path) = opts.cwd.join(name).to_str().map(String::from) else {
            return false;
        };
        entry.insert("cassette".into(), path.into());
    }
    map.insert(
        "models".into(),
        Value::Sequence(vec![Value::Mapping(entry)]),
    );
    true
}

/// The note for `--set models[N].…` when the run's model is a `PROVIDER:NAME` the config
/// has no entry for: the sets edit configured entries, which the run's model is not.
fn sets_miss_the_model(sets: &[&SetOverride], spec: &str) -> String {
    let keys: Vec<String> = sets
        .iter()
        .map(|s| {
            let mut path = s.path.iter();
            let head = match (path.next(), path.next()) {
                (Some(m), Some(i)) => format!("{m}[{i}]"),
                _ => String::new(),
            };
            std::iter::once(head)
                .chain(path.cloned())
                .collect::<Vec<_>>()
                .join(".")
        })
        .collect();
    format!(
        "--set {} edits the configured models, not this run's model '{spec}', which has no \
         entry in the config; add a models: entry named '{spec}' to set its keys",
        keys.join(", ")
    )
}

/// A path from the file: `~/…` is under `$HOME`, a relative one under the file's directory.
fn anchor(p: &Path, base_dir: &Path, env: &Env) -> PathBuf {
    match (p.strip_prefix("~"), env.get("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => base_dir.join(p),
    }
}

/// The lookup order of contract §2; a named file (flag or env) must be readable.
/// The config file the lookup order picks, if it can be read (for reports about a file
/// that does not load).
pub fn config_source(opts: &LoadOptions) -> Option<PathBuf> {
    find_config(opts, &Env::process())
        .ok()
        .flatten()
        .map(|(p, _)| p)
}

fn find_config(opts: &LoadOptions, env: &Env) -> Result<Option<(PathBuf, String)>, ConfigError> {
    if let Some(p) = &opts.explicit {
        return read(opts.cwd.join(p), "--config").map(Some);
    }
    if let Some(p) = env.get("DEERFLOW_CONFIG") {
        return read(opts.cwd.join(p), "$DEERFLOW_CONFIG").map(Some);
    }
    let mut candidates = vec![(opts.cwd.join("deerflow.yaml"), "./deerflow.yaml")];
    // XDG says a relative XDG_CONFIG_HOME is invalid and must be ignored.
    if let Some(xdg) = env
        .get("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        candidates.push((xdg.join("deerflow/config.yaml"), "$XDG_CONFIG_HOME"));
    }
    if let Some(home) = env.get("HOME") {
        candidates.push((
            PathBuf::from(home).join(".config/deerflow/config.yaml"),
            "~/.config",
        ));
    }
    for (path, origin) in candidates {
        if path.exists() {
            return read(path, origin).map(Some);
        }
    }
    Ok(None)
}

fn read(path: PathBuf, origin: &str) -> Result<(PathBuf, String), ConfigError> {
    match std::fs::File::open(&path).and_then(deerflow_base::text::read_text_at_most) {
        // A UTF-8 byte-order mark (Windows editors write one) is not part of the YAML.
        Ok(text) => Ok((
            path,
            text.strip_prefix('\u{feff}')
                .map(String::from)
                .unwrap_or(text),
        )),
        Err(e) => Err(ConfigError::Unreadable {
            path,
            origin: origin.to_string(),
            reason: e.to_string(),
        }),
    }
}

/// The YAML parser gives up at this depth anyway, but only after time that grows with the
/// square of the depth (40,000 levels: seconds); a linear scan refuses such text first.
const MAX_DEPTH: usize = 128;

/// The line where flow brackets (`[`, `{`) or indentation nest deeper than [`MAX_DEPTH`],
/// outside quotes and comments.
fn too_deep(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (n, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start_matches(' ').len();
        if indent > MAX_DEPTH * 8 {
            return Some(n + 1);
        }
        let mut quote: Option<char> = None;
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, '#') => break,
                (None, '[' | '{') => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Some(n + 1);
                    }
                }
                (None, ']' | '}') => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    None
}

/// Parses the file into a mapping (no file, or an empty one, is an empty mapping).
fn parse_root(text: Option<&str>, source: Option<&Path>) -> Result<Value, ConfigError> {
    let (Some(text), Some(path)) = (text, source) else {
        return Ok(Value::Mapping(Mapping::new()));
    };
    let syntax = |e: serde_yaml_ng::Error| {
        let mut message = e
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        // Some scanner errors leave the place out of their text; the user needs the line.
        if let Some(at) = e.location().filter(|_| !message.contains(" line ")) {
            message.push_str(&format!(" at line {} column {}", at.line(), at.column()));
        }
        ConfigError::Syntax {
            path: path.to_path_buf(),
            message,
        }
    };
    if let Some(line) = too_deep(text) {
        return Err(ConfigError::Syntax {
            path: path.to_path_buf(),
            message: format!(
                "nested more than {MAX_DEPTH} levels deep at line {line}; no config needs that"
            ),
        });
    }
    let mut value: Value = serde_yaml_ng::from_str(text).map_err(syntax)?;
    // DeerFlow files may use `<<: *anchor` merge keys; resolve them like PyYAML does.
    value.apply_merge().map_err(syntax)?;
    match value {
        Value::Null => Ok(Value::Mapping(Mapping::new())),
        v @ Value::Mapping(_) => Ok(v),
        _ => Err(ConfigError::Invalid {
            problems: vec![format!(
                "{}: the top level must be a mapping of sections (models:, subagents:, …)",
                path.display()
            )],
        }),
    }
}

/// Where a problem's value came from, to point the user at the right place.
struct Origin<'a> {
    text: Option<&'a str>,
    source: Option<&'a Path>,
    sets: &'a [SetOverride],
}

impl Origin<'_> {
    fn describe(&self, (path, msg): &Problem) -> String {
        // The last matching --set is the one that took effect.
        if let Some(set) = self
            .sets
            .iter()
            .rev()
            .find(|s| path.starts_with_set(&s.path))
        {
            return format!("{path}: {msg} (from --set {})", set.key());
        }
        let (Some(text), Some(file)) = (self.text, self.source) else {
            return format!("{path}: {msg}");
        };
        // A missing key has no line of its own: point at the nearest enclosing key.
        let mut at = path.clone();
        loop {
            if let Some(line) = line_of(text, &at) {
                return format!("{path}: {msg} (line {line} of {})", file.display());
            }
            if at.0.pop().is_none() {
                return format!("{path}: {msg} (in {})", file.display());
            }
        }
    }
}

/// Collapses list indexes (`models[0].x`, `models[2].x` → `models[*].x`) when a key is
/// ignored in more than one entry, keeping first-seen order.
fn group_ignored(ignored: &[String]) -> Vec<String> {
    let generic = |p: &str| {
        let mut out = String::new();
        let mut in_index = false;
        for c in p.chars() {
            match c {
                '[' => {
                    in_index = true;
                    out.push_str("[*]");
                }
                ']' => in_index = false,
                _ if in_index => {}
                _ => out.push(c),
            }
        }
        out
    };
    let mut shown: Vec<String> = Vec::new();
    for p in ignored {
        let g = generic(p);
        let many = ignored.iter().filter(|q| generic(q) == g).count() > 1;
        let label = if many { g } else { p.clone() };
        if !shown.contains(&label) {
            shown.push(label);
        }
    }
    shown
}

#[cfg(test)]
#[path = "load_tests.rs"]
mod tests;
