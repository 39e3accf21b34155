//! Test doubles shared by the unit tests of the agent loop, the scheduler and the task
//! tool: a scripted model, a recording tool and an event capture.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use deerflow_events::{start_writer, Envelope, EventSink, EventWriter, Output, Renderer};
use deerflow_model::{
    BoxFuture, CallContext, ChatModel, ChatRequest, ModelError, ModelLimits, ModelResponse,
    ToolCall, ToolSpec, Usage,
};
use deerflow_tools::{Tool, ToolContext, ToolOutput};

/// Answers with the scripted responses in order and keeps every request it got; past the
/// end of the script every call fails.
pub struct Script {
    responses: Mutex<VecDeque<Result<ModelResponse, ModelError>>>,
    requests: Mutex<Vec<ChatRequest>>,
    limits: ModelLimits,
}

impl Script {
    pub fn new(responses: Vec<Result<ModelResponse, ModelError>>) -> Self {
        Self {
            responses: Mutex::new(responses.into()),
            requests: Mutex::default(),
            limits: ModelLimits::default(),
        }
    }

    pub fn with_limits(mut self, limits: ModelLimits) -> Self {
        self.limits = limits;
        self
    }

    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl ChatModel for Script {
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
        _ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        self.requests.lock().unwrap().push(req.clone());
        let next = self.responses.lock().unwrap().pop_front();
        Box::pin(
            async move { next.unwrap_or_else(|| Err(ModelError::Script("script ended".into()))) },
        )
    }

    fn limits(&self) -> ModelLimits {
        self.limits
    }
}

/// `echo {text}` answers `text`; every call's arguments are recorded.
pub struct Echo {
    pub calls: Arc<Mutex<Vec<Value>>>,
}

impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "echo".into(),
            description: "Echoes its text".into(),
            parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        }
    }

    fn call<'a>(&'a self, call: &'a ToolCall, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        let args = call.arguments.to_value();
        self.calls.lock().unwrap().push(args.clone());
        let text = args["text"].as_str().unwrap_or("").to_string();
        Box::pin(async move { ToolOutput::ok(text) })
    }
}

/// The events a [`Capture`] kept, with their task ids.
pub type Seen = Arc<Mutex<Vec<Envelope>>>;

/// Keeps every event (with its task id) that reaches the writer.
pub struct Capture(Seen);

impl Capture {
    /// A sink whose events are kept.
    pub fn start() -> (EventSink, EventWriter, Seen) {
        let seen = Seen::default();
        let (events, writer) = start_writer(Output::Human(Box::new(Capture(seen.clone()))));
        (events, writer, seen)
    }
}

impl Renderer for Capture {
    fn render(&mut self, env: &Envelope) {
        self.0.lock().unwrap().push(env.clone());
    }
}

pub fn text(t: &str) -> Result<ModelResponse, ModelError> {
    Ok(ModelResponse {
        text: Some(t.into()),
        ..Default::default()
    })
}

pub fn call(id: &str, t: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "echo".into(),
        arguments: json!({ "text": t }).into(),
        invalid_arguments: None,
        extra: Default::default(),
    }
}

pub fn calls(c: Vec<ToolCall>, tokens: Option<u64>) -> Result<ModelResponse, ModelError> {
    Ok(ModelResponse {
        tool_calls: c,
        usage: tokens.map(|n| Usage {
            input_tokens: n,
            output_tokens: 0,
            total_tokens: n,
            cache_read_tokens: None,
            cache_write_tokens: None,
            unreported: Default::default(),
        }),
        ..Default::default()
    })
}
