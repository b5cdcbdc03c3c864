//! `airlock demo`: the whole fleet in one process, driving a simulated eval run.
//!
//! With no broker it runs on the in-process transport; with a broker URL the same fleet
//! talks through RabbitMQ. A bundled scenario of shell, python, file and web calls exercises
//! every decision: approvals from the allow-list, a `modify` from a plugin step, rejects from
//! patterns and from Inspect's "no approvers" default, escalations to the human pool,
//! terminations, and reviews of results. Its output, on stdout, is the point.
//!
//! Layout:
//! - [`run`]: the fleet (worker, plugin steps, the reviewer service or a simulated human)
//!   and the simulated runner's samples.
//! - `steps`: the demo's plugin step and its simulated human.
//! - `summary`: what the run decided, as a table.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

mod steps;
mod summary;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use airlock_client::request::build as build_request;
use airlock_client::{Client, ClientConfig, Repeats, ReplyTrust};
use airlock_contract::v1;
use airlock_integrity::{FleetKey, KeyFile as _, SigningKey};
use airlock_policy::{Call, Decision, Kind};
use airlock_records::convert::decision_from_wire;
use airlock_transport::{AmqpTransport, MemoryTransport, Topology, Transport};
use airlock_worker::WorkerConfig;
use airlock_worker::trust::Trust;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use self::summary::{Record, Summary};

/// The demo's policy, in Inspect's format.
pub const POLICY: &str = include_str!("policy.yaml");
/// The calls the simulated agents make, with the output each would produce.
const SCENARIO: &str = include_str!("scenario.json");
/// Calls each simulated sample makes (when nothing terminates it first).
const CALLS_PER_SAMPLE: usize = 6;
/// Up to this many samples, every decision is shown as it arrives.
const SHOW_EACH_UP_TO: usize = 8;

/// How the demo runs.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// Run over this RabbitMQ broker instead of in process.
    pub amqp: Option<String>,
    /// The fleet's prefix (default: a fresh one, removed at the end, when on a broker).
    pub prefix: Option<String>,
    /// Samples of the simulated eval, run concurrently.
    pub samples: usize,
    /// Answer escalations with a simulated human; without it the reviewer UI starts and a
    /// person decides them there.
    pub auto_human: Option<AutoHuman>,
    /// Where the reviewer UI listens (without `auto_human`; a free port if this one is taken).
    pub listen: SocketAddr,
}

/// The simulated human's constant answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoHuman {
    /// Approve (or continue, for reviews).
    Approve,
    /// Reject (terminate, for reviews).
    Reject,
    /// Terminate the sample.
    Terminate,
}

/// Why the demo could not run.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The configuration is unusable.
    #[error("{0}")]
    Config(String),
    /// The broker cannot be reached.
    #[error("cannot reach the broker: {0}")]
    Unavailable(String),
    /// The fleet failed while the demo ran.
    #[error("{0}")]
    Failed(String),
}

/// One call of the scenario.
#[derive(Debug, Clone)]
struct ScenarioCall {
    call: Call,
    output: String,
}

/// Runs the demo on the transport `config` asks for.
pub async fn run(config: DemoConfig) -> Result<(), DemoError> {
    if config.samples == 0 {
        return Err(DemoError::Config("--samples must be at least 1".into()));
    }
    match config.amqp.clone() {
        None => {
            let prefix = config.prefix.clone().unwrap_or_else(|| "airlock".into());
            println!("Airlock demo: the whole fleet in this process (in-process transport).");
            drive(MemoryTransport::new(), prefix, &config).await
        }
        Some(url) => {
            let transport = AmqpTransport::connect(&url).await.map_err(|e| DemoError::Unavailable(e.to_string()))?;
            let prefix = config.prefix.clone().unwrap_or_else(|| format!("airlock-demo-{}", std::process::id()));
            println!("Airlock demo over RabbitMQ, prefix '{prefix}'.");
            let result = drive(transport.clone(), prefix.clone(), &config).await;
            if config.prefix.is_none() {
                let fleet = Topology::new(prefix.clone())
                    .with_step(steps::APPEND_TIMEOUT)
                    .with_human_pool("default")
                    .with_reply_queue(RUNNER)
                    .with_reply_queue(REVIEWER);
                let cleanup = AmqpTransport::connect(&url).await;
                if let Ok(cleanup) = cleanup {
                    let _ = cleanup.delete(&fleet).await;
                    cleanup.close().await;
                }
            }
            result
        }
    }
}

const RUNNER: &str = "demo-runner";
/// Names the demo's reviewer service's queue of cancels.
const REVIEWER: &str = "demo-reviewer";

