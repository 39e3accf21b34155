//! The turn loop: model call → tool calls → results back → … until a final answer, a
//! limit, an error or cancellation.

use std::collections::HashSet;
use std::time::Instant;

use futures_util::future::join_all;
use serde_json::{json, Map, Value};

use super::guards::{LoopDetector, LoopVerdict};
use super::{Agent, AgentEnd, RunShared};
use crate::events::Event;
use crate::model::{
    AgentId, CallContext, ChatRequest, Message, ModelError, ModelResponse, RetryNotice, ToolCall,
};
use crate::tools::{Control, ToolContext, ToolOutput};

/// Runs `agent` on `prompt` until it ends.
pub async fn run_agent(agent: &Agent, shared: &RunShared, prompt: String) -> AgentEnd {
    let mut messages = vec![Message::User(prompt)];
    let mut detector = LoopDetector::new(shared.loop_limits.clone());
    let mut force_final = false;
    let mut last_text: Option<String> = None;
    let tool_specs: Vec<_> = agent.tools.iter().map(|t| t.spec()).collect();
    let mut turn = 0usize;
    let mut seen_ids = HashSet::new();
    loop {
        if agent.tool_ctx.cancel.is_cancelled() {
            return AgentEnd::Cancelled;
        }
        let req = ChatRequest {
            system: agent.system.clone(),
            messages: messages.clone(),
            tools: tool_specs.clone(),
            tool_choice_none: force_final,
            agent: agent.id.clone(),
            turn,
        };
        // Turns count model calls, a call that fails included.
        turn += 1;
        agent
            .progress
            .turns
            .store(turn as u32, std::sync::atomic::Ordering::SeqCst);
        let resp = match call_model(agent, &req).await {
            Ok(r) => r,
            Err(ModelError::Cancelled) => return AgentEnd::Cancelled,
            Err(e) => return AgentEnd::Failed(e.to_string()),
        };
        let budget_hit = account(agent, shared, &resp);
        #[cfg(debug_assertions)]
        debug_panic(&agent.caller);
        let text = resp.text.clone().filter(|t| !t.trim().is_empty());
        if text.is_some() {
            last_text = text.clone();
        }
        let mut calls = resp.tool_calls;
        unique_ids(&mut calls, &mut seen_ids, turn);
        if force_final || calls.is_empty() {
            agent.observer.assistant(text.as_deref(), &[]);
            let stop_reason = force_final.then_some("loop_capped");
            return AgentEnd::Final {
                text: text.or(last_text),
                stop_reason,
            };
        }
        // A response's tool calls run only if another model call is allowed after them.
        if budget_hit {
            agent.observer.assistant(text.as_deref(), &[]);
            return AgentEnd::Budget { last_text };
        }
        if turn >= agent.max_turns as usize {
            agent.observer.assistant(text.as_deref(), &[]);
            return AgentEnd::MaxTurns { last_text };
        }
        let mut notice = None;
        match detector.observe(&calls) {
            LoopVerdict::Fine => {}
            LoopVerdict::Warn(m) => {
                agent
                    .events
                    .emit(Event::warning("loop_detected", m.clone()));
                notice = Some(format!("[deerflow] Warning: {m}."));
            }
            LoopVerdict::Stop(m) => {
                agent.events.emit(Event::warning("loop_detected", m));
                calls.clear();
                force_final = true;
            }
        }
        agent.observer.assistant(text.as_deref(), &calls);
        if force_final {
            messages.push(Message::Assistant {
                text: text.clone(),
                tool_calls: vec![],
            });
            messages.push(Message::User(
                "[deerflow] You are repeating tool calls. Tools are no longer available: give your final answer now.".into(),
            ));
            continue;
        }
        messages.push(Message::Assistant {
            text,
            tool_calls: calls.clone(),
        });
        let outputs = run_tools(agent, &calls).await;
        let mut clarify = None;
        for (call, out) in calls.iter().zip(outputs) {
            if let Some(Control::Clarify { question, options }) = out.control {
                clarify.get_or_insert((question, options));
            }
            messages.push(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: out.text,
            });
        }
        if let (Some(n), Some(Message::Tool { content, .. })) = (notice, messages.last_mut()) {
            content.push_str("\n\n");
            content.push_str(&n);
        }
        if let Some((question, options)) = clarify {
            return AgentEnd::Clarify { question, options };
        }
    }
}

/// Test hook, debug builds only: `DEERFLOW_DEBUG_PANIC=lead` (or `subagent:TYPE`) makes
/// that agent panic after a model response, so tests can prove that a panic inside the run
/// still ends with `run_completed` (no production code path is known to panic).
#[cfg(debug_assertions)]
fn debug_panic(caller: &str) {
    if std::env::var("DEERFLOW_DEBUG_PANIC").is_ok_and(|v| v == caller) {
        panic!("DEERFLOW_DEBUG_PANIC={caller}");
    }
}

