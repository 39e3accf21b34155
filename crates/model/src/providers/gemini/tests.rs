use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::test_support::{serve, Reply};
use crate::{
    AgentId, CallContext, ChatModel, Message, ModelError, ModelResponse, Reasoning, RetryNotice,
    StopKind, ToolCall, ToolSpec, Usage,
};

const SIGNED: &str = capture!("gemini/stream_function_call_thought_signature.sse");
const PARALLEL: &str = capture!("gemini/stream_parallel_function_calls.sse");
const MAX_TOKENS: &str = capture!("gemini/stream_max_tokens.sse");
const CACHED: &str = capture!("gemini/generate_content_function_call_cached.json");
const LIMITED: &str = capture!("gemini/error_429_resource_exhausted.json");

fn request(messages: Vec<Message>, tools: Vec<ToolSpec>, none: bool) -> ChatRequest {
    ChatRequest {
        system: "be brief".into(),
        messages: Arc::new(messages),
        tools: tools.into(),
        tool_choice_none: none,
        agent: AgentId::Lead,
        turn: 0,
        output_schema: None,
        purpose: Default::default(),
        lineage: None,
    }
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("{name} tool"),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}},
                           "required": ["path"], "additionalProperties": false}),
    }
}

fn settings() -> HttpSettings {
    HttpSettings::new(
        "gemini-2.5-flash",
        "https://generativelanguage.googleapis.com",
        None,
    )
}

async fn parse_cut(text: &str, cuts: &[usize]) -> Result<ModelResponse, ModelError> {
    crate::test_support::assemble_cut::<GeminiAssembler>(text, cuts, PROVIDER).await
}

async fn parse(text: &str) -> ModelResponse {
    parse_cut(text, &[]).await.unwrap()
}

fn assistant(r: ModelResponse) -> Message {
    Message::Assistant {
        text: r.text,
        tool_calls: r.tool_calls,
        reasoning: r.reasoning,
    }
}

fn tool_result(call: &ToolCall, content: &str) -> Message {
    Message::Tool {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: content.into(),
    }
}

fn contents(messages: Vec<Message>) -> Value {
    request_body(&settings(), &request(messages, vec![], false))["contents"].clone()
}

/// The `thoughtSignature` of the first part of the first candidate of a capture's chunk.
fn signature_in(capture: &str, chunk: usize) -> Option<String> {
    let data: Vec<Value> = capture
        .split("\r\n\r\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    data[chunk]
        .pointer("/candidates/0/content/parts/0/thoughtSignature")
        .and_then(Value::as_str)
        .map(str::to_string)
}

#[tokio::test]
async fn a_signed_call_goes_back_with_its_signature_and_a_response_by_name() {
    let r = parse(SIGNED).await;
    let signature = signature_in(SIGNED, 0).unwrap();
    assert_eq!(signature.len(), 1408);
    assert_eq!(r.text, None);
    assert_eq!(r.finish_reason.as_deref(), Some("STOP"));
    assert_eq!(r.stop_kind(), StopKind::Normal);
    assert_eq!(
        r.usage,
        Some(Usage {
            input_tokens: 29,
            output_tokens: 212,
            total_tokens: 241,
            cache_read_tokens: None,
            cache_write_tokens: None,
            unreported: Default::default(),
        })
    );
    assert_eq!(r.tool_calls.len(), 1);
    let call = r.tool_calls[0].clone();
    assert_eq!(
        (call.name.as_str(), call.arguments.to_value()),
        ("get_country", json!({}))
    );
    assert!(
        call.id.starts_with("call_") && call.id.len() == 21,
        "{}",
        call.id
    );
    assert_eq!(
        Value::Object(call.extra.to_map()),
        json!({"thoughtSignature": signature})
    );
    // Plain text only (the empty closing part): nothing beyond the call to keep.
    assert_eq!(r.reasoning, Reasoning::default());
    let wire = contents(vec![
        Message::User("Where am I?".into()),
        assistant(r),
        tool_result(&call, "France"),
    ]);
    assert_eq!(
        wire,
        json!([
            {"role": "user", "parts": [{"text": "Where am I?"}]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "get_country", "args": {}}, "thoughtSignature": signature},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_country", "response": {"result": "France"}}},
            ]},
        ])
    );
}

