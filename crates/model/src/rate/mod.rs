//! Rate limits (contract §15): one [`RateLimited`] wrapper per model of a run, so every
//! agent's calls of that model share its [`Limiter`]. Each attempt — the retries of a call
//! too — passes the limiter: the wrapper admits the first, the retry loop asks the call's
//! [`AttemptGate`] before each further one and tells it how each failed. Waiting happens
//! before an attempt starts, so it counts toward the agent's timeout (its cancellation),
//! never toward the request `timeout`.

pub mod limiter;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::ModelResponse;
use super::{BoxFuture, CallContext, ChatModel, ChatRequest, Message, ModelError, ModelLimits};
use deerflow_config::RateLimit;
pub use limiter::{Limiter, Outcome, Pass};

/// A 429 halved a model's requests in flight (becomes a `rate_limited` warning).
#[derive(Debug, Clone, PartialEq)]
pub struct RateNotice {
    /// The model as the user named it.
    pub model: String,
    /// Requests of that model allowed in flight from now on.
    pub concurrency: u32,
    /// How long every call of the model now waits.
    pub pause_ms: u64,
}

/// What the retry loop asks before each attempt and tells after each failure.
pub trait AttemptGate: Send + Sync {
    /// Resolves once the next attempt may start (at once when one is admitted already).
    fn admit(&self) -> BoxFuture<'_, ()>;
    /// The attempt failed; a retry would come after `delay`. Returns whether the limiter
    /// took a 429 on itself (then the retry is not counted against `max_retries`).
    fn failed(&self, err: &ModelError, delay: Duration) -> bool;
}

/// A model whose calls pass its limiter.
pub struct RateLimited {
    inner: Arc<dyn ChatModel>,
    name: String,
    limiter: Arc<Limiter>,
}

impl RateLimited {
    /// `start`: the requests in flight allowed at first and at most.
    pub fn wrap(
        inner: Arc<dyn ChatModel>,
        name: &str,
        limits: RateLimit,
        start: u32,
    ) -> Arc<dyn ChatModel> {
        Arc::new(Self {
            inner,
            name: name.to_string(),
            limiter: Limiter::new(limits, start),
        })
    }
}

impl ChatModel for RateLimited {
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let estimate = if self.limiter.counts_tokens() {
                estimate_tokens(req)
            } else {
                0
            };
            let gate = Arc::new(CallGate {
                limiter: self.limiter.clone(),
                pass: Mutex::new(None),
                estimate,
                model: self.name.clone(),
                notify: ctx.on_rate_limited.clone(),
            });
            // A provider without a retry loop (replay) still passes the limiter once.
            tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => return Err(ModelError::Cancelled),
                _ = gate.admit() => {}
            }
            let inner_ctx = CallContext {
                gate: Some(gate.clone()),
                ..ctx.clone()
            };
            let result = self.inner.complete(req, &inner_ctx).await;
            if let Some(pass) = gate.take() {
                let outcome = match &result {
                    Ok(r) => Outcome::Success(r.usage.map(|u| u.total_tokens)),
                    Err(_) => Outcome::Other,
                };
                pass.finish(outcome);
            }
            result
        })
    }

    fn limits(&self) -> ModelLimits {
        self.inner.limits()
    }
}

/// One call's view of the limiter: the pass of its current attempt.
struct CallGate {
    limiter: Arc<Limiter>,
    pass: Mutex<Option<Pass>>,
    estimate: u64,
    model: String,
    notify: Arc<dyn Fn(RateNotice) + Send + Sync>,
}

impl CallGate {
    fn take(&self) -> Option<Pass> {
        self.pass
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

impl AttemptGate for CallGate {
    fn admit(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self
                .pass
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
            {
                return;
            }
            let pass = self.limiter.admit(self.estimate).await;
            *self.pass.lock().unwrap_or_else(PoisonError::into_inner) = Some(pass);
        })
    }

    fn failed(&self, err: &ModelError, delay: Duration) -> bool {
        let Some(pass) = self.take() else {
            return false;
        };
        let ModelError::Http {
            status: 429,
            retry_after,
            ..
        } = err
        else {
            pass.finish(Outcome::Other);
            return false;
        };
        // Every call waits for the server's Retry-After (the retry's `delay` is that value,
        // capped); without one only the failed call backs off, by its own delay.
        let pause = if retry_after.is_some() {
            delay
        } else {
            Duration::ZERO
        };
        let could = pass.could_back_off();
        if let Some(concurrency) = pass.finish(Outcome::RateLimited(pause)) {
            (self.notify)(RateNotice {
                model: self.model.clone(),
                concurrency,
                pause_ms: u64::try_from(pause.as_millis()).unwrap_or(u64::MAX),
            });
        }
        could
    }
}

/// A request's size before the provider reports it: about 4 bytes of text per token.
pub fn estimate_tokens(req: &ChatRequest) -> u64 {
    let mut bytes = req.system.len();
    for m in req.messages.iter() {
        bytes += match m {
            Message::User(t) => t.len(),
            Message::Assistant {
                text, tool_calls, ..
            } => {
                text.as_ref().map_or(0, String::len)
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments_text().len())
                        .sum::<usize>()
            }
            Message::Tool { content, .. } => content.len(),
            // Providers bill an image at roughly a thousand tokens.
            Message::Images { images, .. } => images.len() * 4000,
        };
    }
    for t in req.tools.iter() {
        bytes += t.name.len() + t.description.len() + t.parameters.to_string().len();
    }
    (bytes as u64).div_ceil(4)
}
