//! The agent loop's decisions, driven by a scripted model and a recording tool: what ends a
//! loop, which tool calls run, what the model is sent next, and what the context hook sees.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::context::{ContextPolicy, History, PreCall};
use super::guards::{Budget, LoopLimits};
use super::{run_agent, Agent, AgentEnd, KeepAll, LeadObserver, Progress, RunControl, RunShared};
use crate::testing::{call, calls, text, Capture, Echo, Script};
use deerflow_events::usage::Ledger;
use deerflow_events::{Event, WarningCode};
use deerflow_model::output_schema::OutputSchema;
use deerflow_model::{
    AgentId, BoxFuture, ChatRequest, Message, ModelError, ModelLimits, ModelResponse, ToolCall,
};
use deerflow_tools::{SandboxLimits, ToolContext};
use deerflow_workspace::Workspace;

struct Outcome {
    end: AgentEnd,
    requests: Vec<ChatRequest>,
    tool_calls: Vec<Value>,
    events: Vec<Event>,
}

struct Setup {
    script: Vec<Result<ModelResponse, ModelError>>,
    max_turns: u32,
    max_tokens: Option<u64>,
    loop_limits: LoopLimits,
    context: Arc<dyn ContextPolicy>,
    limits: ModelLimits,
    cancelled: bool,
    output_schema: Option<Arc<OutputSchema>>,
    /// Tools besides the recording `echo`.
    tools: deerflow_tools::ToolBox,
    stops: deerflow_model::StopRules,
    /// Files written into the workspace before the run.
    files: Vec<(&'static str, Vec<u8>)>,
    task_images: Vec<deerflow_model::image::Image>,
}

impl Setup {
    fn new(script: Vec<Result<ModelResponse, ModelError>>) -> Self {
        Self {
            script,
            max_turns: 10,
            max_tokens: None,
            loop_limits: LoopLimits::default(),
            context: Arc::new(KeepAll),
            limits: ModelLimits::default(),
            cancelled: false,
            output_schema: None,
            tools: Vec::new(),
            stops: Default::default(),
            files: Vec::new(),
            task_images: Vec::new(),
        }
    }

