//! RabbitMQ only, on a cluster of the test's own (three nodes from `airlock_testkit::cluster`,
//! never the shared broker): the fleet under load while nodes go away. The node a worker is
//! connected to stops; the node a runner is connected to (with its reply queue's leader)
//! stops; the node a reviewer service is connected to stops with human tasks pending, answered
//! before and after; all three nodes restart one after another. Every request must get
//! exactly one decision at the runner, none may be lost or fail closed, no human task may be
//! shown twice, and nothing may end in the dead-letter queue. And `airlock topology apply` tells when a quorum queue has fewer
//! replicas than asked for, or replicas down.
//!
//! The tests under load take a cluster each and run one at a time: three nodes and a fleet
//! under load already keep two cores busy. A cluster of three starts in about 20 seconds; the
//! file takes about four minutes.

use std::collections::HashSet;
use std::num::NonZeroU32;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use airlock_client::{Client, ClientConfig, Repeats};
use airlock_reviewer::Service;
use airlock_reviewer::client::ApiClient;
use airlock_testkit::cluster::Cluster;
use airlock_testkit::{LIST_CONNECTIONS, connections_named, ctl_output, queue_figure, unique_prefix, unreachable};
use airlock_tests::{
    HANG_GUARD, REVIEWER_TOKEN, TestKeys, airlock_bin, approval, decision_name, pending, reviewer_config,
};
use airlock_transport::{AmqpOptions, AmqpTransport, Topology, Transport};
use serde_json::json;
use tokio::process::{Child, Command};
use tokio::sync::Mutex;
use tokio::task::JoinSet;

const POLICY: &str = "approvers:\n  - name: auto\n    tools: \"*\"\n";

/// The fleet's quorum queues get a replica on every node of the test's cluster.
const GROUP_SIZE: u32 = 3;

/// How long one test may take, cluster start and stop included.
const TEST_GUARD: Duration = Duration::from_secs(300);

/// One cluster at a time (see the module documentation).
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// A cluster of `size` nodes, or `None` (the test skips) when this machine cannot start one
/// and `CI` is unset.
async fn cluster(size: usize) -> Option<Cluster> {
    let started = Instant::now();
    match Cluster::start(size).await {
        Ok(cluster) => {
            eprintln!("a cluster of {size} started in {:.1} s", started.elapsed().as_secs_f64());
            Some(cluster)
        }
        Err(reason) => {
            unreachable(reason);
            None
        }
    }
}

/// Runs `test` on a cluster of three nodes of its own, one such test at a time, within
/// [`TEST_GUARD`]; skips (outside CI) when this machine cannot start one.
async fn on_three_nodes<Test: Future<Output = ()>>(test: impl FnOnce(Cluster) -> Test) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(cluster) = cluster(3).await else { return };
    tokio::time::timeout(TEST_GUARD, test(cluster)).await.expect("the test finished in time");
}

fn group_size() -> Option<NonZeroU32> {
    NonZeroU32::new(GROUP_SIZE)
}

/// An `airlock worker` on every node of `urls`, killed when dropped.
fn worker(urls: &str, prefix: &str, id: &str) -> Child {
    Command::new(airlock_bin())
        .args(["worker", "--amqp", urls, "--prefix", prefix, "--id", id, "--concurrency", "32"])
        .args(["--quorum-group-size", &GROUP_SIZE.to_string()])
        .args(TestKeys::get().worker_args())
        // A node going away makes every unacknowledged delivery a warning.
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("airlock worker starts")
}

/// A runner on `urls` (one node, or the list), whose connection is named `<prefix> runner`.
async fn runner(urls: &str, prefix: &str) -> (AmqpTransport, Client<AmqpTransport>) {
    let options =
        AmqpOptions::new(urls).with_connection_name(format!("{prefix} runner")).with_quorum_group_size(group_size());
    let transport = AmqpTransport::connect_with(options).await.expect("the runner connects");
    let config = ClientConfig {
        prefix: prefix.into(),
        runner_id: "runner".into(),
        default_timeout: HANG_GUARD,
        replies: TestKeys::get().replies(),
        repeats: Repeats::default(),
    };
    let client = Client::connect(transport.clone(), config).await.expect("the runner's client starts");
    (transport, client)
}

/// Runs `rabbitmqctl` against node `asking` of `cluster`.
async fn ctl(cluster: &Cluster, asking: usize, args: &[&str]) -> String {
    ctl_output(cluster.node(asking).ctl(), args).await
}

