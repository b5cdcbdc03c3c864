//! RabbitMQ and a signed worker process: what a process with broker credentials can send is
//! not believed. A forged decision is not taken (the runner fails closed at its deadline),
//! chain state a runner sends is dead-lettered, a tampered or misdirected step answer is
//! refused, and a human answer needs a reviewer service's signature.

use std::time::Duration;

use airlock_client::{Client, ClientConfig, ClientError, Repeats};
use airlock_contract::v1;
use airlock_integrity::{FleetKey, KeyFile as _, SigningKey};
use airlock_records::signed::{open_reply, sign_human_answer};
use airlock_testkit::unique_prefix;
use airlock_tests::{
    HANG_GUARD, TestKeys, WorkerProcess, approval, broker, decision_name, guarded, wait_for_consumers,
};
use airlock_transport::message::HEADER_REASON;
use airlock_transport::{AmqpTransport, Consumer, Destination, Message, Topology, Transport};
use prost::Message as _;
use serde_json::json;
use tokio::task::JoinHandle;

/// `rm` goes to the plugin step `scan`, then to a person in `ops`; the rest is approved.
const POLICY: &str = "approvers:\n  - name: scan\n    tools: \"rm\"\n  - name: human\n    tools: \"rm\"\n    pool: ops\n  - name: auto\n    tools: \"*\"\n";

fn fleet(prefix: &str) -> Topology {
    Topology::new(prefix)
        .with_step("scan")
        .with_human_pool("ops")
        .with_reply_queue("runner")
        .with_reply_queue("observer")
}

async fn client(transport: &AmqpTransport, prefix: &str, timeout: Duration) -> Client<AmqpTransport> {
    let config = ClientConfig {
        prefix: prefix.into(),
        runner_id: "runner".into(),
        default_timeout: timeout,
        replies: TestKeys::get().replies(),
        repeats: Repeats::default(),
    };
    Client::connect(transport.clone(), config).await.unwrap()
}

async fn next(consumer: &mut Consumer) -> airlock_transport::Delivery {
    tokio::time::timeout(HANG_GUARD, consumer.next()).await.expect("a delivery in time").expect("a delivery")
}

/// Asks for an `rm` call in the background, and takes the task `scan` gets for it.
async fn ask_rm(
    client: &Client<AmqpTransport>,
    scan: &mut Consumer,
    call_id: &str,
) -> (JoinHandle<Result<v1::Decision, ClientError>>, v1::StepTask) {
    let asking = tokio::spawn({
        let (client, request) =
            (client.clone(), approval("s", call_id, json!({"function": "rm", "arguments": {}}), POLICY));
        async move { client.approve(request).await }
    });
    let delivered = next(scan).await;
    let task = v1::StepTask::decode(delivered.message.body.as_ref()).unwrap();
    delivered.ack().await.unwrap();
    (asking, task)
}

/// Publishes `result` as a step would, and checks that the worker dead-letters it as refused,
/// saying `why`.
async fn assert_refused(
    transport: &AmqpTransport,
    dead: &mut Consumer,
    route: &Destination,
    result: v1::StepResult,
    why: &str,
) {
    transport.publish(route, Message::new(result.encode_to_vec())).await.unwrap();
    let corpse = next(dead).await;
    let reason = &corpse.message.headers[HEADER_REASON];
    assert!(reason.starts_with("refused") && reason.contains(why), "{reason}");
    corpse.ack().await.unwrap();
}

/// A reply whose proof is made with `key` for the request whose digest is `digest`.
fn proved_reply(key: &FleetKey, runner_key: &[u8], digest: &[u8; 32], decision: v1::Decision) -> Vec<u8> {
    let body = v1::ReplyBody { body: Some(v1::reply_body::Body::Decision(decision)) }.encode_to_vec();
    let proof = key.reply_key(runner_key.try_into().unwrap()).unwrap().prove(digest, &body);
    v1::Reply { body, key_id: proof.key_id.as_str().into(), proof: proof.tag.to_vec() }.encode_to_vec()
}

