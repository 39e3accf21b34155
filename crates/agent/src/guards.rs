//! Guards over an agent's transcript: loop detection and the token budget (contract §4,
//! reference "Guards"). Plain state machines, tested without a model.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};

use deerflow_model::ToolCall;
use deerflow_tools::{loop_key, Toolset};

/// The loop detector's limits are the config's `loop_detection` section as it is (its
/// defaults are DeerFlow's), so there is one list of them.
pub use deerflow_config::LoopDetectionConfig as LoopLimits;

#[derive(Debug, Clone, PartialEq)]
pub enum LoopVerdict {
    Fine,
    /// Tell the model (and the event stream) it is repeating itself.
    Warn(String),
    /// Drop this response's tool calls and ask for a final answer.
    Stop(String),
}

/// The tool the per-tool frequency limits leave out.
const UNCOUNTED_TOOL: &str = "task";

/// Tracks one agent's responses.
pub struct LoopDetector {
    limits: LoopLimits,
    window: VecDeque<u64>,
    per_tool: HashMap<String, u32>,
    warned_hashes: Vec<u64>,
    warned_tools: Vec<String>,
}

impl LoopDetector {
    pub fn new(limits: LoopLimits) -> Self {
        Self {
            limits,
            window: VecDeque::new(),
            per_tool: HashMap::new(),
            warned_hashes: Vec::new(),
            warned_tools: Vec::new(),
        }
    }

    /// Takes one response's calls; `tools` says what makes two calls of a tool the same.
    pub fn observe(&mut self, calls: &[ToolCall], tools: &Toolset) -> LoopVerdict {
        if !self.limits.enabled || calls.is_empty() {
            return LoopVerdict::Fine;
        }
        let h = response_hash(calls, tools);
        self.window.push_back(h);
        while self.window.len() > self.limits.window_size.max(1) as usize {
            self.window.pop_front();
        }
        let repeats = self.window.iter().filter(|x| **x == h).count() as u32;
        if repeats >= self.limits.hard_limit {
            return LoopVerdict::Stop(format!(
                "the same tool calls were repeated {repeats} times; tool calls stopped, asking for a final answer"
            ));
        }
        if let Some(v) = self.count_tools(calls) {
            return v;
        }
        if repeats >= self.limits.warn_threshold && !self.warned_hashes.contains(&h) {
            self.warned_hashes.push(h);
            return LoopVerdict::Warn(format!(
                "the same tool calls were repeated {repeats} times; change approach or give the final answer"
            ));
        }
        LoopVerdict::Fine
    }

    fn count_tools(&mut self, calls: &[ToolCall]) -> Option<LoopVerdict> {
        let mut verdict = None;
        // `task` calls are bounded by --max-tasks instead: a 1,000-item fan-out in one
        // response is the point of the tool, not a loop.
        for c in calls.iter().filter(|c| c.name != UNCOUNTED_TOOL) {
            let n = self.per_tool.entry(c.name.clone()).or_default();
            *n += 1;
            let n = *n;
            if n >= self.limits.tool_freq_hard_limit {
                return Some(LoopVerdict::Stop(format!(
                    "tool '{}' was called {n} times; tool calls stopped, asking for a final answer",
                    c.name
                )));
            }
            if n >= self.limits.tool_freq_warn && !self.warned_tools.contains(&c.name) {
                self.warned_tools.push(c.name.clone());
                verdict = Some(LoopVerdict::Warn(format!(
                    "tool '{}' was called {n} times; wrap up and give the final answer soon",
                    c.name
                )));
            }
        }
        verdict
    }
}

/// Order-independent hash of a response's tool calls, each reduced to its name and its
/// tool's loop key.
fn response_hash(calls: &[ToolCall], tools: &Toolset) -> u64 {
    let mut keys: Vec<(&str, u64)> = calls
        .iter()
        .map(|c| (c.name.as_str(), call_key(c, tools)))
        .collect();
    keys.sort_unstable();
    let mut h = DefaultHasher::new();
    keys.hash(&mut h);
    h.finish()
}

