use std::cell::RefCell;
use std::collections::VecDeque;

use reqwest::header::HeaderValue;

use super::*;

/// A scripted failure.
#[derive(Debug, Clone, PartialEq)]
struct Fail {
    retryable: bool,
    after: Option<Duration>,
}

impl Retryable for Fail {
    fn is_retryable(&self) -> bool {
        self.retryable
    }
    fn retry_after(&self) -> Option<Duration> {
        self.after
    }
}

const RATE_LIMITED: Fail = Fail { retryable: true, after: Some(Duration::from_secs(7)) };
const SERVER_ERROR: Fail = Fail { retryable: true, after: None };
const BAD_REQUEST: Fail = Fail { retryable: false, after: None };

/// Runs `policy` against scripted outcomes; returns the result, the attempts' timeouts and
/// the (virtual) time it took.
async fn script(
    policy: RetryPolicy,
    deadline: Option<Duration>,
    outcomes: Vec<Result<u32, Fail>>,
) -> (Result<(u32, u32), Exhausted<Fail>>, Vec<Duration>, Duration) {
    let start = Instant::now();
    let outcomes = RefCell::new(VecDeque::from(outcomes));
    let timeouts = RefCell::new(Vec::new());
    let result = policy
        .run(deadline.map(|d| start + d), |timeout| {
            timeouts.borrow_mut().push(timeout);
            let next = outcomes.borrow_mut().pop_front().expect("an outcome per attempt");
            async move { next }
        })
        .await;
    (result, timeouts.into_inner(), start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn honours_retry_after_then_succeeds() {
    let (result, _, took) =
        script(RetryPolicy::default(), None, vec![Err(RATE_LIMITED), Err(RATE_LIMITED), Ok(5)]).await;
    assert_eq!(result, Ok((5, 3)));
    assert_eq!(took, Duration::from_secs(14), "two waits of exactly Retry-After");
}

#[tokio::test(start_paused = true)]
async fn backs_off_exponentially_with_jitter() {
    let policy = RetryPolicy {
        attempts: 4,
        base: Duration::from_secs(1),
        max: Duration::from_secs(3),
        ..RetryPolicy::default()
    };
    let (result, _, took) =
        script(policy, None, vec![Err(SERVER_ERROR), Err(SERVER_ERROR), Err(SERVER_ERROR), Ok(1)]).await;
    assert_eq!(result, Ok((1, 4)));
    // Steps 1 s, 2 s, 3 s (capped), each waited for between half and all of it.
    assert!(took >= Duration::from_secs(3) && took <= Duration::from_secs(6), "{took:?}");
    for attempt in 1..=10 {
        let step = Duration::from_secs(1).saturating_mul(1 << (attempt - 1)).min(policy.max);
        let delay = policy.delay(attempt, None);
        assert!(delay >= step / 2 && delay <= step, "attempt {attempt}: {delay:?}");
    }
    assert_eq!(policy.delay(1, Some(Duration::from_secs(600))), policy.max_retry_after);
}

#[tokio::test(start_paused = true)]
async fn gives_up_after_the_attempts_or_at_once_when_not_retryable() {
    let policy = RetryPolicy { attempts: 3, ..RetryPolicy::default() };
    let (result, _, _) = script(policy, None, vec![Err(SERVER_ERROR), Err(SERVER_ERROR), Err(RATE_LIMITED)]).await;
    assert_eq!(result, Err(Exhausted::Failed { attempts: 3, error: RATE_LIMITED }));
    let (result, _, took) = script(policy, None, vec![Err(BAD_REQUEST)]).await;
    assert_eq!(result, Err(Exhausted::Failed { attempts: 1, error: BAD_REQUEST }));
    assert_eq!(took, Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn does_not_wait_past_the_deadline() {
    // Retry-After 7 s with 5 s left: answer now rather than sleep into a timeout.
    let (result, timeouts, took) =
        script(RetryPolicy::default(), Some(Duration::from_secs(5)), vec![Err(RATE_LIMITED)]).await;
    assert_eq!(result, Err(Exhausted::Deadline { attempts: 1, last: Some(RATE_LIMITED) }));
    assert_eq!(took, Duration::ZERO);
    assert_eq!(timeouts, [Duration::from_secs(5)], "an attempt gets no more than the time left");
}

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_is_cut_at_the_deadline() {
    let start = Instant::now();
    let result: Result<(u32, u32), Exhausted<Fail>> = RetryPolicy::default()
        .run(Some(start + Duration::from_secs(2)), |_| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(1)
        })
        .await;
    assert_eq!(result, Err(Exhausted::Deadline { attempts: 1, last: None }));
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    // A deadline already passed starts nothing.
    let (result, timeouts, _) = script(RetryPolicy::default(), Some(Duration::ZERO), vec![]).await;
    assert_eq!((result, timeouts.len()), (Err(Exhausted::Deadline { attempts: 0, last: None }), 0));
}

#[test]
fn reads_retry_after_headers() {
    let headers = |pairs: &[(&'static str, &str)]| {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        map
    };
    assert_eq!(retry_after(&headers(&[("retry-after", "12")])), Some(Duration::from_secs(12)));
    assert_eq!(retry_after(&headers(&[("retry-after", "1.5")])), Some(Duration::from_millis(1500)));
    assert_eq!(
        retry_after(&headers(&[("retry-after", "2"), ("retry-after-ms", "250")])),
        Some(Duration::from_millis(250))
    );
    assert_eq!(retry_after(&headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")])), Some(Duration::ZERO));
    let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
    let wait = retry_after(&headers(&[("retry-after", &later)])).unwrap();
    assert!(wait > Duration::from_secs(100) && wait <= Duration::from_secs(120), "{wait:?}");
    assert_eq!(retry_after(&headers(&[("retry-after", "soon")])), None);
    assert_eq!(retry_after(&headers(&[("retry-after", "-3")])), None);
    assert_eq!(retry_after(&HeaderMap::new()), None);
}
