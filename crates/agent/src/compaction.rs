//! Summarization (contract §10): when a trigger fires before a model call, or the provider
//! said the context was too long, an agent's older history becomes one summary message.
//!
//! The rules, each a plain function tested here without a model:
//! - size: the last response's `input_tokens`; without reported usage, an estimate of
//!   the request (system prompt, tool specs and history) at 4 characters per token;
//! - what stays: the first message (the task) and the `keep` part verbatim (reasoning
//!   blocks included, since messages are kept whole), never a tool result without the call
//!   that asked for it;
//! - the ledger: every `task` call summarized away stays in the summary verbatim, so the
//!   lead does not delegate it again.

use std::collections::HashMap;
use std::sync::Arc;

use deerflow_base::text::{cut, Keep};
use deerflow_events::{Event, WarningCode};
use deerflow_model::{
    AgentId, BoxFuture, CallPurpose, ChatModel, ChatRequest, Message, ModelLimits, ToolCall,
};
use deerflow_tools::task_end::TaskEnd;

use super::context::{Compacted, ContextPolicy, History, PreCall, Reason};
use super::tool_results::ToolResultStore;

/// Characters per token of the estimate used when a provider reports no usage.
pub const CHARS_PER_TOKEN: usize = 4;

/// How much of one tool result or message the summarizer sees.
const MESSAGE_CHARS_FOR_SUMMARY: usize = 2_000;
/// How much of a ledger entry's first result line is kept.
const LEDGER_LINE_CHARS: usize = 200;

const BUILT_IN_PROMPT: &str = "You are summarizing the earlier part of an AI agent's working \
conversation so that the agent can continue its task without it. Write a concise summary that \
keeps: the goal and constraints of the task; decisions made; facts learned (file paths, names, \
numbers, commands, errors and how they were resolved); the work done and its results; and what \
remained to do. Do not invent anything and do not continue the task. Answer with the summary \
only.";

const SUMMARY_HEADER: &str =
    "[deerflow] The earlier part of this conversation was summarized to save context.";
const LEDGER_HEADER: &str =
    "## Sub-agent tasks already delegated (their results are in; do not delegate them again)";

/// A size of history: a count of tokens or messages, or a share of the context window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Size {
    Tokens(u64),
    Messages(usize),
    Fraction(f64),
}

/// The `summarization` section, as the agents apply it.
#[derive(Clone)]
pub struct Summarization {
    /// Any one fires.
    pub triggers: Vec<Size>,
    pub keep: Size,
    /// Bound on the transcript sent to the summarizer, in tokens.
    pub trim_tokens: u64,
    /// Replaces the built-in instruction (`{messages}` is replaced by the transcript).
    pub prompt: Option<String>,
    /// `model_name`'s client and name; `None`: the agent's own model.
    pub model: Option<(Arc<dyn ChatModel>, String)>,
}

/// The size of the request about to be made: the last reported `input_tokens`, else the
/// estimate. The flag says whether it was reported.
pub fn current_tokens(at: &PreCall<'_>, messages: &[Message]) -> (u64, bool) {
    match at.last_usage.and_then(|u| u.input()) {
        Some(input) => (input, true),
        None => (estimate_tokens(messages, at.fixed_chars), false),
    }
}

/// Characters / 4, rounded up, over the history plus `fixed_chars`.
pub fn estimate_tokens(messages: &[Message], fixed_chars: usize) -> u64 {
    let chars: usize = fixed_chars + messages.iter().map(message_chars).sum::<usize>();
    chars.div_ceil(CHARS_PER_TOKEN) as u64
}

fn message_chars(m: &Message) -> usize {
    match m {
        Message::User(t) => t.chars().count(),
        Message::Assistant {
            text,
            tool_calls,
            reasoning,
        } => {
            text.as_deref().map_or(0, |t| t.chars().count())
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments_text().chars().count())
                    .sum::<usize>()
                + reasoning.text.as_deref().map_or(0, |t| t.chars().count())
                + reasoning
                    .blocks
                    .iter()
                    .map(|b| b.to_string().len())
                    .sum::<usize>()
        }
        Message::Tool { content, .. } => content.chars().count(),
        // Providers count an image as about 1,500 tokens at the size deerflow sends.
        Message::Images { images, .. } => images.len() * IMAGE_CHARS,
    }
}

