use airlock_contract::v1;
use airlock_transport::{Destination, Message, Topology};
use prost::Message as _;

use super::*;

const POLICY: &str = "approvers:\n  - name: auto\n    tools: ls\n  - name: monitor\n    tools: rm\n    timeout: 5\n  - name: human\n    tools: \"*\"\n    pool: security\n";

fn handler() -> Handler {
    Handler::new(Topology::new("t"), PolicyStore::new(None), "worker-1")
}

fn request(function: &str, deadline: i64) -> v1::Request {
    v1::Request {
        key: Some(v1::CallKey { run_id: "r".into(), sample_id: "s".into(), epoch: 1, tool_call_id: "c".into() }),
        origin: None,
        body: Some(v1::request::Body::Approval(v1::ApprovalRequest {
            call: Some(v1::ToolCall {
                id: "c".into(),
                function: function.into(),
                arguments_json: r#"{"path": "/tmp"}"#.into(),
                ..Default::default()
            }),
            ..Default::default()
        })),
        policy: Some(v1::Policy { source: Some(v1::policy::Source::Inline(POLICY.into())), digest: String::new() }),
        chain: None,
        deadline_unix_ms: deadline,
        requested_at_unix_ms: 1,
        reply_to: "t.reply.runner".into(),
    }
}

fn published(handled: Handled) -> Vec<Outgoing> {
    match handled {
        Handled::Publish(out, _) => out,
        other => panic!("expected messages to publish, got {other:?}"),
    }
}

fn reply(out: &Outgoing) -> v1::reply::Body {
    v1::Reply::decode(out.message.body.as_ref()).unwrap().body.unwrap()
}

#[test]
fn a_built_in_decision_goes_to_the_runner_and_the_audit_exchange() {
    let out = published(handler().on_request(&Message::new(request("ls", 0).encode_to_vec()), 10));
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].destination, Destination::queue("t.reply.runner"));
    assert_eq!(out[0].message.correlation_id.as_deref(), Some("approval/r/s/1/c"));
    let v1::reply::Body::Decision(decision) = reply(&out[0]) else { panic!() };
    assert_eq!(decision.decision(), v1::DecisionKind::Approve);
    assert_eq!(
        (decision.approver.as_str(), decision.step, decision.decided_by.as_str()),
        ("auto", Some(0), "worker-1")
    );
    assert_eq!(decision.policy_digest, airlock_policy::document::digest(POLICY));
    assert_eq!(out[1].destination, Destination::exchange("t.decisions", "approval.approve"));
}

#[test]
fn a_handled_message_reports_its_decision_and_the_answer_that_came_in() {
    let Handled::Publish(_, report) = handler().on_request(&Message::new(request("ls", 0).encode_to_vec()), 10) else {
        panic!("decided")
    };
    assert_eq!(report.kind, Some(Kind::Approval));
    assert_eq!(report.decided, Some(Decided { decision: Decision::Approve, approver: "auto".into(), latency_ms: 9 }));
    assert_eq!(report.answered, None);

    let handler = handler();
    let out = published(handler.on_request(&Message::new(request("rm", 0).encode_to_vec()), 1_000));
    let task = v1::StepTask::decode(out[0].message.body.as_ref()).unwrap();
    let answer = v1::StepAnswer {
        decision: v1::DecisionKind::Reject.into(),
        started_at_unix_ms: 1_000,
        answered_at_unix_ms: 1_250,
        ..Default::default()
    };
    let result = v1::StepResult { task: Some(task), answer: Some(answer) };
    let Handled::Publish(_, report) = handler.on_result(&Message::new(result.encode_to_vec()), 1_300) else {
        panic!("decided")
    };
    assert_eq!(report.answered, Some(Answered { step: "monitor".into(), took_ms: 250, human: false }));
    assert_eq!(report.decided.map(|d| d.approver), Some("monitor".into()));
}

#[test]
fn without_a_request_deadline_a_step_task_carries_the_steps_own() {
    let out = published(handler().on_request(&Message::new(request("rm", 0).encode_to_vec()), 1_000));
    let task = v1::StepTask::decode(out[0].message.body.as_ref()).unwrap();
    assert_eq!(task.deadline_unix_ms, 6_000);
}

