//! Retrying a model call: capped, jittered exponential backoff that gives way to the
//! provider's `Retry-After`, all inside the step's deadline.
//!
//! The deadline bounds everything: an attempt gets at most the time left, and a wait that
//! would end past the deadline is not started (the step answers its `on_timeout` at once
//! instead of sleeping into a certain timeout).

use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, RETRY_AFTER};
use tokio::time::Instant;

/// OpenAI's header with the wait in milliseconds, more precise than `Retry-After`.
const RETRY_AFTER_MS: &str = "retry-after-ms";

/// How hard to try one model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub attempts: u32,
    /// The first backoff step; each failure doubles it.
    pub base: Duration,
    /// The longest backoff step.
    pub max: Duration,
    /// The longest wait a `Retry-After` may impose (beyond it, wait this long and try).
    pub max_retry_after: Duration,
    /// The longest a single attempt may take (less when the deadline is nearer).
    pub attempt_timeout: Duration,
}

impl Default for RetryPolicy {
    /// 4 attempts, backoff from 0.5 s up to 30 s, `Retry-After` honoured up to 60 s, 60 s per
    /// attempt.
    fn default() -> Self {
        RetryPolicy {
            attempts: 4,
            base: Duration::from_millis(500),
            max: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            attempt_timeout: Duration::from_secs(60),
        }
    }
}

/// What the retry loop needs to know about a failed attempt.
pub trait Retryable {
    /// Whether trying again may help.
    fn is_retryable(&self) -> bool;
    /// How long the provider asked us to wait, if it did.
    fn retry_after(&self) -> Option<Duration>;
}

/// Why a call gave no answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Exhausted<E> {
    /// The deadline came first: it passed during an attempt, or the next wait would end past it.
    Deadline {
        /// Attempts started.
        attempts: u32,
        /// The last attempt's error, when one failed.
        last: Option<E>,
    },
    /// The last attempt failed and no more are allowed (or it cannot be retried).
    Failed {
        /// Attempts made.
        attempts: u32,
        /// Its error.
        error: E,
    },
}

// === impl RetryPolicy ===

impl RetryPolicy {
    /// The wait after the failed attempt number `attempt` (from 1): the provider's
    /// `Retry-After` when given (capped by `max_retry_after`), otherwise a random delay in the
    /// upper half of `base * 2^(attempt-1)` capped at `max`, so a fleet of monitors that hit a
    /// rate limit together do not come back together.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(wait) = retry_after {
            return wait.min(self.max_retry_after);
        }
        let step = self.base.saturating_mul(1 << attempt.saturating_sub(1).min(20)).min(self.max);
        let half = step / 2;
        let random = RandomState::new().hash_one(attempt);
        let nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX).max(1);
        half + Duration::from_nanos(random % nanos)
    }

    /// Runs `attempt(timeout)` until it succeeds, fails for good, runs out of attempts, or
    /// `deadline` passes. `timeout` is the attempt's share: `attempt_timeout` or the time left.
    /// Gives the value and the number of attempts it took.
    pub async fn run<T, E, F, Fut>(&self, deadline: Option<Instant>, mut attempt: F) -> Result<(T, u32), Exhausted<E>>
    where
        E: Retryable,
        F: FnMut(Duration) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let mut last = None;
        for number in 1..=self.attempts.max(1) {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                return Err(Exhausted::Deadline { attempts: number - 1, last });
            }
            let timeout = left.map_or(self.attempt_timeout, |left| left.min(self.attempt_timeout));
            let result = match deadline {
                Some(deadline) => match tokio::time::timeout_at(deadline, attempt(timeout)).await {
                    Ok(result) => result,
                    Err(_) => return Err(Exhausted::Deadline { attempts: number, last }),
                },
                None => attempt(timeout).await,
            };
            let error = match result {
                Ok(value) => return Ok((value, number)),
                Err(error) => error,
            };
            if !error.is_retryable() || number == self.attempts.max(1) {
                return Err(Exhausted::Failed { attempts: number, error });
            }
            let wait = self.delay(number, error.retry_after());
            if let Some(deadline) = deadline
                && Instant::now() + wait >= deadline
            {
                return Err(Exhausted::Deadline { attempts: number, last: Some(error) });
            }
            tracing::debug!(attempt = number, wait = ?wait, "Model call failed; retrying.");
            last = Some(error);
            tokio::time::sleep(wait).await;
        }
        unreachable!("the last attempt returns")
    }
}

/// The wait a response asks for: `retry-after-ms` (OpenAI), or `Retry-After` as seconds or
/// an HTTP date.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = text(RETRY_AFTER_MS).and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = text(RETRY_AFTER.as_str())?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests;
