//! The fleet's control over runs and samples, through real workers, on the in-process transport
//! and on RabbitMQ: a breaker that sends a sample to a person after three rejections in a row,
//! an incident that ends every sample of its run (and the calls waiting for a person), the time
//! from the mark to the last worker applying it, and a switch that outlives every worker.

use std::time::{Duration, Instant};

use airlock_contract::v1::{self, control_event::Event};
use airlock_control::ControlLog;
use airlock_testkit::unique_prefix;
use airlock_tests::{InProcessWorker, TestKeys, airlock_bin, approval, broker, decision_name, guarded, runner};
use airlock_transport::{MemoryTransport, Message, Topology, Transport};
use prost::Message as _;
use serde_json::json;

const POLICY: &str = r#"
approvers:
  - name: auto
    tools: rm
    decision: reject
  - name: human
    tools: deploy
    pool: ops
  - name: auto
    tools: "*"
breaker:
  rejections_in_a_row: 3
incident:
  then: terminate
"#;

fn fleet(prefix: &str) -> Topology {
    Topology::new(prefix).with_human_pool("ops").with_reply_queue("runner")
}

/// An approval of `function` in `run` and `sample`.
fn call(run: &str, sample: &str, id: &str, function: &str) -> v1::Request {
    let mut request = approval(sample, id, json!({"function": function, "arguments": {}}), POLICY);
    request.key.as_mut().unwrap().run_id = run.into();
    request.origin.as_mut().unwrap().run_id = run.into();
    request
}

/// The next human task of pool `ops`, answered `decision` by a person, signed as the reviewer
/// service signs it.
async fn answer_next<T: Transport>(transport: &T, prefix: &str, decision: v1::DecisionKind) -> v1::HumanTask {
    let topology = fleet(prefix);
    let mut ops = transport.consume(&topology.human_queue("ops"), 1).await.unwrap();
    let delivery = tokio::time::timeout(Duration::from_secs(30), ops.next()).await.expect("a human task").unwrap();
    let human = v1::HumanTask::decode(delivery.message.body.as_ref()).unwrap();
    let answer = v1::StepAnswer { decision: decision.into(), decided_by: "alice".into(), ..Default::default() };
    let mut result = v1::StepResult { task: human.task.clone(), answer: Some(answer), ..Default::default() };
    airlock_records::signed::sign_human_answer(&TestKeys::get().reviewer_key(), &mut result);
    transport.publish(&topology.results_route(), Message::new(result.encode_to_vec())).await.unwrap();
    delivery.ack().await.unwrap();
    human
}

#[tokio::test]
async fn control_in_process() {
    breaker(MemoryTransport::new(), "breaker".into()).await;
    let transport = MemoryTransport::new();
    incident(vec![transport.clone(), transport], "incident".into()).await;
}

#[tokio::test]
async fn control_over_rabbitmq() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), breaker(transport, prefix.clone())).await;
    let prefix = unique_prefix();
    let mut transports = Vec::new();
    for _ in 0..3 {
        transports.push(broker(&prefix).await.expect("a broker"));
    }
    guarded(fleet(&prefix), incident(transports, prefix.clone())).await;
}

/// Three rejections in a row send the sample's next call to a person, whichever of two workers
/// decided them; another sample is untouched.
async fn breaker<T: Transport>(transport: T, prefix: String) {
    let workers = [
        InProcessWorker::start(transport.clone(), &prefix, "worker-a", 8),
        InProcessWorker::start(transport.clone(), &prefix, "worker-b", 8),
    ];
    transport.declare(&fleet(&prefix)).await.unwrap();
    let client = runner(transport.clone(), &prefix, Duration::from_secs(60)).await;
    for i in 0..3 {
        let decision = client.approve(call("run", "s1", &format!("rm-{i}"), "rm")).await.unwrap();
        assert_eq!(decision_name(&decision), "reject");
    }
    let before = client.approve(call("run", "s2", "ls-0", "ls")).await.unwrap();
    assert_eq!((decision_name(&before), before.approver.as_str()), ("approve", "auto"), "another sample");

    let asked = tokio::spawn({
        let request = call("run", "s1", "ls-1", "ls");
        async move { client.approve(request).await.unwrap() }
    });
    let human = answer_next(&transport, &prefix, v1::DecisionKind::Reject).await;
    assert_eq!(human.task.unwrap().request.unwrap().key.unwrap().tool_call_id, "ls-1");
    let decision = asked.await.unwrap();
    assert_eq!((decision_name(&decision), decision.approver.as_str()), ("reject", "human"), "a person decided");
    for worker in workers {
        worker.stop().await;
    }
}