#[test]
fn an_external_step_gets_the_request_and_its_chain_and_its_result_continues_it() {
    let handler = handler();
    let out = published(handler.on_request(&Message::new(request("rm", 50_000).encode_to_vec()), 1_000));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].destination, Destination::queue("t.step.monitor"));
    assert_eq!(out[0].message.reply_to.as_deref(), Some("t.results"));
    assert!(out[0].declare.is_some());
    let task = v1::StepTask::decode(out[0].message.body.as_ref()).unwrap();
    assert_eq!((task.step, task.name.as_str(), task.deadline_unix_ms), (1, "monitor", 6_000));
    assert_eq!(task.on_timeout(), v1::DecisionKind::Reject);

    // The monitor escalates: the chain goes on to the human pool.
    let answer = v1::StepAnswer {
        decision: v1::DecisionKind::Escalate.into(),
        explanation: Some("score 5".into()),
        decided_by: "monitor-7".into(),
        ..Default::default()
    };
    let result = v1::StepResult { task: Some(task), answer: Some(answer) };
    let out = published(handler.on_result(&Message::new(result.encode_to_vec()), 2_000));
    assert_eq!(out[0].destination, Destination::queue("t.human.security"));
    let human = v1::HumanTask::decode(out[0].message.body.as_ref()).unwrap();
    assert_eq!(human.choices.len(), 3);
    let task = human.task.unwrap();
    let trail = &task.request.as_ref().unwrap().chain.as_ref().unwrap().trail;
    assert_eq!((trail[0].approver.as_str(), trail[0].decided_by.as_str()), ("monitor", "monitor-7"));

    // The human approves: the decision names the reviewer.
    let answer =
        v1::StepAnswer { decision: v1::DecisionKind::Approve.into(), decided_by: "alice".into(), ..Default::default() };
    let result = v1::StepResult { task: Some(task), answer: Some(answer) };
    let out = published(handler.on_result(&Message::new(result.encode_to_vec()), 3_000));
    let v1::reply::Body::Decision(decision) = reply(&out[0]) else { panic!() };
    assert_eq!(
        (decision.decision(), decision.approver.as_str(), decision.decided_by.as_str()),
        (v1::DecisionKind::Approve, "human", "alice")
    );
    assert_eq!(decision.trail.len(), 2);
}

#[test]
fn garbage_is_dead_lettered_with_an_error_to_whoever_sent_it() {
    let message =
        Message::new(&b"\xff\xffnot protobuf"[..]).with_reply_to("t.reply.x").with_correlation_id("approval/a/b/1/c");
    let Handled::Dead { reason, reply: Some(reply_out) } = handler().on_request(&message, 0) else { panic!() };
    assert_eq!(reason.code, ErrorCode::BadMessage, "{reason}");
    assert_eq!(reply_out.destination, Destination::queue("t.reply.x"));
    assert_eq!(reply_out.message.correlation_id.as_deref(), Some("approval/a/b/1/c"));
    let v1::reply::Body::Error(error) = reply(&reply_out) else { panic!() };
    assert_eq!(error.code, "bad_message");
}

#[test]
fn policy_problems_are_reported_with_their_code() {
    let mut unknown = request("ls", 0);
    unknown.policy = Some(v1::Policy { source: Some(v1::policy::Source::Name("nope".into())), digest: String::new() });
    let Handled::Dead { reply: Some(out), .. } = handler().on_request(&Message::new(unknown.encode_to_vec()), 0) else {
        panic!()
    };
    let v1::reply::Body::Error(error) = reply(&out) else { panic!() };
    assert_eq!(error.code, "unknown_policy");
    assert_eq!(error.key.unwrap().tool_call_id, "c");

    let mut invalid = request("ls", 0);
    invalid.policy =
        Some(v1::Policy { source: Some(v1::policy::Source::Inline("approvers: 3".into())), digest: String::new() });
    let Handled::Dead { reason, .. } = handler().on_request(&Message::new(invalid.encode_to_vec()), 0) else {
        panic!()
    };
    assert_eq!(reason.code, ErrorCode::InvalidPolicy);
    assert!(reason.to_string().starts_with("invalid_policy: <inline>:1:12"), "{reason}");
}

#[test]
fn a_request_past_its_deadline_is_dropped() {
    assert_eq!(handler().on_request(&Message::new(request("ls", 5).encode_to_vec()), 6), Handled::Expired);
}

#[test]
fn a_reply_wraps_the_encoded_decision_exactly_as_prost_would() {
    let out = published(handler().on_request(&Message::new(request("ls", 0).encode_to_vec()), 10));
    let v1::reply::Body::Decision(decision) = reply(&out[0]) else { panic!() };
    assert_eq!(out[1].message.body.as_ref(), decision.encode_to_vec().as_slice(), "the audit carries the decision");
    let wrapped = v1::Reply { body: Some(v1::reply::Body::Decision(decision.clone())) }.encode_to_vec();
    assert_eq!(out[0].message.body.as_ref(), wrapped.as_slice());
    // Past 127 bytes the length takes two bytes, past 16383 three.
    for size in [0, 100, 200, 20_000] {
        let big = v1::Decision { explanation: Some("x".repeat(size)), ..decision.clone() };
        let wrapped = v1::Reply { body: Some(v1::reply::Body::Decision(big.clone())) }.encode_to_vec();
        assert_eq!(super::reply_with_decision(&big.encode_to_vec()), wrapped, "explanation of {size} bytes");
    }
}
