//! The gateway's decisions: one record per request sent to the fleet, found by its id (for
//! `GET /v1/decisions/{id}`) and by its caller's idempotency key (for retries).
//!
//! A record is pending until the fleet's answer settles it; whoever waits holds a receiver of
//! its one `watch` channel, so any number of waiters (the first request, retries that join
//! it, polls) cost one receiver each and wake together. Each caller may have only so many
//! records pending, holding only so many bytes of request bodies ([`Quota`]): past either, a
//! new request is refused ([`Opened::Full`]) until one of them settles; a retry that joins its
//! record costs nothing and is never refused. A settled record is kept for the
//! retention period, then forgotten. A record whose request never reached the fleet (the
//! broker away, the call already pending) gives up its idempotency key at once, so a retry
//! sends again.
//!
//! With a [`store::Store`], every record is written before its request is sent and its
//! outcome once settled, and a gateway started on the same store reads them back: decisions
//! stay readable and keys recognised across restarts. A record still pending when the gateway
//! stopped has lost its answer (the reply goes to the stopped gateway's queue): it is settled
//! as [`Failure::Restarted`], as the gateway stops or, if it was killed, as the next one
//! starts, and gives up its key, so a retry asks again.

pub mod store;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use airlock_records::view::{DecisionView, Refusal};
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tracing::warn;

use self::store::{Store, StoreError};

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The fleet decided.
    Decided(Box<DecisionView>),
    /// The fleet refused the request (its `Error` reply: bad or unknown policy, …).
    Refused(Refusal),
    /// The request did not reach the fleet, or not as a new call.
    Failed(Failure),
}

/// Why a request did not reach the fleet, or its answer did not reach the gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// A request of the same caller for the same call key and kind is already pending, under
    /// another idempotency key (another caller's keys are in a namespace of their own).
    AlreadyPending(String),
    /// The broker could not be reached, or the gateway is stopping.
    Unavailable(String),
    /// The gateway stopped (cleanly, or killed) before the fleet's answer came.
    Restarted,
}

/// How much one caller may have pending at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Pending requests.
    pub requests: usize,
    /// Bytes of the bodies of pending requests.
    pub bytes: usize,
}

impl Default for Quota {
    fn default() -> Self {
        Quota { requests: 1000, bytes: 32 * 1024 * 1024 }
    }
}

/// Which part of its [`Quota`] a caller has used up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// It has `limit` requests pending.
    Requests {
        /// The most it may have.
        limit: usize,
    },
    /// Its pending requests' bodies hold `pending` bytes, and `size` more would pass `limit`.
    Bytes {
        /// The bytes pending.
        pending: usize,
        /// The size of the body refused.
        size: usize,
        /// The most it may have pending.
        limit: usize,
    },
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
    /// The caller has its whole quota pending: nothing was opened.
    Full(Full),
}

/// Every record, and what finds them.
#[derive(Debug)]
pub struct Decisions {
    retention: Duration,
    quota: Quota,
    inner: Mutex<Inner>,
    /// Wakes the purger when the first record to forget is scheduled.
    purge: Notify,
    /// Where records are kept across restarts, if anywhere.
    store: Option<Store>,
}

#[derive(Debug, Default)]
struct Inner {
    records: HashMap<String, Record>,
    /// (owner, idempotency key) → record id.
    keys: HashMap<(Arc<str>, String), String>,
    /// Settled records in the order they are forgotten (retention is the same for all).
    expiring: VecDeque<(Instant, String)>,
    /// What each caller with records pending has pending.
    pending: HashMap<Arc<str>, Usage>,
}

/// What one caller has pending.
#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    requests: usize,
    bytes: usize,
}

#[derive(Debug)]
struct Record {
    owner: Arc<str>,
    key: String,
    /// A digest of what was asked: a retry must ask the same.
    fingerprint: [u8; 32],
    /// The size of its request's body, counted in its owner's [`Usage`] while it is pending.
    size: usize,
    state: watch::Sender<Option<Arc<Outcome>>>,
}

impl Decisions {
    /// An empty set that keeps settled records for `retention`, in memory only, and lets each
    /// caller have `quota` pending.
    pub fn new(retention: Duration, quota: Quota) -> Self {
        Decisions { retention, quota, inner: Mutex::new(Inner::default()), purge: Notify::new(), store: None }
    }

    /// The records of `store`, kept there from now on: those whose retention has ended are
    /// deleted, and those left pending by the last run are settled as [`Failure::Restarted`].
    pub async fn restore(retention: Duration, quota: Quota, store: Store) -> Result<Self, StoreError> {
        let now = SystemTime::now();
        let (mut expired, mut interrupted) = (Vec::new(), Vec::new());
        let mut inner = Inner::default();
        for stored in store.all().await? {
            let age = stored.settled.as_ref().map(|(_, at)| now.duration_since(*at).unwrap_or_default());
            if age.is_some_and(|age| age >= retention) {
                expired.push(stored.id);
                continue;
            }
            let owner: Arc<str> = Arc::from(stored.owner.as_str());
            if let Some(key) = &stored.key {
                inner.keys.insert((owner.clone(), key.clone()), stored.id.clone());
            }
            let outcome = match stored.settled {
                Some((outcome, _)) => outcome,
                None => {
                    interrupted.push(stored.id.clone());
                    Outcome::Failed(Failure::Restarted)
                }
            };
            if let Some(age) = age {
                inner.expiring.push_back((Instant::now() + (retention - age), stored.id.clone()));
            }
            let (state, _) = watch::channel(Some(Arc::new(outcome)));
            let key = stored.key.unwrap_or_default();
            // Settled, so counted in nobody's usage.
            inner.records.insert(stored.id, Record { owner, key, fingerprint: stored.fingerprint, size: 0, state });
        }
        store.remove(&expired).await?;
        let decisions =
            Decisions { retention, quota, inner: Mutex::new(inner), purge: Notify::new(), store: Some(store) };
        for id in interrupted {
            decisions.settle(&id, Outcome::Failed(Failure::Restarted)).await;
        }
        Ok(decisions)
    }

