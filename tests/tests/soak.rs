//! RabbitMQ only: the chaos soak. A mixed load (calls a built-in step decides, calls a model
//! monitor scores on a local fake model, calls a person answers through the reviewer's API by
//! a script) runs for a set time while links of the roles are frozen, closed, reset and
//! delayed and the auditor is killed and started again, at random (the seed is printed); then
//! the checker (`airlock_tests::soak`) judges every call.
//!
//! `AIRLOCK_SOAK_SECS` sets the time under faults (default 40 s, what CI runs);
//! `AIRLOCK_SOAK_SEED` replays a run's faults.

#[path = "monitors/fake_model.rs"]
#[allow(dead_code, reason = "the monitor suite's fake model; this file uses part of it")]
mod fake_model;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use airlock_monitor::provider::ProviderKind;
use airlock_reviewer::Service as Reviewer;
use airlock_reviewer::client::ApiClient;
use airlock_reviewer::task::State;
use airlock_testkit::link::{Link, NewConnections};
use airlock_testkit::{amqp_url, unique_prefix};
use airlock_tests::linked::{audit_records, auditor, direct, runner, through, with_heartbeat};
use airlock_tests::soak::{Answer, Asked, HumanTask, Leftover, Run, check};
use airlock_tests::{
    HANG_GUARD, InProcessWorker, REVIEWER_TOKEN, approval, broker, cleanup, decision_name, reviewer_config,
    wait_for_consumers,
};
use airlock_transport::message::HEADER_REASON;
use airlock_transport::{AmqpTransport, QueueKind, Topology, Transport};
use serde_json::json;
use tokio::task::JoinSet;

/// `ls` is approved by the built-in step; `bash` waits for a person in `ops`; `cat` is scored
/// by the monitor (the fake model gives what the call's `MARK:score-N` says).
const POLICY: &str = "approvers:\n  - name: auto\n    tools: \"ls\"\n  - name: human\n    tools: \"bash\"\n    \
                      pool: ops\n  - name: monitor\n    tools: \"cat\"\n    approve_below: 3\n    \
                      escalate_below: 8\n    above: reject\n";
const DEADLINE: Duration = Duration::from_secs(30);
const WINDOW: usize = 32;
/// One call in this many goes to a person, and one in this many (others) to the monitor.
const HUMAN_EVERY: usize = 10;
/// How long a fault lasts before it is undone (a freeze thawed, a delay lifted).
const FAULT_FOR: Duration = Duration::from_secs(5);

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A small generator for the faults' choices (xorshift): the run is replayed from its seed.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[tokio::test]
async fn a_chaos_soak_loses_doubles_and_delays_nothing() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&format!("{prefix} soak")).await else { return };
    let topology = Topology::new(&prefix)
        .with_human_pool("ops")
        .with_step("monitor")
        .with_reply_queue("runner")
        .with_decisions_queue("audit");
    let seconds: u64 = std::env::var("AIRLOCK_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(40);
    // The hang guard of a soak: its time under faults and the guard's own for the rest.
    let guard = Duration::from_secs(seconds) + 2 * HANG_GUARD;
    let body = tokio::spawn(soak(prefix, transport, topology.clone(), seconds));
    let outcome = tokio::time::timeout(guard, body).await;
    cleanup(&topology).await;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(error)) => std::panic::resume_unwind(error.into_panic()),
        Err(_) => panic!("the soak hung for {guard:?}"),
    }
}

