//! One module per subcommand, and what they share: the broker options, the runtime, logging.
//!
//! A module here only turns arguments into a library call and the call's result into
//! output and an exit status. The names follow one convention:
//!
//! - **Command side.** Each module's entry point is `run`, taking its parsed arguments (a
//!   subcommand enum for a group). An `async fn run(..) -> Result<(), Failure>` gets its
//!   runtime from `main` ([`block_on`] for a tool, [`block_on_role`] for a role); a module
//!   whose subcommands need different runtimes, or none, has a sync `fn run(..) -> ExitCode`.
//! - **Library side, a role** (worker, monitor, reviewer, gateway, auditor): `run(transport,
//!   config, shutdown)` in the role's crate — [`airlock_worker::run`], [`airlock_monitor::run`],
//!   [`airlock_reviewer::run`], [`airlock_gateway::run`], [`airlock_audit::run`] — on the role loop of
//!   [`airlock_transport::Serve`]; a role that counts takes its metrics in its config.
//! - **Library side, a one-shot tool**: a function named for what it does, in the library
//!   module or crate of the command: [`airlock_client::request::send`],
//!   [`airlock_worker::offline::check`] and [`airlock_worker::offline::eval_line`],
//!   [`airlock_audit::query::Query::run`], [`airlock_demo::run`]. What they print is a type
//!   of [`airlock_records::view`].
//!
//! `bench` stays a module tree here: it is a tool, not a role, and it measures this very
//! program — its workers and echo responder are child processes of the same executable
//! (`airlock worker`, `airlock bench-echo`), so its logic is tied to the binary's own
//! subcommands. `topology` calls the transport's `declare`/`delete` directly, and holds the
//! broker users by role (`topology definitions`): operations tooling, kept out of the transport
//! every role links.

pub mod audit;
pub mod bench;
pub mod control;
pub mod demo;
pub mod gateway;
pub mod hook;
pub mod keys;
pub mod mcp;
pub mod monitor;
pub mod policy;
pub mod request;
pub mod review;
pub mod reviewer;
pub mod run;
pub mod topology;
pub mod worker;

use std::future::Future;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use std::sync::Arc;

use airlock_client::ReplyTrust;
use airlock_integrity::{Fleet, KeyFile as _, PublicKeys, SigningKey};
use airlock_telemetry::TelemetryConfig;
use airlock_telemetry::metrics::Metrics;
use airlock_transport::{AmqpOptions, AmqpTransport};
use clap::Args;
use serde::Serialize;

/// Exit status for bad usage or a bad configuration (sysexits' EX_USAGE, as linkerd uses).
pub const EXIT_CONFIG: u8 = 64;

/// Exit status when the broker cannot be reached (sysexits' EX_UNAVAILABLE).
pub const EXIT_UNAVAILABLE: u8 = 69;

/// Where the fleet lives.
#[derive(Debug, Clone, Args)]
pub struct FleetArgs {
    /// The broker, e.g. amqp://guest:guest@127.0.0.1:5672/%2f; a cluster as the comma-separated URLs of its nodes
    #[arg(long, env = "AIRLOCK_AMQP_URL")]
    pub amqp: String,
    #[command(flatten)]
    pub options: FleetOptions,
}

/// What a fleet is besides its broker: its names, how its links are secured and how its
/// queues are replicated.
#[derive(Debug, Clone, Args)]
pub struct FleetOptions {
    /// The fleet's prefix: every queue and exchange name starts with it.
    #[arg(long, env = "AIRLOCK_PREFIX", default_value = "airlock")]
    pub prefix: String,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub replication: ReplicationArgs,
}

impl FleetArgs {
    /// The fleet of a prefix a bench makes and deletes itself: its queues take the broker's
    /// replication default.
    pub fn of_bench(amqp: &str, tls: &TlsArgs, prefix: &str) -> Self {
        let options =
            FleetOptions { prefix: prefix.to_owned(), tls: tls.clone(), replication: ReplicationArgs::default() };
        FleetArgs { amqp: amqp.to_owned(), options }
    }
}

/// [`FleetArgs`] with `--amqp` optional in clap, for a role whose subcommands need no broker
/// (`add-token`, `calibrate`); the role itself asks for it with [`required`](Self::required).
#[derive(Debug, Clone, Args)]
pub struct OptionalFleetArgs {
    /// The broker, e.g. amqp://guest:guest@127.0.0.1:5672/%2f; a cluster as the comma-separated URLs of its nodes
    #[arg(long, env = "AIRLOCK_AMQP_URL")]
    pub amqp: Option<String>,
    #[command(flatten)]
    pub options: FleetOptions,
}