async fn drive<T: Transport>(transport: T, prefix: String, demo: &DemoConfig) -> Result<(), DemoError> {
    let scenario = scenario();
    let failure = |e: &dyn std::fmt::Display| DemoError::Failed(e.to_string());
    // Everything runs signed, with keys made for this run.
    let fleet_key = FleetKey::generate().map_err(|e| failure(&e))?;
    let replies = ReplyTrust::Proved(fleet_key.public_key().into());
    let reviewer_key = Arc::new(SigningKey::generate().map_err(|e| failure(&e))?);
    let (stop_worker, worker_stopped) = oneshot::channel::<()>();
    let config = WorkerConfig {
        prefix: prefix.clone(),
        concurrency: 64,
        policy_dir: None,
        worker_id: "demo-worker".into(),
        metrics: Default::default(),
        trust: Trust::signed(fleet_key, reviewer_key.public_key().into()),
    };
    let worker = tokio::spawn(airlock_worker::run(transport.clone(), config, async {
        let _ = worker_stopped.await;
    }));
    let mut step_servers = steps::spawn(transport.clone(), &prefix, demo.auto_human, reviewer_key.clone())
        .await
        .map_err(|e| failure(&e))?;
    let reviewer = match demo.auto_human {
        Some(_) => None,
        None => Some(start_reviewer(transport.clone(), &prefix, demo.listen, reviewer_key).await?),
    };
    // A person takes longer than a simulated one; the policy's human step allows 300 s.
    let timeout = if reviewer.is_some() { Duration::from_secs(360) } else { Duration::from_secs(30) };
    let client = Client::connect(
        transport.clone(),
        ClientConfig {
            prefix: prefix.clone(),
            runner_id: RUNNER.into(),
            default_timeout: timeout,
            replies,
            repeats: Repeats::default(),
        },
    )
    .await
    .map_err(|e| failure(&e))?;
    match demo.auto_human {
        Some(human) => println!(
            "{} samples, up to {CALLS_PER_SAMPLE} tool calls each; escalations answered by the simulated human: {human:?}.",
            demo.samples
        ),
        None => println!(
            "{} samples, up to {CALLS_PER_SAMPLE} tool calls each; escalations wait for you in the reviewer UI.",
            demo.samples
        ),
    }

    let done = Arc::new(AtomicUsize::new(0));
    let decisions = Arc::new(AtomicUsize::new(0));
    let progress = (demo.samples > SHOW_EACH_UP_TO)
        .then(|| tokio::spawn(show_progress(demo.samples, done.clone(), decisions.clone())));
    let started = Instant::now();
    let mut samples = JoinSet::new();
    for sample in 0..demo.samples {
        let calls: Vec<ScenarioCall> =
            (0..CALLS_PER_SAMPLE).map(|i| scenario[(sample * 5 + i * 7) % scenario.len()].clone()).collect();
        let (client, done, decisions) = (client.clone(), done.clone(), decisions.clone());
        let show = demo.samples <= SHOW_EACH_UP_TO;
        samples.spawn(async move {
            let records = run_sample(&client, sample, &calls, &decisions, show).await;
            done.fetch_add(1, Ordering::Relaxed);
            records
        });
    }
    let mut summary = Summary::default();
    while let Some(records) = samples.join_next().await {
        summary.extend(records.map_err(|e| failure(&e))?.map_err(|e| failure(&e))?);
    }
    let elapsed = started.elapsed();
    if let Some(progress) = progress {
        progress.abort();
        eprintln!();
    }

    step_servers.abort_all();
    if let Some(reviewer) = reviewer {
        reviewer.stop().await;
    }
    let _ = stop_worker.send(());
    worker.await.map_err(|e| failure(&e))?.map_err(|e| failure(&e))?;
    print!("{}", summary.render(elapsed));
    Ok(())
}

