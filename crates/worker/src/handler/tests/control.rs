//! The fleet's control over a call: run switches, incidents and breakers.

use airlock_contract::v1::{ControlResponse, control_event::Event};
use airlock_control::{ControlState, ControlView};

use super::*;

/// The breaker's policy: `rm` is rejected, everything else approved, three rejections in a
/// row send a sample's later calls to the `ops` pool.
const GUARDED: &str = "approvers:\n  - name: auto\n    tools: rm\n    decision: reject\n  - name: auto\n    tools: \"*\"\nbreaker:\n  rejections_in_a_row: 3\n  pool: ops\n";

/// A handler whose control state holds `events`.
fn controlled(events: &[Event]) -> Handler {
    let mut state = ControlState::new();
    for event in events {
        state.apply(&airlock_control::log::stamp("alice", event.clone()));
    }
    handler().with_control(ControlView::of(state))
}

fn switch(run: &str, response: ControlResponse) -> Event {
    Event::RunSwitch(v1::RunSwitch {
        run: Some(v1::RunRef { run_id: run.into(), tenant: String::new() }),
        response: response.into(),
        reason: "caught".into(),
        ..Default::default()
    })
}

fn in_run(run: &str, function: &str) -> v1::Request {
    let mut request = request(function, 50_000);
    request.key.as_mut().unwrap().run_id = run.into();
    request
}

fn with_policy(mut request: v1::Request, text: &str) -> v1::Request {
    request.policy = Some(v1::Policy { source: Some(v1::policy::Source::Inline(text.into())), digest: String::new() });
    request
}

/// The decision of a reply to `request`.
fn decided(out: &Outgoing, request: &v1::Request) -> v1::Decision {
    match opened(out, &request.encode_to_vec()).unwrap() {
        v1::reply_body::Body::Decision(decision) => decision,
        other => panic!("expected a decision, got {other:?}"),
    }
}

#[test]
fn every_later_call_of_a_terminated_run_ends_its_sample_and_no_other_run_is_touched() {
    let handler = controlled(&[switch("r", ControlResponse::Terminate)]);
    let asked = in_run("r", "ls");
    let Handled::Publish(out, report) = on_request(&handler, &Message::new(asked.encode_to_vec()), 10) else {
        panic!("decided")
    };
    let decision = decided(&out[0], &asked);
    assert_eq!((decision.decision(), decision.approver.as_str()), (v1::DecisionKind::Terminate, CONTROL));
    assert_eq!(decision.explanation.as_deref(), Some(STOPPED), "the model is not told why");
    let entry = decision.trail.last().unwrap();
    assert_eq!(entry.explanation.as_deref(), Some("run r was switched by alice: caught"));
    assert_eq!(report.controlled, Some("terminate"));

    let other = in_run("other", "ls");
    let out = published(on_request(&handler, &Message::new(other.encode_to_vec()), 10));
    assert_eq!(decided(&out[0], &other).decision(), v1::DecisionKind::Approve);
}

#[test]
fn an_answer_asked_before_a_run_was_terminated_is_recorded_and_the_call_terminated() {
    let asked = in_run("r", "rm");
    let task = monitor_task_of(&handler(), asked.clone());
    let result =
        v1::StepResult { task: Some(task), answer: Some(answer(v1::DecisionKind::Approve)), ..Default::default() };
    let handler = controlled(&[switch("r", ControlResponse::Terminate)]);
    let out = published(on_result(&handler, &result_message(&result, MONITOR_USER), 2_000));
    let decision = decided(&out[0], &asked);
    assert_eq!(decision.decision(), v1::DecisionKind::Terminate, "no automated approval after the switch");
    let trail: Vec<_> = decision.trail.iter().map(|entry| (entry.approver.as_str(), entry.decision())).collect();
    assert_eq!(
        trail,
        [("monitor", v1::DecisionKind::Approve), (CONTROL, v1::DecisionKind::Terminate)],
        "the monitor's answer stays in the trail"
    );
}

#[test]
fn a_paused_run_sends_every_call_to_a_person_who_then_decides_it() {
    let handler = controlled(&[switch("r", ControlResponse::Human)]);
    let asked = in_run("r", "ls");
    let out = published(on_request(&handler, &Message::new(asked.encode_to_vec()), 1_000));
    assert_eq!(out[0].destination, Destination::route("t.route", "human.security"), "the policy's own pool");
    let human = v1::HumanTask::decode(out[0].message.body.as_ref()).unwrap();
    let task = human.task.unwrap();
    let governing = task.request.as_ref().unwrap().chain.as_ref().unwrap().governing.clone();
    assert!(governing.is_some(), "the task says which policy it runs under");
    let answer = v1::StepAnswer { decided_by: "bob".into(), ..answer(v1::DecisionKind::Approve) };
    let result = signed(&reviewer_key(), task, answer);
    let out = published(on_result(&handler, &result_message(&result, "reviewer"), 2_000));
    let decision = decided(&out[0], &asked);
    assert_eq!((decision.decision(), decision.approver.as_str()), (v1::DecisionKind::Approve, "human"));
    assert_eq!(decision.decided_by, "bob");
}

#[test]
fn a_call_asked_under_a_switch_since_lifted_starts_again_under_its_own_policy() {
    let asked = in_run("r", "ls");
    let paused = controlled(&[switch("r", ControlResponse::Human)]);
    let out = published(on_request(&paused, &Message::new(asked.encode_to_vec()), 1_000));
    let task = v1::HumanTask::decode(out[0].message.body.as_ref()).unwrap().task.unwrap();
    let result = signed(&reviewer_key(), task, answer(v1::DecisionKind::Reject));
    let resumed = controlled(&[switch("r", ControlResponse::Human), switch("r", ControlResponse::None)]);
    let out = published(on_result(&resumed, &result_message(&result, "reviewer"), 2_000));
    let decision = decided(&out[0], &asked);
    let trail: Vec<_> = decision.trail.iter().map(|entry| (entry.approver.as_str(), entry.decision())).collect();
    assert_eq!(trail, [("human", v1::DecisionKind::Reject), ("auto", v1::DecisionKind::Approve)]);
}