/// What an image counts as in the estimate, in characters.
const IMAGE_CHARS: usize = 1_500 * CHARS_PER_TOKEN;

/// Whether a trigger fires for a request of `tokens` tokens and `messages` messages.
pub fn fires(triggers: &[Size], tokens: u64, messages: usize, limits: ModelLimits) -> bool {
    triggers.iter().any(|t| match *t {
        Size::Tokens(n) => tokens >= n,
        Size::Messages(n) => messages >= n,
        // Without a known window a share of it cannot be measured.
        Size::Fraction(f) => limits
            .context_window
            .is_some_and(|w| tokens as f64 >= f * w as f64),
    })
}

/// Where the verbatim part begins: messages `[first_summarized, split)` are summarized,
/// `[split, len)` kept. `None` when nothing would be summarized. The kept part never starts
/// with a tool result, so no result is separated from its call.
pub fn split_point(
    messages: &[Message],
    keep: Size,
    limits: ModelLimits,
    first_summarized: usize,
) -> Option<usize> {
    let len = messages.len();
    let mut split = match keep {
        Size::Messages(n) => len.saturating_sub(n),
        Size::Tokens(t) => keep_tokens(messages, t),
        Size::Fraction(f) => match limits.context_window {
            Some(w) => keep_tokens(messages, (f * w as f64) as u64),
            // A share of an unknown window: the default `keep` (10 messages).
            None => len.saturating_sub(10),
        },
    };
    split = split.max(first_summarized);
    // Images belong to the result (or task) before them, like a result to its call.
    while split < len
        && matches!(
            messages[split],
            Message::Tool { .. } | Message::Images { .. }
        )
    {
        split -= 1;
    }
    (split > first_summarized).then_some(split)
}

/// The start of the longest suffix whose estimate stays within `tokens`.
fn keep_tokens(messages: &[Message], tokens: u64) -> usize {
    let budget = tokens.saturating_mul(CHARS_PER_TOKEN as u64);
    let mut used = 0u64;
    let mut start = messages.len();
    while start > 0 {
        let c = message_chars(&messages[start - 1]) as u64;
        if used + c > budget {
            break;
        }
        used += c;
        start -= 1;
    }
    start
}

/// One line per `task` call among `messages`, with how it ended (`ends`, by call id) and
/// the first line of what it answered: `- "count lines" (general-purpose): completed: 42 lines`.
pub fn ledger_entries(messages: &[Message], ends: &HashMap<String, TaskEnd>) -> Vec<String> {
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let Message::Assistant { tool_calls, .. } = m else {
            continue;
        };
        for call in tool_calls.iter().filter(|c| c.name == "task") {
            let result = messages[i + 1..].iter().find_map(|r| match r {
                Message::Tool {
                    call_id, content, ..
                } if *call_id == call.id => Some(content.as_str()),
                _ => None,
            });
            let outcome = match (ends.get(&call.id), result) {
                (Some(end), _) => Some((end.status.as_str(), end.detail.as_str())),
                // A result the task tool did not give (the call never ran).
                (None, Some(r)) => Some(("unknown", r)),
                (None, None) => None,
            };
            out.push(ledger_line(call, outcome));
        }
    }
    out
}

fn ledger_line(call: &ToolCall, outcome: Option<(&str, &str)>) -> String {
    let args = call.arguments.to_map();
    let arg = |k: &str| args.get(k).and_then(|v| v.as_str()).unwrap_or("");
    let (status, said) = outcome.unwrap_or(("no result", ""));
    let first = said
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut line = format!(
        "- description: {:?}; subagent_type: {}; status: {status}",
        arg("description"),
        arg("subagent_type")
    );
    if !first.is_empty() {
        line.push_str("; result: ");
        line.push_str(&cut(first, LEDGER_LINE_CHARS, Keep::Head).marked_with("…"));
    }
    line
}

