//! The calls waiting for a decision: one slab of calls, found by correlation id, and their
//! timers (deadlines and repeats) in order.
//!
//! Sans I/O: the client locks one [`Table`]; its publisher takes what to publish from it, its
//! reply reader, deadline sweeper and publisher settle calls in it, and each caller's future
//! polls its own entry. A waiting call is what a publish, a fail-closed decision and the
//! reply's proof need, and no more: the request as published (shared with the publishes,
//! never copied; the key, origin and times of a fail-closed decision are read back from it,
//! and the digest a reply's proof must be bound to is taken from it when a reply comes), its
//! correlation id, held once, and its caller's waker. There is no channel per call: a settled
//! call keeps its outcome in its entry until its caller takes it.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashSet, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use airlock_contract::v1;
use hashbrown::HashTable;
use slab::Slab;
use tokio::time::Instant;

use crate::{ClientError, Repeats};

/// How a call ended, as its caller hears it.
pub(crate) type Outcome = Result<v1::Decision, ClientError>;

/// Trace context headers (W3C `traceparent`, `tracestate`), as published with a request.
pub type TraceHeaders = BTreeMap<String, String>;

/// A registered call's name: its slot in the table, and which registration it is. Once a
/// call ended, a later one may take its slot (and its correlation id): what is meant for the
/// first (its caller giving up, a late settlement, its deadline) must not touch the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct CallId {
    /// Counts every registration of the table; first, so that equal deadlines come out in
    /// the order their calls came.
    registration: u64,
    slot: usize,
}

/// One call, from its registration until its caller takes its outcome.
pub(crate) struct Call {
    /// The kind and call key, as the request and its reply carry them.
    correlation: Box<str>,
    /// Which registration it is (see [`CallId`]).
    registration: u64,
    state: State,
}

enum State {
    /// No outcome yet.
    Waiting {
        /// The encoded request, as published.
        request: Arc<[u8]>,
        /// The trace context the request was published with, if a span was recording: a
        /// resend carries it too. Boxed: most calls have none.
        #[allow(clippy::box_collection)]
        trace: Option<Box<TraceHeaders>>,
        /// The caller's waker, once it polled.
        caller: Option<Waker>,
    },
    /// Decided, failed closed or failed; boxed, as few calls are in this state at once.
    Settled(Box<Outcome>),
}

impl Call {
    /// A call waiting for the reply to `request`, published under `correlation`.
    pub(crate) fn new(correlation: String, request: Arc<[u8]>, trace: Option<TraceHeaders>) -> Self {
        let state = State::Waiting { request, trace: trace.map(Box::new), caller: None };
        Call { correlation: correlation.into_boxed_str(), registration: 0, state }
    }

    fn is_waiting(&self) -> bool {
        matches!(self.state, State::Waiting { .. })
    }

    /// Its request, while it waits.
    fn request(&self) -> Option<&Arc<[u8]>> {
        match &self.state {
            State::Waiting { request, .. } => Some(request),
            State::Settled(_) => None,
        }
    }
}

/// Why a call could not be registered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A call with this correlation id is waiting (or its caller has yet to take its
    /// outcome).
    AlreadyPending(Box<str>),
    /// The client is closed.
    Closed,
}

/// A registered call, and what registering it changed for the client's background tasks.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Inserted {
    /// The call's name in the table.
    pub(crate) call: CallId,
    /// Its deadline is the earliest now: the sweeper has to wake sooner than it planned.
    pub(crate) earliest: bool,
    /// Nothing else was waiting to be published: the publisher may be idle.
    pub(crate) first_to_publish: bool,
}

/// A call that was just settled: its caller, to wake once the table is unlocked.
#[must_use]
pub(crate) struct Settled(Option<Waker>);

impl Settled {
    pub(crate) fn wake(self) {
        if let Some(waker) = self.0 {
            waker.wake();
        }
    }
}

/// A waiting call's request, to publish (again).
pub(crate) struct Publish {
    pub(crate) call: CallId,
    pub(crate) correlation: String,
    pub(crate) request: Arc<[u8]>,
    pub(crate) trace: Option<TraceHeaders>,
}

/// What came up at a sweep: the calls to fail closed, and how many were repeated.
#[derive(Default)]
pub(crate) struct TakenDue {
    pub(crate) due: Vec<Due>,
    pub(crate) repeated: usize,
}

/// A waiting call whose deadline passed, with its request: it waits to be failed closed.
pub(crate) struct Due {
    pub(crate) call: CallId,
    pub(crate) request: Arc<[u8]>,
}

/// A waiting call's next timer: its next repeat, or its deadline when no repeat comes first.
/// Ordered by when it comes up, then by call (the order calls came in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Timer {
    at: Instant,
    call: CallId,
    /// When the call fails closed.
    deadline: Instant,
    /// Repeats made so far.
    repeats: u8,
}

