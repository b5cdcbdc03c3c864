//! What the end-to-end tests share: a fleet on a unique prefix, `airlock` processes, requests.
//!
//! Layout of the tests (in `tests/`):
//! - `chains`: one suite of chain behaviours, run on the in-process transport and on RabbitMQ.
//! - `faults`: RabbitMQ only: competing workers, a worker killed under load, connections cut
//!   under load, poison messages, deadlines.
//! - `demo`: `airlock demo` as a newcomer runs it.
//! - `reviewer`: the reviewer service over RabbitMQ: API answers, deadlines, cancels, restarts.
//! - `reviewer_control`: the reviewer service under the fleet's control, in process: a switch
//!   answering its pending task, an incident ending a run through a worker, the console's mark.
//! - `browser`: the reviewer UI in headless Chromium ([`webdriver`]) on a worker, a reviewer
//!   service and a client ([`fleet`]).
//! - `browser_triage`: the pending list's filters, pages, counts and live refresh in Chromium
//!   with hundreds of tasks, and (ignored, run by name) its timings with 10,000.
//! - `browser_control`: an incident marked from a card ending its run, and the admins' Runs
//!   page, in Chromium.
//! - `reviewer_webhooks`: the reviewer service paging people: webhooks per pool, retried,
//!   signed ([`webhooks`]).
//! - `reviewer_slack`: the Slack app: tasks posted and updated on a fake Web API, button
//!   presses decided end to end, and forged, stale, replayed or unmapped presses deciding
//!   nothing; signatures checked against Slack's own SDK in `.venv` ([`slack`]).
//! - `reviewer_canaries`: canaries planted, decided through the API, never published to the
//!   fleet or told to a runner, and the catch rates an admin sees.
//! - `gateway`: the HTTP gateway over RabbitMQ with a real worker: waits, polls, retries,
//!   tokens, limits, webhooks, its delivery log across a restart.
//! - `mcp`: `airlock mcp` between the MCP SDK's client and server over stdio and streamable
//!   HTTP, with a plugin that modifies, a person deciding, a deadline and a terminating review.
//! - `claude_code_hook`, `claude_code_browser`: `airlock hook`'s failures against a stand-in
//!   gateway; the Claude Code CLI the `claude-agent-sdk` wheel bundles, its HTTP hook answered
//!   by a person in the reviewer UI in Chromium.
//! - `inspect`, `agent_examples`, `plugins`: the Python suites (the Inspect integration, the
//!   agent frameworks' examples through the gateway, the example plugin) in `.venv`.
//! - `cancels`: another broker user's cancel leaves a call's human task pending; the runner's
//!   own withdraws it ([`roles`]).
//! - `runner_keys`: `airlock request`, `bench --workers 0` and `gateway` without the fleet's
//!   public key (refused) and with `--insecure` (warned).
//! - `partitions`: every role's link to the broker frozen half-open under load
//!   (`airlock_testkit::link`), and a broker node of a cluster frozen or cut off ([`load`],
//!   [`linked`]).
//! - `soak`: a mixed load for `AIRLOCK_SOAK_SECS` (default 40) while links are frozen, reset
//!   and delayed and the auditor is killed at random, every call judged by [`soak`]'s checker.
//! - `hostile`: what one caller's inline policy may not do to a shared worker: stall it,
//!   make it declare queues, learn where it keeps its policies.
//! - `calibration`: `airlock monitor calibrate` against scikit-learn and numpy in `.venv`.
//! - `control`: breakers, incidents and run switches through real workers, and the time from a
//!   mark to the last worker applying it.
//! - `budget`: an audit budget paced by two monitor processes of one step ([`fake_model`]).
//! - `protocols`: control protocols (`trusted_edit`, `defer_to_trusted`, `resample`) served by
//!   monitors on a fake model whose tool calls the test scripts ([`fake_model`]), and (ignored,
//!   run by name) what a resample costs in model calls and latency.
//! - `cluster`, `roles`, `tls`, `integrity`, `audit`, `monitors`, `telemetry`: a three-node
//!   cluster, least-privilege broker users, TLS, signed fleets, the decision log, model
//!   monitors, traces and metrics.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod fake_model;
pub mod fleet;
pub mod linked;
pub mod load;
pub mod roles;
pub mod slack;
pub mod soak;
pub mod webdriver;
pub mod webhooks;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use airlock_client::{Client, ClientConfig, Repeats, ReplyTrust};
use airlock_contract::v1;
use airlock_integrity::{FleetKey, KeyFile as _, PublicKeys, Signing, SigningKey};
use airlock_reviewer::ReviewerConfig;
use airlock_reviewer::auth::{Reviewer, Reviewers, sha256_hex};
use airlock_reviewer::client::ApiClient;
use airlock_testkit::{amqp_url, unreachable};
use airlock_transport::{AmqpOptions, AmqpTransport, Topology, Transport};
use airlock_worker::trust::Trust;
use tokio::process::{Child, Command};

