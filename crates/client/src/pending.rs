//! The calls waiting for a decision: one map by correlation id, and their deadlines in order.
//!
//! Sans I/O: the client locks one [`Table`]; its publisher takes what to publish from it, its
//! reply reader, deadline sweeper and publisher settle calls in it, and each caller's future
//! polls its own entry. A waiting call is what a publish, a fail-closed decision and the
//! reply's proof need, and no more: the request as published (shared with the publishes,
//! never copied; the key, origin and times of a fail-closed decision are read back from it),
//! the digest its reply is proved against, its deadline, and its caller's waker. There is no
//! channel per call: a settled call keeps its outcome in its entry until its caller takes it.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::task::{Poll, Waker};

use airlock_contract::v1;
use bytes::Bytes;
use tokio::time::Instant;

use crate::ClientError;

/// How a call ended, as its caller hears it.
pub(crate) type Outcome = Result<v1::Decision, ClientError>;

/// One call, from its registration until its caller takes its outcome.
pub(crate) struct Call {
    /// The encoded request, as published; emptied once the call is settled.
    body: Bytes,
    /// The SHA-256 of `body`, which the reply's proof must be bound to (zero when replies
    /// are taken unproved).
    digest: [u8; 32],
    /// When the runner stops waiting and fails the call closed.
    deadline: Instant,
    /// The trace context the request was published with, if a span was recording: a resend
    /// carries it too. Boxed: most calls have none, and an empty map would cost every call
    /// three words instead of one.
    #[allow(clippy::box_collection)]
    trace: Option<Box<BTreeMap<String, String>>>,
    state: State,
}

enum State {
    /// No outcome yet; the caller's waker once it polled.
    Waiting(Option<Waker>),
    /// Decided, failed closed or failed; boxed, as few calls are in this state at once.
    Settled(Box<Outcome>),
}

impl Call {
    /// A call waiting for its outcome.
    pub(crate) fn new(
        body: Bytes,
        digest: [u8; 32],
        deadline: Instant,
        trace: Option<BTreeMap<String, String>>,
    ) -> Self {
        Call { body, digest, deadline, trace: trace.map(Box::new), state: State::Waiting(None) }
    }

    fn is_waiting(&self) -> bool {
        matches!(self.state, State::Waiting(_))
    }
}

/// Why a call could not be registered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A call with the same correlation id is waiting (or its caller has yet to take its
    /// outcome).
    AlreadyPending,
    /// The client is closed.
    Closed,
}

/// What registering a call changed for the client's background tasks.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Inserted {
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
    pub(crate) correlation: Arc<str>,
    pub(crate) body: Bytes,
    pub(crate) trace: Option<BTreeMap<String, String>>,
}

impl Publish {
    fn of(correlation: &Arc<str>, call: &Call) -> Self {
        Publish { correlation: correlation.clone(), body: call.body.clone(), trace: call.trace.as_deref().cloned() }
    }
}

/// Every call of a client by correlation id, the waiting ones by deadline, and the ones not
/// yet handed to the publisher.
///
/// A call is named by the `Arc<str>` it was registered under, not only by its text: once a
/// call ended, a later one may reuse its correlation id, and what is meant for the first
/// (its caller giving up, a late settlement) must not touch the second.
#[derive(Default)]
pub(crate) struct Table {
    calls: HashMap<Arc<str>, Call>,
    /// The waiting calls, earliest deadline first; the correlation id breaks ties.
    deadlines: BTreeSet<(Instant, Arc<str>)>,
    /// Calls to publish, in the order they came.
    outbox: VecDeque<Arc<str>>,
    /// Calls waiting (the others are settled, their outcome not yet taken).
    waiting: usize,
    closed: bool,
}

impl Table {
    /// Registers `call` under `correlation`, to be published.
    pub(crate) fn insert(&mut self, correlation: Arc<str>, call: Call) -> Result<Inserted, Refused> {
        if self.closed {
            return Err(Refused::Closed);
        }
        if self.calls.contains_key(&correlation) {
            return Err(Refused::AlreadyPending);
        }
        let earliest = self.next_deadline().is_none_or(|next| call.deadline < next);
        let first_to_publish = self.outbox.is_empty();
        self.deadlines.insert((call.deadline, correlation.clone()));
        self.outbox.push_back(correlation.clone());
        self.calls.insert(correlation, call);
        self.waiting += 1;
        Ok(Inserted { earliest, first_to_publish })
    }

    /// The call registered under exactly `correlation`.
    fn call(&self, correlation: &Arc<str>) -> Option<&Call> {
        let (key, call) = self.calls.get_key_value(&**correlation)?;
        Arc::ptr_eq(key, correlation).then_some(call)
    }

