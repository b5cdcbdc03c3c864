//! An audit budget paced by two monitor processes that serve one step, on the in-process
//! transport and on RabbitMQ, against a fake model API: with scores spread evenly over 0–10,
//! `audit_budget: 0.05` passes on 5% ± 1% of 2,000 calls, no tenth of the run more than 7.5%,
//! and those are the highest-scored calls. Each process hears of the other's scores through the
//! step's log of scores, as it would on two machines.

use std::time::Duration;

use airlock_contract::v1;
use airlock_monitor::provider::ProviderKind;
use airlock_testkit::unique_prefix;
use airlock_tests::fake_model::{FakeModel, monitor_config};
use airlock_tests::{InProcessWorker, TestKeys, approval, broker, guarded, runner};
use airlock_transport::{MemoryTransport, Message, Topology, Transport};
use prost::Message as _;
use serde_json::json;

const POLICY: &str = "approvers:\n  - name: monitor\n    tools: bash\n    audit_budget: 0.05\n  - name: human\n    tools: bash\n    pool: ops\n";

/// Calls in the run.
const CALLS: usize = 2_000;
/// Calls asked at once.
const WAVE: usize = 20;

fn fleet(prefix: &str) -> Topology {
    Topology::new(prefix).with_step("monitor").with_scores_log("monitor").with_human_pool("ops")
}

#[tokio::test]
async fn a_budget_paced_by_two_monitors_in_process() {
    run(vec![MemoryTransport::new(); 4], "budget".into()).await;
}

#[tokio::test]
async fn a_budget_paced_by_two_monitors_over_rabbitmq() {
    let prefix = unique_prefix();
    let Some(first) = broker(&prefix).await else { return };
    let mut transports = vec![first];
    for _ in 0..3 {
        transports.push(broker(&prefix).await.expect("a broker"));
    }
    guarded(fleet(&prefix), run(transports, prefix.clone())).await;
}

/// Two monitors, a worker and a person, each on a transport of its own (the last for the
/// runner), then the run.
async fn run<T: Transport>(transports: Vec<T>, prefix: String) {
    let [monitor_a, monitor_b, people, runner_transport] =
        <[T; 4]>::try_from(transports).ok().expect("four transports");
    let model = FakeModel::start().await;
    runner_transport.declare(&fleet(&prefix)).await.unwrap();
    let worker = InProcessWorker::start(runner_transport.clone(), &prefix, "worker", 64);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut monitors = Vec::new();
    for (id, transport) in [("monitor-a", monitor_a), ("monitor-b", monitor_b)] {
        let mut config = monitor_config(&prefix, "monitor", ProviderKind::OpenAi, model.openai_base());
        config.monitor_id = id.into();
        let mut stopped = stopped.clone();
        monitors.push(tokio::spawn(airlock_monitor::run(transport, config, async move {
            let _ = stopped.wait_for(|s| *s).await;
        })));
    }
    approve_every_task(people, &prefix);
    let client = runner(runner_transport, &prefix, Duration::from_secs(120)).await;

    let scores: Vec<f64> = Scores(0x5eed).take(CALLS).collect();
    let mut decided = Vec::with_capacity(CALLS);
    for (index, wave) in scores.chunks(WAVE).enumerate() {
        let mut asked = tokio::task::JoinSet::new();
        for (i, score) in wave.iter().enumerate() {
            let call = json!({"function": "bash", "arguments": {"cmd": format!("MARK:score-{score:.2}")}});
            let request = approval("s", &format!("c{}", index * WAVE + i), call, POLICY);
            let client = client.clone();
            asked.spawn(async move { (i, client.approve(request).await.unwrap()) });
        }
        let mut wave: Vec<(usize, v1::Decision)> = asked.join_all().await;
        wave.sort_by_key(|(i, _)| *i);
        decided.extend(wave.into_iter().map(|(_, decision)| decision));
    }
    let passed: Vec<bool> =
        decided.iter().map(|decision| trail_of(decision) == ["monitor:escalate", "human:approve"]).collect();
    let deciders: std::collections::BTreeSet<&str> =
        decided.iter().map(|decision| decision.trail[0].decided_by.as_str()).collect();
    let _ = stop.send(true);
    for monitor in monitors {
        monitor.await.unwrap().expect("a monitor stops cleanly");
    }
    worker.stop().await;

    assert_eq!(deciders.len(), 2, "both monitors decided calls: {deciders:?}");
    let share = passed.iter().filter(|p| **p).count() as f64 / CALLS as f64;
    let tenths: Vec<f64> = passed
        .chunks(CALLS / 10)
        .map(|tenth| tenth.iter().filter(|p| **p).count() as f64 / tenth.len() as f64)
        .collect();
    let mut sorted = scores.clone();
    sorted.sort_by(f64::total_cmp);
    let quantile = |q: f64| sorted[(q * CALLS as f64) as usize];
    let passed_scores: Vec<f64> = scores.iter().zip(&passed).filter(|(_, p)| **p).map(|(s, _)| *s).collect();
    let top_tenth = passed_scores.iter().filter(|s| **s >= quantile(0.9)).count();
    eprintln!(
        "audit budget 5% over {CALLS} calls and two monitors: {:.2}% passed on; tenths {:?}; \
         {top_tenth} of {} passed in the top tenth of the scores, the lowest passed {:.2} (0.9 quantile {:.2})",
        share * 100.0,
        tenths.iter().map(|t| format!("{:.1}%", t * 100.0)).collect::<Vec<_>>(),
        passed_scores.len(),
        passed_scores.iter().copied().fold(f64::INFINITY, f64::min),
        quantile(0.9),
    );
    assert!((0.04..=0.06).contains(&share), "{:.2}% passed on", share * 100.0);
    assert!(tenths.iter().all(|tenth| *tenth <= 0.075), "a tenth of the run passed on more than 7.5%: {tenths:?}");
    assert!(passed_scores.iter().all(|score| *score >= quantile(0.85)), "a low score passed: {passed_scores:?}");
    assert!(top_tenth as f64 >= 0.95 * passed_scores.len() as f64, "{passed_scores:?}");
}

fn trail_of(decision: &v1::Decision) -> Vec<String> {
    let name = |d: i32| airlock_records::convert::decision_from_wire(d).map_or("?", |d| d.as_str());
    decision.trail.iter().map(|entry| format!("{}:{}", entry.approver, name(entry.decision))).collect()
}

/// A person who approves every task of the pool `ops`, signed as the reviewer service signs.
fn approve_every_task<T: Transport>(transport: T, prefix: &str) {
    let topology = Topology::new(prefix);
    tokio::spawn(async move {
        let mut ops = transport.consume(&topology.human_queue("ops"), 16).await.unwrap();
        while let Some(delivery) = ops.next().await {
            let human = v1::HumanTask::decode(delivery.message.body.as_ref()).unwrap();
            let answer =
                v1::StepAnswer { decision: human.choices[0], decided_by: "alice".into(), ..Default::default() };
            let mut result = v1::StepResult { task: human.task, answer: Some(answer), ..Default::default() };
            airlock_records::signed::sign_human_answer(&TestKeys::get().reviewer_key(), &mut result);
            transport.publish(&topology.results_route(), Message::new(result.encode_to_vec())).await.unwrap();
            delivery.ack().await.unwrap();
        }
    });
}

/// Scores spread evenly over 0–10 (splitmix64), the same every run.
struct Scores(u64);

impl Iterator for Scores {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // Hundredths, as the call shows the score to the model.
        Some(((z >> 11) as f64 / (1u64 << 53) as f64 * 1000.0).floor() / 100.0)
    }
}