#[test]
fn an_incident_sends_the_run_to_the_response_its_policy_names() {
    let policy = format!("{POLICY}incident:\n  then: terminate\n");
    let marked =
        Event::Incident(v1::Incident { key: in_run("r", "ls").key, marked: "d1".into(), note: "exfiltration".into() });
    let handler = controlled(&[marked]);
    let asked = with_policy(in_run("r", "ls"), &policy);
    let out = published(on_request(&handler, &Message::new(asked.encode_to_vec()), 10));
    assert_eq!(decided(&out[0], &asked).decision(), v1::DecisionKind::Terminate);
}

#[test]
fn a_policy_with_a_breaker_logs_each_approval_before_its_decision() {
    let handler = handler();
    let outcome = |function: &str| {
        let asked = with_policy(request(function, 0), GUARDED);
        let out = published(on_request(&handler, &Message::new(asked.encode_to_vec()), 10));
        assert_eq!(out.len(), 2, "the log's entry and the decision");
        assert_eq!(out[0].queue, Queue::Log);
        assert_eq!(out[0].destination, Topology::log_route("t.control"));
        let entry = v1::ControlEvent::decode(out[0].message.body.as_ref()).unwrap();
        let Some(Event::Outcome(outcome)) = entry.event else { panic!("an outcome") };
        assert_eq!(outcome.key, asked.key);
        outcome.denied
    };
    assert!(outcome("rm"));
    assert!(!outcome("ls"));
    let unguarded = published(on_request(&handler, &Message::new(request("ls", 0).encode_to_vec()), 10));
    assert_eq!(unguarded.len(), 1, "nothing is logged for a policy without a breaker");
}

#[test]
fn a_tripped_breaker_sends_the_samples_next_call_to_its_pool() {
    let rejected = |call: &str| {
        let mut key = request("rm", 0).key.unwrap();
        key.tool_call_id = call.into();
        Event::Outcome(v1::CallOutcome { key: Some(key), denied: true })
    };
    let handler = controlled(&[rejected("c1"), rejected("c2"), rejected("c3")]);
    let asked = with_policy(request("ls", 0), GUARDED);
    let Handled::Publish(out, report) = on_request(&handler, &Message::new(asked.encode_to_vec()), 10) else {
        panic!("forwarded")
    };
    assert_eq!(out[0].destination, Destination::route("t.route", "human.ops"));
    assert_eq!(report.controlled, Some("human"));
    let mut other = asked.clone();
    other.key.as_mut().unwrap().sample_id = "another".into();
    let out = published(on_request(&handler, &Message::new(other.encode_to_vec()), 10));
    assert_eq!(decided(&out[1], &other).decision(), v1::DecisionKind::Approve, "another sample");
}

#[test]
fn a_run_switched_to_a_stricter_policy_is_decided_by_it() {
    let dir = std::env::temp_dir().join(format!("airlock-control-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("strict.yaml"), "approvers:\n  - name: auto\n    tools: \"*\"\n    decision: reject\n")
        .unwrap();
    let mut state = ControlState::new();
    let strict = Event::RunSwitch(v1::RunSwitch {
        run: Some(v1::RunRef { run_id: "r".into(), tenant: String::new() }),
        response: ControlResponse::Policy.into(),
        policy: "strict".into(),
        ..Default::default()
    });
    state.apply(&airlock_control::log::stamp("alice", strict));
    let trust = Trust::signed(fleet_key(), reviewer_key().public_key().into());
    let handler = Handler::new(Topology::new("t"), PolicyStore::new(Some(dir.clone())), "worker-1", trust)
        .with_control(ControlView::of(state));
    let asked = in_run("r", "ls");
    let out = published(on_request(&handler, &Message::new(asked.encode_to_vec()), 10));
    let decision = decided(&out[0], &asked);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!((decision.decision(), decision.approver.as_str()), (v1::DecisionKind::Reject, "auto"));
    assert_eq!(
        decision.policy_digest,
        airlock_policy::document::digest("approvers:\n  - name: auto\n    tools: \"*\"\n    decision: reject\n")
    );
}

#[test]
fn a_rejection_nobody_answered_for_is_not_counted_as_one() {
    let policy = format!("{POLICY}breaker:\n  rejections_in_a_row: 3\n");
    let asked = with_policy(request("rm", 50_000), &policy);
    let handler = handler();
    let task = monitor_task_of(&handler, asked);
    let outcome = |timed_out: bool| {
        let answer = v1::StepAnswer { timed_out, ..answer(v1::DecisionKind::Reject) };
        let result = v1::StepResult { task: Some(task.clone()), answer: Some(answer), ..Default::default() };
        let out = published(on_result(&handler, &result_message(&result, MONITOR_USER), 2_000));
        assert_eq!(out[0].queue, Queue::Log);
        let entry = v1::ControlEvent::decode(out[0].message.body.as_ref()).unwrap();
        let Some(Event::Outcome(outcome)) = entry.event else { panic!("an outcome") };
        outcome.denied
    };
    assert!(outcome(false), "the monitor refused the call");
    assert!(!outcome(true), "the monitor's deadline passed: nobody refused it");
}