    fn call_mut(&mut self, correlation: &Arc<str>) -> Option<&mut Call> {
        self.call(correlation)?;
        self.calls.get_mut(&**correlation)
    }

    /// The next call to publish, skipping those that ended before their turn came.
    pub(crate) fn next_to_publish(&mut self) -> Option<Publish> {
        while let Some(correlation) = self.outbox.pop_front() {
            if let Some(call) = self.call(&correlation).filter(|call| call.is_waiting()) {
                return Some(Publish::of(&correlation, call));
            }
        }
        // A burst's worth of room is not kept once it is drained.
        self.outbox.shrink_to(64);
        None
    }

    /// The waiting call a reply with this correlation id would answer, with the digest its
    /// proof must be bound to.
    pub(crate) fn digest(&self, correlation: &str) -> Option<(Arc<str>, [u8; 32])> {
        let (key, call) = self.calls.get_key_value(correlation)?;
        call.is_waiting().then(|| (key.clone(), call.digest))
    }

    /// Settles the call registered under `correlation` with `outcome`, if it still waits.
    pub(crate) fn settle(&mut self, correlation: &Arc<str>, outcome: Outcome) -> Option<Settled> {
        let call = self.call_mut(correlation).filter(|call| call.is_waiting())?;
        let State::Waiting(waker) = std::mem::replace(&mut call.state, State::Settled(Box::new(outcome))) else {
            unreachable!("filtered on waiting");
        };
        // What only a waiting call needs goes now, not when its caller comes for the outcome.
        call.body = Bytes::new();
        call.trace = None;
        let deadline = call.deadline;
        self.deadlines.remove(&(deadline, correlation.clone()));
        self.waiting -= 1;
        Some(Settled(waker))
    }

    /// The outcome of the call registered under `correlation` once it is settled (which ends
    /// the call); otherwise `waker` is woken when it is. A call that is gone was dropped when
    /// the client closed.
    pub(crate) fn poll(&mut self, correlation: &Arc<str>, waker: &Waker) -> Poll<Outcome> {
        let Some(call) = self.call_mut(correlation) else {
            return Poll::Ready(Err(ClientError::Closed));
        };
        match &mut call.state {
            State::Waiting(Some(known)) if known.will_wake(waker) => Poll::Pending,
            State::Waiting(slot) => {
                *slot = Some(waker.clone());
                Poll::Pending
            }
            State::Settled(_) => match self.calls.remove(&**correlation).map(|call| call.state) {
                Some(State::Settled(outcome)) => Poll::Ready(*outcome),
                _ => unreachable!("the call was just found settled"),
            },
        }
    }

    /// Takes out the call registered under `correlation`, whatever its state: its caller
    /// stopped waiting.
    pub(crate) fn forget(&mut self, correlation: &Arc<str>) {
        if self.call(correlation).is_none() {
            return;
        }
        if let Some(call) = self.calls.remove(&**correlation)
            && call.is_waiting()
        {
            self.deadlines.remove(&(call.deadline, correlation.clone()));
            self.waiting -= 1;
        }
    }

