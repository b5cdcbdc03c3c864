//! Per-caller rate limits: one token bucket per caller name, refilled continuously.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How fast each caller may ask.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateConfig {
    /// Requests per second, sustained.
    pub per_second: f64,
    /// Requests at once after a quiet spell (the bucket's size).
    pub burst: u32,
}

impl Default for RateConfig {
    fn default() -> Self {
        RateConfig { per_second: 50.0, burst: 100 }
    }
}

/// The buckets of every caller that asked.
#[derive(Debug)]
pub struct RateLimits {
    config: RateConfig,
    buckets: Mutex<HashMap<String, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimits {
    /// Full buckets for every caller.
    pub fn new(config: RateConfig) -> Self {
        RateLimits { config, buckets: Mutex::new(HashMap::new()) }
    }

    /// Takes one request from `caller`'s bucket, or says how long until one is there.
    pub fn take(&self, caller: &str) -> Result<(), Duration> {
        let now = Instant::now();
        let burst = f64::from(self.config.burst);
        let mut buckets = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let bucket = buckets.entry(caller.to_owned()).or_insert(Bucket { tokens: burst, at: now });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.config.per_second).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / self.config.per_second))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_passes_then_the_rate_holds_per_caller() {
        let limits = RateLimits::new(RateConfig { per_second: 2.0, burst: 3 });
        for _ in 0..3 {
            limits.take("a").unwrap();
        }
        let wait = limits.take("a").unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        limits.take("b").expect("another caller has its own bucket");
        tokio::time::advance(Duration::from_millis(500)).await;
        limits.take("a").unwrap();
        assert!(limits.take("a").is_err());
        tokio::time::advance(Duration::from_secs(60)).await;
        for _ in 0..3 {
            limits.take("a").unwrap();
        }
        assert!(limits.take("a").is_err(), "a quiet spell refills the bucket to its size, no more");
    }
}