/// Calls and kept parts count toward the size limit whatever they hold: hundreds of
/// thousands of empty calls, or parts piling up fields, are refused like too much text.
#[tokio::test]
async fn call_slots_and_kept_fields_are_bounded_by_the_size_limit() {
    let chunk = |parts: Vec<Value>| {
        format!(
            "data: {}\n\n",
            json!({"candidates": [{"content": {"role": "model", "parts": parts}}]})
        )
    };
    let calls = chunk(vec![json!({"functionCall": {"name": "ls"}}); 300_000]);
    let err = parse_cut(&calls, &[]).await.unwrap_err();
    assert!(err.to_string().contains("too large"), "{err}");
    let filler = "x".repeat(1 << 20);
    let fields: String = (0..40)
        .map(|i| {
            chunk(vec![
                json!({"functionCall": {"name": "ls", "args": {}}, format!("x{i}"): filler}),
            ])
        })
        .collect();
    let err = parse_cut(&fields, &[]).await.unwrap_err();
    assert!(err.to_string().contains("too large"), "{err}");
    let parts: String = (0..40)
        .map(|_| chunk(vec![json!({"inlineData": {"data": filler}})]))
        .collect();
    let err = parse_cut(&parts, &[]).await.unwrap_err();
    assert!(err.to_string().contains("too large"), "{err}");
}

#[tokio::test]
async fn made_up_ids_are_unique() {
    let a = parse(SIGNED).await.tool_calls[0].id.clone();
    let b = parse(SIGNED).await.tool_calls[0].id.clone();
    assert_ne!(a, b);
}

#[tokio::test]
async fn parallel_calls_keep_their_ids_and_responses_follow_the_calls_order() {
    let r = parse(PARALLEL).await;
    let ids: Vec<&str> = r.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["dv8szvqe", "j80tal12"]);
    let args: Vec<Value> = r
        .tool_calls
        .iter()
        .map(|c| c.arguments.to_value())
        .collect();
    assert_eq!(
        args,
        [
            json!({"location": "Boston"}),
            json!({"location": "New Delhi"})
        ]
    );
    let signature = signature_in(PARALLEL, 0).unwrap();
    assert_eq!(signature.len(), 680);
    assert_eq!(
        Value::Object(r.tool_calls[0].extra.to_map()),
        json!({"thoughtSignature": signature, "functionCall": {"id": "dv8szvqe"}})
    );
    assert_eq!(
        Value::Object(r.tool_calls[1].extra.to_map()),
        json!({"functionCall": {"id": "j80tal12"}})
    );
    assert_eq!(
        r.usage,
        Some(Usage {
            input_tokens: 71,
            output_tokens: 126,
            total_tokens: 197,
            cache_read_tokens: None,
            cache_write_tokens: None,
            unreported: Default::default(),
        })
    );
    let (boston, delhi) = (r.tool_calls[0].clone(), r.tool_calls[1].clone());
    // The results arrive in the other order: they still go back in the calls' order.
    let wire = contents(vec![
        Message::User("weather?".into()),
        assistant(r),
        tool_result(&delhi, "hot"),
        tool_result(&boston, "rainy"),
    ]);
    assert_eq!(
        wire[1]["parts"],
        json!([
            {"functionCall": {"name": "get_weather", "args": {"location": "Boston"}, "id": "dv8szvqe"},
             "thoughtSignature": signature},
            {"functionCall": {"name": "get_weather", "args": {"location": "New Delhi"}, "id": "j80tal12"}},
        ])
    );
    assert_eq!(
        wire[2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"id": "dv8szvqe", "name": "get_weather", "response": {"result": "rainy"}}},
            {"functionResponse": {"id": "j80tal12", "name": "get_weather", "response": {"result": "hot"}}},
        ]})
    );
}

