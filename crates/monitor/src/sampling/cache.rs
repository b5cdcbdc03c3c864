//! Model answers by [`Key`]: a bounded LRU in each process, single flight for concurrent
//! identical calls, and the step's log of answers `<p>.samples.<step>`, which every process
//! serving the step appends to and follows, so that an answer one process paid for is never
//! asked for again by another while the log keeps it. Only successful answers are kept.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use airlock_contract::v1::{self, control_event::Event};
use airlock_control::{ControlError, ControlLog, Fold};
use airlock_telemetry::metrics::{Metrics, OutcomeLabels};
use airlock_transport::Transport;
use bytes::Bytes;
use tokio::sync::mpsc;
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
    /// Answers to append to the step's log.
    outbox: Option<mpsc::UnboundedSender<(Key, Bytes)>>,
    metrics: Arc<Metrics>,
}

impl Cache {
    /// A cache of at most `entries` answers, counting hits and misses in `metrics`.
    pub fn new(entries: usize, metrics: Arc<Metrics>) -> Self {
        Cache { answers: Mutex::new(Lru::new(entries)), flights: Mutex::default(), outbox: None, metrics }
    }

    /// What `read` makes of the answer for `key`: one known (in memory, from this process or
    /// the step's log), that of an identical call in flight, or else `ask`'s, kept and shared
    /// if `read` takes it (an answer it cannot read is an error, and errors are never kept).
    pub async fn get_or_ask<T>(
        &self,
        key: Key,
        ask: impl Future<Output = Result<Bytes, AttemptError>>,
        read: impl Fn(&[u8]) -> Result<T, AttemptError>,
    ) -> Result<T, AttemptError> {
        if let Some(answer) = self.hit(&key) {
            return read(&answer);
        }
        let flight = lock(&self.flights).entry(key).or_default().clone();
        let turn = flight.lock().await;
        // A call that waited for an identical one takes its answer.
        let result = match self.hit(&key) {
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

    async fn ask<T>(
        &self,
        key: Key,
        ask: impl Future<Output = Result<Bytes, AttemptError>>,
        read: impl Fn(&[u8]) -> Result<T, AttemptError>,
    ) -> Result<T, AttemptError> {
        let answer = ask.await?;
        let value = read(&answer)?;
        lock(&self.answers).insert(key, answer.clone());
        if let Some(outbox) = &self.outbox {
            let _ = outbox.send((key, answer));
        }
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
}

/// Takes the answers other processes of the step appended.
#[derive(Debug, Clone)]
struct Others {
    cache: Arc<Cache>,
    own: Arc<str>,
}

impl Fold for Others {
    fn fold(&self, entry: &v1::ControlEvent) {
        if let Some(Event::Sampled(sampled)) = &entry.event
            && *entry.by != *self.own
        {
            match Key::from_slice(&sampled.key) {
                Some(key) => lock(&self.cache.answers).insert(key, Bytes::copy_from_slice(&sampled.response)),
                None => debug!(by = %entry.by, "Sampled answer skipped: its key is not a SHA-256."),
            }
        }
    }
}

/// `cache`, filled from the log `log` (read to its end before this returns, then followed) as
/// process `id`; every answer it takes from the model is appended for the others.
pub async fn shared<T: Transport>(
    transport: T,
    log: String,
    id: &str,
    cache: Cache,
) -> Result<Arc<Cache>, ControlError> {
    let (outbox, mut answers) = mpsc::unbounded_channel();
    let cache = Arc::new(Cache { outbox: Some(outbox), ..cache });
    let others = Others { cache: cache.clone(), own: id.into() };
    let log = ControlLog::follow(transport, log, id, others, None).await?;
    tokio::spawn(async move {
        while let Some((key, response)) = answers.recv().await {
            let entry = v1::SampledAnswer { key: key.0.to_vec(), response: response.to_vec() };
            if let Err(error) = log.append(Event::Sampled(entry)).await {
                // The others ask the model themselves: a cost, never a wrong answer.
                warn!(%error, "A model answer was not shared with the step's other monitor processes.");
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