/// The index of the node that the connection named `name` (or `name (<host>:<pid>)`, as the
/// command line names its roles) is on, asked of node `asking`.
async fn node_of(cluster: &Cluster, asking: usize, name: &str) -> Option<usize> {
    let listing = ctl(cluster, asking, &LIST_CONNECTIONS).await;
    // The connection's Erlang pid names its node: `<airlock-…@localhost.1733.412.0>`.
    let pid = connections_named(&listing, name).first()?.trim_start_matches('<');
    let node = &pid[..pid.find("@localhost")? + "@localhost".len()];
    cluster.index_of(node)
}

/// Waits until the connection named `name` is on a node other than `not`; returns that node.
async fn moved_off(cluster: &Cluster, asking: usize, name: &str, not: Option<usize>) -> usize {
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            match node_of(cluster, asking, name).await {
                Some(node) if Some(node) != not => return node,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{name} never connected (elsewhere than node {not:?})"))
}

/// Waits until `queue` has `consumers` consumers, asked of node `asking`.
async fn wait_for_consumers(cluster: &Cluster, asking: usize, queue: &str, consumers: usize) {
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            let listing = ctl(cluster, asking, &["list_queues", "-q", "--no-table-headers", "name", "consumers"]).await;
            if queue_figure(&listing, queue).is_some_and(|count| count >= consumers as u64) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{queue} never had {consumers} consumers"));
}

/// Requests sent without pause, `window` at a time, until stopped: what each was decided, and
/// how many were answered so far.
struct Load {
    answered: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    running: tokio::task::JoinHandle<Vec<(String, String)>>,
}

impl Load {
    /// Starts sending; `limit` ends the load by itself after that many requests.
    fn start(client: &Client<AmqpTransport>, window: usize, limit: usize) -> Load {
        let (answered, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (client, counter, stopping) = (client.clone(), answered.clone(), stop.clone());
        let running = tokio::spawn(async move {
            let mut calls = JoinSet::new();
            let mut decided = Vec::new();
            let mut sent = 0;
            loop {
                while calls.len() < window && sent < limit && !stopping.load(Ordering::Relaxed) {
                    let (client, counter) = (client.clone(), counter.clone());
                    let call = format!("call-{sent}");
                    calls.spawn(async move {
                        let request =
                            approval("load", &call, json!({"function": "ls", "arguments": {"call": call}}), POLICY);
                        let decision = client.approve(request).await.expect("a decision");
                        counter.fetch_add(1, Ordering::Relaxed);
                        assert_eq!(decision_name(&decision), "approve", "{decision:?}");
                        (decision.key.expect("a key").tool_call_id, decision.decided_by)
                    });
                    sent += 1;
                }
                match calls.join_next().await {
                    Some(result) => decided.push(result.expect("a call")),
                    None => return decided,
                }
            }
        });
        Load { answered, stop, running }
    }

    fn answered(&self) -> usize {
        self.answered.load(Ordering::Relaxed)
    }

    /// Waits until `more` requests more than now were answered.
    async fn progress(&self, more: usize) {
        let target = self.answered() + more;
        tokio::time::timeout(HANG_GUARD, async {
            while self.answered() < target {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the load stalled at {} answers", self.answered()));
    }

    /// Stops sending and waits for what is in flight; checks that every request was decided
    /// exactly once and returns how many there were.
    async fn finish(self, client: &Client<AmqpTransport>, cluster: &Cluster) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        let mut running = self.running;
        let decided = match tokio::time::timeout(HANG_GUARD, &mut running).await {
            Ok(decided) => decided.expect("the load ran"),
            Err(_) => {
                let up = (0..cluster.nodes().len()).find(|&i| cluster.node(i).is_running()).unwrap_or(0);
                let queues = ctl(
                    cluster,
                    up,
                    &[
                        "list_queues",
                        "name",
                        "messages_ready",
                        "messages_unacknowledged",
                        "consumers",
                        "leader",
                        "online",
                    ],
                )
                .await;
                let connections = ctl(cluster, up, &["list_connections", "name", "state", "channels"]).await;
                panic!(
                    "{} answered, the rest stuck; runner: {:?}\n{queues}\n{connections}",
                    self.answered.load(Ordering::Relaxed),
                    client.stats()
                );
            }
        };
        let keys: HashSet<&String> = decided.iter().map(|(key, _)| key).collect();
        assert_eq!(keys.len(), decided.len(), "one decision per call");
        let stats = client.stats();
        eprintln!("{} requests decided; runner: {stats:?}", decided.len());
        assert_eq!((stats.timed_out, stats.rejected_replies, stats.pending), (0, 0, 0), "{stats:?}");
        decided.len()
    }
}

/// Sends 3,000 requests and stops node `node` once 300 are answered; checks that every
/// request was decided exactly once.
async fn stop_under_load(cluster: &mut Cluster, client: &Client<AmqpTransport>, node: usize) {
    let load = Load::start(client, 3000, 3000);
    load.progress(300).await;
    let answered = load.answered();
    cluster.node_mut(node).stop().await.unwrap();
    eprintln!("node {node} stopped with {answered} of 3000 answered");
    assert!(answered < 2500, "the node stopped while requests were in flight ({answered} answered)");
    assert_eq!(load.finish(client, cluster).await, 3000, "every request was decided");
}

/// Checks that the fleet's work queues are drained and nothing was dead-lettered.
async fn nothing_left(transport: &AmqpTransport, prefix: &str) {
    let topology = Topology::new(prefix);
    for (queue, what) in [(topology.requests_queue(), "requests left over"), (topology.dead_queue(), "dead-lettered")] {
        let count = tokio::time::timeout(HANG_GUARD, transport.message_count(&queue)).await;
        let count = count.unwrap_or_else(|_| panic!("counting {queue} hung")).unwrap();
        assert_eq!(count, 0, "{what}");
    }
}

/// Closes the runner (which deletes its reply queue), bounded: a close that hangs is a
/// failure of its own, told with the state of the queues.
async fn close(client: Client<AmqpTransport>, transport: AmqpTransport, cluster: &Cluster) {
    if tokio::time::timeout(Duration::from_secs(60), client.close()).await.is_err() {
        let up = (0..cluster.nodes().len()).find(|&i| cluster.node(i).is_running()).unwrap_or(0);
        let queues = ctl(cluster, up, &["list_queues", "name", "type", "leader", "members", "online"]).await;
        panic!("the runner's client did not close in 60 s:\n{queues}");
    }
    tokio::time::timeout(HANG_GUARD, transport.close()).await.expect("the runner's transport closes");
}

/// `airlock topology apply` on `cluster`'s nodes `up`, with `args`: its status and stderr.
async fn apply(cluster: &Cluster, up: &[usize], prefix: &str, args: &[&str]) -> (bool, String) {
    let amqp: Vec<String> = up.iter().map(|&i| cluster.node(i).amqp_url()).collect();
    let management: Vec<String> = up.iter().map(|&i| cluster.node(i).management_url().expect("management")).collect();
    let output = Command::new(airlock_bin())
        .args(["topology", "apply", "--amqp", &amqp.join(","), "--prefix", prefix])
        .args(["--management-url", &management.join(",")])
        .args(args)
        .output()
        .await
        .expect("airlock topology apply runs");
    (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[tokio::test]
async fn the_node_a_worker_is_connected_to_stops_under_load_and_nothing_is_lost() {
    on_three_nodes(|mut cluster| async move {
        let prefix = unique_prefix();
        let urls = cluster.amqp_urls();
        let _worker = worker(&urls, &prefix, "w0");
        let requests = Topology::new(&prefix).requests_queue();
        wait_for_consumers(&cluster, 0, &requests, 1).await;
        let stopped = node_of(&cluster, 0, &format!("{prefix} worker")).await.expect("the worker's connection");
        // The runner on another node: what moves here is the worker alone.
        let home = (stopped + 1) % 3;
        let (transport, client) = runner(&cluster.node(home).amqp_url(), &prefix).await;

        stop_under_load(&mut cluster, &client, stopped).await;

        let now = moved_off(&cluster, home, &format!("{prefix} worker"), Some(stopped)).await;
        eprintln!("the worker moved from node {stopped} to node {now}");
        nothing_left(&transport, &prefix).await;

        // One replica of each quorum queue is down: apply says so, naming the node.
        let up: Vec<usize> = (0..3).filter(|&i| i != stopped).collect();
        let (ok, stderr) = apply(&cluster, &up, &prefix, &["--quorum-group-size", "3"]).await;
        assert!(ok, "{stderr}");
        let down = format!("{prefix}.requests has members down ({}): 2 of 3 up", cluster.node(stopped).name());
        assert!(stderr.contains(&down), "{stderr}");
        close(client, transport, &cluster).await;
    })
    .await;
}

#[tokio::test]
async fn a_rolling_restart_of_every_node_under_load_loses_nothing() {
    on_three_nodes(|mut cluster| async move {
        let prefix = unique_prefix();
        let urls = cluster.amqp_urls();
        let _workers = [worker(&urls, &prefix, "w0"), worker(&urls, &prefix, "w1")];
        let requests = Topology::new(&prefix).requests_queue();
        wait_for_consumers(&cluster, 0, &requests, 2).await;
        // Every role on every node: each restart moves whoever was on that node, the runner
        // (and its reply queue's leader) included.
        let (transport, client) = runner(&urls, &prefix).await;
        let runner_name = format!("{prefix} runner");
        let first = node_of(&cluster, 0, &runner_name).await.expect("the runner's connection");

        let load = Load::start(&client, 500, usize::MAX);
        load.progress(300).await;
        for node in 0..3 {
            let started = Instant::now();
            cluster.node_mut(node).stop().await.unwrap();
            // The fleet decides with the node down, not only once it is back.
            load.progress(100).await;
            cluster.node_mut(node).start_again().await.unwrap();
            eprintln!(
                "node {node} restarted in {:.1} s, {} answered",
                started.elapsed().as_secs_f64(),
                load.answered()
            );
            load.progress(100).await;
        }
        let decided = load.finish(&client, &cluster).await;
        assert!(decided >= 1500, "{decided} decided");
        let reconnects = *transport.reconnects().borrow();
        assert!(reconnects >= 1, "the runner lost its node {first} and came back: {reconnects} reconnects");
        nothing_left(&transport, &prefix).await;
        // After a rolling restart RabbitMQ 3.10 sometimes leaves the reply consumer's cancel
        // and the reply queue's delete unanswered for minutes: the close still ends, after
        // `CLOSE_WAIT` for each.
        close(client, transport, &cluster).await;
    })
    .await;
}

#[tokio::test]
async fn the_node_a_runner_is_connected_to_stops_under_load_and_nothing_is_lost() {
    on_three_nodes(|mut cluster| async move {
        let prefix = unique_prefix();
        let urls = cluster.amqp_urls();
        // The runner first, so its reply queue's leader is on its node; the worker elsewhere.
        let (transport, client) = runner(&urls, &prefix).await;
        let runner_name = format!("{prefix} runner");
        let stopped = node_of(&cluster, 0, &runner_name).await.expect("the runner's connection");
        let others: Vec<String> = (0..3).filter(|&i| i != stopped).map(|i| cluster.node(i).amqp_url()).collect();
        let _worker = worker(&others.join(","), &prefix, "w0");
        wait_for_consumers(&cluster, (stopped + 1) % 3, &Topology::new(&prefix).requests_queue(), 1).await;

        stop_under_load(&mut cluster, &client, stopped).await;
        let now = moved_off(&cluster, (stopped + 1) % 3, &runner_name, Some(stopped)).await;
        eprintln!("the runner moved from node {stopped} to node {now}");
        assert!(*transport.reconnects().borrow() >= 1, "the runner reconnected");
        nothing_left(&transport, &prefix).await;
        close(client, transport, &cluster).await;
    })
    .await;
}

/// A person's pool: every `bash` call goes to a person in `ops`.
const HUMAN_POLICY: &str = "approvers:\n  - name: human\n    tools: \"bash\"\n    pool: ops\n";

#[tokio::test]
async fn the_node_a_reviewer_service_is_connected_to_stops_with_tasks_pending_and_each_answer_arrives_once() {
    on_three_nodes(|mut cluster| async move {
        let prefix = unique_prefix();
        let urls = cluster.amqp_urls();
        let _worker = worker(&urls, &prefix, "w0");
        wait_for_consumers(&cluster, 0, &Topology::new(&prefix).requests_queue(), 1).await;
        let options = AmqpOptions::new(&urls)
            .with_connection_name(format!("{prefix} reviewer"))
            .with_quorum_group_size(group_size());
        let reviewer_transport = AmqpTransport::connect_with(options).await.expect("the reviewer connects");
        let dir = std::env::temp_dir().join(format!("airlock-cluster-{prefix}"));
        std::fs::create_dir_all(&dir).unwrap();
        let store = format!("sqlite:{}", dir.join("tasks.db").display());
        let config = reviewer_config(&prefix, &store, "reviewer");
        let service = Service::start(reviewer_transport.clone(), config).await.expect("the reviewer starts");
        let api = ApiClient::new(&format!("http://{}", service.local_addr()), REVIEWER_TOKEN);
        let stopped = node_of(&cluster, 0, &format!("{prefix} reviewer")).await.expect("the reviewer's connection");
        // The runner on another node: what moves here is the reviewer (and whatever shared its node).
        let (transport, client) = runner(&cluster.node((stopped + 1) % 3).amqp_url(), &prefix).await;

        const CALLS: usize = 30;
        let mut asked = JoinSet::new();
        for i in 0..CALLS {
            let client = client.clone();
            let call = json!({"function": "bash", "arguments": {"cmd": format!("rm -r build-{i}")}});
            asked.spawn(async move { client.approve(approval("human", &format!("c{i}"), call, HUMAN_POLICY)).await });
        }
        let tasks = tokio::time::timeout(HANG_GUARD, pending(&api, CALLS)).await.expect("every call became a task");
        let ids: Vec<String> = tasks.iter().map(|task| task["id"].as_str().expect("an id").to_owned()).collect();

        // A third answered just before the node stops (their answers may be in flight), the
        // rest while it is down and the service is moving to another node.
        for id in &ids[..CALLS / 3] {
            api.decide(id, "approve", None).await.expect("an answer before the stop");
        }
        cluster.node_mut(stopped).stop().await.unwrap();
        for id in &ids[CALLS / 3..] {
            api.decide(id, "reject", Some("not while the node is down")).await.expect("an answer after the stop");
        }

        let mut decided = Vec::new();
        while let Some(decision) = asked.join_next().await {
            let decision = decision.unwrap().expect("a decision");
            assert_eq!(decision.decided_by, "alice", "{decision:?}");
            let name = decision_name(&decision);
            decided.push((decision.key.unwrap().tool_call_id, name));
        }
        decided.sort();
        let approved = decided.iter().filter(|(_, name)| *name == "approve").count();
        assert_eq!((decided.len(), approved), (CALLS, CALLS / 3), "{decided:?}");
        let calls: HashSet<&String> = decided.iter().map(|(call, _)| call).collect();
        assert_eq!(calls.len(), CALLS, "one decision per call");
        let now = moved_off(&cluster, (stopped + 1) % 3, &format!("{prefix} reviewer"), Some(stopped)).await;
        eprintln!("the reviewer moved from node {stopped} to node {now}; runner: {:?}", client.stats());
        assert_eq!(client.stats().timed_out, 0);

        // No task twice: none pending, each call once in the history.
        assert!(api.tasks().await.unwrap().is_empty(), "no task is shown again");
        let history = api.get("/api/history").await.unwrap().json();
        assert_eq!(history["tasks"].as_array().unwrap().len(), CALLS, "each call is one task");
        while service.desk().store().unsent().await.unwrap() > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        service.stop().await;
        nothing_left(&transport, &prefix).await;
        close(client, transport, &cluster).await;
        reviewer_transport.close().await;
        let _ = std::fs::remove_dir_all(dir);
    })
    .await;
}

#[tokio::test]
async fn topology_apply_warns_of_fewer_replicas_than_the_group_size() {
    // One node and no load: it runs beside the others.
    let Some(single) = cluster(1).await else { return };
    let prefix = unique_prefix();
    let warning = format!(
        "quorum queue {prefix}.requests has 1 member ({}) where --quorum-group-size asks for 3",
        single.node(0).name()
    );

    let (ok, stderr) = apply(&single, &[0], &prefix, &["--quorum-group-size", "3"]).await;
    assert!(ok, "a shortfall is a warning: {stderr}");
    assert!(stderr.contains(&warning), "{stderr}");
    assert!(stderr.contains(&format!("{prefix}.dead has 1 member")), "every quorum queue is checked: {stderr}");

    // A role that disagrees about the group size is refused by the broker.
    let (ok, stderr) = apply(&single, &[0], &prefix, &["--quorum-group-size", "1"]).await;
    assert!(!ok, "a different group size is refused: {stderr}");
    assert!(stderr.contains("x-quorum-initial-group-size"), "the broker says which argument differs: {stderr}");

    // No management API where it is looked for: said, and not a failure.
    let output = Command::new(airlock_bin())
        .args(["topology", "apply", "--amqp", &single.node(0).amqp_url(), "--prefix", &prefix])
        .args(["--quorum-group-size", "3", "--management-url", "http://127.0.0.1:9/"])
        .output()
        .await
        .expect("airlock topology apply runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("the replicas of the quorum queues were not checked"), "{stderr}");

    let dir = single.node(0).dir().to_owned();
    drop(single);
    assert!(!dir.exists(), "the cluster's directories are removed");
}
