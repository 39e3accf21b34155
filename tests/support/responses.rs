//! The mock's OpenAI Responses API: scripted replies rendered as the `/responses` SSE
//! stream (shaped like the captures in tests/fixtures/providers/openai). Any
//! OpenAI reply (`Reply::text`, `Reply::tool_calls`, …) answering a request to a path
//! ending in `/responses` is rendered this way; the builders here add what only this API
//! has.

use serde_json::{json, Value};

use super::script::{Body, Call, Reply};
use super::sse::{split_pieces, StreamCtx};

/// A scripted Responses API stream.
#[derive(Clone, Debug)]
pub(crate) enum ResponsesBody {
    /// Output items, then `response.completed` (or `response.incomplete`).
    Output(Output),
    /// `response.created`, then `response.failed` with this error.
    Failed { code: String, message: String },
    /// `response.created`, then an `error` event.
    ErrorEvent { code: String, message: String },
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Output {
    /// A reasoning item first: (summary text, encrypted_content).
    pub reasoning: Option<(String, String)>,
    pub text: Option<String>,
    pub calls: Vec<Call>,
    /// `response.incomplete` with this `incomplete_details.reason`.
    pub incomplete: Option<String>,
}

impl Reply {
    /// Responses SSE: a reasoning item (this summary, streamed as deltas, and this
    /// `encrypted_content`) before the reply's text and calls.
    pub fn responses_reasoning(
        self,
        summary: impl Into<String>,
        encrypted: impl Into<String>,
    ) -> Self {
        self.into_responses(|o| o.reasoning = Some((summary.into(), encrypted.into())))
    }

    /// Responses SSE: ends with `response.incomplete` for this reason
    /// (`max_output_tokens`, `content_filter`) instead of `response.completed`.
    pub fn responses_incomplete(self, reason: impl Into<String>) -> Self {
        self.into_responses(|o| o.incomplete = Some(reason.into()))
    }

    /// Responses SSE: `response.failed` with this error code and message.
    pub fn responses_failed(code: impl Into<String>, message: impl Into<String>) -> Self {
        let mut reply = Reply::text("");
        reply.body = Body::Responses(ResponsesBody::Failed {
            code: code.into(),
            message: message.into(),
        });
        reply
    }

    /// Responses SSE: an `error` event with this code and message.
    pub fn responses_error_event(code: impl Into<String>, message: impl Into<String>) -> Self {
        let mut reply = Reply::text("");
        reply.body = Body::Responses(ResponsesBody::ErrorEvent {
            code: code.into(),
            message: message.into(),
        });
        reply
    }

    fn into_responses(mut self, change: impl FnOnce(&mut Output)) -> Self {
        let mut output = match &self.body {
            Body::OpenAi { text, calls } => Output {
                text: text.clone(),
                calls: calls.clone(),
                ..Output::default()
            },
            Body::Responses(ResponsesBody::Output(o)) => o.clone(),
            other => panic!("mock: not an OpenAI reply: {other:?}"),
        };
        change(&mut output);
        self.body = Body::Responses(ResponsesBody::Output(output));
        self
    }
}

/// The SSE events of a scripted Responses API reply.
pub(crate) fn chunks(reply: &Reply, ctx: &StreamCtx, body: &ResponsesBody) -> Vec<String> {
    let mut s = Stream {
        seq: 0,
        out: Vec::new(),
    };
    let id = format!("resp_mock_{}", ctx.seq);
    let response = |status: &str, output: Vec<Value>, usage: Value| {
        json!({
            "id": id, "object": "response", "created_at": 1_700_000_000, "status": status,
            "error": null, "incomplete_details": null, "model": ctx.model, "output": output,
            "store": false, "usage": usage,
        })
    };
    s.event(json!({"type": "response.created", "response": response("in_progress", vec![], Value::Null)}));
    s.event(json!({"type": "response.in_progress", "response": response("in_progress", vec![], Value::Null)}));
    match body {
        ResponsesBody::Failed { code, message } => {
            let mut failed = response("failed", vec![], Value::Null);
            failed["error"] = json!({"code": code, "message": message});
            s.event(json!({"type": "response.failed", "response": failed}));
        }
        ResponsesBody::ErrorEvent { code, message } => {
            s.event(json!({"type": "error", "code": code, "message": message, "param": null}));
        }
        ResponsesBody::Output(o) => {
            let items = s.output_items(ctx.seq, o);
            let (kind, status) = match &o.incomplete {
                Some(_) => ("response.incomplete", "incomplete"),
                None => ("response.completed", "completed"),
            };
            let mut last = response(status, items, usage(reply));
            if let Some(reason) = &o.incomplete {
                last["incomplete_details"] = json!({ "reason": reason });
            }
            s.event(json!({"type": kind, "response": last}));
        }
    }
    s.out
}

/// `usage` as the API reports it, when the reply sets one.
fn usage(reply: &Reply) -> Value {
    let Some((input, output)) = reply.usage else {
        return Value::Null;
    };
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": reply.cached.unwrap_or(0)},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output,
    })
}

