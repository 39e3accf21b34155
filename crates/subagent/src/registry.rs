//! The sub-agent type registry: built-in types, custom types from the config, per-type
//! overrides and global defaults, layered as contract §5 says, and the tools each type gets
//! from the run's tool registry. Built-in definitions are constants and never mutated: each
//! run builds fresh effective values.

use deerflow_config::SubagentsConfig;
use std::sync::Arc;

use deerflow_tools::fs::{ViewImageTool, VIEW_IMAGE};
use deerflow_tools::registry::ToolRegistry;
use deerflow_tools::ToolBox;

use super::prompts::{
    BASH_DESCRIPTION, BASH_PROMPT, GENERAL_PURPOSE_DESCRIPTION, GENERAL_PURPOSE_PROMPT,
};
use super::{SubagentType, LEAD_ONLY_TOOLS};

/// A built-in type's own definition.
struct BuiltIn {
    name: &'static str,
    description: &'static str,
    prompt: &'static str,
    tools: Option<&'static [&'static str]>,
    max_turns: u32,
    needs_bash: bool,
}

const BUILT_INS: [BuiltIn; 2] = [
    BuiltIn {
        name: "general-purpose",
        description: GENERAL_PURPOSE_DESCRIPTION,
        prompt: GENERAL_PURPOSE_PROMPT,
        tools: None,
        max_turns: 150,
        needs_bash: false,
    },
    BuiltIn {
        name: "bash",
        description: BASH_DESCRIPTION,
        prompt: BASH_PROMPT,
        tools: Some(&["bash", "ls", "read_file", "write_file", "str_replace"]),
        max_turns: 60,
        needs_bash: true,
    },
];

pub const CUSTOM_DEFAULT_MAX_TURNS: u32 = 50;
pub const CUSTOM_DEFAULT_TIMEOUT_SECONDS: f64 = 900.0;

/// Inputs besides the config section.
pub struct RegistryInputs<'a> {
    pub allow_bash: bool,
    /// `--subagent-timeout`, which beats everything.
    pub timeout_flag: Option<f64>,
    /// The lead's model name, what `inherit` means.
    pub lead_model: &'a str,
}

/// The effective types, built-ins first then custom types in name order; and warnings
/// about overrides that name no type.
pub fn effective_types(
    cfg: &SubagentsConfig,
    inp: &RegistryInputs,
) -> (Vec<SubagentType>, Vec<String>) {
    let mut types = Vec::new();
    for b in BUILT_INS.iter().filter(|b| !b.needs_bash || inp.allow_bash) {
        types.push(layer(built_in(b, cfg, inp.lead_model), cfg, inp));
    }
    let mut warnings = Vec::new();
    for (name, c) in &cfg.custom_agents {
        if BUILT_INS.iter().any(|b| b.name == name) {
            warnings.push(format!(
                "subagents.custom_agents.{name} uses a built-in type's name and is ignored; \
                 change a built-in under subagents.agents.{name}"
            ));
            continue;
        }
        let own = SubagentType {
            name: name.clone(),
            source: "custom",
            description: c.description.clone(),
            system_prompt: c.system_prompt.clone(),
            tools: c.tools.clone(),
            disallowed_tools: c.disallowed_tools.clone(),
            skills: c.skills.clone(),
            model: model_name(c.model.as_deref(), inp.lead_model),
            max_turns: c.max_turns.unwrap_or(CUSTOM_DEFAULT_MAX_TURNS),
            timeout_seconds: c.timeout_seconds.unwrap_or(CUSTOM_DEFAULT_TIMEOUT_SECONDS),
        };
        types.push(layer(own, cfg, inp));
    }
    warnings.extend(
        cfg.agents
            .keys()
            .filter(|k| {
                !types.iter().any(|t| &t.name == *k) && (k.as_str() != "bash" || inp.allow_bash)
            })
            .map(|k| format!("subagents.agents.{k} names no sub-agent type; it is ignored")),
    );
    (types, warnings)
}

