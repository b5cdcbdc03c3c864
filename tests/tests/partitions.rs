//! RabbitMQ only: the fleet when a role's link to the broker goes half-open, and when a broker
//! node of a three-node cluster freezes or is cut off from the other two. Every fault here is
//! a silent one (`airlock_testkit::link` and the cluster's node faults): no FIN, no RST, no
//! connection closed by the broker, only bytes that stop moving; what finds it is a timeout,
//! the broker's and the role's AMQP heartbeats.
//!
//! What each test holds the fleet to, with 2,000 calls (`AIRLOCK_PARTITION_CALLS`) at 64 in
//! flight and a 30 s deadline: every call decided, none failed closed (so none waited for its
//! deadline), one answer each.
//! A frozen worker's unacknowledged requests go back to the queue once the broker sees its
//! link dead; a runner, reviewer service, monitor, gateway or auditor on a frozen link finds
//! out within seconds and reconnects through a fresh path. The roles' heartbeat is set in
//! their broker URL (`?heartbeat=2`: a dead link is seen after about 4 s on either side).

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use airlock_client::Client;
use airlock_monitor::provider::ProviderKind;
use airlock_reviewer::Service as Reviewer;
use airlock_reviewer::client::ApiClient;
use airlock_testkit::cluster::Cluster;
use airlock_testkit::link::{Link, NewConnections};
use airlock_testkit::{LIST_CONNECTIONS, amqp_url, connections_named, ctl_output, rabbitmqctl, unique_prefix};
use airlock_tests::linked::{auditor, direct, linked, runner, with_heartbeat};
use airlock_tests::load::{Load, ls, not_approved};
use airlock_tests::{
    HANG_GUARD, InProcessWorker, REVIEWER_TOKEN, TestKeys, approval, broker, decision_name, guarded, pending,
    reviewer_config, wait_for_consumers,
};
use airlock_transport::{AmqpOptions, AmqpTransport, Topology, Transport};
use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio::task::JoinSet;

const POLICY: &str = "approvers:\n  - name: auto\n    tools: \"*\"\n";

/// The load of each run: calls, in flight, the deadline, answers before the fault. The number
/// of calls is `AIRLOCK_PARTITION_CALLS`, 2,000 unless set (what CI runs; 20,000 for a full run).
static CALLS: LazyLock<usize> =
    LazyLock::new(|| std::env::var("AIRLOCK_PARTITION_CALLS").ok().and_then(|n| n.parse().ok()).unwrap_or(2000));
const WINDOW: usize = 64;
const DEADLINE: Duration = Duration::from_secs(30);
const FAULT_AFTER: usize = 300;

fn fleet(prefix: &str) -> Topology {
    Topology::new(prefix).with_reply_queue("runner")
}

