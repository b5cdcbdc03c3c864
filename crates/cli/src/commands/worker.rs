//! `airlock worker`: a policy worker over RabbitMQ, until SIGTERM or SIGINT.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use airlock_integrity::{FleetKey, KeyFile as _, PublicKeys};
use airlock_telemetry::metrics::Metrics;
use airlock_worker::WorkerConfig;
use airlock_worker::trust::Trust;
use clap::Args;
use tracing::warn;

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
    /// The fleet key that proves replies and seals step tasks (`fleet.key` of `airlock keys
    /// generate`). Required unless --insecure-unsigned.
    #[arg(long, env = "AIRLOCK_SIGNING_KEY", required_unless_present = "insecure_unsigned")]
    signing_key: Option<PathBuf>,
    /// Public keys of the reviewer services whose human answers count (`reviewer.pub` files,
    /// comma-separated or repeated).
    #[arg(long, env = "AIRLOCK_REVIEWER_KEYS", value_delimiter = ',')]
    reviewer_keys: Vec<PathBuf>,
    /// Take an external step's answers only from this broker user, as STEP=USER (repeated
    /// for more users or steps); steps not named take answers from any user.
    #[arg(long = "step-user", value_parser = parse_step_user)]
    step_users: Vec<(String, String)>,
    /// Run without keys: replies unproved, chain state unsealed, answers unchecked. Anyone who
    /// can publish on the broker can then make a call run.
    #[arg(long, conflicts_with_all = ["signing_key", "reviewer_keys"])]
    insecure_unsigned: bool,
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
    let trust = trust(args.signing_key.as_deref(), &args.reviewer_keys)?;
    let trust = args.step_users.into_iter().fold(trust, |trust, (step, user)| trust.with_step_users(step, [user]));
    let transport = connect(&args.fleet, "worker").await?;
    let config = WorkerConfig {
        prefix: args.fleet.options.prefix,
        concurrency: args.concurrency,
        policy_dir: args.policy_dir,
        worker_id: args.id.unwrap_or_else(default_id),
        metrics,
        trust,
    };
    airlock_worker::run(transport, config, shutdown_signal()).await.map_err(|e| Failure::other(e.to_string()))
}

/// The worker's keys; with none (`--insecure-unsigned`), a warning at every start.
fn trust(signing_key: Option<&Path>, reviewer_keys: &[PathBuf]) -> Result<Trust, Failure> {
    let Some(path) = signing_key else {
        warn!("Running unsigned (--insecure-unsigned): anyone who can publish on the broker can make a call run.");
        return Ok(Trust::insecure());
    };
    let key = FleetKey::load(path).map_err(|e| Failure::config(format!("--signing-key: {e}")))?;
    let reviewers = match reviewer_keys {
        [] => {
            warn!("No --reviewer-keys: every human answer will be refused.");
            PublicKeys::default()
        }
        paths => PublicKeys::load(paths).map_err(|e| Failure::config(format!("--reviewer-keys: {e}")))?,
    };
    Ok(Trust::signed(key, reviewers))
}

fn parse_step_user(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((step, user)) if !step.is_empty() && !user.is_empty() => Ok((step.to_owned(), user.to_owned())),
        _ => Err(format!("expected STEP=USER, got '{text}'")),
    }
}

/// `worker@host:pid`.
pub fn default_id() -> String {
    format!("worker@{}:{}", super::host_name(), std::process::id())
}