/// Warnings about the names custom agents list in `tools:`, agent by agent in name order: a
/// name no tool has, then the lead-only ones. Neither stops the agent (a misspelt tool only
/// narrows its set, a lead-only tool is removed anyway), so neither is an error. `known` is
/// every tool name the run knows; lead-only names are known whether it lists them or not.
pub fn custom_agent_tool_warnings<S: AsRef<str>>(
    cfg: &SubagentsConfig,
    known: &[S],
) -> Vec<String> {
    let known: Vec<&str> = known.iter().map(AsRef::as_ref).collect();
    let listed: Vec<&str> = known
        .iter()
        .copied()
        .filter(|t| !LEAD_ONLY_TOOLS.contains(t))
        .collect();
    let mut warnings = Vec::new();
    for (name, agent) in &cfg.custom_agents {
        let Some(tools) = &agent.tools else {
            continue;
        };
        let at = format!("subagents.custom_agents.{name}.tools");
        for tool in tools.iter().map(String::as_str) {
            if !known.contains(&tool) && !LEAD_ONLY_TOOLS.contains(&tool) {
                warnings.push(format!(
                    "{at}: unknown tool '{tool}' (known: {})",
                    listed.join(", ")
                ));
            }
        }
        let lead_only: Vec<&str> = tools
            .iter()
            .map(String::as_str)
            .filter(|t| LEAD_ONLY_TOOLS.contains(t))
            .collect();
        if !lead_only.is_empty() {
            warnings.push(format!(
                "{at}: lead-only tools are always removed from sub-agents: {}",
                lead_only.join(", ")
            ));
        }
    }
    warnings
}

/// A built-in with the global defaults applied over its own definition.
fn built_in(b: &BuiltIn, cfg: &SubagentsConfig, lead_model: &str) -> SubagentType {
    SubagentType {
        name: b.name.into(),
        source: "built-in",
        description: b.description.into(),
        system_prompt: b.prompt.into(),
        tools: b.tools.map(|t| t.iter().map(|s| s.to_string()).collect()),
        disallowed_tools: Vec::new(),
        skills: None,
        model: lead_model.to_string(),
        max_turns: cfg.max_turns.unwrap_or(b.max_turns),
        timeout_seconds: cfg.timeout_seconds,
    }
}

/// Per-type override, then the timeout flag.
fn layer(mut t: SubagentType, cfg: &SubagentsConfig, inp: &RegistryInputs) -> SubagentType {
    if let Some(o) = cfg.agents.get(&t.name) {
        if let Some(v) = o.timeout_seconds {
            t.timeout_seconds = v;
        }
        if let Some(v) = o.max_turns {
            t.max_turns = v;
        }
        if let Some(m) = &o.model {
            t.model = model_name(Some(m), inp.lead_model);
        }
        if let Some(s) = &o.skills {
            t.skills = Some(s.clone());
        }
    }
    if let Some(v) = inp.timeout_flag {
        t.timeout_seconds = v;
    }
    t
}

/// The tools a sub-agent of type `t` gets from the run's registry (contract §5): its
/// allow-list (none: all the lead's tools) minus its deny-list; never a lead-only tool.
/// `deerflow agents` shows the same.
pub fn subagent_tools(t: &SubagentType, registry: &ToolRegistry) -> ToolBox {
    registry.for_subagent(t.tools.as_deref(), &t.disallowed_tools)
}

/// [`subagent_tools`], with `view_image` when the type's model takes images (`vision`)
/// and its deny-list does not name it (DeerFlow adds it to every agent on such a model).
pub fn subagent_tools_seeing(t: &SubagentType, registry: &ToolRegistry, vision: bool) -> ToolBox {
    let mut tools = subagent_tools(t, registry);
    if vision && !t.disallowed_tools.iter().any(|n| n == VIEW_IMAGE) {
        tools.push(Arc::new(ViewImageTool));
    }
    tools
}

