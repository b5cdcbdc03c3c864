//! RabbitMQ only: one caller's inline policies against a worker other callers share. Values
//! past the policy limits are refused to that caller alone, names a caller makes up never
//! become queues or bindings, and errors never show where the worker keeps its policies.

use std::time::Duration;

use airlock_client::{Client, ClientConfig, ClientError, Repeats};
use airlock_contract::v1;
use airlock_testkit::{queue_figure, rabbitmqctl, unique_prefix};
use airlock_tests::{
    HANG_GUARD, TestKeys, WorkerProcess, approval, broker, decision_name, guarded, wait_for_consumers,
};
use airlock_transport::{AmqpTransport, Topology, Transport, message::HEADER_REASON};
use serde_json::json;
use tokio::task::JoinSet;

/// The policy the worker holds, by name: every call approved.
const OPEN: &str = "approvers:\n  - name: auto\n    tools: \"*\"\n    decision: approve\n";

fn fleet(prefix: &str) -> Topology {
    Topology::new(prefix).with_reply_queue("hostile").with_reply_queue("tenant").with_human_pool("ops")
}

/// A worker with `args` on the fleet of `prefix`, its topology declared, once it consumes.
async fn worker(transport: &AmqpTransport, prefix: &str, args: &[&str]) -> WorkerProcess {
    let worker = WorkerProcess::start_with(prefix, "w", args);
    transport.declare(&fleet(prefix)).await.unwrap();
    wait_for_consumers(&fleet(prefix).requests_queue(), 1).await;
    worker
}

async fn client(transport: &AmqpTransport, prefix: &str, runner: &str) -> Client<AmqpTransport> {
    let config = ClientConfig {
        prefix: prefix.into(),
        runner_id: runner.into(),
        default_timeout: HANG_GUARD,
        replies: TestKeys::get().replies(),
        repeats: Repeats::default(),
    };
    Client::connect(transport.clone(), config).await.unwrap()
}

/// The call `ls(i=…)` under `policy`, inline.
fn inline(call_id: &str, policy: &str) -> v1::Request {
    approval("hostile", call_id, json!({"function": "ls", "arguments": {"i": call_id}}), policy)
}

/// The call `ls()` under the policy the worker holds as `name`.
fn named(call_id: &str, name: &str) -> v1::Request {
    let mut request = approval("tenant", call_id, json!({"function": "ls", "arguments": {}}), "");
    request.policy = Some(v1::Policy { source: Some(v1::policy::Source::Name(name.into())), digest: String::new() });
    request
}

