//! Capped exponential backoff with jitter, for reconnect loops.

use std::{
    hash::{BuildHasher, RandomState},
    time::Duration,
};

/// Delays that double from `min` up to `max`, each drawn at random from the upper half of
/// the current step, so a fleet that lost the broker at once does not reconnect in lockstep.
#[derive(Clone, Debug)]
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        Self { min, max: max.max(min), attempt: 0 }
    }

    /// The delay before the next attempt.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let step = self.min.saturating_mul(1 << self.attempt.min(20)).min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let half = step / 2;
        // `RandomState` is seeded per instance: enough randomness for jitter, no dependency.
        let random = RandomState::new().hash_one(self.attempt);
        let nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(random % nanos.max(1))
    }

    /// Starts over after a success.
    pub(crate) fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_cap_and_stays_in_the_upper_half() {
        let min = Duration::from_millis(100);
        let max = Duration::from_secs(2);
        let mut backoff = Backoff::new(min, max);
        let mut step = min;
        for _ in 0..10 {
            let delay = backoff.next_delay();
            assert!(delay >= step / 2 && delay <= step, "{delay:?} for step {step:?}");
            step = (step * 2).min(max);
        }
        backoff.reset();
        assert!(backoff.next_delay() <= min);
    }
}