impl OptionalFleetArgs {
    /// The fleet, or none without `--amqp`.
    pub fn required(self) -> Option<FleetArgs> {
        Some(FleetArgs { amqp: self.amqp?, options: self.options })
    }
}

/// How the fleet's queues are replicated over the nodes of a cluster.
#[derive(Debug, Clone, Default, Args)]
pub struct ReplicationArgs {
    /// Nodes that hold a replica of each quorum queue, set when the queue is created
    /// (x-quorum-initial-group-size); unset: the broker's default (RabbitMQ: up to 3). Give
    /// every role of a fleet the same value: the broker refuses a declaration that differs
    /// from how the queue was declared (see docs/replication.md)
    #[arg(long, env = "AIRLOCK_QUORUM_GROUP_SIZE")]
    pub quorum_group_size: Option<NonZeroU32>,
}

/// How an `amqps://` broker is trusted.
#[derive(Debug, Clone, Default, Args)]
pub struct TlsArgs {
    /// The CA certificates (PEM) an amqps:// broker's certificate is verified against.
    #[arg(long, env = "AIRLOCK_CA_FILE")]
    pub ca_file: Option<PathBuf>,
}

/// A reviewer service's signing key (`reviewer.key`); without one its answers are unsigned,
/// which signed workers refuse, and the service says so at start.
pub fn reviewer_signing_key(path: Option<&Path>) -> Result<Option<Arc<SigningKey>>, Failure> {
    let Some(path) = path else {
        tracing::warn!("No --signing-key: answers go out unsigned, and signed workers refuse them.");
        return Ok(None);
    };
    SigningKey::load(path).map(|key| Some(Arc::new(key))).map_err(|e| Failure::config(format!("--signing-key: {e}")))
}

/// The policy a runner's requests are decided by: a file sent with each, or a name the workers
/// hold.
#[derive(Debug, Clone, Args)]
pub struct PolicyArgs {
    /// The Inspect policy file, sent with every request.
    #[arg(long, conflicts_with = "policy_name", required_unless_present = "policy_name")]
    pub policy: Option<PathBuf>,
    /// Or the name of a policy the workers hold in their --policy-dir.
    #[arg(long)]
    pub policy_name: Option<String>,
}

impl PolicyArgs {
    /// The policy as a request carries it: the file's text, or the name.
    pub fn source(&self) -> Result<airlock_contract::v1::policy::Source, Failure> {
        use airlock_contract::v1::policy::Source;
        match (&self.policy, &self.policy_name) {
            (Some(file), _) => std::fs::read_to_string(file)
                .map(Source::Inline)
                .map_err(|e| Failure::config(format!("{}: {e}", file.display()))),
            (None, Some(name)) => Ok(Source::Name(name.clone())),
            (None, None) => Err(Failure::config("give --policy FILE or --policy-name NAME")),
        }
    }
}

/// How a runner takes the fleet's decisions: proved by the fleet's public key, or, told so in
/// as many words, unproved.
#[derive(Debug, Clone, Default, Args)]
pub struct VerifyArgs {
    /// The fleet's public key file (`fleet.pub` of `airlock keys generate`): a decision is taken
    /// only when one of its keys proves it (repeat, or comma-separate, for several during a
    /// rotation). Required unless --insecure.
    #[arg(long, env = "AIRLOCK_VERIFY_KEY", value_delimiter = ',')]
    pub verify_key: Vec<PathBuf>,
    /// Take decisions unproved, from a fleet that runs --insecure-unsigned (a test, a demo):
    /// anyone who can publish on the broker can then forge one, and it is taken as the fleet's.
    #[arg(long, conflicts_with = "verify_key")]
    pub insecure: bool,
}

/// What a runner without either of --verify-key and --insecure is told.
pub const NO_VERIFY_KEY: &str = "no fleet public key: pass --verify-key <fleet.pub> (or set AIRLOCK_VERIFY_KEY) so \
     that only decisions the fleet proved are taken, or --insecure to take them unproved (--insecure accepts forged \
     decisions)";

/// What a runner told --insecure says at every start.
pub const INSECURE_WARNING: &str = "--insecure: decisions are not proved; anyone who can publish on the broker can forge one, and it is taken as the fleet's";

impl VerifyArgs {
    /// Which replies the runner takes: those proved by the --verify-key files' keys, or with
    /// --insecure any; neither is a configuration error that says what to pass.
    pub fn replies(&self) -> Result<ReplyTrust, Failure> {
        match (self.verify_key.as_slice(), self.insecure) {
            ([], true) => Ok(ReplyTrust::Insecure),
            ([], false) => Err(Failure::config(NO_VERIFY_KEY)),
            (paths, _) => PublicKeys::<Fleet>::load(paths)
                .map(ReplyTrust::Proved)
                .map_err(|e| Failure::config(format!("--verify-key: {e}"))),
        }
    }

