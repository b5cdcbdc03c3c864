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
    let mut table = Table::new(Repeats::NEVER);
    let at = |seconds| now + Duration::from_secs(seconds);
    assert!(table.insert(call("b"), Instant::now(), at(2)).unwrap().earliest);
    assert!(!table.insert(call("c"), Instant::now(), at(3)).unwrap().earliest, "not the earliest");
    assert!(table.insert(call("a"), Instant::now(), at(1)).unwrap().earliest);
    assert_eq!(table.next_timer(), Some(at(1)));
    assert!(table.take_due(now, 10).due.is_empty());
    assert_eq!(table.take_due(at(2), 1).due.len(), 1, "no more than asked for");
    let due = table.take_due(at(2), 10).due;
    assert_eq!(correlations(&table, &due), ["b"], "a came first");
    assert_eq!(table.next_timer(), Some(at(3)));
    assert_eq!(table.waiting(), 3, "due calls wait until they are settled");
}

#[test]
fn equal_deadlines_come_out_in_the_order_their_calls_came() {
    let deadline = Instant::now();
    let mut table = Table::new(Repeats::NEVER);
    for id in ["c", "a", "b"] {
        table.insert(call(id), Instant::now(), deadline).unwrap();
    }
    let due = table.take_due(deadline, 10).due;
    assert_eq!(correlations(&table, &due), ["c", "a", "b"]);
}

#[test]
fn a_settled_call_keeps_its_outcome_for_its_caller_and_no_longer_waits() {
    let mut table = Table::new(Repeats::NEVER);
    let id = table.insert(call("a"), Instant::now(), Instant::now()).unwrap().call;
    assert!(table.poll(id, Waker::noop()).is_pending());
    assert!(table.awaiting("a").is_some());
    table.settle(id, decision("auto")).expect("it waited").wake();
    assert!(table.settle(id, decision("again")).is_none(), "settled once");
    assert!(table.awaiting("a").is_none(), "a reply for it now finds nothing waiting");
    assert_eq!((table.waiting(), table.next_timer()), (0, None));
    assert_eq!(table.insert(call("a"), Instant::now(), Instant::now()), Err(Refused::AlreadyPending("a".into())));
    assert_eq!(approver(table.poll(id, Waker::noop())), "auto");
    assert!(table.insert(call("a"), Instant::now(), Instant::now()).is_ok(), "taken: the id is free again");
}

#[test]
fn calls_are_published_in_order_unless_they_ended_first() {
    let deadline = Instant::now();
    let mut table = Table::new(Repeats::NEVER);
    assert!(table.insert(call("a"), Instant::now(), deadline).unwrap().first_to_publish);
    let ids: Vec<CallId> = ["b", "c", "d"]
        .into_iter()
        .map(|id| table.insert(call(id), Instant::now(), deadline).unwrap())
        .inspect(|inserted| assert!(!inserted.first_to_publish))
        .map(|inserted| inserted.call)
        .collect();
    table.forget(ids[0]);
    let _ = table.settle(ids[2], decision("early"));
    let published: Vec<String> = std::iter::from_fn(|| table.next_to_publish()).map(|p| p.correlation).collect();
    assert_eq!(published, ["a", "c"]);
    assert!(table.insert(call("e"), Instant::now(), deadline).unwrap().first_to_publish);
}

#[test]
fn what_is_meant_for_a_call_spares_a_later_one_with_the_same_id_and_slot() {
    let now = Instant::now();
    let mut table = Table::new(Repeats::NEVER);
    let first = table.insert(call("a"), Instant::now(), now).unwrap().call;
    table.forget(first);
    assert_eq!((table.waiting(), table.next_timer()), (0, None));
    let second = table.insert(call("a"), Instant::now(), now + Duration::from_secs(5)).unwrap().call;
    assert_eq!(first.slot, second.slot, "the slot is taken again");
    table.forget(first);
    assert!(table.settle(first, decision("stale")).is_none());
    assert!(table.take_due(now, 10).due.is_empty(), "the first call's deadline is not the second's");
    assert_eq!(table.waiting(), 1, "the second call is untouched");
    let _ = table.settle(second, decision("fresh"));
    assert_eq!(approver(table.poll(second, Waker::noop())), "fresh");
}