/// Gives every call an id unique in this agent's transcript: a repeated id gets a `-2`,
/// `-3`, … suffix and a missing one `call_<turn>_<n>`, so `tool_call`, `tool_result`, the
/// task id and the provider's transcript all agree.
fn unique_ids(calls: &mut [ToolCall], seen: &mut HashSet<String>, turn: usize) {
    for (i, c) in calls.iter_mut().enumerate() {
        let base = if c.id.trim().is_empty() {
            format!("call_{turn}_{}", i + 1)
        } else {
            c.id.clone()
        };
        let mut id = base.clone();
        let mut k = 2;
        while seen.contains(&id) {
            id = format!("{base}-{k}");
            k += 1;
        }
        seen.insert(id.clone());
        c.id = id;
    }
}

async fn call_model(agent: &Agent, req: &ChatRequest) -> Result<ModelResponse, ModelError> {
    let events = agent.events.clone();
    let mut ctx = CallContext::new(agent.tool_ctx.cancel.clone());
    ctx.on_retry = std::sync::Arc::new(move |n: RetryNotice| events.emit(retry_warning(&n)));
    tokio::select! {
        r = agent.model.complete(req, &ctx) => r,
        _ = agent.tool_ctx.cancel.cancelled() => Err(ModelError::Cancelled),
    }
}

fn retry_warning(n: &RetryNotice) -> Event {
    let mut extra = Map::new();
    extra.insert("attempt".into(), json!(n.attempt));
    extra.insert("delay_ms".into(), json!(n.delay_ms));
    extra.insert(
        "status".into(),
        n.status.map(Value::from).unwrap_or(Value::Null),
    );
    // The notice's message already names the provider and the status.
    Event::Warning {
        code: "model_retry".into(),
        message: format!("{}; retry {} in {} ms", n.message, n.attempt, n.delay_ms),
        extra,
    }
}

/// Records the response's usage (event + ledger + the agent's own tally) and checks the
/// budget. Returns whether the run's budget is now reached.
fn account(agent: &Agent, shared: &RunShared, resp: &ModelResponse) -> bool {
    let u = resp.usage.as_ref();
    agent.events.emit(Event::Usage {
        caller: agent.caller.clone(),
        model: agent.model_name.clone(),
        input_tokens: u.map(|u| u.input_tokens),
        output_tokens: u.map(|u| u.output_tokens),
        total_tokens: u.map(|u| u.total_tokens),
        cache_read_tokens: u.and_then(|u| u.cache_read_tokens),
        reported: u.is_some(),
    });
    if let Some(u) = u {
        agent
            .progress
            .usage
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(u);
    }
    let total = shared
        .ledger
        .record(matches!(agent.id, AgentId::Lead), &agent.model_name, u);
    let check = shared.budget.check(total);
    if check.warn {
        let max = shared.budget.max().unwrap_or(0);
        agent.events.emit(Event::warning(
            "budget",
            format!("{total} of {max} budgeted tokens spent (80% or more)"),
        ));
    }
    // No new model call may start anywhere in the run; only the lead's own final answer may
    // still complete it, which the lead's loop decides.
    if check.exceeded && !matches!(agent.id, AgentId::Lead) {
        shared.control.stop(crate::outcome::StopCause::Budget);
    }
    check.exceeded
}

/// Runs one response's tool calls concurrently; results come back in call order.
async fn run_tools(agent: &Agent, calls: &[ToolCall]) -> Vec<ToolOutput> {
    let contexts: Vec<ToolContext> = calls
        .iter()
        .map(|c| agent.tool_ctx.for_call(&c.id))
        .collect();
    let futures: Vec<_> = calls
        .iter()
        .zip(&contexts)
        .map(|(call, ctx)| {
            agent.observer.tool_call(call);
            // The synchronous part of `Tool::call` runs here, in call order: the task
            // tool accepts, queues and limits calls in the order the model made them.
            let fut = dispatch(agent, call, ctx);
            async move {
                let start = Instant::now();
                let out = fut.await;
                agent.observer.tool_result(call, &out, start.elapsed());
                out
            }
        })
        .collect();
    join_all(futures).await
}

fn dispatch<'a>(
    agent: &'a Agent,
    call: &'a ToolCall,
    ctx: &'a ToolContext,
) -> crate::model::BoxFuture<'a, ToolOutput> {
    if let Some(raw) = &call.invalid_arguments {
        let (excerpt, _) = super::observer::cap_chars(raw, 200);
        let out = ToolOutput::error(format!(
            "Error: the arguments of this '{}' call are not valid JSON: {excerpt}",
            call.name
        ));
        return Box::pin(async move { out });
    }
    match agent.tools.iter().find(|t| t.spec().name == call.name) {
        Some(tool) => tool.call(call.arguments.clone(), ctx),
        None => {
            let names: Vec<String> = agent.tools.iter().map(|t| t.spec().name).collect();
            let out = ToolOutput::error(format!(
                "Error: unknown tool '{}'. Available tools: {}",
                call.name,
                names.join(", ")
            ));
            Box::pin(async move { out })
        }
    }
}
