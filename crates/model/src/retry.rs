//! The one retry loop both HTTP providers use: retryable errors (408/409/429/5xx,
//! connection failures) are retried with exponential backoff and jitter, or after the
//! server's `Retry-After`; every retry is announced through `CallContext::on_retry`.
//! Cancellation wins at any point, including during the sleeps.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{CallContext, ModelError, RetryNotice};

/// How a provider retries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so `max_retries + 1` attempts at most).
    pub max_retries: u32,
    /// Nominal delay before the first retry; doubled for each further one.
    pub base_delay: Duration,
    /// Upper bound of one backoff delay, so large `max_retries` values stay sane.
    pub max_backoff: Duration,
    /// Upper bound of a server-requested `Retry-After`.
    pub max_retry_after: Duration,
}

impl RetryPolicy {
    pub fn new(max_retries: u32) -> Self {
        Self {
            max_retries,
            base_delay: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
        }
    }

    /// The nominal (jitter-free) backoff before retry number `retry` (1-based).
    pub fn nominal_backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.saturating_sub(1).min(20));
        self.base_delay.saturating_mul(factor).min(self.max_backoff)
    }

    /// The delay before retry number `retry` (1-based) after `err`. `jitter` is a number in
    /// `[0, 1)`; it spreads the backoff over ±25 % of its nominal value so that clients that
    /// failed together do not come back together, while 3 retries stay under 4.5 s in total.
    pub fn delay(&self, retry: u32, err: &ModelError, jitter: f64) -> Duration {
        if let ModelError::Http {
            retry_after: Some(secs),
            ..
        } = err
        {
            if secs.is_finite() && *secs >= 0.0 {
                // Capped as seconds first: a huge header value (1e20, 2^64) is no Duration.
                return Duration::from_secs_f64(secs.min(self.max_retry_after.as_secs_f64()));
            }
        }
        let nominal = self.nominal_backoff(retry);
        nominal.mul_f64(0.75 + 0.5 * jitter.clamp(0.0, 1.0))
    }
}

/// Runs `attempt` until it succeeds, fails for good, or retries run out.
///
/// Each attempt races the cancellation token: a cancelled call drops the attempt's future
/// (and with it the HTTP request) and returns `ModelError::Cancelled` at once.
pub async fn with_retries<T, F, Fut>(
    policy: &RetryPolicy,
    ctx: &CallContext,
    mut attempt: F,
) -> Result<T, ModelError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ModelError>>,
{
    let mut retry = 0u32;
    // Retries counted against `max_retries`; 429s the rate limiter took on itself are not
    // (it halved the model's concurrency: waiting for a slot is not the server failing).
    let (mut charged, mut absorbed) = (0u32, 0u32);
    loop {
        if ctx.cancel.is_cancelled() {
            return Err(ModelError::Cancelled);
        }
        if let Some(gate) = &ctx.gate {
            tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => return Err(ModelError::Cancelled),
                _ = gate.admit() => {}
            }
        }
        let result = tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => return Err(ModelError::Cancelled),
            r = attempt() => r,
        };
        let err = match result {
            Ok(value) => return Ok(value),
            Err(err) => err,
        };
        let delay = policy.delay(retry + 1, &err, fastrand::f64());
        let took_on = ctx.gate.as_ref().is_some_and(|g| g.failed(&err, delay));
        let free = took_on && policy.max_retries > 0 && absorbed < MAX_ABSORBED;
        if !err.is_retryable() || (!free && charged >= policy.max_retries) {
            let why = if err.is_retryable() {
                "retries exhausted"
            } else {
                "not retryable"
            };
            tracing::debug!(retries = retry, decision = why, "model attempt failed");
            return Err(err);
        }
        if free {
            absorbed += 1;
        } else {
            charged += 1;
        }
        retry += 1;
        tracing::debug!(
            retry,
            delay_ms = delay.as_millis() as u64,
            decision = "retry",
            "model attempt failed"
        );
        (ctx.on_retry)(notice(retry, delay, &err));
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => return Err(ModelError::Cancelled),
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// How many 429s of one call the rate limiter may take on before they count as retries:
/// enough to halve 65 slots down to 1 and back off once more, and still a bound.
const MAX_ABSORBED: u32 = 8;