#[tokio::test]
async fn two_calls_of_one_tool_without_ids_pair_by_order() {
    let stream = concat!(
        "data: {\"candidates\": [{\"content\": {\"parts\": [",
        "{\"functionCall\": {\"name\": \"read_file\", \"args\": {\"path\": \"a\"}}, \"thoughtSignature\": \"c2ln\"},",
        "{\"functionCall\": {\"name\": \"read_file\", \"args\": {\"path\": \"b\"}}}",
        "], \"role\": \"model\"}, \"finishReason\": \"STOP\", \"index\": 0}]}\r\n\r\n",
    );
    let r = parse(stream).await;
    let (a, b) = (r.tool_calls[0].clone(), r.tool_calls[1].clone());
    assert_ne!(a.id, b.id);
    let wire = contents(vec![
        Message::User("go".into()),
        assistant(r),
        tool_result(&b, "B"),
        tool_result(&a, "A"),
    ]);
    assert_eq!(
        wire[2]["parts"],
        json!([
            {"functionResponse": {"name": "read_file", "response": {"result": "A"}}},
            {"functionResponse": {"name": "read_file", "response": {"result": "B"}}},
        ])
    );
}

#[tokio::test]
async fn max_tokens_is_an_output_limit_and_thoughts_count_as_output() {
    let r = parse(MAX_TOKENS).await;
    assert_eq!(r.text.as_deref(), Some("Here are all 50 U.S."));
    assert_eq!(r.finish_reason.as_deref(), Some("MAX_TOKENS"));
    assert_eq!(r.stop_kind(), StopKind::OutputLimit);
    assert_eq!(
        r.usage,
        Some(Usage {
            input_tokens: 9,
            output_tokens: 48,
            total_tokens: 57,
            cache_read_tokens: None,
            cache_write_tokens: None,
            unreported: Default::default(),
        })
    );
}

#[test]
fn a_whole_json_answer_reports_cached_tokens() {
    let r = http::parse_json_answer::<GeminiAssembler>(CACHED, PROVIDER).unwrap();
    assert_eq!(r.tool_calls.len(), 1);
    let call = &r.tool_calls[0];
    assert_eq!(call.name, "generate_report");
    let args = call.arguments.to_value();
    assert_eq!(args["title"], "Current State of the AI Agent Market");
    assert!(args["findings"]
        .as_str()
        .unwrap()
        .starts_with("The AI agent market is currently valued at $50 billion"));
    let signature = call.extra["thoughtSignature"].as_str().unwrap();
    assert_eq!(signature.len(), 476);
    assert_eq!(r.finish_reason.as_deref(), Some("STOP"));
    assert_eq!(
        r.usage,
        Some(Usage {
            input_tokens: 557,
            output_tokens: 143,
            total_tokens: 700,
            cache_read_tokens: Some(330),
            cache_write_tokens: None,
            unreported: Default::default(),
        })
    );
    // The array `streamGenerateContent` answers without `alt=sse` reads the same.
    let array = format!("[{CACHED}]");
    let same = http::parse_json_answer::<GeminiAssembler>(&array, PROVIDER).unwrap();
    assert_eq!(same.usage, r.usage);
    assert_eq!(same.tool_calls[0].arguments, call.arguments);
}

#[tokio::test]
async fn captures_split_anywhere_give_the_same_response() {
    for capture in [SIGNED, PARALLEL, MAX_TOKENS] {
        let mut whole = parse(capture).await;
        for c in &mut whole.tool_calls {
            c.id.clear();
        }
        let mut rng = fastrand::Rng::with_seed(5);
        for _ in 0..100 {
            let mut cuts: Vec<usize> = (0..rng.usize(1..20))
                .map(|_| rng.usize(0..=capture.len()))
                .collect();
            cuts.sort_unstable();
            let mut r = parse_cut(capture, &cuts).await.unwrap();
            // Made-up ids differ from parse to parse.
            for c in &mut r.tool_calls {
                c.id.clear();
            }
            assert_eq!(r, whole, "cuts {cuts:?}");
        }
    }
}