impl Timer {
    fn is_deadline(&self) -> bool {
        self.at == self.deadline
    }
}

/// Timers of calls that no longer wait are left in the index (until they come up) as long
/// as they are fewer than the waiting calls, plus this many.
const STALE_TIMERS: usize = 64;

/// The soft deadline is this many times the reply latency seen (within the bounds of
/// [`Repeats`]).
const SOFT_DEADLINE_FACTOR: u32 = 8;

/// Repeats a client may make in a burst; each call answered gives back a tenth of one. A fleet
/// that answers nothing (all its workers away) gets at most this many repeats, not every
/// waiting call published again three times over. Counted in tenths of a repeat.
const REPEAT_BURST: u32 = 1_000;
const TENTHS: u32 = 10;

/// The reply latency seen, smoothed as TCP smooths its round-trip time (each new sample
/// weighs an eighth).
#[derive(Debug, Default)]
struct Latency(Option<Duration>);

impl Latency {
    fn observe(&mut self, sample: Duration) {
        self.0 = Some(match self.0 {
            Some(smoothed) => (smoothed * 7 + sample) / 8,
            None => sample,
        });
    }
}

/// Every call of a client, found by correlation id; the waiting ones by deadline and by when
/// they are repeated; and the ones not yet handed to the publisher.
///
/// A call not answered within its soft deadline (a multiple of the reply latency seen, within
/// bounds) is published again, at most [`Repeats::at_most`] times, the wait doubling each time
/// and never past its deadline: a request held by a worker whose link went silent is answered
/// by another worker instead of waiting for the broker to find the link dead. A call a step
/// holds (a progress came: a worker handed it to an external step, or a reviewer service took
/// it) is repeated no more. The first proved answer settles the call; the others are ignored.
pub(crate) struct Table {
    calls: Slab<Call>,
    /// The slots of `calls`, hashed by their correlation id (which only the call holds).
    by_correlation: HashTable<usize>,
    hasher: RandomState,
    /// The waiting calls' timers, earliest on top. A call that stops waiting leaves its
    /// entries behind, to be dropped when they reach the top or when such entries outnumber
    /// the waiting calls' own: the top is always a waiting call's.
    timers: BinaryHeap<Reverse<Timer>>,
    /// Waiting calls a step holds: they are not repeated.
    held: HashSet<CallId>,
    repeats: Repeats,
    /// Reply latency of the calls answered without being held.
    latency: Latency,
    /// Tenths of the repeats that may be made now (see [`REPEAT_BURST`]).
    repeat_budget: u32,
    /// Repeats made so far.
    repeated: u64,
    /// Calls to publish, in the order they came.
    outbox: VecDeque<CallId>,
    /// Registrations so far.
    registrations: u64,
    /// Calls waiting (the others are settled, their outcome not yet taken).
    waiting: usize,
    closed: bool,
}

impl Table {
    /// An empty table whose calls are repeated as `repeats` says.
    pub(crate) fn new(repeats: Repeats) -> Self {
        Table {
            calls: Slab::new(),
            by_correlation: HashTable::new(),
            hasher: RandomState::new(),
            timers: BinaryHeap::new(),
            held: HashSet::new(),
            repeats,
            latency: Latency::default(),
            repeat_budget: REPEAT_BURST * TENTHS,
            repeated: 0,
            outbox: VecDeque::new(),
            registrations: 0,
            waiting: 0,
            closed: false,
        }
    }

    /// Registers `call`, to be published, repeated while unanswered, and failed closed at
    /// `deadline`; `now` is when it was asked.
    pub(crate) fn insert(&mut self, mut call: Call, now: Instant, deadline: Instant) -> Result<Inserted, Refused> {
        if self.closed {
            return Err(Refused::Closed);
        }
        if self.find(&call.correlation).is_some() {
            return Err(Refused::AlreadyPending(call.correlation));
        }
        let first = self.first_timer(now, deadline, 0);
        let earliest = self.next_timer().is_none_or(|next| first < next);
        let first_to_publish = self.outbox.is_empty();
        self.registrations += 1;
        call.registration = self.registrations;
        let hash = self.hasher.hash_one(&*call.correlation);
        let slot = self.calls.insert(call);
        let (calls, hasher) = (&self.calls, &self.hasher);
        self.by_correlation.insert_unique(hash, slot, |&slot| hasher.hash_one(&*calls[slot].correlation));
        let id = CallId { registration: self.registrations, slot };
        self.timers.push(Reverse(Timer { at: first, call: id, deadline, repeats: 0 }));
        self.outbox.push_back(id);
        self.waiting += 1;
        Ok(Inserted { call: id, earliest, first_to_publish })
    }

