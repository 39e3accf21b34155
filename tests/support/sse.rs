//! Renders scripted replies into SSE chunks shaped like the real providers' streams
//! (OpenAI chunks follow the llama-server captures in tests/fixtures/llama-server).

use serde_json::{json, Value};

use super::responses;
use super::script::{Body, Call, Reply};

/// Per-request values that make the stream look real: the echoed model and a unique id.
pub(crate) struct StreamCtx {
    pub model: String,
    pub seq: usize,
    /// The request went to a `/responses` path: OpenAI replies speak the Responses API.
    pub responses: bool,
}

/// The SSE chunks for a streamed reply, one element per write.
pub(crate) fn chunks(reply: &Reply, ctx: &StreamCtx) -> Vec<String> {
    match &reply.body {
        Body::OpenAi { text, calls } if ctx.responses => {
            let output = responses::Output {
                text: text.clone(),
                calls: calls.clone(),
                ..Default::default()
            };
            responses::chunks(reply, ctx, &responses::ResponsesBody::Output(output))
        }
        Body::Responses(body) => responses::chunks(reply, ctx, body),
        Body::OpenAi { text, calls } => openai(reply, ctx, text.as_deref(), calls),
        Body::Anthropic { text, calls } => anthropic(reply, ctx, text.as_deref(), calls),
        Body::AnthropicError { kind, message } => vec![
            anthropic_start(reply, ctx),
            event(
                "error",
                json!({"type": "error", "error": {"type": kind, "message": message}}),
            ),
        ],
        Body::Gemini(g) => super::gemini::chunks(reply, g, ctx),
        Body::RawSse(chunks) => chunks.clone(),
        Body::Status { .. } => Vec::new(),
    }
}

/// Splits `s` into up to `max` non-empty pieces on char boundaries, so clients must
/// reassemble deltas (short strings give fewer pieces).
pub(crate) fn split_pieces(s: &str, max: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let n = max.clamp(1, chars.len());
    let size = chars.len().div_ceil(n);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn data(value: Value) -> String {
    format!("data: {value}\n\n")
}

fn event(name: &str, value: Value) -> String {
    format!("event: {name}\ndata: {value}\n\n")
}

// ---- OpenAI Chat Completions ----

fn openai(reply: &Reply, ctx: &StreamCtx, text: Option<&str>, calls: &[Call]) -> Vec<String> {
    let chunk = |choices: Value| {
        json!({
            "choices": choices,
            "created": 1_700_000_000,
            "id": format!("chatcmpl-mock-{}", ctx.seq),
            "model": ctx.model,
            "system_fingerprint": "mock",
            "object": "chat.completion.chunk",
        })
    };
    let delta = |delta: Value, finish: Value| {
        data(chunk(
            json!([{"finish_reason": finish, "index": 0, "delta": delta}]),
        ))
    };

    let mut out = vec![delta(
        json!({"role": "assistant", "content": null}),
        Value::Null,
    )];
    for piece in split_pieces(text.unwrap_or(""), 3) {
        out.push(delta(json!({"content": piece}), Value::Null));
    }
    for (index, call) in calls.iter().enumerate() {
        out.extend(
            openai_call_deltas(index, call)
                .into_iter()
                .map(|d| delta(d, Value::Null)),
        );
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    out.push(delta(json!({}), json!(finish)));
    if let Some((input, output)) = reply.usage {
        let mut usage = json!({
            "prompt_tokens": input,
            "completion_tokens": output,
            "total_tokens": input + output,
        });
        if let Some(cached) = reply.cached {
            usage["prompt_tokens_details"] = json!({"cached_tokens": cached});
        }
        let mut last = chunk(json!([]));
        last["usage"] = usage;
        out.push(data(last));
    }
    out.push("data: [DONE]\n\n".to_string());
    out
}

/// Like llama-server: the first delta names the call and carries the first arguments
/// fragment; the rest of the arguments JSON follows in small fragments.
fn openai_call_deltas(index: usize, (id, name, args): &Call) -> Vec<Value> {
    let mut pieces = split_pieces(&args.to_string(), 4).into_iter();
    let first = pieces.next().unwrap_or_default();
    let mut out = vec![json!({"tool_calls": [{
        "index": index, "id": id, "type": "function",
        "function": {"name": name, "arguments": first},
    }]})];
    for piece in pieces {
        out.push(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}));
    }
    out
}

// ---- Anthropic Messages ----

fn anthropic(reply: &Reply, ctx: &StreamCtx, text: Option<&str>, calls: &[Call]) -> Vec<String> {
    let mut out = vec![
        anthropic_start(reply, ctx),
        event("ping", json!({"type": "ping"})),
    ];
    let mut index = 0;
    if let Some(text) = text {
        out.extend(anthropic_text_block(index, text));
        index += 1;
    }
    for call in calls {
        out.extend(anthropic_tool_block(index, call));
        index += 1;
    }
    let stop_reason = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    let output = reply.usage.map_or(0, |(_, output)| output);
    out.push(event(
        "message_delta",
        json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": output},
        }),
    ));
    out.push(event("message_stop", json!({"type": "message_stop"})));
    out
}

/// `message_start`. Like the real API it reports the full input usage but only a token or
/// so of output: the final output count arrives in `message_delta` and replaces it.
fn anthropic_start(reply: &Reply, ctx: &StreamCtx) -> String {
    let (input, output) = reply.usage.unwrap_or((0, 0));
    let mut usage = json!({"input_tokens": input, "output_tokens": output.min(1)});
    if let Some(read) = reply.cached {
        usage["cache_read_input_tokens"] = json!(read);
    }
    if let Some(creation) = reply.cache_creation {
        usage["cache_creation_input_tokens"] = json!(creation);
    }
    event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": format!("msg_mock_{}", ctx.seq),
            "type": "message",
            "role": "assistant",
            "model": ctx.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": usage,
        }}),
    )
}

fn anthropic_text_block(index: usize, text: &str) -> Vec<String> {
    let start = json!({"type": "text", "text": ""});
    let deltas = split_pieces(text, 3)
        .into_iter()
        .map(|piece| json!({"type": "text_delta", "text": piece}))
        .collect();
    anthropic_block(index, start, deltas)
}

/// The real API opens a tool_use block with `input: {}` and an empty `partial_json` first.
fn anthropic_tool_block(index: usize, (id, name, input): &Call) -> Vec<String> {
    let start = json!({"type": "tool_use", "id": id, "name": name, "input": {}});
    let mut fragments = vec![String::new()];
    fragments.extend(split_pieces(&input.to_string(), 3));
    let deltas = fragments
        .into_iter()
        .map(|piece| json!({"type": "input_json_delta", "partial_json": piece}))
        .collect();
    anthropic_block(index, start, deltas)
}

fn anthropic_block(index: usize, start: Value, deltas: Vec<Value>) -> Vec<String> {
    let mut out = vec![event(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": start}),
    )];
    for delta in deltas {
        out.push(event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
    }
    out.push(event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    ));
    out
}