fn model_name(m: Option<&str>, lead: &str) -> String {
    match m.map(str::trim) {
        None | Some("") | Some("inherit") => lead.to_string(),
        Some(name) => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deerflow_config::{AgentOverride, CustomAgent};
    use deerflow_tools::registry::testing::Joined;
    use std::sync::Arc;

    fn inputs(allow_bash: bool, timeout_flag: Option<f64>) -> RegistryInputs<'static> {
        RegistryInputs {
            allow_bash,
            timeout_flag,
            lead_model: "lead-model",
        }
    }

    fn custom(model: Option<&str>) -> CustomAgent {
        CustomAgent {
            description: "d".into(),
            system_prompt: "p".into(),
            tools: Some(vec!["read_file".into()]),
            disallowed_tools: vec![],
            skills: Some(vec![]),
            model: model.map(String::from),
            max_turns: None,
            timeout_seconds: None,
        }
    }

    fn find<'a>(types: &'a [SubagentType], name: &str) -> &'a SubagentType {
        types.iter().find(|t| t.name == name).unwrap()
    }

    #[test]
    fn built_ins_use_their_own_turns_and_the_global_timeout() {
        let (types, warnings) = effective_types(&SubagentsConfig::default(), &inputs(true, None));
        assert!(warnings.is_empty());
        let gp = find(&types, "general-purpose");
        assert_eq!(
            (gp.max_turns, gp.timeout_seconds, gp.model.as_str()),
            (150, 1800.0, "lead-model")
        );
        assert_eq!(gp.tools, None);
        let bash = find(&types, "bash");
        assert_eq!(bash.max_turns, 60);
        assert_eq!(
            bash.tools.as_deref().unwrap(),
            ["bash", "ls", "read_file", "write_file", "str_replace"]
        );
    }

    #[test]
    fn bash_exists_only_with_host_bash() {
        let (types, _) = effective_types(&SubagentsConfig::default(), &inputs(false, None));
        assert_eq!(
            types.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["general-purpose"]
        );
    }

    #[test]
    fn precedence_flag_then_override_then_global_then_own() {
        let mut cfg = SubagentsConfig {
            timeout_seconds: 100.0,
            max_turns: Some(20),
            ..Default::default()
        };
        // Global defaults beat the built-in's own definition.
        let (types, _) = effective_types(&cfg, &inputs(true, None));
        assert_eq!(
            (
                find(&types, "bash").max_turns,
                find(&types, "bash").timeout_seconds
            ),
            (20, 100.0)
        );
        // The per-type override beats the global defaults.
        cfg.agents.insert(
            "bash".into(),
            AgentOverride {
                timeout_seconds: Some(30.0),
                max_turns: Some(5),
                model: Some("other".into()),
                skills: Some(vec!["s".into()]),
            },
        );
        let (types, _) = effective_types(&cfg, &inputs(true, None));
        let bash = find(&types, "bash");
        assert_eq!(
            (bash.max_turns, bash.timeout_seconds, bash.model.as_str()),
            (5, 30.0, "other")
        );
        assert_eq!(bash.skills, Some(vec!["s".to_string()]));
        assert_eq!(find(&types, "general-purpose").timeout_seconds, 100.0);
        // The flag beats everything.
        let (types, _) = effective_types(&cfg, &inputs(true, Some(7.0)));
        assert!(types.iter().all(|t| t.timeout_seconds == 7.0));
    }

    #[test]
    fn custom_types_get_their_own_defaults_not_the_global_ones() {
        let mut cfg = SubagentsConfig {
            timeout_seconds: 100.0,
            max_turns: Some(20),
            ..Default::default()
        };
        cfg.custom_agents
            .insert("reviewer".into(), custom(Some("inherit")));
        cfg.custom_agents
            .insert("pinned".into(), custom(Some("fast")));
        let (types, _) = effective_types(&cfg, &inputs(false, None));
        let r = find(&types, "reviewer");
        assert_eq!(
            (r.source, r.max_turns, r.timeout_seconds, r.model.as_str()),
            ("custom", 50, 900.0, "lead-model")
        );
        assert_eq!(find(&types, "pinned").model, "fast");
    }

    #[test]
    fn built_in_definitions_are_never_mutated() {
        let mut cfg = SubagentsConfig::default();
        cfg.agents.insert(
            "general-purpose".into(),
            AgentOverride {
                max_turns: Some(1),
                ..Default::default()
            },
        );
        let (first, _) = effective_types(&cfg, &inputs(false, Some(1.0)));
        assert_eq!(find(&first, "general-purpose").max_turns, 1);
        let (again, _) = effective_types(&SubagentsConfig::default(), &inputs(false, None));
        let gp = find(&again, "general-purpose");
        assert_eq!((gp.max_turns, gp.timeout_seconds), (150, 1800.0));
    }

    #[test]
    fn unknown_override_and_built_in_custom_names_warn() {
        let mut cfg = SubagentsConfig::default();
        cfg.agents.insert("nosuch".into(), AgentOverride::default());
        cfg.agents.insert("bash".into(), AgentOverride::default());
        cfg.custom_agents
            .insert("general-purpose".into(), custom(None));
        let (types, warnings) = effective_types(&cfg, &inputs(false, None));
        assert_eq!(types.len(), 1);
        assert_eq!(types[0].source, "built-in");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings
            .iter()
            .any(|w| w.contains("subagents.agents.nosuch")));
        assert!(warnings
            .iter()
            .any(|w| w.contains("subagents.custom_agents.general-purpose")));
    }

    #[test]
    fn view_image_joins_a_type_whose_model_sees_unless_denied() {
        let mut cfg = SubagentsConfig::default();
        cfg.custom_agents.insert("reader".into(), custom(None));
        let denied = CustomAgent {
            disallowed_tools: vec![VIEW_IMAGE.into()],
            ..custom(None)
        };
        cfg.custom_agents.insert("blind".into(), denied);
        let (types, _) = effective_types(&cfg, &inputs(false, None));
        let registry = ToolRegistry::builtin(false);
        let names = |name: &str, vision: bool| -> Vec<String> {
            subagent_tools_seeing(find(&types, name), &registry, vision)
                .iter()
                .map(|t| t.name().to_string())
                .collect()
        };
        assert_eq!(names("reader", true), ["read_file", VIEW_IMAGE]);
        assert_eq!(names("reader", false), ["read_file"]);
        assert_eq!(names("blind", true), ["read_file"]);
        assert!(names("general-purpose", true).contains(&VIEW_IMAGE.to_string()));
    }

    #[test]
    fn unknown_and_lead_only_tool_names_warn_per_agent() {
        let mut cfg = SubagentsConfig::default();
        let agent = |tools: Option<&[&str]>| CustomAgent {
            tools: tools.map(|t| t.iter().map(|s| s.to_string()).collect()),
            disallowed_tools: vec!["nope".into()],
            ..custom(None)
        };
        cfg.custom_agents.insert(
            "r".into(),
            agent(Some(&[
                "read_file",
                "grpe",
                "task",
                "present_files",
                "bash",
                "mcp_x",
            ])),
        );
        cfg.custom_agents.insert("all".into(), agent(None));
        cfg.custom_agents
            .insert("a".into(), agent(Some(&["ask_clarification", "ls"])));
        let known = ["ls", "read_file", "bash", "task", "mcp_x"];
        assert_eq!(
            custom_agent_tool_warnings(&cfg, &known),
            [
                "subagents.custom_agents.a.tools: lead-only tools are always removed from \
                 sub-agents: ask_clarification",
                "subagents.custom_agents.r.tools: unknown tool 'grpe' (known: ls, read_file, \
                 bash, mcp_x)",
                "subagents.custom_agents.r.tools: lead-only tools are always removed from \
                 sub-agents: task, present_files",
            ]
        );
        // Owned names work the same (a tool registry hands out `String`s).
        let owned: Vec<String> = known.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            custom_agent_tool_warnings(&cfg, &owned),
            custom_agent_tool_warnings(&cfg, &known)
        );
    }

    fn custom_type(name: &str, tools: Option<&[&str]>, deny: &[&str]) -> SubagentType {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        SubagentType {
            name: name.into(),
            source: "custom",
            description: "d".into(),
            system_prompt: "p".into(),
            tools: tools.map(list),
            disallowed_tools: list(deny),
            skills: None,
            model: "m".into(),
            max_turns: 50,
            timeout_seconds: 900.0,
        }
    }

    fn names(tools: &ToolBox) -> Vec<&str> {
        tools.iter().map(|t| t.name()).collect()
    }

    #[test]
    fn a_tool_that_joins_at_start_up_reaches_every_agent_that_may_have_it() {
        let mut registry = ToolRegistry::builtin(true);
        registry.register(Arc::new(Joined("echo"))).unwrap();
        let lead = registry.for_lead(Arc::default());
        assert!(names(&lead).contains(&"echo"));

        let inputs = RegistryInputs {
            allow_bash: true,
            timeout_flag: None,
            lead_model: "m",
        };
        let (types, _) = effective_types(&SubagentsConfig::default(), &inputs);
        let find = |n: &str| types.iter().find(|t| t.name == n).unwrap();
        let gp = subagent_tools(find("general-purpose"), &registry);
        let all_but_lead_only: Vec<&str> = names(&lead)
            .into_iter()
            .filter(|n| !deerflow_tools::registry::LEAD_ONLY_TOOLS.contains(n))
            .collect();
        assert_eq!(names(&gp), all_but_lead_only);
        assert!(names(&gp).contains(&"echo"));
        assert_eq!(
            names(&subagent_tools(find("bash"), &registry)),
            ["ls", "read_file", "write_file", "str_replace", "bash"]
        );

        let allows = custom_type("allows", Some(&["read_file", "echo", "task"]), &[]);
        assert_eq!(
            names(&subagent_tools(&allows, &registry)),
            ["read_file", "echo"]
        );
        let lists_other = custom_type("other", Some(&["read_file", "grep"]), &[]);
        assert_eq!(
            names(&subagent_tools(&lists_other, &registry)),
            ["read_file", "grep"]
        );
        let inherits_but_denies = custom_type("denies", None, &["echo", "bash"]);
        let got = subagent_tools(&inherits_but_denies, &registry);
        assert!(!names(&got).contains(&"echo"));
        assert_eq!(names(&got).len(), 6);
        let inherits = custom_type("inherits", None, &[]);
        assert!(names(&subagent_tools(&inherits, &registry)).contains(&"echo"));
    }
}
