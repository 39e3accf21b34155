//! One server tool as a deerflow `Tool`: the call goes over the run's shared session, with
//! `tool_call_timeout` and the caller's cancellation both sending `notifications/cancelled`.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CancelledNotification, CancelledNotificationParam, ClientNotification,
    ClientRequest, Request,
};
use rmcp::service::PeerRequestOptions;
use serde_json::Value;

use super::session::Session;
use deerflow_model::{BoxFuture, ToolCall, ToolSpec};
use deerflow_tools::{Content, Tool, ToolContext, ToolError, ToolOutput};

pub struct McpTool {
    /// The name the model calls it by.
    pub offered: String,
    /// The server's own name for it.
    pub remote: String,
    pub description: String,
    pub schema: Value,
    pub session: Arc<Session>,
    pub timeout_secs: f64,
}

impl McpTool {
    pub fn new(
        offered: String,
        tool: &rmcp::model::Tool,
        session: Arc<Session>,
        timeout_secs: f64,
    ) -> Self {
        Self {
            offered,
            remote: tool.name.to_string(),
            description: tool
                .description
                .as_deref()
                .or(tool.title.as_deref())
                .unwrap_or_default()
                .to_string(),
            schema: Value::Object((*tool.input_schema).clone()),
            session,
            timeout_secs,
        }
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let arguments = match args {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => return ToolError::NotAnObject(other.to_string()).into(),
        };
        let request = ClientRequest::CallToolRequest(Request::new(CallToolRequestParams {
            meta: None,
            name: self.remote.clone().into(),
            arguments,
            task: None,
        }));
        let peer = self.session.peer();
        let handle = match peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(h) => h,
            Err(e) => return self.failed(&self.session.explain(&e)),
        };
        let mut pending = Pending {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
        };
        tokio::select! {
            r = handle.rx => { pending.id = None; match r {
                // rmcp decodes a result it finds malformed as another type (usually its
                // catch-all `CustomResult`); its JSON is read leniently whatever it became.
                Ok(Ok(answer)) => match serde_json::to_value(&answer) {
                    Ok(v) => super::result::output(&v),
                    Err(e) => self.failed(&format!("unreadable answer to tools/call: {e}")),
                },
                Ok(Err(e)) => self.failed(&self.session.explain(&e)),
                Err(_) => self.failed(&self.session.closed()),
            }},
            _ = tokio::time::sleep(Duration::from_secs_f64(self.timeout_secs)) => {
                pending.cancel("tool_call_timeout");
                ToolError::RemoteTimedOut {
                    server: self.session.name.clone(),
                    tool: self.remote.clone(),
                    secs: self.timeout_secs,
                }
                .into()
            }
            _ = ctx.cancel.cancelled() => {
                pending.cancel("the calling agent was cancelled");
                ToolError::Cancelled.into()
            }
        }
    }

    fn failed(&self, why: &str) -> ToolOutput {
        ToolError::Remote {
            server: self.session.name.clone(),
            tool: self.remote.clone(),
            why: why.to_string(),
        }
        .into()
    }
}

/// A `tools/call` in flight: unless it was answered, the server is told it is cancelled —
/// on timeout, on the caller's cancellation, and when the calling agent's future is
/// dropped (an aborted task).
struct Pending {
    peer: rmcp::service::Peer<rmcp::service::RoleClient>,
    id: Option<rmcp::model::RequestId>,
}

impl Pending {
    fn cancel(&mut self, reason: &str) {
        let Some(id) = self.id.take() else { return };
        let note = ClientNotification::CancelledNotification(CancelledNotification {
            params: CancelledNotificationParam {
                request_id: id,
                reason: Some(reason.to_string()),
            },
            method: Default::default(),
            extensions: Default::default(),
        });
        let peer = self.peer.clone();
        // Sent in the background: a server that stopped reading must not hold the caller.
        // Outside a runtime (never during a run) there is nothing to send it with.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { peer.send_notification(note).await });
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.cancel("the call was abandoned");
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.offered
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.offered.clone(),
            description: self.description.clone(),
            parameters: self.schema.clone(),
        }
    }

    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        let args = call.arguments.to_value();
        Box::pin(async move {
            let out = self.run(args, ctx).await;
            limit(out, ctx.limits.bash_output_max_chars)
        })
    }
}

/// §6's output limit: a result longer than the limit is cut in the middle with a marker.
fn limit(out: ToolOutput, max: usize) -> ToolOutput {
    let text = out.text();
    if text.chars().count() <= max {
        return out;
    }
    let cut = deerflow_base::text::cut(&text, max, deerflow_base::text::Keep::Middle).marked(0);
    ToolOutput::with_content(out.status, vec![Content::Text(cut)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_results_are_cut_with_a_marker() {
        let out = limit(ToolOutput::ok("x".repeat(100)), 10);
        let t = out.text();
        assert!(t.starts_with("xxxxx") && t.ends_with("xxxxx"), "{t}");
        assert!(t.contains("90"), "{t}");
    }
}
