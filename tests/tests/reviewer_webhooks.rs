//! The reviewer service pages people: a real worker escalates calls to a real reviewer
//! service on PostgreSQL, whose webhooks reach a receiver in the test, signed, retried with
//! the same `webhook-id`, and only for the pools each endpoint hears of.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use airlock_client::{Client, ClientConfig, Repeats};
use airlock_reviewer::Service;
use airlock_reviewer::client::ApiClient;
use airlock_reviewer::webhooks::{Endpoint, EventKind, Format, Pools, Webhooks};
use airlock_telemetry::metrics::{Metrics, OutcomeLabels};
use airlock_testkit::database::with_pg;
use airlock_testkit::unique_prefix;
use airlock_tests::webhooks::{Attempt, quick_retries, receiver, serve, signed_by};
use airlock_tests::{
    InProcessWorker, REVIEWER_TOKEN, TestKeys, approval, broker, decision_name, guarded, pending, reviewer_config,
};
use airlock_transport::{AmqpTransport, Topology, Transport};
use airlock_webhook::WebhookSecret;
use serde_json::{Value, json};
use tokio::sync::mpsc;

const INSTANCE: &str = "reviewer-webhooks-test";

const POLICY: &str = r#"
approvers:
  - name: human
    tools: "bash"
    pool: ops
  - name: human
    tools: "deploy"
    pool: ops
    timeout: 1
    on_timeout: reject
"#;

/// The attempts a receiver saw and the events they carry, one per `webhook-id`.
#[derive(Default)]
struct Events {
    attempts: Vec<Attempt>,
    ids: HashSet<String>,
    events: Vec<Value>,
}

impl Events {
    /// Waits for the next event not seen before (retries of one already seen are kept).
    async fn next(&mut self, seen: &mut mpsc::UnboundedReceiver<Attempt>) -> Value {
        loop {
            let attempt = seen.recv().await.unwrap();
            self.attempts.push(attempt.clone());
            if self.ids.insert(attempt.id.clone()) {
                let event: Value = serde_json::from_slice(&attempt.body).unwrap();
                self.events.push(event.clone());
                return event;
            }
        }
    }
}

fn fleet(prefix: &str) -> Topology {
    Topology::new(prefix).with_human_pool("ops").with_reply_queue("runner").with_reply_queue(INSTANCE)
}

fn delivered(metrics: &Metrics, outcome: &str) -> u64 {
    metrics.webhook_deliveries.get_or_create(&OutcomeLabels { outcome: outcome.to_owned() }).get()
}

#[tokio::test]
async fn people_are_paged_when_a_task_is_created_decided_and_expired() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        with_pg("webhooks", move |store| paged(transport, prefix, store)).await;
    })
    .await;
}

