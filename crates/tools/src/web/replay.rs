//! Replay of web results (contract §14): one wrapper around any web tool. Under `replay:`
//! a call whose key the cassette holds is answered from it, without the network; with
//! `--record`, every result is written into the cassette. The key is the call's id for the
//! lead and `TASK_ID/CALL_ID` inside a sub-agent, so keys stay unique across a fan-out and
//! are the same on replay (call and task ids are replayed as recorded).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::{Concurrency, Tool, ToolContext, ToolOutput, ToolStatus};
use deerflow_model::providers::replay::{RecordLog, RecordedTool};
use deerflow_model::{BoxFuture, ToolArgs, ToolCall, ToolSpec};

/// The recorded results a run answers from, shared by every wrapped tool.
pub type Recorded = Arc<BTreeMap<String, RecordedTool>>;

/// `tool`, answering from `recorded` where it can and recording into `log`; the tool
/// itself when there is neither.
pub fn wrap(
    tool: Arc<dyn Tool>,
    recorded: &Recorded,
    log: Option<&Arc<RecordLog>>,
) -> Arc<dyn Tool> {
    if recorded.is_empty() && log.is_none() {
        return tool;
    }
    Arc::new(Replayed {
        inner: tool,
        recorded: recorded.clone(),
        log: log.cloned(),
    })
}

struct Replayed {
    inner: Arc<dyn Tool>,
    recorded: Recorded,
    log: Option<Arc<RecordLog>>,
}

/// The cassette key of a call made by the agent `ctx` belongs to.
fn key(call: &ToolCall, ctx: &ToolContext) -> String {
    match &ctx.limits.task_id {
        Some(task) => format!("{task}/{}", call.id),
        None => call.id.clone(),
    }
}

impl Tool for Replayed {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn spec(&self) -> ToolSpec {
        self.inner.spec()
    }

    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let key = key(call, ctx);
            let out = match self.recorded.get(&key) {
                Some(r) if r.status == "error" => ToolOutput::error(r.output.clone()),
                Some(r) => ToolOutput::ok(r.output.clone()),
                None => self.inner.call(call, ctx).await,
            };
            if let Some(log) = &self.log {
                let status = match out.status {
                    ToolStatus::Ok => "ok",
                    ToolStatus::Error => "error",
                };
                let result = RecordedTool {
                    status: status.into(),
                    output: out.text().into_owned(),
                };
                log.record_tool(key, result);
            }
            out
        })
    }

    fn concurrency(&self, call: &ToolCall) -> Concurrency {
        self.inner.concurrency(call)
    }

    fn loop_key(&self, args: &ToolArgs) -> u64 {
        self.inner.loop_key(args)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;
    use crate::SandboxLimits;

    /// A web tool that counts its calls: a call answered from the cassette never reaches it.
    pub(crate) struct Live(pub AtomicUsize);

    impl Tool for Live {
        fn name(&self) -> &str {
            "web_search"
        }
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: "web_search".into(),
                description: "live".into(),
                parameters: json!({"type": "object"}),
            }
        }
        fn call<'a>(&'a self, c: &'a ToolCall, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
            Box::pin(async move {
                self.0.fetch_add(1, Ordering::SeqCst);
                ToolOutput::ok(format!("live answer to {}", c.id))
            })
        }
        fn concurrency(&self, _: &ToolCall) -> Concurrency {
            Concurrency::Shared
        }
    }

    fn ctx(task: Option<&str>) -> ToolContext {
        let dir = std::env::temp_dir();
        ToolContext {
            workspace: Arc::new(deerflow_workspace::Workspace::new(&dir, None).unwrap()),
            limits: Arc::new(SandboxLimits {
                task_id: task.map(Into::into),
                ..Default::default()
            }),
            cancel: Default::default(),
        }
    }

    fn call(id: &str) -> ToolCall {
        ToolCall::from_raw(id.into(), "web_search".into(), r#"{"query":"q"}"#)
    }

    #[tokio::test]
    async fn recorded_calls_are_answered_from_the_cassette_and_others_run_live() {
        let live = Arc::new(Live(AtomicUsize::new(0)));
        let recorded: Recorded = Arc::new(BTreeMap::from([
            (
                "call_1".to_string(),
                RecordedTool {
                    status: "ok".into(),
                    output: "1. recorded".into(),
                },
            ),
            (
                "t1/call_1".to_string(),
                RecordedTool {
                    status: "error".into(),
                    output: "Error: tavily answered 503".into(),
                },
            ),
        ]));
        let log = Arc::new(RecordLog::default());
        let tool = wrap(live.clone(), &recorded, Some(&log));
        assert_eq!(tool.concurrency(&call("x")), Concurrency::Shared);
        let lead = tool.call(&call("call_1"), &ctx(None)).await;
        assert_eq!(
            (lead.status, lead.text().as_ref()),
            (ToolStatus::Ok, "1. recorded")
        );
        // The same call id inside a sub-agent is another call.
        let sub = tool.call(&call("call_1"), &ctx(Some("t1"))).await;
        assert_eq!(sub.status, ToolStatus::Error);
        assert_eq!(live.0.load(Ordering::SeqCst), 0);
        let other = tool.call(&call("call_2"), &ctx(Some("t1"))).await;
        assert_eq!(other.text(), "live answer to call_2");
        assert_eq!(live.0.load(Ordering::SeqCst), 1);
        // What ran, replayed or live, is recorded under its key.
        let written = log.cassette().tool_results;
        let keys: Vec<&str> = written.keys().map(String::as_str).collect();
        assert_eq!(keys, ["call_1", "t1/call_1", "t1/call_2"]);
        assert_eq!(written["t1/call_2"].output, "live answer to call_2");
        assert_eq!(written["t1/call_1"].status, "error");
    }

    #[test]
    fn without_a_cassette_or_a_recording_the_tool_is_itself() {
        let live: Arc<dyn Tool> = Arc::new(Live(AtomicUsize::new(0)));
        let same = wrap(live.clone(), &Recorded::default(), None);
        assert!(Arc::ptr_eq(&live, &same));
    }
}