struct Stream {
    seq: u64,
    out: Vec<String>,
}

impl Stream {
    /// One SSE event, named by its `type` and numbered like the real stream.
    fn event(&mut self, mut value: Value) {
        value["sequence_number"] = json!(self.seq);
        self.seq += 1;
        let name = value["type"].as_str().unwrap_or("message").to_string();
        self.out.push(format!("event: {name}\ndata: {value}\n\n"));
    }

    /// Streams every output item and returns them whole (for the final response).
    fn output_items(&mut self, seq: usize, o: &Output) -> Vec<Value> {
        let mut items = Vec::new();
        if let Some((summary, encrypted)) = &o.reasoning {
            let index = items.len();
            items.push(self.reasoning(seq, index, summary, encrypted));
        }
        if let Some(text) = &o.text {
            let index = items.len();
            items.push(self.message(seq, index, text));
        }
        for call in &o.calls {
            let index = items.len();
            items.push(self.call(index, call));
        }
        items
    }

    fn added(&mut self, index: usize, item: Value) {
        self.event(
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
        );
    }

    fn done(&mut self, index: usize, item: &Value) {
        self.event(
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
    }

    fn reasoning(&mut self, seq: usize, index: usize, summary: &str, encrypted: &str) -> Value {
        let id = format!("rs_mock_{seq}_{index}");
        self.added(index, json!({"id": id, "type": "reasoning", "summary": []}));
        let at = json!({"item_id": id, "output_index": index, "summary_index": 0});
        let with = |kind: &str, extra: Value| {
            let mut v = at.clone();
            v["type"] = json!(kind);
            for (k, x) in extra.as_object().into_iter().flatten() {
                v[k] = x.clone();
            }
            v
        };
        let part = json!({"type": "summary_text", "text": ""});
        self.event(with(
            "response.reasoning_summary_part.added",
            json!({ "part": part }),
        ));
        for piece in split_pieces(summary, 3) {
            self.event(with(
                "response.reasoning_summary_text.delta",
                json!({ "delta": piece }),
            ));
        }
        self.event(with(
            "response.reasoning_summary_text.done",
            json!({ "text": summary }),
        ));
        let part = json!({"type": "summary_text", "text": summary});
        self.event(with(
            "response.reasoning_summary_part.done",
            json!({ "part": part }),
        ));
        let item = json!({"id": id, "type": "reasoning", "summary": [part],
                          "encrypted_content": encrypted});
        self.done(index, &item);
        item
    }

    fn message(&mut self, seq: usize, index: usize, text: &str) -> Value {
        let id = format!("msg_mock_{seq}_{index}");
        self.added(
            index,
            json!({"id": id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}),
        );
        let at = |kind: &str| json!({"type": kind, "item_id": id, "output_index": index, "content_index": 0});
        let mut added = at("response.content_part.added");
        added["part"] = json!({"type": "output_text", "annotations": [], "text": ""});
        self.event(added);
        for piece in split_pieces(text, 3) {
            let mut delta = at("response.output_text.delta");
            delta["delta"] = json!(piece);
            self.event(delta);
        }
        let mut done = at("response.output_text.done");
        done["text"] = json!(text);
        self.event(done);
        let part = json!({"type": "output_text", "annotations": [], "text": text});
        let mut part_done = at("response.content_part.done");
        part_done["part"] = part.clone();
        self.event(part_done);
        let item = json!({"id": id, "type": "message", "status": "completed",
                          "content": [part], "role": "assistant"});
        self.done(index, &item);
        item
    }

    fn call(&mut self, index: usize, (call_id, name, args): &Call) -> Value {
        let id = format!("fc_mock_{call_id}");
        self.added(
            index,
            json!({"id": id, "type": "function_call", "status": "in_progress",
                   "arguments": "", "call_id": call_id, "name": name}),
        );
        let arguments = args.to_string();
        for piece in split_pieces(&arguments, 4) {
            self.event(json!({"type": "response.function_call_arguments.delta",
                              "item_id": id, "output_index": index, "delta": piece}));
        }
        self.event(json!({"type": "response.function_call_arguments.done",
                          "item_id": id, "output_index": index, "arguments": arguments}));
        let item = json!({"id": id, "type": "function_call", "status": "completed",
                          "arguments": arguments, "call_id": call_id, "name": name});
        self.done(index, &item);
        item
    }
}
