//! Poison at the reviewer service, over RabbitMQ, on a SQLite and on a PostgreSQL store: human
//! tasks whose call key or function holds a NUL character (which PostgreSQL's text cannot
//! keep), more of them than the intake's prefetch, go to the dead-letter queue with their
//! reason and leave the pool taking new tasks; tasks whose arguments hold one are stored as
//! they came. A cancel whose call key holds one is dead-lettered too, and the runner's cancel
//! behind it still withdraws its call.

use std::collections::BTreeMap;
use std::time::Duration;

use airlock_client::{Client, ClientConfig, Repeats};
use airlock_contract::v1;
use airlock_reviewer::client::ApiClient;
use airlock_reviewer::{PREFETCH, Service};
use airlock_testkit::database::{with_pg, with_sqlite};
use airlock_testkit::unique_prefix;
use airlock_tests::{InProcessWorker, REVIEWER_TOKEN, TestKeys, approval, broker, guarded, pending, reviewer_config};
use airlock_transport::message::HEADER_REASON;
use airlock_transport::{AmqpTransport, Destination, Message, Topology, Transport};
use prost::Message as _;
use serde_json::{Value, json};

const INSTANCE: &str = "reviewer-poison";
const POLICY: &str = "approvers:\n  - name: human\n    tools: \"bash\"\n    pool: ops\n";
/// Human tasks carrying a NUL character, more than the intake takes at once.
const POISONED: usize = 100;

fn fleet(prefix: &str) -> Topology {
    Topology::new(prefix).with_human_pool("ops").with_reply_queue("runner").with_reply_queue(INSTANCE)
}

/// A human task for the call `call_id` of sample `sample`, of `function` with `arguments`,
/// as a worker forwards it.
fn human_task(sample: &str, call_id: &str, function: &str, arguments: Value) -> Message {
    let request = approval(sample, call_id, json!({"function": function, "arguments": arguments}), POLICY);
    let step = v1::StepTask { request: Some(request), step: 0, name: "human".into(), ..Default::default() };
    let human = v1::HumanTask { task: Some(step), choices: Vec::new(), pool: "ops".into(), ..Default::default() };
    Message::new(human.encode_to_vec())
}

/// The reasons of the `n` messages the dead-letter queue holds, counted by reason.
async fn dead_reasons(transport: &AmqpTransport, topology: &Topology, n: usize) -> BTreeMap<String, usize> {
    let mut dead = transport.consume(&topology.dead_queue(), 0).await.unwrap();
    let mut reasons = BTreeMap::new();
    for _ in 0..n {
        let corpse = dead.next().await.expect("a dead-lettered message");
        *reasons.entry(corpse.message.headers[HEADER_REASON].clone()).or_default() += 1;
        corpse.ack().await.unwrap();
    }
    reasons
}

async fn poison_is_dead_lettered_and_the_pool_takes_new_tasks(store: String) {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        let topology = fleet(&prefix);
        transport.declare(&topology).await.unwrap();
        let service = Service::start(transport.clone(), reviewer_config(&prefix, &store, INSTANCE)).await.unwrap();
        let api = ApiClient::new(&format!("http://{}", service.local_addr()), REVIEWER_TOKEN);
        assert!(POISONED > usize::from(PREFETCH));

        // A NUL in the sample id, the call id, the function, or the arguments' text.
        let ops = topology.human_route("ops");
        for i in 0..POISONED {
            let task = match i % 4 {
                0 => human_task(&format!("s\0{i}"), "c1", "bash", json!({"cmd": "ls"})),
                1 => human_task("s1", &format!("c\0{i}"), "bash", json!({"cmd": "ls"})),
                2 => human_task("s1", &format!("f{i}"), "ba\0sh", json!({"cmd": "ls"})),
                _ => human_task("s1", &format!("a{i}"), "bash", json!({"cmd": format!("printf 'a\0b{i}'")})),
            };
            transport.publish(&ops, task).await.unwrap();
        }
        // Behind them, a task like any other is taken.
        transport.publish(&ops, human_task("s1", "clean", "bash", json!({"cmd": "make"}))).await.unwrap();
        let stored = pending(&api, POISONED / 4 + 1).await;
        assert!(stored.iter().any(|task| task["correlation"] == "approval/run/s1/1/clean"));

        // The NUL-bearing arguments are kept as they came, and found by a search for them.
        let kept: Vec<&Value> = stored.iter().filter(|task| task["call"]["arguments"]["cmd"] != "make").collect();
        for task in &kept {
            let cmd = task["call"]["arguments"]["cmd"].as_str().unwrap();
            let i = task["key"]["tool_call_id"].as_str().unwrap().trim_start_matches('a');
            assert_eq!(cmd, format!("printf 'a\0b{i}'"));
        }
        let found = api.get("/api/tasks?q=a%00b").await.unwrap().json();
        assert_eq!(found["tasks"].as_array().unwrap().len(), POISONED / 4);

        // Each of the others is in the dead-letter queue with its reason.
        let reasons = dead_reasons(&transport, &topology, POISONED / 4 * 3).await;
        let reason = |what: &str| {
            format!("bad_message: unusable human task: the HumanTask's {what} holds a NUL character, which the store cannot keep")
        };
        assert_eq!(reasons, BTreeMap::from([(reason("call key"), POISONED / 2), (reason("function"), POISONED / 4)]));
        service.stop().await;
    })
    .await;
}

