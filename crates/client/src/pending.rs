//! The calls waiting for a decision: one slab of calls, found by correlation id, and their
//! deadlines in order.
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
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::task::{Poll, Waker};

use airlock_contract::v1;
use hashbrown::HashTable;
use slab::Slab;
use tokio::time::Instant;

use crate::ClientError;

/// How a call ended, as its caller hears it.
pub(crate) type Outcome = Result<v1::Decision, ClientError>;

/// Trace context headers (W3C `traceparent`, `tracestate`), as published with a request.
pub type TraceHeaders = BTreeMap<String, String>;

/// A registered call's name: its slot in the table, and which registration it is. Once a
/// call ended, a later one may take its slot (and its correlation id): what is meant for the
/// first (its caller giving up, a late settlement, its deadline) must not touch the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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

/// A waiting call whose deadline passed, with its request: it waits to be failed closed.
pub(crate) struct Due {
    pub(crate) call: CallId,
    pub(crate) request: Arc<[u8]>,
}

/// Deadlines of calls that no longer wait are left in the index (until they come up) as long
/// as they are fewer than the waiting calls, plus this many.
const STALE_DEADLINES: usize = 64;

/// Every call of a client, found by correlation id; the waiting ones by deadline; and the ones
/// not yet handed to the publisher.
#[derive(Default)]
pub(crate) struct Table {
    calls: Slab<Call>,
    /// The slots of `calls`, hashed by their correlation id (which only the call holds).
    by_correlation: HashTable<usize>,
    hasher: RandomState,
    /// The waiting calls' deadlines, earliest on top. A call that stops waiting leaves its
    /// entry behind, to be dropped when it reaches the top or when such entries outnumber the
    /// waiting calls: the top is always a waiting call's.
    deadlines: BinaryHeap<Reverse<(Instant, CallId)>>,
    /// Calls to publish, in the order they came.
    outbox: VecDeque<CallId>,
    /// Registrations so far.
    registrations: u64,
    /// Calls waiting (the others are settled, their outcome not yet taken).
    waiting: usize,
    closed: bool,
}

impl Table {
    /// Registers `call`, to be published and failed closed at `deadline`.
    pub(crate) fn insert(&mut self, mut call: Call, deadline: Instant) -> Result<Inserted, Refused> {
        if self.closed {
            return Err(Refused::Closed);
        }
        if self.find(&call.correlation).is_some() {
            return Err(Refused::AlreadyPending(call.correlation));
        }
        let earliest = self.next_deadline().is_none_or(|next| deadline < next);
        let first_to_publish = self.outbox.is_empty();
        self.registrations += 1;
        call.registration = self.registrations;
        let hash = self.hasher.hash_one(&*call.correlation);
        let slot = self.calls.insert(call);
        let (calls, hasher) = (&self.calls, &self.hasher);
        self.by_correlation.insert_unique(hash, slot, |&slot| hasher.hash_one(&*calls[slot].correlation));
        let id = CallId { registration: self.registrations, slot };
        self.deadlines.push(Reverse((deadline, id)));
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

    /// Takes the call named `id` out of the table (it is there).
    fn remove(&mut self, id: CallId) -> Call {
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
        self.prune_deadlines();
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
            self.prune_deadlines();
        }
    }

    /// Drops the deadlines of calls that no longer wait: from the top, so that the top is a
    /// waiting call's, and from the whole index once they outnumber the waiting calls (which
    /// makes each sweep cost no more than the removals that left them behind).
    fn prune_deadlines(&mut self) {
        if self.deadlines.len() > 2 * self.waiting + STALE_DEADLINES {
            let calls = &self.calls;
            self.deadlines.retain(|Reverse((_, id))| {
                calls.get(id.slot).is_some_and(|call| call.registration == id.registration && call.is_waiting())
            });
        }
        while let Some(Reverse((_, id))) = self.deadlines.peek()
            && !self.is_waiting(*id)
        {
            self.deadlines.pop();
        }
    }