    /// The earliest deadline of a waiting call.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(deadline, _)| *deadline)
    }

    /// At most `limit` of the waiting calls whose deadline is `now` or earlier, earliest
    /// first, with their requests: they no longer have a deadline, and wait to be settled.
    pub(crate) fn take_due(&mut self, now: Instant, limit: usize) -> Vec<(Arc<str>, Bytes)> {
        let mut due = Vec::new();
        while let Some((deadline, _)) = self.deadlines.first()
            && *deadline <= now
            && due.len() < limit
        {
            let Some((_, correlation)) = self.deadlines.pop_first() else { break };
            if let Some(call) = self.call(&correlation) {
                due.push((correlation.clone(), call.body.clone()));
            }
        }
        due
    }

    /// What publishing every waiting call again needs.
    pub(crate) fn to_resend(&self) -> Vec<Publish> {
        self.calls
            .iter()
            .filter(|(_, call)| call.is_waiting())
            .map(|(correlation, call)| Publish::of(correlation, call))
            .collect()
    }

    /// Closes the table: no call is registered any more, and the waiting ones are dropped;
    /// their callers, once woken, find them gone (`Closed`). Settled calls keep their outcome
    /// for their callers.
    pub(crate) fn close(&mut self) -> Vec<Waker> {
        self.closed = true;
        self.deadlines.clear();
        self.outbox = VecDeque::new();
        self.waiting = 0;
        let mut wakers = Vec::new();
        self.calls.retain(|_, call| match &mut call.state {
            State::Waiting(waker) => {
                wakers.extend(waker.take());
                false
            }
            State::Settled(_) => true,
        });
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

#[cfg(test)]
mod tests {
    use std::task::Waker;
    use std::time::Duration;

    use super::*;

    fn call(deadline: Instant) -> Call {
        Call::new(Bytes::from_static(b"request"), [0; 32], deadline, None)
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

    #[test]
    fn due_calls_come_out_earliest_first_and_only_once_due() {
        let now = Instant::now();
        let mut table = Table::default();
        let at = |seconds| now + Duration::from_secs(seconds);
        assert!(table.insert("b".into(), call(at(2))).unwrap().earliest);
        assert!(!table.insert("c".into(), call(at(3))).unwrap().earliest, "not the earliest");
        assert!(table.insert("a".into(), call(at(1))).unwrap().earliest);
        assert_eq!(table.next_deadline(), Some(at(1)));
        assert!(table.take_due(now, 10).is_empty());
        assert_eq!(table.take_due(at(2), 1).len(), 1, "no more than asked for");
        let due: Vec<String> = table.take_due(at(2), 10).into_iter().map(|(id, _)| id.to_string()).collect();
        assert_eq!(due, ["b"], "a came first");
        assert_eq!(table.next_deadline(), Some(at(3)));
        assert_eq!(table.waiting(), 3, "due calls wait until they are settled");
    }

    #[test]
    fn a_settled_call_keeps_its_outcome_for_its_caller_and_no_longer_waits() {
        let mut table = Table::default();
        let id: Arc<str> = "a".into();
        table.insert(id.clone(), call(Instant::now())).unwrap();
        assert!(table.poll(&id, Waker::noop()).is_pending());
        assert!(table.digest("a").is_some());
        table.settle(&id, decision("auto")).expect("it waited").wake();
        assert!(table.settle(&id, decision("again")).is_none(), "settled once");
        assert!(table.digest("a").is_none(), "a reply for it now finds nothing waiting");
        assert_eq!((table.waiting(), table.next_deadline()), (0, None));
        assert_eq!(table.insert("a".into(), call(Instant::now())), Err(Refused::AlreadyPending));
        assert_eq!(approver(table.poll(&id, Waker::noop())), "auto");
        assert!(table.insert("a".into(), call(Instant::now())).is_ok(), "taken: the id is free again");
    }

    #[test]
    fn calls_are_published_in_order_unless_they_ended_first() {
        let deadline = Instant::now();
        let mut table = Table::default();
        let ids: Vec<Arc<str>> = ["a", "b", "c", "d"].into_iter().map(Arc::from).collect();
        assert!(table.insert(ids[0].clone(), call(deadline)).unwrap().first_to_publish);
        for id in &ids[1..] {
            assert!(!table.insert(id.clone(), call(deadline)).unwrap().first_to_publish);
        }
        table.forget(&ids[1]);
        let _ = table.settle(&ids[3], decision("early"));
        let published: Vec<String> =
            std::iter::from_fn(|| table.next_to_publish()).map(|p| p.correlation.to_string()).collect();
        assert_eq!(published, ["a", "c"]);
        assert!(table.insert("e".into(), call(deadline)).unwrap().first_to_publish);
    }

    #[test]
    fn what_is_meant_for_a_call_spares_a_later_one_with_the_same_id() {
        let mut table = Table::default();
        let first: Arc<str> = "a".into();
        table.insert(first.clone(), call(Instant::now())).unwrap();
        table.forget(&first);
        assert_eq!((table.waiting(), table.next_deadline()), (0, None));
        let second: Arc<str> = "a".into();
        table.insert(second.clone(), call(Instant::now())).unwrap();
        table.forget(&first);
        assert!(table.settle(&first, decision("stale")).is_none());
        assert_eq!(table.waiting(), 1, "the second call is untouched");
        let _ = table.settle(&second, decision("fresh"));
        assert_eq!(approver(table.poll(&second, Waker::noop())), "fresh");
    }

    #[test]
    fn closing_drops_the_waiting_calls_and_keeps_the_settled_ones() {
        let mut table = Table::default();
        let (waiting, settled): (Arc<str>, Arc<str>) = ("w".into(), "s".into());
        table.insert(waiting.clone(), call(Instant::now())).unwrap();
        table.insert(settled.clone(), call(Instant::now())).unwrap();
        assert!(table.poll(&waiting, Waker::noop()).is_pending());
        let _ = table.settle(&settled, decision("auto"));
        assert_eq!(table.close().len(), 1, "the waiting caller is woken");
        assert!(matches!(table.poll(&waiting, Waker::noop()), Poll::Ready(Err(ClientError::Closed))));
        assert_eq!(approver(table.poll(&settled, Waker::noop())), "auto");
        assert_eq!(table.insert("b".into(), call(Instant::now())), Err(Refused::Closed));
        assert_eq!((table.waiting(), table.next_deadline()), (0, None));
    }
}
