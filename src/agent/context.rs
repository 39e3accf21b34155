//! The agent's history and the one hook where a context policy acts on it before each model
//! call (summarization and overflow recovery plug in here; the default keeps everything).
//!
//! The history is shared with the request it is sent in (`Arc`), not copied per turn: a
//! request holds the `Arc` only while the call runs, so appending afterwards finds it
//! unshared and pushes in place.

use std::sync::Arc;

use crate::model::{AgentId, BoxFuture, Message, ModelLimits, Usage};

/// One agent's messages, oldest first; the first is the task (the user's prompt).
#[derive(Debug, Clone, Default)]
pub struct History {
    messages: Arc<Vec<Message>>,
}

impl History {
    pub fn new(first: Message) -> Self {
        Self {
            messages: Arc::new(vec![first]),
        }
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

    pub fn last_mut(&mut self) -> Option<&mut Message> {
        Arc::make_mut(&mut self.messages).last_mut()
    }

    /// Replaces the whole history (a compaction's result).
    pub fn replace(&mut self, messages: Vec<Message>) {
        self.messages = Arc::new(messages);
    }

    /// The history as a request carries it: shared, not copied.
    pub fn shared(&self) -> Arc<Vec<Message>> {
        self.messages.clone()
    }
}

/// What a context policy knows before a model call.
#[derive(Debug, Clone)]
pub struct PreCall<'a> {
    pub agent: &'a AgentId,
    /// 0-based index of the call about to be made.
    pub turn: usize,
    /// What the previous response of this agent reported (`None` before the first call or
    /// when the provider reported no usage: then a policy estimates from the history).
    pub last_usage: Option<Usage>,
    /// The model's capacity, as configured.
    pub limits: ModelLimits,
}

/// Decides, before each model call, whether the history must shrink, and shrinks it.
pub trait ContextPolicy: Send + Sync {
    fn before_call<'a>(&'a self, history: &'a mut History, at: PreCall<'a>) -> BoxFuture<'a, ()>;
}

/// The policy when none is configured: the history is sent whole.
pub struct KeepAll;

impl ContextPolicy for KeepAll {
    fn before_call<'a>(&'a self, _history: &'a mut History, _at: PreCall<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async {})
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
