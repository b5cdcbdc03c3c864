//! The broker users of `airlock topology definitions`, loaded into the test broker (in a
//! vhost of their own), each tried at what its role must not do: RabbitMQ refuses it, or, for
//! routing keys smuggled in a `BCC` header (which RabbitMQ before 4.0.3 does not check against
//! topic permissions), routes the message nowhere else.

use std::time::Duration;

use airlock_testkit::unique_prefix;
use airlock_tests::roles::Loaded;
use airlock_tests::{TestKeys, airlock_bin, broker};
use airlock_transport::{Destination, Message, Topology, Transport, TransportError};

fn refused<T: std::fmt::Debug>(what: &str, result: Result<T, TransportError>) {
    assert!(
        matches!(result, Err(TransportError::AccessRefused { .. })),
        "{what}: expected ACCESS_REFUSED, got {result:?}"
    );
}

#[tokio::test]
async fn each_role_user_is_refused_what_its_role_must_not_do() {
    // A reachable broker (or a skip, outside CI) before anything is loaded into it.
    let Some(guest) = broker("roles").await else { return };
    guest.close().await;
    let id = unique_prefix();
    let prefix = "fleet";
    let user = |role: &str| format!("{id}-{role}");
    let (runner_a, runner_b, worker, scan, reviewer, auditor) =
        (user("runner-a"), user("runner-b"), user("worker"), user("scan"), user("reviewer"), user("auditor"));
    let operator = user("operator");
    let users = [
        (runner_a.as_str(), "role: runner"),
        (runner_b.as_str(), "role: runner"),
        (worker.as_str(), "role: worker"),
        (scan.as_str(), "role: 'step:scan'"),
        (reviewer.as_str(), "role: reviewer, instance: rv, pools: [ops]"),
        (auditor.as_str(), "role: auditor"),
        (operator.as_str(), "role: operator"),
    ];
    let loaded = Loaded::load(&id, prefix, &users).await;
    let dir = std::env::temp_dir().join(&id);
    std::fs::create_dir_all(&dir).unwrap();

    // The worker declares the whole fleet.
    let topology = Topology::new(prefix).with_step("scan").with_human_pool("ops");
    let as_worker = loaded.connect_as(&worker).await;
    as_worker.declare(&topology).await.expect("the worker declares the fleet");

    // A runner declares its own reply queue only, publishes requests, and nothing else.
    let as_a = loaded.connect_as(&runner_a).await;
    let own = Topology::empty(prefix).with_reply_queue(&format!("{runner_a}.r1"));
    refused("runner declares the core", as_a.declare(&Topology::new(prefix)).await);
    as_a.declare_own(&Topology::new(prefix), &own).await.expect("the runner declares its reply queue");
    as_a.publish(&topology.requests_route(), Message::new("request")).await.expect("the runner asks");
    refused("runner answers a step", as_a.publish(&topology.results_route(), Message::new("forged")).await);
    refused(
        "runner publishes through the default exchange",
        as_a.publish(&Destination::queue(topology.results_queue()), Message::new("forged")).await,
    );
    let as_b = loaded.connect_as(&runner_b).await;
    as_b.declare_own(&Topology::new(prefix), &Topology::empty(prefix).with_reply_queue(&format!("{runner_b}.r1")))
        .await
        .unwrap();
    refused("runner reads another's replies", as_a.consume(&topology.reply_queue(&format!("{runner_b}.r1")), 1).await);
    let stealing = Topology::empty(prefix).with_reply_queue(&format!("{runner_b}.stolen"));
    refused("runner binds another's reply key", as_a.declare(&stealing).await);
    refused("runner reads a human queue", as_a.consume(&topology.human_queue("ops"), 1).await);
    let b_replies = format!("reply.{runner_b}.r1");
    refused(
        "runner publishes to the routing exchange",
        as_a.publish(&Destination::route(topology.route_exchange(), &b_replies), Message::new("forged")).await,
    );
    // Keys smuggled as copies of a request reach the requests queue only.
    let smuggled = ["results", "step.scan", "human.ops", b_replies.as_str(), "approval.approve"]
        .into_iter()
        .fold(topology.requests_route(), Destination::with_copy);
    as_a.publish(&smuggled, Message::new("smuggled")).await.expect("the request itself goes through");

    // A step answers its own tasks and reads nothing else.
    let as_scan = loaded.connect_as(&scan).await;
    let mut tasks = as_scan.consume(&topology.step_queue("scan"), 1).await.expect("the step reads its queue");
    refused("step publishes a request", as_scan.publish(&topology.requests_route(), Message::new("forged")).await);
    refused("step reads a human queue", as_scan.consume(&topology.human_queue("ops"), 1).await);
    refused(
        "step sends a reply",
        as_scan.publish(&topology.reply_route(&own.queues()[0].name).unwrap(), Message::new("forged")).await,
    );
    as_scan.publish(&topology.results_route(), Message::new("answer")).await.expect("the step answers");
    let smuggled = ["requests", "human.ops", b_replies.as_str()]
        .into_iter()
        .fold(topology.results_route(), Destination::with_copy);
    as_scan.publish(&smuggled, Message::new("smuggled")).await.expect("the answer itself goes through");

    // The worker routes a task to the step, which sees who published it, as the broker says.
    as_worker.publish(&topology.step_route("scan"), Message::new("task")).await.unwrap();
    let task = tasks.next().await.expect("the task arrives");
    assert_eq!(task.message.user_id.as_deref(), Some(worker.as_str()));
    task.ack().await.unwrap();

    let smuggled_tasks = as_worker.message_count(&topology.human_queue("ops")).await.unwrap();
    assert_eq!(smuggled_tasks, 0, "nothing smuggled reached the human queue");

    // A reviewer reads its pools and answers; it cannot take a step's tasks.
    let as_reviewer = loaded.connect_as(&reviewer).await;
    as_reviewer.consume(&topology.human_queue("ops"), 1).await.expect("the reviewer reads its pool");
    refused("reviewer reads a step queue", as_reviewer.consume(&topology.step_queue("scan"), 1).await);
    refused("reviewer publishes a request", as_reviewer.publish(&topology.requests_route(), Message::new("x")).await);
    // It tells a runner that a call waits for a person, and routes nothing else.
    let runner_replies = topology.reply_route(&own.queues()[0].name).unwrap();
    as_reviewer.publish(&runner_replies, Message::new("progress")).await.expect("the reviewer reaches a reply queue");
    refused("reviewer routes a human task", as_reviewer.publish(&topology.human_route("ops"), Message::new("x")).await);
    refused("reviewer routes a step task", as_reviewer.publish(&topology.step_route("scan"), Message::new("x")).await);

    // The auditor binds its queue to the decisions' keys only, and gets the copy of a reply.
    let as_auditor = loaded.connect_as(&auditor).await;
    let audit = Topology::empty(prefix).with_decisions_queue("audit");
    as_auditor.declare_own(&Topology::new(prefix), &audit).await.expect("the auditor declares its queue");
    let eavesdrop = Topology::empty(prefix).with_work_queue("audit").with_binding(
        topology.route_exchange(),
        topology.name("audit"),
        "reply.#",
    );
    refused("auditor binds the replies' keys", as_auditor.declare(&eavesdrop).await);
    let a_replies = topology.reply_route(&own.queues()[0].name).unwrap();
    as_worker.publish(&a_replies.with_copy("approval.approve"), Message::new("decision")).await.unwrap();

    // `airlock request` signed in as a runner user asks under a runner id of that user (no
    // worker runs here: the request is published, then fails closed at its timeout).
    std::fs::write(dir.join("call.json"), r#"{"id": "c1", "function": "bash", "arguments": {"cmd": "ls"}}"#).unwrap();
    std::fs::write(dir.join("policy.yaml"), "approvers: []\n").unwrap();
    let output = std::process::Command::new(airlock_bin())
        .args(["request", "--kind", "approval", "--timeout", "0.5", "--prefix", prefix, "--amqp"])
        .arg(loaded.url(&runner_a))
        .arg("--call")
        .arg(dir.join("call.json"))
        .arg("--policy")
        .arg(dir.join("policy.yaml"))
        .arg("--verify-key")
        .arg(TestKeys::get().dir.join("fleet.pub"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let decision: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(decision["approver"], "timeout", "{decision}");

    // The control log: a switch on a run, an incident or a breaker's count comes from a worker,
    // a reviewer service or an operator, never from a runner, a step or the auditor. A step
    // appends to the log of its own scores only.
    let control = Topology::log_route(&topology.control_log());
    for (who, transport) in [("worker", &as_worker), ("reviewer", &as_reviewer)] {
        transport.publish(&control, Message::new("entry")).await.unwrap_or_else(|e| panic!("{who} appends: {e}"));
        transport.follow(&topology.control_log()).await.unwrap_or_else(|e| panic!("{who} follows: {e}"));
    }
    let as_operator = loaded.connect_as(&operator).await;
    as_operator.publish(&control, Message::new("switch")).await.expect("the operator throws a switch");
    refused("operator publishes a request", as_operator.publish(&topology.requests_route(), Message::new("x")).await);
    refused("runner appends to the control log", as_a.publish(&control, Message::new("forged")).await);
    refused("runner reads the control log", as_a.follow(&topology.control_log()).await);
    refused("step appends to the control log", as_scan.publish(&control, Message::new("forged")).await);
    refused("auditor appends to the control log", as_auditor.publish(&control, Message::new("forged")).await);
    let scores = |step: &str| Topology::empty(prefix).with_scores_log(step);
    as_scan.declare(&scores("scan")).await.expect("a step declares the log of its scores");
    as_scan.publish(&Topology::log_route(&topology.scores_log("scan")), Message::new("7")).await.unwrap();
    as_worker.declare(&scores("judge")).await.unwrap();
    refused(
        "step appends to another step's scores",
        as_scan.publish(&Topology::log_route(&topology.scores_log("judge")), Message::new("0")).await,
    );
    // Its model answers likewise; the rate limiters are shared by every step.
    let samples = |step: &str| Topology::empty(prefix).with_samples_log(step, Duration::from_secs(600));
    as_scan.declare(&samples("scan")).await.expect("a step declares the log of its answers");
    as_scan.publish(&Topology::log_route(&topology.samples_log("scan")), Message::new("a")).await.unwrap();
    as_worker.declare(&samples("judge")).await.unwrap();
    refused(
        "step appends to another step's answers",
        as_scan.publish(&Topology::log_route(&topology.samples_log("judge")), Message::new("forged")).await,
    );
    as_scan.declare(&Topology::empty(prefix).with_limiter_log("account")).await.expect("a step joins a limiter");
    drop(as_scan.follow(&topology.limiter_log("account")).await.expect("a step follows its limiter"));

    // What each queue holds: the smuggled keys reached nothing but the queue of the exchange.
    let count = |queue: String| {
        let as_worker = as_worker.clone();
        async move { as_worker.message_count(&queue).await.unwrap() }
    };
    assert_eq!(count(topology.requests_queue()).await, 3, "the requests and the smuggled one");
    assert_eq!(count(topology.results_queue()).await, 2, "the answer and the smuggled one");
    assert_eq!(count(topology.reply_queue(&format!("{runner_b}.r1"))).await, 0);
    assert_eq!(count(topology.reply_queue(&format!("{runner_a}.r1"))).await, 2, "the worker's reply, the progress");
    assert_eq!(count(topology.name("audit")).await, 1, "its copy, and only that");

    for transport in [as_worker, as_a, as_b, as_scan, as_reviewer, as_auditor, as_operator] {
        transport.close().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}
