//! A schema compiled and an answer judged (only a build with the validator makes one).

use std::path::Path;

use super::compile::{name_from_path, wire_name, MAX_MESSAGE_CHARS};
use super::*;
use serde_json::json;

fn verdict() -> OutputSchema {
    OutputSchema::new(
        "verdict",
        json!({
            "type": "object",
            "properties": {
                "verdict": {"enum": ["pass", "fail"]},
                "reasons": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["verdict", "reasons"],
            "additionalProperties": false
        }),
    )
    .unwrap()
}

#[test]
fn a_valid_answer_is_returned_without_its_fence() {
    let s = verdict();
    let plain = r#"{"verdict": "pass", "reasons": []}"#;
    assert_eq!(s.check(Some(plain)).unwrap(), plain);
    for fenced in [
        format!("```json\n{plain}\n```"),
        format!("```\n{plain}\n```\n"),
        format!("  ```JSON\n{plain}\n```  "),
    ] {
        assert_eq!(s.check(Some(&fenced)).unwrap(), plain, "{fenced}");
    }
}

#[test]
fn violations_name_the_path_and_the_problem() {
    let s = verdict();
    let errs = s
        .check(Some(r#"{"verdict": "maybe", "extra": 1}"#))
        .unwrap_err();
    let lines: Vec<String> = errs.iter().map(|v| v.to_string()).collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("/verdict: ") && l.contains("\"maybe\"") && l.contains("pass")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("(root): ") && l.contains("reasons")),
        "{lines:?}"
    );
    let msg = retry_message(&errs);
    assert!(msg.contains("- /verdict: "), "{msg}");
    assert!(msg.ends_with("Reply with the corrected JSON value alone."));
}

#[test]
fn prose_and_empty_answers_are_violations_of_the_whole_answer() {
    let s = verdict();
    let prose = s.check(Some("The verdict is pass.")).unwrap_err();
    assert_eq!(prose.len(), 1);
    assert_eq!(prose[0].path, "");
    assert!(prose[0].message.contains("not one JSON value"));
    let two = s.check(Some(r#"{"verdict":"pass","reasons":[]} {}"#));
    assert!(two.unwrap_err()[0].message.contains("not one JSON value"));
    for empty in [None, Some(""), Some("```json\n```")] {
        assert!(s.check(empty).unwrap_err()[0].message.contains("empty"));
    }
}

#[test]
fn long_violation_lists_and_messages_are_bounded() {
    let s = OutputSchema::new("n", json!({"type": "array", "items": {"type": "integer"}})).unwrap();
    let answer = serde_json::to_string(&vec!["x".repeat(1000); 30]).unwrap();
    let errs = s.check(Some(&answer)).unwrap_err();
    assert_eq!(errs.len(), 30);
    // The cut is marked with one `…`.
    assert!(errs
        .iter()
        .all(|v| v.message.chars().count() <= MAX_MESSAGE_CHARS + 1));
    assert!(errs[0].message.ends_with('…'));
    let msg = retry_message(&errs);
    assert_eq!(msg.matches("\n- /").count(), MAX_LISTED);
    assert!(msg.contains("- … and 10 more"));
}

#[test]
fn formats_are_asserted() {
    let s = OutputSchema::new("d", json!({"type": "string", "format": "date"})).unwrap();
    assert!(s.check(Some(r#""2026-12-01""#)).is_ok());
    assert!(s.check(Some(r#""tomorrow""#)).is_err());
}

#[test]
fn schemas_that_do_not_compile_are_refused() {
    for (bad, why) in [
        (json!({"type": "nope"}), "not a valid JSON Schema"),
        (json!({"minLength": -1}), "not a valid JSON Schema"),
        (json!({"pattern": "("}), "not a valid JSON Schema"),
        (json!([1, 2]), "an object or a boolean"),
        (json!("string"), "an object or a boolean"),
        // Nothing is fetched: a reference outside the file cannot be resolved.
        (
            json!({"$ref": "https://example.com/schema.json"}),
            "not a valid JSON Schema",
        ),
        (
            json!({"$ref": "#/$defs/missing"}),
            "not a valid JSON Schema",
        ),
        (
            json!({"properties": {"a": {"type": "bogus"}}}),
            "at /properties/a/type: ",
        ),
    ] {
        let err = OutputSchema::new("x", bad.clone()).unwrap_err();
        assert!(err.contains(why), "{bad}: {err}");
        assert!(!err.contains('\n'), "{err}");
    }
    let remote = OutputSchema::new("x", json!({"$ref": "https://example.com/s.json"}));
    assert_eq!(
        remote.unwrap_err(),
        "is not a valid JSON Schema (draft 2020-12): $ref https://example.com/s.json is \
         outside the file, and schemas are never fetched (put it under $defs)"
    );
    assert!(OutputSchema::new("x", json!(true)).is_ok());
    // Draft 2020-12 whatever `$schema` says.
    let d7 = json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"});
    assert!(OutputSchema::new("x", d7).is_ok());
}

#[test]
fn files_are_read_bounded_and_named() {
    let d = tempfile::tempdir().unwrap();
    let ok = d.path().join("verdict.schema.json");
    std::fs::write(&ok, r#"{"type": "object"}"#).unwrap();
    let s = OutputSchema::load(&ok).unwrap();
    assert_eq!(s.name(), "verdict_schema");
    assert_eq!(s.schema(), &json!({"type": "object"}));
    assert!(s.instruction().contains(r#"{"type":"object"}"#));
    let not_json = d.path().join("x.json");
    std::fs::write(&not_json, "type: object").unwrap();
    assert!(OutputSchema::load(&not_json)
        .unwrap_err()
        .starts_with("is not JSON"));
    let missing = OutputSchema::load(&d.path().join("missing.json")).unwrap_err();
    assert!(missing.starts_with("cannot be read"), "{missing}");
    let big = d.path().join("big.json");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(deerflow_base::text::MAX_INPUT_BYTES + 1).unwrap();
    assert_eq!(
        OutputSchema::load(&big).unwrap_err(),
        "is larger than 16 MiB"
    );
    assert!(OutputSchema::load(d.path())
        .unwrap_err()
        .starts_with("cannot be read"));
}

#[test]
fn names_fit_openai() {
    assert_eq!(wire_name("a b/c.d"), "a_b_c_d");
    assert_eq!(wire_name(""), "final_answer");
    assert_eq!(wire_name(&"x".repeat(100)).len(), 64);
    assert_eq!(name_from_path(Path::new("/a/out.json")), "out");
}