#[test]
fn a_later_call_in_a_slot_keeps_its_own_deadline() {
    let now = Instant::now();
    let at = |seconds| now + Duration::from_secs(seconds);
    let mut table = Table::new(Repeats::NEVER);
    // The first call's deadline stays in the index, under the waiting "b".
    table.insert(call("b"), Instant::now(), at(1)).unwrap();
    let first = table.insert(call("a"), Instant::now(), at(2)).unwrap().call;
    table.forget(first);
    let second = table.insert(call("a"), Instant::now(), at(3)).unwrap().call;
    assert_eq!(first.slot, second.slot);
    let due = table.take_due(at(2), 10).due;
    assert_eq!(correlations(&table, &due), ["b"], "nothing of the first call comes up");
    assert_eq!(table.next_timer(), Some(at(3)));
    let due = table.take_due(at(3), 10).due;
    assert_eq!(due.iter().map(|due| due.call).collect::<Vec<_>>(), [second]);
    assert_eq!(table.next_timer(), None);
}

#[test]
fn timers_of_calls_that_ended_are_dropped_before_they_pile_up() {
    let now = Instant::now();
    let at = |seconds| now + Duration::from_secs(seconds);
    let mut table = Table::new(Repeats::NEVER);
    let last = table.insert(call("last"), Instant::now(), at(10_000)).unwrap().call;
    for round in 0..1_000 {
        let id = table.insert(call(&format!("call-{round}")), Instant::now(), at(round)).unwrap().call;
        let _ = table.settle(id, decision("auto"));
        assert!(table.timers.len() <= 2 * table.waiting() + STALE_TIMERS + 1);
        assert_eq!(table.next_timer(), Some(at(10_000)), "the top is a waiting call's");
    }
    let due = table.take_due(at(10_000), 10).due;
    assert_eq!(due.iter().map(|due| due.call).collect::<Vec<_>>(), [last]);
}

#[test]
fn closing_drops_the_waiting_calls_and_keeps_the_settled_ones() {
    let mut table = Table::new(Repeats::NEVER);
    let waiting = table.insert(call("w"), Instant::now(), Instant::now()).unwrap().call;
    let settled = table.insert(call("s"), Instant::now(), Instant::now()).unwrap().call;
    assert!(table.poll(waiting, Waker::noop()).is_pending());
    let _ = table.settle(settled, decision("auto"));
    assert_eq!(table.close().len(), 1, "the waiting caller is woken");
    assert!(matches!(table.poll(waiting, Waker::noop()), Poll::Ready(Err(ClientError::Closed))));
    assert!(table.awaiting("w").is_none());
    assert_eq!(approver(table.poll(settled, Waker::noop())), "auto");
    assert_eq!(table.insert(call("b"), Instant::now(), Instant::now()), Err(Refused::Closed));
    assert_eq!((table.waiting(), table.next_timer()), (0, None));
}

const REPEATS: Repeats = Repeats { at_most: 3, floor: Duration::from_secs(1), ceiling: Duration::from_secs(10) };

fn published(table: &mut Table) -> Vec<String> {
    std::iter::from_fn(|| table.next_to_publish()).map(|publish| publish.correlation).collect()
}

#[test]
fn an_unanswered_call_is_published_again_at_doubling_waits_before_its_deadline() {
    let now = Instant::now();
    let at = |seconds| now + Duration::from_secs(seconds);
    let mut table = Table::new(REPEATS);
    // Before any reply, the soft deadline is the ceiling: 10 s, then 20 s and 40 s more.
    let id = table.insert(call("a"), now, at(100)).unwrap().call;
    assert_eq!(published(&mut table), ["a"]);
    assert_eq!(table.next_timer(), Some(at(10)));
    assert_eq!(table.take_due(at(9), 10).repeated, 0);
    let mut repeats_at = Vec::new();
    for second in 10..=100 {
        let taken = table.take_due(at(second), 10);
        if taken.repeated > 0 {
            repeats_at.push(second);
            assert_eq!(published(&mut table), ["a"], "a repeat goes out as the first publish did");
        }
        if !taken.due.is_empty() {
            assert_eq!(second, 100, "failed closed at its deadline");
            assert_eq!(taken.due[0].call, id);
        }
    }
    assert_eq!(repeats_at, [10, 30, 70], "three repeats, the wait doubling");
    assert_eq!(table.repeated(), 3);
}

