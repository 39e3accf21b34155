//! The agent's history and the one hook where a context policy acts on it before each model
//! call (summarization and overflow recovery plug in here; the default keeps everything).
//!
//! The history is shared with the request it is sent in (`Arc`), not copied per turn: a
//! request holds the `Arc` only while the call runs, so appending afterwards finds it
//! unshared and pushes in place.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use deerflow_events::Event;
use deerflow_model::image::Image;
use deerflow_model::{
    AgentId, BoxFuture, ChatModel, ChatRequest, Lineage, Message, ModelError, ModelLimits,
    ModelResponse, ToolCall, Usage,
};
use deerflow_tools::task_end::TaskEnd;

/// One agent's messages, oldest first; the first is the task (the user's prompt).
#[derive(Debug)]
pub struct History {
    messages: Arc<Vec<Message>>,
    /// What compactions left behind: the summary (the second message) and the ledger of the
    /// `task` calls it replaced, carried verbatim into every later summary.
    compacted: Option<Compacted>,
    /// Keeps [`ChatRequest::lineage`]'s promise: a new one whenever a message that went out
    /// in a request changes (or the history is replaced, or copied).
    lineage: Lineage,
    /// The leading messages that went out in a request under this lineage.
    sent: usize,
    /// How each `task` call in the messages ended, by call id.
    task_ends: HashMap<String, TaskEnd>,
}

impl Clone for History {
    /// A copy can grow apart from its original, so it is a lineage of its own.
    fn clone(&self) -> Self {
        Self {
            messages: self.messages.clone(),
            compacted: self.compacted.clone(),
            lineage: Lineage::fresh(),
            sent: 0,
            task_ends: self.task_ends.clone(),
        }
    }
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
            lineage: Lineage::fresh(),
            sent: 0,
            task_ends: HashMap::new(),
        }
    }

    /// A history that starts with the task and the images attached to it (`--image`).
    pub fn with_images(first: Message, images: Vec<Image>) -> Self {
        let mut history = Self::new(first);
        history.push_images(None, images);
        history
    }

    /// Set once the history was compacted: the message after the task (and the task's
    /// images) is then the summary.
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

    /// Adds images shown with the message before them, then keeps only the
    /// [`MAX_IMAGES`] newest of the history: older ones leave it (their tool result's
    /// `Image read` line stays).
    pub fn push_images(&mut self, call_id: Option<String>, images: Vec<Image>) {
        if images.is_empty() {
            return;
        }
        self.push(Message::Images { call_id, images });
        let mut newer = 0;
        let mut over = Vec::new();
        for (at, m) in self.messages.iter().enumerate().rev() {
            if let Message::Images { images, .. } = m {
                let keep = MAX_IMAGES.saturating_sub(newer).min(images.len());
                newer += images.len();
                if keep < images.len() {
                    over.push((at, keep));
                }
            }
        }
        if let Some(&(oldest, _)) = over.last() {
            self.changing(oldest);
        }
        let messages = Arc::make_mut(&mut self.messages);
        // From the newest: removing a message leaves the places of older ones as they were.
        for (at, keep) in over {
            match &mut messages[at] {
                Message::Images { images, .. } if keep > 0 => {
                    images.drain(..images.len() - keep);
                }
                _ => {
                    messages.remove(at);
                }
            }
        }
    }

    /// Notes how the `task` call `call_id`, whose result is in the messages, ended.
    pub fn record_task_end(&mut self, call_id: &str, end: TaskEnd) {
        self.task_ends.insert(call_id.to_string(), end);
    }

    /// How the `task` calls in the messages ended, by call id.
    pub fn task_ends(&self) -> &HashMap<String, TaskEnd> {
        &self.task_ends
    }

    /// Gives the assistant message at `at` its tool calls.
    pub fn set_calls(&mut self, at: usize, calls: Vec<ToolCall>) {
        self.changing(at);
        if let Some(Message::Assistant { tool_calls, .. }) =
            Arc::make_mut(&mut self.messages).get_mut(at)
        {
            *tool_calls = calls;
        }
    }

    pub fn last_mut(&mut self) -> Option<&mut Message> {
        self.changing(self.len().saturating_sub(1));
        Arc::make_mut(&mut self.messages).last_mut()
    }

    /// Replaces the whole history (a compaction's result).
    pub fn replace(&mut self, messages: Vec<Message>, compacted: Compacted) {
        let results: HashSet<&str> = messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool { call_id, .. } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        self.task_ends.retain(|id, _| results.contains(id.as_str()));
        self.messages = Arc::new(messages);
        self.compacted = Some(compacted);
        self.new_lineage();
    }

    /// The history as a request carries it (shared, not copied) and its lineage. Its
    /// messages count as sent from now on.
    pub fn for_request(&mut self) -> (Arc<Vec<Message>>, Lineage) {
        self.sent = self.len();
        (self.messages.clone(), self.lineage)
    }

    /// The message at `at` is about to change.
    fn changing(&mut self, at: usize) {
        if at < self.sent {
            self.new_lineage();
        }
    }

    fn new_lineage(&mut self) {
        self.lineage = Lineage::fresh();
        self.sent = 0;
    }
}

