//! A model's connection failures named as the user chose the model. "cannot reach openai"
//! does not say which of several openai models (or which `--model openai:NAME`) it was; the
//! user typed `openai:gpt-x` or a `models[].name`, and that is what they look for (§3).

use std::sync::Arc;

use super::{BoxFuture, CallContext, ChatModel, ChatRequest, ModelError, ModelLimits};
use super::{ModelResponse, RetryNotice};

/// Wraps a client so that its connection errors, and the retry notices about them, name
/// `name` instead of the provider.
pub struct Named {
    inner: Arc<dyn ChatModel>,
    name: String,
}

impl Named {
    pub fn wrap(inner: Arc<dyn ChatModel>, name: &str) -> Arc<dyn ChatModel> {
        Arc::new(Self {
            inner,
            name: name.to_string(),
        })
    }
}

/// `err` naming `name` when it is a connection error.
fn rename(err: ModelError, name: &str) -> ModelError {
    match err {
        ModelError::Connect { message, .. } => ModelError::Connect {
            provider: name.to_string(),
            message,
        },
        other => other,
    }
}

/// A retry notice's message names the provider the way [`ModelError::Connect`] displays it;
/// only that prefix is swapped (a connection error has no HTTP status).
fn rename_notice(mut n: RetryNotice, name: &str) -> RetryNotice {
    if n.status.is_none() {
        if let Some(rest) = n.message.strip_prefix("cannot reach ") {
            if let Some((_, tail)) = rest.split_once(": ") {
                n.message = format!("cannot reach {name}: {tail}");
            }
        }
    }
    n
}

impl ChatModel for Named {
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let outer = ctx.on_retry.clone();
            let name = self.name.clone();
            let ctx = CallContext {
                on_retry: Arc::new(move |n| outer(rename_notice(n, &name))),
                ..ctx.clone()
            };
            let result = self.inner.complete(req, &ctx).await;
            result.map_err(|e| rename(e, &self.name))
        })
    }

    fn limits(&self) -> ModelLimits {
        self.inner.limits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_errors_and_their_retries_name_the_model() {
        let err = ModelError::Connect {
            provider: "openai".into(),
            message: "http://127.0.0.1:9/v1/chat/completions: refused".into(),
        };
        assert_eq!(
            rename(err, "openai:gpt-x").to_string(),
            "cannot reach openai:gpt-x: http://127.0.0.1:9/v1/chat/completions: refused"
        );
        let notice = RetryNotice {
            attempt: 1,
            delay_ms: 500,
            status: None,
            message: "cannot reach openai: http://h/v1: refused; retry 1 in 500 ms".into(),
        };
        assert_eq!(
            rename_notice(notice, "gpt").message,
            "cannot reach gpt: http://h/v1: refused; retry 1 in 500 ms"
        );
        let http = ModelError::Http {
            provider: "openai".into(),
            status: 500,
            message: "boom".into(),
            retry_after: None,
        };
        assert_eq!(rename(http.clone(), "x"), http);
    }
}
