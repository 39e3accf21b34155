//! Arbitrary bytes as a `replay:PATH` cassette: loading never panics, and a cassette that
//! loads serves the lead's, a named task's, a default task's and a summary call without a
//! panic (errors are fine).

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use deerflow::model::providers::replay::{Cassette, ReplayModel};
use deerflow::model::{AgentId, CallContext, CallPurpose, ChatModel, ChatRequest};
use libfuzzer_sys::fuzz_target;
use tokio_util::sync::CancellationToken;

struct Setup {
    _dir: tempfile::TempDir,
    file: PathBuf,
    rt: tokio::runtime::Runtime,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("cassette.json");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        Setup {
            _dir: dir,
            file,
            rt,
        }
    })
}

fn req(agent: AgentId, turn: usize, purpose: CallPurpose, tool_choice_none: bool) -> ChatRequest {
    ChatRequest {
        system: "".into(),
        messages: Default::default(),
        tools: Vec::new().into(),
        tool_choice_none,
        agent,
        turn,
        output_schema: None,
        purpose,
    }
}

fuzz_target!(|data: &[u8]| {
    let s = setup();
    std::fs::write(&s.file, data).expect("write cassette");
    let Ok(cassette) = Cassette::load(&s.file) else {
        return;
    };
    let task = cassette.tasks.keys().next().cloned().unwrap_or_default();
    let turns = cassette.lead.len().min(4) + 1;
    let model = ReplayModel::new(cassette, "fuzz");
    // Cancelled from the start, so a scripted `delay_ms` (up to u64::MAX) ends at once.
    let cancel = CancellationToken::new();
    cancel.cancel();
    let ctx = CallContext::new(cancel);
    let agents = [
        AgentId::Lead,
        AgentId::Task {
            description: task.clone(),
            task_id: "t1".into(),
        },
        AgentId::Task {
            description: "not scripted".into(),
            task_id: task,
        },
    ];
    for agent in agents {
        for turn in 0..turns {
            for none in [false, true] {
                let r = req(agent.clone(), turn, CallPurpose::Turn, none);
                let _ = s.rt.block_on(model.complete(&r, &ctx));
            }
        }
        let r = req(agent, 0, CallPurpose::Summary, false);
        let _ = s.rt.block_on(model.complete(&r, &ctx));
    }
    let _ = model.limits();
});
