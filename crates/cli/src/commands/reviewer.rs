//! `airlock reviewer`: the reviewer service (human tasks → store → web UI and API → answers),
//! and `airlock reviewer add-token`, which adds a reviewer to a tokens file.

use std::net::SocketAddr;
use std::path::PathBuf;

use airlock_reviewer::auth::{self, Reviewers};
use airlock_reviewer::canary::Canaries;
use airlock_reviewer::desk::Claims;
use airlock_reviewer::desk::claims::{DEFAULT_CLAIM, MAX_CLAIM};
use airlock_reviewer::site::PublicUrl;
use airlock_reviewer::slack::Slack;
use airlock_reviewer::webhooks::{self, Webhooks};
use airlock_reviewer::{ReviewerConfig, instance_for_store};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use airlock_telemetry::metrics::Metrics;

use clap::{Args, Subcommand};

use super::{
    Failure, LOG_TOOL, OptionalFleetArgs, ServerArgs, TelemetryArgs, WebhookRetryArgs, block_on, block_on_role,
    connect, reviewer_signing_key, shutdown_signal,
};

/// Arguments of `airlock reviewer`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ReviewerArgs {
    #[command(subcommand)]
    command: Option<ReviewerCommand>,
    #[command(flatten)]
    serve: ServeArgs,
}

/// Subcommands of `airlock reviewer`.
#[derive(Debug, Subcommand)]
pub enum ReviewerCommand {
    /// Add a reviewer to a tokens file and print its new token (shown this once only).
    AddToken(AddTokenArgs),
}

/// Arguments of the service itself.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    fleet: OptionalFleetArgs,
    /// The key this service signs the answers it records with (`reviewer.key` of `airlock
    /// keys generate`); signed workers take human answers only signed by a key they hold.
    #[arg(long, env = "AIRLOCK_REVIEWER_SIGNING_KEY")]
    signing_key: Option<PathBuf>,
    /// Where tasks are stored: sqlite:PATH or postgres://user@host/db.
    #[arg(long, env = "AIRLOCK_REVIEWER_STORE", default_value = "sqlite:airlock-reviewer.db")]
    store: String,
    /// The address of the web UI and the API.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The URL browsers reach the UI at, e.g. https://review.example.com behind a TLS proxy:
    /// only its host is served, only its origin may post, and https makes cookies Secure.
    #[arg(long, env = "AIRLOCK_REVIEWER_PUBLIC_URL")]
    public_url: Option<PublicUrl>,
    /// The human pools served, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pools: Vec<String>,
    /// The reviewers: a YAML list of {name, token_sha256, pools} (see `add-token`).
    #[arg(long)]
    tokens: Option<PathBuf>,
    /// Endpoints that page people about tasks: a YAML list of {url, pools: [..] or "*",
    /// secret: {file: PATH} or {env: NAME} (whsec_…), format: standard|slack, events: [..]}.
    #[arg(long, env = "AIRLOCK_REVIEWER_WEBHOOKS")]
    webhooks: Option<PathBuf>,
    #[command(flatten)]
    webhook_retry: WebhookRetryArgs,
    /// The Slack app that posts tasks with buttons and hears their presses at
    /// /slack/interactions: a YAML file of {api_url?, bot_token: {file|env}, signing_secret:
    /// {file|env}, channels: {pool: channel id}, users: {Slack user id: reviewer}}.
    #[arg(long, env = "AIRLOCK_REVIEWER_SLACK")]
    slack: Option<PathBuf>,
    /// Known-bad calls to plant among the pools' real tasks: a YAML or JSON list of {pool,
    /// function, arguments, explanation (why it is bad), message?, view?, expected? (the
    /// decisions that catch it; default reject, terminate), name?, trail?}.
    #[arg(long, env = "AIRLOCK_REVIEWER_CANARIES", requires = "canary_rate")]
    canaries: Option<PathBuf>,
    /// The share of a pool's real tasks after which a canary is planted, above 0 and at most
    /// 1: 0.02 plants about one per 50 real tasks, at random.
    #[arg(long, env = "AIRLOCK_REVIEWER_CANARY_RATE", requires = "canaries")]
    canary_rate: Option<f64>,
    /// Names this service's queue of cancels, and is `decided_by` of the tasks the fleet's
    /// control ends; default: derived from --store, so processes sharing a store share it.
    #[arg(long)]
    id: Option<String>,
    /// Where named policies live (the workers' --policy-dir): their `incident:` rule then
    /// ends the pending tasks of a run once enough incidents are marked.
    #[arg(long)]
    policy_dir: Option<PathBuf>,
    /// How long a reviewer's claim on a task lasts when they ask for no time, in seconds.
    #[arg(long, default_value_t = DEFAULT_CLAIM.as_secs())]
    claim_for: u64,
    /// The longest claim a reviewer may ask for, in seconds.
    #[arg(long, default_value_t = MAX_CLAIM.as_secs())]
    claim_max: u64,
    /// Opening (focusing) a task in the UI claims it for --claim-for seconds.
    #[arg(long)]
    claim_on_open: bool,
    #[command(flatten)]
    server: ServerArgs,
    #[command(flatten)]
    telemetry: TelemetryArgs,
}