/// How long any single wait may take before the test is declared hung. Only a hang guard:
/// nothing is measured against it.
pub const HANG_GUARD: Duration = Duration::from_secs(120);

/// The repository's root.
pub fn repo() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository root").to_path_buf()
}

/// The Python of the repository's virtual environment (`.venv`, which `.ci/run` makes), if
/// it imports every module of `modules` (as `import` lists them); otherwise the test skips,
/// saying that `needed` is missing, except under `CI`, where it fails.
pub fn venv_python(modules: &str, needed: &str) -> Option<PathBuf> {
    let python = repo().join(".venv/bin/python");
    let ready = python.is_file()
        && std::process::Command::new(&python)
            .args(["-c", &format!("import {modules}")])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
    if ready {
        return Some(python);
    }
    let reason = format!("no {} with {needed}", python.display());
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and there is {reason}");
    }
    eprintln!("skipping: {reason}");
    None
}

/// Runs the pytest suite in `suite` (a path from the repository's root) with `python`,
/// against the test broker and this build's `airlock`, and fails with its output when it
/// fails.
pub fn run_pytest(python: &std::path::Path, suite: &str) {
    let output = std::process::Command::new(python)
        .args(["-m", "pytest", suite, "-q", "-p", "no:cacheprovider"])
        .current_dir(repo())
        .env("AIRLOCK_AMQP_URL", amqp_url())
        .env("AIRLOCK_BIN", airlock_bin())
        .output()
        .expect("pytest runs");
    println!("{}", String::from_utf8_lossy(&output.stdout));
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the suite in {suite} failed ({})", output.status);
}

/// The `airlock` binary of this build. `cargo test --workspace` builds it (the `airlock`
/// package's own tests need it); a run of this package alone builds it if it is missing.
pub fn airlock_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        // tests live in target/<profile>/deps; the binary sits in target/<profile>.
        let exe = std::env::current_exe().expect("the test binary's path");
        let bin = exe.parent().and_then(|deps| deps.parent()).expect("a target directory").join("airlock");
        if bin.exists() {
            return bin;
        }
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "airlock", "--bin", "airlock"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo builds the airlock binary");
        assert!(status.success(), "building airlock failed");
        assert!(bin.exists(), "no airlock binary at {}", bin.display());
        bin
    })
    .clone()
}

/// A transport on the test broker with connections named `<name> (<role>)`, or `None` (the
/// test skips) when there is no broker and `CI` is unset.
pub async fn broker(name: &str) -> Option<AmqpTransport> {
    match AmqpTransport::connect_with(AmqpOptions::new(amqp_url()).with_connection_name(name)).await {
        Ok(transport) => Some(transport),
        Err(error) => {
            unreachable(error);
            None
        }
    }
}

/// Deletes a test fleet's queues and exchanges, best effort, through a fresh connection.
pub async fn cleanup(topology: &Topology) {
    if let Some(transport) = broker(&format!("{} cleanup", topology.prefix())).await {
        let _ = transport.delete(topology).await;
        transport.close().await;
    }
}

/// The keys every test fleet runs with, made once per test process in a directory of its
/// own (`fleet.key`, `fleet.pub`, `reviewer.key`, `reviewer.pub`): everything runs signed.
pub struct TestKeys {
    /// Where the key files are.
    pub dir: PathBuf,
}