    /// [`replies`](Self::replies) for a one-shot tool, whose logs show errors only: told
    /// --insecure, it says so on stderr itself (a role's client logs the warning).
    pub fn tool_replies(&self) -> Result<ReplyTrust, Failure> {
        let replies = self.replies()?;
        if let ReplyTrust::Insecure = replies {
            eprintln!("warning: {INSECURE_WARNING}");
        }
        Ok(replies)
    }
}

/// A failure with the exit status it maps to.
#[derive(Debug)]
pub struct Failure {
    /// The status.
    pub code: u8,
    /// What to tell the user.
    pub message: String,
}

impl Failure {
    /// Bad usage or configuration.
    pub fn config(message: impl Into<String>) -> Self {
        Failure { code: EXIT_CONFIG, message: message.into() }
    }

    /// Anything else.
    pub fn other(message: impl Into<String>) -> Self {
        Failure { code: 1, message: message.into() }
    }
}

/// Which chain a command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KindArg {
    /// Inspect's `approvers:`, before the call runs.
    Approval,
    /// Inspect's `reviewers:`, after the call returned.
    Review,
}

impl From<KindArg> for airlock_policy::Kind {
    fn from(kind: KindArg) -> Self {
        match kind {
            KindArg::Approval => airlock_policy::Kind::Approval,
            KindArg::Review => airlock_policy::Kind::Review,
        }
    }
}

/// Prints `value` as one line of JSON on stdout.
pub fn print_json(value: &impl Serialize) -> Result<(), Failure> {
    let line = serde_json::to_string(value).map_err(|e| Failure::other(format!("printing JSON: {e}")))?;
    println!("{line}");
    Ok(())
}

/// Logs of a long-running role: what it does, at info.
pub const LOG_ROLE: &str = "warn,airlock=info";

/// Logs of a one-shot tool whose output is the point: only problems.
pub const LOG_TOOL: &str = "error";

/// Runs a command on a single-threaded runtime, with logs on stderr filtered by `RUST_LOG`,
/// or by `default_filter` when it is unset.
pub fn block_on(default_filter: &str, command: impl Future<Output = Result<(), Failure>>) -> ExitCode {
    init_logging(default_filter);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    report(runtime.block_on(command))
}

