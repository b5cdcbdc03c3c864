//! Model calls across the fleet, over RabbitMQ, against the fake model API that counts its
//! requests: identical contexts reach the model once (a task delivered again, the same
//! context on two monitor processes), `k` draws of one context reach it `k` times, two
//! processes under one `--rate-limit` stay under it together, and a 429's `Retry-After`
//! pauses both. A repeated workload on two monitor processes prints its hit rate (see
//! BENCHMARKS.md).

use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_contract::v1;
use airlock_monitor::provider::{AttemptError, Provider, ProviderKind};
use airlock_monitor::sampling::{self, Cache, Draw, Limiter};
use airlock_telemetry::metrics::{Metrics, OutcomeLabels};
use airlock_testkit::unique_prefix;
use airlock_tests::fake_model::{FakeModel, monitor_config};
use airlock_tests::{HANG_GUARD, approval, broker, guarded, wait_for_consumers};
use airlock_transport::{AmqpTransport, Consumer, Destination, Message, Topology, Transport};
use prost::Message as _;
use serde_json::{Value, json};
use tokio::task::JoinSet;

const POLICY: &str = r#"
approvers:
  - name: monitor
    tools: "bash"
    approve_below: 3
    escalate_below: 8
"#;

/// One monitor process's provider: its own connection, and the step's cache and the limiter
/// `limit` (requests per minute) joined as a process of its own.
struct Process {
    provider: Provider,
    cache: Arc<Cache>,
    limiter: Option<Arc<Limiter>>,
    metrics: Arc<Metrics>,
}

async fn process(prefix: &str, model: &FakeModel, name: &str, limit: Option<u32>) -> Process {
    let transport = broker(&format!("{prefix} {name}")).await.expect("the broker answered a moment ago");
    let topology =
        Topology::empty(prefix).with_samples_log("monitor", Duration::from_secs(600)).with_limiter_log("account");
    transport.declare(&topology).await.unwrap();
    let config = monitor_config(prefix, "monitor", ProviderKind::OpenAi, model.openai_base());
    let metrics = Arc::new(Metrics::new());
    let cache = Cache::new(100, metrics.clone());
    let cache = sampling::cache::shared(transport.clone(), topology.samples_log("monitor"), name, cache).await.unwrap();
    let mut provider = Provider::new(config.provider).unwrap().with_cache(cache.clone());
    let mut limiter = None;
    if let Some(per_minute) = limit {
        let joined = Limiter::new(per_minute, name, metrics.clone());
        let joined = sampling::limiter::shared(transport, topology.limiter_log("account"), name, joined).await.unwrap();
        provider = provider.with_limiter(joined.clone());
        limiter = Some(joined);
    }
    Process { provider, cache, limiter, metrics }
}

/// A chat completion asking about `marker`, at a temperature that makes draws differ.
fn body(marker: &str) -> Value {
    json!({
        "model": "fake-openai",
        "temperature": 1.0,
        "messages": [
            {"role": "system", "content": "Rate the call."},
            {"role": "user", "content": format!("The tool call:\n<untrusted>\necho MARK:{marker}\n</untrusted>")},
        ],
    })
}

fn bytes(answer: &[u8]) -> Result<Vec<u8>, AttemptError> {
    Ok(answer.to_vec())
}

impl Process {
    async fn send(&self, marker: &str, draw: Draw) -> Result<Vec<u8>, AttemptError> {
        self.provider.send(&body(marker), draw, Duration::from_secs(30), bytes).await
    }

    fn counted(&self, outcome: &str) -> u64 {
        self.metrics.sample_cache.get_or_create(&OutcomeLabels { outcome: outcome.into() }).get()
    }
}

/// Waits (under the hang guard) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    let waited = async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(HANG_GUARD, waited).await.unwrap_or_else(|_| panic!("never: {what}"));
}

