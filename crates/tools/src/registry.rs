//! The run's tool registry: the built-in tools plus the tools that join at start-up (MCP
//! servers' tools), built once per run. The lead and every sub-agent type take their tools
//! from the same registry, so a tool that joins reaches all of them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::lead::{AskClarificationTool, PresentFilesTool};
use super::{bash, fs, search, Tool, ToolBox};

/// Tools only the lead agent has. They are not in the registry (they are wired to the lead
/// by the run), no sub-agent ever gets them, and no registered tool may take their names.
pub const LEAD_ONLY_TOOLS: [&str; 3] = ["task", "ask_clarification", "present_files"];

/// Why a tool cannot join: its name is taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameTaken {
    #[error("a tool named '{0}' cannot be added: a tool of that name is already registered")]
    Registered(String),
    #[error("a tool named '{0}' cannot be added: the name belongs to a tool of the lead agent")]
    LeadOnly(String),
}

#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    /// Name → position in `tools`: a server may bring tens of thousands of tools, and each
    /// registration looks its name up.
    index: HashMap<String, usize>,
}

impl ToolRegistry {
    /// The file and search tools, and `bash` when host bash is allowed.
    pub fn builtin(allow_bash: bool) -> Self {
        let mut tools: ToolBox = vec![
            Arc::new(fs::LsTool),
            Arc::new(fs::ReadFileTool),
            Arc::new(fs::WriteFileTool),
            Arc::new(fs::StrReplaceTool),
            Arc::new(search::GlobTool),
            Arc::new(search::GrepTool),
        ];
        if allow_bash {
            tools.push(Arc::new(bash::BashTool));
        }
        let index = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name().to_string(), i))
            .collect();
        Self { tools, index }
    }

    /// Adds a tool that joins at start-up, after the ones already there.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), NameTaken> {
        let name = tool.name();
        if LEAD_ONLY_TOOLS.contains(&name) {
            return Err(NameTaken::LeadOnly(name.to_string()));
        }
        if self.index.contains_key(name) {
            return Err(NameTaken::Registered(name.to_string()));
        }
        self.index.insert(name.to_string(), self.tools.len());
        self.tools.push(tool);
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.index.get(name).and_then(|&i| self.tools.get(i))
    }

    /// Every registered tool's name, in registration order: what a custom agent's `tools:`
    /// may name besides the lead-only tools. (A registry built with host bash allowed knows
    /// every built-in name, whatever a given run allows.)
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    /// The lead's tools: every registered tool, then `present_files` (recording into
    /// `artifacts`) and `ask_clarification`. The run adds `task` when sub-agents are on.
    pub fn for_lead(&self, artifacts: Arc<Mutex<Vec<String>>>) -> ToolBox {
        let mut tools = self.tools.clone();
        tools.push(Arc::new(PresentFilesTool { artifacts }));
        tools.push(Arc::new(AskClarificationTool));
        tools
    }

    /// A sub-agent's tools (contract §5): the allow-list (`None`: all the lead's tools) minus
    /// the deny-list, in registration order. Lead-only tools are never registered, so no
    /// list can bring them in.
    pub fn for_subagent(&self, allow: Option<&[String]>, deny: &[String]) -> ToolBox {
        self.tools
            .iter()
            .filter(|t| {
                let name = t.name();
                allow.is_none_or(|a| a.iter().any(|n| n == name)) && !deny.iter().any(|n| n == name)
            })
            .cloned()
            .collect()
    }
}