#[test]
fn no_repeat_comes_at_or_past_the_deadline() {
    let now = Instant::now();
    let mut table = Table::new(REPEATS);
    table.insert(call("a"), now, now + Duration::from_secs(10)).unwrap();
    assert_eq!(table.next_timer(), Some(now + Duration::from_secs(10)), "the deadline comes first");
    let taken = table.take_due(now + Duration::from_secs(10), 10);
    assert_eq!((taken.repeated, taken.due.len()), (0, 1));
}

#[test]
fn the_soft_deadline_follows_the_latency_seen_within_its_bounds() {
    let now = Instant::now();
    let mut table = Table::new(REPEATS);
    let answer = |table: &mut Table, name: String, latency: Duration| {
        let id = table.insert(call(&name), now, now + Duration::from_secs(60)).unwrap().call;
        table.answered(id, latency);
        let _ = table.settle(id, decision("auto"));
    };
    assert_eq!(table.soft_deadline(), REPEATS.ceiling, "the ceiling until a reply was seen");
    answer(&mut table, "first".into(), Duration::from_millis(250));
    assert_eq!(table.soft_deadline(), Duration::from_secs(2), "8 × 250 ms");
    for round in 0..40 {
        answer(&mut table, format!("fast-{round}"), Duration::from_millis(5));
    }
    assert_eq!(table.soft_deadline(), REPEATS.floor, "8 × about 5 ms is below the floor");
    for round in 0..40 {
        answer(&mut table, format!("slow-{round}"), Duration::from_secs(2));
    }
    assert_eq!(table.soft_deadline(), REPEATS.ceiling, "8 × about 2 s is past the ceiling");
}

#[test]
fn a_call_a_step_holds_is_not_repeated_and_does_not_teach_the_latency() {
    let now = Instant::now();
    let at = |seconds| now + Duration::from_secs(seconds);
    let mut table = Table::new(REPEATS);
    let held = table.insert(call("held"), now, at(100)).unwrap().call;
    table.insert(call("free"), now, at(100)).unwrap();
    published(&mut table);
    table.hold(held);
    assert_eq!(table.take_due(at(10), 10).repeated, 1);
    assert_eq!(published(&mut table), ["free"]);
    table.answered(held, Duration::from_secs(60));
    assert_eq!(table.latency.0, None, "a person's answer says nothing of the fleet's latency");
    let _ = table.settle(held, decision("alice"));
    assert!(table.held.is_empty(), "forgotten once settled");
}

#[test]
fn a_fleet_that_answers_nothing_gets_a_bounded_number_of_repeats() {
    let now = Instant::now();
    let mut table = Table::new(REPEATS);
    let calls = REPEAT_BURST as usize + 100;
    for round in 0..calls {
        table.insert(call(&format!("call-{round}")), now, now + Duration::from_secs(1_000)).unwrap();
    }
    published(&mut table);
    let taken = table.take_due(now + Duration::from_secs(10), calls);
    assert_eq!(taken.repeated, REPEAT_BURST as usize, "the burst, not every call");
    let answered = table.insert(call("answered"), now, now + Duration::from_secs(1_000)).unwrap().call;
    for _ in 0..10 {
        table.answered(answered, Duration::from_millis(5));
    }
    // The calls left out come up again after another soft deadline (10 s: no latency seen
    // when they were put back).
    let taken = table.take_due(now + Duration::from_secs(20), calls);
    assert_eq!(taken.repeated, 1, "ten answers give back one repeat");
}

#[test]
fn never_repeats_when_told_not_to() {
    let now = Instant::now();
    let mut table = Table::new(Repeats::NEVER);
    table.insert(call("a"), now, now + Duration::from_secs(100)).unwrap();
    assert_eq!(table.next_timer(), Some(now + Duration::from_secs(100)));
}

#[test]
#[cfg(target_pointer_width = "64")]
fn a_call_takes_eight_words() {
    // Multiplied by every pending call of a runner (see BENCHMARKS.md).
    assert_eq!(std::mem::size_of::<Call>(), 64);
}