    /// The earliest deadline of a waiting call.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.peek().map(|Reverse((deadline, _))| *deadline)
    }

    /// At most `limit` of the waiting calls whose deadline is `now` or earlier, earliest
    /// first, with their requests: they no longer have a deadline, and wait to be settled.
    pub(crate) fn take_due(&mut self, now: Instant, limit: usize) -> Vec<Due> {
        let mut due = Vec::new();
        while let Some(Reverse((deadline, _))) = self.deadlines.peek()
            && *deadline <= now
            && due.len() < limit
        {
            let Some(Reverse((_, id))) = self.deadlines.pop() else { break };
            if let Some(request) = self.call(id).and_then(Call::request) {
                due.push(Due { call: id, request: request.clone() });
            }
        }
        self.prune_deadlines();
        due
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
        self.deadlines = BinaryHeap::new();
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
mod tests {
    use std::task::Waker;
    use std::time::Duration;

    use super::*;

    fn call(correlation: &str) -> Call {
        Call::new(correlation.to_owned(), Arc::from(&b"request"[..]), None)
    }

    fn decision(approver: &str) -> Outcome {
        Ok(v1::Decision { approver: approver.into(), ..Default::default() })
    }

    fn approver(polled: Poll<Outcome>) -> String {
        match polled {
            Poll::Ready(Ok(decision)) => decision.approver,
            other => panic!("{:?}", other.map(|outcome| outcome.map(|_| ()))),
        }
    }

    fn correlations(table: &Table, due: &[Due]) -> Vec<String> {
        due.iter().map(|due| table.call(due.call).expect("still there").correlation.to_string()).collect()
    }

    #[test]
    fn due_calls_come_out_earliest_first_and_only_once_due() {
        let now = Instant::now();
        let mut table = Table::default();
        let at = |seconds| now + Duration::from_secs(seconds);
        assert!(table.insert(call("b"), at(2)).unwrap().earliest);
        assert!(!table.insert(call("c"), at(3)).unwrap().earliest, "not the earliest");
        assert!(table.insert(call("a"), at(1)).unwrap().earliest);
        assert_eq!(table.next_deadline(), Some(at(1)));
        assert!(table.take_due(now, 10).is_empty());
        assert_eq!(table.take_due(at(2), 1).len(), 1, "no more than asked for");
        let due = table.take_due(at(2), 10);
        assert_eq!(correlations(&table, &due), ["b"], "a came first");
        assert_eq!(table.next_deadline(), Some(at(3)));
        assert_eq!(table.waiting(), 3, "due calls wait until they are settled");
    }

    #[test]
    fn equal_deadlines_come_out_in_the_order_their_calls_came() {
        let deadline = Instant::now();
        let mut table = Table::default();
        for id in ["c", "a", "b"] {
            table.insert(call(id), deadline).unwrap();
        }
        let due = table.take_due(deadline, 10);
        assert_eq!(correlations(&table, &due), ["c", "a", "b"]);
    }

    #[test]
    fn a_settled_call_keeps_its_outcome_for_its_caller_and_no_longer_waits() {
        let mut table = Table::default();
        let id = table.insert(call("a"), Instant::now()).unwrap().call;
        assert!(table.poll(id, Waker::noop()).is_pending());
        assert!(table.awaiting("a").is_some());
        table.settle(id, decision("auto")).expect("it waited").wake();
        assert!(table.settle(id, decision("again")).is_none(), "settled once");
        assert!(table.awaiting("a").is_none(), "a reply for it now finds nothing waiting");
        assert_eq!((table.waiting(), table.next_deadline()), (0, None));
        assert_eq!(table.insert(call("a"), Instant::now()), Err(Refused::AlreadyPending("a".into())));
        assert_eq!(approver(table.poll(id, Waker::noop())), "auto");
        assert!(table.insert(call("a"), Instant::now()).is_ok(), "taken: the id is free again");
    }

    #[test]
    fn calls_are_published_in_order_unless_they_ended_first() {
        let deadline = Instant::now();
        let mut table = Table::default();
        assert!(table.insert(call("a"), deadline).unwrap().first_to_publish);
        let ids: Vec<CallId> = ["b", "c", "d"]
            .into_iter()
            .map(|id| table.insert(call(id), deadline).unwrap())
            .inspect(|inserted| assert!(!inserted.first_to_publish))
            .map(|inserted| inserted.call)
            .collect();
        table.forget(ids[0]);
        let _ = table.settle(ids[2], decision("early"));
        let published: Vec<String> = std::iter::from_fn(|| table.next_to_publish()).map(|p| p.correlation).collect();
        assert_eq!(published, ["a", "c"]);
        assert!(table.insert(call("e"), deadline).unwrap().first_to_publish);
    }

    #[test]
    fn what_is_meant_for_a_call_spares_a_later_one_with_the_same_id_and_slot() {
        let now = Instant::now();
        let mut table = Table::default();
        let first = table.insert(call("a"), now).unwrap().call;
        table.forget(first);
        assert_eq!((table.waiting(), table.next_deadline()), (0, None));
        let second = table.insert(call("a"), now + Duration::from_secs(5)).unwrap().call;
        assert_eq!(first.slot, second.slot, "the slot is taken again");
        table.forget(first);
        assert!(table.settle(first, decision("stale")).is_none());
        assert!(table.take_due(now, 10).is_empty(), "the first call's deadline is not the second's");
        assert_eq!(table.waiting(), 1, "the second call is untouched");
        let _ = table.settle(second, decision("fresh"));
        assert_eq!(approver(table.poll(second, Waker::noop())), "fresh");
    }

    #[test]
    fn a_later_call_in_a_slot_keeps_its_own_deadline() {
        let now = Instant::now();
        let at = |seconds| now + Duration::from_secs(seconds);
        let mut table = Table::default();
        // The first call's deadline stays in the index, under the waiting "b".
        table.insert(call("b"), at(1)).unwrap();
        let first = table.insert(call("a"), at(2)).unwrap().call;
        table.forget(first);
        let second = table.insert(call("a"), at(3)).unwrap().call;
        assert_eq!(first.slot, second.slot);
        let due = table.take_due(at(2), 10);
        assert_eq!(correlations(&table, &due), ["b"], "nothing of the first call comes up");
        assert_eq!(table.next_deadline(), Some(at(3)));
        let due = table.take_due(at(3), 10);
        assert_eq!(due.iter().map(|due| due.call).collect::<Vec<_>>(), [second]);
        assert_eq!(table.next_deadline(), None);
    }

    #[test]
    fn deadlines_of_calls_that_ended_are_dropped_before_they_pile_up() {
        let now = Instant::now();
        let at = |seconds| now + Duration::from_secs(seconds);
        let mut table = Table::default();
        let last = table.insert(call("last"), at(10_000)).unwrap().call;
        for round in 0..1_000 {
            let id = table.insert(call(&format!("call-{round}")), at(round)).unwrap().call;
            let _ = table.settle(id, decision("auto"));
            assert!(table.deadlines.len() <= 2 * table.waiting() + STALE_DEADLINES + 1);
            assert_eq!(table.next_deadline(), Some(at(10_000)), "the top is a waiting call's");
        }
        let due = table.take_due(at(10_000), 10);
        assert_eq!(due.iter().map(|due| due.call).collect::<Vec<_>>(), [last]);
    }

    #[test]
    fn closing_drops_the_waiting_calls_and_keeps_the_settled_ones() {
        let mut table = Table::default();
        let waiting = table.insert(call("w"), Instant::now()).unwrap().call;
        let settled = table.insert(call("s"), Instant::now()).unwrap().call;
        assert!(table.poll(waiting, Waker::noop()).is_pending());
        let _ = table.settle(settled, decision("auto"));
        assert_eq!(table.close().len(), 1, "the waiting caller is woken");
        assert!(matches!(table.poll(waiting, Waker::noop()), Poll::Ready(Err(ClientError::Closed))));
        assert!(table.awaiting("w").is_none());
        assert_eq!(approver(table.poll(settled, Waker::noop())), "auto");
        assert_eq!(table.insert(call("b"), Instant::now()), Err(Refused::Closed));
        assert_eq!((table.waiting(), table.next_deadline()), (0, None));
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_call_takes_eight_words() {
        // Multiplied by every pending call of a runner (see BENCHMARKS.md).
        assert_eq!(std::mem::size_of::<Call>(), 64);
    }
}
