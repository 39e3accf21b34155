//! The turn loop: model call → tool calls → results back → … until a final answer, a
//! limit, an error or cancellation.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use futures_util::stream::{FuturesOrdered, StreamExt};

use super::call_ids::CallIds;
use super::context::{AgentPort, History, PreCall, Reason};
use super::final_answer::{self, Checked};
use super::guards::{LoopDetector, LoopVerdict};
use super::{Agent, AgentEnd, RunShared};
use deerflow_events::{Event, RetryInfo, WarningCode};
use deerflow_model::{
    AgentId, BoxFuture, CallContext, ChatModel, ChatRequest, Message, ModelError, ModelResponse,
    Reasoning, RetryNotice, StopKind, ToolCall, ToolSpec, Usage,
};
use deerflow_tools::{Concurrency, Control, ToolOutput};

/// Runs `agent` on `prompt` until it ends.
pub async fn run_agent(agent: &Agent, shared: &RunShared, prompt: String) -> AgentEnd {
    let mut t = Transcript::new(agent, shared, prompt);
    loop {
        if agent.tool_ctx.cancel.is_cancelled() {
            return AgentEnd::Cancelled;
        }
        let (resp, budget_hit) = match t.next_response(agent, shared).await {
            Ok(r) => r,
            Err(end) => return end,
        };
        let stop = shared.stops.kind(resp.finish_reason.as_deref());
        let text = resp.text.filter(|t| !t.trim().is_empty());
        if text.is_some() {
            t.last_text = text.clone();
        }
        let mut calls = resp.tool_calls;
        let reasoning = resp.reasoning;
        t.call_ids.assign(&mut calls, t.turn);
        let cut = stop_reason(agent, stop, resp.finish_reason.as_deref(), &mut calls);
        let thought = reasoning_text(&reasoning);
        match t.decide(agent, budget_hit, &text, thought.as_deref(), calls) {
            Step::End(end) => {
                let limit = t.limit_end(agent, budget_hit);
                match final_answer::check(agent, end, t.schema_retries, limit) {
                    Checked::End(end) => return end,
                    Checked::Retry(message) => t.retry_final(text, reasoning, message),
                }
            }
            Step::AskForFinal => t.ask_for_final(text, reasoning),
            Step::Run { calls, notice } => {
                let turn = Turn {
                    text,
                    thought,
                    reasoning,
                };
                if let Some(end) = t.run_calls(agent, turn, calls, &cut, notice).await {
                    return end;
                }
            }
        }
    }
}

/// What to do with a response.
enum Step {
    End(AgentEnd),
    /// The loop guard stopped the calls: ask once more, tools withheld.
    AskForFinal,
    Run {
        calls: Vec<ToolCall>,
        notice: Option<String>,
    },
}

/// What a response said beside its tool calls.
struct Turn {
    text: Option<String>,
    /// The reasoning text shown in events.
    thought: Option<String>,
    /// What the provider needs back with the message.
    reasoning: Reasoning,
}

/// The reasoning text of a response worth an event: none when blank.
fn reasoning_text(reasoning: &Reasoning) -> Option<String> {
    reasoning
        .text
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .map(str::to_string)
}

/// One agent's conversation and the state its guards keep.
struct Transcript {
    history: History,
    tool_specs: Arc<[ToolSpec]>,
    detector: LoopDetector,
    force_final: bool,
    last_text: Option<String>,
    /// What the last response reported, for the context policy.
    last_usage: Option<Usage>,
    /// Model calls made so far.
    turn: usize,
    /// The call ids given so far.
    call_ids: CallIds,
    /// Final answers sent back for not matching the output schema.
    schema_retries: u32,
    /// Characters of the system prompt and tool specs, for the context policy's estimate.
    fixed_chars: usize,
}

impl Transcript {
    fn new(agent: &Agent, shared: &RunShared, prompt: String) -> Self {
        let tool_specs = agent.tools.specs.clone();
        let fixed_chars = agent.system.chars().count() + agent.tools.spec_chars;
        Self {
            history: History::with_images(Message::User(prompt), agent.task_images.clone()),
            tool_specs,
            fixed_chars,
            detector: LoopDetector::new(shared.loop_limits.clone()),
            force_final: false,
            last_text: None,
            last_usage: None,
            turn: 0,
            call_ids: CallIds::default(),
            schema_retries: 0,
        }
    }