/// Arguments of `airlock reviewer add-token`.
#[derive(Debug, Args)]
pub struct AddTokenArgs {
    /// The tokens file (created if missing).
    #[arg(long)]
    tokens: PathBuf,
    /// The reviewer's name, recorded as `decided_by` of its answers.
    #[arg(long)]
    name: String,
    /// The pools the reviewer may decide, comma-separated (`*` for all).
    #[arg(long, value_delimiter = ',', required = true)]
    pools: Vec<String>,
    /// An admin also sees the canaries' catch rates of those pools, and may see the runs under
    /// control and throw switches on them.
    #[arg(long)]
    admin: bool,
    /// The pools, comma-separated (`*` for all of the reviewer's), where the reviewer may
    /// decide or release a task another reviewer claimed.
    #[arg(long = "override", value_delimiter = ',')]
    overrides: Vec<String>,
}

/// Runs the service until a signal (with its telemetry), or adds a token.
pub fn run(args: ReviewerArgs) -> ExitCode {
    match args.command {
        Some(ReviewerCommand::AddToken(add)) => block_on(LOG_TOOL, async { add_token(add) }),
        None => {
            let telemetry = args.serve.telemetry.clone();
            block_on_role("airlock-reviewer", &telemetry, |metrics| serve(args.serve, metrics))
        }
    }
}

fn add_token(args: AddTokenArgs) -> Result<(), Failure> {
    let token = auth::add_token(&args.tokens, &args.name, &args.pools, args.admin, &args.overrides)
        .map_err(|e| Failure::config(e.to_string()))?;
    let overrides = match args.overrides.is_empty() {
        true => String::new(),
        false => format!("; override: {}", args.overrides.join(", ")),
    };
    eprintln!(
        "Added {} '{}' (pools: {}{overrides}) to {}. The token below is shown once and stored nowhere:",
        if args.admin { "admin" } else { "reviewer" },
        args.name,
        args.pools.join(", "),
        args.tokens.display()
    );
    println!("{token}");
    Ok(())
}

async fn serve(args: ServeArgs, metrics: Arc<Metrics>) -> Result<(), Failure> {
    let fleet = args.fleet.required().ok_or_else(|| Failure::config("--amqp (or AIRLOCK_AMQP_URL) is required"))?;
    let tokens =
        args.tokens.ok_or_else(|| Failure::config("--tokens FILE is required (see `airlock reviewer add-token`)"))?;
    let reviewers = Reviewers::load(&tokens).map_err(|e| Failure::config(e.to_string()))?;
    if reviewers.is_empty() {
        return Err(Failure::config(format!(
            "{} lists no reviewer; add one with `airlock reviewer add-token`",
            tokens.display()
        )));
    }
    let endpoints = match &args.webhooks {
        Some(path) => {
            webhooks::load(path, |name| std::env::var(name).ok()).map_err(|e| Failure::config(e.to_string()))?
        }
        None => Vec::new(),
    };
    let slack = match &args.slack {
        Some(path) => Some(Arc::new(
            Slack::load(path, |name| std::env::var(name).ok()).map_err(|e| Failure::config(e.to_string()))?,
        )),
        None => None,
    };
    let webhooks = Webhooks { endpoints, retry: args.webhook_retry.policy(), slack };
    let canaries = match (&args.canaries, args.canary_rate) {
        (Some(path), Some(rate)) => Some(Canaries::load(path, rate).map_err(|e| Failure::config(e.to_string()))?),
        _ => None,
    };
    let pools: Vec<String> = args.pools.iter().map(|p| p.trim().to_owned()).filter(|p| !p.is_empty()).collect();
    let config = ReviewerConfig {
        prefix: fleet.options.prefix.clone(),
        policy_dir: args.policy_dir,
        instance: args.id.unwrap_or_else(|| instance_for_store(&args.store)),
        metrics,
        pools,
        store: args.store,
        listen: args.listen,
        public_url: args.public_url,
        server: args.server.limits()?,
        reviewers,
        signing_key: reviewer_signing_key(args.signing_key.as_deref())?,
        webhooks,
        canaries,
        claims: Claims {
            default: Duration::from_secs(args.claim_for),
            max: Duration::from_secs(args.claim_max),
            on_open: args.claim_on_open,
        },
    };
    config.validate().map_err(|e| Failure::config(e.to_string()))?;
    let transport = connect(&fleet, "reviewer").await?;
    airlock_reviewer::run(transport, config, shutdown_signal()).await.map_err(|e| Failure::other(e.to_string()))
}
