//! Re-routing and expiry warnings over a real fleet: a human step's task nobody in `ops`
//! answers within `reroute_after` leaves `ops` and waits in `oncall`, where a person decides
//! it, and the runner's trail names both pools in order; a task nobody answers is warned
//! about (`task.expiring`, standard and Slack bodies, and a progress to its runner) before it
//! expires (`task.expired`).

use std::collections::HashSet;
use std::time::Duration;

use airlock_records::review::ReroutedMetadata;
use airlock_reviewer::Service;
use airlock_reviewer::client::ApiClient;
use airlock_reviewer::webhooks::{Endpoint, EventKind, Format, Pools, Webhooks};
use airlock_testkit::unique_prefix;
use airlock_tests::webhooks::{Attempt, receiver, serve};
use airlock_tests::{
    BOB_TOKEN, InProcessWorker, REVIEWER_TOKEN, approval, broker, decision_name, guarded, pending, people,
    reviewer_config, runner, trail,
};
use airlock_transport::{AmqpTransport, Topology, Transport};
use airlock_webhook::{RetryPolicy, WebhookSecret};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const INSTANCE: &str = "reviewer-reroute-test";

const POLICY: &str = r#"
approvers:
  - name: human
    tools: "bash"
    pool: ops
    timeout: 60
    reroute_after: 1
    to: oncall
  - name: human
    tools: "deploy"
    pool: ops
    timeout: 3
    warn_before: 2
    on_timeout: reject
"#;

fn fleet(prefix: &str) -> Topology {
    Topology::new(prefix)
        .with_human_pool("ops")
        .with_human_pool("oncall")
        .with_reply_queue("runner")
        .with_reply_queue(INSTANCE)
}

/// Waits for the next event a receiver saw that was not seen before.
async fn next_event(seen: &mut mpsc::UnboundedReceiver<Attempt>, ids: &mut HashSet<String>) -> Value {
    loop {
        let attempt = seen.recv().await.unwrap();
        if ids.insert(attempt.id.clone()) {
            return serde_json::from_slice(&attempt.body).unwrap();
        }
    }
}

/// Waits until `api` lists no pending task.
async fn drained(api: &ApiClient) {
    while !api.tasks().await.unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_task_nobody_answers_moves_to_the_next_pool_and_a_task_about_to_expire_is_warned_about() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), rerouted(transport, prefix)).await;
}