#[tokio::test]
async fn identical_contexts_are_sampled_once_across_processes() {
    let prefix = unique_prefix();
    let Some(probe) = broker(&prefix).await else { return };
    probe.close().await;
    let topology = Topology::empty(&prefix).with_samples_log("monitor", Duration::from_secs(600));
    guarded(topology, async move {
        let model = FakeModel::start().await;
        let a = process(&prefix, &model, "a", None).await;
        let b = process(&prefix, &model, "b", None).await;

        // Asked twice at once on one process: one request.
        let (first, again) = tokio::join!(a.send("score-2", Draw::default()), a.send("score-2", Draw::default()));
        assert_eq!(first.unwrap(), again.unwrap());
        assert_eq!(model.calls("score-2"), 1);
        // The other process takes the answer from the step's log.
        until("b holds a's answer", || b.cache.len() == 1).await;
        b.send("score-2", Draw::default()).await.unwrap();
        assert_eq!(model.calls("score-2"), 1, "the same context on two processes reaches the model once");
        assert_eq!((b.counted("hit"), b.counted("miss")), (1, 0));
        // Asked at once on both processes, as hedged requests are: one request.
        let (first, again) = tokio::join!(a.send("score-3", Draw::default()), b.send("score-3", Draw::default()));
        assert_eq!(first.unwrap(), again.unwrap());
        assert_eq!(model.calls("score-3"), 1);

        // k draws of one context are k calls; asked again on the other process, none.
        let k = 4;
        for index in 0..k {
            a.send("score-5", Draw { epoch: Some(1), index }).await.unwrap();
        }
        assert_eq!(model.calls("score-5"), k);
        until("b holds the draws", || b.cache.len() == 2 + k as usize).await;
        for index in 0..k {
            b.send("score-5", Draw { epoch: Some(1), index }).await.unwrap();
        }
        assert_eq!(model.calls("score-5"), k, "a task delivered again reuses its draws");
        // Another epoch is another draw, unless the step shares across epochs.
        a.send("score-5", Draw { epoch: Some(2), index: 0 }).await.unwrap();
        assert_eq!(model.calls("score-5"), k + 1);
        a.send("score-5", Draw { epoch: None, index: 0 }).await.unwrap();
        a.send("score-5", Draw { epoch: None, index: 0 }).await.unwrap();
        assert_eq!(model.calls("score-5"), k + 2);

        // Errors are never kept: a 429 is asked again, and its answer then kept.
        let limited = a.send("ratelimit-c-1", Draw::default()).await;
        assert!(matches!(limited, Err(AttemptError::Status { status: 429, .. })), "{limited:?}");
        a.send("ratelimit-c-1", Draw::default()).await.unwrap();
        until("b holds every answer a got", || b.cache.len() == a.cache.len()).await;
        b.send("ratelimit-c-1", Draw::default()).await.unwrap();
        assert_eq!(model.calls("ratelimit-c-1"), 2);
    })
    .await;
}

#[tokio::test]
async fn processes_of_one_limiter_share_its_rate() {
    let prefix = unique_prefix();
    let Some(probe) = broker(&prefix).await else { return };
    probe.close().await;
    let topology =
        Topology::empty(&prefix).with_samples_log("monitor", Duration::from_secs(600)).with_limiter_log("account");
    guarded(topology, async move {
        let model = FakeModel::start().await;
        // 600 a minute: 10 a second for both together, 5 each.
        let per_minute = 600;
        let processes = [
            Arc::new(process(&prefix, &model, "a", Some(per_minute)).await),
            Arc::new(process(&prefix, &model, "b", Some(per_minute)).await),
        ];
        for process in &processes {
            let limiter = process.limiter.clone().unwrap();
            until("each limiter knows of the other", || limiter.processes() == 2).await;
        }
        let mut calls = JoinSet::new();
        for (p, process) in processes.iter().enumerate() {
            for i in 0..20 {
                let process = process.clone();
                calls.spawn(async move { process.send(&format!("score-{}.{p}{i:02}", i % 10), Draw::default()).await });
            }
        }
        while let Some(call) = calls.join_next().await {
            call.unwrap().unwrap();
        }
        for process in &processes {
            assert_eq!(process.metrics.limiter_processes.get(), 2, "each took half the limit");
        }
        // Over any second, the model saw at most 10 requests, plus one per process at the
        // window's edge; 40 requests took at least 3 seconds. Alone, each process would send
        // 10 a second: 20 in the busiest second.
        let arrivals = model.arrivals("score-");
        assert_eq!(arrivals.len(), 40);
        let busiest = busiest(&arrivals, Duration::from_secs(1));
        println!("busiest second: {busiest} requests of 10 allowed; 40 took {:?}", arrivals[39] - arrivals[0]);
        assert!(busiest <= 10 + 2, "{busiest} requests within one second");
        assert!(arrivals[39] - arrivals[0] >= Duration::from_secs(3), "{:?}", arrivals[39] - arrivals[0]);

        // A 429 with Retry-After: 1 on one process holds the other back for that second.
        let limited = processes[0].send("ratelimit-p-1", Draw::default()).await;
        assert!(matches!(limited, Err(AttemptError::Status { status: 429, .. })), "{limited:?}");
        let told = processes[1].limiter.clone().unwrap();
        until("the pause reached the other process", || told.paused_for().is_some()).await;
        processes[1].send("prose-1", Draw::default()).await.unwrap();
        let (limited_at, after) = (model.arrivals("ratelimit-p-1")[0], model.arrivals("prose-1")[0]);
        assert!(after - limited_at >= Duration::from_millis(950), "{:?} after the 429", after - limited_at);
    })
    .await;
}