    async fn run(self) -> Outcome {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in &self.files {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        let model = Arc::new(Script::new(self.script).with_limits(self.limits));
        let (events, writer, seen) = Capture::start();
        let tool_calls = Arc::new(Mutex::new(Vec::new()));
        let control = Arc::new(RunControl::new(None));
        let cancel = CancellationToken::new();
        if self.cancelled {
            cancel.cancel();
        }
        let agent = Agent {
            id: AgentId::Lead,
            caller: "lead".into(),
            model: model.clone(),
            model_name: "script".into(),
            system: "be brief".into(),
            tools: Arc::new(deerflow_tools::Toolset::new(
                [Arc::new(Echo {
                    calls: tool_calls.clone(),
                }) as Arc<dyn deerflow_tools::Tool>]
                .into_iter()
                .chain(self.tools)
                .collect(),
            )),
            context: self.context,
            max_turns: self.max_turns,
            tool_ctx: ToolContext {
                workspace: Arc::new(Workspace::new(dir.path(), None).unwrap()),
                limits: Arc::new(SandboxLimits::default()),
                cancel,
            },
            events: events.clone(),
            observer: Arc::new(LeadObserver {
                events: events.clone(),
                marks: None,
            }),
            progress: Arc::new(Progress::default()),
            output_schema: self.output_schema,
            task_images: self.task_images,
        };
        let shared = RunShared {
            ledger: Arc::new(Ledger::new(HashMap::new())),
            budget: Budget::new(self.max_tokens),
            loop_limits: self.loop_limits,
            control,
            context: Arc::new(KeepAll),
            stops: self.stops,
        };
        let end = run_agent(&agent, &shared, "the task".into()).await;
        drop(agent);
        drop(events);
        writer.finish(|| false).await;
        let requests = model.requests();
        let tool_calls = tool_calls.lock().unwrap().clone();
        let events = seen
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.event.clone())
            .collect();
        Outcome {
            end,
            requests,
            tool_calls,
            events,
        }
    }
}

fn final_text(t: &str) -> AgentEnd {
    AgentEnd::Final {
        text: Some(t.into()),
        stop_reason: None,
    }
}

fn warnings(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Warning { code, .. } => Some(code.to_string()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_response_without_calls_is_the_final_answer() {
    let o = Setup::new(vec![text("done")]).run().await;
    assert_eq!(o.end, final_text("done"));
    assert_eq!(o.requests.len(), 1);
    assert_eq!(
        &*o.requests[0].messages,
        &[Message::User("the task".into())]
    );
    assert!(!o.requests[0].tool_choice_none);
}

#[tokio::test]
async fn results_go_back_in_call_order_after_the_assistant_message() {
    let o = Setup::new(vec![
        calls(vec![call("a", "one"), call("b", "two")], None),
        text("done"),
    ])
    .run()
    .await;
    assert_eq!(o.end, final_text("done"));
    assert_eq!(o.tool_calls.len(), 2);
    let second = &o.requests[1].messages;
    assert_eq!(second.len(), 4);
    assert!(matches!(&second[1], Message::Assistant { tool_calls, .. } if tool_calls.len() == 2));
    let results: Vec<(&str, &str)> = second[2..]
        .iter()
        .map(|m| match m {
            Message::Tool {
                call_id, content, ..
            } => (call_id.as_str(), content.as_str()),
            other => panic!("not a tool result: {other:?}"),
        })
        .collect();
    assert_eq!(results, [("a", "one"), ("b", "two")]);
}

#[tokio::test]
async fn repeated_and_missing_ids_are_made_unique() {
    let o = Setup::new(vec![
        calls(vec![call("x", "1"), call("x", "2"), call("", "3")], None),
        calls(vec![call("x", "4")], None),
        text("done"),
    ])
    .run()
    .await;
    let ids: Vec<String> = o.requests[2]
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { call_id, .. } => Some(call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["x", "x-2", "call_1_3", "x-3"]);
}

#[tokio::test]
async fn the_last_turn_drops_its_calls_and_keeps_the_last_text() {
    let mut first = calls(vec![call("a", "1")], None).unwrap();
    first.text = Some("working on it".into());
    let mut s = Setup::new(vec![Ok(first), calls(vec![call("b", "2")], None)]);
    s.max_turns = 2;
    let o = s.run().await;
    assert_eq!(
        o.end,
        AgentEnd::MaxTurns {
            last_text: Some("working on it".into())
        }
    );
    assert_eq!(
        o.tool_calls.len(),
        1,
        "the second response's call never ran"
    );
}

#[tokio::test]
async fn reaching_the_budget_drops_the_calls() {
    let mut s = Setup::new(vec![calls(vec![call("a", "1")], Some(100))]);
    s.max_tokens = Some(100);
    let o = s.run().await;
    assert_eq!(o.end, AgentEnd::Budget { last_text: None });
    assert!(o.tool_calls.is_empty());
    assert!(warnings(&o.events).contains(&"budget".to_string()));
}

#[tokio::test]
async fn a_looping_agent_is_asked_once_more_without_tools() {
    let same = || calls(vec![call("a", "same")], None);
    let mut s = Setup::new(vec![same(), same(), same(), text("final")]);
    s.loop_limits = LoopLimits {
        warn_threshold: 2,
        hard_limit: 3,
        ..LoopLimits::default()
    };
    let o = s.run().await;
    assert_eq!(
        o.end,
        AgentEnd::Final {
            text: Some("final".into()),
            stop_reason: Some("loop_capped")
        }
    );
    // The third response reached the hard limit: its call was dropped.
    assert_eq!(o.tool_calls.len(), 2);
    let last = o.requests.last().unwrap();
    assert!(last.tool_choice_none);
    assert_eq!(warnings(&o.events), ["loop_detected", "loop_detected"]);
}

#[tokio::test]
async fn unknown_tools_and_invalid_arguments_are_tool_errors() {
    let unknown = ToolCall {
        name: "nope".into(),
        ..call("u", "")
    };
    let invalid = ToolCall::from_raw("i".into(), "echo".into(), "{not json");
    let o = Setup::new(vec![calls(vec![unknown, invalid], None), text("done")])
        .run()
        .await;
    assert!(o.tool_calls.is_empty());
    let contents: Vec<String> = o.requests[1]
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert!(contents[0].starts_with("Error: unknown tool 'nope'. Available tools: echo"));
    assert!(contents[1].contains("not valid JSON"));
    assert_eq!(o.end, final_text("done"));
}

#[tokio::test]
async fn a_model_error_fails_the_agent_and_cancellation_stops_it() {
    let o = Setup::new(vec![Err(ModelError::Script("boom".into()))])
        .run()
        .await;
    assert_eq!(o.end, AgentEnd::Failed("boom".into()));
    let mut s = Setup::new(vec![text("never")]);
    s.cancelled = true;
    let o = s.run().await;
    assert_eq!(o.end, AgentEnd::Cancelled);
    assert!(o.requests.is_empty());
}

/// (turn, last input tokens, context window, history length) at one hook call.
type Seen = (usize, Option<u64>, Option<u64>, usize);

/// Records what it saw and keeps only the task and the last message.
struct Shrink {
    seen: Mutex<Vec<Seen>>,
}

impl ContextPolicy for Shrink {
    fn before_call<'a>(&'a self, history: &'a mut History, at: PreCall<'a>) -> BoxFuture<'a, bool> {
        self.seen.lock().unwrap().push((
            at.turn,
            at.last_usage.map(|u| u.input_tokens),
            at.limits.context_window,
            history.len(),
        ));
        if history.len() > 2 {
            let m = history.messages();
            let kept = vec![m[0].clone(), m[m.len() - 1].clone()];
            history.replace(kept, Default::default());
        }
        Box::pin(async { false })
    }
}

#[tokio::test]
async fn the_context_hook_sees_usage_and_limits_and_its_history_is_sent() {
    let policy = Arc::new(Shrink {
        seen: Mutex::default(),
    });
    let mut s = Setup::new(vec![
        calls(vec![call("a", "1")], Some(500)),
        calls(vec![call("b", "2")], None),
        text("done"),
    ]);
    s.context = policy.clone();
    s.limits = ModelLimits {
        context_window: Some(8000),
        max_output_tokens: None,
    };
    let o = s.run().await;
    assert_eq!(o.end, final_text("done"));
    let seen = policy.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (0, None, Some(8000), 1),
            (1, Some(500), Some(8000), 3),
            (2, None, Some(8000), 4),
        ]
    );
    // What the hook kept is exactly what the model got.
    assert_eq!(o.requests[1].messages.len(), 2);
    assert!(matches!(&o.requests[1].messages[1], Message::Tool { call_id, .. } if call_id == "a"));
    assert_eq!(o.requests[2].messages.len(), 2);
}

