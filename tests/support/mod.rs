//! A scripted mock LLM server for integration tests.
//!
//! Hand-rolled HTTP/1.1 on a `TcpListener` (one request per connection, `Connection: close`,
//! except in `close_reused_connections` mode) so tests control chunk timing, gates, stalls
//! and disconnects exactly. It speaks OpenAI Chat Completions SSE, Anthropic Messages SSE
//! and Gemini `streamGenerateContent` SSE; the scripted `Reply` decides which. An OpenAI
//! reply to a request for a `/responses` path speaks the OpenAI Responses API
//! (`responses.rs`).
//!
//! ```ignore
//! let server = MockServer::start().await;
//! server.push(Rule::any().reply(Reply::text("hello").usage(10, 5)));
//! // point the openai provider at server.url(), the anthropic one at server.anthropic_url()
//! ```
#![allow(dead_code)]

mod conn;
mod gate;
mod gemini;
mod http;
mod keep_alive;
mod responses;
mod script;
mod sse;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

pub use gate::Gate;
pub use script::{Reply, Rule};

/// A request as the server saw it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Lowercased names, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON, or `Value::Null` when it is not JSON.
    pub body: Value,
    pub raw_body: String,
    /// When the request had been fully read.
    pub at: Instant,
}

impl RecordedRequest {
    fn from_raw(raw: http::RawRequest) -> Self {
        let raw_body = String::from_utf8_lossy(&raw.body).into_owned();
        RecordedRequest {
            method: raw.method,
            path: raw.path,
            headers: raw.headers,
            body: serde_json::from_str(&raw_body).unwrap_or(Value::Null),
            raw_body,
            at: Instant::now(),
        }
    }

    /// The first value of a header (name matched case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Shared between the handle the test holds and the connection tasks.
pub(crate) struct State {
    rules: Mutex<Vec<Rule>>,
    log: Mutex<Vec<RecordedRequest>>,
    seq: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    unmatched: AtomicUsize,
    /// `close_reused_connections` mode.
    close_reused: AtomicBool,
    /// Requests read on a reused connection and answered by closing it.
    closed_unanswered: AtomicUsize,
    /// `limit_in_flight` mode: more requests than this at once get a 429 (0: no limit).
    in_flight_limit: AtomicUsize,
    /// The `Retry-After` those 429s carry.
    retry_after: Mutex<Option<String>>,
    /// Requests answered 429 by `limit_in_flight`.
    rejected: AtomicUsize,
}

impl State {
    /// The first rule, in push order, that has uses left and accepts `req`; uses it once.
    fn pick(&self, req: &RecordedRequest) -> Option<Reply> {
        let mut rules = self.rules.lock().unwrap();
        let rule = rules.iter_mut().find(|rule| rule.accepts(req))?;
        rule.consume();
        rule.reply.clone()
    }
}

/// The mock server. Dropping it stops accepting and aborts every open connection.
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<State>,
    accept: JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl MockServer {
    /// Binds 127.0.0.1 on a free port and starts serving.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("mock: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("mock: local_addr");
        let state = Arc::new(State {
            rules: Mutex::new(Vec::new()),
            log: Mutex::new(Vec::new()),
            seq: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            unmatched: AtomicUsize::new(0),
            close_reused: AtomicBool::new(false),
            closed_unanswered: AtomicUsize::new(0),
            in_flight_limit: AtomicUsize::new(0),
            retry_after: Mutex::new(None),
            rejected: AtomicUsize::new(0),
        });
        let accept = tokio::spawn(accept_loop(listener, state.clone()));
        MockServer {
            addr,
            state,
            accept,
        }
    }

    /// Base URL for the OpenAI-compatible provider: `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Base URL for the Anthropic provider: `http://127.0.0.1:PORT`.
    pub fn anthropic_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Base URL for the Gemini provider: `http://127.0.0.1:PORT` (it adds `/v1beta/…`).
    pub fn gemini_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Appends a rule; rules are tried in push order. Panics if the rule has no reply.
    pub fn push(&self, rule: Rule) {
        assert!(rule.reply.is_some(), "mock: Rule pushed without .reply(..)");
        self.state.rules.lock().unwrap().push(rule);
    }

    /// Shorthand for `push(Rule::any().reply(reply))`.
    pub fn push_reply(&self, reply: Reply) {
        self.push(Rule::any().reply(reply));
    }

    /// A new closed gate for `Reply::wait_for`.
    pub fn gate(&self) -> Gate {
        Gate::new()
    }

    /// Every request received so far, in arrival order (unmatched ones included).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.log.lock().unwrap().clone()
    }

    /// The most recent request, if any.
    pub fn last_request(&self) -> Option<RecordedRequest> {
        self.state.log.lock().unwrap().last().cloned()
    }

    /// How many requests have been received.
    pub fn request_count(&self) -> usize {
        self.state.log.lock().unwrap().len()
    }

    /// How many requests no rule matched (each got the "mock: no rule matched" 500).
    pub fn unmatched_count(&self) -> usize {
        self.state.unmatched.load(Ordering::SeqCst)
    }

    /// How many finite rules still have answers left (for "everything scripted was used").
    pub fn unused_rules(&self) -> usize {
        self.state
            .rules
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.is_unused())
            .count()
    }

    /// From now on, answers keep the connection open (`connection: keep-alive`), and a
    /// second request on a connection is recorded and answered by closing the connection:
    /// a client's pooled connection that the server closed while it sat idle, as llama.cpp
    /// does after every streamed answer. Timing faults (delays, cuts, gates) do not apply.
    pub fn close_reused_connections(&self) {
        self.state.close_reused.store(true, Ordering::SeqCst);
    }

    /// How many requests `close_reused_connections` answered by closing their connection.
    pub fn closed_unanswered(&self) -> usize {
        self.state.closed_unanswered.load(Ordering::SeqCst)
    }

    /// From now on, a request that arrives while `n` are being served is answered at once
    /// with a 429 (and `Retry-After: retry_after` when given) instead of its rule: a
    /// provider that allows `n` requests in flight. It is recorded like any request.
    pub fn limit_in_flight(&self, n: usize, retry_after: Option<&str>) {
        *self.state.retry_after.lock().unwrap() = retry_after.map(str::to_string);
        self.state.in_flight_limit.store(n, Ordering::SeqCst);
    }

    /// How many requests `limit_in_flight` answered with a 429.
    pub fn rejected_count(&self) -> usize {
        self.state.rejected.load(Ordering::SeqCst)
    }

    /// Requests being served right now.
    pub fn in_flight(&self) -> usize {
        self.state.in_flight.load(Ordering::SeqCst)
    }

    /// The highest number of requests served at the same time so far.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` requests have arrived; panics after 10 s so a hung test
    /// fails with a message instead of timing out silently.
    pub async fn wait_for_requests(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.request_count() < n {
            assert!(
                Instant::now() < deadline,
                "mock: waited 10s for {n} requests, got {}",
                self.request_count()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Connection tasks live in a JoinSet owned by this task, so aborting it (on drop) closes
/// every connection too, including stalled ones.
async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    conns.spawn(conn::serve(stream, state.clone()));
                }
                // Usually fd exhaustion under a burst: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            // Reap finished connections so the set does not grow for the whole test.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}