/// A tool double for the registry tests here and above.
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use super::Tool;
    use crate::{ToolContext, ToolOutput};
    use deerflow_model::{BoxFuture, ToolCall, ToolSpec};

    /// A tool that joins at start-up, as an MCP server's tool would.
    pub struct Joined(pub &'static str);

    impl Tool for Joined {
        fn name(&self) -> &str {
            self.0
        }
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: self.0.into(),
                description: "joined at start-up".into(),
                parameters: serde_json::json!({"type": "object", "properties": {}, "required": []}),
            }
        }
        fn call<'a>(&'a self, _: &'a ToolCall, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
            Box::pin(async { ToolOutput::ok("joined") })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Joined;
    use super::*;
    use crate::{ToolContext, ToolOutput};
    use deerflow_model::{BoxFuture, ToolCall, ToolSpec};

    fn names(tools: &ToolBox) -> Vec<&str> {
        tools.iter().map(|t| t.name()).collect()
    }

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn builtins_and_bash_only_when_allowed() {
        assert_eq!(
            ToolRegistry::builtin(false).names(),
            [
                "ls",
                "read_file",
                "write_file",
                "str_replace",
                "glob",
                "grep"
            ]
        );
        assert_eq!(
            ToolRegistry::builtin(true).names(),
            [
                "ls",
                "read_file",
                "write_file",
                "str_replace",
                "glob",
                "grep",
                "bash"
            ]
        );
    }

    #[test]
    fn names_agree_with_specs() {
        for t in ToolRegistry::builtin(true).for_lead(Arc::default()) {
            assert_eq!(t.name(), t.spec().name);
        }
    }

    #[test]
    fn a_name_collision_is_refused() {
        let mut r = ToolRegistry::builtin(true);
        r.register(Arc::new(Joined("echo"))).unwrap();
        let err = r.register(Arc::new(Joined("echo"))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a tool named 'echo' cannot be added: a tool of that name is already registered"
        );
        assert!(r.register(Arc::new(Joined("read_file"))).is_err());
        for name in LEAD_ONLY_TOOLS {
            let err = r.register(Arc::new(Joined(name))).unwrap_err();
            assert_eq!(err, NameTaken::LeadOnly(name.into()));
            assert!(err.to_string().contains("lead agent"), "{err}");
        }
        assert_eq!(r.names().iter().filter(|n| **n == "echo").count(), 1);
        assert_eq!(r.names().len(), 8);
    }

    /// A joined tool with a made-up name.
    struct Named(String);

    impl Tool for Named {
        fn name(&self) -> &str {
            &self.0
        }
        fn spec(&self) -> ToolSpec {
            Joined("x").spec()
        }
        fn call<'a>(&'a self, c: &'a ToolCall, x: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
            Joined("x").call(c, x)
        }
    }

    /// Registration looked every name up by scanning (20,000 MCP tools took 13–22 s);
    /// 200,000 now take a fraction of the bound even in debug, while a scan would need
    /// some 2·10¹⁰ comparisons.
    #[test]
    fn registering_many_tools_is_linear() {
        let mut r = ToolRegistry::builtin(true);
        let start = std::time::Instant::now();
        for i in 0..200_000 {
            r.register(Arc::new(Named(format!("mcp_tool_{i}"))))
                .unwrap();
        }
        assert!(r.register(Arc::new(Named("mcp_tool_7".into()))).is_err());
        assert_eq!(
            r.get("mcp_tool_199999").map(|t| t.name()),
            Some("mcp_tool_199999")
        );
        assert_eq!(r.get("bash").map(|t| t.name()), Some("bash"));
        assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
    }

    #[test]
    fn allow_and_deny_lists() {
        let mut r = ToolRegistry::builtin(true);
        r.register(Arc::new(Joined("echo"))).unwrap();
        let mut lead = r.names();
        lead.extend(["present_files", "ask_clarification"]);
        assert_eq!(names(&r.for_lead(Arc::default())), lead);
        assert_eq!(names(&r.for_subagent(None, &[])), r.names());
        let allow = strings(&["grep", "echo", "nosuch", "task"]);
        assert_eq!(names(&r.for_subagent(Some(&allow), &[])), ["grep", "echo"]);
        let deny = strings(&["echo", "ls"]);
        assert_eq!(names(&r.for_subagent(Some(&allow), &deny)), ["grep"]);
        assert_eq!(
            names(&r.for_subagent(None, &deny)),
            [
                "read_file",
                "write_file",
                "str_replace",
                "glob",
                "grep",
                "bash"
            ]
        );
        assert!(r.for_subagent(Some(&[]), &[]).is_empty());
    }
}