/// The most arrivals within any `window`.
fn busiest(arrivals: &[Instant], window: Duration) -> usize {
    arrivals
        .iter()
        .enumerate()
        .map(|(i, start)| arrivals[i..].iter().take_while(|at| **at - *start < window).count())
        .max()
        .unwrap_or(0)
}

/// Monitor processes serving the step `monitor` on the fake model, and a probe that takes a
/// copy of every answer.
struct Monitors {
    admin: AmqpTransport,
    answers: Consumer,
    metrics: Vec<Arc<Metrics>>,
    stops: Vec<tokio::sync::oneshot::Sender<()>>,
    running: Vec<tokio::task::JoinHandle<Result<(), airlock_monitor::MonitorError>>>,
}

impl Monitors {
    async fn start(admin: AmqpTransport, prefix: &str, fleet: &Topology, model: &FakeModel, ids: &[&str]) -> Self {
        admin.declare(fleet).await.unwrap();
        let probe = fleet.reply_queue("probe");
        let watching = Topology::empty(prefix).with_binding(fleet.answer_exchange(), probe.clone(), "");
        admin.declare(&watching).await.unwrap();
        let (mut metrics, mut stops, mut running) = (Vec::new(), Vec::new(), Vec::new());
        for id in ids {
            let mut config = monitor_config(prefix, "monitor", ProviderKind::OpenAi, model.openai_base());
            config.monitor_id = format!("monitor-{id}");
            metrics.push(config.metrics.clone());
            let transport = broker(&format!("{prefix} monitor {id}")).await.unwrap();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            stops.push(stop);
            running.push(tokio::spawn(airlock_monitor::run(transport, config, async move {
                let _ = stopped.await;
            })));
        }
        wait_for_consumers(&fleet.step_queue("monitor"), ids.len()).await;
        let answers = admin.consume(&probe, 64).await.unwrap();
        Monitors { admin, answers, metrics, stops, running }
    }

    /// Asks about `marker` as call `call` in `epoch`, under `params`, without waiting.
    async fn ask(&mut self, prefix: &str, call: &str, marker: &str, epoch: u32, params: &Value) {
        let step = Destination::queue(Topology::empty(prefix).step_queue("monitor"));
        self.admin.publish(&step, task(call, marker, epoch, params)).await.unwrap();
    }

    /// The next answer's decision.
    async fn answer(&mut self) -> i32 {
        let delivery = tokio::time::timeout(HANG_GUARD, self.answers.next()).await.expect("an answer").unwrap();
        let result = v1::StepResult::decode(delivery.message.body.as_ref()).unwrap();
        delivery.ack().await.unwrap();
        result.answer.unwrap().decision
    }

    /// Calls counted `outcome` by the cache, over every process.
    fn counted(&self, outcome: &str) -> u64 {
        let labels = OutcomeLabels { outcome: outcome.into() };
        self.metrics.iter().map(|m| m.sample_cache.get_or_create(&labels).get()).sum()
    }