async fn paged(transport: AmqpTransport, prefix: String, store: String) {
    // Two endpoints: one for `ops`, whose first attempt fails; one for another pool.
    let (ops, mut ops_seen) = receiver("ops", 1);
    let (security, mut security_seen) = receiver("security", 0);
    let base = format!("http://{}", serve(ops.merge(security), ([127, 0, 0, 1], 0).into()).await);
    let secret = WebhookSecret::generate();
    let endpoint = |path: &str, pool: &str| Endpoint {
        url: format!("{base}/{path}").parse().unwrap(),
        pools: Pools::Only(vec![pool.into()]),
        secret: secret.clone(),
        format: Format::Standard,
        events: vec![EventKind::Created, EventKind::Decided, EventKind::Expired],
    };
    let retry = quick_retries();

    transport.declare(&fleet(&prefix)).await.unwrap();
    let worker = InProcessWorker::start(transport.clone(), &prefix, "worker", 16);
    let client_config = ClientConfig {
        prefix: prefix.clone(),
        runner_id: "runner".into(),
        default_timeout: Duration::from_secs(100),
        replies: TestKeys::get().replies(),
        repeats: Repeats::default(),
    };
    let client = Client::connect(transport.clone(), client_config).await.unwrap();
    let metrics = Arc::new(Metrics::new());
    let mut config = reviewer_config(&prefix, &store, INSTANCE);
    let endpoints = vec![endpoint("ops", "ops"), endpoint("security", "security")];
    config.webhooks = Webhooks { endpoints, retry, slack: None };
    config.metrics = metrics.clone();
    let service = Service::start(transport.clone(), config).await.unwrap();
    let api = ApiClient::new(&format!("http://{}", service.local_addr()), REVIEWER_TOKEN);
    let mut ops_events = Events::default();

    // A call waits for a person: `task.created`, refused once, then delivered.
    let asking = client.clone();
    let bash = json!({"function": "bash", "arguments": {"cmd": "rm -r build"}});
    let asked = tokio::spawn(async move { asking.approve(approval("s1", "c1", bash, POLICY)).await });
    let task = pending(&api, 1).await.remove(0);
    let id = task["id"].as_str().unwrap().to_owned();
    let created = ops_events.next(&mut ops_seen).await;
    assert_eq!(created["type"], "task.created");
    assert_eq!((created["data"]["task_id"].as_str(), created["data"]["pool"].as_str()), (Some(&*id), Some("ops")));
    assert_eq!(created["data"]["correlation"], "approval/run/s1/1/c1");
    assert!(created["data"]["call"].as_str().unwrap().starts_with("bash("), "{created}");

    // Answered through the API: `task.decided`, naming the reviewer.
    api.decide(&id, "approve", Some("a build dir")).await.unwrap();
    let decided = ops_events.next(&mut ops_seen).await;
    assert_eq!(decided["type"], "task.decided");
    assert_eq!(decided["data"]["task_id"], id.as_str());
    assert_eq!(
        (decided["data"]["decided_by"].as_str(), decided["data"]["decision"].as_str()),
        (Some("alice"), Some("approve"))
    );
    assert_eq!(decision_name(&asked.await.unwrap().unwrap()), "approve");

    // Nobody answers in time: `task.created`, then `task.expired`.
    let deploy = json!({"function": "deploy", "arguments": {}});
    let decision = client.approve(approval("s2", "c1", deploy, POLICY)).await.unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("reject", "timeout"));
    let created = ops_events.next(&mut ops_seen).await;
    assert_eq!(created["type"], "task.created");
    let expired = ops_events.next(&mut ops_seen).await;
    assert_eq!(expired["type"], "task.expired");
    assert_eq!(expired["data"]["task_id"], created["data"]["task_id"]);
    assert_eq!(
        (expired["data"]["decided_by"].as_str(), expired["data"]["decision"].as_str()),
        (Some("timeout"), Some("reject"))
    );

    // Stopping waits for attempts under way; none comes after.
    service.stop().await;
    while let Ok(attempt) = ops_seen.try_recv() {
        ops_events.attempts.push(attempt);
    }
    assert!(security_seen.try_recv().is_err(), "another pool's endpoint gets nothing");

    // The first event was refused once and sent again with the same id and body (maybe after
    // the next event: deliveries keep no order); every attempt is signed; deduplicated by
    // webhook-id, each event is handled once.
    let attempts = &ops_events.attempts;
    assert_eq!(attempts.len(), 5, "{attempts:?}");
    let first = &attempts[0];
    let again: Vec<&Attempt> = attempts[1..].iter().filter(|a| a.id == first.id).collect();
    assert_eq!(again.len(), 1, "{attempts:?}");
    assert_eq!(again[0].body, first.body);
    assert!(attempts.iter().all(|a| signed_by(&secret, a)));
    assert!(!attempts.iter().any(|a| signed_by(&WebhookSecret::generate(), a)));
    assert_eq!(ops_events.ids.len(), 4);
    let kinds: Vec<&str> = ops_events.events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["task.created", "task.decided", "task.created", "task.expired"]);
    assert_eq!((delivered(&metrics, "delivered"), delivered(&metrics, "retried")), (4, 1));
    assert_eq!(metrics.webhook_backlog.get(), 0);

    client.close().await;
    worker.stop().await;
}