/// The call's key as its tool defines it ([`deerflow_tools::Tool::loop_key`]); all the
/// arguments for a tool the agent does not have. Arguments that were no JSON object are
/// compared as they were sent.
fn call_key(c: &ToolCall, tools: &Toolset) -> u64 {
    if let Some(raw) = &c.invalid_arguments {
        let mut h = DefaultHasher::new();
        raw.hash(&mut h);
        return h.finish();
    }
    match tools.find(&c.name) {
        Some(tool) => tool.loop_key(&c.arguments),
        None => loop_key::all_arguments(&c.arguments),
    }
}

/// The run-wide token budget (`--max-tokens` / `token_budget`).
pub struct Budget {
    max: Option<u64>,
    warned: AtomicBool,
}

/// What a response did to the budget.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct BudgetCheck {
    /// 80% is reached for the first time (also when one response jumps past 100%).
    pub warn: bool,
    pub exceeded: bool,
}

impl Budget {
    pub fn new(max: Option<u64>) -> Self {
        Self {
            max,
            warned: AtomicBool::new(false),
        }
    }

    pub fn max(&self) -> Option<u64> {
        self.max
    }

    /// Checks the run's total after a response; `warn` is set once per run.
    pub fn check(&self, total: u64) -> BudgetCheck {
        let Some(max) = self.max else {
            return BudgetCheck::default();
        };
        let warn = total.saturating_mul(5) >= max.saturating_mul(4)
            && !self.warned.swap(true, Ordering::SeqCst);
        BudgetCheck {
            warn,
            exceeded: total >= max,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::LazyLock;

    use serde_json::{json, Value};

    use super::*;
    use deerflow_model::BoxFuture;
    use deerflow_tools::registry::ToolRegistry;
    use deerflow_tools::{Tool, ToolContext, ToolOutput};

    /// A tool from elsewhere (an MCP server's): deerflow knows nothing of its arguments.
    struct Remote;

    impl Tool for Remote {
        fn name(&self) -> &str {
            "mcp_search"
        }
        fn spec(&self) -> deerflow_model::ToolSpec {
            deerflow_model::ToolSpec {
                name: "mcp_search".into(),
                description: String::new(),
                parameters: json!({"type": "object"}),
            }
        }
        fn call<'a>(&'a self, _: &'a ToolCall, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
            Box::pin(async { ToolOutput::ok("") })
        }
    }

    /// The lead's built-in tools and one remote tool.
    fn tools() -> &'static Toolset {
        static TOOLS: LazyLock<Toolset> = LazyLock::new(|| {
            let mut box_ = ToolRegistry::builtin(true).for_lead(Default::default());
            box_.push(std::sync::Arc::new(Remote));
            Toolset::new(box_)
        });
        &TOOLS
    }

    fn call(name: &str, args: Value) -> ToolCall {
        ToolCall {
            id: "x".into(),
            name: name.into(),
            arguments: args.into(),
            invalid_arguments: None,
            extra: Default::default(),
        }
    }

    #[test]
    fn warns_at_three_and_stops_at_five() {
        let mut d = LoopDetector::new(LoopLimits::default());
        let c = [call("ls", json!({"path": "."}))];
        assert_eq!(d.observe(&c, tools()), LoopVerdict::Fine);
        assert_eq!(d.observe(&c, tools()), LoopVerdict::Fine);
        assert!(matches!(d.observe(&c, tools()), LoopVerdict::Warn(_)));
        assert_eq!(d.observe(&c, tools()), LoopVerdict::Fine);
        assert!(matches!(d.observe(&c, tools()), LoopVerdict::Stop(_)));
    }

    #[test]
    fn order_of_calls_does_not_matter_and_read_file_buckets_lines() {
        let mut d = LoopDetector::new(LoopLimits {
            warn_threshold: 2,
            ..Default::default()
        });
        let a = call("read_file", json!({"path": "a", "start_line": 1}));
        let b = call("grep", json!({"pattern": "x"}));
        d.observe(&[a.clone(), b.clone()], tools());
        let a2 = call("read_file", json!({"path": "a", "start_line": 150}));
        assert!(matches!(d.observe(&[b, a2], tools()), LoopVerdict::Warn(_)));
        let a3 = call("read_file", json!({"path": "a", "start_line": 450}));
        assert_eq!(d.observe(&[a3], tools()), LoopVerdict::Fine);
    }

