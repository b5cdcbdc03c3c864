//! The in-process transport: queues and exchanges in memory, for `airlock demo` and fast
//! tests.
//!
//! It mirrors what the AMQP transport does against RabbitMQ, as far as a caller can observe:
//! publishing to a missing queue is unroutable; fanout and topic exchanges copy a message to
//! every matching bound queue; a consumer holds at most `prefetch` unsettled deliveries;
//! rejected messages, and messages returned more than the delivery limit, go to the queue's
//! dead-letter exchange with `x-first-death-*` headers; unsettled deliveries of a dropped
//! consumer go back to the front of their queue, marked redelivered.
//!
//! All state sits behind one `std::sync::Mutex`, never held across an `.await`. Consumers pull:
//! each waits on its queue's [`Notify`], which is woken whenever a message arrives or a
//! settlement frees prefetch room.

use std::{
    collections::{HashMap, VecDeque},
    pin::pin,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use tokio::sync::Notify;

use crate::{
    Consumer, Delivery, Destination, Follower, Message, Topology, Transport, TransportError,
    delivery::{Acker, AckerInner},
    message::{DEATH_DELIVERY_LIMIT, DEATH_REJECTED, HEADER_FIRST_DEATH_QUEUE, HEADER_FIRST_DEATH_REASON, check_short},
    topology::{ExchangeKind, QueueKind},
};

/// The in-process transport. Clones share the same queues.
#[derive(Clone, Debug, Default)]
pub struct MemoryTransport {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    /// Never changes: nothing reconnects in process.
    reconnects: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct State {
    exchanges: HashMap<String, MemExchange>,
    queues: HashMap<String, MemQueue>,
    next_consumer: u64,
    closed: bool,
}

#[derive(Debug)]
struct MemExchange {
    kind: ExchangeKind,
    /// (queue, binding key)
    bindings: Vec<(String, String)>,
}

#[derive(Debug)]
struct MemQueue {
    kind: QueueKind,
    ready: VecDeque<Stored>,
    /// A log's entries, all kept.
    entries: Vec<Message>,
    unacked: HashMap<u64, Unacked>,
    /// Unsettled deliveries per live consumer.
    consumers: HashMap<u64, usize>,
    next_tag: u64,
    notify: Arc<Notify>,
}

#[derive(Debug)]
struct Stored {
    message: Message,
    redelivered: bool,
    delivery_count: u32,
}

#[derive(Debug)]
struct Unacked {
    consumer: u64,
    stored: Stored,
}

/// How a delivery is settled.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Settle {
    Ack,
    /// This delivery and every earlier unsettled one of its consumer.
    AckThrough,
    Requeue,
    Reject,
}

// === impl MemoryTransport ===

impl MemoryTransport {
    /// An empty broker.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind, still consistent enough for
        // a test transport: keep going rather than poison every later call.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Transport for MemoryTransport {
    async fn declare(&self, topology: &Topology) -> Result<(), TransportError> {
        let mut state = self.state();
        state.check_open()?;
        for exchange in topology.exchanges() {
            check_short("exchange name", &exchange.name)?;
            match state.exchanges.get(&exchange.name) {
                Some(existing) if existing.kind != exchange.kind => {
                    return Err(precondition(format!("exchange {}", exchange.name)));
                }
                Some(_) => {}
                None => {
                    state
                        .exchanges
                        .insert(exchange.name.clone(), MemExchange { kind: exchange.kind, bindings: Vec::new() });
                }
            }
        }
        for queue in topology.queues() {
            check_short("queue name", &queue.name)?;
            match state.queues.get(&queue.name) {
                Some(existing) if existing.kind != queue.kind => {
                    return Err(precondition(format!("queue {}", queue.name)));
                }
                Some(_) => {}
                None => {
                    state.queues.insert(queue.name.clone(), MemQueue::new(queue.kind.clone()));
                }
            }
        }
        for binding in topology.bindings() {
            check_short("routing key", &binding.routing_key)?;
            if !state.queues.contains_key(&binding.queue) {
                return Err(TransportError::NotFound { what: format!("queue {}", binding.queue) });
            }
            let Some(exchange) = state.exchanges.get_mut(&binding.exchange) else {
                return Err(TransportError::NotFound { what: format!("exchange {}", binding.exchange) });
            };
            let pair = (binding.queue.clone(), binding.routing_key.clone());
            if !exchange.bindings.contains(&pair) {
                exchange.bindings.push(pair);
            }
        }
        Ok(())
    }

    async fn delete(&self, topology: &Topology) -> Result<(), TransportError> {
        let mut state = self.state();
        for queue in topology.queues() {
            if let Some(removed) = state.queues.remove(&queue.name) {
                removed.notify.notify_waiters();
            }
            for exchange in state.exchanges.values_mut() {
                exchange.bindings.retain(|(bound, _)| *bound != queue.name);
            }
        }
        for exchange in topology.exchanges() {
            state.exchanges.remove(&exchange.name);
        }
        Ok(())
    }

    async fn publish(&self, destination: &Destination, message: Message) -> Result<(), TransportError> {
        message.validate()?;
        let mut state = self.state();
        state.check_open()?;
        match destination {
            Destination::Queue(name) => match state.queues.get_mut(name) {
                Some(queue) => {
                    queue.push_back(Stored::new(message));
                    Ok(())
                }
                None => Err(TransportError::Unroutable { destination: destination.to_string() }),
            },
            Destination::Exchange { exchange, routing_key } => {
                state.route(exchange, std::slice::from_ref(routing_key), message).map(drop)
            }
            Destination::Route { exchange, routing_key, copies } => {
                let keys: Vec<String> = std::iter::once(routing_key).chain(copies).cloned().collect();
                match state.route(exchange, &keys, message)? {
                    0 => Err(TransportError::Unroutable { destination: destination.to_string() }),
                    _ => Ok(()),
                }
            }
        }
    }

    async fn consume(&self, queue: &str, prefetch: u16) -> Result<Consumer, TransportError> {
        let mut state = self.state();
        state.check_open()?;
        let id = state.next_consumer;
        state.next_consumer += 1;
        let Some(mem_queue) = state.queues.get_mut(queue) else {
            return Err(TransportError::NotFound { what: format!("queue {queue}") });
        };
        mem_queue.consumers.insert(id, 0);
        Ok(Consumer::memory(MemoryConsumer {
            shared: self.shared.clone(),
            queue: queue.into(),
            id,
            prefetch: usize::from(prefetch),
            notify: mem_queue.notify.clone(),
            cancelled: false,
        }))
    }

    async fn follow(&self, log: &str) -> Result<Follower, TransportError> {
        let state = self.state();
        state.check_open()?;
        match state.queues.get(log) {
            Some(queue) if matches!(queue.kind, QueueKind::Log { .. }) => Ok(Follower::memory(MemoryFollower {
                shared: self.shared.clone(),
                log: log.into(),
                read: 0,
                notify: queue.notify.clone(),
            })),
            Some(_) => Err(precondition(format!("queue {log} is not a log"))),
            None => Err(TransportError::NotFound { what: format!("queue {log}") }),
        }
    }

    fn reconnects(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.reconnects.subscribe()
    }

    async fn message_count(&self, queue: &str) -> Result<u32, TransportError> {
        let state = self.state();
        state.check_open()?;
        match state.queues.get(queue) {
            Some(queue) => Ok(u32::try_from(queue.ready.len()).unwrap_or(u32::MAX)),
            None => Err(TransportError::NotFound { what: format!("queue {queue}") }),
        }
    }

    async fn close(&self) {
        let mut state = self.state();
        state.closed = true;
        for queue in state.queues.values() {
            queue.notify.notify_waiters();
        }
    }
}

fn precondition(what: String) -> TransportError {
    TransportError::Precondition { what, source: None }
}

// === impl State ===

impl State {
    fn check_open(&self) -> Result<(), TransportError> {
        if self.closed { Err(TransportError::Closed) } else { Ok(()) }
    }

    /// Routes `message` through `exchange` under each of `routing_keys`, copying it to every
    /// matching bound queue; returns how many queues got it.
    fn route(&mut self, exchange: &str, routing_keys: &[String], message: Message) -> Result<usize, TransportError> {
        let mut targets: Vec<&str> = if exchange.is_empty() {
            // The default exchange: straight to the queue named by the key, if any.
            routing_keys.iter().map(String::as_str).collect()
        } else {
            let Some(found) = self.exchanges.get(exchange) else {
                return Err(TransportError::NotFound { what: format!("exchange {exchange}") });
            };
            found
                .bindings
                .iter()
                .filter(|(_, key)| match found.kind {
                    ExchangeKind::Fanout => true,
                    ExchangeKind::Topic => routing_keys.iter().any(|routing_key| topic_matches(key, routing_key)),
                })
                .map(|(queue, _)| queue.as_str())
                .collect()
        };
        // A queue bound twice (two keys, or reached by two keys) gets one copy, as on RabbitMQ.
        targets.sort_unstable();
        targets.dedup();
        let targets: Vec<String> = targets.into_iter().map(str::to_owned).collect();
        let mut reached = 0;
        for queue in targets {
            if let Some(queue) = self.queues.get_mut(&queue) {
                queue.push_back(Stored::new(message.clone()));
                reached += 1;
            }
        }
        Ok(reached)
    }

    /// Returns an unsettled message to the front of `queue`, or dead-letters it once it was
    /// returned more often than the queue's delivery limit.
    fn give_back(&mut self, queue: &str, mut stored: Stored) {
        stored.redelivered = true;
        stored.delivery_count = stored.delivery_count.saturating_add(1);
        let Some(mem_queue) = self.queues.get_mut(queue) else {
            return;
        };
        if let QueueKind::Work { delivery_limit, .. } = mem_queue.kind
            && stored.delivery_count > delivery_limit
        {
            self.dead_letter(queue, stored, DEATH_DELIVERY_LIMIT);
            return;
        }
        mem_queue.ready.push_front(stored);
        mem_queue.notify.notify_waiters();
    }

    /// Sends a message of `queue` to its dead-letter exchange, if it has one.
    fn dead_letter(&mut self, queue: &str, stored: Stored, reason: &str) {
        let Some(QueueKind::Work { dead_letter_exchange, .. }) = self.queues.get(queue).map(|q| q.kind.clone()) else {
            return;
        };
        let mut message = stored.message;
        if !message.headers.contains_key(HEADER_FIRST_DEATH_REASON) {
            message.headers.insert(HEADER_FIRST_DEATH_REASON.to_owned(), reason.to_owned());
            message.headers.insert(HEADER_FIRST_DEATH_QUEUE.to_owned(), queue.to_owned());
        }
        // A missing dead-letter exchange drops the message, as RabbitMQ does.
        let _ = self.route(&dead_letter_exchange, &[queue.to_owned()], message);
    }
}

/// Whether a topic binding key matches a routing key: words are separated by dots, `*`
/// matches exactly one word and `#` zero or more.
fn topic_matches(pattern: &str, key: &str) -> bool {
    fn words(pattern: &[&str], key: &[&str]) -> bool {
        match pattern.split_first() {
            None => key.is_empty(),
            Some((&"#", rest)) => (0..=key.len()).any(|skip| words(rest, &key[skip..])),
            Some((&word, rest)) => match key.split_first() {
                Some((&first, key_rest)) => (word == "*" || word == first) && words(rest, key_rest),
                None => false,
            },
        }
    }
    let pattern: Vec<&str> = pattern.split('.').collect();
    let key: Vec<&str> = key.split('.').collect();
    words(&pattern, &key)
}

// === impl MemQueue ===

impl MemQueue {
    fn new(kind: QueueKind) -> Self {
        Self {
            kind,
            ready: VecDeque::new(),
            entries: Vec::new(),
            unacked: HashMap::new(),
            consumers: HashMap::new(),
            next_tag: 0,
            notify: Arc::new(Notify::new()),
        }
    }

    fn push_back(&mut self, stored: Stored) {
        match self.kind {
            QueueKind::Log { .. } => self.entries.push(stored.message),
            _ => self.ready.push_back(stored),
        }
        self.notify.notify_waiters();
    }
}

impl Stored {
    fn new(message: Message) -> Self {
        Self { message, redelivered: false, delivery_count: 0 }
    }
}

// === impl MemoryConsumer ===

/// A consumer of an in-process queue.
#[derive(Debug)]
pub(crate) struct MemoryConsumer {
    shared: Arc<Shared>,
    queue: Arc<str>,
    id: u64,
    /// `0`: unlimited.
    prefetch: usize,
    notify: Arc<Notify>,
    cancelled: bool,
}

enum Take {
    /// Boxed: a delivery is large, and most takes wait.
    Got(Box<Delivery>),
    Wait,
    End,
}

impl MemoryConsumer {
    pub(crate) fn queue(&self) -> &str {
        &self.queue
    }

    pub(crate) async fn next(&mut self) -> Option<Delivery> {
        loop {
            if self.cancelled {
                return None;
            }
            // Registered before looking, so a wake-up between the look and the wait is kept.
            let mut notified = pin!(self.notify.notified());
            notified.as_mut().enable();
            match self.take() {
                Take::Got(delivery) => return Some(*delivery),
                Take::End => return None,
                Take::Wait => notified.await,
            }
        }
    }

    fn take(&self) -> Take {
        let mut state = self.shared.lock();
        if state.closed {
            return Take::End;
        }
        let Some(queue) = state.queues.get_mut(&*self.queue) else {
            return Take::End;
        };
        let Some(unsettled) = queue.consumers.get_mut(&self.id) else {
            return Take::End;
        };
        if self.prefetch != 0 && *unsettled >= self.prefetch {
            return Take::Wait;
        }
        let Some(stored) = queue.ready.pop_front() else {
            return Take::Wait;
        };
        *unsettled += 1;
        let tag = queue.next_tag;
        queue.next_tag += 1;
        let delivery = Delivery::new(
            stored.message.clone(),
            stored.redelivered,
            stored.delivery_count,
            Acker(AckerInner::Memory(MemoryAcker { shared: self.shared.clone(), queue: self.queue.clone(), tag })),
        );
        queue.unacked.insert(tag, Unacked { consumer: self.id, stored });
        Take::Got(Box::new(delivery))
    }

    pub(crate) fn cancel(&mut self) {
        self.cancelled = true;
    }
}

impl Drop for MemoryConsumer {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        let Some(queue) = state.queues.get_mut(&*self.queue) else {
            return;
        };
        queue.consumers.remove(&self.id);
        let mut tags: Vec<u64> =
            queue.unacked.iter().filter(|(_, unacked)| unacked.consumer == self.id).map(|(tag, _)| *tag).collect();
        // Newest first, each pushed to the front: the oldest ends up first, as delivered.
        tags.sort_unstable_by(|a, b| b.cmp(a));
        let returned: Vec<Stored> =
            tags.into_iter().filter_map(|tag| queue.unacked.remove(&tag)).map(|unacked| unacked.stored).collect();
        for stored in returned {
            state.give_back(&self.queue, stored);
        }
    }
}

