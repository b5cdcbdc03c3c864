//! The gateway's decisions: one record per request sent to the fleet, found by its id (for
//! `GET /v1/decisions/{id}`) and by its caller's idempotency key (for retries).
//!
//! A record is pending until the fleet's answer settles it; whoever waits holds a receiver of
//! its one `watch` channel, so any number of waiters (the first request, retries that join
//! it, polls) cost one receiver each and wake together. A settled record is kept for the
//! retention period, then forgotten. A record whose request never reached the fleet (the
//! broker away, the call already pending) gives up its idempotency key at once, so a retry
//! sends again.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use airlock_records::view::{DecisionView, Refusal};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// How a request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The fleet decided.
    Decided(Box<DecisionView>),
    /// The fleet refused the request (its `Error` reply: bad or unknown policy, …).
    Refused(Refusal),
    /// The request did not reach the fleet, or not as a new call.
    Failed(Failure),
}

/// Why a request did not reach the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// A request for the same call key and kind is already pending (from another caller, or
    /// under another idempotency key).
    AlreadyPending(String),
    /// The broker could not be reached, or the gateway is stopping.
    Unavailable(String),
}

/// A record's state as its waiters see it: `None` while pending.
pub type Watch = watch::Receiver<Option<Arc<Outcome>>>;

/// What [`Decisions::open`] found for a caller's key.
#[derive(Debug)]
pub enum Opened {
    /// A new record: send its request to the fleet, then settle it.
    New {
        /// The record's id.
        id: String,
        /// Its state.
        watch: Watch,
    },
    /// The record of an earlier request with the same key and the same content.
    Existing {
        /// The record's id.
        id: String,
        /// Its state.
        watch: Watch,
    },
    /// An earlier request used the key for something else.
    Mismatch,
}

/// Every record, and what finds them.
#[derive(Debug)]
pub struct Decisions {
    retention: Duration,
    inner: Mutex<Inner>,
    /// Wakes the purger when the first record to forget is scheduled.
    purge: Notify,
}

#[derive(Debug, Default)]
struct Inner {
    records: HashMap<String, Record>,
    /// (owner, idempotency key) → record id.
    keys: HashMap<(Arc<str>, String), String>,
    /// Settled records in the order they are forgotten (retention is the same for all).
    expiring: VecDeque<(Instant, String)>,
}

#[derive(Debug)]
struct Record {
    owner: Arc<str>,
    key: String,
    /// A digest of what was asked: a retry must ask the same.
    fingerprint: [u8; 32],
    state: watch::Sender<Option<Arc<Outcome>>>,
}

impl Decisions {
    /// An empty set that keeps settled records for `retention`.
    pub fn new(retention: Duration) -> Self {
        Decisions { retention, inner: Mutex::new(Inner::default()), purge: Notify::new() }
    }

    /// The record of `owner`'s `key`: the existing one if `fingerprint` matches it, else a
    /// new pending one.
    pub fn open(&self, owner: &Arc<str>, key: String, fingerprint: [u8; 32]) -> Opened {
        let mut inner = self.lock();
        if let Some(id) = inner.keys.get(&(owner.clone(), key.clone())) {
            let record = &inner.records[id];
            if record.fingerprint != fingerprint {
                return Opened::Mismatch;
            }
            return Opened::Existing { id: id.clone(), watch: record.state.subscribe() };
        }
        let id = uuid::Uuid::now_v7().to_string();
        let (state, watch) = watch::channel(None);
        inner.keys.insert((owner.clone(), key.clone()), id.clone());
        inner.records.insert(id.clone(), Record { owner: owner.clone(), key, fingerprint, state });
        Opened::New { id, watch }
    }

    /// Settles a record: its waiters wake, and it is forgotten after the retention period. A
    /// failure frees the idempotency key at once.
    pub fn settle(&self, id: &str, outcome: Outcome) {
        let failed = matches!(outcome, Outcome::Failed(_));
        let mut inner = self.lock();
        let Some(record) = inner.records.get(id) else { return };
        record.state.send_replace(Some(Arc::new(outcome)));
        if failed {
            let key = (record.owner.clone(), record.key.clone());
            if inner.keys.get(&key).is_some_and(|owned| owned == id) {
                inner.keys.remove(&key);
            }
        }
        let first = inner.expiring.is_empty();
        inner.expiring.push_back((Instant::now() + self.retention, id.to_owned()));
        drop(inner);
        if first {
            self.purge.notify_one();
        }
    }