fn with_schema(script: Vec<Result<ModelResponse, ModelError>>) -> Setup {
    let mut s = Setup::new(script);
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"]
    });
    s.output_schema = Some(Arc::new(OutputSchema::new("answer", schema).unwrap()));
    s
}

fn schema_warnings(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Warning { code, message, .. } if *code == WarningCode::SchemaRetry => {
                Some(message.clone())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_valid_final_answer_ends_the_loop_without_its_fence() {
    let o = with_schema(vec![text("```json\n{\"ok\": true}\n```")])
        .run()
        .await;
    assert_eq!(o.end, final_text("{\"ok\": true}"));
    assert_eq!(o.requests.len(), 1);
    assert!(
        o.requests[0].output_schema.is_some(),
        "sent with the request"
    );
    assert!(schema_warnings(&o.events).is_empty());
}

#[tokio::test]
async fn an_invalid_final_answer_goes_back_with_its_violations() {
    let o = with_schema(vec![
        text("All good!"),
        calls(vec![call("a", "1")], None),
        text("{\"ok\": \"yes\"}"),
        text("{\"ok\": true}"),
    ])
    .run()
    .await;
    assert_eq!(o.end, final_text("{\"ok\": true}"));
    assert_eq!(o.requests.len(), 4, "the retries are turns");
    let second = &o.requests[1].messages;
    assert!(matches!(&second[1], Message::Assistant { text: Some(t), .. } if t == "All good!"));
    let Message::User(feedback) = &second[2] else {
        panic!("no feedback: {second:?}")
    };
    assert!(
        feedback.contains("- (root): the answer is not one JSON value"),
        "{feedback}"
    );
    // Tools stay available between the tries.
    assert_eq!(o.tool_calls.len(), 1);
    let Some(Message::User(feedback)) = o.requests[3].messages.last() else {
        panic!("no feedback")
    };
    assert!(feedback.contains("- /ok: "), "{feedback}");
    let w = schema_warnings(&o.events);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].starts_with(
            "the final answer does not match the output schema, retry 1 of 2: (root): "
        ),
        "{w:?}"
    );
    assert!(w[1].contains("retry 2 of 2: /ok: "), "{w:?}");
}

#[tokio::test]
async fn a_third_invalid_answer_fails_the_agent_naming_the_first_violation() {
    let o = with_schema(vec![text("no"), text("[]"), text("{}")])
        .run()
        .await;
    let AgentEnd::Failed(e) = &o.end else {
        panic!("{:?}", o.end)
    };
    assert!(
        e.starts_with(
            "the final answer does not match the output schema after 2 retries: (root): "
        ) && e.contains("\"ok\" is a required property"),
        "{e}"
    );
    assert_eq!(o.requests.len(), 3);
    assert_eq!(schema_warnings(&o.events).len(), 2);
}

#[tokio::test]
async fn no_retry_past_the_turn_limit_or_the_budget() {
    let mut s = with_schema(vec![text("no")]);
    s.max_turns = 1;
    let o = s.run().await;
    assert_eq!(
        o.end,
        AgentEnd::MaxTurns {
            last_text: Some("no".into())
        }
    );
    assert!(schema_warnings(&o.events).is_empty());
    let mut answer = text("no").unwrap();
    answer.usage = calls(vec![], Some(100)).unwrap().usage;
    let mut s = with_schema(vec![Ok(answer)]);
    s.max_tokens = Some(100);
    let o = s.run().await;
    assert_eq!(
        o.end,
        AgentEnd::Budget {
            last_text: Some("no".into())
        }
    );
}

#[tokio::test]
async fn without_a_schema_any_answer_is_final() {
    let o = Setup::new(vec![text("not JSON")]).run().await;
    assert_eq!(o.end, final_text("not JSON"));
    assert!(o.requests[0].output_schema.is_none());
}

// ---------------------------------------------------------------------------------------------
// Summarization through the loop (the policy of `compaction.rs`, with the scripted model).
// ---------------------------------------------------------------------------------------------

use super::compaction::{RunContext, Size, Summarization};
use deerflow_model::CallPurpose;