#[tokio::test]
async fn a_forged_decision_is_not_taken_and_the_runner_fails_closed() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        // No worker: the attacker reads the request off the queue and answers it itself.
        let topology = fleet(&prefix);
        transport.declare(&topology).await.unwrap();
        let mut requests = transport.consume(&topology.requests_queue(), 0).await.unwrap();
        let client = client(&transport, &prefix, Duration::from_secs(3)).await;
        let asking = tokio::spawn({
            let client = client.clone();
            async move { client.approve(approval("s", "c1", json!({"function": "rm", "arguments": {}}), POLICY)).await }
        });
        let asked = next(&mut requests).await;
        let request = v1::Request::decode(asked.message.body.as_ref()).unwrap();
        let digest = airlock_integrity::digest(&asked.message.body);
        let approve = v1::Decision {
            key: request.key.clone(),
            decision: v1::DecisionKind::Approve.into(),
            decided_by: "alice".into(),
            explanation: Some("forged".into()),
            ..Default::default()
        };
        let unsigned = v1::Reply {
            body: v1::ReplyBody { body: Some(v1::reply_body::Body::Decision(approve.clone())) }.encode_to_vec(),
            ..Default::default()
        };
        let other_fleet = FleetKey::from_seed([3; 32]);
        // A genuine fleet proof, but made for another call's request.
        let replayed_digest = airlock_integrity::digest(b"another call's request");
        let forgeries = [
            unsigned.encode_to_vec(),
            proved_reply(&other_fleet, &request.runner_key, &digest, approve.clone()),
            proved_reply(&TestKeys::get().fleet_key(), &request.runner_key, &replayed_digest, approve.clone()),
        ];
        let route = topology.reply_route(&request.reply_to).expect("the runner's reply route");
        let correlation = asked.message.correlation_id.clone().unwrap();
        for forged in forgeries {
            transport.publish(&route, Message::new(forged).with_correlation_id(correlation.clone())).await.unwrap();
        }
        asked.ack().await.unwrap();
        let decision = asking.await.unwrap().unwrap();
        assert_eq!((decision_name(&decision), decision.approver.as_str()), ("reject", "timeout"));
        assert_eq!(client.stats().rejected_replies, 3);
    })
    .await;
}

#[tokio::test]
async fn chain_state_from_a_runner_and_tampered_or_unsigned_answers_are_refused() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        let _worker = WorkerProcess::start(&prefix, "w");
        let topology = fleet(&prefix);
        transport.declare(&topology).await.unwrap();
        wait_for_consumers(&topology.requests_queue(), 1).await;
        let mut dead = transport.consume(&topology.dead_queue(), 0).await.unwrap();
        let mut observed = transport.consume(&topology.reply_queue("observer"), 0).await.unwrap();

        // A request that brings its own chain state, to skip `scan` and `human`.
        let mut skipping = approval("s", "skip", json!({"function": "rm", "arguments": {}}), POLICY);
        skipping.chain = Some(v1::ChainState { next_step: 2, ..Default::default() });
        skipping.reply_to = topology.reply_queue("observer");
        let encoded = skipping.encode_to_vec();
        let message = Message::new(encoded.clone()).with_correlation_id("approval/run/s/1/skip");
        transport.publish(&topology.requests_route(), message).await.unwrap();
        let corpse = next(&mut dead).await;
        assert!(corpse.message.headers[HEADER_REASON].starts_with("refused"), "{:?}", corpse.message.headers);
        corpse.ack().await.unwrap();
        let reply = next(&mut observed).await;
        let Ok(v1::reply_body::Body::Error(error)) = open_reply(&reply.message.body, None, &[0; 32]) else {
            panic!("an Error reply")
        };
        assert_eq!(error.code, "refused");
        reply.ack().await.unwrap();

        // A real request reaches `scan`; the attacker, reading the step's queue, tampers.
        let mut scan = transport.consume(&topology.step_queue("scan"), 0).await.unwrap();
        let mut ops = transport.consume(&topology.human_queue("ops"), 0).await.unwrap();
        let client = client(&transport, &prefix, Duration::from_secs(60)).await;
        let (asking, task) = ask_rm(&client, &mut scan, "c2").await;
        let approve = v1::StepAnswer {
            decision: v1::DecisionKind::Approve.into(),
            decided_by: "scanner".into(),
            ..Default::default()
        };
        let mut skipped = task.clone();
        skipped.request.as_mut().unwrap().chain.as_mut().unwrap().next_step = 3;
        // `scan` is step 0; the answer claims the human step's place.
        let mut for_step_one = approve.clone();
        for_step_one.step = Some(1);
        let refusals = [
            (v1::StepResult { task: Some(skipped), answer: Some(approve.clone()), ..Default::default() }, "not sealed"),
            (
                v1::StepResult { task: Some(task.clone()), answer: Some(for_step_one), ..Default::default() },
                "for step 1",
            ),
        ];
        for (result, why) in refusals {
            assert_refused(&transport, &mut dead, &topology.results_route(), result, why).await;
        }

        // The genuine step escalates; the person's answer needs the reviewer service's key.
        let escalate = v1::StepAnswer { decision: v1::DecisionKind::Escalate.into(), ..approve.clone() };
        let result = v1::StepResult { task: Some(task), answer: Some(escalate), ..Default::default() };
        transport.publish(&topology.results_route(), Message::new(result.encode_to_vec())).await.unwrap();
        let delivered = next(&mut ops).await;
        let human = v1::HumanTask::decode(delivered.message.body.as_ref()).unwrap().task.unwrap();
        delivered.ack().await.unwrap();
        let alice = v1::StepAnswer {
            decision: v1::DecisionKind::Approve.into(),
            decided_by: "alice".into(),
            ..Default::default()
        };
        let mut unsigned =
            v1::StepResult { task: Some(human.clone()), answer: Some(alice.clone()), ..Default::default() };
        let mut by_stranger = unsigned.clone();
        sign_human_answer(&SigningKey::from_seed([5; 32]), &mut by_stranger);
        for (result, why) in [(unsigned.clone(), "not signed"), (by_stranger, "unknown key")] {
            assert_refused(&transport, &mut dead, &topology.results_route(), result, why).await;
        }
        sign_human_answer(&TestKeys::get().reviewer_key(), &mut unsigned);
        transport.publish(&topology.results_route(), Message::new(unsigned.encode_to_vec())).await.unwrap();
        let decision = asking.await.unwrap().unwrap();
        assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("approve", "alice"));
        let scan_entry = &decision.trail[0];
        assert_eq!(scan_entry.published_by, "guest", "the trail records who published the step's answer");
    })
    .await;
}