async fn rerouted(transport: AmqpTransport, prefix: String) {
    let (standard, mut standard_seen) = receiver("standard", 0);
    let (slack, mut slack_seen) = receiver("slack", 0);
    let base = format!("http://{}", serve(standard.merge(slack), ([127, 0, 0, 1], 0).into()).await);
    let endpoint = |path: &str, format: Format, events: &[EventKind]| Endpoint {
        url: format!("{base}/{path}").parse().unwrap(),
        pools: Pools::All,
        secret: WebhookSecret::generate(),
        format,
        events: events.to_vec(),
    };
    let every = [EventKind::Created, EventKind::Decided, EventKind::Expired, EventKind::Expiring, EventKind::Rerouted];

    transport.declare(&fleet(&prefix)).await.unwrap();
    let worker = InProcessWorker::start(transport.clone(), &prefix, "worker", 16);
    let client = runner(transport.clone(), &prefix, Duration::from_secs(100)).await;
    let (warned, mut warnings) = mpsc::unbounded_channel();
    client.on_progress(Box::new(move |correlation, progress| {
        if progress.expires_at_unix_ms > 0 {
            let _ = warned.send((correlation.to_owned(), progress.clone()));
        }
    }));
    let mut config = reviewer_config(&prefix, "sqlite::memory:", INSTANCE);
    config.pools = vec!["ops".into(), "oncall".into()];
    config.reviewers = people(&[("alice", REVIEWER_TOKEN, "ops"), ("bob", BOB_TOKEN, "oncall")]);
    config.webhooks = Webhooks {
        endpoints: vec![
            endpoint("standard", Format::Standard, &every),
            endpoint("slack", Format::Slack, &[EventKind::Expiring]),
        ],
        retry: RetryPolicy::default(),
        slack: None,
    };
    let service = Service::start(transport.clone(), config).await.unwrap();
    let base = format!("http://{}", service.local_addr());
    let (alice, bob) = (ApiClient::new(&base, REVIEWER_TOKEN), ApiClient::new(&base, BOB_TOKEN));
    let mut ids = HashSet::new();

    // Nobody in `ops` answers within a second: the task leaves `ops` and waits in `oncall`,
    // saying where it came from.
    let asking = client.clone();
    let bash = json!({"function": "bash", "arguments": {"cmd": "rm -r build"}});
    let asked = tokio::spawn(async move { asking.approve(approval("s1", "c1", bash, POLICY)).await });
    let moved = pending(&bob, 1).await.remove(0);
    assert_eq!((moved["pool"].as_str(), moved["rerouted_from"].as_str()), (Some("oncall"), Some("ops")));
    drained(&alice).await;
    let history = alice.get("/api/history").await.unwrap().json();
    let left = &history["tasks"][0];
    assert_eq!(
        (left["pool"].as_str(), left["decision"].as_str(), left["decided_by"].as_str()),
        (Some("ops"), Some("escalate"), Some("reroute")),
        "{history}"
    );

    // The pages tell the same story: waiting in ops, moved, waiting in oncall.
    let mut events = Vec::new();
    for _ in 0..3 {
        events.push(next_event(&mut standard_seen, &mut ids).await);
    }
    let told: Vec<(&str, &str)> =
        events.iter().map(|e| (e["type"].as_str().unwrap(), e["data"]["pool"].as_str().unwrap())).collect();
    assert_eq!(told, [("task.created", "ops"), ("task.rerouted", "ops"), ("task.created", "oncall")]);
    assert_eq!(events[1]["data"]["rerouted_to"], "oncall");
    assert_eq!(events[2]["data"]["rerouted_from"], "ops");

    // Decided in `oncall`; the runner's trail names each pool in order.
    bob.decide(moved["id"].as_str().unwrap(), "approve", Some("fine")).await.unwrap();
    let decision = asked.await.unwrap().unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("approve", "bob"));
    assert_eq!(trail(&decision), [("human".to_owned(), "escalate"), ("human".to_owned(), "approve")]);
    let ReroutedMetadata { rerouted } = serde_json::from_str(&decision.trail[0].metadata_json).unwrap();
    assert_eq!((rerouted.from.as_str(), rerouted.to.as_str()), ("ops", "oncall"));
    assert_eq!(next_event(&mut standard_seen, &mut ids).await["type"], "task.decided");

    // Nobody answers a deploy: warned about two seconds before its deadline, then expired.
    let deploy = json!({"function": "deploy", "arguments": {}});
    let decision = client.approve(approval("s2", "c1", deploy, POLICY)).await.unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("reject", "timeout"));
    let (mut kinds, mut deadline) = (Vec::new(), None);
    while kinds.last() != Some(&"task.expired".to_owned()) {
        let event = next_event(&mut standard_seen, &mut ids).await;
        kinds.push(event["type"].as_str().unwrap().to_owned());
        deadline = event["data"]["deadline_unix_ms"].as_i64();
    }
    assert_eq!(kinds, ["task.created", "task.expiring", "task.expired"]);
    let slack = next_event(&mut slack_seen, &mut ids).await;
    let text = slack["text"].as_str().unwrap();
    assert!(text.starts_with("A call in pool ops expires at ") && text.contains("deploy("), "{text}");
    assert!(slack_seen.try_recv().is_err(), "the warning goes out once");

    // The runner was warned too (Inspect's notification pages it): once, naming the task and
    // when it expires.
    let (correlation, warning) = warnings.recv().await.unwrap();
    assert_eq!((correlation.as_str(), warning.pool.as_str()), ("approval/run/s2/1/c1", "ops"));
    assert_eq!(Some(warning.expires_at_unix_ms), deadline);
    assert!(warnings.try_recv().is_err(), "one warning");

    service.stop().await;
    client.close().await;
    worker.stop().await;
}
