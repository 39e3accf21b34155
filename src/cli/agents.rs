//! `deerflow agents [--json]`: the sub-agent types the config yields, with effective settings.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::args::ConfigOverrides;
use super::docs::print;
use super::warning;
use crate::config;
use crate::subagent::registry::{effective_types, subagent_tools_seeing, RegistryInputs};
use crate::subagent::SubagentType;
use crate::tools::registry::ToolRegistry;
use crate::workspace::sandbox::SandboxKind;

pub fn agents(config_path: Option<PathBuf>, overrides: ConfigOverrides, as_json: bool) -> i32 {
    let (loaded, web) = match super::web::load_listed(&overrides.load_options(config_path)) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let cfg = &loaded.config;
    // `inherit` is shown as the model a run would use by default, if one is known.
    let lead = config::model_choice(None, cfg).unwrap_or_else(|_| "inherit".into());
    let inputs = RegistryInputs {
        allow_bash: cfg.sandbox.bash_allowed(false),
        timeout_flag: None,
        lead_model: &lead,
    };
    let (types, warnings) = effective_types(&cfg.subagents, &inputs);
    for w in warnings {
        warning(&w);
    }
    // The registry a run with this config would build.
    let mut tools = ToolRegistry::builtin(inputs.allow_bash);
    for tool in web.tools {
        // Web tools' names are no built-in's, and each is offered once.
        let _ = tools.register(tool);
    }
    // Every agent of a run shares its sandbox (§13); shown per type so the list keeps its shape.
    let sandbox = Sandbox {
        use_: &cfg.sandbox.use_,
        image: cfg
            .sandbox
            .image
            .as_deref()
            .filter(|_| cfg.sandbox.kind == SandboxKind::Docker),
    };
    let sandbox = &sandbox;
    if as_json {
        let list: Vec<Value> = types
            .iter()
            .map(|t| to_json(t, &tools, &loaded, sandbox))
            .collect();
        return print(&serde_json::to_string_pretty(&list).unwrap_or_default());
    }
    print(&table(&types, &tools, &loaded, sandbox))
}

/// The tools a sub-agent of this type really gets, by the rule a run applies: with
/// `view_image` when its model takes images (§14).
fn effective_tools(
    t: &SubagentType,
    tools: &ToolRegistry,
    cfg: &config::LoadedConfig,
) -> Vec<String> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| cfg.base_dir.clone());
    let vision = config::resolve_model(cfg, &t.model, &cwd).is_ok_and(|r| r.supports_vision);
    subagent_tools_seeing(t, tools, vision)
        .iter()
        .map(|tool| tool.name().to_string())
        .collect()
}

fn tools_text(t: &SubagentType, tools: &ToolRegistry, cfg: &config::LoadedConfig) -> String {
    if t.tools.is_none() && t.disallowed_tools.is_empty() {
        return "all".into();
    }
    effective_tools(t, tools, cfg).join(",")
}

/// The sandbox every agent of a run would use.
struct Sandbox<'a> {
    use_: &'a str,
    image: Option<&'a str>,
}

impl Sandbox<'_> {
    /// `docker (IMAGE)` in the table.
    fn text(&self) -> String {
        match self.image {
            Some(image) => format!("{} ({image})", self.use_),
            None => self.use_.to_string(),
        }
    }
}

fn to_json(
    t: &SubagentType,
    tools: &ToolRegistry,
    cfg: &config::LoadedConfig,
    sandbox: &Sandbox,
) -> Value {
    json!({
        "name": t.name,
        "source": t.source,
        "description": t.description,
        "tools": effective_tools(t, tools, cfg),
        "disallowed_tools": t.disallowed_tools,
        "model": t.model,
        "max_turns": t.max_turns,
        "timeout_seconds": t.timeout_seconds,
        "skills": t.skills,
        "sandbox": {"use": sandbox.use_, "image": sandbox.image},
    })
}

fn table(
    types: &[SubagentType],
    tools: &ToolRegistry,
    cfg: &config::LoadedConfig,
    sandbox: &Sandbox,
) -> String {
    let rows: Vec<[String; 8]> = types
        .iter()
        .map(|t| {
            [
                t.name.clone(),
                t.source.to_string(),
                t.model.clone(),
                t.max_turns.to_string(),
                crate::text::secs(t.timeout_seconds),
                tools_text(t, tools, cfg),
                t.skills
                    .as_ref()
                    .map(|s| {
                        if s.is_empty() {
                            "none".into()
                        } else {
                            s.join(",")
                        }
                    })
                    .unwrap_or_else(|| "all".into()),
                sandbox.text(),
            ]
        })
        .collect();
    let header = [
        "NAME",
        "SOURCE",
        "MODEL",
        "MAX_TURNS",
        "TIMEOUT_S",
        "TOOLS",
        "SKILLS",
        "SANDBOX",
    ]
    .map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |r: &[String; 8]| {
        r.iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = vec![line(&header)];
    out.extend(rows.iter().map(line));
    for t in types {
        out.push(format!("\n{}: {}", t.name, t.description));
    }
    out.join("\n")
}