    /// Calls whose arguments differ are not repeats, for any tool whose key is all its
    /// arguments (`present_files`, a remote tool, one the agent does not have); the same
    /// call six times is, and so are calls differing only where the tool's key does not look.
    #[test]
    fn a_tools_loop_key_decides_what_a_repeat_is() {
        let six = |name: &str, args: &dyn Fn(usize) -> Value| {
            let mut d = LoopDetector::new(LoopLimits::default());
            (0..6)
                .map(|i| d.observe(&[call(name, args(i))], tools()))
                .collect::<Vec<_>>()
        };
        let fine = vec![LoopVerdict::Fine; 6];
        let files = |i: usize| json!({"filepaths": [format!("out/{i}.md")]});
        assert_eq!(six("present_files", &files), fine);
        let query = |i: usize| json!({"query": "same", "page": i});
        assert_eq!(six("mcp_search", &query), fine);
        assert_eq!(six("not_a_tool", &query), fine);
        let grep = |i: usize| json!({"pattern": "x", "max_results": i + 1});
        for (name, args) in [
            (
                "present_files",
                &(|_| json!({"filepaths": ["a.md"]})) as &dyn Fn(usize) -> Value,
            ),
            ("mcp_search", &|_| json!({"query": "same", "page": 1})),
            ("grep", &grep),
        ] {
            let verdicts = six(name, args);
            assert!(
                matches!(verdicts[2], LoopVerdict::Warn(_)),
                "{name}: {verdicts:?}"
            );
            assert!(
                matches!(verdicts[4], LoopVerdict::Stop(_)),
                "{name}: {verdicts:?}"
            );
        }
    }

    #[test]
    fn window_forgets_old_responses() {
        let mut d = LoopDetector::new(LoopLimits {
            window_size: 3,
            ..Default::default()
        });
        let c = [call("ls", json!({}))];
        for i in 0..10 {
            d.observe(&c, tools());
            d.observe(&[call("ls", json!({"path": i.to_string()}))], tools());
            d.observe(&[call("glob", json!({"pattern": i.to_string()}))], tools());
        }
        assert_eq!(
            d.observe(&[call("grep", json!({"pattern": "new"}))], tools()),
            LoopVerdict::Fine
        );
    }

    #[test]
    fn per_tool_frequency() {
        let mut d = LoopDetector::new(LoopLimits {
            tool_freq_warn: 2,
            tool_freq_hard_limit: 3,
            ..Default::default()
        });
        assert_eq!(
            d.observe(&[call("grep", json!({"pattern": "1"}))], tools()),
            LoopVerdict::Fine
        );
        assert!(matches!(
            d.observe(&[call("grep", json!({"pattern": "2"}))], tools()),
            LoopVerdict::Warn(_)
        ));
        assert!(matches!(
            d.observe(&[call("grep", json!({"pattern": "3"}))], tools()),
            LoopVerdict::Stop(_)
        ));
    }

    #[test]
    fn a_large_fan_out_is_not_a_loop() {
        let mut d = LoopDetector::new(LoopLimits::default());
        let calls: Vec<_> = (0..1000)
            .map(|i| call("task", json!({"description": i.to_string()})))
            .collect();
        assert_eq!(d.observe(&calls, tools()), LoopVerdict::Fine);
    }

    #[test]
    fn disabled_detector_never_fires() {
        let mut d = LoopDetector::new(LoopLimits {
            enabled: false,
            ..Default::default()
        });
        for _ in 0..10 {
            assert_eq!(
                d.observe(&[call("ls", json!({}))], tools()),
                LoopVerdict::Fine
            );
        }
    }

    #[test]
    fn budget_warns_once_then_exceeds() {
        let b = Budget::new(Some(100));
        let check = |warn, exceeded| BudgetCheck { warn, exceeded };
        assert_eq!(b.check(79), check(false, false));
        assert_eq!(b.check(80), check(true, false));
        assert_eq!(b.check(90), check(false, false));
        assert_eq!(b.check(100), check(false, true));
        assert_eq!(Budget::new(None).check(u64::MAX), check(false, false));
        let jump = Budget::new(Some(100));
        assert_eq!(jump.check(150), check(true, true));
    }
}
