use airlock_contract::v1;
use airlock_integrity::{FleetKey, KeyFile as _, PublicKeys, RunnerKeys, SigningKey, VerifyError};
use airlock_records::signed::{ReplyError, open_reply, sign_human_answer};
use airlock_transport::{Destination, Message, Topology};
use prost::Message as _;

use super::*;

const POLICY: &str = "approvers:\n  - name: auto\n    tools: ls\n  - name: monitor\n    tools: rm\n    timeout: 5\n  - name: human\n    tools: \"*\"\n    pool: security\n";

/// The broker user the monitor step answers as.
const MONITOR_USER: &str = "step-monitor";

fn fleet_key() -> FleetKey {
    FleetKey::from_seed([7; 32])
}

fn reviewer_key() -> SigningKey {
    SigningKey::from_seed([9; 32])
}

/// A worker of the fleet of [`fleet_key`] that trusts [`reviewer_key`], whose monitor step
/// answers as [`MONITOR_USER`].
fn handler() -> Handler {
    let trust = Trust::signed(fleet_key(), reviewer_key().public_key().into())
        .with_step_users("monitor", [MONITOR_USER.to_owned()]);
    Handler::new(Topology::new("t"), PolicyStore::new(None), "worker-1", trust)
}

/// The runner every request comes from, holding the fleet's public key.
fn runner() -> &'static RunnerKeys {
    static RUNNER: std::sync::OnceLock<RunnerKeys> = std::sync::OnceLock::new();
    RUNNER.get_or_init(|| RunnerKeys::new(&fleet_key().public_key().into()).unwrap())
}

fn request(function: &str, deadline: i64) -> v1::Request {
    v1::Request {
        key: Some(v1::CallKey {
            run_id: "r".into(),
            sample_id: "s".into(),
            epoch: 1,
            tool_call_id: "c".into(),
            ..Default::default()
        }),
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
        runner_key: runner().public().to_vec(),
    }
}

/// A result as a step publishes it, answering as `user`, and naming the runner's queue as
/// where a refusal should go (it goes nowhere).
fn result_message(result: &v1::StepResult, user: &str) -> Message {
    let message = Message::new(result.encode_to_vec()).with_reply_to("t.reply.runner");
    Message { user_id: Some(user.to_owned()), ..message }
}

/// A human answer as a reviewer service holding `key` sends it.
fn signed(key: &SigningKey, task: v1::StepTask, answer: v1::StepAnswer) -> v1::StepResult {
    let mut result = v1::StepResult { task: Some(task), answer: Some(answer), ..Default::default() };
    sign_human_answer(key, &mut result);
    result
}

/// What `handler` makes of `message` delivered on the requests queue at `now_ms`.
fn on_request(handler: &Handler, message: &Message, now_ms: i64) -> Handled {
    handler.handle(&Inbound::request(message), now_ms)
}

/// What `handler` makes of `message` delivered on the results queue at `now_ms`.
fn on_result(handler: &Handler, message: &Message, now_ms: i64) -> Handled {
    handler.handle(&Inbound::result(message), now_ms)
}

fn published(handled: Handled) -> Vec<Outgoing> {
    match handled {
        Handled::Publish(out, _) => out,
        other => panic!("expected messages to publish, got {other:?}"),
    }
}

/// What a reply to the request encoded as `request` says, once the runner's proof holds.
fn opened(out: &Outgoing, request: &[u8]) -> Result<v1::reply_body::Body, ReplyError> {
    open_reply(&out.message.body, Some(runner()), &airlock_integrity::digest(request))
}

fn reply(out: &Outgoing) -> v1::reply_body::Body {
    opened(out, &request("ls", 0).encode_to_vec()).unwrap()
}

#[test]
fn a_built_in_decision_goes_to_the_runner_with_one_copy_for_the_audit() {
    let out = published(on_request(&handler(), &Message::new(request("ls", 0).encode_to_vec()), 10));
    assert_eq!(out.len(), 1, "one publish");
    assert_eq!(out[0].destination, Destination::route("t.route", "reply.runner").with_copy("approval.approve"));
    assert_eq!(out[0].message.correlation_id.as_deref(), Some("approval/r/s/1/c"));
    let v1::reply_body::Body::Decision(decision) = reply(&out[0]) else { panic!() };
    assert_eq!(decision.decision(), v1::DecisionKind::Approve);
    assert_eq!(
        (decision.approver.as_str(), decision.step, decision.decided_by.as_str()),
        ("auto", Some(0), "worker-1")
    );
    assert_eq!(decision.policy_digest, airlock_policy::document::digest(POLICY));
}

