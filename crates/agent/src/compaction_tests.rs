use serde_json::json;

use super::*;
use deerflow_model::{Reasoning, Usage};
use deerflow_tools::task_end::{TaskEnd, TaskStatus};
use std::collections::HashMap;

fn user(t: &str) -> Message {
    Message::User(t.into())
}

fn assistant(calls: &[(&str, &str)]) -> Message {
    Message::Assistant {
        text: None,
        tool_calls: calls
            .iter()
            .map(|(id, name)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: json!({}).into(),
                invalid_arguments: None,
                extra: Default::default(),
            })
            .collect(),
        reasoning: Reasoning::default(),
    }
}

fn result(id: &str, content: &str) -> Message {
    Message::Tool {
        call_id: id.into(),
        name: "echo".into(),
        content: content.into(),
    }
}

fn window(w: u64) -> ModelLimits {
    ModelLimits {
        context_window: Some(w),
        max_output_tokens: None,
    }
}

/// task, then `rounds` rounds of one assistant call with two results each.
fn rounds(rounds: usize) -> Vec<Message> {
    let mut m = vec![user("task")];
    for i in 0..rounds {
        let (a, b) = (format!("a{i}"), format!("b{i}"));
        m.push(assistant(&[(&a, "echo"), (&b, "echo")]));
        m.push(result(&a, "x"));
        m.push(result(&b, "y"));
    }
    m
}

#[test]
fn the_estimate_is_four_characters_per_token_rounded_up() {
    assert_eq!(estimate_tokens(&[user("abcd")], 0), 1);
    assert_eq!(estimate_tokens(&[user("abcde")], 0), 2);
    assert_eq!(estimate_tokens(&[user("abcd")], 4), 2);
    // Characters, not bytes.
    assert_eq!(estimate_tokens(&[user("éééé")], 0), 1);
    assert_eq!(estimate_tokens(&[result("id", &"z".repeat(400))], 0), 100);
    assert_eq!(estimate_tokens(&[], 0), 0);
}

#[test]
fn any_trigger_fires() {
    let none = ModelLimits::default();
    assert!(fires(&[Size::Tokens(100)], 100, 1, none));
    assert!(!fires(&[Size::Tokens(100)], 99, 1, none));
    assert!(fires(&[Size::Messages(5)], 0, 5, none));
    assert!(!fires(&[Size::Messages(5)], 0, 4, none));
    assert!(fires(&[Size::Fraction(0.8)], 800, 1, window(1000)));
    assert!(!fires(&[Size::Fraction(0.8)], 799, 1, window(1000)));
    // A share of an unknown window never fires.
    assert!(!fires(&[Size::Fraction(0.1)], u64::MAX, 1, none));
    let both = [Size::Tokens(1000), Size::Messages(3)];
    assert!(fires(&both, 10, 3, none));
    assert!(fires(&both, 1000, 1, none));
    assert!(!fires(&both, 999, 2, none));
    assert!(!fires(&[], u64::MAX, usize::MAX, none));
}

#[test]
fn keep_by_messages_never_starts_with_a_tool_result() {
    let m = rounds(4); // 13 messages
    let none = ModelLimits::default();
    // The last 3 are a whole round: split at its assistant message.
    assert_eq!(split_point(&m, Size::Messages(3), none, 1), Some(10));
    // The last 2 would orphan a result: the split moves back to the call.
    assert_eq!(split_point(&m, Size::Messages(2), none, 1), Some(10));
    assert_eq!(split_point(&m, Size::Messages(1), none, 1), Some(10));
    // Keeping nothing summarizes everything after the task.
    assert_eq!(split_point(&m, Size::Messages(0), none, 1), Some(13));
    // Keeping everything, or all but a piece of the first round, summarizes nothing.
    assert_eq!(split_point(&m, Size::Messages(12), none, 1), None);
    assert_eq!(split_point(&m, Size::Messages(11), none, 1), None);
    assert_eq!(split_point(&m, Size::Messages(100), none, 1), None);
    // After a compaction the summary (index 1) is summarized again, never kept alone.
    assert_eq!(split_point(&m, Size::Messages(11), none, 2), None);
    assert_eq!(split_point(&m, Size::Messages(8), none, 2), Some(4));
}