fn notice(retry: u32, delay: Duration, err: &ModelError) -> RetryNotice {
    let status = match err {
        ModelError::Http { status, .. } => Some(*status),
        _ => None,
    };
    RetryNotice {
        attempt: retry,
        delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        status,
        message: err.to_string(),
    }
}

/// Parses a `Retry-After` header: delay-seconds (integers, and floats some servers send) or
/// an HTTP-date (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`), relative to `now`.
/// A date in the past means "now" (0 s). Anything else is ignored (`None`).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<f64> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then_some(secs);
    }
    let at = parse_http_date(value)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs_f64();
    Some((at as f64 - now).max(0.0))
}

/// IMF-fixdate → seconds since the Unix epoch. Written by hand to avoid a dependency for
/// one header; the obsolete RFC 850 / asctime formats are not supported.
fn parse_http_date(value: &str) -> Option<i64> {
    // "Sun, 06 Nov 1994 08:49:37 GMT"
    let (_, rest) = value.split_once(", ")?;
    let parts: Vec<&str> = rest.split_whitespace().collect();
    let [day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let day: u32 = day.parse().ok()?;
    let month = month_number(month)?;
    // Years outside 0..=9999 are no HTTP date (and would overflow the arithmetic below).
    let year: i64 = year.parse().ok().filter(|y| (0..=9999).contains(y))?;
    let hms: Vec<u32> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    if !(1..=31).contains(&day) || *h > 23 || *m > 59 || *s > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + i64::from(*h) * 3600 + i64::from(*m) * 60 + i64::from(*s))
}