/// One incident mark terminates every sample of its run at its next call, and the call that
/// waited for a person when it was marked; no call of the run is approved by an automated
/// step after every worker applied it. Each worker has its own connection: the time from the
/// mark to the last worker applying it is printed.
async fn incident<T: Transport>(transports: Vec<T>, prefix: String) {
    let first = transports[0].clone();
    let workers: Vec<InProcessWorker> = transports
        .iter()
        .enumerate()
        .map(|(i, transport)| InProcessWorker::start(transport.clone(), &prefix, &format!("worker-{i}"), 8))
        .collect();
    first.declare(&fleet(&prefix)).await.unwrap();
    let client = runner(first.clone(), &prefix, Duration::from_secs(60)).await;
    for sample in ["s1", "s2", "s3"] {
        let decision = client.approve(call("caught", sample, "ls-0", "ls")).await.unwrap();
        assert_eq!(decision_name(&decision), "approve");
    }
    // A call of the run waits for a person when the incident is marked.
    let waiting = tokio::spawn({
        let request = call("caught", "s4", "deploy-0", "deploy");
        let client = client.clone();
        async move { client.approve(request).await.unwrap() }
    });
    let topology = fleet(&prefix);
    while first.message_count(&topology.human_queue("ops")).await.unwrap() == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let reviewer = ControlLog::open(first.clone(), &Topology::new(&prefix), "alice", None).await.unwrap();
    let marked = Event::Incident(v1::Incident {
        key: call("caught", "s1", "ls-0", "ls").key,
        marked: "task-1".into(),
        note: "read ~/.ssh".into(),
    });
    let at = Instant::now();
    reviewer.append(marked).await.unwrap();
    let mut lags = Vec::new();
    for worker in &workers {
        let lag = loop {
            if let Some(lag) = applied(&worker.metrics.render()) {
                break lag;
            }
            assert!(at.elapsed() < Duration::from_secs(30), "a worker never applied the incident");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        lags.push(lag);
    }
    let last = lags.iter().copied().fold(0.0, f64::max);
    eprintln!("incident mark -> last of {} workers applying it: {:.1} ms", workers.len(), last * 1e3);

    for (i, sample) in ["s1", "s2", "s3", "s5"].iter().enumerate() {
        let decision = client.approve(call("caught", sample, &format!("ls-{}", i + 1), "ls")).await.unwrap();
        assert_eq!((decision_name(&decision), decision.approver.as_str()), ("terminate", "control"), "{sample}");
    }
    answer_next(&first, &prefix, v1::DecisionKind::Approve).await;
    let waited = waiting.await.unwrap();
    assert_eq!(decision_name(&waited), "terminate", "the person's approval came after the incident");
    let trail: Vec<&str> = waited.trail.iter().map(|entry| entry.approver.as_str()).collect();
    assert_eq!(trail, ["human", "control"]);
    let other = client.approve(call("innocent", "s1", "ls-0", "ls")).await.unwrap();
    assert_eq!(decision_name(&other), "approve", "another run");
    for worker in workers {
        worker.stop().await;
    }
}

/// The lag of the one control entry a worker applied, from its `airlock_control_lag_seconds`.
fn applied(metrics: &str) -> Option<f64> {
    let value = |name: &str| metrics.lines().find_map(|line| line.strip_prefix(name)?.trim().parse::<f64>().ok());
    (value("airlock_control_lag_seconds_count")? >= 1.0).then(|| value("airlock_control_lag_seconds_sum")).flatten()
}

/// `airlock run terminate` throws a switch that a worker started after it (every earlier
/// worker gone) applies before it decides anything, and `airlock run resume` lifts it.
#[tokio::test]
async fn a_switch_thrown_with_the_cli_outlives_every_worker() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    let body = {
        let prefix = prefix.clone();
        async move {
            // Each worker on a connection of its own: a worker that stops closes its transport.
            let worker = InProcessWorker::start(broker(&prefix).await.unwrap(), &prefix, "worker-1", 8);
            transport.declare(&fleet(&prefix)).await.unwrap();
            let client = runner(transport.clone(), &prefix, Duration::from_secs(60)).await;
            assert_eq!(decision_name(&client.approve(call("r1", "s1", "c1", "ls")).await.unwrap()), "approve");
            worker.stop().await;

            let run = |verb: &str| {
                let output = std::process::Command::new(airlock_bin())
                    .args(["run", verb, "r1", "--reason", "caught", "--by", "carol", "--prefix", &prefix])
                    .args(["--amqp", &airlock_testkit::amqp_url()])
                    .output()
                    .unwrap();
                assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
                serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
            };
            assert_eq!(run("terminate")["response"], "terminate");

            let worker = InProcessWorker::start(broker(&prefix).await.unwrap(), &prefix, "worker-2", 8);
            let decision = client.approve(call("r1", "s1", "c2", "ls")).await.unwrap();
            assert_eq!(decision_name(&decision), "terminate");
            let why = decision.trail.last().unwrap().explanation.clone().unwrap_or_default();
            assert_eq!(why, "run r1 was switched by carol: caught");

            run("resume");
            let resumed = loop {
                let decision = client.approve(call("r1", "s1", &format!("c{}", uuid_like()), "ls")).await.unwrap();
                if decision_name(&decision) == "approve" {
                    break decision;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            assert_eq!(resumed.approver, "auto");
            worker.stop().await;
        }
    };
    guarded(fleet(&prefix), body).await;
}

/// A call id not used before in this test process.
fn uuid_like() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(100);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