#[test]
fn every_split_keeps_calls_and_results_together() {
    let m = rounds(6);
    let none = ModelLimits::default();
    for n in 0..m.len() + 2 {
        let Some(split) = split_point(&m, Size::Messages(n), none, 1) else {
            continue;
        };
        let kept = &m[split..];
        for (i, k) in kept.iter().enumerate() {
            if let Message::Tool { call_id, .. } = k {
                let asked = kept[..i].iter().any(|a| match a {
                    Message::Assistant { tool_calls, .. } => {
                        tool_calls.iter().any(|c| c.id == *call_id)
                    }
                    _ => false,
                });
                assert!(asked, "keep {n}: result {call_id} kept without its call");
            }
        }
        // And no summarized call lost its result to the kept part.
        for s in &m[1..split] {
            if let Message::Assistant { tool_calls, .. } = s {
                for c in tool_calls {
                    assert!(
                        !kept.iter().any(
                            |k| matches!(k, Message::Tool { call_id, .. } if *call_id == c.id)
                        ),
                        "keep {n}: call {} summarized, its result kept",
                        c.id
                    );
                }
            }
        }
    }
}

#[test]
fn keep_by_tokens_and_fraction() {
    let mut m = vec![user("task")];
    m.push(assistant(&[("a", "echo")]));
    m.push(result("a", &"1".repeat(400))); // 100 tokens
    m.push(assistant(&[("b", "echo")]));
    m.push(result("b", &"2".repeat(400)));
    // `assistant` estimates at 5 characters ("echo" + "{}"), under 2 tokens.
    assert_eq!(
        split_point(&m, Size::Tokens(102), ModelLimits::default(), 1),
        Some(3)
    );
    assert_eq!(
        split_point(&m, Size::Tokens(101), ModelLimits::default(), 1),
        Some(3),
        "a result alone would be orphaned: its call comes along"
    );
    // Nothing fits: nothing is kept.
    assert_eq!(
        split_point(&m, Size::Tokens(99), ModelLimits::default(), 1),
        Some(5)
    );
    assert_eq!(
        split_point(&m, Size::Fraction(0.102), window(1000), 1),
        Some(3)
    );
    assert_eq!(
        split_point(&m, Size::Tokens(10_000), ModelLimits::default(), 1),
        None
    );
}

#[test]
fn the_ledger_lists_every_task_call_with_its_outcome() {
    let task = |id: &str, d: &str| ToolCall {
        id: id.into(),
        name: "task".into(),
        arguments: json!({"description": d, "prompt": "p", "subagent_type": "general-purpose"})
            .into(),
        invalid_arguments: None,
        extra: Default::default(),
    };
    let m = vec![
        Message::Assistant {
            text: None,
            tool_calls: vec![task("t1", "count lines"), task("t2", "find bugs")],
            reasoning: Reasoning::default(),
        },
        // The text is what the model saw; the status comes from the typed end beside it.
        result("t1", "(stored away: 2 KB)"),
        result("t2", "Task failed. Error: provider down"),
        assistant(&[("e", "echo")]),
        result("e", "not a task"),
        Message::Assistant {
            text: None,
            tool_calls: vec![task("t3", "slow one"), task("t4", "never ran")],
            reasoning: Reasoning::default(),
        },
        result(
            "t3",
            "Task timed out. Error: Execution timed out after 5 seconds",
        ),
        result("t4", "Task failed. Error: but not from the task tool"),
    ];
    let ends = HashMap::from([
        (
            "t1".to_string(),
            TaskEnd::new(TaskStatus::Completed, "42 lines\nmore detail"),
        ),
        (
            "t2".to_string(),
            TaskEnd::new(TaskStatus::Failed, "provider down"),
        ),
        (
            "t3".to_string(),
            TaskEnd::new(TaskStatus::TimedOut, "Execution timed out after 5 seconds"),
        ),
    ]);
    assert_eq!(
        ledger_entries(&m, &ends),
        [
            "- description: \"count lines\"; subagent_type: general-purpose; status: completed; result: 42 lines",
            "- description: \"find bugs\"; subagent_type: general-purpose; status: failed; result: provider down",
            "- description: \"slow one\"; subagent_type: general-purpose; status: timed_out; result: Execution timed out after 5 seconds",
            "- description: \"never ran\"; subagent_type: general-purpose; status: unknown; result: Task failed. Error: but not from the task tool",
        ]
    );
    let msg = summary_message("We counted.", &ledger_entries(&m, &ends));
    assert!(msg.starts_with(SUMMARY_HEADER));
    assert!(msg.contains("We counted.\n\n## Sub-agent tasks already delegated"));
    assert!(
        msg.ends_with("status: unknown; result: Task failed. Error: but not from the task tool")
    );
    assert!(!summary_message("s", &[]).contains("##"));
}