#[tokio::test]
async fn nul_bearing_tasks_leave_the_intake_taking_new_ones_on_sqlite() {
    with_sqlite("poison", poison_is_dead_lettered_and_the_pool_takes_new_tasks).await;
}

#[tokio::test]
async fn nul_bearing_tasks_leave_the_intake_taking_new_ones_on_postgres() {
    with_pg("poison", poison_is_dead_lettered_and_the_pool_takes_new_tasks).await;
}

async fn a_poisoned_cancel_does_not_hold_the_ones_behind_it(store: String) {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        let topology = fleet(&prefix);
        transport.declare(&topology).await.unwrap();
        let worker = InProcessWorker::start(transport.clone(), &prefix, "worker", 4);
        let service = Service::start(transport.clone(), reviewer_config(&prefix, &store, INSTANCE)).await.unwrap();
        let api = ApiClient::new(&format!("http://{}", service.local_addr()), REVIEWER_TOKEN);
        let config = ClientConfig {
            prefix: prefix.clone(),
            runner_id: "runner".into(),
            default_timeout: Duration::from_secs(100),
            replies: TestKeys::get().replies(),
            repeats: Repeats::default(),
        };
        let client = Client::connect(transport.clone(), config).await.unwrap();

        let request = approval("s1", "c1", json!({"function": "bash", "arguments": {"cmd": "rm -r build"}}), POLICY);
        let key = request.key.clone().unwrap();
        let asking = client.clone();
        let asked = tokio::spawn(async move { asking.approve(request).await });
        pending(&api, 1).await;

        // A cancel naming a call id with a NUL in it, then the runner's own cancel.
        let poisoned = v1::CallKey { tool_call_id: "c\0 1".into(), ..key.clone() };
        let cancel = v1::Cancel { key: Some(poisoned), kind: v1::Kind::Approval.into(), reason: "ended".into() };
        let cancels = Destination::exchange(topology.cancels_exchange(), "");
        transport.publish(&cancels, Message::new(cancel.encode_to_vec())).await.unwrap();
        client.cancel(&key, v1::Kind::Approval, "the sample ended").await;
        pending(&api, 0).await;

        let reasons = dead_reasons(&transport, &topology, 1).await;
        let reason = "bad_message: the Cancel's call key holds a NUL character, which the store cannot keep";
        assert_eq!(reasons, BTreeMap::from([(reason.to_owned(), 1)]));
        asked.abort();
        client.close().await;
        service.stop().await;
        worker.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_nul_bearing_cancel_does_not_wedge_later_cancels_on_sqlite() {
    with_sqlite("poison-cancel", a_poisoned_cancel_does_not_hold_the_ones_behind_it).await;
}

#[tokio::test]
async fn a_nul_bearing_cancel_does_not_wedge_later_cancels_on_postgres() {
    with_pg("poison_cancel", a_poisoned_cancel_does_not_hold_the_ones_behind_it).await;
}