    /// One model call, its usage accounted; whether the budget is now reached. The
    /// context policy sees the history first and may shrink it.
    async fn next_response(
        &mut self,
        agent: &Agent,
        shared: &RunShared,
    ) -> Result<(ModelResponse, bool), AgentEnd> {
        let port = Port { agent, shared };
        // A response the ledger replays needs no room, and a summary would call a model.
        if !agent.observer.replays_turn(self.turn) {
            self.compact_if_needed(agent, &port, Reason::Trigger).await;
        }
        let mut resp = self.call(agent).await;
        // A context the provider found too long is compacted and the call made once more.
        if resp.as_ref().is_err_and(ModelError::is_context_overflow)
            && self.compact_if_needed(agent, &port, Reason::Overflow).await
        {
            resp = self.call(agent).await.map_err(|e| match e {
                e if e.is_context_overflow() => ModelError::Script(format!(
                    "the context is too long for the model even after summarizing the history: {e}"
                )),
                e => e,
            });
        }
        let resp = match resp {
            Ok(r) => r,
            Err(ModelError::Cancelled) => return Err(AgentEnd::Cancelled),
            Err(e) => return Err(AgentEnd::Failed(e.to_string())),
        };
        self.last_usage = resp.usage;
        let budget_hit = account(agent, shared, &agent.model_name, &resp);
        #[cfg(debug_assertions)]
        debug_panic(&agent.caller);
        Ok((resp, budget_hit))
    }

    /// Lets the context policy act on the history; whether it compacted it.
    async fn compact_if_needed(&mut self, agent: &Agent, port: &Port<'_>, reason: Reason) -> bool {
        let at = PreCall {
            agent: &agent.id,
            turn: self.turn,
            last_usage: self.last_usage,
            limits: agent.model.limits(),
            reason,
            fixed_chars: self.fixed_chars,
            port,
        };
        agent.context.before_call(&mut self.history, at).await
    }

    /// One turn's model call.
    async fn call(&mut self, agent: &Agent) -> Result<ModelResponse, ModelError> {
        let (messages, lineage) = self.history.for_request();
        let req = ChatRequest {
            system: agent.system.clone(),
            messages,
            tools: self.tool_specs.clone(),
            tool_choice_none: self.force_final,
            agent: agent.id.clone(),
            turn: self.turn,
            output_schema: agent.output_schema.clone(),
            purpose: Default::default(),
            lineage: Some(lineage),
        };
        // Turns count model calls, a call that fails included.
        self.turn += 1;
        agent
            .progress
            .turns
            .store(self.turn as u32, std::sync::atomic::Ordering::SeqCst);
        // The request shares the history: it is dropped when this returns, so the next
        // push appends in place.
        call_model(agent, agent.model.as_ref(), &req).await
    }

    /// Final answer, limits, then the loop guard, in that order.
    fn decide(
        &mut self,
        agent: &Agent,
        budget_hit: bool,
        text: &Option<String>,
        thought: Option<&str>,
        calls: Vec<ToolCall>,
    ) -> Step {
        let no_calls = |end| {
            agent.observer.assistant(text.as_deref(), thought, &[]);
            Step::End(end)
        };
        if self.force_final || calls.is_empty() {
            let stop_reason = self.force_final.then_some("loop_capped");
            return no_calls(AgentEnd::Final {
                text: text.clone().or(self.last_text.clone()),
                stop_reason,
            });
        }
        // A response's tool calls run only if another model call is allowed after them.
        if let Some(end) = self.limit_end(agent, budget_hit) {
            return no_calls(end);
        }
        match self.detector.observe(&calls, &agent.tools) {
            LoopVerdict::Fine => Step::Run {
                calls,
                notice: None,
            },
            LoopVerdict::Warn(m) => {
                agent
                    .events
                    .emit(Event::warning(WarningCode::LoopDetected, m.clone()));
                Step::Run {
                    calls,
                    notice: Some(format!("[deerflow] Warning: {m}.")),
                }
            }
            LoopVerdict::Stop(m) => {
                agent
                    .events
                    .emit(Event::warning(WarningCode::LoopDetected, m));
                agent.observer.assistant(text.as_deref(), thought, &[]);
                Step::AskForFinal
            }
        }
    }