#[test]
fn the_transcript_is_bounded_and_keeps_both_ends() {
    let m = rounds(50);
    let t = transcript(Some("what came before"), &m[1..], 400);
    assert!(t.chars().count() <= 400 + 60, "{}", t.len());
    assert!(t.starts_with("[earlier summary]\nwhat came before"), "{t}");
    assert!(t.contains("characters truncated"));
    assert!(t.trim_end().ends_with('y'), "{t}");
    let big = transcript(None, &[result("r", &"q".repeat(50_000))], 1_000_000);
    assert!(big.len() < 2_200, "one result is cut for the summarizer");
}

#[test]
fn a_custom_prompt_replaces_the_instruction_or_takes_the_messages() {
    assert_eq!(
        summary_request(Some("Sum up."), "T"),
        ("Sum up.".to_string(), "T".to_string())
    );
    let (system, user) = summary_request(Some("Sum up: {messages} now"), "T");
    assert_eq!(system, BUILT_IN_PROMPT);
    assert_eq!(user, "Sum up: T now");
    let (system, user) = summary_request(None, "T");
    assert_eq!(system, BUILT_IN_PROMPT);
    assert!(user.ends_with("\n\nT"));
}

#[test]
fn reported_usage_wins_over_the_estimate() {
    struct NoPort;
    impl super::super::context::AgentPort for NoPort {
        fn own_model(&self) -> (Arc<dyn ChatModel>, String) {
            unreachable!()
        }
        fn side_call<'a>(
            &'a self,
            _: &'a dyn ChatModel,
            _: &'a str,
            _: &'a ChatRequest,
        ) -> BoxFuture<'a, Result<deerflow_model::ModelResponse, deerflow_model::ModelError>>
        {
            unreachable!()
        }
        fn emit(&self, _: Event) {}
    }
    let m = [user(&"a".repeat(400))];
    let mut at = PreCall {
        agent: &AgentId::Lead,
        turn: 1,
        last_usage: None,
        limits: ModelLimits::default(),
        reason: Reason::Trigger,
        fixed_chars: 400,
        port: &NoPort,
    };
    assert_eq!(current_tokens(&at, &m), (200, false));
    at.last_usage = Some(Usage {
        input_tokens: 7,
        ..Default::default()
    });
    assert_eq!(current_tokens(&at, &m), (7, true));
}

#[test]
fn the_transcript_fits_half_the_context_window() {
    assert_eq!(
        transcript_budget(15_564, ModelLimits::default()),
        15_564 * 4
    );
    assert_eq!(transcript_budget(15_564, window(4096)), 2048 * 4);
    assert_eq!(transcript_budget(15_564, window(1_000_000)), 15_564 * 4);
    assert_eq!(
        transcript_budget(1, window(10)),
        2_000,
        "never below the floor"
    );
}

#[test]
fn a_summary_gets_no_image_and_the_kept_part_never_starts_with_one() {
    use deerflow_model::image::testing::test_png;
    let images = Message::Images {
        call_id: Some("v".into()),
        images: vec![test_png(3, 2)],
    };
    let m = vec![
        user("task"),
        assistant(&[("v", "view_image")]),
        result("v", "Image read: a.png (3x2)"),
        images.clone(),
        user("next"),
    ];
    let t = transcript(None, &m[1..], 100_000);
    assert!(t.contains("Image read: a.png (3x2)"), "{t}");
    assert!(!t.contains("iVBOR") && !t.contains("Image("), "{t}");
    // Keeping the last two messages would start at the image: its result and call go with it.
    assert_eq!(split_point(&m, Size::Messages(2), window(1000), 1), None);
    assert_eq!(
        split_point(&m[..4], Size::Messages(1), window(1000), 0),
        Some(1)
    );
    // An image counts in the estimate like about 1,500 tokens.
    assert!(estimate_tokens(&[images], 0) >= 1_500);
}