impl TestKeys {
    /// The keys of this test process.
    pub fn get() -> &'static TestKeys {
        static KEYS: OnceLock<TestKeys> = OnceLock::new();
        KEYS.get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("airlock-test-keys-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            FleetKey::generate_files(&dir, "fleet").expect("a fleet key");
            SigningKey::generate_files(&dir, "reviewer").expect("a reviewer key");
            TestKeys { dir }
        })
    }

    /// A worker's trust: the fleet key, the reviewer key's public half.
    pub fn trust(&self) -> Trust {
        Trust::signed(self.fleet_key(), self.reviewer_public())
    }

    /// The fleet key (workers).
    pub fn fleet_key(&self) -> FleetKey {
        FleetKey::load(&self.dir.join("fleet.key")).expect("the fleet key")
    }

    /// What runners verify replies with: the fleet's public key.
    pub fn replies(&self) -> ReplyTrust {
        ReplyTrust::Proved(PublicKeys::load([self.dir.join("fleet.pub")]).expect("the fleet's public key"))
    }

    /// The reviewer service's key.
    pub fn reviewer_key(&self) -> Arc<SigningKey> {
        Arc::new(SigningKey::load(&self.dir.join("reviewer.key")).expect("the reviewer key"))
    }

    /// What workers verify human answers with.
    pub fn reviewer_public(&self) -> PublicKeys<Signing> {
        PublicKeys::load([self.dir.join("reviewer.pub")]).expect("the reviewer's public key")
    }

    /// The `airlock worker` arguments that give a worker these keys.
    pub fn worker_args(&self) -> [String; 4] {
        let path = |name: &str| self.dir.join(name).display().to_string();
        ["--signing-key".into(), path("fleet.key"), "--reviewer-keys".into(), path("reviewer.pub")]
    }
}

/// The runner `runner` of fleet `prefix` on `transport`, trusting the test keys' replies and
/// waiting `default_timeout` for a decision unless a request says otherwise.
pub async fn runner<T: airlock_transport::Transport>(
    transport: T,
    prefix: &str,
    default_timeout: Duration,
) -> Client<T> {
    let config = ClientConfig {
        prefix: prefix.into(),
        runner_id: "runner".into(),
        default_timeout,
        replies: TestKeys::get().replies(),
        repeats: Repeats::default(),
    };
    Client::connect(transport, config).await.expect("the runner connects")
}

/// A policy worker running in this process, with the test keys, until stopped.
pub struct InProcessWorker {
    /// What it counts.
    pub metrics: std::sync::Arc<airlock_telemetry::metrics::Metrics>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), airlock_worker::WorkerError>>,
}

impl InProcessWorker {
    /// Starts worker `id` of fleet `prefix` on `transport`, deciding `concurrency` calls at once.
    pub fn start<T: airlock_transport::Transport>(transport: T, prefix: &str, id: &str, concurrency: u16) -> Self {
        InProcessWorker::with_policies(transport, prefix, id, concurrency, None)
    }

    /// [`InProcessWorker::start`], holding the named policies of `policy_dir`.
    pub fn with_policies<T: airlock_transport::Transport>(
        transport: T,
        prefix: &str,
        id: &str,
        concurrency: u16,
        policy_dir: Option<PathBuf>,
    ) -> Self {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let metrics = std::sync::Arc::<airlock_telemetry::metrics::Metrics>::default();
        let config = airlock_worker::WorkerConfig {
            prefix: prefix.into(),
            concurrency,
            policy_dir,
            worker_id: id.into(),
            metrics: metrics.clone(),
            trust: TestKeys::get().trust(),
        };
        let task = tokio::spawn(airlock_worker::run(transport, config, async {
            let _ = stopped.await;
        }));
        InProcessWorker { metrics, stop, task }
    }

    /// Stops it and waits for a clean end.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("the worker task").expect("the worker stops cleanly");
    }
}

/// An `airlock worker` process on `prefix`, killed when dropped.
pub struct WorkerProcess {
    /// The process.
    pub child: Child,
}