/// The refusal's code and message, or a panic naming what came instead.
fn refused(answer: Result<v1::Decision, ClientError>) -> (String, String) {
    match answer {
        Err(ClientError::Refused { code, message }) => (code, message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Every queue of the broker's default vhost whose name starts with `prefix`, and a figure.
async fn queues(prefix: &str, figure: &str) -> String {
    let listing = rabbitmqctl(&["list_queues", "-q", "--no-table-headers", "name", figure]).await;
    listing.lines().filter(|line| line.starts_with(&format!("{prefix}."))).collect::<Vec<_>>().join("\n")
}

/// Waits until `queue`'s `figure` is `expected`.
async fn until_figure(prefix: &str, queue: &str, figure: &str, expected: u64) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let listing = queues(prefix, figure).await;
        if queue_figure(&listing, queue) == Some(expected) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{queue}: {figure} stays at {listing}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_hundred_overflowing_timeouts_are_refused_and_another_tenant_is_still_answered() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    let policy_dir = std::env::temp_dir().join(format!("{prefix}-policies"));
    std::fs::create_dir_all(&policy_dir).unwrap();
    std::fs::write(policy_dir.join("open.yaml"), OPEN).unwrap();
    let dir = policy_dir.to_str().unwrap().to_owned();
    guarded(fleet(&prefix), async move {
        // Few slots: each delivery that held one forever would soon leave none.
        let _worker = worker(&transport, &prefix, &["--concurrency", "8", "--policy-dir", &dir]).await;
        let topology = fleet(&prefix);
        let (hostile, tenant) =
            (client(&transport, &prefix, "hostile").await, client(&transport, &prefix, "tenant").await);

        let overflowing = "approvers:\n  - name: human\n    tools: \"*\"\n    timeout: 1e20\n";
        let mut calls = JoinSet::new();
        for i in 0..100 {
            let hostile = hostile.clone();
            calls.spawn(async move { hostile.approve(inline(&format!("call-{i}"), overflowing)).await });
        }
        let decision = tenant.approve(named("mine", "open")).await.unwrap();
        assert_eq!(decision_name(&decision), "approve", "{decision:?}");
        while let Some(answer) = calls.join_next().await {
            let (code, message) = refused(answer.unwrap());
            assert_eq!(code, "invalid_policy");
            assert!(message.contains("<inline>:4:14: step 'human': 'timeout' must be"), "{message}");
        }
        let decision = tenant.approve(named("after", "open")).await.unwrap();
        assert_eq!(decision_name(&decision), "approve", "still answering after all of them");

        // Each refused request is dead-lettered with its reason; none stays unacknowledged.
        until_figure(&prefix, &topology.dead_queue(), "messages", 100).await;
        until_figure(&prefix, &topology.requests_queue(), "messages_unacknowledged", 0).await;
        until_figure(&prefix, &topology.requests_queue(), "messages", 0).await;
        let mut dead = transport.consume(&topology.dead_queue(), 1).await.unwrap();
        let corpse = tokio::time::timeout(HANG_GUARD, dead.next()).await.unwrap().unwrap();
        let reason = &corpse.message.headers[HEADER_REASON];
        assert!(reason.starts_with("invalid_policy") && reason.contains("'timeout' must be"), "{reason}");
        corpse.ack().await.unwrap();

        // A named policy's errors name it, never the worker's --policy-dir.
        std::fs::write(std::path::Path::new(&dir).join("broken.yaml"), "approvers:\n  - name: auto\n    tools: 3\n")
            .unwrap();
        for name in ["missing", "broken"] {
            let (code, message) = refused(tenant.approve(named(name, name)).await);
            assert!(code == "unknown_policy" || code == "invalid_policy", "{code}");
            assert!(message.contains(name) && !message.contains(&dir) && !message.contains("policies"), "{message}");
        }
    })
    .await;
    std::fs::remove_dir_all(policy_dir).unwrap();
}

#[tokio::test]
async fn names_a_caller_makes_up_never_become_queues_or_bindings() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        let _worker = worker(&transport, &prefix, &[]).await;
        let topology = fleet(&prefix);
        let hostile = client(&transport, &prefix, "hostile").await;
        let before = queues(&prefix, "messages").await;

        // Wildcards and routing words are refused where the policy is read.
        let wild = [
            ("name: \"#\"", "step name '#'"),
            ("name: \"*\"", "step name '*'"),
            ("name: step.#", "step name 'step.#'"),
            ("name: human\n    pool: \"#\"", "pool '#'"),
            ("name: human\n    pool: ops.*", "pool 'ops.*'"),
        ];
        for (i, (step, expected)) in wild.iter().enumerate() {
            let policy = format!("approvers:\n  - {step}\n    tools: \"*\"\n");
            let (code, message) = refused(hostile.approve(inline(&format!("wild-{i}"), &policy)).await);
            assert_eq!(code, "invalid_policy");
            assert!(message.contains(expected), "{message}");
        }
        // Well-formed names nothing serves are refused too, when their task finds no queue.
        for i in 0..30 {
            let (step, expected) = match i % 2 {
                0 => (format!("name: human\n    pool: pool-{i}"), format!("'human.pool-{i}'")),
                _ => (format!("name: step-{i}"), format!("'step.step-{i}'")),
            };
            let policy = format!("approvers:\n  - {step}\n    tools: \"*\"\n");
            let (code, message) = refused(hostile.approve(inline(&format!("made-up-{i}"), &policy)).await);
            assert_eq!(code, "invalid_policy");
            assert!(message.contains(&format!("{expected}, which nothing of this fleet serves")), "{message}");
        }
        let after = queues(&prefix, "messages").await;
        let names =
            |listing: &str| listing.lines().map(|l| l.split('\t').next().unwrap().to_owned()).collect::<Vec<_>>();
        assert_eq!(names(&after), names(&before), "no queue was declared");
        let bindings = rabbitmqctl(&["list_bindings", "-q", "--no-table-headers", "source_name", "routing_key"]).await;
        let route = topology.route_exchange();
        let keys: Vec<&str> = bindings.lines().filter(|l| l.starts_with(&format!("{route}\t"))).collect();
        assert!(!keys.is_empty() && keys.iter().all(|l| !l.contains(['#', '*'])), "no wildcard is bound: {keys:?}");

        // A pool the fleet serves (its queue stands) takes the inline policy's task.
        let mut ops = transport.consume(&topology.human_queue("ops"), 1).await.unwrap();
        let served = "approvers:\n  - name: human\n    tools: \"*\"\n    pool: ops\n";
        let pending = tokio::spawn({
            let hostile = hostile.clone();
            async move { hostile.approve(inline("served", served)).await }
        });
        let task = tokio::time::timeout(HANG_GUARD, ops.next()).await.unwrap().unwrap();
        task.ack().await.unwrap();
        pending.abort();
    })
    .await;
}
