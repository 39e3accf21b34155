//! The agent's history and the one hook where a context policy acts on it before each model
//! call (summarization and overflow recovery plug in here; the default keeps everything).
//!
//! The history is shared with the request it is sent in (`Arc`), not copied per turn: a
//! request holds the `Arc` only while the call runs, so appending afterwards finds it
//! unshared and pushes in place.

use std::sync::Arc;

use crate::events::Event;
use crate::model::{
    AgentId, BoxFuture, ChatModel, ChatRequest, Message, ModelError, ModelLimits, ModelResponse,
    ToolCall, Usage,
};

/// One agent's messages, oldest first; the first is the task (the user's prompt).
#[derive(Debug, Clone, Default)]
pub struct History {
    messages: Arc<Vec<Message>>,
    /// What compactions left behind: the summary (the second message) and the ledger of the
    /// `task` calls it replaced, carried verbatim into every later summary.
    compacted: Option<Compacted>,
}

/// The state of a compacted history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Compacted {
    /// The summarizer's text, as it went into the summary message.
    pub summary: String,
    /// One line per `task` call summarized away, oldest first.
    pub delegations: Vec<String>,
}

impl History {
    pub fn new(first: Message) -> Self {
        Self {
            messages: Arc::new(vec![first]),
            compacted: None,
        }
    }

    /// Set once the history was compacted: its second message is then the summary.
    pub fn compacted(&self) -> Option<&Compacted> {
        self.compacted.as_ref()
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub fn push(&mut self, m: Message) {
        // Copies only if a request still holds the history (it does not after a call ends).
        Arc::make_mut(&mut self.messages).push(m);
    }

    /// Gives the assistant message at `at` its tool calls.
    pub fn set_calls(&mut self, at: usize, calls: Vec<ToolCall>) {
        if let Some(Message::Assistant { tool_calls, .. }) =
            Arc::make_mut(&mut self.messages).get_mut(at)
        {
            *tool_calls = calls;
        }
    }

    pub fn last_mut(&mut self) -> Option<&mut Message> {
        Arc::make_mut(&mut self.messages).last_mut()
    }

    /// Replaces the whole history (a compaction's result).
    pub fn replace(&mut self, messages: Vec<Message>, compacted: Compacted) {
        self.messages = Arc::new(messages);
        self.compacted = Some(compacted);
    }

    /// The history as a request carries it: shared, not copied.
    pub fn shared(&self) -> Arc<Vec<Message>> {
        self.messages.clone()
    }
}

/// What a context policy knows before a model call.
#[derive(Clone, Copy)]
pub struct PreCall<'a> {
    pub agent: &'a AgentId,
    /// 0-based index of the call about to be made.
    pub turn: usize,
    /// What the previous response of this agent reported (`None` before the first call or
    /// when the provider reported no usage: then a policy estimates from the history).
    pub last_usage: Option<Usage>,
    /// The model's capacity, as configured.
    pub limits: ModelLimits,
    /// Why the policy is asked.
    pub reason: Reason,
    /// Characters every request carries besides the history (system prompt, tool specs),
    /// for estimates.
    pub fixed_chars: usize,
    /// Model calls as this agent, for a summary.
    pub port: &'a dyn AgentPort,
}

/// Why a policy is asked to act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Before a model call: act if a trigger fires.
    Trigger,
    /// The provider said the last request's context was too long: shrink now.
    Overflow,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Trigger => "trigger",
            Reason::Overflow => "overflow",
        }
    }
}

/// What the agent loop lends a policy: the agent's model, and model calls made and
/// accounted as that agent's.
pub trait AgentPort: Send + Sync {
    /// The agent's own model and the name events give it.
    fn own_model(&self) -> (Arc<dyn ChatModel>, String);
    /// One model call of this agent that is not a turn: its `usage` event carries the
    /// agent's caller and it counts in the totals and the budget.
    fn side_call<'a>(
        &'a self,
        model: &'a dyn ChatModel,
        model_name: &'a str,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>>;
    /// Emits an event as this agent (stamped with its task id inside a sub-agent).
    fn emit(&self, event: Event);
}

/// Decides, before each model call, whether the history must shrink, and shrinks it; and
/// decides what of a tool result goes into the history.
pub trait ContextPolicy: Send + Sync {
    /// Returns whether the history was compacted.
    fn before_call<'a>(&'a self, history: &'a mut History, at: PreCall<'a>) -> BoxFuture<'a, bool>;

    /// The text of a tool result as the history keeps it.
    fn tool_result(&self, _call: &ToolCall, content: String) -> String {
        content
    }
}

/// The policy when none is configured: the history is sent whole.
pub struct KeepAll;

impl ContextPolicy for KeepAll {
    fn before_call<'a>(
        &'a self,
        _history: &'a mut History,
        _at: PreCall<'a>,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async { false })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushing_after_a_request_ended_does_not_copy() {
        let mut h = History::new(Message::User("task".into()));
        let sent = h.shared();
        h.push(Message::User("second".into()));
        // The request still held the old history: it kept its own view.
        assert_eq!(sent.len(), 1);
        assert_eq!(h.len(), 2);
        drop(sent);
        let before = Arc::as_ptr(&h.shared());
        h.push(Message::User("third".into()));
        assert_eq!(Arc::as_ptr(&h.shared()), before, "pushed in place");
        assert_eq!(h.messages().len(), 3);
    }
}
