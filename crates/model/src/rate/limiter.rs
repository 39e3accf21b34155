//! One model's limiter, shared by every agent of a run: requests and tokens per minute, and
//! the number of requests in flight, halved on a 429 and given back slot by slot (§15).
//!
//! Attempts are admitted one at a time in arrival order (a fair async mutex), so spacing is
//! even and no waiter is passed over by a later one.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use deerflow_config::RateLimit;

/// Successes in a row that give one slot back.
pub const REGROW_AFTER: u32 = 10;
/// How long reported usage counts against `tokens_per_minute`.
const WINDOW: Duration = Duration::from_secs(60);

pub struct Limiter {
    /// Held by the one attempt being admitted; the others queue behind it in order.
    turn: tokio::sync::Mutex<()>,
    state: Mutex<State>,
    /// A slot freed, usage settled, or the limit changed.
    changed: Notify,
    interval: Option<Duration>,
    tokens_per_minute: Option<u64>,
}

struct State {
    /// Requests allowed in flight now, and the number it started with.
    limit: u32,
    start: u32,
    in_flight: u32,
    /// Bumped at each halving: the 429s of attempts admitted before it are the same storm.
    epoch: u64,
    streak: u32,
    pause_until: Option<Instant>,
    next_start: Option<Instant>,
    /// Estimates of the calls in flight, and reported usage of the last minute.
    reserved: u64,
    settled: VecDeque<(Instant, u64)>,
    settled_sum: u64,
}

/// One admitted attempt; dropping it frees its slot.
pub struct Pass {
    limiter: Arc<Limiter>,
    epoch: u64,
    /// The limit when it was admitted: a 429 at 1 is the server's, not the run's doing.
    limit_at: u32,
    estimate: u64,
    done: bool,
}

/// How an attempt ended, for the limiter.
pub enum Outcome {
    /// Usage reported (or estimated) for the tokens window.
    Success(Option<u64>),
    /// HTTP 429; every call waits this long.
    RateLimited(Duration),
    Other,
}

impl Limiter {
    /// `start`: the requests in flight allowed at first and at most (`--max-concurrent`
    /// plus the lead).
    pub fn new(limits: RateLimit, start: u32) -> Arc<Self> {
        let start = start.max(1);
        Arc::new(Self {
            turn: tokio::sync::Mutex::new(()),
            state: Mutex::new(State {
                limit: start,
                start,
                in_flight: 0,
                epoch: 0,
                streak: 0,
                pause_until: None,
                next_start: None,
                reserved: 0,
                settled: VecDeque::new(),
                settled_sum: 0,
            }),
            changed: Notify::new(),
            interval: limits
                .requests_per_minute
                .filter(|r| *r > 0)
                .map(|r| Duration::from_secs(60).div_f64(r as f64)),
            tokens_per_minute: limits.tokens_per_minute.filter(|t| *t > 0),
        })
    }

    pub fn counts_tokens(&self) -> bool {
        self.tokens_per_minute.is_some()
    }

    /// The requests allowed in flight now.
    pub fn limit(&self) -> u32 {
        self.lock().limit
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent between statements: a panic elsewhere cannot leave
        // it half-written, so a poisoned lock is still good.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until an attempt of about `estimate` tokens may start. Cancel by dropping.
    pub async fn admit(self: &Arc<Self>, estimate: u64) -> Pass {
        let _turn = self.turn.lock().await;
        loop {
            let changed = self.changed.notified();
            let wake = match self.try_take(Instant::now(), estimate) {
                Ok(pass) => return pass,
                Err(wake) => wake,
            };
            match wake {
                Some(at) => tokio::select! {
                    _ = changed => {}
                    _ = tokio::time::sleep_until(at) => {}
                },
                None => changed.await,
            }
        }
    }

    /// A pass now, or when to look again (`None`: when something changes).
    fn try_take(self: &Arc<Self>, now: Instant, estimate: u64) -> Result<Pass, Option<Instant>> {
        let mut s = self.lock();
        if let Some(until) = s.pause_until.filter(|u| *u > now) {
            return Err(Some(until));
        }
        if s.in_flight >= s.limit {
            return Err(None);
        }
        if let Some(at) = s.next_start.filter(|a| *a > now) {
            return Err(Some(at));
        }
        let estimate = if let Some(tpm) = self.tokens_per_minute {
            s.expire(now);
            let used = s.settled_sum.saturating_add(s.reserved);
            // A call larger than the whole budget goes once the window is empty.
            if used > 0 && used.saturating_add(estimate) > tpm {
                return Err(s.settled.front().map(|(at, _)| *at + WINDOW));
            }
            estimate
        } else {
            0
        };
        s.in_flight += 1;
        s.reserved += estimate;
        s.next_start = self.interval.map(|i| now + i);
        Ok(Pass {
            limiter: self.clone(),
            epoch: s.epoch,
            limit_at: s.limit,
            estimate,
            done: false,
        })
    }
}

impl State {
    fn expire(&mut self, now: Instant) {
        while let Some((at, tokens)) = self.settled.front().copied() {
            if at + WINDOW > now {
                break;
            }
            self.settled.pop_front();
            self.settled_sum -= tokens;
        }
    }
}

impl Pass {
    /// Ends the attempt. Returns the new limit when this 429 halved it.
    pub fn finish(mut self, outcome: Outcome) -> Option<u32> {
        self.done = true;
        let limiter = self.limiter.clone();
        let halved = {
            let mut s = limiter.lock();
            let in_flight = s.in_flight;
            s.in_flight = in_flight.saturating_sub(1);
            s.reserved = s.reserved.saturating_sub(self.estimate);
            match outcome {
                Outcome::Success(tokens) => {
                    if limiter.counts_tokens() {
                        let tokens = tokens.unwrap_or(self.estimate);
                        s.settled.push_back((Instant::now(), tokens));
                        s.settled_sum += tokens;
                    }
                    s.streak += 1;
                    if s.streak >= REGROW_AFTER {
                        s.streak = 0;
                        s.limit = (s.limit + 1).min(s.start);
                    }
                    None
                }
                Outcome::RateLimited(pause) => {
                    let until = Instant::now() + pause;
                    s.pause_until = Some(s.pause_until.map_or(until, |u| u.max(until)));
                    s.streak = 0;
                    (self.epoch == s.epoch).then(|| {
                        s.limit = (s.limit.min(in_flight) / 2).max(1);
                        s.epoch += 1;
                        s.limit
                    })
                }
                Outcome::Other => None,
            }
        };
        limiter.changed.notify_one();
        halved
    }

    /// Whether the limiter can still back off for a 429 of this attempt (it was admitted
    /// while more than one request was allowed in flight).
    pub fn could_back_off(&self) -> bool {
        self.limit_at > 1
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        if !self.done {
            let mut s = self.limiter.lock();
            s.in_flight = s.in_flight.saturating_sub(1);
            s.reserved = s.reserved.saturating_sub(self.estimate);
            drop(s);
            self.limiter.changed.notify_one();
        }
    }
}