fn month_number(name: &str) -> Option<u32> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    MONTHS.iter().position(|m| *m == name).map(|i| i as u32 + 1)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{Arc, Mutex};
    use tokio_util::sync::CancellationToken;

    fn http(status: u16, retry_after: Option<f64>) -> ModelError {
        ModelError::Http {
            provider: "openai".into(),
            status,
            message: "x".into(),
            retry_after,
        }
    }

    #[test]
    fn backoff_doubles_from_half_a_second() {
        let p = RetryPolicy::new(3);
        assert_eq!(p.nominal_backoff(1), Duration::from_millis(500));
        assert_eq!(p.nominal_backoff(2), Duration::from_millis(1000));
        assert_eq!(p.nominal_backoff(3), Duration::from_millis(2000));
        assert_eq!(p.nominal_backoff(30), Duration::from_secs(30));
    }

    #[test]
    fn jitter_stays_within_bounds_and_three_retries_fit_in_budget() {
        let p = RetryPolicy::new(3);
        let err = http(500, None);
        for retry in 1..=3 {
            let nominal = p.nominal_backoff(retry);
            assert_eq!(p.delay(retry, &err, 0.0), nominal.mul_f64(0.75));
            assert!(p.delay(retry, &err, 0.999_999) <= nominal.mul_f64(1.25));
        }
        let worst: Duration = (1..=3).map(|r| p.delay(r, &err, 0.999_999)).sum();
        assert!(worst <= Duration::from_millis(4500), "{worst:?}");
    }

    #[test]
    fn retry_after_replaces_backoff_and_is_capped() {
        let p = RetryPolicy::new(3);
        assert_eq!(
            p.delay(1, &http(429, Some(1.0)), 0.5),
            Duration::from_secs(1)
        );
        assert_eq!(p.delay(2, &http(429, Some(0.0)), 0.5), Duration::ZERO);
        assert_eq!(
            p.delay(1, &http(429, Some(3600.0)), 0.5),
            Duration::from_secs(60)
        );
        assert_eq!(
            p.delay(1, &http(503, Some(f64::NAN)), 0.0),
            Duration::from_millis(375)
        );
        // Values no Duration can hold are capped, not a panic.
        for huge in [1e20, 18_446_744_073_709_551_616.0, f64::MAX] {
            assert_eq!(
                p.delay(1, &http(429, Some(huge)), 0.5),
                Duration::from_secs(60)
            );
        }
    }

    #[test]
    fn parses_retry_after_seconds_and_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(parse_retry_after("7", now), Some(7.0));
        assert_eq!(parse_retry_after(" 1.5 ", now), Some(1.5));
        assert_eq!(parse_retry_after("-3", now), None);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now),
            Some(30.0)
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(0.0)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 99999999999999999 08:00:00 GMT", now),
            None
        );
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_http_date("Tue, 29 Feb 2000 12:00:00 GMT"),
            Some(951_825_600)
        );
    }

    #[test]
    fn only_retryable_errors_are_retried() {
        assert!(http(408, None).is_retryable());
        assert!(http(429, None).is_retryable());
        assert!(http(502, None).is_retryable());
        assert!(!http(400, None).is_retryable());
        assert!(!http(401, None).is_retryable());
        assert!(ModelError::Connect {
            provider: "openai".into(),
            message: "refused".into()
        }
        .is_retryable());
    }

    /// Real time, tiny delays: tokio's paused clock needs the `test-util` feature.
    fn fast(max_retries: u32) -> RetryPolicy {
        RetryPolicy {
            base_delay: Duration::from_millis(2),
            ..RetryPolicy::new(max_retries)
        }
    }

    fn recording_ctx() -> (CallContext, Arc<Mutex<Vec<RetryNotice>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let mut ctx = CallContext::new(CancellationToken::new());
        ctx.on_retry = Arc::new(move |n| sink.lock().unwrap().push(n));
        (ctx, seen)
    }

    #[tokio::test]
    async fn retries_until_success_and_reports_each_retry() {
        let (ctx, seen) = recording_ctx();
        let calls = AtomicU32::new(0);
        let result = with_retries(&fast(3), &ctx, || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 => Err(http(503, None)),
                1 => Err(ModelError::Connect {
                    provider: "openai".into(),
                    message: "reset".into(),
                }),
                _ => Ok(42),
            }
        })
        .await;
        assert_eq!(result, Ok(42));
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!((seen[0].attempt, seen[0].status), (1, Some(503)));
        assert!(seen[0].delay_ms <= 3);
        assert_eq!((seen[1].attempt, seen[1].status), (2, None));
        assert!(seen[1].message.contains("reset"));
    }

    #[tokio::test]
    async fn gives_up_after_max_retries_and_not_on_client_errors() {
        let (ctx, seen) = recording_ctx();
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = with_retries(&fast(3), &ctx, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(http(500, None))
        })
        .await;
        assert!(matches!(result, Err(ModelError::Http { status: 500, .. })));
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        assert_eq!(seen.lock().unwrap().len(), 3);

        let calls = AtomicU32::new(0);
        let result: Result<(), _> = with_retries(&RetryPolicy::new(3), &ctx, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(http(400, None))
        })
        .await;
        assert!(matches!(result, Err(ModelError::Http { status: 400, .. })));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn cancellation_interrupts_a_retry_sleep() {
        let (ctx, _) = recording_ctx();
        let cancel = ctx.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            cancel.cancel();
        });
        let start = std::time::Instant::now();
        let result: Result<(), _> = with_retries(&RetryPolicy::new(3), &ctx, || async {
            Err(http(429, Some(60.0)))
        })
        .await;
        assert_eq!(result, Err(ModelError::Cancelled));
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn cancellation_drops_a_running_attempt() {
        let (ctx, _) = recording_ctx();
        let cancel = ctx.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            cancel.cancel();
        });
        let result: Result<(), _> =
            with_retries(&RetryPolicy::new(3), &ctx, std::future::pending).await;
        assert_eq!(result, Err(ModelError::Cancelled));
        // Already cancelled: no attempt starts at all.
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = with_retries(&RetryPolicy::new(3), &ctx, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .await;
        assert_eq!(result, Err(ModelError::Cancelled));
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }
}
