//! One module per subcommand, and what they share: the broker options, the runtime, logging.

pub mod audit;
pub mod bench;
pub mod demo;
pub mod monitor;
pub mod policy;
pub mod request;
pub mod review;
pub mod reviewer;
pub mod topology;
pub mod worker;

use std::future::Future;
use std::process::ExitCode;

use airlock_transport::{AmqpOptions, AmqpTransport};
use clap::Args;

/// Exit status for bad usage or a bad configuration (sysexits' EX_USAGE, as linkerd uses).
pub const EXIT_CONFIG: u8 = 64;

/// Exit status when the broker cannot be reached (sysexits' EX_UNAVAILABLE).
pub const EXIT_UNAVAILABLE: u8 = 69;

/// Where the fleet lives.
#[derive(Debug, Clone, Args)]
pub struct FleetArgs {
    /// The broker, e.g. amqp://guest:guest@127.0.0.1:5672/%2f
    #[arg(long, env = "AIRLOCK_AMQP_URL")]
    pub amqp: String,
    /// The fleet's prefix: every queue and exchange name starts with it.
    #[arg(long, env = "AIRLOCK_PREFIX", default_value = "airlock")]
    pub prefix: String,
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

/// Logs of a long-running role: what it does, at info.
pub const LOG_ROLE: &str = "warn,airlock=info";

/// Logs of a one-shot tool whose output is the point: only problems.
pub const LOG_TOOL: &str = "error";

/// Runs a command on a single-threaded runtime, with logs on stderr filtered by `RUST_LOG`,
/// or by `default_filter` when it is unset.
pub fn block_on(default_filter: &str, command: impl Future<Output = Result<(), Failure>>) -> ExitCode {
    init_logging(default_filter);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    match runtime.block_on(command) {
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

/// Connects to the broker for `role`, or says why not. Connections are named
/// `<prefix> <role>`, so operators (and fault-injecting tests) can tell them apart.
pub async fn connect(fleet: &FleetArgs, role: &str) -> Result<AmqpTransport, Failure> {
    let options = AmqpOptions::new(fleet.amqp.clone()).with_connection_name(format!("{} {role}", fleet.prefix));
    AmqpTransport::connect_with(options)
        .await
        .map_err(|e| Failure { code: EXIT_UNAVAILABLE, message: format!("cannot reach the broker: {e}") })
}

/// Resolves when the process is asked to stop (SIGTERM or SIGINT).
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