fn summarizing(triggers: Vec<Size>, keep: Size) -> Arc<dyn ContextPolicy> {
    Arc::new(RunContext {
        summarization: Some(Summarization {
            triggers,
            keep,
            trim_tokens: 1000,
            prompt: None,
            model: None,
        }),
        tool_results: None,
    })
}

fn compactions(events: &[Event]) -> Vec<(u32, u32, Option<u64>, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ContextCompacted {
                messages_before,
                messages_after,
                input_tokens_before,
                reason,
            } => Some((
                *messages_before,
                *messages_after,
                *input_tokens_before,
                reason.to_string(),
            )),
            _ => None,
        })
        .collect()
}

fn usage_callers(events: &[Event]) -> Vec<(String, String, Option<u64>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Usage {
                caller,
                model,
                input_tokens,
                ..
            } => Some((caller.clone(), model.clone(), *input_tokens)),
            _ => None,
        })
        .collect()
}

fn overflow() -> Result<ModelResponse, ModelError> {
    Err(ModelError::Http {
        provider: "openai".into(),
        status: 400,
        message: "request (6033 tokens) exceeds the available context size (4096 tokens), try increasing it".into(),
        retry_after: None,
    })
}

fn summary(t: &str, tokens: u64) -> Result<ModelResponse, ModelError> {
    let mut r = text(t)?;
    r.usage = Some(deerflow_model::Usage {
        input_tokens: tokens,
        output_tokens: 1,
        total_tokens: tokens + 1,
        cache_read_tokens: None,
        cache_write_tokens: None,
        unreported: Default::default(),
    });
    Ok(r)
}

#[tokio::test]
async fn a_token_trigger_summarizes_the_older_history_before_the_next_call() {
    let mut s = Setup::new(vec![
        calls(vec![call("a", "1")], Some(100)),
        calls(vec![call("b", "2")], Some(500)),
        summary("SUMMARY-TEXT", 50),
        text("done"),
    ]);
    s.context = summarizing(vec![Size::Tokens(500)], Size::Messages(2));
    let o = s.run().await;
    assert_eq!(o.end, final_text("done"));
    assert_eq!(o.requests.len(), 4);
    // The summary call offers no tools, asks for a summary and is not a turn.
    let sreq = &o.requests[2];
    assert_eq!(sreq.purpose, CallPurpose::Summary);
    assert!(sreq.tools.is_empty() && !sreq.tool_choice_none);
    assert!(sreq.system.contains("summarizing"), "{}", sreq.system);
    let Message::User(transcript) = &sreq.messages[0] else {
        panic!("{:?}", sreq.messages)
    };
    assert!(transcript.contains("(id a)") && !transcript.contains("(id b)"));
    let next = &o.requests[3];
    assert_eq!(next.turn, 2, "the summary call was not a turn");
    assert_eq!(next.purpose, CallPurpose::Turn);
    let m = &next.messages;
    assert_eq!(m.len(), 4, "{m:?}");
    assert_eq!(m[0], Message::User("the task".into()));
    assert!(matches!(&m[1], Message::User(t) if t.contains("SUMMARY-TEXT")));
    assert!(matches!(&m[2], Message::Assistant { tool_calls, .. } if tool_calls[0].id == "b"));
    assert!(matches!(&m[3], Message::Tool { call_id, .. } if call_id == "b"));
    assert_eq!(
        compactions(&o.events),
        [(5, 4, Some(500), "trigger".to_string())]
    );
    // Its usage is the lead's, like every other call's.
    let usage = usage_callers(&o.events);
    assert_eq!(usage.len(), 4);
    assert_eq!(usage[2], ("lead".into(), "script".into(), Some(50)));
}

#[tokio::test]
async fn without_reported_usage_the_estimate_triggers() {
    let big = "z".repeat(2000);
    let mut s = Setup::new(vec![
        calls(vec![call("a", "small")], None),
        calls(vec![call("b", &big)], None),
        text("S"),
        text("done"),
    ]);
    // The call's 2000 characters and their echo are 1000 tokens by the estimate; the
    // history before them was far below.
    s.context = summarizing(vec![Size::Tokens(1000)], Size::Messages(0));
    let o = s.run().await;
    assert_eq!(o.end, final_text("done"));
    assert_eq!(
        compactions(&o.events),
        [(5, 2, None, "trigger".to_string())]
    );
    assert_eq!(o.requests[2].purpose, CallPurpose::Summary);
}

#[tokio::test]
async fn a_fraction_trigger_needs_the_context_window() {
    let script = || {
        vec![
            calls(vec![call("a", "1")], Some(100)),
            calls(vec![call("b", "2")], Some(900)),
            text("S"),
            text("done"),
        ]
    };
    let mut s = Setup::new(script());
    s.context = summarizing(vec![Size::Fraction(0.9)], Size::Messages(2));
    s.limits = ModelLimits {
        context_window: Some(1000),
        max_output_tokens: None,
    };
    let o = s.run().await;
    assert_eq!(compactions(&o.events).len(), 1);
    let mut s = Setup::new(script());
    s.context = summarizing(vec![Size::Fraction(0.9)], Size::Messages(2));
    let o = s.run().await;
    assert!(compactions(&o.events).is_empty());
    assert_eq!(o.end, final_text("S"), "no summary call was made");
}

