//! Wall-clock time as the wire carries it: milliseconds since the Unix epoch.
//!
//! The wire writes "no deadline" as `0`; [`Deadline::from_wire`] reads that as `None` at the
//! boundary, so no code past it compares against a sentinel.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A moment in UTC, to the second, as a calendar and a clock show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utc {
    /// The year.
    pub year: i64,
    /// The month, 1 to 12.
    pub month: i64,
    /// The day of the month, from 1.
    pub day: i64,
    /// The hour, 0 to 23.
    pub hour: i64,
    /// The minute, 0 to 59.
    pub minute: i64,
    /// The second, 0 to 59.
    pub second: i64,
}

impl Utc {
    /// The moment `seconds` after the Unix epoch (before it when negative).
    pub fn from_unix_seconds(seconds: i64) -> Self {
        let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
        // Days to a civil date (Howard Hinnant's civil_from_days).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        Utc { year, month, day, hour: rest / 3600, minute: rest % 3600 / 60, second: rest % 60 }
    }
}

/// A moment after which nobody waits for an answer any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Deadline {
    unix_ms: i64,
}

impl Deadline {
    /// The deadline at `unix_ms`, milliseconds since the Unix epoch.
    pub fn at(unix_ms: i64) -> Self {
        Deadline { unix_ms }
    }

    /// `duration` after `now_ms`.
    pub fn after(now_ms: i64, duration: Duration) -> Self {
        let millis = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        Deadline { unix_ms: now_ms.saturating_add(millis) }
    }

    /// A wire deadline field: `0` (or less) is none.
    pub fn from_wire(unix_ms: i64) -> Option<Self> {
        (unix_ms > 0).then_some(Deadline { unix_ms })
    }

    /// The wire field for an optional deadline: `0` for none.
    pub fn to_wire(deadline: Option<Self>) -> i64 {
        deadline.map_or(0, |d| d.unix_ms)
    }

    /// Milliseconds since the Unix epoch.
    pub fn unix_ms(self) -> i64 {
        self.unix_ms
    }

    /// Whether the deadline has passed at `now_ms` (it passes at its own millisecond).
    pub fn has_passed(self, now_ms: i64) -> bool {
        self.unix_ms <= now_ms
    }

    /// The time left at `now_ms`; zero once it has passed.
    pub fn remaining(self, now_ms: i64) -> Duration {
        Duration::from_millis(u64::try_from(self.unix_ms.saturating_sub(now_ms)).unwrap_or(0))
    }

    /// The earlier of two optional deadlines; `None` only when neither is set.
    pub fn earliest(a: Option<Self>, b: Option<Self>) -> Option<Self> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_reads_the_calendar_across_leap_days_and_before_the_epoch() {
        let at = |year, month, day, hour, minute, second| Utc { year, month, day, hour, minute, second };
        assert_eq!(Utc::from_unix_seconds(0), at(1970, 1, 1, 0, 0, 0));
        assert_eq!(Utc::from_unix_seconds(951_782_400), at(2000, 2, 29, 0, 0, 0));
        assert_eq!(Utc::from_unix_seconds(1_614_265_330), at(2021, 2, 25, 15, 2, 10));
        assert_eq!(Utc::from_unix_seconds(-1), at(1969, 12, 31, 23, 59, 59));
    }

    #[test]
    fn the_wire_zero_is_no_deadline_and_back() {
        assert_eq!(Deadline::from_wire(0), None);
        assert_eq!(Deadline::from_wire(-5), None);
        assert_eq!(Deadline::from_wire(7), Some(Deadline::at(7)));
        assert_eq!(Deadline::to_wire(None), 0);
        assert_eq!(Deadline::to_wire(Some(Deadline::at(7))), 7);
    }

    #[test]
    fn passes_at_its_own_millisecond_and_counts_down_to_zero() {
        let deadline = Deadline::after(1_000, Duration::from_millis(500));
        assert_eq!(deadline.unix_ms(), 1_500);
        assert!(!deadline.has_passed(1_499));
        assert!(deadline.has_passed(1_500));
        assert_eq!(deadline.remaining(1_200), Duration::from_millis(300));
        assert_eq!(deadline.remaining(2_000), Duration::ZERO);
    }

    #[test]
    fn the_earliest_of_two_ignores_a_missing_one() {
        let (early, late) = (Some(Deadline::at(1)), Some(Deadline::at(2)));
        assert_eq!(Deadline::earliest(early, late), early);
        assert_eq!(Deadline::earliest(late, early), early);
        assert_eq!(Deadline::earliest(None, late), late);
        assert_eq!(Deadline::earliest(late, None), late);
        assert_eq!(Deadline::earliest(None, None), None);
    }
}
