//! `airlock worker`: a policy worker over RabbitMQ, until SIGTERM or SIGINT.

use std::path::PathBuf;
use std::sync::Arc;

use airlock_telemetry::metrics::Metrics;
use airlock_worker::WorkerConfig;
use clap::Args;

use super::{Failure, FleetArgs, TelemetryArgs, connect, shutdown_signal};

/// Arguments of `airlock worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    /// Messages handled at once.
    #[arg(long, default_value_t = 64)]
    concurrency: u16,
    /// Where named policies live (reloaded when their files change).
    #[arg(long)]
    policy_dir: Option<PathBuf>,
    /// Recorded as `decided_by` of what this worker decides (default: host and pid).
    #[arg(long)]
    id: Option<String>,
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
}

/// Runs the worker until a signal, counting what it does in `metrics`.
pub async fn run(args: WorkerArgs, metrics: Arc<Metrics>) -> Result<(), Failure> {
    if let Some(dir) = &args.policy_dir
        && !dir.is_dir()
    {
        return Err(Failure::config(format!("--policy-dir {}: not a directory", dir.display())));
    }
    if args.concurrency == 0 {
        return Err(Failure::config("--concurrency must be at least 1"));
    }
    let transport = connect(&args.fleet, "worker").await?;
    let config = WorkerConfig {
        prefix: args.fleet.prefix,
        concurrency: args.concurrency,
        policy_dir: args.policy_dir,
        worker_id: args.id.unwrap_or_else(default_id),
        metrics,
    };
    airlock_worker::run(transport, config, shutdown_signal()).await.map_err(|e| Failure::other(e.to_string()))
}

/// `worker@host:pid`.
pub fn default_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_owned()).unwrap_or_else(|_| "host".into());
    format!("worker@{host}:{}", std::process::id())
}
