//! Every sub-agent's model responses in the ledger (contract §15): each `task`'s and each
//! `--each` item's, in the cassette's form (`from_response`), under the task's id and
//! description, on disk before the response's events. Resuming does not read them — a
//! completed task or item is taken whole from its end — but `--record` writes those of the
//! tasks and items taken from the ledger, so its cassette holds every response the run
//! used.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::StateDir;
use crate::model::providers::replay::{from_response, RecordLog, ScriptedResponse};
use crate::model::{
    AgentId, CallContext, CallPurpose, ChatModel, ChatRequest, ModelError, ModelLimits,
    ModelResponse,
};
use crate::subagent::SubagentSetup;

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