#[tokio::test]
async fn a_step_answers_only_as_its_listed_broker_user_and_built_in_steps_take_no_answer() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        // This worker takes `scan`'s answers only from the broker user `scanner`.
        let _worker = tokio::process::Command::new(airlock_tests::airlock_bin())
            .args(["worker", "--amqp", &airlock_testkit::amqp_url(), "--prefix", &prefix, "--id", "listed"])
            .args(["--step-user", "scan=scanner"])
            .args(TestKeys::get().worker_args())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("airlock worker starts");
        let topology = fleet(&prefix);
        transport.declare(&topology).await.unwrap();
        wait_for_consumers(&topology.requests_queue(), 1).await;
        let mut dead = transport.consume(&topology.dead_queue(), 0).await.unwrap();
        let mut scan = transport.consume(&topology.step_queue("scan"), 0).await.unwrap();
        let client = client(&transport, &prefix, Duration::from_secs(60)).await;
        let (_asking, task) = ask_rm(&client, &mut scan, "c3").await;
        let approve = v1::StepAnswer { decision: v1::DecisionKind::Approve.into(), ..Default::default() };

        // Published as `guest`, which the broker stamps on the message: not `scan`'s user.
        let result = v1::StepResult { task: Some(task.clone()), answer: Some(approve.clone()), ..Default::default() };
        assert_refused(&transport, &mut dead, &topology.results_route(), result, "not from 'guest'").await;

        // A task for the built-in `auto` step, even sealed with the fleet's own key.
        let mut built_in = task;
        built_in.step = 2;
        built_in.name = "auto".into();
        built_in.seal.clear();
        let seal = TestKeys::get().fleet_key().seal_key().seal(&[&built_in.encode_to_vec()]);
        built_in.seal = seal.0.to_vec();
        let result = v1::StepResult { task: Some(built_in), answer: Some(approve), ..Default::default() };
        assert_refused(&transport, &mut dead, &topology.results_route(), result, "no answers from outside").await;
        client.close().await;
    })
    .await;
}