    /// Whether records are kept in a store.
    pub fn stored(&self) -> bool {
        self.store.is_some()
    }

    /// How many records there are.
    pub fn len(&self) -> usize {
        self.lock().records.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The record of `owner`'s `key`: the existing one if `fingerprint` matches it, else a
    /// new pending one for a request body of `size` bytes, if `owner`'s quota has room for
    /// it, in the store (if any) before this returns. A new record the store could not take
    /// is settled as unavailable, and the error returned.
    pub async fn open(
        &self,
        owner: &Arc<str>,
        key: String,
        fingerprint: [u8; 32],
        size: usize,
    ) -> Result<Opened, StoreError> {
        let opened = self.open_in_memory(owner, key.clone(), fingerprint, size);
        if let (Opened::New { id, .. }, Some(store)) = (&opened, &self.store)
            && let Err(e) = store.add(id, owner, &key, &fingerprint).await
        {
            self.settle(id, Outcome::Failed(Failure::Unavailable(e.to_string()))).await;
            return Err(e);
        }
        Ok(opened)
    }

    fn open_in_memory(&self, owner: &Arc<str>, key: String, fingerprint: [u8; 32], size: usize) -> Opened {
        let mut inner = self.lock();
        if let Some(id) = inner.keys.get(&(owner.clone(), key.clone())) {
            let record = &inner.records[id];
            if record.fingerprint != fingerprint {
                return Opened::Mismatch;
            }
            return Opened::Existing { id: id.clone(), watch: record.state.subscribe() };
        }
        let usage = inner.pending.get(owner).copied().unwrap_or_default();
        if usage.requests >= self.quota.requests {
            return Opened::Full(Full::Requests { limit: self.quota.requests });
        }
        if usage.bytes.saturating_add(size) > self.quota.bytes {
            return Opened::Full(Full::Bytes { pending: usage.bytes, size, limit: self.quota.bytes });
        }
        let usage = inner.pending.entry(owner.clone()).or_default();
        usage.requests += 1;
        usage.bytes += size;
        let id = uuid::Uuid::now_v7().to_string();
        let (state, watch) = watch::channel(None);
        inner.keys.insert((owner.clone(), key.clone()), id.clone());
        inner.records.insert(id.clone(), Record { owner: owner.clone(), key, fingerprint, size, state });
        Opened::New { id, watch }
    }

    /// Settles a record: its waiters wake, and it is forgotten after the retention period. A
    /// failure frees the idempotency key at once. Written to the store, if any; a store that
    /// fails is logged, and the record then lives in memory only.
    pub async fn settle(&self, id: &str, outcome: Outcome) {
        let failed = matches!(outcome, Outcome::Failed(_));
        let outcome = Arc::new(outcome);
        {
            let mut inner = self.lock();
            let Some(record) = inner.records.get(id) else { return };
            let was_pending = record.state.send_replace(Some(outcome.clone())).is_none();
            let (key, size) = ((record.owner.clone(), record.key.clone()), record.size);
            if was_pending {
                inner.release(&key.0, size);
            }
            if failed && inner.keys.get(&key).is_some_and(|owned| owned == id) {
                inner.keys.remove(&key);
            }
            let first = inner.expiring.is_empty();
            inner.expiring.push_back((Instant::now() + self.retention, id.to_owned()));
            if first {
                self.purge.notify_one();
            }
        }
        if let Some(store) = &self.store
            && let Err(e) = store.settle(id, &outcome, SystemTime::now(), failed).await
        {
            warn!(id, error = %e, "The decision is not in the records store; a restart would lose it.");
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
            let (next, forgotten) = {
                let mut inner = self.lock();
                let now = Instant::now();
                let mut forgotten = Vec::new();
                while inner.expiring.front().is_some_and(|(at, _)| *at <= now) {
                    let (_, id) = inner.expiring.pop_front().expect("a front");
                    if let Some(record) = inner.records.remove(&id) {
                        let key = (record.owner, record.key);
                        if inner.keys.get(&key).is_some_and(|owned| *owned == id) {
                            inner.keys.remove(&key);
                        }
                        forgotten.push(id);
                    }
                }
                (inner.expiring.front().map(|(at, _)| *at), forgotten)
            };
            if let Some(store) = &self.store
                && let Err(e) = store.remove(&forgotten).await
            {
                warn!(records = forgotten.len(), error = %e, "Records past their retention stay in the store.");
            }
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => self.purge.notified().await,
            }
        }
    }

    /// Closes the store, if any.
    pub async fn close(&self) {
        if let Some(store) = &self.store {
            store.close().await;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    /// Takes a settled record of `size` bytes out of `owner`'s usage.
    fn release(&mut self, owner: &Arc<str>, size: usize) {
        if let Some(usage) = self.pending.get_mut(owner) {
            usage.requests = usage.requests.saturating_sub(1);
            usage.bytes = usage.bytes.saturating_sub(size);
            if usage.requests == 0 {
                self.pending.remove(owner);
            }
        }
    }
}

#[cfg(test)]
mod tests;
