use serde_json::json;

use super::*;

/// A decided review task as the service sends it (the JSON the Inspect suite reads).
fn decided_json() -> Value {
    json!({
        "id": "0192",
        "key": {"run_id": "run", "sample_id": "s1", "epoch": 1, "tool_call_id": "c1"},
        "correlation": "review/run/s1/1/c1/gamma",
        "caller": {"requested_by": "gateway", "tenant": "gamma"},
        "kind": "review",
        "pool": "ops",
        "step": 2,
        "choices": ["continue", "terminate"],
        "message": "Cleaning up.",
        "call": {"id": "c1", "function": "bash", "arguments": {"cmd": "ls", "n": 3}},
        "view": {"context": null, "call": {"title": "Run", "format": "markdown", "content": "`{{cmd}}`"}},
        "shown": {"context": null, "call": {"title": "Run", "markdown": true, "text": "`ls`"}},
        "result": {"text": "", "error": {"type": "timeout", "message": "too slow"}},
        "output": "a b c",
        "trail": [{"approver": "monitor", "decision": "escalate", "explanation": "unsure", "decided_by": "monitor-1",
                   "metadata": {"score": 5, "reason": "deletes files", "model": "m"}}],
        "policy": {"name": null, "digest": "ab12"},
        "history": [{"role": "user", "text": "Clean up.", "tool_calls": [], "function": null, "error": null}],
        "history_omitted": 2,
        "origin": {"run_id": "run", "eval_id": "e", "task": "t", "sample_id": "s1", "epoch": 1,
                   "model": "m", "runner_id": "r"},
        "received_at_unix_ms": 1_700_000_000_000_i64,
        "deadline_unix_ms": null,
        "on_timeout": "terminate",
        "approvals_needed": 2,
        "approvals": [{"reviewer": "bob", "at_unix_ms": 1_700_000_000_400_i64, "explanation": "looks right"},
                      {"reviewer": "alice", "at_unix_ms": 1_700_000_000_500_i64, "explanation": "fine"}],
        "state": "decided",
        "decision": "continue",
        "explanation": "fine",
        "decided_by": "bob+alice",
        "decided_at_unix_ms": 1_700_000_000_500_i64,
    })
}

#[test]
fn a_task_reads_and_writes_the_wire_json_unchanged() {
    let wire = decided_json();
    let view: TaskView = serde_json::from_value(wire.clone()).unwrap();
    assert_eq!(view.kind, Kind::Review);
    assert_eq!(view.choices, [Decision::Continue, Decision::Terminate]);
    assert_eq!(
        view.state,
        TaskState::Decided {
            decision: Decision::Continue,
            explanation: "fine".into(),
            decided_by: "bob+alice".into(),
            decided_at_unix_ms: 1_700_000_000_500,
        }
    );
    assert_eq!(view.approvals_needed, 2);
    assert_eq!(view.approvals.iter().map(|a| a.reviewer.as_str()).collect::<Vec<_>>(), ["bob", "alice"]);
    assert_eq!(view.result.as_ref().and_then(|r| r.error.as_ref()).map(|e| e.kind.as_str()), Some("timeout"));
    // Same keys, same values, same order.
    assert_eq!(serde_json::to_string(&view).unwrap(), wire.to_string());
}

#[test]
fn pending_and_withdrawn_tasks_carry_only_their_states_fields() {
    let mut wire = decided_json();
    let object = wire.as_object_mut().unwrap();
    for key in ["decision", "explanation", "decided_by", "decided_at_unix_ms"] {
        object.remove(key);
    }
    object.insert("state".into(), json!("pending"));
    object.insert("deadline_unix_ms".into(), json!(1_700_000_060_000_i64));
    let view: TaskView = serde_json::from_value(wire.clone()).unwrap();
    assert_eq!((view.state.clone(), view.deadline_unix_ms), (TaskState::Pending, Some(1_700_000_060_000)));
    assert_eq!(serde_json::to_value(&view).unwrap(), wire);

    let withdrawn =
        TaskView { state: TaskState::Cancelled { reason: "the sample ended".into(), decided_at_unix_ms: 7 }, ..view };
    let value = serde_json::to_value(&withdrawn).unwrap();
    assert_eq!(
        (&value["state"], &value["reason"], &value["decided_at_unix_ms"]),
        (&json!("cancelled"), &json!("the sample ended"), &json!(7))
    );
    assert!(value.get("decided_by").is_none());
    assert_eq!(serde_json::from_value::<TaskView>(value).unwrap(), withdrawn);
}

#[test]
fn refusals_say_how_a_task_was_settled() {
    let decided =
        json!({"error": "already decided", "decision": "reject", "decided_by": "alice", "decided_at_unix_ms": 5});
    let view: ErrorView = serde_json::from_value(decided.clone()).unwrap();
    assert_eq!(
        view.settled,
        Some(Settled::Decided { decision: Decision::Reject, decided_by: "alice".into(), decided_at_unix_ms: 5 })
    );
    assert_eq!(serde_json::to_value(&view).unwrap(), decided);

    let withdrawn = json!({"error": "withdrawn by the runner", "reason": "the sample ended"});
    let view: ErrorView = serde_json::from_value(withdrawn.clone()).unwrap();
    assert_eq!(view.settled, Some(Settled::Withdrawn { reason: "the sample ended".into() }));
    assert_eq!(serde_json::to_value(&view).unwrap(), withdrawn);

    let plain = json!({"error": "no such task among your pools"});
    let view: ErrorView = serde_json::from_value(plain.clone()).unwrap();
    assert_eq!((&view.settled, &view.claim), (&None, &None));
    assert_eq!(serde_json::to_value(&view).unwrap(), plain);
}

#[test]
fn a_refusal_over_a_claim_names_its_holder_and_a_pending_task_its_claim() {
    let claimed = json!({"error": "claimed by alice", "claim": {"by": "alice", "until_unix_ms": 9}});
    let view: ErrorView = serde_json::from_value(claimed.clone()).unwrap();
    assert_eq!(
        (view.settled.clone(), view.claim.clone()),
        (None, Some(claim::ClaimView { by: "alice".into(), until_unix_ms: 9 }))
    );
    assert_eq!(serde_json::to_value(&view).unwrap(), claimed);

    let mut wire = decided_json();
    wire["claim"] = json!({"by": "bob", "until_unix_ms": 12});
    let task: TaskView = serde_json::from_value(wire.clone()).unwrap();
    assert_eq!(task.claim.as_ref().map(|c| c.by.as_str()), Some("bob"));
    assert_eq!(serde_json::to_value(&task).unwrap(), wire);
    let answer = claim::Claimed { task: "t1".into(), claim: claim::ClaimView { by: "bob".into(), until_unix_ms: 12 } };
    assert_eq!(serde_json::to_value(&answer).unwrap(), json!({"task": "t1", "by": "bob", "until_unix_ms": 12}));
}

#[test]
fn an_unknown_decision_is_an_error_not_a_default() {
    let mut wire = decided_json();
    wire["choices"] = json!(["approve", "maybe"]);
    let err = serde_json::from_value::<TaskView>(wire).unwrap_err();
    assert!(err.to_string().contains("unknown decision 'maybe'"), "{err}");
}

#[test]
fn a_canarys_outcome_is_named_as_its_json() {
    use super::canary::Outcome;
    for outcome in [Outcome::Pending, Outcome::Caught, Outcome::Missed, Outcome::Expired] {
        assert_eq!(serde_json::to_value(outcome).unwrap(), outcome.as_str());
    }
}
