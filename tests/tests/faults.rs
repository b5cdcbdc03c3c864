//! RabbitMQ only: the fleet under faults. Competing worker processes, a worker killed with
//! SIGKILL under load, connections cut under load, a poison message, a deadline that passes.
//! Every request must get exactly one answer at the client, and none may be lost.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use airlock_client::{Client, ClientConfig, ClientError, Repeats};
use airlock_contract::v1;
use airlock_testkit::{kill_connections, queue_figure, rabbitmqctl, unique_prefix};
use airlock_tests::{
    HANG_GUARD, TestKeys, WorkerProcess, approval, broker, decision_name, guarded, wait_for_consumers,
};
use airlock_transport::{AmqpTransport, Destination, Message, Topology, Transport, message::HEADER_REASON};
use prost::Message as _;
use serde_json::json;
use tokio::task::JoinSet;

const POLICY: &str =
    "approvers:\n  - name: auto\n    tools: \"rm\"\n    decision: escalate\n  - name: auto\n    tools: \"*\"\n";

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

fn fleet(prefix: &str) -> Topology {
    Topology::new(prefix).with_reply_queue("runner").with_reply_queue("observer")
}

/// Sends `count` approvals at once; returns who decided each, after checking every one was
/// approved by a worker (none failed closed).
async fn load(client: &Client<AmqpTransport>, count: usize, answered: Arc<AtomicUsize>) -> Vec<String> {
    let mut calls = JoinSet::new();
    for i in 0..count {
        let (client, answered) = (client.clone(), answered.clone());
        calls.spawn(async move {
            let request =
                approval("load", &format!("call-{i}"), json!({"function": "ls", "arguments": {"i": i}}), POLICY);
            let decision = client.approve(request).await.unwrap();
            answered.fetch_add(1, Ordering::Relaxed);
            assert_eq!(decision_name(&decision), "approve", "{decision:?}");
            (decision.key.unwrap().tool_call_id, decision.decided_by)
        });
    }
    let mut keys = HashSet::new();
    let mut deciders = Vec::new();
    while let Some(result) = calls.join_next().await {
        let (key, decided_by) = result.unwrap();
        assert!(keys.insert(key), "one decision per call");
        deciders.push(decided_by);
    }
    assert_eq!(keys.len(), count);
    assert_eq!(client.stats().timed_out, 0, "nothing may fail closed");
    deciders
}

/// [`load`] in the background; the counter tells how far it got.
fn spawn_load(
    client: &Client<AmqpTransport>,
    count: usize,
) -> (tokio::task::JoinHandle<Vec<String>>, Arc<AtomicUsize>) {
    let answered = Arc::new(AtomicUsize::new(0));
    let (client, counter) = (client.clone(), answered.clone());
    (tokio::spawn(async move { load(&client, count, counter).await }), answered)
}

async fn until(answered: &AtomicUsize, at_least: usize) {
    tokio::time::timeout(HANG_GUARD, async {
        while answered.load(Ordering::Relaxed) < at_least {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the load makes progress");
}

#[tokio::test]
async fn workers_compete_for_requests() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        let workers: Vec<WorkerProcess> = (0..3).map(|i| WorkerProcess::start(&prefix, &format!("w{i}"))).collect();
        wait_for_consumers(&format!("{prefix}.requests"), 3).await;
        let client = client(&transport, &prefix, HANG_GUARD).await;
        let deciders = load(&client, 600, Arc::default()).await;
        let distinct: HashSet<&String> = deciders.iter().collect();
        assert!(distinct.len() >= 2, "several workers took part: {distinct:?}");
        for worker in workers {
            assert!(worker.stop().await.success(), "SIGTERM stops a worker cleanly");
        }
    })
    .await;
}

#[tokio::test]
async fn replies_are_acknowledged_while_the_client_stays_open() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        let worker = WorkerProcess::start(&prefix, "w0");
        wait_for_consumers(&format!("{prefix}.requests"), 1).await;
        let client = client(&transport, &prefix, HANG_GUARD).await;
        // More replies than one acknowledgement covers, and then no more traffic: the last
        // ones must be settled without a later reply to carry their acknowledgement.
        load(&client, 150, Arc::default()).await;
        let queue = Topology::new(&prefix).reply_queue("runner");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let listing =
                rabbitmqctl(&["list_queues", "-q", "--no-table-headers", "name", "messages_unacknowledged"]).await;
            match queue_figure(&listing, &queue) {
                Some(0) => break,
                figure => assert!(tokio::time::Instant::now() < deadline, "{queue} keeps {figure:?} replies unacked"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(client.stats().timed_out, 0);
        assert!(worker.stop().await.success());
    })
    .await;
}

#[tokio::test]
async fn a_worker_killed_under_load_loses_nothing() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        let mut doomed = WorkerProcess::start(&prefix, "doomed");
        let survivor = WorkerProcess::start(&prefix, "survivor");
        wait_for_consumers(&format!("{prefix}.requests"), 2).await;
        let client = client(&transport, &prefix, HANG_GUARD).await;
        let (running, answered) = spawn_load(&client, 3000);
        until(&answered, 300).await;
        doomed.kill().await;
        let deciders = running.await.unwrap();
        assert!(deciders.iter().any(|d| d == "survivor"));
        drop(survivor);
    })
    .await;
}