    async fn stop(self) {
        for stop in self.stops {
            let _ = stop.send(());
        }
        for running in self.running {
            running.await.unwrap().unwrap();
        }
    }
}

#[tokio::test]
async fn a_task_delivered_again_is_answered_without_asking_again() {
    let prefix = unique_prefix();
    let Some(admin) = broker(&prefix).await else { return };
    let fleet = Topology::new(&prefix).with_step("monitor").with_reply_queue("probe");
    guarded(fleet.clone(), async move {
        let model = FakeModel::start().await;
        let mut monitors = Monitors::start(admin, &prefix, &fleet, &model, &["a"]).await;
        let own = json!({"approve_below": 3, "escalate_below": 8});
        let shared = json!({"approve_below": 3, "escalate_below": 8, "share_across_epochs": true});
        let approve = i32::from(v1::DecisionKind::Approve);
        // The first delivery asks the model; two more, and the same call in another epoch of a
        // step that shares across epochs, do not; in another epoch of a step that does not,
        // the call is another draw.
        for (epoch, params, calls) in [(1, &own, 1), (1, &own, 1), (1, &own, 1), (2, &own, 2)] {
            monitors.ask(&prefix, "call-1", "score-1", epoch, params).await;
            assert_eq!(monitors.answer().await, approve);
            assert_eq!(model.calls("score-1"), calls, "epoch {epoch}");
        }
        for epoch in [1, 2, 3] {
            monitors.ask(&prefix, "call-1", "score-1", epoch, &shared).await;
            assert_eq!(monitors.answer().await, approve);
        }
        assert_eq!(model.calls("score-1"), 3, "one more: the shared answer, for every epoch");
        assert_eq!((monitors.counted("hit"), monitors.counted("miss")), (4, 3));
        monitors.stop().await;
    })
    .await;
}

/// A step task asking about `marker` in `epoch`, under `params`.
fn task(call: &str, marker: &str, epoch: u32, params: &Value) -> Message {
    let bash = json!({"function": "bash", "arguments": {"cmd": format!("echo MARK:{marker}")}});
    let mut request = approval("s", call, bash, POLICY);
    request.key.as_mut().unwrap().epoch = epoch;
    let task = v1::StepTask {
        request: Some(request),
        name: "monitor".into(),
        params_json: params.to_string(),
        on_timeout: v1::DecisionKind::Reject.into(),
        ..Default::default()
    };
    Message::new(task.encode_to_vec())
}

#[tokio::test]
async fn a_repeated_workload_on_two_processes_pays_once_per_context() {
    let prefix = unique_prefix();
    let Some(admin) = broker(&prefix).await else { return };
    let fleet = Topology::new(&prefix).with_step("monitor").with_reply_queue("probe");
    guarded(fleet.clone(), async move {
        let model = FakeModel::start().await;
        let mut monitors = Monitors::start(admin, &prefix, &fleet, &model, &["a", "b"]).await;
        let params = json!({"approve_below": 3, "escalate_below": 8});
        let (contexts, copies) = (50u32, 3u32);
        for pass in 1..=2 {
            // Each context delivered three times at once, as a redelivery or hedged requests
            // would be, over both processes.
            for i in 0..contexts {
                for _ in 0..copies {
                    monitors.ask(&prefix, &format!("call-{i}"), &format!("score-1.{i:03}"), 1, &params).await;
                }
            }
            for _ in 0..contexts * copies {
                assert_eq!(monitors.answer().await, i32::from(v1::DecisionKind::Approve));
            }
            let (hits, misses) = (monitors.counted("hit"), monitors.counted("miss"));
            let asked = model.arrivals("score-1.").len() as u64;
            let tasks = u64::from(pass * contexts * copies);
            println!(
                "pass {pass}: {tasks} tasks so far, {hits} answered from the cache ({:.1}%), {asked} model calls \
                 for {contexts} contexts",
                100.0 * hits as f64 / tasks as f64
            );
            assert_eq!(hits + misses, tasks, "every task counted once");
            assert_eq!(misses, asked, "every miss, and only a miss, asks the model");
            assert_eq!(asked, u64::from(contexts), "copies on two processes at once are one call");
        }
        monitors.stop().await;
    })
    .await;
}
