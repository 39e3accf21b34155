//! Serving one connection: read the request, record it, pick a rule, play the reply.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::time::sleep;

use super::http::{read_request, response_head};
use super::script::{Body, Cut, Reply};
use super::sse::{chunks, StreamCtx};
use super::{RecordedRequest, State};

pub(crate) async fn serve(stream: TcpStream, state: Arc<State>) {
    let (mut rd, wr) = stream.into_split();
    // Errors and early closes just end the connection: the client side of the test is
    // the one that should report them.
    let Ok(Some(raw)) = read_request(&mut rd).await else {
        return;
    };
    if state.close_reused.load(Ordering::SeqCst) {
        return super::keep_alive::serve(rd, wr, raw, state).await;
    }
    let limit = state.in_flight_limit.load(Ordering::SeqCst);
    let Some(_busy) = InFlight::enter(&state, limit) else {
        return too_many(wr, raw, &state).await;
    };
    let seq = state.seq.fetch_add(1, Ordering::SeqCst);
    let req = RecordedRequest::from_raw(raw);
    state.log.lock().unwrap().push(req.clone());
    let reply = state.pick(&req).unwrap_or_else(|| no_match(&state, &req));
    let model = req
        .body
        .get("model")
        .and_then(|m| m.as_str())
        .unwrap_or("mock-model");
    let path = req.path.split('?').next().unwrap_or_default();
    let ctx = StreamCtx {
        model: model.to_string(),
        seq,
        responses: path.ends_with("/responses"),
    };
    // Racing the reply against the client going away keeps `max_in_flight` honest and ends
    // gated or stalled replies whose client has given up.
    tokio::select! {
        _ = respond(wr, &reply, &ctx, &_busy) => {}
        _ = client_gone(&mut rd) => {}
    }
}

/// Counts a request as in flight until its last bytes are about to be written (the
/// client cannot act on the answer before that, so a follow-up request it makes never
/// overlaps this one in the count), or until the connection ends.
struct InFlight<'a>(&'a State, std::sync::atomic::AtomicBool);

impl<'a> InFlight<'a> {
    /// `None` when `limit` (unless 0) are in flight already.
    fn enter(state: &'a State, limit: usize) -> Option<Self> {
        let admitted = state
            .in_flight
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (limit == 0 || n < limit).then_some(n + 1)
            });
        let now = admitted.ok()? + 1;
        state.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Some(InFlight(state, std::sync::atomic::AtomicBool::new(false)))
    }

    fn leave(&self) {
        if !self.1.swap(true, Ordering::SeqCst) {
            self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.leave();
    }
}

/// The answer of `limit_in_flight` to a request over the limit: a 429 at once.
async fn too_many(mut wr: OwnedWriteHalf, raw: super::http::RawRequest, state: &State) {
    state.rejected.fetch_add(1, Ordering::SeqCst);
    state
        .log
        .lock()
        .unwrap()
        .push(RecordedRequest::from_raw(raw));
    let body = json!({"error": {"message": "mock: too many requests in flight", "type": "rate_limit_exceeded"}})
        .to_string();
    let extra: Vec<(String, String)> = (state.retry_after.lock().unwrap().clone())
        .map(|v| ("retry-after".to_string(), v))
        .into_iter()
        .collect();
    let head = response_head(429, "application/json", Some(body.len()), &extra);
    let _ = wr.write_all(head.as_bytes()).await;
    let _ = wr.write_all(body.as_bytes()).await;
    let _ = wr.shutdown().await;
}

/// A loud failure for unscripted requests: tests should never hit this by accident.
fn no_match(state: &State, req: &RecordedRequest) -> Reply {
    state.unmatched.fetch_add(1, Ordering::SeqCst);
    let snippet: String = req.raw_body.chars().take(300).collect();
    eprintln!(
        "mock: no rule matched {} {} body: {snippet}",
        req.method, req.path
    );
    let body = json!({"error": {
        "message": format!("mock: no rule matched {} {}", req.method, req.path),
        "type": "mock_no_rule",
    }});
    Reply::status(500).body(body.to_string())
}

/// Resolves when the client closes its side (or the socket errors). Any extra bytes are
/// ignored: with `Connection: close` there is no second request to read. (A client that
/// half-closes after sending its request would be taken as gone; HTTP clients don't.)
async fn client_gone(rd: &mut OwnedReadHalf) {
    let mut buf = [0u8; 1024];
    while let Ok(n) = rd.read(&mut buf).await {
        if n == 0 {
            return;
        }
    }
}

async fn respond(
    mut wr: OwnedWriteHalf,
    reply: &Reply,
    ctx: &StreamCtx,
    busy: &InFlight<'_>,
) -> io::Result<()> {
    if let Some(gate) = &reply.gate {
        gate.wait().await;
    }
    if !reply.delay.is_zero() {
        sleep(reply.delay).await;
    }
    if let Body::Status {
        code,
        body,
        content_type,
    } = &reply.body
    {
        let head = response_head(*code, content_type, Some(body.len()), &reply.headers);
        busy.leave();
        wr.write_all(head.as_bytes()).await?;
        wr.write_all(body.as_bytes()).await?;
        return wr.shutdown().await;
    }
    stream_sse(wr, reply, &chunks(reply, ctx), busy).await
}

async fn stream_sse(
    mut wr: OwnedWriteHalf,
    reply: &Reply,
    chunks: &[String],
    busy: &InFlight<'_>,
) -> io::Result<()> {
    let head = response_head(200, "text/event-stream", None, &reply.headers);
    // Headers go out on their own so a reply cut at chunk 0 still reaches the client as a
    // started stream.
    wr.write_all(head.as_bytes()).await?;
    wr.flush().await?;
    for i in 0..=chunks.len() {
        if i == 0 && !reply.body_delay.is_zero() {
            sleep(reply.body_delay).await;
        }
        if i > 0 && !reply.chunk_delay.is_zero() {
            sleep(reply.chunk_delay).await;
        }
        if let Some(cut) = reply.cut.filter(|c| c.after() == i) {
            return apply_cut(wr, cut).await;
        }
        let Some(chunk) = chunks.get(i) else { break };
        if i + 1 == chunks.len() && reply.cut.is_none() {
            busy.leave();
        }
        wr.write_all(chunk.as_bytes()).await?;
        wr.flush().await?;
    }
    // A cut scheduled past the end behaves like the end: the stream is already complete,
    // except that a stall still holds the socket open.
    if let Some(Cut::Stall(_)) = reply.cut.filter(|c| c.after() > chunks.len()) {
        std::future::pending::<()>().await;
    }
    wr.shutdown().await
}

async fn apply_cut(mut wr: OwnedWriteHalf, cut: Cut) -> io::Result<()> {
    match cut {
        Cut::Disconnect(_) => wr.shutdown().await,
        Cut::Reset(_) => {
            // Zero linger turns the close into an RST. `forget` skips the FIN the write half
            // would send on drop; the socket closes when the read half drops right after.
            wr.as_ref().set_zero_linger()?;
            wr.forget();
            Ok(())
        }
        // Silent until the client hangs up; `client_gone` wins the race in `serve`.
        Cut::Stall(_) => std::future::pending().await,
    }
}