    /// The state of record `id`, if `owner` made it.
    pub fn watch(&self, owner: &str, id: &str) -> Option<Watch> {
        let inner = self.lock();
        inner.records.get(id).filter(|record| &*record.owner == owner).map(|record| record.state.subscribe())
    }

    /// Forgets settled records as their retention ends; runs until the gateway stops.
    pub async fn purge(&self) {
        loop {
            let next = {
                let mut inner = self.lock();
                let now = Instant::now();
                while inner.expiring.front().is_some_and(|(at, _)| *at <= now) {
                    let (_, id) = inner.expiring.pop_front().expect("a front");
                    if let Some(record) = inner.records.remove(&id) {
                        let key = (record.owner, record.key);
                        if inner.keys.get(&key).is_some_and(|owned| *owned == id) {
                            inner.keys.remove(&key);
                        }
                    }
                }
                inner.expiring.front().map(|(at, _)| *at)
            };
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => self.purge.notified().await,
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    fn refused() -> Outcome {
        Outcome::Refused(Refusal { code: "unknown_policy".into(), message: "no".into() })
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_joins_its_record_and_sees_its_outcome() {
        let decisions = Decisions::new(Duration::from_secs(60));
        let Opened::New { id, mut watch } = decisions.open(&owner("a"), "k".into(), [1; 32]) else { panic!("new") };
        let Opened::Existing { id: again, watch: mut joined } = decisions.open(&owner("a"), "k".into(), [1; 32]) else {
            panic!("existing")
        };
        assert_eq!(id, again);
        decisions.settle(&id, refused());
        assert_eq!(watch.wait_for(Option::is_some).await.unwrap().as_deref(), Some(&refused()));
        assert_eq!(joined.wait_for(Option::is_some).await.unwrap().as_deref(), Some(&refused()));
    }

    #[test]
    fn keys_belong_to_their_owner_and_to_one_content() {
        let decisions = Decisions::new(Duration::from_secs(60));
        let Opened::New { id, .. } = decisions.open(&owner("a"), "k".into(), [1; 32]) else { panic!("new") };
        assert!(matches!(decisions.open(&owner("b"), "k".into(), [1; 32]), Opened::New { .. }));
        assert!(matches!(decisions.open(&owner("a"), "k".into(), [2; 32]), Opened::Mismatch));
        assert!(decisions.watch("a", &id).is_some());
        assert!(decisions.watch("b", &id).is_none(), "another caller cannot read it");
        assert!(decisions.watch("a", "nope").is_none());
    }

    #[test]
    fn a_failure_frees_the_key_for_a_new_attempt() {
        let decisions = Decisions::new(Duration::from_secs(60));
        let Opened::New { id, .. } = decisions.open(&owner("a"), "k".into(), [1; 32]) else { panic!("new") };
        decisions.settle(&id, Outcome::Failed(Failure::Unavailable("down".into())));
        let Opened::New { id: second, .. } = decisions.open(&owner("a"), "k".into(), [1; 32]) else { panic!("new") };
        assert_ne!(id, second);
        assert!(decisions.watch("a", &id).is_some(), "the failed record still answers its id");
    }

    #[tokio::test(start_paused = true)]
    async fn settled_records_are_forgotten_after_the_retention_and_pending_ones_are_not() {
        let decisions = Arc::new(Decisions::new(Duration::from_secs(60)));
        let purger = tokio::spawn({
            let decisions = decisions.clone();
            async move { decisions.purge().await }
        });
        let Opened::New { id, .. } = decisions.open(&owner("a"), "k".into(), [1; 32]) else { panic!("new") };
        let Opened::New { id: pending, .. } = decisions.open(&owner("a"), "p".into(), [1; 32]) else { panic!("new") };
        decisions.settle(&id, refused());
        tokio::time::sleep(Duration::from_secs(59)).await;
        assert!(decisions.watch("a", &id).is_some());
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(decisions.watch("a", &id).is_none());
        assert!(decisions.watch("a", &pending).is_some());
        assert!(matches!(decisions.open(&owner("a"), "k".into(), [1; 32]), Opened::New { .. }));
        purger.abort();
    }
}