#[tokio::test]
async fn a_messages_trigger_counts_the_history() {
    let mut s = Setup::new(vec![
        calls(vec![call("a", "1")], None),
        text("S"),
        text("done"),
    ]);
    s.context = summarizing(vec![Size::Messages(3)], Size::Messages(0));
    let o = s.run().await;
    assert_eq!(
        compactions(&o.events),
        [(3, 2, None, "trigger".to_string())]
    );
}

#[tokio::test]
async fn a_context_overflow_compacts_and_retries_once() {
    let mut s = Setup::new(vec![
        calls(vec![call("a", "1"), call("b", "2")], Some(3000)),
        overflow(),
        text("S"),
        text("done"),
    ]);
    s.context = summarizing(vec![Size::Tokens(1_000_000)], Size::Messages(10));
    let o = s.run().await;
    assert_eq!(o.end, final_text("done"));
    assert_eq!(
        compactions(&o.events),
        [(4, 2, Some(3000), "overflow".to_string())]
    );
    // All but the task went into the summary; the retry is a turn of its own.
    let retry = &o.requests[3];
    assert_eq!(retry.messages.len(), 2);
    assert_eq!(retry.turn, 2);
}

#[tokio::test]
async fn a_second_overflow_fails_the_agent_with_a_clear_error() {
    let mut s = Setup::new(vec![
        calls(vec![call("a", "1")], None),
        overflow(),
        text("S"),
        overflow(),
        text("never"),
    ]);
    s.context = summarizing(vec![Size::Tokens(1_000_000)], Size::Messages(10));
    let o = s.run().await;
    let AgentEnd::Failed(e) = &o.end else {
        panic!("{:?}", o.end)
    };
    assert!(
        e.contains("even after summarizing") && e.contains("exceeds the available context size"),
        "{e}"
    );
    assert_eq!(o.requests.len(), 4);
}

#[tokio::test]
async fn an_overflow_with_nothing_to_summarize_fails_at_once() {
    let mut s = Setup::new(vec![overflow(), text("never")]);
    s.context = summarizing(vec![Size::Tokens(1_000_000)], Size::Messages(10));
    let o = s.run().await;
    assert!(matches!(&o.end, AgentEnd::Failed(e) if e.contains("exceeds the available")));
    assert_eq!(o.requests.len(), 1);
    // Without a summarization policy an overflow is an ordinary error.
    let o = Setup::new(vec![calls(vec![call("a", "1")], None), overflow()])
        .run()
        .await;
    assert!(matches!(&o.end, AgentEnd::Failed(_)));
    assert_eq!(o.requests.len(), 2);
}

#[tokio::test]
async fn the_summary_model_falls_back_to_the_agents_own() {
    let cheap = Arc::new(Script::new(vec![Err(ModelError::Http {
        provider: "openai".into(),
        status: 503,
        message: "down".into(),
        retry_after: None,
    })]));
    let mut s = Setup::new(vec![
        calls(vec![call("a", "1")], None),
        summary("OWN-SUMMARY", 5),
        text("done"),
    ]);
    s.context = Arc::new(RunContext {
        summarization: Some(Summarization {
            triggers: vec![Size::Messages(3)],
            keep: Size::Messages(0),
            trim_tokens: 1000,
            prompt: Some("Custom: {messages}".into()),
            model: Some((cheap.clone(), "cheap".into())),
        }),
        tool_results: None,
    });
    let o = s.run().await;
    assert_eq!(o.end, final_text("done"));
    let asked = cheap.requests();
    assert_eq!(asked.len(), 1);
    assert!(matches!(&asked[0].messages[0], Message::User(t) if t.starts_with("Custom: ")));
    assert!(matches!(&o.requests[2].messages[1], Message::User(t) if t.contains("OWN-SUMMARY")));
    let usage = usage_callers(&o.events);
    assert_eq!(usage[1], ("lead".into(), "script".into(), Some(5)));
}

#[tokio::test]
async fn a_summary_that_cannot_be_had_leaves_the_history_whole() {
    let mut s = Setup::new(vec![
        calls(vec![call("a", "1")], None),
        Err(ModelError::Script("no summary today".into())),
        text("done"),
    ]);
    s.context = summarizing(vec![Size::Messages(3)], Size::Messages(0));
    let o = s.run().await;
    assert_eq!(o.end, final_text("done"));
    assert!(compactions(&o.events).is_empty());
    assert_eq!(warnings(&o.events), ["compaction_failed"]);
    assert_eq!(o.requests[2].messages.len(), 3);
}