    fn ask_for_final(&mut self, text: Option<String>, reasoning: Reasoning) {
        self.force_final = true;
        self.history.push(Message::Assistant {
            text,
            tool_calls: vec![],
            reasoning,
        });
        self.history.push(Message::User(
            "[deerflow] You are repeating tool calls. Tools are no longer available: give your final answer now.".into(),
        ));
    }

    /// How the agent ends if it may not call the model again: the budget is reached or
    /// the turns are spent.
    fn limit_end(&self, agent: &Agent, budget_hit: bool) -> Option<AgentEnd> {
        if budget_hit {
            return Some(AgentEnd::Budget {
                last_text: self.last_text.clone(),
            });
        }
        (self.turn >= agent.max_turns as usize).then(|| AgentEnd::MaxTurns {
            last_text: self.last_text.clone(),
        })
    }

    /// Sends a final answer back with what is wrong with it; the next turn answers again.
    fn retry_final(&mut self, text: Option<String>, reasoning: Reasoning, message: String) {
        self.schema_retries += 1;
        self.history.push(Message::Assistant {
            text,
            tool_calls: vec![],
            reasoning,
        });
        self.history.push(Message::User(message));
    }

    /// Runs the calls and puts their results in the transcript, in call order; a
    /// clarification request ends the agent.
    async fn run_calls(
        &mut self,
        agent: &Agent,
        turn: Turn,
        calls: Vec<ToolCall>,
        cut: &HashSet<String>,
        notice: Option<String>,
    ) -> Option<AgentEnd> {
        agent
            .observer
            .assistant(turn.text.as_deref(), turn.thought.as_deref(), &calls);
        // Each result goes into the transcript as it comes (in call order), behind its
        // assistant message, which gets its calls last: a fan-out's calls and results are
        // never held twice.
        let at = self.history.len();
        self.history.push(Message::Assistant {
            text: turn.text,
            tool_calls: Vec::new(),
            reasoning: turn.reasoning,
        });
        let mut clarify = None;
        let mut shown = Vec::new();
        let history = &mut self.history;
        run_tools(agent, &calls, cut, |call, mut out| {
            if let Some(Control::Clarify { question, options }) = out.control.take() {
                clarify.get_or_insert(AgentEnd::Clarify { question, options });
            }
            if let Some(end) = out.task_end.take() {
                history.record_task_end(&call.id, end);
            }
            if let Some(image) = out.image.take() {
                shown.push((call.id.clone(), vec![image]));
            }
            history.push(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: agent.context.tool_result(call, out.into_text()),
            });
        })
        .await;
        self.history.set_calls(at, calls);
        if let (Some(n), Some(Message::Tool { content, .. })) = (notice, self.history.last_mut()) {
            content.push_str("\n\n");
            content.push_str(&n);
        }
        // After every result: OpenAI's APIs take no other message between a response's
        // results.
        for (call_id, images) in shown {
            self.history.push_images(Some(call_id), images);
        }
        clarify
    }
}

/// What the model gets instead of running a call whose arguments the output limit cut.
pub const CUT_OFF_ERROR: &str =
    "Tool call arguments were cut off at the output limit; write smaller pieces";

