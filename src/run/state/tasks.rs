//! Every sub-agent's model responses in the ledger (contract §15): each `task`'s and each
//! `--each` item's, in the cassette's form (`from_response`), under the task's id and
//! description, on disk before the response's events. Resuming does not read them — a
//! completed task or item is taken whole from its end — but `--record` writes those of the
//! tasks and items taken from the ledger, so its cassette holds every response the run
//! used. And each lead task's end ([`TaskEnds`]), on disk before its terminal event.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::ledger::TaskEnded;
use super::StateDir;
use crate::events::Gate;
use crate::model::providers::replay::{from_response, RecordLog, ScriptedResponse};
use crate::model::{
    AgentId, CallContext, CallPurpose, ChatModel, ChatRequest, ModelError, ModelLimits,
    ModelResponse,
};
use crate::subagent::record::{EndHook, Ended, TaskRecord};
use crate::subagent::SubagentSetup;

/// The scheduler's end hook in a lead run with `--state`: each task's end goes to the
/// ledger, and its terminal event waits until it is on disk — the `tool` line of its call
/// comes later, when the call returns to the lead, and a kill in between must not lose a
/// completed task. Failed, timed-out and cancelled ends are written too (a resume runs
/// those tasks again).
pub struct TaskEnds(pub Arc<StateDir>);

impl EndHook for TaskEnds {
    fn ended(&self, rec: &TaskRecord, end: &Ended<'_>) -> Option<Gate> {
        // An item's end is the item log's (an `--each` run has no lead).
        if rec.item.is_some() {
            return None;
        }
        self.0.task_ended(TaskEnded {
            task_id: rec.id().to_string(),
            description: rec.description().to_string(),
            prompt: rec.prompt().to_string(),
            subagent_type: rec.kind.name.clone(),
            status: end.status.as_str().to_string(),
            text: end.text.to_string(),
            usage: end.usage,
            turns: end.turns,
            duration_ms: end.duration_ms,
        })
    }
}

/// `setup` with every sub-agent model wrapped so its responses go to the ledger.
pub fn with_ledger(setup: &SubagentSetup, state: &Arc<StateDir>) -> Arc<SubagentSetup> {
    let models = setup.models.iter().map(|(name, model)| {
        let wrapped: Arc<dyn ChatModel> = Arc::new(TaskResponses {
            inner: model.clone(),
            state: state.clone(),
        });
        (name.clone(), wrapped)
    });
    Arc::new(SubagentSetup {
        types: setup.types.clone(),
        models: models.collect(),
        vision: setup.vision.clone(),
        skills: setup.skills.clone(),
    })
}

/// Puts the responses the ledger holds for task `ran_as` (of an earlier run) into the
/// `--record` log as `agent`'s, the task that took its result in this run.
pub fn record_resumed(log: &RecordLog, state: &StateDir, ran_as: &str, agent: AgentId) {
    let responses = state.take_task_responses(ran_as);
    for (turn, r) in responses.into_iter().enumerate() {
        if let Ok(scripted) = serde_json::from_value::<ScriptedResponse>(r) {
            log.push(agent.clone(), turn, scripted);
        }
    }
}

struct TaskResponses {
    inner: Arc<dyn ChatModel>,
    state: Arc<StateDir>,
}

impl ChatModel for TaskResponses {
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            // A summary is not a turn: a cassette does not script it.
            let AgentId::Task {
                description,
                task_id,
            } = &req.agent
            else {
                return self.inner.complete(req, ctx).await;
            };
            if req.purpose == CallPurpose::Summary {
                return self.inner.complete(req, ctx).await;
            }
            if let Some(failure) = self.state.failure() {
                return Err(ledger_error(failure));
            }
            let result = self.inner.complete(req, ctx).await;
            if let Ok(r) = &result {
                let scripted = from_response(r);
                self.state
                    .task_response(task_id, description, req.turn, &scripted)
                    .await
                    .map_err(ledger_error)?;
            }
            result
        })
    }

    fn limits(&self) -> ModelLimits {
        self.inner.limits()
    }
}

/// A ledger that cannot be written fails the call: the run ends at it (exit 1).
pub fn ledger_error(message: String) -> ModelError {
    ModelError::Stream {
        provider: "ledger".into(),
        message,
    }
}