// === impl MemoryFollower ===

/// A reader of an in-process log.
#[derive(Debug)]
pub(crate) struct MemoryFollower {
    shared: Arc<Shared>,
    log: Arc<str>,
    /// Entries returned so far.
    read: usize,
    notify: Arc<Notify>,
}

impl MemoryFollower {
    pub(crate) async fn next(&mut self) -> Option<Message> {
        loop {
            let mut notified = pin!(self.notify.notified());
            notified.as_mut().enable();
            {
                let state = self.shared.lock();
                if state.closed {
                    return None;
                }
                let entry = state.queues.get(&*self.log)?.entries.get(self.read).cloned();
                if let Some(message) = entry {
                    self.read += 1;
                    return Some(message);
                }
            }
            notified.await;
        }
    }
}

// === impl MemoryAcker ===

/// Settles one in-process delivery.
#[derive(Debug)]
pub(crate) struct MemoryAcker {
    shared: Arc<Shared>,
    queue: Arc<str>,
    tag: u64,
}

impl MemoryAcker {
    pub(crate) fn queue(&self) -> &str {
        &self.queue
    }

    pub(crate) fn settle(self, how: Settle) -> Result<(), TransportError> {
        let mut state = self.shared.lock();
        if state.closed {
            return Err(TransportError::ChannelClosed);
        }
        let Some(queue) = state.queues.get_mut(&*self.queue) else {
            return Err(TransportError::ChannelClosed);
        };
        let Some(unacked) = queue.unacked.remove(&self.tag) else {
            return Err(TransportError::ChannelClosed);
        };
        let mut settled = 1;
        if let Settle::AckThrough = how {
            let before = queue.unacked.len();
            queue.unacked.retain(|tag, earlier| *tag > self.tag || earlier.consumer != unacked.consumer);
            settled += before - queue.unacked.len();
        }
        if let Some(unsettled) = queue.consumers.get_mut(&unacked.consumer) {
            *unsettled = unsettled.saturating_sub(settled);
        }
        queue.notify.notify_waiters();
        match how {
            Settle::Ack | Settle::AckThrough => {}
            Settle::Requeue => state.give_back(&self.queue, unacked.stored),
            Settle::Reject => state.dead_letter(&self.queue, unacked.stored, DEATH_REJECTED),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::topic_matches;

    #[test]
    fn topic_patterns() {
        assert!(topic_matches("#", "a.b.c"));
        assert!(topic_matches("#", ""));
        assert!(topic_matches("a.*", "a.b"));
        assert!(!topic_matches("a.*", "a.b.c"));
        assert!(topic_matches("a.#", "a"));
        assert!(topic_matches("a.#.c", "a.b.b.c"));
        assert!(topic_matches("*.reject", "approval.reject"));
        assert!(!topic_matches("*.reject", "approval.approve"));
        assert!(topic_matches("decision", "decision"));
        assert!(!topic_matches("decision", "decisions"));
    }
}
