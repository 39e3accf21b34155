//! The JSON Schema of the event stream (`deerflow schema`), schema_version 1, generated
//! from the types in `events`: one `oneOf` branch per `Event` variant, selected by its
//! `type`, plus the envelope (`Stamp`) every line carries. It is written for the
//! serializing side: a field is required unless it may be left out of a line. Unknown
//! fields are allowed everywhere, because fields are added over time. The committed copy
//! (schema/events.schema.json) is checked against it by the tests.

use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::Schema;
use serde_json::{json, Map, Value};

use crate::events::{Event, Stamp};

const ID: &str = "https://github.com/deerflow/deerflow/schema/events-v1.json";

pub fn event_schema() -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .for_serialize()
        .with_transform(RecursiveTransform(drop_rust_formats))
        .into_generator();
    let envelope = generator.root_schema_for::<Stamp>();
    let events = generator.into_root_schema_for::<Event>();

    let mut properties = Map::new();
    properties.insert(
        "type".into(),
        json!({"description": "The event type; selects one branch of `oneOf`.", "type": "string"}),
    );
    let mut required = vec![Value::from("type")];
    if let Some(Value::Object(p)) = envelope.get("properties") {
        properties.extend(p.clone());
    }
    if let Some(Value::Array(r)) = envelope.get("required") {
        required.extend(r.iter().cloned());
    }
    json!({
        "$schema": events.get("$schema"),
        "$id": ID,
        "title": "deerflow event (schema_version 1)",
        "description": "One line of `deerflow run --json`. Fields are added over time: consumers must ignore unknown fields.",
        "type": "object",
        "properties": properties,
        "required": required,
        "oneOf": events.get("oneOf"),
        "$defs": events.get("$defs"),
    })
}