    /// The slot of the call registered under `correlation`, whatever its state.
    fn find(&self, correlation: &str) -> Option<usize> {
        let hash = self.hasher.hash_one(correlation);
        self.by_correlation.find(hash, |&slot| *self.calls[slot].correlation == *correlation).copied()
    }

    /// The call named `id`, if it is still there.
    fn call(&self, id: CallId) -> Option<&Call> {
        self.calls.get(id.slot).filter(|call| call.registration == id.registration)
    }

    fn call_mut(&mut self, id: CallId) -> Option<&mut Call> {
        self.calls.get_mut(id.slot).filter(|call| call.registration == id.registration)
    }

    fn is_waiting(&self, id: CallId) -> bool {
        self.call(id).is_some_and(Call::is_waiting)
    }

    /// How long a call waits unanswered before it is published again: the reply latency seen
    /// times [`SOFT_DEADLINE_FACTOR`], within the bounds of [`Repeats`] (the longest until a
    /// reply was seen).
    fn soft_deadline(&self) -> Duration {
        let Repeats { floor, ceiling, .. } = self.repeats;
        self.latency.0.map_or(ceiling, |latency| (latency * SOFT_DEADLINE_FACTOR).clamp(floor, ceiling))
    }

    /// When a call that was repeated `repeats` times by `now` comes up next: at its next
    /// repeat (the soft deadline, doubled for each repeat made), or at its deadline.
    fn first_timer(&self, now: Instant, deadline: Instant, repeats: u8) -> Instant {
        if repeats >= self.repeats.at_most {
            return deadline;
        }
        let repeat = now.checked_add(self.soft_deadline() * (1 << repeats.min(16)));
        repeat.filter(|at| *at < deadline).unwrap_or(deadline)
    }

    /// Takes note that a reply answered the waiting call `id` after `latency`: unless a step
    /// held it, that is how long the fleet takes to answer, and a repeat may be made again.
    pub(crate) fn answered(&mut self, id: CallId, latency: Duration) {
        if self.is_waiting(id) && !self.held.contains(&id) {
            self.latency.observe(latency);
            self.repeat_budget = (self.repeat_budget + 1).min(REPEAT_BURST * TENTHS);
        }
    }

    /// Takes note that a step holds the waiting call `id`: it is not repeated any more.
    pub(crate) fn hold(&mut self, id: CallId) {
        if self.is_waiting(id) {
            self.held.insert(id);
        }
    }

    /// Takes the call named `id` out of the table (it is there).
    fn remove(&mut self, id: CallId) -> Call {
        self.unhold(id);
        let call = self.calls.remove(id.slot);
        let hash = self.hasher.hash_one(&*call.correlation);
        if let Ok(entry) = self.by_correlation.find_entry(hash, |&slot| slot == id.slot) {
            entry.remove();
        }
        call
    }

    /// The next call to publish, skipping those that ended before their turn came.
    pub(crate) fn next_to_publish(&mut self) -> Option<Publish> {
        while let Some(id) = self.outbox.pop_front() {
            if let Some(publish) = self.call(id).and_then(|call| publish(id, call)) {
                return Some(publish);
            }
        }
        // A burst's worth of room is not kept once it is drained.
        self.outbox.shrink_to(64);
        None
    }

    /// The waiting call a reply with this correlation id would answer, with its request (the
    /// reply's proof must be bound to its digest).
    pub(crate) fn awaiting(&self, correlation: &str) -> Option<(CallId, Arc<[u8]>)> {
        let slot = self.find(correlation)?;
        let call = &self.calls[slot];
        let request = call.request()?.clone();
        Some((CallId { registration: call.registration, slot }, request))
    }

    /// Settles the call named `id` with `outcome`, if it still waits.
    pub(crate) fn settle(&mut self, id: CallId, outcome: Outcome) -> Option<Settled> {
        let call = self.call_mut(id).filter(|call| call.is_waiting())?;
        // What only a waiting call needs (its request, its trace) goes now, not when its
        // caller comes for the outcome.
        let State::Waiting { caller, .. } = std::mem::replace(&mut call.state, State::Settled(Box::new(outcome)))
        else {
            unreachable!("filtered on waiting");
        };
        self.waiting -= 1;
        self.unhold(id);
        self.prune_timers();
        Some(Settled(caller))
    }