#[tokio::test]
async fn connections_cut_under_load_lose_nothing() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        let workers: Vec<WorkerProcess> = (0..2).map(|i| WorkerProcess::start(&prefix, &format!("w{i}"))).collect();
        wait_for_consumers(&format!("{prefix}.requests"), 2).await;
        let client = client(&transport, &prefix, HANG_GUARD).await;
        let (running, answered) = spawn_load(&client, 3000);
        for round in 1..=3 {
            until(&answered, 500 * round).await;
            let workers_cut = kill_connections(&format!("{prefix} worker")).await;
            let runner_cut = kill_connections(&prefix).await;
            assert!(
                workers_cut >= 1 && runner_cut >= 1,
                "cut {workers_cut} worker and {runner_cut} runner connections"
            );
        }
        running.await.unwrap();
        let reconnects = *transport.reconnects().borrow();
        assert!(reconnects >= 1, "the runner noticed it reconnected: {reconnects}");
        drop(workers);
    })
    .await;
}

#[tokio::test]
async fn a_poison_message_is_dead_lettered_and_its_sender_told() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        let _worker = WorkerProcess::start(&prefix, "w");
        let topology = fleet(&prefix);
        transport.declare(&topology).await.unwrap();
        let observer = topology.reply_queue("observer");
        let mut replies = transport.consume(&observer, 0).await.unwrap();
        let mut dead = transport.consume(&topology.dead_queue(), 0).await.unwrap();
        let poison = Message::new(&b"\x0a\xff\xff garbage"[..])
            .with_reply_to(observer.clone())
            .with_correlation_id("approval/run/s/1/poison");
        transport.publish(&Destination::queue(topology.requests_queue()), poison).await.unwrap();

        let reply = tokio::time::timeout(HANG_GUARD, replies.next()).await.unwrap().unwrap();
        assert_eq!(reply.message.correlation_id.as_deref(), Some("approval/run/s/1/poison"));
        // Nothing in garbage says whose request it was: the error goes out unproved.
        let opened = airlock_records::signed::open_reply(&reply.message.body, None, &[0; 32]);
        let Ok(v1::reply_body::Body::Error(error)) = opened else { panic!("an Error reply") };
        assert_eq!(error.code, "bad_message");
        let corpse = tokio::time::timeout(HANG_GUARD, dead.next()).await.unwrap().unwrap();
        assert!(corpse.message.headers[HEADER_REASON].starts_with("bad_message"), "{:?}", corpse.message.headers);
        assert_eq!(corpse.message.body.as_ref(), b"\x0a\xff\xff garbage", "the message is kept as it came");
        corpse.ack().await.unwrap();
        reply.ack().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn a_passed_deadline_fails_closed_and_withdraws_the_request() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        // No worker runs: nobody answers.
        let topology = fleet(&prefix).with_binding(
            Topology::new(&prefix).cancels_exchange(),
            Topology::new(&prefix).reply_queue("observer"),
            "",
        );
        transport.declare(&topology).await.unwrap();
        let mut cancels = transport.consume(&topology.reply_queue("observer"), 0).await.unwrap();
        let client = client(&transport, &prefix, Duration::from_millis(300)).await;

        let decision =
            client.approve(approval("s", "late", json!({"function": "ls", "arguments": {}}), POLICY)).await.unwrap();
        assert_eq!((decision_name(&decision), decision.approver.as_str()), ("reject", "timeout"));
        assert!(decision.explanation.unwrap().contains("failed closed"));
        let request = airlock_tests::review("s", "late", json!({"function": "ls", "arguments": {}}), "out", POLICY);
        let decision = client.review(request).await.unwrap();
        assert_eq!(decision_name(&decision), "terminate");
        assert_eq!(client.stats().timed_out, 2);

        let cancel = tokio::time::timeout(HANG_GUARD, cancels.next()).await.unwrap().unwrap();
        let cancel = v1::Cancel::decode(cancel.message.body.as_ref()).unwrap();
        assert_eq!((cancel.kind(), cancel.key.unwrap().tool_call_id.as_str()), (v1::Kind::Approval, "late"));

        // A worker that starts later drops the stale requests instead of deciding them.
        let _worker = WorkerProcess::start(&prefix, "late-worker");
        wait_for_consumers(&topology.requests_queue(), 1).await;
        let fresh =
            client.decide(approval("s", "fresh", json!({"function": "ls", "arguments": {}}), POLICY), Some(HANG_GUARD));
        assert_eq!(decision_name(&fresh.await.unwrap()), "approve");
        assert_eq!(client.stats().ignored_replies, 0, "the stale requests got no decision");
        assert!(matches!(
            client
                .approve(airlock_tests::review("s", "x", json!({"function": "ls", "arguments": {}}), "", POLICY))
                .await,
            Err(ClientError::Invalid(_))
        ));
    })
    .await;
}
