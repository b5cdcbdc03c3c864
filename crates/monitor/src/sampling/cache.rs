//! Model answers by [`Key`]: a bounded LRU in each process, single flight for concurrent
//! identical calls, and the step's log of answers `<p>.samples.<step>`, which every process
//! serving the step appends to and follows, so that an answer one process paid for is never
//! asked for again by another while the log keeps it. Only successful answers are kept.
//!
//! Identical calls on several processes at once (hedged requests, a task delivered again while
//! its first delivery is still being answered) are one call too: before it asks the model, a
//! process appends a claim on the key, valid for its attempt's time; the first live claim in
//! the log's order holds, and the others wait for its answer. A claim ends with its answer, with
//! a release when the claimant's call fails or is dropped, or when its time passes (a claimant
//! that died): the others then ask themselves.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_contract::v1::{self, control_event::Event};
use airlock_control::{ControlError, ControlLog, Fold};
use airlock_records::time::now_ms;
use airlock_telemetry::metrics::{Metrics, OutcomeLabels};
use airlock_transport::Transport;
use bytes::Bytes;
use tokio::sync::{mpsc, watch};
use tracing::{debug, warn};

use super::Key;
use crate::provider::AttemptError;

/// Answers held in memory by default.
pub const DEFAULT_ENTRIES: usize = 10_000;

/// A process's model answers, shared with the others of its step when [`shared`].
#[derive(Debug)]
pub struct Cache {
    answers: Mutex<Lru>,
    /// A lock per key being asked now: the first caller asks, the others wait for its answer.
    flights: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>,
    /// Who is asking the model for a key, until when, as the step's log says.
    claims: Mutex<HashMap<Key, Claim>>,
    /// The entries of the log folded in, sent after each.
    folded: watch::Sender<u64>,
    shared: Option<Sharing>,
    metrics: Arc<Metrics>,
}

/// How a cache takes part in its step's log.
#[derive(Debug)]
struct Sharing {
    /// This process, as its entries name it.
    own: Arc<str>,
    /// What to append.
    outbox: mpsc::UnboundedSender<Outgoing>,
}

/// An entry for the step's log.
#[derive(Debug)]
enum Outgoing {
    Answer(Key, Bytes),
    /// A claim until a time (unix ms); one past releases it.
    Claim(Key, i64),
}

#[derive(Debug)]
struct Claim {
    by: String,
    until: i64,
}

impl Cache {
    /// A cache of at most `entries` answers, counting hits and misses in `metrics`.
    pub fn new(entries: usize, metrics: Arc<Metrics>) -> Self {
        Cache {
            answers: Mutex::new(Lru::new(entries)),
            flights: Mutex::default(),
            claims: Mutex::default(),
            folded: watch::Sender::new(0),
            shared: None,
            metrics,
        }
    }

    /// What `read` makes of the answer for `key`: one known (in memory, from this process or
    /// the step's log), that of an identical call in flight here or on another process of the
    /// step (waited for up to `timeout`), or else `ask`'s, kept and shared if `read` takes it
    /// (an answer it cannot read is an error, and errors are never kept).
    pub async fn get_or_ask<T>(
        &self,
        key: Key,
        timeout: Duration,
        ask: impl Future<Output = Result<Bytes, AttemptError>>,
        read: impl Fn(&[u8]) -> Result<T, AttemptError>,
    ) -> Result<T, AttemptError> {
        if let Some(answer) = self.hit(&key) {
            return read(&answer);
        }
        let flight = lock(&self.flights).entry(key).or_default().clone();
        let turn = flight.lock().await;
        // A call that waited for an identical one takes its answer.
        let answered = match self.hit(&key) {
            Some(answer) => Some(answer),
            None => self.claim(key, timeout).await,
        };
        let result = match answered {
            Some(answer) => read(&answer),
            None => {
                self.count("miss");
                self.ask(key, ask, read).await
            }
        };
        drop(turn);
        let mut flights = lock(&self.flights);
        if flights.get(&key).is_some_and(|current| Arc::ptr_eq(current, &flight)) {
            flights.remove(&key);
        }
        result
    }

