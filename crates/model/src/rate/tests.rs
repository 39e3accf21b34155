//! The limiter on tokio's paused clock: spacing, the tokens window and the 429 controller.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::retry::{with_retries, RetryPolicy};

fn limits(rpm: Option<u64>, tpm: Option<u64>) -> RateLimit {
    RateLimit {
        requests_per_minute: rpm,
        tokens_per_minute: tpm,
    }
}

fn too_many(retry_after: Option<f64>) -> ModelError {
    ModelError::Http {
        provider: "openai".into(),
        status: 429,
        message: "slow down".into(),
        retry_after,
    }
}

#[tokio::test(start_paused = true)]
async fn requests_are_spaced_evenly_not_in_bursts() {
    let limiter = Limiter::new(limits(Some(600), None), 64);
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let l = limiter.clone();
        tasks.push(tokio::spawn(async move {
            let pass = l.admit(0).await;
            let at = Instant::now();
            pass.finish(Outcome::Success(None));
            at
        }));
    }
    let mut starts = Vec::new();
    for t in tasks {
        starts.push(t.await.unwrap());
    }
    starts.sort();
    assert_eq!(starts[0], t0, "the first call waits for nothing");
    for w in starts.windows(2) {
        assert_eq!(w[1] - w[0], Duration::from_millis(100), "{starts:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn tokens_of_the_last_minute_hold_back_the_next_call() {
    let limiter = Limiter::new(limits(None, Some(1000)), 64);
    let t0 = Instant::now();
    limiter.admit(600).await.finish(Outcome::Success(Some(700)));
    tokio::time::advance(Duration::from_secs(10)).await;
    // 700 + 400 > 1000: it waits until the first call's usage is a minute old.
    limiter.admit(400).await.finish(Outcome::Success(Some(300)));
    assert_eq!(Instant::now() - t0, Duration::from_secs(60));
    // 300 + 600 fits.
    let pass = limiter.admit(600).await;
    assert_eq!(Instant::now() - t0, Duration::from_secs(60));
    // In flight, its estimate counts: a call larger than the budget waits for an empty
    // window, then goes.
    let started = Instant::now();
    let waiter = {
        let l = limiter.clone();
        tokio::spawn(async move {
            let p = l.admit(5000).await;
            let at = Instant::now();
            p.finish(Outcome::Success(Some(5000)));
            at
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    pass.finish(Outcome::Success(Some(600)));
    let at = waiter.await.unwrap();
    // Empty once both settled calls are a minute old (the 600 settled one second in).
    assert_eq!(at - started, Duration::from_secs(61));
}

#[tokio::test(start_paused = true)]
async fn a_429_halves_the_requests_in_flight_once_per_storm_and_pauses_every_call() {
    let limiter = Limiter::new(limits(None, None), 9);
    let mut passes = Vec::new();
    for _ in 0..8 {
        passes.push(limiter.admit(0).await);
    }
    let first = passes.pop().unwrap();
    assert_eq!(
        first.finish(Outcome::RateLimited(Duration::from_secs(2))),
        Some(4)
    );
    // The others of the same storm do not halve again.
    let second = passes.pop().unwrap();
    assert_eq!(
        second.finish(Outcome::RateLimited(Duration::from_secs(1))),
        None
    );
    assert_eq!(limiter.limit(), 4);
    // 6 in flight, limit 4: wait for the pause and two free slots.
    let t0 = Instant::now();
    let waiter = {
        let l = limiter.clone();
        tokio::spawn(async move { l.admit(0).await })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!waiter.is_finished(), "the limit is full");
    passes.pop().unwrap().finish(Outcome::Success(None));
    passes.pop().unwrap().finish(Outcome::Success(None));
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(!waiter.is_finished(), "4 in flight, limit 4");
    passes.pop().unwrap().finish(Outcome::Success(None));
    let admitted = waiter.await.unwrap();
    assert!(Instant::now() - t0 >= Duration::from_secs(2));
    // A 429 of an attempt admitted after the halving halves again.
    assert_eq!(
        admitted.finish(Outcome::RateLimited(Duration::ZERO)),
        Some(2)
    );
}

#[tokio::test(start_paused = true)]
async fn ten_successes_in_a_row_give_one_slot_back_up_to_the_start() {
    let limiter = Limiter::new(limits(None, None), 3);
    let p = limiter.admit(0).await;
    assert_eq!(p.finish(Outcome::RateLimited(Duration::ZERO)), Some(1));
    for i in 1..=30 {
        limiter.admit(0).await.finish(Outcome::Success(None));
        if i == 9 {
            assert_eq!(limiter.limit(), 1);
        }
        if i == 10 {
            assert_eq!(limiter.limit(), 2);
        }
    }
    assert_eq!(limiter.limit(), 3, "never above the number it started with");
    // A 429 breaks the row.
    for _ in 0..9 {
        limiter.admit(0).await.finish(Outcome::Success(None));
    }
    let p = limiter.admit(0).await;
    assert_eq!(p.finish(Outcome::RateLimited(Duration::ZERO)), Some(1));
    limiter.admit(0).await.finish(Outcome::Success(None));
    assert_eq!(limiter.limit(), 1);
}

/// A provider whose retry loop meets 429s: the first is the limiter's to take on, the next
/// ones (at one request in flight) count as retries.
struct Throttled {
    attempts: AtomicU32,
    max_retries: u32,
}

impl ChatModel for Throttled {
    fn complete<'a>(
        &'a self,
        _req: &'a ChatRequest,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let policy = RetryPolicy {
                base_delay: Duration::from_millis(1),
                ..RetryPolicy::new(self.max_retries)
            };
            with_retries(&policy, ctx, || async {
                self.attempts.fetch_add(1, Ordering::SeqCst);
                Err::<ModelResponse, _>(too_many(Some(1.0)))
            })
            .await
        })
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        system: "s".into(),
        messages: Arc::new(vec![Message::User("hello there".into())]),
        tools: Arc::new([]),
        tool_choice_none: false,
        agent: crate::AgentId::Lead,
        turn: 0,
        output_schema: None,
        purpose: Default::default(),
        lineage: None,
    }
}

