//! The JSON Schema of the event stream (`deerflow schema`), schema_version 1. Every line
//! `--json` prints validates against it; the integration tests check that.

use serde_json::{json, Map, Value};

const ENVELOPE: &[(&str, &str)] = &[
    ("type", "string"),
    ("seq", "integer"),
    ("ts", "string"),
    ("run_id", "string"),
];

/// (event type, required fields with their type) — the type names map to schemas below.
const EVENTS: &[(&str, &[(&str, &str)])] = &[
    (
        "run_started",
        &[
            ("schema_version", "integer"),
            ("version", "string"),
            ("model", "model"),
            ("max_concurrent", "integer"),
            ("max_tasks", "integer"),
            ("max_turns", "integer"),
            ("timeout_seconds", "number?"),
            ("workspace", "string"),
            ("subagents_enabled", "boolean"),
            ("subagent_types", "strings"),
        ],
    ),
    ("message", &[("role", "string"), ("text", "string")]),
    (
        "tool_call",
        &[
            ("call_id", "string"),
            ("name", "string"),
            ("arguments", "object"),
        ],
    ),
    (
        "tool_result",
        &[
            ("call_id", "string"),
            ("name", "string"),
            ("status", "status"),
            ("output", "string"),
            ("truncated", "boolean"),
            ("duration_ms", "integer"),
        ],
    ),
    (
        "task_queued",
        &[
            ("task_id", "string"),
            ("description", "string"),
            ("subagent_type", "string"),
            ("position", "integer"),
        ],
    ),
    (
        "task_started",
        &[
            ("task_id", "string"),
            ("description", "string"),
            ("subagent_type", "string"),
            ("model", "string"),
            ("max_turns", "integer"),
            ("timeout_seconds", "number"),
        ],
    ),
    (
        "task_running",
        &[
            ("task_id", "string"),
            ("message_index", "integer"),
            ("message", "object"),
            ("usage", "usage"),
        ],
    ),
    (
        "task_completed",
        &[
            ("task_id", "string"),
            ("result", "string"),
            ("usage", "usage"),
            ("turns", "integer"),
            ("duration_ms", "integer"),
            ("stop_reason", "string?"),
        ],
    ),
    (
        "task_failed",
        &[
            ("task_id", "string"),
            ("error", "string"),
            ("usage", "usage"),
            ("turns", "integer"),
            ("duration_ms", "integer"),
            ("stop_reason", "string?"),
        ],
    ),
    (
        "task_timed_out",
        &[
            ("task_id", "string"),
            ("error", "string"),
            ("timeout_seconds", "number"),
            ("usage", "usage"),
            ("duration_ms", "integer"),
        ],
    ),
    (
        "task_cancelled",
        &[
            ("task_id", "string"),
            ("error", "string"),
            ("usage", "usage"),
            ("duration_ms", "integer"),
        ],
    ),
    (
        "usage",
        &[
            ("caller", "string"),
            ("model", "string"),
            ("input_tokens", "integer?"),
            ("output_tokens", "integer?"),
            ("total_tokens", "integer?"),
            ("cache_read_tokens", "integer?"),
            ("reported", "boolean"),
        ],
    ),
    ("warning", &[("code", "string"), ("message", "string")]),
    (
        "clarification_requested",
        &[("question", "string"), ("options", "strings")],
    ),
    (
        "run_completed",
        &[
            ("status", "run_status"),
            ("exit_code", "integer"),
            ("final_message", "string?"),
            ("error", "string?"),
            ("duration_ms", "integer"),
            ("turns", "integer"),
            ("usage", "run_usage"),
            ("tasks", "tasks"),
            ("artifacts", "strings"),
        ],
    ),
];

fn type_schema(t: &str) -> Value {
    match t {
        "string" | "integer" | "number" | "boolean" | "object" => json!({"type": t}),
        "string?" => json!({"type": ["string", "null"]}),
        "integer?" => json!({"type": ["integer", "null"]}),
        "number?" => json!({"type": ["number", "null"]}),
        "strings" => json!({"type": "array", "items": {"type": "string"}}),
        "status" => json!({"enum": ["ok", "error"]}),
        "run_status" => {
            json!({"enum": ["completed", "failed", "cancelled", "timed_out", "needs_clarification", "max_turns", "budget_exceeded"]})
        }
        "model" => json!({"type": "object", "required": ["name", "provider", "model"],
                          "properties": {"name": {"type": "string"}, "provider": {"type": "string"}, "model": {"type": "string"}}}),
        "usage" => json!({"$ref": "#/$defs/usage"}),
        "run_usage" => json!({"type": "object",
            "required": ["input_tokens", "output_tokens", "total_tokens", "lead", "subagents", "by_model", "cost_usd"],
            "properties": {
                "input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"},
                "lead": {"$ref": "#/$defs/usage"}, "subagents": {"$ref": "#/$defs/usage"},
                "by_model": {"type": "object", "additionalProperties": {"$ref": "#/$defs/usage"}},
                "cost_usd": {"type": ["number", "null"]}}}),
        "tasks" => {
            json!({"type": "object", "required": ["total", "completed", "failed", "timed_out", "cancelled"],
            "properties": {"total": {"type": "integer"}, "completed": {"type": "integer"}, "failed": {"type": "integer"},
                           "timed_out": {"type": "integer"}, "cancelled": {"type": "integer"}}})
        }
        other => json!({"description": format!("unknown type {other}")}),
    }
}

fn object(fields: &[(&str, &str)], type_name: &str) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for (name, t) in ENVELOPE.iter().chain(fields.iter()) {
        props.insert(name.to_string(), type_schema(t));
        required.push(Value::from(*name));
    }
    props.insert("type".into(), json!({"const": type_name}));
    props.insert("seq".into(), json!({"type": "integer", "minimum": 0}));
    props.insert(
        "ts".into(),
        json!({"type": "string", "format": "date-time"}),
    );
    props.insert("task_id".into(), json!({"type": "string"}));
    json!({"type": "object", "required": required, "properties": props})
}

pub fn event_schema() -> Value {
    let one_of: Vec<Value> = EVENTS
        .iter()
        .map(|(name, fields)| object(fields, name))
        .collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/deerflow/deerflow/schema/events-v1.json",
        "title": "deerflow event (schema_version 1)",
        "description": "One line of `deerflow run --json`. Consumers must ignore unknown fields.",
        "oneOf": one_of,
        "$defs": {
            "usage": {"type": "object", "required": ["input_tokens", "output_tokens", "total_tokens"],
                      "properties": {"input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"},
                                     "total_tokens": {"type": "integer"}}}
        }
    })
}

/// The required fields and their schemas for one event type (used by tests to validate
/// emitted lines without a schema engine).
pub fn required_fields(event_type: &str) -> Option<Vec<(&'static str, Value)>> {
    let (_, fields) = EVENTS.iter().find(|(n, _)| *n == event_type)?;
    Some(
        ENVELOPE
            .iter()
            .chain(fields.iter())
            .map(|(n, t)| (*n, type_schema(t)))
            .collect(),
    )
}

pub fn event_types() -> Vec<&'static str> {
    EVENTS.iter().map(|(n, _)| *n).collect()
}
