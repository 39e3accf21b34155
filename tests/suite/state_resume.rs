//! A lead run resumed from `--state` (contract §15) against a live provider: a completed
//! run resumed again makes no model call — summaries included — and the replayed
//! responses' usage events say `resumed` and count in no total.

use std::path::Path;

use serde_json::json;

use super::harness::{cassette, deerflow, workspace, Output};
use crate::support::{MockServer, Reply, Rule};

const SUMMARY_ASK: &str = "summarizing the earlier part";

fn config(dir: &Path, server: &MockServer) {
    let yaml = format!(
        "models:\n  - {{name: lead, use: openai, model: m-lead, base_url: '{}', api_key: sk-test}}\n\
         summarization:\n  trigger: [{{type: messages, value: 4}}]\n  keep: {{type: messages, value: 2}}\n",
        server.url()
    );
    std::fs::write(dir.join("deerflow.yaml"), yaml).unwrap();
}

async fn run(dir: &Path) -> Output {
    deerflow(["run", "--json", "--state", "st", "do the work"])
        .cwd(dir)
        .json()
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_completed_run_that_summarized_resumes_without_any_model_call() {
    let server = MockServer::start().await;
    let ws = workspace();
    config(ws.path(), &server);
    server.push(
        Rule::body_contains(SUMMARY_ASK)
            .reply(Reply::text("SUMMARY").usage(7, 3))
            .always(),
    );
    server.push(Rule::any().reply(Reply::tool_calls(vec![("c1", "ls", json!({}))]).usage(10, 1)));
    server.push(Rule::any().reply(Reply::tool_calls(vec![("c2", "ls", json!({}))]).usage(20, 1)));
    server.push(Rule::any().reply(Reply::text("final").usage(30, 1)));
    let first = run(ws.path()).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        !first.of_type("context_compacted").is_empty(),
        "the first run summarized"
    );
    let calls = server.request_count();

    let again = run(ws.path()).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(
        server.request_count(),
        calls,
        "the resumed run called the model"
    );
    let end = again.completed();
    assert_eq!(end["final_message"], "final");
    assert_eq!(end["usage"]["total_tokens"], 0);
    assert_eq!(end["usage"]["by_model"], json!({}));
    let usage = again.of_type("usage");
    assert_eq!(usage.len(), 3, "one per replayed response");
    for u in usage {
        assert_eq!(u["resumed"], true, "{u}");
        assert_eq!(u["reported"], true, "{u}");
    }
    assert_eq!(again.of_type("usage")[2]["input_tokens"], 30);
}

/// A tool whose effect is on the run itself is run again when its response is replayed: the
/// resumed run lists the same artifacts, and a question still ends it with exit 6.
#[tokio::test(flavor = "multi_thread")]
async fn presented_files_and_a_question_survive_a_resume() {
    let ws = workspace();
    let dir = ws.path();
    std::fs::create_dir(dir.join("ws")).unwrap();
    std::fs::write(dir.join("ws/report.md"), "hi\n").unwrap();
    let present = cassette(
        dir,
        json!({"version": 1, "lead": [
            {"tool_calls": [{"name": "present_files", "arguments": {"filepaths": ["report.md"]}}]},
            {"text": "done"}
        ]}),
    );
    let ask = cassette(
        dir,
        json!({"version": 1, "lead": [
            {"tool_calls": [{"name": "ask_clarification",
                "arguments": {"question": "which one?", "options": ["a", "b"]}}]}
        ]}),
    );
    for (cassette, state, code) in [(&present, "st1", 0), (&ask, "st2", 6)] {
        let model = format!("replay:{}", cassette.display());
        let args = [
            "run", "--json", "-m", &model, "-C", "ws", "--state", state, "go",
        ];
        let first = deerflow(args).cwd(dir).json().await;
        assert_eq!(first.code, code, "{}", first.stderr);
        let again = deerflow(args).cwd(dir).json().await;
        assert_eq!(again.code, code, "{}", again.stderr);
        let (a, b) = (first.completed(), again.completed());
        assert_eq!(a["status"], b["status"]);
        assert_eq!(a["artifacts"], b["artifacts"]);
        assert_eq!(
            first.of_type("clarification_requested").len(),
            again.of_type("clarification_requested").len()
        );
    }
}