#[tokio::test]
async fn thoughts_are_reasoning_and_signed_parts_go_back_where_they_were() {
    let stream = concat!(
        "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Let me \",\"thought\":true}]}}]}\n\n",
        "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"think.\",\"thought\":true}]}}]}\n\n",
        "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Checking \"}]}}]}\n\n",
        "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"now.\"}]}}]}\n\n",
        "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"ls\",\"args\":{}},\"thoughtSignature\":\"AAA\"}]}}]}\n\n",
        "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"\",\"thoughtSignature\":\"BBB\"}]},\"finishReason\":\"STOP\"}],",
        "\"usageMetadata\":{\"promptTokenCount\":10,\"candidatesTokenCount\":5,\"thoughtsTokenCount\":7,\"totalTokenCount\":22}}\n\n",
    );
    let r = parse(stream).await;
    assert_eq!(r.reasoning.text.as_deref(), Some("Let me think."));
    assert_eq!(r.text.as_deref(), Some("Checking now."));
    assert_eq!(r.usage.unwrap().output_tokens, 12);
    assert_eq!(
        r.reasoning.blocks,
        [
            json!({"type": "gemini_part", "part": {"text": "Let me think.", "thought": true}}),
            json!({"type": "gemini_part", "part": {"text": "Checking now."}}),
            json!({"type": "gemini_part", "part": {"text": "", "thoughtSignature": "BBB"}, "after_calls": 1}),
        ]
    );
    let call = r.tool_calls[0].clone();
    let wire = contents(vec![
        Message::User("go".into()),
        assistant(r.clone()),
        tool_result(&call, "x"),
    ]);
    assert_eq!(
        wire[1]["parts"],
        json!([
            {"text": "Let me think.", "thought": true},
            {"text": "Checking now."},
            {"functionCall": {"name": "ls", "args": {}}, "thoughtSignature": "AAA"},
            {"text": "", "thoughtSignature": "BBB"},
        ])
    );
    // A message whose text is no longer the parts' keeps only the thoughts.
    let Message::Assistant {
        tool_calls,
        reasoning,
        ..
    } = assistant(r)
    else {
        unreachable!()
    };
    let changed = Message::Assistant {
        text: Some("Other.".into()),
        tool_calls,
        reasoning,
    };
    let wire = contents(vec![
        Message::User("go".into()),
        changed,
        tool_result(&call, "x"),
    ]);
    assert_eq!(
        wire[1]["parts"],
        json!([
            {"text": "Let me think.", "thought": true},
            {"text": "Other."},
            {"functionCall": {"name": "ls", "args": {}}, "thoughtSignature": "AAA"},
        ])
    );
}

#[test]
fn other_providers_blocks_are_not_sent() {
    let message = Message::Assistant {
        text: Some("Hi.".into()),
        tool_calls: vec![],
        reasoning: Reasoning {
            text: Some("hmm".into()),
            blocks: vec![json!({"type": "thinking", "thinking": "hmm", "signature": "s"})],
        },
    };
    assert_eq!(
        contents(vec![Message::User("hi".into()), message]),
        json!([
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"text": "Hi."}]},
        ])
    );
}

#[tokio::test]
async fn safety_stops_are_content_filters() {
    for reason in SAFETY_REASONS {
        let stream = format!(
            "data: {{\"candidates\": [{{\"content\": {{\"parts\": [{{\"functionCall\": {{\"name\": \"bash\", \"args\": {{\"command\": \"rm -rf /\"}}}}}}]}}, \"finishReason\": \"{reason}\"}}]}}\r\n\r\n"
        );
        let r = parse(&stream).await;
        assert_eq!(r.finish_reason.as_deref(), Some(*reason));
        assert_eq!(r.stop_kind(), StopKind::ContentFilter, "{reason}");
    }
    // A refused prompt: no candidate at all.
    let blocked = "data: {\"promptFeedback\": {\"blockReason\": \"PROHIBITED_CONTENT\"}, \
                   \"usageMetadata\": {\"promptTokenCount\": 12, \"totalTokenCount\": 12}}\r\n\r\n";
    let r = parse(blocked).await;
    assert_eq!(r.finish_reason.as_deref(), Some("PROHIBITED_CONTENT"));
    assert_eq!(r.stop_kind(), StopKind::ContentFilter);
    assert_eq!(r.usage.unwrap().input_tokens, 12);
    let other = blocked.replace("PROHIBITED_CONTENT", "OTHER");
    assert_eq!(parse(&other).await.stop_kind(), StopKind::ContentFilter);
}