/// The images an agent's history keeps (contract §14).
pub const MAX_IMAGES: usize = 5;

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

/// Why a context policy acts before a model call.
pub use deerflow_events::CompactionReason as Reason;

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
    fn only_the_five_newest_images_stay() {
        use deerflow_model::image::testing::test_png;
        let mut h = History::new(Message::User("task".into()));
        h.push_images(None, vec![test_png(1, 1)]);
        for i in 0..3 {
            h.push(Message::Tool {
                call_id: format!("c{i}"),
                name: "view_image".into(),
                content: format!("Image read: {i}.png (2x{i})"),
            });
        }
        h.push_images(Some("c0".into()), vec![test_png(2, 1), test_png(2, 2)]);
        h.push_images(Some("c1".into()), vec![test_png(2, 3)]);
        let (_, before) = h.for_request();
        let count = |h: &History| -> Vec<(Option<String>, usize)> {
            h.messages()
                .iter()
                .filter_map(|m| match m {
                    Message::Images { call_id, images } => Some((call_id.clone(), images.len())),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(count(&h).iter().map(|c| c.1).sum::<usize>(), 4);
        // The sixth image: the task's, the oldest, leaves.
        h.push_images(Some("c2".into()), vec![test_png(2, 4), test_png(2, 5)]);
        assert_eq!(
            count(&h),
            [
                (Some("c0".into()), 2),
                (Some("c1".into()), 1),
                (Some("c2".into()), 2)
            ]
        );
        assert!(matches!(h.messages()[1], Message::Tool { .. }));
        // A sent message changed: the history is a new lineage.
        assert_ne!(h.for_request().1, before);
        // One more: the oldest group keeps its newer image.
        h.push_images(Some("c2".into()), vec![test_png(2, 6)]);
        assert_eq!(count(&h)[0], (Some("c0".into()), 1));
        let Message::Images { images, .. } = &h.messages()[4] else {
            panic!("{:?}", h.messages());
        };
        assert_eq!(images[0].size(), (2, 2));
    }

    #[test]
    fn pushing_after_a_request_ended_does_not_copy() {
        let mut h = History::new(Message::User("task".into()));
        let (sent, _) = h.for_request();
        h.push(Message::User("second".into()));
        // The request still held the old history: it kept its own view.
        assert_eq!(sent.len(), 1);
        assert_eq!(h.len(), 2);
        drop(sent);
        let before = Arc::as_ptr(&h.for_request().0);
        h.push(Message::User("third".into()));
        assert_eq!(Arc::as_ptr(&h.for_request().0), before, "pushed in place");
        assert_eq!(h.messages().len(), 3);
    }

    fn assistant() -> Message {
        Message::Assistant {
            text: None,
            tool_calls: vec![],
            reasoning: Default::default(),
        }
    }

    /// The request bodies an OpenAI-compatible provider writes from the messages it sent
    /// before (by lineage) are the bodies written whole, whatever happens to the histories:
    /// several of them sharing one cache, growing, their sent and unsent messages edited,
    /// replaced, copied and the copies grown apart.
    #[test]
    fn bodies_written_from_sent_messages_are_the_bodies_written_whole() {
        use deerflow_model::providers::openai_chat::{request_body, request_bytes, WireCache};
        use deerflow_model::{HttpSettings, ToolArgs};
        let settings = HttpSettings::new("m", "http://x/v1", None);
        let cache = WireCache::default();
        let mut rng = fastrand::Rng::with_seed(7);
        let mut histories: Vec<History> = (0..4)
            .map(|i| History::new(Message::User(format!("task {i} \"quoted\""))))
            .collect();
        for step in 0..2000 {
            let h = rng.usize(..histories.len());
            let text = format!("m{step}\n\u{e9}");
            match rng.u8(..9) {
                0 => histories[h].push(Message::User(text)),
                1 => histories[h].push(Message::Assistant {
                    text: Some(text),
                    tool_calls: vec![],
                    reasoning: deerflow_model::Reasoning {
                        text: rng.bool().then(|| "why".into()),
                        blocks: vec![],
                    },
                }),
                2 => histories[h].push(Message::Tool {
                    call_id: format!("c{step}"),
                    name: "ls".into(),
                    content: text,
                }),
                3 => {
                    let at = rng.usize(..histories[h].len());
                    let args = ToolArgs::parse(&format!("{{\"n\": {step}}}")).unwrap();
                    histories[h].set_calls(at, vec![ToolCall::new(format!("c{step}"), "ls", args)]);
                }
                4 => {
                    if let Some(Message::User(t) | Message::Tool { content: t, .. }) =
                        histories[h].last_mut()
                    {
                        t.push('!');
                    }
                }
                5 if rng.u8(..10) == 0 => {
                    let keep = histories[h].messages()[..1].to_vec();
                    histories[h].replace(keep, Compacted::default());
                }
                6 if rng.u8(..10) == 0 => {
                    let copy = histories[h].clone();
                    histories.push(copy);
                }
                _ => {
                    let (messages, lineage) = histories[h].for_request();
                    let mut req = deerflow_model::providers::openai_chat::test_data::request(
                        vec![],
                        vec![],
                        false,
                    );
                    req.messages = messages;
                    req.lineage = Some(lineage);
                    let bytes = request_bytes(&settings, &req, &cache);
                    req.lineage = None;
                    let whole = serde_json::to_vec(&request_body(&settings, &req)).unwrap();
                    assert_eq!(
                        String::from_utf8(bytes).unwrap(),
                        String::from_utf8(whole).unwrap(),
                        "step {step}"
                    );
                }
            }
        }
    }

    /// A lineage holds while only messages no request has carried change; changing a sent
    /// one, replacing the history or copying it starts a new one.
    #[test]
    fn a_sent_message_that_changes_starts_a_new_lineage() {
        let mut h = History::new(Message::User("task".into()));
        let (_, first) = h.for_request();
        h.push(assistant());
        h.set_calls(1, vec![]);
        h.push(Message::User("more".into()));
        h.last_mut();
        let (_, same) = h.for_request();
        assert_eq!(same, first, "appended and edited unsent messages only");
        h.last_mut();
        let (_, after_edit) = h.for_request();
        assert_ne!(after_edit, first, "the last message had been sent");
        h.set_calls(1, vec![]);
        let (_, after_calls) = h.for_request();
        assert_ne!(after_calls, after_edit);
        let copy = h.clone();
        assert_ne!(copy.lineage, h.lineage);
        h.replace(vec![Message::User("task".into())], Compacted::default());
        assert_ne!(h.for_request().1, after_calls);
    }
}