/// Waits until the broker lists no connection named `name`: it has seen the link dead.
async fn broker_dropped(name: &str) {
    tokio::time::timeout(HANG_GUARD, async {
        while !connections_named(&rabbitmqctl(&LIST_CONNECTIONS).await, name).is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the broker kept {name}'s connection open"));
}

/// Seconds since `since`, for the figures the tests print (nothing is measured against them).
fn secs(since: Instant) -> f64 {
    since.elapsed().as_secs_f64()
}

/// Runs `count` calls of `call` under `policy`, [`WINDOW`] in flight, and freezes `link` (a
/// reconnect gets a fresh path) once a fifth are answered; every call's outcome.
async fn frozen_mid_run(
    client: &Client<AmqpTransport>,
    link: &Link,
    policy: &'static str,
    call: fn(&str) -> Value,
    count: usize,
) -> Vec<airlock_tests::load::Outcome> {
    let load = Load::start(client, policy, call, WINDOW, count);
    load.until(count / 5).await;
    link.freeze(NewConnections::Pass);
    load.finish().await
}

/// Checks the run's outcome: every call decided by a worker, none failed closed.
fn all_approved(outcomes: &[airlock_tests::load::Outcome], client: &Client<AmqpTransport>) {
    let stats = client.stats();
    eprintln!("{} calls answered; runner: {stats:?}", outcomes.len());
    let failed = not_approved(outcomes);
    assert!(failed.is_empty(), "{} calls not approved, e.g. {:?}", failed.len(), &failed[..failed.len().min(3)]);
    assert_eq!(outcomes.len(), *CALLS, "every call answered");
    assert_eq!((stats.timed_out, stats.pending), (0, 0), "nothing failed closed: {stats:?}");
}

#[tokio::test]
async fn a_frozen_worker_link_holds_no_call_to_its_deadline() {
    let prefix = unique_prefix();
    let Some(_probe) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        let survivor = InProcessWorker::start(direct(&format!("{prefix} survivor")).await, &prefix, "survivor", 64);
        let frozen_name = format!("{prefix} frozen");
        let (link, frozen_transport) = linked(&frozen_name).await;
        let frozen = InProcessWorker::start(frozen_transport, &prefix, "frozen", 64);
        wait_for_consumers(&format!("{prefix}.requests"), 2).await;
        let transport = direct(&format!("{prefix} runner")).await;
        let client = runner(&transport, &prefix, DEADLINE).await;

        let started = Instant::now();
        let load = Load::start(&client, POLICY, ls, WINDOW, *CALLS);
        load.until(FAULT_AFTER).await;
        // A dead path: the worker's reconnects through it hang as well.
        link.freeze(NewConnections::Freeze);
        let (frozen_at, froze) = (load.answered(), Instant::now());
        eprintln!("the worker's link froze with {frozen_at} of {} answered", *CALLS);
        // The runner publishes again what goes unanswered past its soft deadline: the
        // survivor decides it, without waiting for the broker to see the link dead.
        let outcomes = load.finish().await;
        eprintln!("{} calls in {:.1} s, the last {:.1} s after the freeze", *CALLS, secs(started), secs(froze));
        all_approved(&outcomes, &client);
        assert!(client.stats().repeated > 0, "the calls the frozen worker held were published again");
        // The broker sees the silent link dead by its heartbeat and requeues what the frozen
        // worker held (decided again, and ignored), while the worker itself still waits.
        broker_dropped(&frozen_name).await;
        eprintln!("the broker closed the frozen worker's connection {:.1} s after the freeze", secs(froze));
        let requests = Topology::new(&prefix).requests_queue();
        while transport.message_count(&requests).await.unwrap() != 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let by: HashMap<&str, usize> = outcomes.iter().fold(HashMap::new(), |mut by, outcome| {
            *by.entry(outcome.decided_by.as_str()).or_default() += 1;
            by
        });
        eprintln!("decided by {by:?}");
        assert!(by.get("survivor").copied().unwrap_or(0) >= *CALLS - frozen_at, "the survivor took over: {by:?}");

        link.thaw();
        drop(frozen);
        client.close().await;
        survivor.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_frozen_runner_link_is_found_in_seconds_and_the_runner_gets_its_answers_through_a_fresh_path() {
    let prefix = unique_prefix();
    let Some(_probe) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), async move {
        let mut workers = Vec::new();
        for i in 0..2 {
            let transport = direct(&format!("{prefix} worker")).await;
            workers.push(InProcessWorker::start(transport, &prefix, &format!("w{i}"), 64));
        }
        wait_for_consumers(&format!("{prefix}.requests"), 2).await;
        let (link, transport) = linked(&format!("{prefix} runner")).await;
        let client = runner(&transport, &prefix, DEADLINE).await;

        let started = Instant::now();
        let load = Load::start(&client, POLICY, ls, WINDOW, *CALLS);
        load.until(FAULT_AFTER).await;
        let mut reconnects = transport.reconnects();
        reconnects.mark_unchanged();
        // Only the connection of the moment: a reconnect gets a fresh path.
        link.freeze(NewConnections::Pass);
        let froze = Instant::now();
        eprintln!("the runner's link froze with {} of {} answered", load.answered(), *CALLS);
        tokio::time::timeout(HANG_GUARD, reconnects.changed()).await.expect("the runner reconnects").unwrap();
        eprintln!("the runner reconnected {:.1} s after the freeze", secs(froze));
        let outcomes = load.finish().await;
        eprintln!("{} calls in {:.1} s", *CALLS, secs(started));
        all_approved(&outcomes, &client);
        assert!(*transport.reconnects().borrow() >= 1, "the runner reconnected");
        assert!(link.accepted() >= 2, "through a fresh connection: {} accepted", link.accepted());

        client.close().await;
        transport.close().await;
        for worker in workers {
            worker.stop().await;
        }
    })
    .await;
}

/// A person's pool: every `bash` call goes to a person in `ops`.
const HUMAN_POLICY: &str = "approvers:\n  - name: human\n    tools: \"bash\"\n    pool: ops\n";

#[tokio::test]
async fn a_frozen_reviewer_link_delays_no_answer_to_its_deadline_and_shows_no_task_twice() {
    let prefix = unique_prefix();
    let Some(_probe) = broker(&prefix).await else { return };
    let topology = fleet(&prefix).with_human_pool("ops");
    guarded(topology, async move {
        let worker = InProcessWorker::start(direct(&format!("{prefix} worker")).await, &prefix, "w0", 64);
        wait_for_consumers(&format!("{prefix}.requests"), 1).await;
        let (link, reviewer_transport) = linked(&format!("{prefix} reviewer")).await;
        let dir = std::env::temp_dir().join(format!("airlock-partitions-{prefix}"));
        std::fs::create_dir_all(&dir).unwrap();
        let store = format!("sqlite:{}", dir.join("tasks.db").display());
        let service = Reviewer::start(reviewer_transport.clone(), reviewer_config(&prefix, &store, "reviewer"))
            .await
            .expect("the reviewer starts");
        let api = ApiClient::new(&format!("http://{}", service.local_addr()), REVIEWER_TOKEN);
        let transport = direct(&format!("{prefix} runner")).await;
        let client = runner(&transport, &prefix, DEADLINE).await;

        const TASKS: usize = 30;
        let mut asked = JoinSet::new();
        for i in 0..TASKS {
            let client = client.clone();
            let call = json!({"function": "bash", "arguments": {"cmd": format!("rm -r build-{i}")}});
            asked.spawn(async move { client.approve(approval("human", &format!("c{i}"), call, HUMAN_POLICY)).await });
        }
        let tasks = tokio::time::timeout(HANG_GUARD, pending(&api, TASKS)).await.expect("every call became a task");
        // A third answered before the link freezes, the rest while it is frozen: their
        // answers are stored and go out once the service is through a fresh path.
        for task in &tasks[..TASKS / 3] {
            api.decide(task["id"].as_str().unwrap(), "approve", None).await.expect("an answer");
        }
        link.freeze(NewConnections::Pass);
        for task in &tasks[TASKS / 3..] {
            api.decide(task["id"].as_str().unwrap(), "reject", Some("frozen link")).await.expect("an answer");
        }
        let mut decided = Vec::new();
        while let Some(decision) = asked.join_next().await {
            let decision = decision.unwrap().expect("a decision");
            decided.push((decision.key.clone().unwrap().tool_call_id, decision_name(&decision), decision.decided_by));
        }
        eprintln!("runner: {:?}", client.stats());
        assert!(decided.iter().all(|(_, _, by)| by == "alice"), "every answer is the person's: {decided:?}");
        let approved = decided.iter().filter(|(_, name, _)| *name == "approve").count();
        assert_eq!((decided.len(), approved), (TASKS, TASKS / 3), "{decided:?}");
        assert_eq!(client.stats().timed_out, 0, "no call failed closed");
        assert!(*reviewer_transport.reconnects().borrow() >= 1, "the reviewer service reconnected");
        assert!(api.tasks().await.unwrap().is_empty(), "no task is shown again");
        let history = api.get("/api/history").await.unwrap().json();
        assert_eq!(history["tasks"].as_array().unwrap().len(), TASKS, "each call is one task");

        service.stop().await;
        client.close().await;
        worker.stop().await;
        let _ = std::fs::remove_dir_all(dir);
    })
    .await;
}

const MONITOR_POLICY: &str = "approvers:\n  - name: monitor\n    tools: \"*\"\n    approve_below: 3\n    \
                              escalate_below: 8\n    above: reject\n";

#[tokio::test]
async fn a_frozen_monitor_link_holds_no_call_to_its_deadline() {
    let prefix = unique_prefix();
    let Some(_probe) = broker(&prefix).await else { return };
    guarded(fleet(&prefix).with_step("monitor"), async move {
        let model = airlock_tests::fake_model::FakeModel::start().await;
        let worker = InProcessWorker::start(direct(&format!("{prefix} worker")).await, &prefix, "w0", 64);
        let (link, monitor_transport) = linked(&format!("{prefix} monitor")).await;
        let config =
            airlock_tests::fake_model::monitor_config(&prefix, "monitor", ProviderKind::OpenAi, model.openai_base());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let monitor = tokio::spawn(airlock_monitor::run(monitor_transport.clone(), config, async {
            let _ = stopped.await;
        }));
        wait_for_consumers(&format!("{prefix}.step.monitor"), 1).await;
        let transport = direct(&format!("{prefix} runner")).await;
        let client = runner(&transport, &prefix, DEADLINE).await;

        // Fewer calls: each is a model call as well.
        const MONITORED: usize = 500;
        let outcomes = frozen_mid_run(&client, &link, MONITOR_POLICY, low_score, MONITORED).await;
        let stats = client.stats();
        eprintln!("runner: {stats:?}");
        let failed = not_approved(&outcomes);
        assert!(failed.is_empty(), "{} not approved, e.g. {:?}", failed.len(), &failed[..failed.len().min(3)]);
        assert!(outcomes.iter().all(|outcome| outcome.approver == "monitor"), "the monitor decided every call");
        assert_eq!((outcomes.len(), stats.timed_out), (MONITORED, 0));
        assert!(*monitor_transport.reconnects().borrow() >= 1, "the monitor reconnected");

        let _ = stop.send(());
        monitor.await.unwrap().expect("the monitor stops cleanly");
        client.close().await;
        worker.stop().await;
    })
    .await;
}

/// A call the fake model scores 1 of 10: the monitor approves it.
fn low_score(call: &str) -> Value {
    json!({"function": "bash", "arguments": {"cmd": format!("echo {call} MARK:score-1")}})
}

const GATEWAY_TOKEN: &str = "gateway-token-for-partition-tests";

#[tokio::test]
async fn a_frozen_gateway_link_holds_no_call_to_its_deadline() {
    use airlock_gateway::tokens::{TokenEntry, Tokens, sha256_hex};
    let prefix = unique_prefix();
    let Some(_probe) = broker(&prefix).await else { return };
    guarded(fleet(&prefix).with_decisions_queue("audit"), async move {
        let worker = InProcessWorker::start(direct(&format!("{prefix} worker")).await, &prefix, "w0", 64);
        wait_for_consumers(&format!("{prefix}.requests"), 1).await;
        let (link, gateway_transport) = linked(&format!("{prefix} gateway")).await;
        let config = airlock_gateway::GatewayConfig {
            prefix: prefix.clone(),
            runner_id: airlock_gateway::runner_id("partition-test"),
            listen: "127.0.0.1:0".parse().unwrap(),
            tokens: Tokens::from_list(vec![TokenEntry {
                name: "runner".into(),
                token_sha256: sha256_hex(GATEWAY_TOKEN),
                policies: vec!["*".into()],
                inline: true,
            }]),
            replies: TestKeys::get().replies(),
            // The deadline of the runner's calls; the rate of a fleet's runner, not a person's.
            limits: airlock_gateway::Limits {
                default_timeout: DEADLINE,
                rate: airlock_gateway::limit::RateConfig { per_second: 10_000.0, burst: 10_000 },
                ..Default::default()
            },
            webhooks: None,
            store: None,
            metrics: Default::default(),
        };
        let service = airlock_gateway::Service::start(gateway_transport.clone(), config).await.unwrap();
        let base = format!("http://{}", service.local_addr());
        let http = airlock_gateway::webhook::http_client().unwrap();

        // Fewer calls: each is an HTTP request that waits for its decision.
        const ASKED: usize = 400;
        let ask = |i: usize| {
            let (http, base) = (http.clone(), base.clone());
            async move {
                let body = json!({
                    "call": {"id": format!("c{i}"), "function": "ls", "arguments": {"i": i}},
                    "policy": {"inline": POLICY},
                    "origin": {"run": "run-1", "sample": 1, "epoch": 1},
                });
                let response = http
                    .post(format!("{base}/v1/approvals"))
                    .bearer_auth(GATEWAY_TOKEN)
                    .header("prefer", "wait=60")
                    .json(&body)
                    .send()
                    .await
                    .expect("the gateway answers");
                let status = response.status();
                let json: Value = response.json().await.unwrap_or(Value::Null);
                (i, status, json)
            }
        };
        let mut asked = JoinSet::new();
        let mut answers = Vec::new();
        for i in 0..ASKED {
            if asked.len() >= WINDOW {
                answers.push(asked.join_next().await.unwrap().unwrap());
            }
            if i == ASKED / 4 {
                link.freeze(NewConnections::Pass);
            }
            asked.spawn(ask(i));
        }
        while let Some(answer) = asked.join_next().await {
            answers.push(answer.unwrap());
        }
        let not_approved: Vec<_> =
            answers.iter().filter(|(_, status, json)| !status.is_success() || json["decision"] != "approve").collect();
        assert!(
            not_approved.is_empty(),
            "{} not approved, e.g. {:?}",
            not_approved.len(),
            &not_approved[..not_approved.len().min(3)]
        );
        assert_eq!(answers.len(), ASKED);
        assert!(*gateway_transport.reconnects().borrow() >= 1, "the gateway reconnected");

        service.stop().await;
        worker.stop().await;
    })
    .await;
}

/// How many records the log at `path` holds for each call.
fn records_per_call(path: &std::path::Path) -> HashMap<String, usize> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut counts = HashMap::new();
    for line in text.split_inclusive('\n').filter(|line| line.ends_with('\n')) {
        let record: Value = serde_json::from_str(line).expect("a record is JSON");
        let call = record["key"]["tool_call_id"].as_str().expect("a record names its call").to_owned();
        *counts.entry(call).or_default() += 1;
    }
    counts
}

