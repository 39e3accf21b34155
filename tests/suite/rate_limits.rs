//! Rate limits (contract §15) against the mock server: `requests_per_minute` spacing seen
//! in the server's request times, the 429 controller against a server that allows a fixed
//! number of requests in flight, and the `rate_limit` config keys.

use std::path::Path;
use std::time::Duration;

use super::harness::{check_stream, deerflow, workspace, Output};
use super::openai_http::config;
use crate::support::{MockServer, Reply, Rule};

fn items(dir: &Path, n: usize) -> String {
    let text: String = (0..n).map(|i| format!("item {i}\n")).collect();
    let path = dir.join("items.txt");
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

async fn each(cfg: &Path, ws: &Path, items: &str, concurrent: &str) -> Output {
    deerflow([
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-C",
        ws.to_str().unwrap(),
        "--max-concurrent",
        concurrent,
        "--each",
        items,
        "Do {{item}}",
    ])
    .json()
    .await
}

fn rate_limited(out: &Output) -> Vec<u64> {
    out.of_type("warning")
        .into_iter()
        .filter(|w| w["code"] == "rate_limited")
        .map(|w| {
            assert_eq!(w["model"], "mock", "{w}");
            w["concurrency"].as_u64().unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_per_minute_spaces_every_agent_s_calls_evenly() {
    let server = MockServer::start().await;
    server.push(Rule::any().always().reply(Reply::text("ok").usage(5, 1)));
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "openai",
        &server.url(),
        ", rate_limit: {requests_per_minute: 600}",
    );
    let list = items(ws.path(), 6);
    // Six items at once: without the limit they would reach the server together.
    let out = each(&cfg, ws.path(), &list, "6").await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    check_stream(&out);
    let mut at: Vec<_> = server.requests().iter().map(|r| r.at).collect();
    assert_eq!(at.len(), 6);
    at.sort();
    // 600 per minute: 100 ms apart as they leave deerflow. The server reads them later by
    // a delay a loaded machine stretches (one read 30 ms late shortens the next gap by as
    // much), so a gap is held to half that; a burst would show gaps of about 0. Over the
    // five gaps the jitter cannot add up: the span is held to the full 500 ms, less a little.
    for w in at.windows(2) {
        let gap = w[1] - w[0];
        assert!(gap >= Duration::from_millis(50), "{gap:?} in {at:?}");
    }
    assert!(at[5] - at[0] >= Duration::from_millis(470), "{at:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_429_halves_the_requests_in_flight_and_successes_give_slots_back() {
    let server = MockServer::start().await;
    server.push(
        Rule::any()
            .always()
            .reply(Reply::text("ok").usage(5, 1).delay_ms(40)),
    );
    server.limit_in_flight(2, Some("0"));
    let ws = workspace();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let list = items(ws.path(), 60);
    // 7 slots at first (6 sub-agents plus the lead); the server takes 2.
    let out = each(&cfg, ws.path(), &list, "6").await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    check_stream(&out);
    assert_eq!(out.completed()["tasks"]["completed"], 60);
    assert!(server.max_in_flight() <= 2);
    let halvings = rate_limited(&out);
    // The first 429 meets (about) 6 requests in flight: 3; the next storm halves to 1.
    assert!((2..=3).contains(&halvings[0]), "{halvings:?}");
    assert!(halvings[1..].iter().all(|c| *c == 1), "{halvings:?}");
    // A 429 at 1 or 2 in flight cannot happen (the server takes 2): each later one comes
    // from slots given back by 10 successes in a row, from 1 to 3.
    assert!(halvings.len() >= 3, "no regrowth: {halvings:?}");
    // Settled near the limit instead of a storm: one 429 per probe, not per item.
    let rejected = server.rejected_count();
    assert!(rejected <= 6 + halvings.len() * 2, "{rejected} 429s");
    // The 429s the limiter took on are not failed retries: every item completed above,
    // and no item needed more than the limiter's own retries.
    assert_eq!(server.request_count(), 60 + rejected);
}

#[tokio::test(flavor = "multi_thread")]
async fn rate_limit_keys_are_validated_named_and_shown() {
    let ws = workspace();
    let cfg = config(
        ws.path(),
        "openai",
        "http://127.0.0.1:9/v1",
        ", rate_limit: {requests_per_minute: 0, tokens_per_minute: 1000}",
    );
    let out = deerflow(["-c", cfg.to_str().unwrap(), "config", "check"])
        .text()
        .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("models[0].rate_limit.requests_per_minute"),
        "{}",
        out.stderr
    );

    let cfg = config(
        ws.path(),
        "openai",
        "http://127.0.0.1:9/v1",
        ", rate_limit: {requests_per_minute: 60, tokens_per_minte: 5}",
    );
    let out = deerflow(["-c", cfg.to_str().unwrap(), "config", "show", "--json"])
        .text()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("models[0].rate_limit.tokens_per_minte"),
        "{}",
        out.stderr
    );
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["models"][0]["rate_limit"]["requests_per_minute"], 60);
}