#[tokio::test(start_paused = true)]
async fn the_wrapper_reports_the_halving_and_absorbs_that_429() {
    let inner = Arc::new(Throttled {
        attempts: AtomicU32::new(0),
        max_retries: 1,
    });
    let model = RateLimited::wrap(inner.clone(), "gpt", limits(None, None), 4);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let mut ctx = CallContext::new(CancellationToken::new());
    ctx.on_rate_limited = Arc::new(move |n| sink.lock().unwrap().push(n));
    let t0 = Instant::now();
    let result = model.complete(&request(), &ctx).await;
    assert!(matches!(result, Err(ModelError::Http { status: 429, .. })));
    // 1 absorbed (the limit was 4) + 1 charged retry (at limit 1) + the first attempt.
    assert_eq!(inner.attempts.load(Ordering::SeqCst), 3);
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[0],
        RateNotice {
            model: "gpt".into(),
            concurrency: 1,
            pause_ms: 1000
        }
    );
    // Each retry waited for the Retry-After pause.
    assert!(Instant::now() - t0 >= Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn waiting_for_the_limiter_ends_with_the_call_s_cancellation() {
    let inner = Arc::new(Throttled {
        attempts: AtomicU32::new(0),
        max_retries: 0,
    });
    let model = RateLimited::wrap(inner.clone(), "gpt", limits(Some(1), None), 4);
    let ctx = CallContext::new(CancellationToken::new());
    let _ = model.complete(&request(), &ctx).await;
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        cancel.cancel();
    });
    let t0 = Instant::now();
    // The next request may go only a minute after the first.
    let result = model.complete(&request(), &ctx).await;
    assert_eq!(result, Err(ModelError::Cancelled));
    assert_eq!(Instant::now() - t0, Duration::from_secs(5));
    assert_eq!(inner.attempts.load(Ordering::SeqCst), 1);
}

#[test]
fn a_request_s_size_is_estimated_from_its_text() {
    assert_eq!(estimate_tokens(&request()), 3); // "s" + "hello there" = 12 bytes
}