    /// Claims `key` for `timeout` on the step's log, and waits until the claim holds (`None`:
    /// ask the model), or another process's claim ends: with its answer, or without (`None`).
    async fn claim(&self, key: Key, timeout: Duration) -> Option<Bytes> {
        let sharing = self.shared.as_ref()?;
        let until = now_ms() + i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX / 2);
        let _ = sharing.outbox.send(Outgoing::Claim(key, until));
        let mut folded = self.folded.subscribe();
        let settled = async {
            let mut waited_for_another = false;
            loop {
                if let Some(answer) = self.hit(&key) {
                    return Some(answer);
                }
                let holder = lock(&self.claims).get(&key).map(|claim| (*claim.by == *sharing.own, claim.until));
                let wait = match holder {
                    // Another's claim released without an answer.
                    None if waited_for_another => return None,
                    // Not folded in yet: neither this claim nor an earlier one.
                    None => None,
                    Some((true, _)) => return None,
                    Some((false, until)) if until <= now_ms() => return None,
                    Some((false, until)) => {
                        waited_for_another = true;
                        Some(Duration::from_millis((until - now_ms()).unsigned_abs()))
                    }
                };
                tokio::select! {
                    _ = folded.changed() => {}
                    () = tokio::time::sleep(wait.unwrap_or(timeout)) => {}
                }
            }
        };
        // A log that does not answer costs the wait, never the call.
        tokio::time::timeout(timeout, settled).await.unwrap_or(None)
    }

    async fn ask<T>(
        &self,
        key: Key,
        ask: impl Future<Output = Result<Bytes, AttemptError>>,
        read: impl Fn(&[u8]) -> Result<T, AttemptError>,
    ) -> Result<T, AttemptError> {
        // Released unless answered, even when this call is dropped midway.
        let mut release = Release { cache: self, key: Some(key) };
        let answer = ask.await?;
        let value = read(&answer)?;
        lock(&self.answers).insert(key, answer.clone());
        if let Some(sharing) = &self.shared {
            let _ = sharing.outbox.send(Outgoing::Answer(key, answer));
        }
        release.key = None;
        Ok(value)
    }

    /// How many answers are held.
    pub fn len(&self) -> usize {
        lock(&self.answers).entries.len()
    }

    /// Whether no answer is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn hit(&self, key: &Key) -> Option<Bytes> {
        let answer = lock(&self.answers).get(key);
        if answer.is_some() {
            self.count("hit");
        }
        answer
    }

    fn count(&self, outcome: &str) {
        self.metrics.sample_cache.get_or_create(&OutcomeLabels { outcome: outcome.into() }).inc();
    }

    /// Folds an entry of the step's log in.
    fn fold(&self, entry: &v1::ControlEvent, own: &str) {
        match &entry.event {
            Some(Event::Sampled(sampled)) => match Key::from_slice(&sampled.key) {
                Some(key) => {
                    if entry.by != own {
                        lock(&self.answers).insert(key, Bytes::copy_from_slice(&sampled.response));
                    }
                    lock(&self.claims).remove(&key);
                }
                None => debug!(by = %entry.by, "Sampled answer skipped: its key is not a SHA-256."),
            },
            Some(Event::Claim(claim)) => {
                let Some(key) = Key::from_slice(&claim.key) else { return };
                let now = now_ms();
                let mut claims = lock(&self.claims);
                if claim.until_unix_ms > now {
                    // The first live claim holds; a dead claimant's lapses.
                    claims.retain(|_, held| held.until > now);
                    claims.entry(key).or_insert_with(|| Claim { by: entry.by.clone(), until: claim.until_unix_ms });
                } else if claims.get(&key).is_some_and(|held| held.by == entry.by) {
                    claims.remove(&key);
                }
            }
            _ => return,
        }
        self.folded.send_modify(|folded| *folded += 1);
    }
}

/// Releases a claim when dropped armed: the call failed, or was dropped before its answer.
struct Release<'a> {
    cache: &'a Cache,
    key: Option<Key>,
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        if let (Some(key), Some(sharing)) = (self.key, &self.cache.shared) {
            let _ = sharing.outbox.send(Outgoing::Claim(key, 0));
        }
    }
}

/// Folds the step's log into a cache.
#[derive(Debug, Clone)]
struct Others(Arc<Cache>);

impl Fold for Others {
    fn fold(&self, entry: &v1::ControlEvent) {
        if let Some(sharing) = &self.0.shared {
            self.0.fold(entry, &sharing.own);
        }
    }
}

/// `cache`, filled from the log `log` (read to its end before this returns, then followed) as
/// process `id`; every answer it takes from the model is appended for the others, and every
/// call it is about to send is claimed first.
pub async fn shared<T: Transport>(
    transport: T,
    log: String,
    id: &str,
    cache: Cache,
) -> Result<Arc<Cache>, ControlError> {
    let (outbox, mut outgoing) = mpsc::unbounded_channel();
    let cache = Arc::new(Cache { shared: Some(Sharing { own: id.into(), outbox }), ..cache });
    let log = ControlLog::follow(transport, log, id, Others(cache.clone()), None).await?;
    tokio::spawn(async move {
        while let Some(entry) = outgoing.recv().await {
            let event = match entry {
                Outgoing::Answer(key, response) => {
                    Event::Sampled(v1::SampledAnswer { key: key.0.to_vec(), response: response.to_vec() })
                }
                Outgoing::Claim(key, until_unix_ms) => {
                    Event::Claim(v1::SampleClaim { key: key.0.to_vec(), until_unix_ms })
                }
            };
            if let Err(error) = log.append(event).await {
                // The others ask the model themselves: a cost, never a wrong answer.
                warn!(%error, "An entry was not shared with the step's other monitor processes.");
            }
        }
    });
    Ok(cache)
}

/// Answers by key, the least recently used dropped beyond `capacity`.
#[derive(Debug)]
struct Lru {
    capacity: usize,
    /// Each answer with the tick of its last use.
    entries: HashMap<Key, (Bytes, u64)>,
    /// Keys by the tick of their last use.
    order: BTreeMap<u64, Key>,
    tick: u64,
}

impl Lru {
    fn new(capacity: usize) -> Self {
        Lru { capacity, entries: HashMap::new(), order: BTreeMap::new(), tick: 0 }
    }

    fn get(&mut self, key: &Key) -> Option<Bytes> {
        let (answer, used) = self.entries.get_mut(key)?;
        self.order.remove(used);
        self.tick += 1;
        *used = self.tick;
        self.order.insert(self.tick, *key);
        Some(answer.clone())
    }

    fn insert(&mut self, key: Key, answer: Bytes) {
        if self.capacity == 0 {
            return;
        }
        self.tick += 1;
        if let Some((_, used)) = self.entries.insert(key, (answer, self.tick)) {
            self.order.remove(&used);
        }
        self.order.insert(self.tick, key);
        while self.entries.len() > self.capacity {
            let Some((_, oldest)) = self.order.pop_first() else { break };
            self.entries.remove(&oldest);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