    /// The outcome of the call named `id` once it is settled (which ends the call); otherwise
    /// `waker` is woken when it is. A call that is gone was dropped when the client closed.
    pub(crate) fn poll(&mut self, id: CallId, waker: &Waker) -> Poll<Outcome> {
        let Some(call) = self.call_mut(id) else {
            return Poll::Ready(Err(ClientError::Closed));
        };
        match &mut call.state {
            State::Waiting { caller: Some(known), .. } if known.will_wake(waker) => Poll::Pending,
            State::Waiting { caller, .. } => {
                *caller = Some(waker.clone());
                Poll::Pending
            }
            State::Settled(_) => match self.remove(id).state {
                State::Settled(outcome) => Poll::Ready(*outcome),
                State::Waiting { .. } => unreachable!("the call was just found settled"),
            },
        }
    }

    /// Takes out the call named `id`, whatever its state: its caller stopped waiting.
    pub(crate) fn forget(&mut self, id: CallId) {
        if self.call(id).is_some() && self.remove(id).is_waiting() {
            self.waiting -= 1;
            self.prune_timers();
        }
    }

    fn unhold(&mut self, id: CallId) {
        if !self.held.is_empty() {
            self.held.remove(&id);
        }
    }

    /// Drops the timers of calls that no longer wait: from the top, so that the top is a
    /// waiting call's, and from the whole index once they outnumber the waiting calls' own
    /// (which makes each sweep cost no more than the removals that left them behind).
    fn prune_timers(&mut self) {
        if self.timers.len() > 2 * self.waiting + STALE_TIMERS {
            let calls = &self.calls;
            self.timers.retain(|Reverse(Timer { call: id, .. })| {
                calls.get(id.slot).is_some_and(|call| call.registration == id.registration && call.is_waiting())
            });
        }
        while let Some(Reverse(timer)) = self.timers.peek()
            && !self.is_waiting(timer.call)
        {
            self.timers.pop();
        }
    }

    /// When the earliest timer of a waiting call comes up (its deadline, or its next repeat).
    pub(crate) fn next_timer(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse(timer)| timer.at)
    }

    /// At most `limit` of the waiting calls whose deadline is `now` or earlier, earliest
    /// first, with their requests: they no longer have a deadline, and wait to be settled.
    /// The repeats due by `now` go to the outbox on the way (see [`Table`]); `repeated` says
    /// how many, and so whether the publisher has calls to publish.
    pub(crate) fn take_due(&mut self, now: Instant, limit: usize) -> TakenDue {
        let mut taken = TakenDue::default();
        while let Some(Reverse(timer)) = self.timers.peek()
            && timer.at <= now
            && taken.due.len() < limit
        {
            let Some(Reverse(timer)) = self.timers.pop() else { break };
            let Some(request) = self.call(timer.call).and_then(Call::request) else { continue };
            if timer.is_deadline() {
                taken.due.push(Due { call: timer.call, request: request.clone() });
                continue;
            }
            let repeats = if self.held.contains(&timer.call) {
                self.repeats.at_most
            } else if self.repeat_budget >= TENTHS {
                self.repeat_budget -= TENTHS;
                self.repeated += 1;
                taken.repeated += 1;
                self.outbox.push_back(timer.call);
                timer.repeats + 1
            } else {
                timer.repeats
            };
            let at = self.first_timer(now, timer.deadline, repeats);
            self.timers.push(Reverse(Timer { at, repeats, ..timer }));
        }
        self.prune_timers();
        taken
    }

    /// Repeats made so far.
    pub(crate) fn repeated(&self) -> u64 {
        self.repeated
    }

    /// What publishing every waiting call again needs.
    pub(crate) fn to_resend(&self) -> Vec<Publish> {
        self.calls
            .iter()
            .filter_map(|(slot, call)| publish(CallId { registration: call.registration, slot }, call))
            .collect()
    }

    /// Closes the table: no call is registered any more, and the waiting ones are dropped;
    /// their callers, once woken, find them gone (`Closed`). Settled calls keep their outcome
    /// for their callers.
    pub(crate) fn close(&mut self) -> Vec<Waker> {
        self.closed = true;
        self.timers = BinaryHeap::new();
        self.held = HashSet::new();
        self.outbox = VecDeque::new();
        self.waiting = 0;
        let mut wakers = Vec::new();
        self.calls.retain(|_, call| match &mut call.state {
            State::Waiting { caller, .. } => {
                wakers.extend(caller.take());
                false
            }
            State::Settled(_) => true,
        });
        let calls = &self.calls;
        self.by_correlation.retain(|slot| calls.contains(*slot));
        wakers
    }

    /// Whether the table was closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }

    /// Calls waiting for their outcome.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting
    }
}

/// What publishing `call` needs, while it waits.
fn publish(id: CallId, call: &Call) -> Option<Publish> {
    match &call.state {
        State::Waiting { request, trace, .. } => Some(Publish {
            call: id,
            correlation: call.correlation.to_string(),
            request: request.clone(),
            trace: trace.as_deref().cloned(),
        }),
        State::Settled(_) => None,
    }
}

#[cfg(test)]
mod tests;
