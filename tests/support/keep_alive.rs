//! The keep-alive mode (`MockServer::close_reused_connections`): the first request of a
//! connection gets a reusable answer (`connection: keep-alive`, a chunked or sized body);
//! the next request on that connection is read, recorded and answered by closing the
//! connection. That is what a client sees when it reuses a pooled connection the server had
//! closed while it sat idle (llama.cpp closes after every streamed answer), without the
//! race of a real idle close.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::http::{read_request, RawRequest};
use super::script::Body;
use super::sse::{chunks, StreamCtx};
use super::{RecordedRequest, State};

pub(crate) async fn serve(
    mut rd: OwnedReadHalf,
    mut wr: OwnedWriteHalf,
    first: RawRequest,
    state: Arc<State>,
) {
    if answer(&mut wr, first, &state).await.is_err() {
        return;
    }
    if let Ok(Some(next)) = read_request(&mut rd).await {
        state.seq.fetch_add(1, Ordering::SeqCst);
        state
            .log
            .lock()
            .unwrap()
            .push(RecordedRequest::from_raw(next));
        state.closed_unanswered.fetch_add(1, Ordering::SeqCst);
    }
    // Dropping both halves closes the connection with the request unanswered.
}

/// Plays the scripted reply (its body only: timing faults are not supported in this mode).
async fn answer(wr: &mut OwnedWriteHalf, raw: RawRequest, state: &State) -> io::Result<()> {
    let seq = state.seq.fetch_add(1, Ordering::SeqCst);
    let req = RecordedRequest::from_raw(raw);
    state.log.lock().unwrap().push(req.clone());
    let reply = state
        .pick(&req)
        .expect("mock: no rule matched a request in keep-alive mode");
    if let Body::Status { code, body, .. } = &reply.body {
        let head = format!(
            "HTTP/1.1 {code} Status\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: keep-alive\r\n\r\n",
            body.len()
        );
        wr.write_all(head.as_bytes()).await?;
        wr.write_all(body.as_bytes()).await?;
        return wr.flush().await;
    }
    let ctx = StreamCtx {
        model: req
            .body
            .get("model")
            .and_then(|m| m.as_str())
            .unwrap_or("mock-model")
            .to_string(),
        seq,
        responses: req
            .path
            .split('?')
            .next()
            .unwrap_or_default()
            .ends_with("/responses"),
    };
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                transfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n";
    wr.write_all(head.as_bytes()).await?;
    for chunk in chunks(&reply, &ctx) {
        wr.write_all(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes())
            .await?;
    }
    wr.write_all(b"0\r\n\r\n").await?;
    wr.flush().await
}