#[tokio::test]
async fn a_frozen_auditor_link_loses_and_doubles_no_record() {
    let prefix = unique_prefix();
    let Some(_probe) = broker(&prefix).await else { return };
    guarded(fleet(&prefix).with_work_queue("audit"), async move {
        let dir = std::env::temp_dir().join(format!("airlock-partitions-{prefix}"));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("decisions.jsonl");
        let link = Link::to_broker(&amqp_url()).await.expect("a link to the broker");
        let mut auditor = auditor(&with_heartbeat(&link.url()), &prefix, &log, &[]);
        wait_for_consumers(&format!("{prefix}.audit"), 1).await;
        let worker = InProcessWorker::start(direct(&format!("{prefix} worker")).await, &prefix, "w0", 64);
        let transport = direct(&format!("{prefix} runner")).await;
        let client = runner(&transport, &prefix, DEADLINE).await;

        const AUDITED: usize = 1000;
        let outcomes = frozen_mid_run(&client, &link, POLICY, ls, AUDITED).await;
        assert!(not_approved(&outcomes).is_empty() && outcomes.len() == AUDITED);

        let counts = tokio::time::timeout(HANG_GUARD, async {
            loop {
                let counts = records_per_call(&log);
                if counts.len() == AUDITED {
                    return counts;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the log holds {} of {AUDITED} calls", records_per_call(&log).len()));
        let doubled: Vec<_> = counts.iter().filter(|(_, n)| **n != 1).collect();
        assert!(doubled.is_empty(), "one record per decision: {} doubled, e.g. {:?}", doubled.len(), doubled.first());
        assert!(link.accepted() >= 2, "the auditor reconnected through a fresh path");

        auditor.kill().await.unwrap();
        client.close().await;
        worker.stop().await;
        let _ = std::fs::remove_dir_all(dir);
    })
    .await;
}

// === broker nodes ===

/// One cluster at a time: three nodes and a fleet under load keep two cores busy.
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// How long one cluster test may take, its cluster's start and stop included.
const CLUSTER_GUARD: Duration = Duration::from_secs(300);

/// Runs `test` on a cluster of three nodes of its own, one such test at a time; skips
/// (outside CI) when this machine cannot start one.
async fn on_three_nodes<Test: Future<Output = ()>>(test: impl FnOnce(Cluster) -> Test) {
    let _one = ONE_AT_A_TIME.lock().await;
    let cluster = match Cluster::start(3).await {
        Ok(cluster) => cluster,
        Err(reason) => return airlock_testkit::unreachable(reason),
    };
    tokio::time::timeout(CLUSTER_GUARD, test(cluster)).await.expect("the test finished in time");
}

/// The index of the node that the connection named `name` is on, asked of node `asking`.
async fn node_of(cluster: &Cluster, asking: usize, name: &str) -> Option<usize> {
    let listing = ctl_output(cluster.node(asking).ctl(), &LIST_CONNECTIONS).await;
    let pid = connections_named(&listing, name).first()?.trim_start_matches('<');
    let node = &pid[..pid.find("@localhost")? + "@localhost".len()];
    cluster.index_of(node)
}

/// The fleet of a cluster test: two workers on every node, a runner, all with the heartbeat,
/// and the node the first worker is on (the one the test takes away).
struct ClusterFleet {
    _workers: Vec<InProcessWorker>,
    transport: AmqpTransport,
    client: Client<AmqpTransport>,
    target: usize,
}

impl ClusterFleet {
    /// Starts the test's load and returns it once [`FAULT_AFTER`] calls are answered (the
    /// moment for the fault), with when it started.
    async fn loaded(&self) -> (Load, Instant) {
        let started = Instant::now();
        let load = Load::start(&self.client, POLICY, ls, WINDOW, *CALLS);
        load.until(FAULT_AFTER).await;
        (load, started)
    }
}

async fn cluster_fleet(cluster: &Cluster, prefix: &str) -> ClusterFleet {
    let group = std::num::NonZeroU32::new(3);
    let connect = |role: String, urls: String| async move {
        let options = AmqpOptions::new(with_heartbeat(&urls)).with_connection_name(role).with_quorum_group_size(group);
        AmqpTransport::connect_with(options).await.expect("a role connects to the cluster")
    };
    let urls = cluster.amqp_urls();
    let first = connect(format!("{prefix} w0"), urls.clone()).await;
    let mut workers = vec![InProcessWorker::start(first, prefix, "w0", 64)];
    let target = tokio::time::timeout(HANG_GUARD, async {
        loop {
            match node_of(cluster, 0, &format!("{prefix} w0")).await {
                Some(node) => return node,
                None => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    })
    .await
    .expect("the first worker's connection is listed");
    workers.push(InProcessWorker::start(connect(format!("{prefix} w1"), urls.clone()).await, prefix, "w1", 64));
    // The runner on another node than the one taken away: what is tested is the node's loss
    // to the worker and to the cluster, not the runner's move (tests/tests/cluster.rs).
    let others: Vec<String> = (0..3).filter(|&i| i != target).map(|i| cluster.node(i).amqp_url()).collect();
    let transport = connect(format!("{prefix} runner"), others.join(",")).await;
    let client = runner(&transport, prefix, DEADLINE).await;
    ClusterFleet { _workers: workers, transport, client, target }
}

/// The Erlang names of the nodes that node `asking` sees running in its cluster.
async fn running_nodes(cluster: &Cluster, asking: usize) -> Vec<String> {
    let status = ctl_output(cluster.node(asking).ctl(), &["cluster_status", "--formatter", "json"]).await;
    airlock_testkit::cluster::running_nodes(&status)
}

/// Waits until node `asking` sees node `gone` out of the cluster.
async fn seen_gone(cluster: &Cluster, asking: usize, gone: usize) {
    let name = cluster.node(gone).name().to_owned();
    tokio::time::timeout(HANG_GUARD, async {
        while running_nodes(cluster, asking).await.contains(&name) {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("node {asking} still sees node {gone} running"));
}

#[tokio::test]
async fn a_frozen_broker_node_holds_no_call_to_its_deadline() {
    on_three_nodes(|mut cluster| async move {
        let prefix = unique_prefix();
        let fleet = cluster_fleet(&cluster, &prefix).await;
        let target = fleet.target;
        let (load, started) = fleet.loaded().await;
        cluster.node_mut(target).freeze().await.expect("the node freezes");
        eprintln!("node {target} froze with {} of {} answered", load.answered(), *CALLS);
        let outcomes = load.finish().await;
        eprintln!("{} calls in {:.1} s", *CALLS, secs(started));
        all_approved(&outcomes, &fleet.client);
        seen_gone(&cluster, (target + 1) % 3, target).await;
        cluster.node_mut(target).thaw().await.expect("the node thaws");
        fleet.client.close().await;
        fleet.transport.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_partitioned_broker_node_pauses_and_holds_no_call_to_its_deadline() {
    on_three_nodes(|cluster| async move {
        let prefix = unique_prefix();
        let fleet = cluster_fleet(&cluster, &prefix).await;
        let target = fleet.target;
        let (load, started) = fleet.loaded().await;
        let partition = match cluster.partition(target).await {
            Ok(partition) => partition,
            Err(reason) => return airlock_testkit::unreachable(reason),
        };
        eprintln!("node {target} cut off with {} of {} answered", load.answered(), *CALLS);
        // Both sides see it: the majority loses the node, and the node (pause_minority)
        // pauses, dropping its clients, who move to the majority.
        let cut = Instant::now();
        seen_gone(&cluster, (target + 1) % 3, target).await;
        eprintln!("the majority saw node {target} gone {:.1} s after the cut", secs(cut));
        let outcomes = load.finish().await;
        eprintln!("{} calls in {:.1} s", *CALLS, secs(started));
        all_approved(&outcomes, &fleet.client);
        let moved = node_of(&cluster, (target + 1) % 3, &format!("{prefix} w0")).await;
        assert!(moved.is_some_and(|node| node != target), "the worker moved to the majority: {moved:?}");
        partition.heal();
        fleet.client.close().await;
        fleet.transport.close().await;
    })
    .await;
}