/// Acts on why the response ended (contract §10): a response cut at the output limit is
/// reported and its cut-off tool calls are named (returned: they answer with
/// [`CUT_OFF_ERROR`] instead of running); a response stopped for safety is reported and
/// its calls dropped.
fn stop_reason(
    agent: &Agent,
    stop: StopKind,
    reason: Option<&str>,
    calls: &mut Vec<ToolCall>,
) -> HashSet<String> {
    let reason = reason.unwrap_or_default();
    match stop {
        StopKind::Normal => HashSet::new(),
        StopKind::OutputLimit => {
            let last = calls.len().saturating_sub(1);
            let cut: HashSet<String> = calls
                .iter()
                .enumerate()
                // Only the call being written when the limit hit can be cut: its text is
                // no JSON, or (cut before its first character) it arrived empty.
                .filter(|(i, c)| {
                    c.invalid_arguments.is_some() || (*i == last && c.arguments.is_empty_object())
                })
                .map(|(_, c)| c.id.clone())
                .collect();
            let what = if cut.is_empty() {
                String::new()
            } else {
                format!("; {} tool call(s) cut off were not run", cut.len())
            };
            agent.events.emit(Event::warning(
                WarningCode::OutputTruncated,
                format!("the model stopped at its output limit (finish_reason: {reason}){what}"),
            ));
            cut
        }
        StopKind::ContentFilter => {
            let dropped = std::mem::take(calls).len();
            agent.events.emit(Event::warning(WarningCode::ContentFiltered,
                format!(
                    "the model stopped for safety (finish_reason: {reason}); {dropped} tool call(s) not run"
                ),
            ));
            HashSet::new()
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

async fn call_model(
    agent: &Agent,
    model: &dyn ChatModel,
    req: &ChatRequest,
) -> Result<ModelResponse, ModelError> {
    let events = agent.events.clone();
    let mut ctx = CallContext::new(agent.tool_ctx.cancel.clone());
    ctx.on_retry = std::sync::Arc::new(move |n: RetryNotice| events.emit(retry_warning(&n)));
    let events = agent.events.clone();
    ctx.on_rate_limited = std::sync::Arc::new(move |n| events.emit(rate_warning(&n)));
    let start = Instant::now();
    let result = tokio::select! {
        r = model.complete(req, &ctx) => r,
        _ = agent.tool_ctx.cancel.cancelled() => Err(ModelError::Cancelled),
    };
    tracing::debug!(
        agent = %agent.id,
        model = %agent.model_name,
        messages = req.messages.len(),
        tools = req.tools.len(),
        ms = start.elapsed().as_millis() as u64,
        ok = result.is_ok(),
        "model call"
    );
    result
}

/// What the context policy may do as this agent.
struct Port<'a> {
    agent: &'a Agent,
    shared: &'a RunShared,
}

impl AgentPort for Port<'_> {
    fn own_model(&self) -> (Arc<dyn ChatModel>, String) {
        (self.agent.model.clone(), self.agent.model_name.clone())
    }

    fn side_call<'a>(
        &'a self,
        model: &'a dyn ChatModel,
        model_name: &'a str,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let resp = call_model(self.agent, model, req).await?;
            // The budget is enforced on the turns: a sub-agent's overrun has stopped the
            // run already (in `account`), the lead's is seen on its next response.
            account(self.agent, self.shared, model_name, &resp);
            Ok(resp)
        })
    }

    fn emit(&self, event: Event) {
        self.agent.events.emit(event);
    }
}

fn rate_warning(n: &deerflow_model::rate::RateNotice) -> Event {
    let pause = match n.pause_ms {
        0 => String::new(),
        ms => format!("; every call of it paused {ms} ms (Retry-After)"),
    };
    let message = format!(
        "{} answered HTTP 429: at most {} of its requests in flight now{pause}",
        n.model, n.concurrency
    );
    Event::rate_limited(&n.model, n.concurrency, message)
}

fn retry_warning(n: &RetryNotice) -> Event {
    // The notice's message already names the provider and the status.
    Event::Warning {
        code: WarningCode::ModelRetry,
        message: format!("{}; retry {} in {} ms", n.message, n.attempt, n.delay_ms),
        retry: Some(RetryInfo {
            attempt: n.attempt,
            delay_ms: n.delay_ms,
            status: n.status,
        }),
        rate: None,
        server: None,
        tool: None,
    }
}