#[tokio::test]
async fn the_task_s_images_stay_with_it_through_compactions() {
    use deerflow_model::image::testing::test_png;
    let mut s = Setup::new(vec![
        calls(vec![call("a", "1")], None),
        text("FIRST"),
        calls(vec![call("b", "2")], None),
        text("SECOND"),
        text("done"),
    ]);
    s.task_images = vec![test_png(3, 2)];
    s.context = summarizing(vec![Size::Messages(4)], Size::Messages(0));
    let o = s.run().await;
    assert_eq!(o.end, final_text("done"));
    assert_eq!(compactions(&o.events).len(), 2);
    // The summary calls get no image; every turn after them has the task's.
    let Message::User(t) = &o.requests[1].messages[0] else {
        panic!()
    };
    assert!(!t.contains("iVBOR"), "{t}");
    for turn in [&o.requests[2], &o.requests[4]] {
        let m = &turn.messages;
        assert_eq!(m[0], Message::User("the task".into()));
        assert!(
            matches!(&m[1], Message::Images { call_id: None, images } if images.len() == 1),
            "{m:?}"
        );
        assert!(
            matches!(&m[2], Message::User(t) if t.contains("summarized")),
            "{m:?}"
        );
    }
    assert!(
        matches!(&o.requests[4].messages[2], Message::User(t) if t.contains("SECOND") && !t.contains("FIRST"))
    );
}

#[tokio::test]
async fn a_second_compaction_resummarizes_the_first_and_keeps_its_ledger() {
    let mut s = Setup::new(vec![
        calls(vec![call("a", "1")], None),
        text("FIRST"),
        calls(vec![call("b", "2")], None),
        text("SECOND"),
        text("done"),
    ]);
    s.context = summarizing(vec![Size::Messages(3)], Size::Messages(0));
    let o = s.run().await;
    assert_eq!(o.end, final_text("done"));
    assert_eq!(
        compactions(&o.events),
        [
            (3, 2, None, "trigger".to_string()),
            (4, 2, None, "trigger".to_string())
        ]
    );
    let Message::User(t) = &o.requests[3].messages[0] else {
        panic!()
    };
    assert!(t.contains("[earlier summary]\nFIRST"), "{t}");
    assert!(
        matches!(&o.requests[4].messages[1], Message::User(t) if t.contains("SECOND") && !t.contains("FIRST"))
    );
}

#[tokio::test]
async fn a_summarizer_that_overflows_gets_a_shorter_transcript() {
    let big = "w".repeat(5000);
    let mut s = Setup::new(vec![
        calls(vec![call("a", &big), call("b", &big)], None),
        overflow(),
        text("S"),
        text("done"),
    ]);
    s.context = summarizing(vec![Size::Messages(4)], Size::Messages(0));
    let o = s.run().await;
    assert_eq!(o.end, final_text("done"));
    let transcript_chars = |r: &ChatRequest| match &r.messages[0] {
        Message::User(t) => t.chars().count(),
        m => panic!("{m:?}"),
    };
    let (first, second) = (&o.requests[1], &o.requests[2]);
    assert_eq!(first.purpose, CallPurpose::Summary);
    assert_eq!(second.purpose, CallPurpose::Summary);
    // trim_tokens 1000 = 4000 characters, then half of that (plus the instruction line and
    // the cut marker).
    assert!(
        (4000..4100).contains(&transcript_chars(first)),
        "{}",
        transcript_chars(first)
    );
    assert!(
        (2000..2100).contains(&transcript_chars(second)),
        "{}",
        transcript_chars(second)
    );
    assert_eq!(compactions(&o.events).len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Order of the calls of one response (contract §12).
// ---------------------------------------------------------------------------------------------

/// Logs its start and end; `Shared` or `Exclusive` as told.
struct Timed {
    name: &'static str,
    shared: bool,
    log: Arc<Mutex<Vec<String>>>,
}

impl deerflow_tools::Tool for Timed {
    fn name(&self) -> &str {
        self.name
    }

    fn spec(&self) -> deerflow_model::ToolSpec {
        deerflow_model::ToolSpec {
            name: self.name.into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    fn call<'a>(
        &'a self,
        call: &'a ToolCall,
        _ctx: &'a deerflow_tools::ToolContext,
    ) -> BoxFuture<'a, deerflow_tools::ToolOutput> {
        let args = call.arguments.to_value();
        let id = args["text"].as_str().unwrap_or("?").to_string();
        Box::pin(async move {
            self.log.lock().unwrap().push(format!("+{id}"));
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            self.log.lock().unwrap().push(format!("-{id}"));
            deerflow_tools::ToolOutput::ok(id)
        })
    }

    /// Shared if the tool is, or per call: one whose id starts with `r` only reads.
    fn concurrency(&self, call: &ToolCall) -> deerflow_tools::Concurrency {
        if self.shared || call.id.starts_with('r') {
            deerflow_tools::Concurrency::Shared
        } else {
            deerflow_tools::Concurrency::Exclusive
        }
    }
}

#[tokio::test]
async fn reads_overlap_and_a_write_waits_for_what_came_before_it() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let named = |tool: &str, id: &str| ToolCall {
        name: tool.into(),
        ..call(id, id)
    };
    let mut s = Setup::new(vec![
        calls(
            vec![
                named("read", "r1"),
                named("read", "r2"),
                named("write", "w1"),
                named("read", "r3"),
                named("write", "w2"),
            ],
            None,
        ),
        text("done"),
    ]);
    s.tools = vec![
        Arc::new(Timed {
            name: "read",
            shared: true,
            log: log.clone(),
        }),
        Arc::new(Timed {
            name: "write",
            shared: false,
            log: log.clone(),
        }),
    ];
    let o = s.run().await;
    assert_eq!(o.end, final_text("done"));
    let log = log.lock().unwrap().clone();
    // r1 and r2 overlap; w1 starts after both ended; r3 after w1; w2 after r3.
    assert_eq!(&log[..2], ["+r1", "+r2"], "{log:?}");
    assert_eq!(
        &log[4..],
        ["+w1", "-w1", "+r3", "-r3", "+w2", "-w2"],
        "{log:?}"
    );
    let results: Vec<String> = o.requests[1]
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        ["r1", "r2", "w1", "r3", "w2"],
        "results keep call order"
    );
}

