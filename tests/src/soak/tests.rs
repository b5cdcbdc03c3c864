//! Each rule of the checker broken once in a run that is otherwise clean, and a clean run.

use super::*;

const DEADLINE: Duration = Duration::from_secs(30);

fn decided(call: &str, at_ms: u64, decision: &str) -> Asked {
    answered(call, at_ms, decision, false)
}

fn failed_closed(call: &str, at_ms: u64) -> Asked {
    answered(call, at_ms, "reject", true)
}

/// A call sent at 1 s and answered at `at_ms`; the fleet made a decision unless it
/// `failed_closed`.
fn answered(call: &str, at_ms: u64, decision: &str, failed_closed: bool) -> Asked {
    Asked {
        call: call.into(),
        deadline: DEADLINE,
        sent_ms: 1_000,
        answers: vec![Answer {
            at_ms,
            decision: decision.into(),
            failed_closed,
            decision_id: if failed_closed { String::new() } else { format!("d-{call}") },
            decided_ms: (!failed_closed).then(|| at_ms - 1),
        }],
    }
}

fn audited(call: &str) -> AuditRecord {
    AuditRecord { call: call.into(), decision_id: format!("d-{call}") }
}

/// A clean run: two decided calls (one by a person) and one failed closed on time, each
/// audited as it should be, a dead letter with its reason.
fn clean() -> Run {
    Run {
        asked: vec![decided("a", 1_500, "approve"), decided("b", 9_000, "reject"), failed_closed("c", 31_200)],
        audit: vec![audited("a"), audited("b")],
        human: vec![HumanTask { call: "b".into(), decided: true }, HumanTask { call: "c".into(), decided: false }],
        leftovers: vec![Leftover { queue: "p.dead".into(), reason: Some("bad_message: not a request".into()) }],
        dead_queue: "p.dead".into(),
    }
}

#[test]
fn a_clean_run_breaks_no_rule() {
    let report = check(&clean());
    assert!(report.is_clean(), "{report}");
    assert_eq!((report.calls, report.decided, report.failed_closed), (3, 2, 1));
}

/// Checks that `change` to a clean run breaks exactly `rule`, counted in `count`.
fn breaks(rule: &str, change: impl FnOnce(&mut Run), count: impl Fn(&Report) -> usize) {
    let mut run = clean();
    change(&mut run);
    let report = check(&run);
    assert_eq!(report.examples.keys().copied().collect::<Vec<_>>(), vec![rule], "{report}");
    assert_eq!(count(&report), 1, "{report}");
}

#[test]
fn a_call_with_no_answer_is_lost() {
    breaks("lost", |run| run.asked[0].answers.clear(), |r| r.lost);
}

#[test]
fn a_call_answered_twice_is_doubled() {
    breaks(
        "answered more than once",
        |run| {
            let again = run.asked[0].answers[0].clone();
            run.asked[0].answers.push(again);
        },
        |r| r.doubled,
    );
}

#[test]
fn a_call_failed_closed_before_or_well_after_its_deadline_is_early_or_late() {
    breaks("failed closed before its deadline", |run| run.asked[2].answers[0].at_ms = 30_000, |r| r.early);
    breaks("answered after its deadline", |run| run.asked[2].answers[0].at_ms = 34_000, |r| r.late);
}

#[test]
fn a_decision_after_the_deadline_is_late_and_an_approval_then_is_approved_after_its_deadline() {
    breaks(
        "approved after its deadline",
        |run| run.asked[0].answers[0].decided_ms = Some(31_500),
        |r| r.approved_after_deadline,
    );
    let mut run = clean();
    run.asked[0] = decided("a", 40_000, "approve");
    let report = check(&run);
    assert_eq!((report.late, report.approved_after_deadline), (1, 1), "{report}");
}

#[test]
fn audit_records_are_one_per_decision_taken() {
    breaks(
        "decision with no audit record",
        |run| {
            run.audit.remove(0);
        },
        |r| r.audit_missing,
    );
    breaks("one decision recorded more than once", |run| run.audit.push(audited("a")), |r| r.audit_doubled);
    breaks(
        "a call decided more than once, each decision recorded",
        |run| run.audit.push(AuditRecord { call: "a".into(), decision_id: "d-again".into() }),
        |r| r.audit_doubled,
    );
    breaks(
        "an audit record of another decision than the one taken",
        |run| run.audit[0].decision_id = "d-another".into(),
        |r| r.audit_doubled,
    );
    breaks("audit record of a call failed closed", |run| run.audit.push(audited("c")), |r| r.audit_doubled);
    breaks("audit record of a call never sent", |run| run.audit.push(audited("z")), |r| r.audit_doubled);
}

#[test]
fn a_human_task_decided_twice_is_counted() {
    breaks(
        "human task decided twice",
        |run| run.human.push(HumanTask { call: "b".into(), decided: true }),
        |r| r.human_doubled,
    );
}

#[test]
fn queues_are_empty_but_for_dead_letters_with_reasons() {
    breaks(
        "message left in a queue",
        |run| run.leftovers.push(Leftover { queue: "p.requests".into(), reason: None }),
        |r| r.queues_left,
    );
    breaks("dead letter without a reason", |run| run.leftovers[0].reason = None, |r| r.dead_without_reason);
}