#[tokio::test]
async fn an_unusable_function_call_is_retried_and_a_cut_stream_too() {
    let malformed = "data: {\"candidates\": [{\"content\": {\"parts\": []}, \"finishReason\": \
                     \"MALFORMED_FUNCTION_CALL\", \"finishMessage\": \"Malformed function call: print(\"}]}\r\n\r\n";
    let err = parse_cut(malformed, &[]).await.unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    assert_eq!(
        err.to_string(),
        "gemini stream dropped: the model's function call was not usable (finishReason \
         MALFORMED_FUNCTION_CALL): Malformed function call: print("
    );
    let cut = &SIGNED[..SIGNED.find("\r\n\r\n").unwrap() + 4];
    assert_eq!(
        parse_cut(cut, &[]).await,
        Err(ModelError::Dropped {
            provider: "gemini".into(),
            message: "stream ended before the response was complete".into()
        })
    );
}

#[tokio::test]
async fn an_error_chunk_mid_stream() {
    let overloaded = "data: {\"error\": {\"code\": 503, \"message\": \"The model is overloaded.\", \"status\": \"UNAVAILABLE\"}}\r\n\r\n";
    let err = parse_cut(overloaded, &[]).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::Dropped {
            provider: "gemini".into(),
            message: "The model is overloaded.".into()
        }
    );
    let invalid = overloaded
        .replace("503", "400")
        .replace("UNAVAILABLE", "INVALID_ARGUMENT");
    assert!(matches!(
        parse_cut(&invalid, &[]).await,
        Err(ModelError::Stream { .. })
    ));
    let junk = "data: {\"candidates\": [\r\n\r\n";
    assert!(matches!(
        parse_cut(junk, &[]).await,
        Err(ModelError::Stream { .. })
    ));
}