/// The summarized messages as text for the summarizer, at most `max_chars` characters.
pub fn transcript(earlier: Option<&str>, messages: &[Message], max_chars: usize) -> String {
    let mut s = String::new();
    if let Some(e) = earlier {
        s.push_str("[earlier summary]\n");
        s.push_str(e);
        s.push_str("\n\n");
    }
    for m in messages {
        let part = |t: &str| cut(t, MESSAGE_CHARS_FOR_SUMMARY, Keep::Middle).marked(0);
        match m {
            Message::User(t) => s.push_str(&format!("[user]\n{}\n\n", part(t))),
            Message::Assistant {
                text, tool_calls, ..
            } => {
                s.push_str("[assistant]\n");
                if let Some(t) = text.as_deref().filter(|t| !t.trim().is_empty()) {
                    s.push_str(&part(t));
                    s.push('\n');
                }
                for c in tool_calls {
                    let args = c.arguments_text();
                    let args = cut(args, 500, Keep::Head).marked_with("…");
                    s.push_str(&format!("called {} {args} (id {})\n", c.name, c.id));
                }
                s.push('\n');
            }
            Message::Tool {
                call_id,
                name,
                content,
            } => s.push_str(&format!(
                "[result of {name} (id {call_id})]\n{}\n\n",
                part(content)
            )),
            // A summary call gets no image (contract §14); the result's text names it.
            Message::Images { .. } => {}
        }
    }
    cut(s.trim_end(), max_chars, Keep::Middle).marked(0)
}

/// The summary message the history keeps: the summary, then the ledger verbatim.
pub fn summary_message(summary: &str, delegations: &[String]) -> String {
    let mut s = format!("{SUMMARY_HEADER}\n\n{}", summary.trim());
    if !delegations.is_empty() {
        s.push_str("\n\n");
        s.push_str(LEDGER_HEADER);
        for d in delegations {
            s.push('\n');
            s.push_str(d);
        }
    }
    s
}

/// The instruction and the one user message of a summary call.
fn summary_request(prompt: Option<&str>, transcript: &str) -> (String, String) {
    match prompt {
        Some(p) if p.contains("{messages}") => (
            BUILT_IN_PROMPT.to_string(),
            p.replace("{messages}", transcript),
        ),
        Some(p) => (p.to_string(), transcript.to_string()),
        None => (
            BUILT_IN_PROMPT.to_string(),
            format!("Summarize this conversation:\n\n{transcript}"),
        ),
    }
}

/// The run's context policy: summarization and large tool outputs, either of them off.
pub struct RunContext {
    pub summarization: Option<Summarization>,
    pub tool_results: Option<ToolResultStore>,
}

impl ContextPolicy for RunContext {
    fn before_call<'a>(&'a self, history: &'a mut History, at: PreCall<'a>) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let Some(s) = &self.summarization else {
                return false;
            };
            if at.reason == Reason::Trigger {
                let (tokens, _) = current_tokens(&at, history.messages());
                if !fires(&s.triggers, tokens, history.len(), at.limits) {
                    return false;
                }
            }
            compact(s, history, &at).await
        })
    }

    fn tool_result(&self, call: &ToolCall, content: String) -> String {
        match &self.tool_results {
            Some(store) => store.admit(call, content),
            None => content,
        }
    }
}

/// Replaces the older history by a summary; whether it did. A summary that cannot be had
/// (both models failed) leaves the history as it is, with a warning.
async fn compact(s: &Summarization, history: &mut History, at: &PreCall<'_>) -> bool {
    let messages = history.messages();
    let before = messages.len();
    // The task and the images attached to it (`--image`) stay, like the task itself.
    let head = task_len(messages);
    let first = head + usize::from(history.compacted().is_some());
    // An overflow leaves no room for a verbatim part: all but the task is summarized.
    let keep = match at.reason {
        Reason::Trigger => s.keep,
        Reason::Overflow => Size::Messages(0),
    };
    let Some(split) = split_point(messages, keep, at.limits, first) else {
        return false;
    };
    let earlier = history.compacted().cloned().unwrap_or_default();
    let old = &messages[first..split];
    let earlier_summary = history.compacted().map(|c| c.summary.as_str());
    let Some(summary) = summarize(s, at, earlier_summary, old).await else {
        return false;
    };
    let mut delegations = earlier.delegations;
    delegations.extend(ledger_entries(old, history.task_ends()));
    let mut kept = Vec::with_capacity(2 + before - split);
    kept.extend_from_slice(&messages[..head]);
    kept.push(Message::User(summary_message(&summary, &delegations)));
    kept.extend_from_slice(&messages[split..]);
    let after = kept.len();
    history.replace(
        kept,
        Compacted {
            summary,
            delegations,
        },
    );
    at.port.emit(Event::ContextCompacted {
        messages_before: before as u32,
        messages_after: after as u32,
        input_tokens_before: at.last_usage.and_then(|u| u.input()),
        reason: at.reason,
    });
    true
}