/// schemars names the Rust width of a number in `format` (`uint32`, `double`); those are
/// not JSON Schema formats, and strict validators reject unknown ones. The bounds they
/// imply stay as `minimum`/`maximum`.
fn drop_rust_formats(schema: &mut Schema) {
    const RUST_FORMATS: &[&str] = &[
        "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float",
        "double",
    ];
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if obj
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| RUST_FORMATS.contains(&f))
    {
        // Shifting keeps the other keys in the order schemars wrote them.
        obj.shift_remove("format");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{samples, write_line, Envelope};

    fn validator() -> jsonschema::Validator {
        jsonschema::draft202012::new(&event_schema()).expect("the schema compiles")
    }

    fn line(env: &Envelope) -> Value {
        let mut buf = Vec::new();
        let stamp = Stamp::now(3, "run", env.task_id.as_deref());
        write_line(&mut buf, &env.event, &stamp).unwrap();
        serde_json::from_slice(&buf).unwrap()
    }

    fn branch<'a>(schema: &'a Value, t: &str) -> &'a Value {
        schema["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["properties"]["type"]["const"] == t)
            .unwrap_or_else(|| panic!("no branch for {t}"))
    }

    #[test]
    fn the_schema_is_valid_draft_2020_12() {
        let schema = event_schema();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        jsonschema::meta::validate(&schema).expect("valid against the meta-schema");
    }

    #[test]
    fn every_sample_line_validates() {
        let v = validator();
        for env in samples() {
            let l = line(&env);
            let errors: Vec<String> = v.iter_errors(&l).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{l}: {errors:?}");
        }
    }

    #[test]
    fn one_branch_per_event_type_and_the_envelope_is_required() {
        let schema = event_schema();
        assert_eq!(schema["oneOf"].as_array().unwrap().len(), 18);
        assert_eq!(
            schema["required"],
            json!(["type", "seq", "ts", "run_id"]),
            "task_id is optional"
        );
        assert_eq!(schema["properties"]["ts"]["format"], "date-time");
    }

    /// An `Option` field left as `null` is still on the line, so it must be required.
    #[test]
    fn every_key_a_line_always_carries_is_required() {
        let schema = event_schema();
        let optional = ["attempt", "delay_ms", "status", "server", "task_id"];
        for env in samples() {
            let l = line(&env);
            let t = l["type"].as_str().unwrap();
            let required = branch(&schema, t)["required"].as_array().unwrap();
            for key in l.as_object().unwrap().keys() {
                let in_envelope = schema["required"].as_array().unwrap().contains(&json!(key));
                let optional_here = t == "warning" && optional.contains(&key.as_str())
                    || key == "task_id" && env.task_id.is_some()
                    || key == "item_index" && t.starts_with("task_");
                assert!(
                    in_envelope || optional_here || required.contains(&json!(key)),
                    "{t}.{key} is always written but not required"
                );
            }
        }
    }

    #[test]
    fn wrong_lines_are_rejected() {
        let v = validator();
        let samples = samples();
        let completed = samples
            .iter()
            .find(|e| e.event.type_name() == "run_completed")
            .unwrap();
        let good = line(completed);
        assert!(v.is_valid(&good));
        let with = |path: &str, value: Value| {
            let mut l = good.clone();
            *l.pointer_mut(path).unwrap() = value;
            l
        };
        for bad in [
            with("/status", json!("done")),
            with("/final_message", json!(1)),
            with("/seq", json!(-1)),
            with("/usage/by_model/gpt/total_tokens", json!("5")),
            with("/type", json!("run_finished")),
        ] {
            assert!(!v.is_valid(&bad), "accepted {bad}");
        }
        let mut missing = good.clone();
        missing.as_object_mut().unwrap().remove("final_output");
        assert!(!v.is_valid(&missing), "final_output is required");
        let mut extra = good.clone();
        extra["added_later"] = json!({"x": 1});
        assert!(v.is_valid(&extra), "unknown fields are allowed");
    }

    #[test]
    fn a_compaction_names_its_reason_and_may_lack_token_counts() {
        let v = validator();
        let compacted: Vec<Value> = samples()
            .iter()
            .map(line)
            .filter(|l| l["type"] == "context_compacted")
            .collect();
        assert_eq!(compacted.len(), 2);
        assert!(compacted.iter().all(|l| v.is_valid(l)));
        assert!(compacted[1]["input_tokens_before"].is_null());
        let mut bad = compacted[0].clone();
        bad["reason"] = json!("boredom");
        assert!(!v.is_valid(&bad));
        let mut missing = compacted[1].clone();
        missing
            .as_object_mut()
            .unwrap()
            .remove("input_tokens_before");
        assert!(!v.is_valid(&missing), "null, not absent");
    }

    #[test]
    fn a_sub_agent_message_may_carry_its_reasoning() {
        use crate::events::{Envelope, Event, TaskMessage};
        use crate::usage::UsageTotals;
        let v = validator();
        let running = |reasoning: Option<&str>| {
            line(&Envelope {
                event: Event::TaskRunning {
                    task_id: "t".into(),
                    item_index: None,
                    message_index: 1,
                    message: TaskMessage::Assistant {
                        text: "hi".into(),
                        tool_calls: vec![],
                        reasoning: reasoning.map(str::to_string),
                    },
                    usage: UsageTotals::default(),
                },
                task_id: Some("t".into()),
                gate: None,
            })
        };
        let with = running(Some("think"));
        assert_eq!(with["message"]["reasoning"], "think");
        assert!(v.is_valid(&with));
        let without = running(None);
        assert!(without["message"].get("reasoning").is_none());
        assert!(v.is_valid(&without));
        let mut bad = with.clone();
        bad["message"]["reasoning"] = json!(7);
        assert!(!v.is_valid(&bad));
    }

    #[test]
    fn a_retry_warning_needs_its_status_even_when_null() {
        let v = validator();
        let retry = line(&samples()[16]);
        assert!(retry["status"].is_null());
        assert!(v.is_valid(&retry));
        let mut without = retry.clone();
        without.as_object_mut().unwrap().remove("status");
        assert!(!v.is_valid(&without), "{without}");
        let plain = line(&samples()[15]);
        assert!(v.is_valid(&plain) && plain.get("status").is_none());
    }

    #[test]
    fn no_rust_number_formats_remain() {
        let text = event_schema().to_string();
        for f in ["uint", "int32", "int64", "double", "float"] {
            assert!(!text.contains(&format!(r#""format":"{f}"#)), "{f}");
        }
    }
}