/// Records the response's usage (event + ledger + the agent's own tally) and checks the
/// budget. Returns whether the run's budget is now reached.
fn account(agent: &Agent, shared: &RunShared, model_name: &str, resp: &ModelResponse) -> bool {
    let u = resp.usage.as_ref();
    // A response replayed from the ledger was paid for by the run that made it.
    let resumed = agent.observer.response_resumed();
    agent.events.emit(Event::Usage {
        caller: agent.caller.clone(),
        model: model_name.to_string(),
        input_tokens: u.and_then(Usage::input),
        output_tokens: u.and_then(Usage::output),
        total_tokens: u.map(|u| u.total_tokens),
        cache_read_tokens: u.and_then(|u| u.cache_read_tokens),
        reported: u.is_some(),
        resumed,
    });
    if resumed {
        return false;
    }
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
        .record(matches!(agent.id, AgentId::Lead), model_name, u);
    let check = shared.budget.check(total);
    if check.warn {
        let max = shared.budget.max().unwrap_or(0);
        agent.events.emit(Event::warning(
            WarningCode::Budget,
            format!("{total} of {max} budgeted tokens spent (80% or more)"),
        ));
    }
    // No new model call may start anywhere in the run; only the lead's own final answer may
    // still complete it, which the lead's loop decides.
    if check.exceeded && !matches!(agent.id, AgentId::Lead) {
        shared
            .control
            .stop(deerflow_events::outcome::StopCause::Budget);
    }
    check.exceeded
}

/// Runs one response's tool calls concurrently and hands each result to `each`, in call
/// order. The `cut` calls answer with [`CUT_OFF_ERROR`] without running.
async fn run_tools(
    agent: &Agent,
    calls: &[ToolCall],
    cut: &HashSet<String>,
    mut each: impl FnMut(&ToolCall, ToolOutput),
) {
    for call in calls {
        agent.observer.tool_call(call);
    }
    for group in groups(agent, calls, cut) {
        // Each call's future goes straight into the ordered set: no list of them first.
        let mut ordered: FuturesOrdered<_> = group
            .map(|i| {
                let call = &calls[i];
                // The synchronous part of `Tool::call` runs here, in call order: the task
                // tool accepts, queues and limits calls in the order the model made them.
                let fut: BoxFuture<'_, ToolOutput> = if cut.contains(&call.id) {
                    let out = ToolOutput::error(CUT_OFF_ERROR);
                    Box::pin(async move { out })
                } else {
                    dispatch(agent, call)
                };
                async move {
                    let start = Instant::now();
                    let out = fut.await;
                    let took = start.elapsed();
                    tracing::debug!(
                        agent = %agent.id,
                        tool = %call.name,
                        call_id = %call.id,
                        status = out.status.as_str(),
                        ms = took.as_millis() as u64,
                        "tool call"
                    );
                    agent.observer.tool_result(call, &out, took);
                    (call, out)
                }
            })
            .collect();
        while let Some((call, out)) = ordered.next().await {
            each(call, out);
        }
    }
}

/// The calls cut into groups that run one after another (contract §12's order): a run of
/// neighbouring `Shared` calls (reads, `task`) runs at once; every `Exclusive` call (a
/// write, bash, an MCP tool) is a group of its own. A replay is deterministic this way.
fn groups(agent: &Agent, calls: &[ToolCall], cut: &HashSet<String>) -> Vec<std::ops::Range<usize>> {
    let shared = |c: &ToolCall| {
        // A call that will only answer with an error (unknown tool, broken or cut
        // arguments) touches nothing.
        c.invalid_arguments.is_some()
            || cut.contains(&c.id)
            || agent
                .tools
                .find(&c.name)
                .is_none_or(|t| t.concurrency(c) == Concurrency::Shared)
    };
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        match out.last_mut() {
            Some(g) if shared(c) && shared(&calls[g.start]) => g.end = i + 1,
            _ => out.push(i..i + 1),
        }
    }
    out
}

fn dispatch<'a>(agent: &'a Agent, call: &'a ToolCall) -> deerflow_model::BoxFuture<'a, ToolOutput> {
    if let Some(raw) = &call.invalid_arguments {
        let (excerpt, _) = super::observer::cap_chars(raw, 200);
        let out = ToolOutput::error(format!(
            "Error: the arguments of this '{}' call are not valid JSON: {excerpt}",
            call.name
        ));
        return Box::pin(async move { out });
    }
    match agent.tools.find(&call.name) {
        Some(tool) => tool.call(call, &agent.tool_ctx),
        None => {
            let names = agent.tools.names();
            let out = ToolOutput::error(format!(
                "Error: unknown tool '{}'. Available tools: {}",
                call.name,
                names.join(", ")
            ));
            Box::pin(async move { out })
        }
    }
}