/// How many messages the task is: its text, and the images attached to it when the history
/// still holds them.
fn task_len(messages: &[Message]) -> usize {
    let images = matches!(messages.get(1), Some(Message::Images { call_id: None, .. }));
    1 + usize::from(images)
}

/// A summarizer that finds the transcript too long for its own context gets it halved, down
/// to this many characters.
const MIN_TRANSCRIPT_CHARS: usize = 2_000;

/// The characters of transcript a summary call may carry: `trim_tokens_to_summarize`, and
/// no more than half the agent's context window when it is known.
pub fn transcript_budget(trim_tokens: u64, limits: ModelLimits) -> usize {
    let tokens = match limits.context_window {
        Some(w) => trim_tokens.min(w / 2),
        None => trim_tokens,
    };
    usize::try_from(tokens)
        .unwrap_or(usize::MAX)
        .saturating_mul(CHARS_PER_TOKEN)
        .max(MIN_TRANSCRIPT_CHARS)
}

/// The summary from `model_name`, else from the agent's own model.
async fn summarize(
    s: &Summarization,
    at: &PreCall<'_>,
    earlier: Option<&str>,
    old: &[Message],
) -> Option<String> {
    let request = |chars: usize| {
        let (system, user) = summary_request(s.prompt.as_deref(), &transcript(earlier, old, chars));
        ChatRequest {
            system: system.into(),
            messages: Arc::new(vec![Message::User(user)]),
            tools: Arc::from([]),
            tool_choice_none: false,
            agent: at.agent.clone(),
            turn: at.turn,
            purpose: CallPurpose::Summary,
            // A summary is prose for the agent, never the structured final answer.
            output_schema: None,
            lineage: None,
        }
    };
    let (own, own_name) = at.port.own_model();
    let mut candidates = Vec::new();
    if let Some((m, name)) = &s.model {
        candidates.push((m.clone(), name.clone()));
    }
    if !candidates.iter().any(|(m, _)| Arc::ptr_eq(m, &own)) {
        candidates.push((own, own_name));
    }
    let mut failures = Vec::new();
    for (model, name) in candidates {
        let mut chars = transcript_budget(s.trim_tokens, at.limits);
        loop {
            match at
                .port
                .side_call(model.as_ref(), &name, &request(chars))
                .await
            {
                Ok(r) => match r.text.filter(|t| !t.trim().is_empty()) {
                    Some(t) => return Some(t),
                    None => failures.push(format!("{name}: the summary was empty")),
                },
                Err(deerflow_model::ModelError::Cancelled) => return None,
                Err(e) if e.is_context_overflow() && chars > MIN_TRANSCRIPT_CHARS => {
                    chars = (chars / 2).max(MIN_TRANSCRIPT_CHARS);
                    continue;
                }
                Err(e) => failures.push(format!("{name}: {e}")),
            }
            break;
        }
    }
    at.port.emit(Event::warning(
        WarningCode::CompactionFailed,
        format!(
            "the {} history could not be summarized ({}); it is sent whole",
            who(at.agent),
            failures.join("; ")
        ),
    ));
    None
}

fn who(agent: &AgentId) -> String {
    match agent {
        AgentId::Lead => "lead agent's".into(),
        AgentId::Task { description, .. } => format!("sub-agent '{description}''s"),
    }
}

#[cfg(test)]
#[path = "compaction_tests.rs"]
mod tests;