/// The exit status of a command's result, telling the user of a failure.
pub fn report(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

fn init_logging(default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default_filter.into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

/// How a long-running role reports: traces, metrics, log format.
#[derive(Debug, Clone, Args)]
pub struct TelemetryArgs {
    /// Export traces over OTLP/HTTP (JSON) to this endpoint, e.g. http://127.0.0.1:4318;
    /// off when unset.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9464.
    #[arg(long)]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Log lines as text, or as one JSON object each.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// How a role that sends webhooks retries them.
#[derive(Debug, Clone, Args)]
pub struct WebhookRetryArgs {
    /// Seconds after the first attempt during which a webhook is retried.
    #[arg(long, default_value_t = 3600)]
    pub webhook_retry_period: u64,
    /// Seconds before the first webhook retry; each next wait doubles it (with jitter).
    #[arg(long, default_value_t = 1.0)]
    pub webhook_first_delay: f64,
    /// The longest wait between two webhook attempts, in seconds.
    #[arg(long, default_value_t = 300)]
    pub webhook_max_delay: u64,
}

impl WebhookRetryArgs {
    /// The retry policy these arguments give.
    pub fn policy(&self) -> airlock_gateway::webhook::RetryPolicy {
        airlock_gateway::webhook::RetryPolicy {
            first_delay: std::time::Duration::from_secs_f64(self.webhook_first_delay.max(0.0)),
            max_delay: std::time::Duration::from_secs(self.webhook_max_delay),
            period: std::time::Duration::from_secs(self.webhook_retry_period),
            ..Default::default()
        }
    }
}

/// How a role's HTTP server holds up against slow and idle clients.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// Seconds a connection may take to send a complete request head, from when it opens and
    /// after each response; half-sent requests and idle keep-alive connections are closed.
    #[arg(long, default_value_t = 15.0)]
    pub header_read_timeout: f64,
    /// Seconds a request's body may take to arrive, from the end of its head.
    #[arg(long, default_value_t = 30.0)]
    pub body_read_timeout: f64,
    /// Connections served at once; more wait to be accepted until one closes. Keep it below
    /// the process's open-file limit.
    #[arg(long, default_value_t = 512)]
    pub max_connections: usize,
}

impl ServerArgs {
    /// The server limits these arguments give.
    pub fn limits(&self) -> Result<airlock_telemetry::server::ServerLimits, Failure> {
        if self.max_connections == 0 {
            return Err(Failure::config("--max-connections must be at least 1"));
        }
        Ok(airlock_telemetry::server::ServerLimits {
            header_read_timeout: seconds(self.header_read_timeout, "--header-read-timeout")?,
            body_read_timeout: seconds(self.body_read_timeout, "--body-read-timeout")?,
            max_connections: self.max_connections,
        })
    }
}

/// `value` seconds of flag `flag`: finite and above 0.
pub fn seconds(value: f64, flag: &str) -> Result<std::time::Duration, Failure> {
    std::time::Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| Failure::config(format!("{flag} must be a positive number of seconds")))
}

/// The format of log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Runs a long-running role on a single-threaded runtime with its telemetry: logs, traces
/// exported as asked, metrics served as asked; traces are flushed when the role ends.
pub fn block_on_role<F, Fut>(service: &str, telemetry: &TelemetryArgs, role: F) -> ExitCode
where
    F: FnOnce(Arc<Metrics>) -> Fut,
    Fut: Future<Output = Result<(), Failure>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let result = runtime.block_on(async {
        let config = TelemetryConfig {
            service: service.to_owned(),
            default_filter: LOG_ROLE.to_owned(),
            json_logs: telemetry.log_format == LogFormat::Json,
            otlp_endpoint: telemetry.otlp_endpoint.clone(),
        };
        let guard = airlock_telemetry::init(&config).map_err(|e| Failure::config(e.to_string()))?;
        let metrics = Arc::new(Metrics::new());
        if let Some(addr) = telemetry.metrics_listen {
            let bound = airlock_telemetry::metrics::serve(addr, metrics.clone())
                .await
                .map_err(|e| Failure::config(format!("--metrics-listen {addr}: {e}")))?;
            tracing::info!(%bound, "Serving metrics.");
        }
        let result = role(metrics).await;
        guard.shutdown().await;
        result
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// An HTTP client for the services a command asks (the management API, the gateway):
/// `https://` verified against the platform's roots, with rustls on ring (the build has no
/// default TLS provider).
pub fn http_client() -> Result<reqwest::Client, String> {
    use rustls_platform_verifier::BuilderVerifierExt as _;
    let tls = rustls_builder()?.with_platform_verifier().map_err(|e| e.to_string())?.with_no_client_auth();
    reqwest::Client::builder().tls_backend_preconfigured(tls).build().map_err(|e| e.to_string())
}

/// An HTTP client for `http://` URLs only: it trusts no certificate, and loads none (the
/// platform's roots cost more to load than a call to a local service takes).
pub fn plain_http_client() -> Result<reqwest::Client, String> {
    let tls = rustls_builder()?.with_root_certificates(rustls::RootCertStore::empty()).with_no_client_auth();
    reqwest::Client::builder().tls_backend_preconfigured(tls).build().map_err(|e| e.to_string())
}

fn rustls_builder() -> Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier>, String> {
    let crypto = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(crypto).with_safe_default_protocol_versions().map_err(|e| e.to_string())
}

/// This machine's name (`host` when it cannot be read).
pub fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_owned()).unwrap_or_else(|_| "host".into())
}

/// Connects to the broker for `role`, or says why not. Connections are named
/// `<prefix> <role> (<host>:<pid>)`, so operators (and fault-injecting tests) can tell them
/// apart in the broker's management view.
pub async fn connect(fleet: &FleetArgs, role: &str) -> Result<AmqpTransport, Failure> {
    let options = AmqpOptions::new(fleet.amqp.clone())
        .with_connection_name(format!("{} {role} ({}:{})", fleet.options.prefix, host_name(), std::process::id()))
        .with_ca_file(fleet.options.tls.ca_file.clone())
        .with_quorum_group_size(fleet.options.replication.quorum_group_size);
    AmqpTransport::connect_with(options)
        .await
        .map_err(|e| Failure { code: EXIT_UNAVAILABLE, message: format!("cannot reach the broker: {e}") })
}

/// Resolves when the process is asked to stop (SIGTERM or SIGINT). The handlers are in place
/// when this returns, not when the future is first polled: a role that says it is ready and
/// is then stopped before it waits for the signal stops cleanly all the same.
pub fn shutdown_signal() -> impl Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    let mut interrupt = signal(SignalKind::interrupt()).expect("a SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = interrupt.recv() => {}
        }
    }
}
