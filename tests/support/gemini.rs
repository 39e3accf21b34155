//! Gemini's `streamGenerateContent?alt=sse`, shaped like the captures in
//! tests/fixtures/providers/gemini: CRLF line endings, `"key": value` spacing, one
//! whole `GenerateContentResponse` per event, each function call in its own chunk, the
//! cumulative `usageMetadata` on the last chunk with the `finishReason`, no end marker.

use serde_json::{json, Map, Value};

use super::script::{own_calls, Body, Call, Reply};
use super::sse::{split_pieces, StreamCtx};

/// What a scripted Gemini answer holds.
#[derive(Clone, Debug, Default)]
pub struct GeminiReply {
    pub(crate) thought: Option<String>,
    pub(crate) text: Option<String>,
    /// An empty id is sent without one (Gemini 2.x); others as `functionCall.id` (Gemini 3).
    pub(crate) calls: Vec<Call>,
    /// On the first function call's part, else on a last empty text part.
    pub(crate) signature: Option<String>,
    pub(crate) finish: Option<String>,
    pub(crate) thoughts_tokens: Option<u64>,
    /// `promptFeedback.blockReason`: the prompt refused, no candidate.
    pub(crate) blocked: Option<String>,
}

impl Reply {
    /// Gemini SSE: a text answer, `finishReason: "STOP"`.
    pub fn gemini_text(text: impl Into<String>) -> Self {
        Self::from_body(Body::Gemini(GeminiReply {
            text: Some(text.into()),
            ..Default::default()
        }))
    }

    /// Gemini SSE: function calls `(id, name, args)`; an empty id sends none.
    pub fn gemini_calls<I: Into<String>, N: Into<String>>(calls: Vec<(I, N, Value)>) -> Self {
        Self::from_body(Body::Gemini(GeminiReply {
            calls: own_calls(calls),
            ..Default::default()
        }))
    }

    /// Gemini SSE: a prompt refused with this `promptFeedback.blockReason`.
    pub fn gemini_blocked(reason: impl Into<String>) -> Self {
        Self::from_body(Body::Gemini(GeminiReply {
            blocked: Some(reason.into()),
            ..Default::default()
        }))
    }

    /// A thought summary part (`thought: true`) before the answer.
    pub fn gemini_thought(self, text: impl Into<String>) -> Self {
        self.gemini(|g| g.thought = Some(text.into()))
    }

    /// A `thoughtSignature` on the first call's part (or on a final empty text part).
    pub fn gemini_signature(self, signature: impl Into<String>) -> Self {
        self.gemini(|g| g.signature = Some(signature.into()))
    }

    /// Text before the calls.
    pub fn gemini_with_text(self, text: impl Into<String>) -> Self {
        self.gemini(|g| g.text = Some(text.into()))
    }

    /// The `finishReason` (default `STOP`).
    pub fn gemini_finish(self, reason: impl Into<String>) -> Self {
        self.gemini(|g| g.finish = Some(reason.into()))
    }

    /// `usageMetadata.thoughtsTokenCount` (with `.usage(prompt, candidates)`).
    pub fn gemini_thoughts_tokens(self, n: u64) -> Self {
        self.gemini(|g| g.thoughts_tokens = Some(n))
    }

    fn gemini(mut self, change: impl FnOnce(&mut GeminiReply)) -> Self {
        match &mut self.body {
            Body::Gemini(g) => change(g),
            other => panic!("mock: a gemini_* builder on a non-Gemini reply {other:?}"),
        }
        self
    }
}

fn data(value: Value) -> String {
    // serde_json writes no spaces; Gemini writes `": "` — the parser must not care, and
    // the real bytes have them, so they are put back.
    format!("data: {}\r\n\r\n", spaced(&value))
}

fn spaced(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let fields: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), spaced(v)))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(spaced).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

fn chunk(ctx: &StreamCtx, parts: Vec<Value>, finish: Option<&str>, usage: Option<Value>) -> String {
    let mut candidate = Map::new();
    candidate.insert("content".into(), json!({"parts": parts, "role": "model"}));
    if let Some(reason) = finish {
        candidate.insert("finishReason".into(), json!(reason));
    }
    candidate.insert("index".into(), json!(0));
    let mut body = json!({"candidates": [candidate]});
    if let Some(usage) = usage {
        body["usageMetadata"] = usage;
    }
    body["modelVersion"] = json!(ctx.model);
    body["responseId"] = json!(format!("mock-{}", ctx.seq));
    data(body)
}

pub(crate) fn chunks(reply: &Reply, g: &GeminiReply, ctx: &StreamCtx) -> Vec<String> {
    let usage = reply.usage.map(|(prompt, candidates)| {
        let thoughts = g.thoughts_tokens.unwrap_or(0);
        let mut u = json!({
            "promptTokenCount": prompt,
            "candidatesTokenCount": candidates,
            "totalTokenCount": prompt + candidates + thoughts,
        });
        if let Some(n) = g.thoughts_tokens {
            u["thoughtsTokenCount"] = json!(n);
        }
        if let Some(cached) = reply.cached {
            u["cachedContentTokenCount"] = json!(cached);
        }
        u
    });
    if let Some(reason) = &g.blocked {
        let mut body = json!({"promptFeedback": {"blockReason": reason}});
        if let Some(u) = usage {
            body["usageMetadata"] = u;
        }
        return vec![data(body)];
    }
    let mut out = Vec::new();
    if let Some(thought) = &g.thought {
        for piece in split_pieces(thought, 2) {
            out.push(chunk(
                ctx,
                vec![json!({"text": piece, "thought": true})],
                None,
                None,
            ));
        }
    }
    for piece in split_pieces(g.text.as_deref().unwrap_or(""), 3) {
        out.push(chunk(ctx, vec![json!({"text": piece})], None, None));
    }
    for (i, (id, name, args)) in g.calls.iter().enumerate() {
        let mut call = json!({"name": name, "args": args});
        if !id.is_empty() {
            call["id"] = json!(id);
        }
        let mut part = json!({"functionCall": call});
        if i == 0 {
            if let Some(sig) = &g.signature {
                part["thoughtSignature"] = json!(sig);
            }
        }
        out.push(chunk(ctx, vec![part], None, None));
    }
    let mut last = json!({"text": ""});
    if g.calls.is_empty() {
        if let Some(sig) = &g.signature {
            last["thoughtSignature"] = json!(sig);
        }
    }
    let finish = g.finish.as_deref().unwrap_or("STOP");
    out.push(chunk(ctx, vec![last], Some(finish), usage));
    out
}