#[test]
fn a_request_decided_twice_has_one_decision_id_and_another_request_another() {
    let decision_id = |request: v1::Request, worker: &str| {
        let trust = Trust::signed(fleet_key(), reviewer_key().public_key().into());
        let handler = Handler::new(Topology::new("t"), PolicyStore::new(None), worker, trust);
        let body = request.encode_to_vec();
        let out = published(on_request(&handler, &Message::new(body.clone()), 10));
        let Ok(v1::reply_body::Body::Decision(decision)) = opened(&out[0], &body) else { panic!() };
        decision.decision_id
    };
    let first = decision_id(request("ls", 0), "worker-1");
    assert_eq!(decision_id(request("ls", 0), "worker-2"), first, "the same request, by another worker");
    let asked_again = v1::Request { requested_at_unix_ms: 2, ..request("ls", 0) };
    assert_ne!(decision_id(asked_again, "worker-1"), first, "the call asked about again");
    assert!(uuid::Uuid::parse_str(&first).is_ok(), "{first}");
}

#[test]
fn a_handled_message_reports_its_decision_and_the_answer_that_came_in() {
    let Handled::Publish(_, report) = on_request(&handler(), &Message::new(request("ls", 0).encode_to_vec()), 10)
    else {
        panic!("decided")
    };
    assert_eq!(report.kind, Some(Kind::Approval));
    assert_eq!(
        report.decided,
        Some(Decided { decision: Decision::Approve, approver: "auto".into(), timed_out: false, latency_ms: 9 })
    );
    assert_eq!(report.answered, None);

    let handler = handler();
    let out = published(on_request(&handler, &Message::new(request("rm", 0).encode_to_vec()), 1_000));
    let task = v1::StepTask::decode(out[0].message.body.as_ref()).unwrap();
    let answer = v1::StepAnswer {
        decision: v1::DecisionKind::Reject.into(),
        started_at_unix_ms: 1_000,
        answered_at_unix_ms: 1_250,
        ..Default::default()
    };
    let result = v1::StepResult { task: Some(task), answer: Some(answer), ..Default::default() };
    let Handled::Publish(_, report) = on_result(&handler, &result_message(&result, MONITOR_USER), 1_300) else {
        panic!("decided")
    };
    assert_eq!(report.answered, Some(Answered { step: "monitor".into(), took_ms: 250, human: false }));
    assert_eq!(report.decided.map(|d| d.approver), Some("monitor".into()));
}

#[test]
fn without_a_request_deadline_a_step_task_carries_the_steps_own() {
    let out = published(on_request(&handler(), &Message::new(request("rm", 0).encode_to_vec()), 1_000));
    let task = v1::StepTask::decode(out[0].message.body.as_ref()).unwrap();
    assert_eq!(task.deadline_unix_ms, 6_000);
}

