//! What broke a session, in the user's words. rmcp reports a transport that stopped as
//! "connection closed" and a failed send with its transport's Rust type name; deerflow's
//! transports record why they stopped here, and start-up and call errors are worded from it.

use std::sync::{Arc, Mutex};

use rmcp::service::{ClientInitializeError, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpError;

/// The most bytes one MCP message may take: a stdio line, an HTTP JSON body, one SSE event.
/// The same bound as one line of a model's SSE stream (`model::sse::MAX_LINE_BYTES`).
pub const MAX_MESSAGE_BYTES: usize = deerflow_model::sse::MAX_LINE_BYTES;

/// A failure of the HTTP transport, already in the user's words.
#[derive(Debug)]
pub struct HttpFault(pub String);

impl std::fmt::Display for HttpFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HttpFault {}

/// The last reason a session's transport gave up, shared by the transport and the session.
#[derive(Clone, Default)]
pub struct Fault(Arc<Mutex<Option<String>>>);

impl Fault {
    pub fn set(&self, why: impl Into<String>) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(why.into());
        }
    }

    pub fn get(&self) -> Option<String> {
        self.0.lock().ok().and_then(|slot| slot.clone())
    }
}

/// A message that is too large to read.
pub fn too_large() -> String {
    format!(
        "sent a message larger than {} MiB (the limit of one MCP message); it was not read",
        MAX_MESSAGE_BYTES >> 20
    )
}

/// An answer that is not JSON-RPC, quoted by its first bytes.
pub fn not_json_rpc(bytes: &[u8]) -> String {
    const SHOWN: usize = 120;
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(SHOWN)]).into_owned();
    let more = if bytes.len() > SHOWN { "…" } else { "" };
    format!(
        "answered something that is not MCP JSON-RPC: {}{more}",
        deerflow_base::text::escape_controls(head.trim_end())
    )
}

/// Why `initialize` (or the wait for its answer) failed.
pub fn init_error(err: &ClientInitializeError, fault: &Fault) -> String {
    match err {
        ClientInitializeError::TransportError { error, .. } => transport_text(&*error.error, fault),
        ClientInitializeError::ConnectionClosed(_) => fault
            .get()
            .unwrap_or_else(|| "closed the connection before answering initialize".into()),
        ClientInitializeError::JsonRpcError(e) => {
            format!(
                "refused initialize: {}",
                deerflow_base::text::escape_controls(&e.message)
            )
        }
        ClientInitializeError::ExpectedInitResponse(_)
        | ClientInitializeError::ExpectedInitResult(_)
        | ClientInitializeError::ConflictInitResponseId(..) => {
            "answered initialize with something other than its result".into()
        }
        ClientInitializeError::Cancelled => "initialize was cancelled".into(),
    }
}

/// Why a request of an established session failed.
pub fn service_error(err: &ServiceError, fault: &Fault) -> String {
    match err {
        ServiceError::McpError(e) => {
            format!(
                "the server answered with an error: {}",
                deerflow_base::text::escape_controls(&e.message)
            )
        }
        ServiceError::TransportSend(e) => transport_text(&*e.error, fault),
        ServiceError::TransportClosed => closed(fault),
        ServiceError::UnexpectedResponse => {
            "the server answered with the wrong kind of result".into()
        }
        ServiceError::Cancelled { .. } => "the request was cancelled".into(),
        ServiceError::Timeout { timeout } => format!(
            "no answer within {} s",
            deerflow_base::text::secs(timeout.as_secs_f64())
        ),
        // The enum is non-exhaustive; rmcp's own words are the best there is.
        other => other.to_string(),
    }
}

/// A transport's error without rmcp's wrapping (which names the transport's Rust type).
fn transport_text(err: &(dyn std::error::Error + Send + Sync + 'static), fault: &Fault) -> String {
    match err.downcast_ref::<StreamableHttpError<HttpFault>>() {
        Some(StreamableHttpError::Client(f)) => f.0.clone(),
        _ => fault.get().unwrap_or_else(|| err.to_string()),
    }
}

/// The connection is gone: why, if the transport knows.
pub fn closed(fault: &Fault) -> String {
    match fault.get() {
        Some(why) => format!("the connection to the server closed: {why}"),
        None => "the connection to the server closed".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_quoted_escaped_and_short() {
        let m = not_json_rpc(b"hello\x1b[31m\n");
        assert_eq!(
            m,
            "answered something that is not MCP JSON-RPC: hello\\u{1b}[31m"
        );
        let long = not_json_rpc(&[b'a'; 1000]);
        assert!(long.ends_with("a…") && long.len() < 200, "{long}");
    }

    #[test]
    fn the_last_fault_is_the_one_reported() {
        let f = Fault::default();
        assert_eq!(closed(&f), "the connection to the server closed");
        f.set("first");
        f.set(too_large());
        assert!(closed(&f).contains("larger than 16 MiB"), "{}", closed(&f));
    }
}