impl WorkerProcess {
    /// Starts a worker whose connections are named `<prefix> worker`.
    pub fn start(prefix: &str, id: &str) -> Self {
        WorkerProcess::start_with(prefix, id, &["--concurrency", "32"])
    }

    /// [`WorkerProcess::start`] with `args` (`--concurrency`, `--policy-dir`…) of its own.
    pub fn start_with(prefix: &str, id: &str, args: &[&str]) -> Self {
        let child = Command::new(airlock_bin())
            .args(["worker", "--amqp", &amqp_url(), "--prefix", prefix, "--id", id])
            .args(args)
            .args(TestKeys::get().worker_args())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("airlock worker starts");
        WorkerProcess { child }
    }

    /// Sends SIGKILL: the worker dies mid-message, with deliveries unacknowledged.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("the worker can be killed");
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub async fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("a running worker").to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status().await.expect("kill runs");
        assert!(status.success());
        tokio::time::timeout(HANG_GUARD, self.child.wait()).await.expect("the worker stops").expect("wait works")
    }
}

/// Waits until `queue` has `consumers` consumers (workers started and subscribed).
pub async fn wait_for_consumers(queue: &str, consumers: usize) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let listing =
            airlock_testkit::rabbitmqctl(&["list_queues", "-q", "--no-table-headers", "name", "consumers"]).await;
        if airlock_testkit::queue_figure(&listing, queue).unwrap_or(0) >= consumers as u64 {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{queue} never had {consumers} consumers");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the reviewer service's API lists `n` pending tasks, and returns them as the
/// wire's JSON.
pub async fn pending(api: &ApiClient, n: usize) -> Vec<serde_json::Value> {
    loop {
        let tasks = api.get("/api/tasks").await.unwrap().json()["tasks"].as_array().cloned().unwrap();
        if tasks.len() == n {
            return tasks;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The API token of `alice`, the one person of [`reviewer_config`].
pub const REVIEWER_TOKEN: &str = "alice-secret-token";

/// A reviewer service `instance` for the pool `ops` of fleet `prefix`, its tasks in `store`,
/// with one person (`alice`, [`REVIEWER_TOKEN`]) and the test reviewer key.
pub fn reviewer_config(prefix: &str, store: &str, instance: &str) -> ReviewerConfig {
    ReviewerConfig {
        prefix: prefix.into(),
        policy_dir: None,
        pools: vec!["ops".into()],
        store: store.into(),
        listen: "127.0.0.1:0".parse().expect("a socket address"),
        public_url: None,
        server: Default::default(),
        reviewers: Reviewers::from_list(vec![Reviewer {
            name: "alice".into(),
            token_sha256: sha256_hex(REVIEWER_TOKEN),
            pools: vec!["ops".into()],
            admin: false,
            overrides: Vec::new(),
        }]),
        instance: instance.into(),
        signing_key: Some(TestKeys::get().reviewer_key()),
        metrics: Default::default(),
        webhooks: Default::default(),
        canaries: None,
        claims: Default::default(),
    }
}

/// The API token of `bob`, a second person of a test service.
pub const BOB_TOKEN: &str = "bob-secret-token";

/// The reviewers `(name, token, pool)` of a test service, each reviewing the one pool, none an
/// admin.
pub fn people(people: &[(&str, &str, &str)]) -> Reviewers {
    Reviewers::from_list(
        people
            .iter()
            .map(|(name, token, pool)| Reviewer {
                name: (*name).into(),
                token_sha256: sha256_hex(token),
                pools: vec![(*pool).into()],
                admin: false,
                overrides: Vec::new(),
            })
            .collect(),
    )
}

/// An approval request for `call` (Inspect ToolCall JSON) under an inline `policy`.
pub fn approval(sample: &str, call_id: &str, call: serde_json::Value, policy: &str) -> v1::Request {
    request(sample, call_id, call, policy, None)
}

/// A review request for `call` and the tool's `output` under an inline `policy`.
pub fn review(sample: &str, call_id: &str, call: serde_json::Value, output: &str, policy: &str) -> v1::Request {
    request(sample, call_id, call, policy, Some(output))
}

fn request(sample: &str, call_id: &str, call: serde_json::Value, policy: &str, output: Option<&str>) -> v1::Request {
    let wire_call = v1::ToolCall {
        id: call_id.into(),
        function: call["function"].as_str().expect("a function").into(),
        arguments_json: call["arguments"].to_string(),
        r#type: "function".into(),
        ..Default::default()
    };
    let body = match output {
        None => v1::request::Body::Approval(v1::ApprovalRequest { call: Some(wire_call), ..Default::default() }),
        Some(output) => v1::request::Body::Review(v1::ReviewRequest {
            call: Some(wire_call),
            output: output.into(),
            ..Default::default()
        }),
    };
    v1::Request {
        key: Some(v1::CallKey {
            run_id: "run".into(),
            sample_id: sample.into(),
            epoch: 1,
            tool_call_id: call_id.into(),
            ..Default::default()
        }),
        origin: Some(v1::Origin { run_id: "run".into(), sample_id: sample.into(), epoch: 1, ..Default::default() }),
        body: Some(body),
        policy: Some(v1::Policy { source: Some(v1::policy::Source::Inline(policy.into())), digest: String::new() }),
        ..Default::default()
    }
}

/// The metadata of step `step`'s entry in the decision's trail.
pub fn step_metadata(decision: &v1::Decision, step: &str) -> serde_json::Value {
    let entry =
        decision.trail.iter().find(|t| t.approver == step).unwrap_or_else(|| panic!("no {step} entry: {decision:?}"));
    serde_json::from_str(&entry.metadata_json).expect("metadata is a JSON object")
}

/// The decision's trail: each step and what it answered.
pub fn trail(decision: &v1::Decision) -> Vec<(String, &'static str)> {
    decision
        .trail
        .iter()
        .map(|t| {
            (t.approver.clone(), airlock_records::convert::decision_from_wire(t.decision).map_or("?", |d| d.as_str()))
        })
        .collect()
}

/// People in the `ops` pool of fleet `prefix`: the first choice (approve, continue) unless the
/// call says `human-rejects`, then the second (reject, terminate).
pub async fn serve_humans(transport: AmqpTransport, prefix: &str) {
    use prost::Message as _;
    let topology = Topology::new(prefix);
    let results = airlock_transport::Destination::queue(topology.results_queue());
    let mut ops = transport.consume(&topology.human_queue("ops"), 8).await.unwrap();
    tokio::spawn(async move {
        while let Some(delivery) = ops.next().await {
            let human = v1::HumanTask::decode(delivery.message.body.as_ref()).unwrap();
            let task = human.task.clone().unwrap();
            let call = match task.request.as_ref().and_then(|r| r.body.clone()) {
                Some(v1::request::Body::Approval(a)) => a.call.unwrap(),
                Some(v1::request::Body::Review(r)) => r.call.unwrap(),
                None => panic!("a request body"),
            };
            let choice = if call.arguments_json.contains("human-rejects") { 1 } else { 0 };
            let answer =
                v1::StepAnswer { decision: human.choices[choice], decided_by: "alice".into(), ..Default::default() };
            let mut result = v1::StepResult { task: Some(task), answer: Some(answer), ..Default::default() };
            airlock_records::signed::sign_human_answer(&TestKeys::get().reviewer_key(), &mut result);
            transport.publish(&results, airlock_transport::Message::new(result.encode_to_vec())).await.unwrap();
            delivery.ack().await.unwrap();
        }
    });
}

/// The decision's name, e.g. `approve`.
pub fn decision_name(decision: &v1::Decision) -> &'static str {
    airlock_records::convert::decision_from_wire(decision.decision).map_or("unspecified", |d| d.as_str())
}

/// Runs a test body as a task under the hang guard, then deletes `topology` from the broker
/// whatever happened, then passes any panic on.
pub async fn guarded<F>(topology: Topology, body: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let outcome = tokio::time::timeout(HANG_GUARD, tokio::spawn(body)).await;
    cleanup(&topology).await;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(error)) => std::panic::resume_unwind(error.into_panic()),
        Err(_) => panic!("test hung for {HANG_GUARD:?}"),
    }
}