/// Starts the reviewer service in this process (an in-memory store, one reviewer for every
/// pool) and tells the user where to open it.
async fn start_reviewer<T: Transport>(
    transport: T,
    prefix: &str,
    listen: SocketAddr,
    signing_key: Arc<SigningKey>,
) -> Result<airlock_reviewer::Service, DemoError> {
    use airlock_reviewer::auth::{Reviewer, Reviewers, new_token, sha256_hex};
    let token = new_token();
    let reviewers = Reviewers::from_list(vec![Reviewer {
        name: "you".into(),
        token_sha256: sha256_hex(&token),
        pools: vec!["*".into()],
        admin: true,
        overrides: Vec::new(),
    }]);
    let config = |listen| airlock_reviewer::ReviewerConfig {
        prefix: prefix.to_owned(),
        policy_dir: None,
        pools: vec!["default".into()],
        store: "sqlite::memory:".into(),
        listen,
        public_url: None,
        server: Default::default(),
        reviewers: reviewers.clone(),
        instance: REVIEWER.into(),
        metrics: Default::default(),
        signing_key: Some(signing_key.clone()),
        webhooks: Default::default(),
        canaries: None,
        claims: Default::default(),
    };
    let service = match airlock_reviewer::Service::start(transport.clone(), config(listen)).await {
        Err(airlock_reviewer::ReviewerError::Listen { .. }) => {
            airlock_reviewer::Service::start(transport, config("127.0.0.1:0".parse().expect("an address"))).await
        }
        other => other,
    }
    .map_err(|e| DemoError::Failed(e.to_string()))?;
    let url = format!("http://{}/", service.local_addr());
    println!("Reviewer UI: {url}  (sign in with token {token})");
    println!("  or in a terminal: airlock review --console --api {url} --token {token}");
    Ok(service)
}

/// One simulated sample: approve each call, run it, review its result; stop on terminate.
async fn run_sample<T: Transport>(
    client: &Client<T>,
    sample: usize,
    calls: &[ScenarioCall],
    decisions: &AtomicUsize,
    show: bool,
) -> Result<Vec<Record>, airlock_client::ClientError> {
    let log = |kind: Kind, call: &Call, decision: &v1::Decision| {
        if show {
            println!("  sample-{sample} {kind:<8} {}", summary::describe(call, decision));
        }
    };
    let mut records = Vec::new();
    let source = || v1::policy::Source::Inline(POLICY.into());
    for (index, step) in calls.iter().enumerate() {
        let key = v1::CallKey {
            run_id: "demo-run".into(),
            sample_id: format!("sample-{sample}"),
            epoch: 1,
            tool_call_id: format!("call-{index}"),
            ..Default::default()
        };
        let mut call = step.call.clone();
        call.id = key.tool_call_id.clone();
        let asked = Instant::now();
        let approval =
            client.approve(build_request(key.clone(), &call, Kind::Approval, source(), "Working on it.", "")).await?;
        decisions.fetch_add(1, Ordering::Relaxed);
        let decision = decision_from_wire(approval.decision);
        records.push(Record::new(Kind::Approval, &approval, asked.elapsed()));
        log(Kind::Approval, &call, &approval);
        match decision {
            Some(Decision::Approve | Decision::Modify) => {}
            Some(Decision::Terminate) => break,
            _ => continue,
        }
        let executed =
            approval.modified.as_ref().and_then(|m| airlock_records::convert::call_from_wire(m).ok()).unwrap_or(call);
        let asked = Instant::now();
        let review = client
            .review(build_request(key, &executed, Kind::Review, source(), "Working on it.", &step.output))
            .await?;
        decisions.fetch_add(1, Ordering::Relaxed);
        records.push(Record::new(Kind::Review, &review, asked.elapsed()));
        log(Kind::Review, &executed, &review);
        if decision_from_wire(review.decision) == Some(Decision::Terminate) {
            break;
        }
    }
    Ok(records)
}

async fn show_progress(samples: usize, done: Arc<AtomicUsize>, decisions: Arc<AtomicUsize>) {
    const WIDTH: usize = 30;
    loop {
        let finished = done.load(Ordering::Relaxed);
        let filled = WIDTH * finished / samples;
        eprint!(
            "\r  [{}{}] {finished}/{samples} samples, {} decisions",
            "#".repeat(filled),
            ".".repeat(WIDTH - filled),
            decisions.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn scenario() -> Vec<ScenarioCall> {
    let calls: Vec<Value> = serde_json::from_str(SCENARIO).expect("the bundled scenario is JSON");
    calls
        .iter()
        .map(|value| ScenarioCall {
            call: Call::from_json(value).expect("the bundled scenario holds calls"),
            output: value["output"].as_str().unwrap_or_default().to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_scenario_and_policy_read() {
        let scenario = scenario();
        assert!(scenario.len() >= CALLS_PER_SAMPLE, "every sample makes distinct calls");
        for kind in [Kind::Approval, Kind::Review] {
            airlock_policy::chain::Policy::parse("policy.yaml", POLICY, kind).unwrap();
        }
    }

    #[tokio::test]
    async fn no_samples_is_bad_configuration() {
        let config = DemoConfig {
            amqp: None,
            prefix: None,
            samples: 0,
            auto_human: Some(AutoHuman::Approve),
            listen: "127.0.0.1:0".parse().unwrap(),
        };
        assert!(matches!(run(config).await, Err(DemoError::Config(_))));
    }
}