#[test]
fn an_external_step_gets_the_request_and_its_chain_and_its_result_continues_it() {
    let handler = handler();
    let asked = request("rm", 50_000).encode_to_vec();
    let out = published(on_request(&handler, &Message::new(asked.clone()), 1_000));
    assert_eq!(out.len(), 2, "the task, and the runner's word that a step holds its call");
    assert_eq!(out[0].destination, Destination::route("t.route", "step.monitor"));
    let held = v1::reply_body::Body::Progress(v1::Progress {
        pool: String::new(),
        task_id: String::new(),
        step: 1,
        ..Default::default()
    });
    assert_eq!(opened(&out[1], &asked).unwrap(), held);
    assert_eq!(out[1].message.correlation_id, out[0].message.correlation_id);
    assert_eq!(out[1].destination, Topology::new("t").reply_route("t.reply.runner").unwrap(), "no copy for the audit");
    assert_eq!(out[0].message.reply_to.as_deref(), Some("t.results"));
    assert!(matches!(out[0].queue, Queue::Declare(_)), "a configured step's queue is declared");
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
    let result = v1::StepResult { task: Some(task), answer: Some(answer), ..Default::default() };
    let out = published(on_result(&handler, &result_message(&result, MONITOR_USER), 2_000));
    assert_eq!(out[0].destination, Destination::route("t.route", "human.security"));
    let held = v1::Progress { pool: "security".into(), task_id: String::new(), step: 2, ..Default::default() };
    assert_eq!(opened(&out[1], &asked).unwrap(), v1::reply_body::Body::Progress(held));
    // Only the caller's inline policy names the pool: its queue must stand, or the request
    // is refused, proved to its runner.
    let Queue::Existing(refusal) = &out[0].queue else { panic!("{:?}", out[0].queue) };
    let Handled::Dead { reason, reply: Some(reply) } = &**refusal else { panic!("{refusal:?}") };
    assert_eq!(reason.code, ErrorCode::InvalidPolicy);
    assert!(reason.text.contains("'human.security', which nothing of this fleet serves"), "{reason}");
    let Ok(v1::reply_body::Body::Error(error)) = opened(reply, &asked) else { panic!() };
    assert_eq!(error.code, "invalid_policy");
    let human = v1::HumanTask::decode(out[0].message.body.as_ref()).unwrap();
    assert_eq!(human.choices.len(), 3);
    let task = human.task.unwrap();
    let trail = &task.request.as_ref().unwrap().chain.as_ref().unwrap().trail;
    assert_eq!(
        (trail[0].approver.as_str(), trail[0].decided_by.as_str(), trail[0].published_by.as_str()),
        ("monitor", "monitor-7", MONITOR_USER)
    );

    // The human approves: the decision names the reviewer.
    let answer =
        v1::StepAnswer { decision: v1::DecisionKind::Approve.into(), decided_by: "alice".into(), ..Default::default() };
    let result = signed(&reviewer_key(), task, answer);
    let out = published(on_result(&handler, &result_message(&result, "reviewer"), 3_000));
    let v1::reply_body::Body::Decision(decision) = opened(&out[0], &request("rm", 50_000).encode_to_vec()).unwrap()
    else {
        panic!()
    };
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
    let Handled::Dead { reason, reply: Some(reply_out) } = on_request(&handler(), &message, 0) else { panic!() };
    assert_eq!(reason.code, ErrorCode::BadMessage, "{reason}");
    assert_eq!(reply_out.destination, Destination::route("t.route", "reply.x"));
    assert_eq!(reply_out.message.correlation_id.as_deref(), Some("approval/a/b/1/c"));
    // Nothing tells whose request it was, so nothing can prove the error to its runner.
    let unproved = open_reply(&reply_out.message.body, Some(runner()), &[0; 32]);
    assert!(matches!(unproved, Err(ReplyError::Unproved(VerifyError::Unsigned))), "{unproved:?}");
    let Ok(v1::reply_body::Body::Error(error)) = open_reply(&reply_out.message.body, None, &[0; 32]) else { panic!() };
    assert_eq!(error.code, "bad_message");
}

#[test]
fn policy_problems_are_reported_with_their_code() {
    let mut unknown = request("ls", 0);
    unknown.policy = Some(v1::Policy { source: Some(v1::policy::Source::Name("nope".into())), digest: String::new() });
    let Handled::Dead { reply: Some(out), .. } = on_request(&handler(), &Message::new(unknown.encode_to_vec()), 0)
    else {
        panic!()
    };
    let v1::reply_body::Body::Error(error) = opened(&out, &unknown.encode_to_vec()).unwrap() else { panic!() };
    assert_eq!(error.code, "unknown_policy");
    assert_eq!(error.key.unwrap().tool_call_id, "c");

    let mut invalid = request("ls", 0);
    invalid.policy =
        Some(v1::Policy { source: Some(v1::policy::Source::Inline("approvers: 3".into())), digest: String::new() });
    let Handled::Dead { reason, .. } = on_request(&handler(), &Message::new(invalid.encode_to_vec()), 0) else {
        panic!()
    };
    assert_eq!(reason.code, ErrorCode::InvalidPolicy);
    assert!(reason.to_string().starts_with("invalid_policy: <inline>:1:12"), "{reason}");
}

#[test]
fn a_request_past_its_deadline_is_dropped() {
    assert_eq!(on_request(&handler(), &Message::new(request("ls", 5).encode_to_vec()), 6), Handled::Expired);
}

// === integrity: what an attacker on the broker can send ===

/// The monitor task of a fresh `rm` request (deadline 50 s), as the worker sealed it.
fn monitor_task(handler: &Handler) -> v1::StepTask {
    monitor_task_of(handler, request("rm", 50_000))
}

fn monitor_task_of(handler: &Handler, request: v1::Request) -> v1::StepTask {
    let out = published(on_request(handler, &Message::new(request.encode_to_vec()), 1_000));
    v1::StepTask::decode(out[0].message.body.as_ref()).unwrap()
}

fn answer(decision: v1::DecisionKind) -> v1::StepAnswer {
    v1::StepAnswer { decision: decision.into(), decided_by: "someone".into(), ..Default::default() }
}