#[test]
fn the_request_body() {
    let mut s = settings();
    s.max_tokens = Some(8192);
    s.temperature = Some(0.3);
    let req = request(
        vec![Message::User("look".into()), Message::User(String::new())],
        vec![
            tool("read_file"),
            ToolSpec {
                name: "get_time".into(),
                description: "now".into(),
                parameters: json!({"type": "object", "properties": {}}),
            },
        ],
        true,
    );
    assert_eq!(
        request_body(&s, &req),
        json!({
            "systemInstruction": {"parts": [{"text": "be brief"}]},
            "contents": [{"role": "user", "parts": [{"text": "look"}]}],
            "tools": [{"functionDeclarations": [
                {"name": "read_file", "description": "read_file tool",
                 "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                "required": ["path"]}},
                {"name": "get_time", "description": "now"},
            ]}],
            "toolConfig": {"functionCallingConfig": {"mode": "NONE"}},
            "generationConfig": {"maxOutputTokens": 8192, "temperature": 0.3},
        })
    );
    let mut bare = request(vec![Message::User("hi".into())], vec![], false);
    bare.system = "".into();
    assert_eq!(
        request_body(&settings(), &bare),
        json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    );
}

fn map(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

/// The body's keys in the order a JSON object built key by key had them: the built ones,
/// the model's own keys (one replacing `toolConfig` where it stood), `generationConfig`
/// last, or where a model's `generationConfig` that is no map stood.
#[test]
fn the_bytes_keep_the_key_order_of_the_merged_maps() {
    let req = request(
        vec![Message::User("hi".into())],
        vec![tool("get_time")],
        true,
    );
    let mut s = settings();
    s.max_tokens = Some(5);
    s.extra_body = map(json!({"safetySettings": [], "toolConfig": {"x": 1}, "cachedContent": "c"}));
    let bytes = String::from_utf8(request_bytes(&s, &req)).unwrap();
    let keys = |text: &str| -> Vec<String> {
        let v: Value = serde_json::from_str(text).unwrap();
        v.as_object().unwrap().keys().cloned().collect()
    };
    assert_eq!(
        keys(&bytes),
        [
            "systemInstruction",
            "contents",
            "tools",
            "toolConfig",
            "safetySettings",
            "cachedContent",
            "generationConfig"
        ]
    );
    assert!(bytes.contains(r#""toolConfig":{"x":1}"#), "{bytes}");
    assert_eq!(request_body(&s, &req).to_string(), bytes);
    s.extra_body = map(json!({"generationConfig": "odd", "labels": {}}));
    let bytes = String::from_utf8(request_bytes(&s, &req)).unwrap();
    assert_eq!(
        keys(&bytes)[4..],
        ["generationConfig".to_string(), "labels".to_string()]
    );
    assert!(
        bytes.contains(r#""generationConfig":{"maxOutputTokens":5}"#),
        "{bytes}"
    );
    let bare = request(vec![Message::User("hi".into())], vec![], false);
    s.extra_body = map(json!({"toolConfig": {"y": 2}}));
    let bytes = String::from_utf8(request_bytes(&s, &bare)).unwrap();
    assert_eq!(
        keys(&bytes)[2..],
        ["toolConfig".to_string(), "generationConfig".to_string()]
    );
}

#[test]
fn thinking_settings_become_the_thinking_config() {
    let req = request(vec![Message::User("hi".into())], vec![], false);
    let config =
        |s: &HttpSettings| request_body(s, &req)["generationConfig"]["thinkingConfig"].clone();
    let mut s = settings();
    assert_eq!(
        config(&s),
        Value::Null,
        "not a thinking model: nothing sent"
    );
    s.thinking.supported = true;
    assert_eq!(config(&s), json!({"includeThoughts": true}));
    // LangChain's argument names, as a DeerFlow entry would write them.
    s.thinking.when_enabled = map(json!({"thinking_budget": 1024, "include_thoughts": true}));
    s.thinking.when_disabled = map(json!({"thinking_budget": 0}));
    assert_eq!(
        config(&s),
        json!({"includeThoughts": true, "thinkingBudget": 1024})
    );
    s.thinking.requested = Some(false);
    assert_eq!(config(&s), json!({"thinkingBudget": 0}));
    // DeerFlow's generic spelling, in `extra_body` as its examples put it.
    s.thinking.requested = None;
    s.thinking.when_enabled =
        map(json!({"extra_body": {"thinking": {"type": "enabled", "budget_tokens": 2048}}}));
    assert_eq!(
        config(&s),
        json!({"includeThoughts": true, "thinkingBudget": 2048})
    );
    s.thinking.requested = Some(false);
    s.thinking.when_disabled = map(json!({"extra_body": {"thinking": {"type": "disabled"}}}));
    assert_eq!(config(&s), json!({"thinkingBudget": 0}));
    // Gemini's own spelling merges key by key; other keys are body keys.
    s.thinking.requested = None;
    s.thinking.when_enabled =
        map(json!({"generationConfig": {"thinkingConfig": {"thinkingLevel": "low"}, "topK": 5}}));
    s.extra_body = map(
        json!({"safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]}),
    );
    s.max_tokens = Some(100);
    let body = request_body(&s, &req);
    assert_eq!(
        body["generationConfig"],
        json!({"maxOutputTokens": 100, "topK": 5,
               "thinkingConfig": {"includeThoughts": true, "thinkingLevel": "low"}})
    );
    assert_eq!(body["safetySettings"][0]["threshold"], "BLOCK_NONE");
    s.reasoning_effort = Some("high".into());
    s.thinking.when_enabled = Map::new();
    assert_eq!(
        config(&s),
        json!({"includeThoughts": true, "thinkingLevel": "high"})
    );
}

#[cfg(feature = "output-schema")]
#[test]
fn the_output_schema_is_sent_where_the_model_takes_it_with_tools() {
    let schema = Arc::new(
        crate::output_schema::OutputSchema::new(
            "answer",
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        )
        .unwrap(),
    );
    let mut req = request(vec![Message::User("hi".into())], vec![], false);
    req.output_schema = Some(schema);
    let generation = |model: &str, req: &ChatRequest| {
        let s = HttpSettings::new(model, "http://x", None);
        request_body(&s, req)["generationConfig"].clone()
    };
    let native = json!({"responseMimeType": "application/json",
                        "responseJsonSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}});
    assert_eq!(generation("gemini-2.5-flash", &req), native);
    req.tools = vec![tool("read_file")].into();
    assert_eq!(generation("gemini-2.5-flash", &req), Value::Null);
    assert_eq!(generation("gemini-3-pro-preview", &req), native);
    assert_eq!(generation("models/gemini-3.5-flash", &req), native);
}

#[test]
fn urls_and_base_urls() {
    for base in [
        "https://generativelanguage.googleapis.com",
        "https://generativelanguage.googleapis.com/",
        " https://generativelanguage.googleapis.com/v1beta/ ",
        "https://generativelanguage.googleapis.com/v1",
    ] {
        assert_eq!(
            normalize_base(base),
            "https://generativelanguage.googleapis.com",
            "{base}"
        );
    }
    assert_eq!(
        stream_url("http://h", "models/gemini-2.5-pro"),
        "http://h/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        stream_url("http://h", "tuned/a b?"),
        "http://h/v1beta/models/tuned%2Fa%20b%3F:streamGenerateContent?alt=sse"
    );
}

const KEY: &str = "AIzaSy-test-key";

fn notices_ctx() -> (CallContext, Arc<Mutex<Vec<RetryNotice>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let mut ctx = CallContext::new(CancellationToken::new());
    ctx.on_retry = Arc::new(move |n| sink.lock().unwrap().push(n));
    (ctx, seen)
}

#[tokio::test]
async fn end_to_end_the_key_is_a_header_and_429_is_retried() {
    let (base, seen) = serve(vec![Reply::json(429, LIMITED), Reply::sse(MAX_TOKENS)]).await;
    let mut s = HttpSettings::new("gemini-2.5-flash", format!("{base}/"), Some(KEY.into()));
    s.max_tokens = Some(50);
    let model = GeminiModel::new(s).unwrap();
    let (ctx, notices) = notices_ctx();
    let r = model
        .complete(
            &request(vec![Message::User("list the states".into())], vec![], false),
            &ctx,
        )
        .await
        .unwrap();
    assert_eq!(r.text.as_deref(), Some("Here are all 50 U.S."));
    let notices = notices.lock().unwrap();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].status, Some(429));
    assert!(
        notices[0]
            .message
            .starts_with("gemini returned HTTP 429: Resource exhausted."),
        "{}",
        notices[0].message
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    for captured in seen.iter() {
        let head = captured.head.to_ascii_lowercase();
        assert!(
            head.starts_with(
                "post /v1beta/models/gemini-2.5-flash:streamgeneratecontent?alt=sse http/1.1"
            ),
            "{head}"
        );
        assert!(head.contains(&format!("x-goog-api-key: {}", KEY.to_ascii_lowercase())));
        assert_eq!(
            captured.head.matches(KEY).count(),
            1,
            "the key only in its header"
        );
        assert!(!captured.body.contains(KEY));
        let body: Value = serde_json::from_str(&captured.body).unwrap();
        assert_eq!(body["generationConfig"]["maxOutputTokens"], 50);
    }
}

#[tokio::test]
async fn end_to_end_400_is_final_and_the_key_redacted() {
    let body = format!(
        r#"{{"error": {{"code": 400, "message": "API key not valid: {KEY}. Please pass a valid API key.", "status": "INVALID_ARGUMENT"}}}}"#
    );
    let (base, seen) = serve(vec![Reply::json(400, &body), Reply::sse(MAX_TOKENS)]).await;
    let model = GeminiModel::new(HttpSettings::new(
        "gemini-2.5-flash",
        base,
        Some(KEY.into()),
    ))
    .unwrap();
    let (ctx, notices) = notices_ctx();
    let err = model
        .complete(
            &request(vec![Message::User("hi".into())], vec![], false),
            &ctx,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "gemini returned HTTP 400: API key not valid: [redacted]. Please pass a valid API key."
    );
    assert!(notices.lock().unwrap().is_empty());
    assert_eq!(seen.lock().unwrap().len(), 1);
}