#[tokio::test]
async fn a_tool_decides_per_call_whether_it_may_overlap() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let io = |id: &str| ToolCall {
        name: "io".into(),
        ..call(id, id)
    };
    let mut s = Setup::new(vec![
        calls(vec![io("r1"), io("r2"), io("w1")], None),
        text("done"),
    ]);
    s.tools = vec![Arc::new(Timed {
        name: "io",
        shared: false,
        log: log.clone(),
    })];
    let o = s.run().await;
    assert_eq!(o.end, final_text("done"));
    let log = log.lock().unwrap().clone();
    assert_eq!(&log[..2], ["+r1", "+r2"], "{log:?}");
    assert_eq!(&log[4..], ["+w1", "-w1"], "{log:?}");
}

/// A recorded provider stream from tests/fixtures, assembled as the provider would.
async fn recorded(provider: &str, file: &str) -> ModelResponse {
    use deerflow_model::providers::{anthropic::AnthropicAssembler, openai_chat::OpenAiAssembler};
    use deerflow_model::{http::assemble, test_support::chunked};
    let path = format!(
        "{}/../../tests/fixtures/providers/{provider}/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let idle = std::time::Duration::from_secs(5);
    let body = chunked(&text, &[]);
    if provider == "anthropic" {
        assemble::<AnthropicAssembler, _, _, _>(body, idle, provider).await
    } else {
        assemble::<OpenAiAssembler, _, _, _>(body, idle, provider).await
    }
    .unwrap()
}

fn tool_contents(req: &ChatRequest) -> Vec<String> {
    req.messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn recorded_output_limit_stops_warn_and_keep_their_text() {
    for (provider, file) in [
        ("anthropic", "max_tokens.sse"),
        ("vllm", "chat_length.sse"),
        ("openai", "chat_length_all_reasoning.sse"),
        ("openrouter", "length_then_inline_error.sse"),
    ] {
        let resp = recorded(provider, file).await;
        let kept = resp.text.clone().filter(|t| !t.trim().is_empty());
        let o = Setup::new(vec![Ok(resp)]).run().await;
        assert_eq!(warnings(&o.events), ["output_truncated"], "{file}");
        assert_eq!(
            o.end,
            AgentEnd::Final {
                text: kept,
                stop_reason: None
            },
            "{file}"
        );
    }
}

#[tokio::test]
async fn a_call_cut_at_the_output_limit_is_not_run_and_the_model_is_told() {
    let whole = call("a", "whole");
    let cut = ToolCall::from_raw("b".into(), "echo".into(), r#"{"text": "half"#);
    let mut resp = calls(vec![whole, cut], None).unwrap();
    resp.text = Some("Writing both.".into());
    resp.finish_reason = Some("length".into());
    let o = Setup::new(vec![Ok(resp), text("done")]).run().await;
    assert_eq!(o.tool_calls.len(), 1, "only the whole call ran");
    assert_eq!(
        tool_contents(&o.requests[1]),
        [
            "whole",
            "Tool call arguments were cut off at the output limit; write smaller pieces"
        ]
    );
    assert_eq!(warnings(&o.events), ["output_truncated"]);
    let message = o
        .events
        .iter()
        .find_map(|e| match e {
            Event::Warning { message, .. } => Some(message.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        message.contains("length") && message.contains("1 tool call"),
        "{message}"
    );
    // The text is kept: it went out as the lead's message.
    assert!(o
        .events
        .iter()
        .any(|e| matches!(e, Event::Message { text, .. } if text == "Writing both.")));
    assert_eq!(o.end, final_text("done"));
}

#[tokio::test]
async fn a_last_call_that_arrived_empty_at_the_output_limit_counts_as_cut() {
    let mut resp = calls(
        vec![
            call("a", "x"),
            ToolCall::from_raw("b".into(), "echo".into(), ""),
        ],
        None,
    )
    .unwrap();
    resp.finish_reason = Some("max_tokens".into());
    let o = Setup::new(vec![Ok(resp), text("done")]).run().await;
    assert_eq!(o.tool_calls.len(), 1);
    assert_eq!(
        tool_contents(&o.requests[1])[1],
        super::turns::CUT_OFF_ERROR
    );
}

#[tokio::test]
async fn a_whole_response_at_a_normal_stop_runs_its_calls_without_a_warning() {
    let mut resp = calls(vec![call("a", "x")], None).unwrap();
    resp.finish_reason = Some("tool_calls".into());
    let o = Setup::new(vec![Ok(resp), text("done")]).run().await;
    assert_eq!(o.tool_calls.len(), 1);
    assert!(warnings(&o.events).is_empty());
}

#[tokio::test]
async fn a_safety_stop_warns_and_runs_none_of_its_calls() {
    for reason in ["content_filter", "refusal"] {
        let mut resp = calls(vec![call("a", "x"), call("b", "y")], None).unwrap();
        resp.text = Some("I can't help with that.".into());
        resp.finish_reason = Some(reason.into());
        let o = Setup::new(vec![Ok(resp)]).run().await;
        assert!(o.tool_calls.is_empty(), "{reason}");
        assert_eq!(warnings(&o.events), ["content_filtered"], "{reason}");
        assert_eq!(o.requests.len(), 1);
        assert_eq!(o.end, final_text("I can't help with that."));
        assert!(!o.events.iter().any(|e| matches!(e, Event::ToolCall { .. })));
    }
}

#[tokio::test]
async fn the_safety_section_s_extra_reasons_stop_calls_and_enabled_false_runs_them() {
    let sensitive = || {
        let mut resp = calls(vec![call("a", "x")], None).unwrap();
        resp.finish_reason = Some("sensitive".into());
        resp
    };
    let mut setup = Setup::new(vec![Ok(sensitive())]);
    setup.stops = deerflow_model::StopRules {
        safety: true,
        extra_safety: vec!["sensitive".into()],
    };
    let o = setup.run().await;
    assert!(o.tool_calls.is_empty());
    assert_eq!(warnings(&o.events), ["content_filtered"]);
    // Without the section, a gateway's own token is no safety stop.
    let o = Setup::new(vec![Ok(sensitive()), text("done")]).run().await;
    assert_eq!(o.tool_calls.len(), 1);
    assert!(warnings(&o.events).is_empty());
    // `enabled: false`: even a built-in safety stop's calls run, without a warning.
    let mut refusal = calls(vec![call("a", "x")], None).unwrap();
    refusal.finish_reason = Some("refusal".into());
    let mut setup = Setup::new(vec![Ok(refusal), text("done")]);
    setup.stops.safety = false;
    let o = setup.run().await;
    assert_eq!(o.tool_calls.len(), 1);
    assert!(warnings(&o.events).is_empty());
}

/// `view_image` calls over two turns show six images: the next request carries the five
/// newest, after every result of their response; the events carry only `Image read` lines.
#[tokio::test]
async fn only_the_five_newest_images_reach_the_model() {
    use deerflow_model::image::testing::encoded;
    let names = ["a.png", "b.png", "c.png", "d.png", "e.png", "f.png"];
    let view = |i: usize| {
        ToolCall::new(
            format!("v{i}"),
            "view_image",
            serde_json::json!({ "image_path": names[i] }),
        )
    };
    let mut setup = Setup::new(vec![
        calls(vec![view(0), view(1), call("e1", "x"), view(2)], None),
        calls(vec![view(3), view(4), view(5)], None),
        text("seen"),
    ]);
    setup.tools = vec![Arc::new(deerflow_tools::fs::ViewImageTool)];
    setup.files = names
        .iter()
        .enumerate()
        .map(|(i, n)| (*n, encoded(10 + i as u32, 5, image::ImageFormat::Png)))
        .collect();
    let o = setup.run().await;
    assert_eq!(o.end, final_text("seen"));
    // Each image message as its call id and the sizes of its images.
    let shown = |req: &ChatRequest| {
        req.messages
            .iter()
            .filter_map(|m| match m {
                Message::Images { call_id, images } => Some((
                    call_id.clone().unwrap_or_default(),
                    images.iter().map(|i| i.size()).collect::<Vec<_>>(),
                )),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    // The second request: the first response's three images, after its four results.
    let second = &o.requests[1].messages;
    assert!(matches!(second[5], Message::Tool { .. }));
    assert!(matches!(second[6], Message::Images { .. }));
    assert_eq!(shown(&o.requests[1]).len(), 3);
    // The third: five, the oldest (v0's) gone; its result's line stays.
    let third = shown(&o.requests[2]);
    let ids: Vec<&str> = third.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["v1", "v2", "v3", "v4", "v5"]);
    assert_eq!(third[0].1, [(11, 5)]);
    assert!(o.requests[2].messages.iter().any(|m| matches!(
        m,
        Message::Tool { call_id, content, .. } if call_id == "v0" && content == "Image read: a.png (10x5)"
    )));
    let outputs: Vec<String> = o
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult { name, output, .. } if name == "view_image" => Some(output.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(outputs.len(), 6);
    assert!(
        outputs.iter().all(|o| o.starts_with("Image read: ")),
        "{outputs:?}"
    );
}