fn refused(handled: Handled) -> String {
    match handled {
        Handled::Dead { reason, reply } => {
            assert_eq!(reason.code, ErrorCode::Refused, "{reason}");
            assert!(reply.is_none(), "a refused answer is not answered to the runner");
            reason.text
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_reply_is_proved_for_its_runner_and_its_request_only() {
    let asked = request("ls", 0).encode_to_vec();
    let out = published(on_request(&handler(), &Message::new(asked.clone()), 10));
    assert!(opened(&out[0], &asked).is_ok());
    // Replayed onto another call: the runner's digest of that request differs.
    let other = request("cat", 0).encode_to_vec();
    assert!(matches!(opened(&out[0], &other), Err(ReplyError::Unproved(VerifyError::Invalid))));
    // Another runner cannot take it either, nor can a runner of another fleet.
    let stranger = RunnerKeys::new(&fleet_key().public_key().into()).unwrap();
    let digest = airlock_integrity::digest(&asked);
    assert!(open_reply(&out[0].message.body, Some(&stranger), &digest).is_err());
    let elsewhere = RunnerKeys::new(&FleetKey::from_seed([8; 32]).public_key().into()).unwrap();
    let unknown = open_reply(&out[0].message.body, Some(&elsewhere), &digest);
    assert!(matches!(unknown, Err(ReplyError::Unproved(VerifyError::UnknownKey(_)))), "{unknown:?}");
    // A forged body under the genuine proof.
    let mut forged = v1::Reply::decode(out[0].message.body.as_ref()).unwrap();
    let last = forged.body.len() - 1;
    forged.body[last] ^= 1;
    assert!(open_reply(&forged.encode_to_vec(), Some(runner()), &digest).is_err());
}

#[test]
fn the_human_task_names_the_broker_user_that_asked_whoever_answered_before() {
    let handler = handler();
    let asked = Message { user_id: Some("runner-a".into()), ..Message::new(request("rm", 50_000).encode_to_vec()) };
    let out = published(on_request(&handler, &asked, 1_000));
    let task = v1::StepTask::decode(out[0].message.body.as_ref()).unwrap();
    assert_eq!(task.requested_by, "runner-a");
    // The monitor's result is published by the monitor's user; the name comes from the task.
    let result =
        v1::StepResult { task: Some(task), answer: Some(answer(v1::DecisionKind::Escalate)), ..Default::default() };
    let out = published(on_result(&handler, &result_message(&result, MONITOR_USER), 2_000));
    let human = v1::HumanTask::decode(out[0].message.body.as_ref()).unwrap();
    assert_eq!(human.task.unwrap().requested_by, "runner-a");
    // A request that names no user (the in-process transport) makes tasks that name none.
    assert_eq!(monitor_task(&handler).requested_by, "");
}

#[test]
fn a_step_task_names_the_digest_of_the_policy_resolved_whatever_the_runner_said() {
    let mut lying = request("rm", 50_000);
    lying.policy.as_mut().unwrap().digest = "0".repeat(64);
    let out = published(on_request(&handler(), &Message::new(lying.encode_to_vec()), 1_000));
    let task = v1::StepTask::decode(out[0].message.body.as_ref()).unwrap();
    let policy = task.request.unwrap().policy.unwrap();
    assert_eq!(policy.digest, airlock_policy::document::digest(POLICY));
    assert_eq!(policy.source, Some(v1::policy::Source::Inline(POLICY.into())));
}

#[test]
fn a_runner_request_carrying_chain_state_is_dead_lettered_with_a_proved_error() {
    let mut skipping = request("rm", 0);
    skipping.chain = Some(v1::ChainState { next_step: 2, ..Default::default() });
    let encoded = skipping.encode_to_vec();
    let Handled::Dead { reason, reply: Some(out) } = on_request(&handler(), &Message::new(encoded.clone()), 0) else {
        panic!()
    };
    assert_eq!(reason.code, ErrorCode::Refused, "{reason}");
    let v1::reply_body::Body::Error(error) = opened(&out, &encoded).unwrap() else { panic!() };
    assert_eq!(error.code, "refused");
}

#[test]
fn a_nul_in_a_name_a_store_keeps_is_refused_with_a_proved_error() {
    let nul = |edit: fn(&mut v1::Request)| {
        let mut bad = request("ls", 0);
        edit(&mut bad);
        bad
    };
    let requests = [
        nul(|r| r.key.as_mut().unwrap().run_id = "r\0".into()),
        nul(|r| r.key.as_mut().unwrap().sample_id = "\0s".into()),
        nul(|r| r.key.as_mut().unwrap().tool_call_id = "c\0c".into()),
        nul(|r| {
            let Some(v1::request::Body::Approval(a)) = &mut r.body else { unreachable!() };
            a.call.as_mut().unwrap().function = "ls\0".into();
        }),
    ];
    for bad in requests {
        let encoded = bad.encode_to_vec();
        let Handled::Dead { reason, reply: Some(out) } = on_request(&handler(), &Message::new(encoded.clone()), 0)
        else {
            panic!("{bad:?} was taken")
        };
        assert_eq!(reason.code, ErrorCode::BadMessage, "{reason}");
        let v1::reply_body::Body::Error(error) = opened(&out, &encoded).unwrap() else { panic!() };
        assert!(error.message.contains("NUL"), "{}", error.message);
    }
    // Arguments may hold one: stores keep them as bytes.
    let mut arguments = request("ls", 0);
    let Some(v1::request::Body::Approval(a)) = &mut arguments.body else { unreachable!() };
    a.call.as_mut().unwrap().arguments_json = r#"{"path": "/tmp\u0000x"}"#.into();
    assert!(!matches!(on_request(&handler(), &Message::new(arguments.encode_to_vec()), 0), Handled::Dead { .. }));
}

#[test]
fn a_runner_key_no_reply_can_be_proved_for_is_a_bad_message() {
    for key in [vec![1; 31], vec![0; 32]] {
        let mut bad = request("ls", 0);
        bad.runner_key = key;
        let Handled::Dead { reason, .. } = on_request(&handler(), &Message::new(bad.encode_to_vec()), 0) else {
            panic!()
        };
        assert_eq!(reason.code, ErrorCode::BadMessage, "{reason}");
    }
}

#[test]
fn a_task_not_as_the_fleet_sealed_it_is_refused() {
    let handler = handler();
    let task = monitor_task(&handler);
    let mut skipping = task.clone();
    skipping.request.as_mut().unwrap().chain.as_mut().unwrap().next_step = 3;
    let mut unsealed = task.clone();
    unsealed.seal.clear();
    let mut replayed = task.clone();
    replayed.request_digest = airlock_integrity::digest(b"another request").to_vec();
    // Renamed, so that another runner's cancel would withdraw the call's human task.
    let mut renamed = task.clone();
    renamed.requested_by = "mallory".into();
    let other_fleet = Trust::signed(FleetKey::from_seed([8; 32]), PublicKeys::default());
    let mut foreign = task.clone();
    other_fleet.seal(&mut foreign);
    let tampered = [
        ("skipping", skipping),
        ("unsealed", unsealed),
        ("replayed", replayed),
        ("renamed", renamed),
        ("foreign", foreign),
    ];
    for (what, task) in tampered {
        let result =
            v1::StepResult { task: Some(task), answer: Some(answer(v1::DecisionKind::Approve)), ..Default::default() };
        let text = refused(on_result(&handler, &result_message(&result, MONITOR_USER), 2_000));
        assert!(text.contains("not sealed"), "{what}: {text}");
    }
}

#[test]
fn an_answer_for_another_step_or_a_built_in_step_is_refused() {
    let handler = handler();
    let task = monitor_task(&handler);
    let mut elsewhere = answer(v1::DecisionKind::Approve);
    elsewhere.step = Some(0);
    let result = v1::StepResult { task: Some(task.clone()), answer: Some(elsewhere), ..Default::default() };
    assert!(refused(on_result(&handler, &result_message(&result, MONITOR_USER), 2_000)).contains("for step 0"));

    // Even a task sealed with the fleet's key is not answered for a built-in step.
    let mut built_in = task;
    built_in.step = 0;
    built_in.name = "auto".into();
    handler.trust.seal(&mut built_in);
    let result =
        v1::StepResult { task: Some(built_in), answer: Some(answer(v1::DecisionKind::Approve)), ..Default::default() };
    assert!(
        refused(on_result(&handler, &result_message(&result, MONITOR_USER), 2_000)).contains("no answers from outside")
    );
}

#[test]
fn an_answer_from_a_broker_user_the_step_does_not_list_is_refused() {
    let handler = handler();
    let result = v1::StepResult {
        task: Some(monitor_task(&handler)),
        answer: Some(answer(v1::DecisionKind::Approve)),
        ..Default::default()
    };
    let text = refused(on_result(&handler, &result_message(&result, "step-other"), 2_000));
    assert!(text.contains("step-other"), "{text}");
    refused(on_result(&handler, &Message::new(result.encode_to_vec()), 2_000));
    assert!(matches!(on_result(&handler, &result_message(&result, MONITOR_USER), 2_000), Handled::Publish(..)));
}

#[test]
fn a_human_answer_counts_only_signed_by_a_trusted_reviewer_service_for_its_task() {
    let handler = handler();
    let escalate = v1::StepResult {
        task: Some(monitor_task(&handler)),
        answer: Some(answer(v1::DecisionKind::Escalate)),
        ..Default::default()
    };
    let out = published(on_result(&handler, &result_message(&escalate, MONITOR_USER), 2_000));
    let human = v1::HumanTask::decode(out[0].message.body.as_ref()).unwrap().task.unwrap();
    let alice = v1::StepAnswer { decided_by: "alice".into(), ..answer(v1::DecisionKind::Approve) };

    let unsigned = v1::StepResult { task: Some(human.clone()), answer: Some(alice.clone()), ..Default::default() };
    assert!(refused(on_result(&handler, &result_message(&unsigned, "reviewer"), 3_000)).contains("not signed"));
    let stranger = signed(&SigningKey::from_seed([10; 32]), human.clone(), alice.clone());
    assert!(refused(on_result(&handler, &result_message(&stranger, "reviewer"), 3_000)).contains("unknown key"));
    let mut renamed = signed(&reviewer_key(), human.clone(), alice.clone());
    renamed.answer.as_mut().unwrap().decided_by = "mallory".into();
    assert!(refused(on_result(&handler, &result_message(&renamed, "reviewer"), 3_000)).contains("does not match"));
    // A genuine signature for another task (another call's human step) does not carry over.
    let mut another_call = request("rm", 50_000);
    another_call.key.as_mut().unwrap().tool_call_id = "c2".into();
    let other = v1::StepResult {
        task: Some(monitor_task_of(&handler, another_call)),
        answer: Some(answer(v1::DecisionKind::Escalate)),
        ..Default::default()
    };
    let out = published(on_result(&handler, &result_message(&other, MONITOR_USER), 2_500));
    let other_human = v1::HumanTask::decode(out[0].message.body.as_ref()).unwrap().task.unwrap();
    let mut moved = signed(&reviewer_key(), other_human, alice.clone());
    moved.task = Some(human.clone());
    assert!(refused(on_result(&handler, &result_message(&moved, "reviewer"), 3_000)).contains("does not match"));

    let genuine = signed(&reviewer_key(), human, alice);
    assert!(matches!(on_result(&handler, &result_message(&genuine, "reviewer"), 3_000), Handled::Publish(..)));
}

#[test]
fn an_insecure_worker_proves_nothing_and_takes_what_it_is_given() {
    let handler = Handler::new(Topology::new("t"), PolicyStore::new(None), "worker-1", Trust::insecure());
    let out = published(on_request(&handler, &Message::new(request("ls", 0).encode_to_vec()), 10));
    let reply = v1::Reply::decode(out[0].message.body.as_ref()).unwrap();
    assert!(reply.key_id.is_empty() && reply.proof.is_empty());
    let task = monitor_task(&handler);
    assert!(task.seal.is_empty());
    let result =
        v1::StepResult { task: Some(task), answer: Some(answer(v1::DecisionKind::Approve)), ..Default::default() };
    assert!(matches!(on_result(&handler, &Message::new(result.encode_to_vec()), 2_000), Handled::Publish(..)));
}

#[test]
fn a_reply_goes_only_to_a_reply_queue_of_the_fleet() {
    // A request naming a work queue as its reply queue would have its decision land there.
    for reply_to in ["t.requests", "t.results", "other.reply.runner"] {
        let mut misdirected = request("ls", 0);
        misdirected.reply_to = reply_to.into();
        let out = published(on_request(&handler(), &Message::new(misdirected.encode_to_vec()), 10));
        assert_eq!(out.len(), 1, "{reply_to}: the audit copy only");
        assert_eq!(out[0].destination, Destination::exchange("t.route", "approval.approve"));
    }
}

#[test]
fn a_delivery_belongs_to_its_headers_trace_or_a_result_to_its_tasks() {
    let traceparent = |value: &str| BTreeMap::from([("traceparent".to_owned(), value.to_owned())]);
    let task = v1::StepTask { trace_context: traceparent("task"), ..Default::default() };
    let body = v1::StepResult { task: Some(task), ..Default::default() }.encode_to_vec();
    let bare = Message::new(body.clone());
    assert_eq!(Inbound::result(&bare).trace(), &traceparent("task"));
    assert!(Inbound::request(&bare).trace().is_empty(), "a request's trace is its headers' alone");
    let mut headed = Message::new(body);
    headed.headers = BTreeMap::from([
        ("traceparent".to_owned(), "headers".to_owned()),
        ("x-other".to_owned(), "kept out".to_owned()),
    ]);
    assert_eq!(Inbound::result(&headed).trace(), &traceparent("headers"));
}

#[test]
fn a_panic_while_handling_is_that_messages_failure_told_to_its_runner() {
    let asked = request("rm", 50_000).encode_to_vec();
    let message = Message::new(asked.clone());
    let Handled::Dead { reason, reply: Some(reply) } = handler().failed(&Inbound::request(&message), "boom") else {
        panic!()
    };
    assert_eq!(reason.code, ErrorCode::BadMessage);
    assert_eq!(reason.text, "the worker failed handling this message: boom");
    let Ok(v1::reply_body::Body::Error(error)) = opened(&reply, &asked) else { panic!() };
    assert_eq!(error.message, reason.text);
    let Handled::Dead { reply: None, .. } = handler().failed(&Inbound::result(&message), "boom") else {
        panic!("a step result gets no reply")
    };
}

// === silent rejects and timeouts ===

/// A monitor whose own reason stays off the model's screen: its rejects show fixed text.
const SILENT: &str = "approvers:\n  - name: pattern\n    tools: ls\n    regex: tmp\n    explanation: lists /tmp\n    \
                      model_explanation: This action was not approved.\n  - name: monitor\n    tools: rm\n    \
                      model_explanation: Not approved.\n";

fn decision_of(out: &Outgoing, request: &v1::Request) -> v1::Decision {
    let Ok(v1::reply_body::Body::Decision(decision)) = opened(out, &request.encode_to_vec()) else { panic!() };
    decision
}

#[test]
fn a_silent_reject_tells_the_runner_the_fixed_text_and_keeps_the_reason_in_the_trail() {
    let handler = handler();
    let silent = |function: &str| v1::Request {
        policy: Some(v1::Policy { source: Some(v1::policy::Source::Inline(SILENT.into())), digest: String::new() }),
        ..request(function, 50_000)
    };
    let asked = silent("ls");
    let out = published(on_request(&handler, &Message::new(asked.encode_to_vec()), 1_000));
    let decision = decision_of(&out[0], &asked);
    assert_eq!(
        (decision.decision(), decision.explanation.as_deref()),
        (v1::DecisionKind::Reject, Some("This action was not approved."))
    );
    assert_eq!(decision.trail[0].explanation.as_deref(), Some("lists /tmp"));

    // The monitor's task carries its parameters, not the chain's own; its reason stays in the trail.
    let asked = silent("rm");
    let out = published(on_request(&handler, &Message::new(asked.encode_to_vec()), 1_000));
    let task = v1::StepTask::decode(out[0].message.body.as_ref()).unwrap();
    assert_eq!(task.params_json, "{}");
    let answer = v1::StepAnswer { explanation: Some("Suspicion 9/10".into()), ..answer(v1::DecisionKind::Terminate) };
    let result = v1::StepResult { task: Some(task), answer: Some(answer), ..Default::default() };
    let out = published(on_result(&handler, &result_message(&result, MONITOR_USER), 2_000));
    let decision = decision_of(&out[0], &asked);
    assert_eq!(decision.explanation.as_deref(), Some("Not approved."));
    assert_eq!(decision.trail[0].explanation.as_deref(), Some("Suspicion 9/10"));
}

#[test]
fn a_step_s_timeout_decides_as_timed_out_and_a_refusal_does_not() {
    let handler = handler();
    let asked = request("rm", 50_000);
    for (timed_out, explanation) in [(true, "The step's deadline passed"), (false, "Suspicion 9/10")] {
        let task = monitor_task(&handler);
        let answer =
            v1::StepAnswer { explanation: Some(explanation.into()), timed_out, ..answer(v1::DecisionKind::Reject) };
        let result = v1::StepResult { task: Some(task), answer: Some(answer), ..Default::default() };
        let Handled::Publish(out, report) = on_result(&handler, &result_message(&result, MONITOR_USER), 2_000) else {
            panic!("decided")
        };
        let decision = decision_of(&out[0], &asked);
        assert_eq!(decision.decision(), v1::DecisionKind::Reject);
        assert_eq!((decision.timed_out, decision.trail[0].timed_out), (timed_out, timed_out), "{explanation}");
        assert_eq!(report.decided.map(|d| d.timed_out), Some(timed_out));
        assert_eq!(airlock_records::convert::counts_as_denial(&decision), !timed_out);
    }
    // A built-in decision never timed out.
    let out = published(on_request(&handler, &Message::new(request("ls", 0).encode_to_vec()), 10));
    assert!(!decision_of(&out[0], &request("ls", 0)).timed_out);
}

mod control;

#[test]
fn a_human_task_nobody_answered_moves_through_its_pools_keeping_its_deadline_each_move_in_the_trail() {
    const ROUTED: &str = "approvers:\n  - name: human\n    tools: \"*\"\n    pool: ops\n    timeout: 30\n    \
                          reroute_after: 5\n    to: [oncall, leads]\n    warn_before: 2\n";
    let handler = handler();
    let mut asked = request("rm", 0);
    asked.policy = Some(v1::Policy { source: Some(v1::policy::Source::Inline(ROUTED.into())), digest: String::new() });
    let body = asked.encode_to_vec();
    let human = |out: &Outgoing| v1::HumanTask::decode(out.message.body.as_ref()).unwrap();
    let progress_pool = |out: &Outgoing| match opened(out, &body).unwrap() {
        v1::reply_body::Body::Progress(progress) => progress.pool,
        other => panic!("not a progress: {other:?}"),
    };
    let moving = |task: &v1::HumanTask, from: &str, to: &str| {
        let metadata = serde_json::json!({"rerouted": {"from": from, "to": to}});
        let answer = v1::StepAnswer {
            step: Some(0),
            approver: "human".into(),
            decided_by: "reroute".into(),
            metadata_json: metadata.to_string(),
            ..answer(v1::DecisionKind::Escalate)
        };
        result_message(&signed(&reviewer_key(), task.task.clone().unwrap(), answer), "reviewer")
    };

    let out = published(on_request(&handler, &Message::new(body.clone()), 1_000));
    let first = human(&out[0]);
    assert_eq!(out[0].destination, Topology::new("t").human_route("ops"));
    assert_eq!(
        (first.pool.as_str(), first.rerouted_from.as_str(), first.reroute_to.as_str(), first.reroute_at_unix_ms),
        ("ops", "", "oncall", 6_000)
    );
    let deadline = first.task.as_ref().unwrap().deadline_unix_ms;
    assert_eq!((deadline, first.warn_at_unix_ms), (31_000, 29_000));
    assert_eq!(progress_pool(&out[1]), "ops");

    let out = published(on_result(&handler, &moving(&first, "ops", "oncall"), 6_500));
    let second = human(&out[0]);
    assert_eq!(out[0].destination, Topology::new("t").human_route("oncall"));
    assert_eq!(
        (second.pool.as_str(), second.rerouted_from.as_str(), second.reroute_to.as_str(), second.reroute_at_unix_ms),
        ("oncall", "ops", "leads", 11_500)
    );
    assert_eq!((second.task.as_ref().unwrap().deadline_unix_ms, second.warn_at_unix_ms), (deadline, 29_000));
    assert_eq!(progress_pool(&out[1]), "oncall");
    // A move the step's route does not make is refused: the task stays where it is.
    for (from, to) in [("oncall", "ops"), ("ops", "leads"), ("oncall", "elsewhere")] {
        let text = refused(on_result(&handler, &moving(&second, from, to), 7_000));
        assert!(text.contains(&format!("does not move a task from pool '{from}' to pool '{to}'")), "{text}");
    }

    let out = published(on_result(&handler, &moving(&second, "oncall", "leads"), 11_600));
    let third = human(&out[0]);
    assert_eq!((third.pool.as_str(), third.rerouted_from.as_str()), ("leads", "oncall"));
    assert_eq!((third.reroute_to.as_str(), third.reroute_at_unix_ms), ("", 0), "the last pool keeps the task");

    let carol = v1::StepAnswer { step: Some(0), approver: "human".into(), ..answer(v1::DecisionKind::Approve) };
    let carol = v1::StepAnswer { decided_by: "carol".into(), ..carol };
    let approved = signed(&reviewer_key(), third.task.clone().unwrap(), carol);
    let out = published(on_result(&handler, &result_message(&approved, "reviewer"), 12_000));
    let Ok(v1::reply_body::Body::Decision(decision)) = opened(&out[0], &body) else { panic!("no decision") };
    assert_eq!((decision.decision(), decision.decided_by.as_str()), (v1::DecisionKind::Approve, "carol"));
    let moves: Vec<(String, String)> = decision
        .trail
        .iter()
        .filter(|entry| entry.decision() == v1::DecisionKind::Escalate)
        .map(|entry| {
            let metadata: ReroutedMetadata = serde_json::from_str(&entry.metadata_json).unwrap();
            (metadata.rerouted.from, metadata.rerouted.to)
        })
        .collect();
    let pools = |from: &str, to: &str| (from.to_owned(), to.to_owned());
    assert_eq!(moves, [pools("ops", "oncall"), pools("oncall", "leads")]);
    assert_eq!(decision.trail.len(), 3, "{:?}", decision.trail);
}