async fn soak(prefix: String, transport: AmqpTransport, topology: Topology, seconds: u64) {
    let seed = std::env::var("AIRLOCK_SOAK_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(unix_ms) | 1;
    eprintln!("the soak: {seconds} s under faults, AIRLOCK_SOAK_SEED={seed}");
    transport.declare(&topology).await.unwrap();
    let dir = std::env::temp_dir().join(format!("airlock-soak-{prefix}"));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("decisions.jsonl");
    let mut audit_process = auditor(&with_heartbeat(&amqp_url()), &prefix, &log, &[]);

    let mut links = Vec::new();
    let mut workers = Vec::new();
    for i in 0..2 {
        let link = Link::to_broker(&amqp_url()).await.expect("a link");
        let transport = through(&link, &format!("{prefix} worker")).await;
        workers.push(InProcessWorker::start(transport, &prefix, &format!("w{i}"), 32));
        links.push(link);
    }
    let reviewer_link = Link::to_broker(&amqp_url()).await.expect("a link");
    let store = format!("sqlite:{}", dir.join("tasks.db").display());
    let reviewer = Reviewer::start(
        through(&reviewer_link, &format!("{prefix} reviewer")).await,
        reviewer_config(&prefix, &store, "reviewer"),
    )
    .await
    .expect("the reviewer starts");
    links.push(reviewer_link);
    let model = fake_model::FakeModel::start().await;
    let monitor_link = Link::to_broker(&amqp_url()).await.expect("a link");
    let (stop_monitor, monitor_stopped) = tokio::sync::oneshot::channel::<()>();
    let monitor = tokio::spawn(airlock_monitor::run(
        through(&monitor_link, &format!("{prefix} monitor")).await,
        fake_model::monitor_config(&prefix, "monitor", ProviderKind::OpenAi, model.openai_base()),
        async {
            let _ = monitor_stopped.await;
        },
    ));
    links.push(monitor_link);
    wait_for_consumers(&topology.requests_queue(), 2).await;
    wait_for_consumers(&topology.human_queue("ops"), 1).await;
    wait_for_consumers(&topology.step_queue("monitor"), 1).await;

    // The person: approves whatever is pending, as fast as the API lists it.
    let person = {
        let api = ApiClient::new(&format!("http://{}", reviewer.local_addr()), REVIEWER_TOKEN);
        tokio::spawn(async move {
            loop {
                for task in api.tasks().await.unwrap_or_default() {
                    let _ = api.decide(&task.id, "approve", None).await;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };

    let runner_transport = direct(&format!("{prefix} runner")).await;
    let client = runner(&runner_transport, &prefix, DEADLINE).await;

    let (start, start_unix) = (Instant::now(), unix_ms());
    let asked: Arc<Mutex<Vec<Asked>>> = Arc::default();
    let until = start + Duration::from_secs(seconds);
    let load = {
        let (client, asked) = (client.clone(), asked.clone());
        tokio::spawn(async move {
            let mut calls = JoinSet::new();
            let mut sent = 0;
            while Instant::now() < until || !calls.is_empty() {
                while Instant::now() < until && calls.len() < WINDOW {
                    let (client, asked) = (client.clone(), asked.clone());
                    let id = format!("c{sent}");
                    let call = if sent % HUMAN_EVERY == 0 {
                        json!({"function": "bash", "arguments": {"cmd": format!("rm -r {id}")}})
                    } else if sent % HUMAN_EVERY == HUMAN_EVERY / 2 {
                        json!({"function": "cat", "arguments": {"path": format!("{id} MARK:score-1")}})
                    } else {
                        json!({"function": "ls", "arguments": {"call": id}})
                    };
                    sent += 1;
                    calls.spawn(async move {
                        let sent_ms = start.elapsed().as_millis() as u64;
                        let decision = client.approve(approval("soak", &id, call, POLICY)).await;
                        let at_ms = start.elapsed().as_millis() as u64;
                        let answers = decision
                            .map(|d| Answer {
                                at_ms,
                                decision: decision_name(&d).to_owned(),
                                failed_closed: d.approver == "timeout",
                                decision_id: d.decision_id.clone(),
                                decided_ms: (d.decided_at_unix_ms > 0)
                                    .then(|| (d.decided_at_unix_ms as u64).saturating_sub(start_unix)),
                            })
                            .into_iter()
                            .collect();
                        asked.lock().unwrap().push(Asked { call: id, deadline: DEADLINE, sent_ms, answers });
                    });
                }
                calls.join_next().await;
            }
        })
    };

    // The faults, one at a time, each undone after a while.
    let mut dice = Dice(seed);
    let mut faults: HashMap<&str, usize> = HashMap::new();
    while Instant::now() < until {
        let link = &links[dice.below(links.len())];
        let fault = match dice.below(6) {
            0 => {
                link.freeze(NewConnections::Pass);
                tokio::time::sleep(FAULT_FOR).await;
                link.thaw();
                "freeze"
            }
            1 => {
                link.freeze(NewConnections::Freeze);
                tokio::time::sleep(FAULT_FOR).await;
                link.thaw();
                "dead path"
            }
            2 => {
                link.reset();
                "reset"
            }
            3 => {
                link.drop_connections();
                "closed"
            }
            4 => {
                link.delay(Duration::from_millis(200));
                tokio::time::sleep(FAULT_FOR).await;
                link.delay(Duration::ZERO);
                "delay"
            }
            _ => {
                let _ = audit_process.kill().await;
                audit_process = auditor(&with_heartbeat(&amqp_url()), &prefix, &log, &[]);
                "auditor killed"
            }
        };
        *faults.entry(fault).or_default() += 1;
        tokio::time::sleep(FAULT_FOR).await;
    }
    tokio::time::timeout(HANG_GUARD, load).await.expect("the load ended").unwrap();
    eprintln!("faults: {faults:?}; runner: {:?}", client.stats());
    person.abort();

    // The fleet settles: the auditor catches up with the decisions made.
    let asked = std::mem::take(&mut *asked.lock().unwrap());
    let monitored = |a: &&Asked| a.call[1..].parse::<usize>().is_ok_and(|n| n % HUMAN_EVERY == HUMAN_EVERY / 2);
    let (scored, approved) = asked.iter().filter(monitored).fold((0, 0), |(all, approved), a| {
        (all + 1, approved + usize::from(a.answers.first().is_some_and(|answer| answer.decision == "approve")))
    });
    eprintln!("the monitor scored {scored} calls; {approved} were approved");
    let decided = asked.iter().filter(|a| a.answers.first().is_some_and(|a| !a.failed_closed)).count();
    let settled = Instant::now() + HANG_GUARD / 2;
    while audit_records(&log).len() < decided && Instant::now() < settled {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Every task the store holds, not a page of the API's history.
    let stored = reviewer.desk().store().history(None, u32::MAX).await.expect("the reviewer's history");
    let human = (stored.iter())
        .map(|task| HumanTask {
            call: task.request().and_then(|r| r.key.as_ref()).map(|k| k.tool_call_id.clone()).unwrap_or_default(),
            decided: matches!(&task.state, State::Decided(verdict) if verdict.decided_by == "alice"),
        })
        .collect();
    let mut leftovers = Vec::new();
    // A log keeps its entries: nothing in it is left over.
    let queues = topology.queues().iter().filter(|queue| !matches!(queue.kind, QueueKind::Log { .. }));
    for queue in queues.map(|queue| queue.name.clone()) {
        let count = transport.message_count(&queue).await.unwrap_or(0);
        if queue == topology.dead_queue() {
            let mut dead = transport.consume(&queue, 0).await.unwrap();
            for _ in 0..count {
                let Ok(Some(letter)) = tokio::time::timeout(Duration::from_secs(5), dead.next()).await else {
                    break;
                };
                let reason = letter.message.headers.get(HEADER_REASON).cloned();
                leftovers.push(Leftover { queue: queue.clone(), reason });
                letter.ack().await.unwrap();
            }
        } else {
            leftovers.extend((0..count).map(|_| Leftover { queue: queue.clone(), reason: None }));
        }
    }
    let run = Run { asked, audit: audit_records(&log), human, leftovers, dead_queue: topology.dead_queue() };
    let report = check(&run);
    eprintln!("the soak's checker: {report}");
    assert!(report.is_clean(), "{report}");
    assert!(report.decided > 0 && faults.values().sum::<usize>() > 0, "the soak ran under faults: {report}");

    reviewer.stop().await;
    let _ = stop_monitor.send(());
    monitor.await.unwrap().expect("the monitor stops cleanly");
    client.close().await;
    drop(workers);
    let _ = audit_process.kill().await;
    let _ = std::fs::remove_dir_all(dir);
}
