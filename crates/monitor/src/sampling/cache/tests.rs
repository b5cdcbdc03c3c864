use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use airlock_transport::{MemoryTransport, Topology};

use super::*;
use crate::sampling::Draw;

const SECOND: Duration = Duration::from_secs(1);

fn key(n: u32) -> Key {
    Key::of("openai", "http://x", "m", &serde_json::json!({"n": n}), Draw::default())
}

/// The answer as text, or the error an unreadable one is.
fn read(answer: &[u8]) -> Result<String, AttemptError> {
    match std::str::from_utf8(answer) {
        Ok("unreadable") | Err(_) => Err(AttemptError::Malformed("unreadable".into())),
        Ok(text) => Ok(text.to_owned()),
    }
}

/// An ask that counts itself and answers `answer` after a moment.
async fn ask(asked: &AtomicU32, answer: Result<&'static str, AttemptError>) -> Result<Bytes, AttemptError> {
    asked.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(20)).await;
    answer.map(|text| Bytes::from_static(text.as_bytes()))
}

fn counted(metrics: &Metrics, outcome: &str) -> u64 {
    metrics.sample_cache.get_or_create(&OutcomeLabels { outcome: outcome.into() }).get()
}

#[tokio::test]
async fn concurrent_identical_calls_share_one_request() {
    let metrics = Arc::new(Metrics::new());
    let cache = Cache::new(10, metrics.clone());
    let asked = AtomicU32::new(0);
    let calls = (0..5).map(|_| cache.get_or_ask(key(1), SECOND, ask(&asked, Ok("answer")), read));
    let answers = futures_util::future::join_all(calls).await;
    assert!(answers.iter().all(|a| a.as_deref() == Ok("answer")), "{answers:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert_eq!((counted(&metrics, "miss"), counted(&metrics, "hit")), (1, 4));
    // Another draw of the same context is another call.
    let other = Key::of("openai", "http://x", "m", &serde_json::json!({"n": 1}), Draw { epoch: None, index: 1 });
    cache.get_or_ask(other, SECOND, ask(&asked, Ok("second draw")), read).await.unwrap();
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    assert!(lock(&cache.flights).is_empty(), "no flight is left behind");
}

#[tokio::test]
async fn errors_are_never_kept() {
    let cache = Cache::new(10, Arc::default());
    let asked = AtomicU32::new(0);
    let failed =
        cache.get_or_ask(key(1), SECOND, ask(&asked, Err(AttemptError::Timeout(Duration::from_secs(1)))), read).await;
    assert_eq!(failed, Err(AttemptError::Timeout(Duration::from_secs(1))));
    let unread = cache.get_or_ask(key(1), SECOND, ask(&asked, Ok("unreadable")), read).await;
    assert_eq!(unread, Err(AttemptError::Malformed("unreadable".into())), "an answer the caller cannot read");
    assert!(cache.is_empty());
    let answer = cache.get_or_ask(key(1), SECOND, ask(&asked, Ok("answer")), read).await.unwrap();
    assert_eq!((answer.as_str(), asked.load(Ordering::SeqCst)), ("answer", 3));
}

#[test]
fn holds_at_most_its_bound_and_drops_the_least_recently_used() {
    let mut lru = Lru::new(3);
    for n in 0..3 {
        lru.insert(key(n), Bytes::from(n.to_string()));
    }
    assert!(lru.get(&key(0)).is_some(), "0 used again: 1 is now the oldest");
    lru.insert(key(3), Bytes::from_static(b"3"));
    assert_eq!(lru.entries.len(), 3);
    assert_eq!(lru.order.len(), 3);
    assert!(lru.get(&key(1)).is_none());
    assert!([0, 2, 3].iter().all(|n| lru.get(&key(*n)).is_some()));
    let mut none = Lru::new(0);
    none.insert(key(0), Bytes::new());
    assert!(none.get(&key(0)).is_none(), "a bound of 0 keeps nothing");
}

#[tokio::test]
async fn an_answer_one_process_paid_for_is_taken_by_the_others() {
    let transport = MemoryTransport::new();
    let topology = Topology::empty("t").with_samples_log("monitor", Duration::from_secs(60));
    transport.declare(&topology).await.unwrap();
    let log = topology.samples_log("monitor");
    let a = shared(transport.clone(), log.clone(), "a", Cache::new(10, Arc::default())).await.unwrap();
    let b = shared(transport.clone(), log.clone(), "b", Cache::new(10, Arc::default())).await.unwrap();
    let asked = AtomicU32::new(0);
    a.get_or_ask(key(7), SECOND, ask(&asked, Ok("paid once")), read).await.unwrap();
    let heard = async {
        while b.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), heard).await.expect("b heard of a's answer");
    let answer = b.get_or_ask(key(7), SECOND, ask(&asked, Ok("paid twice")), read).await.unwrap();
    assert_eq!((answer.as_str(), asked.load(Ordering::SeqCst)), ("paid once", 1));
    // A process that starts later reads the answers the log keeps.
    let late = shared(transport.clone(), log, "c", Cache::new(10, Arc::default())).await.unwrap();
    assert_eq!(late.len(), 1);
}

async fn two_processes() -> (Arc<Cache>, Arc<Cache>) {
    let transport = MemoryTransport::new();
    let topology = Topology::empty("t").with_samples_log("monitor", Duration::from_secs(60));
    transport.declare(&topology).await.unwrap();
    let log = topology.samples_log("monitor");
    let a = shared(transport.clone(), log.clone(), "a", Cache::new(10, Arc::default())).await.unwrap();
    let b = shared(transport.clone(), log, "b", Cache::new(10, Arc::default())).await.unwrap();
    (a, b)
}

#[tokio::test]
async fn identical_calls_on_two_processes_at_once_are_one_call() {
    let (a, b) = two_processes().await;
    let asked = AtomicU32::new(0);
    let long = Duration::from_secs(30);
    let (first, second) = tokio::join!(
        a.get_or_ask(key(3), long, ask(&asked, Ok("one answer")), read),
        b.get_or_ask(key(3), long, ask(&asked, Ok("another answer")), read),
    );
    assert_eq!(asked.load(Ordering::SeqCst), 1, "the first claim held; the other waited for its answer");
    assert_eq!(first.unwrap(), second.unwrap());
    assert!(lock(&a.claims).is_empty() && lock(&b.claims).is_empty(), "the answer ended the claim");
}

#[tokio::test]
async fn a_claim_whose_call_fails_is_released_at_once() {
    let (a, b) = two_processes().await;
    let asked = AtomicU32::new(0);
    let long = Duration::from_secs(30);
    let failing = Err(AttemptError::Timeout(SECOND));
    let both = async {
        tokio::join!(
            a.get_or_ask(key(4), long, ask(&asked, failing.clone()), read),
            b.get_or_ask(key(4), long, ask(&asked, failing.clone()), read),
        )
    };
    // Released, the waiting process asks itself at once, rather than at the claim's end.
    let (first, second) = tokio::time::timeout(long / 2, both).await.expect("the claim was released");
    let timed_out = Err(AttemptError::Timeout(SECOND));
    assert_eq!((first, second), (timed_out.clone(), timed_out));
    assert_eq!(asked.load(Ordering::SeqCst), 2);
}
