//! `airlock gateway`: the HTTP gateway in front of the fleet ([`airlock_gateway::run`]);
//! `airlock gateway add-token`, which adds a caller to a tokens file; `airlock gateway
//! webhook-secret`, which prints a new `whsec_…` secret; `airlock gateway bench`, which
//! measures a gateway holding many waiting requests.

mod bench;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use airlock_gateway::decisions::Quota;
use airlock_gateway::limit::RateConfig;
use airlock_gateway::tokens::{self, Tokens};
use airlock_gateway::webhook::WebhookSecret;
use airlock_gateway::{GatewayConfig, Limits, WebhookConfig};
use airlock_telemetry::metrics::Metrics;
use clap::{Args, Subcommand};

use super::{
    Failure, LOG_TOOL, OptionalFleetArgs, ServerArgs, TelemetryArgs, VerifyArgs, WebhookRetryArgs, block_on,
    block_on_role, connect, seconds, shutdown_signal,
};

/// Arguments of `airlock gateway`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct GatewayArgs {
    #[command(subcommand)]
    command: Option<GatewayCommand>,
    #[command(flatten)]
    serve: ServeArgs,
}

/// Subcommands of `airlock gateway`.
#[derive(Debug, Subcommand)]
pub enum GatewayCommand {
    /// Add a caller to a tokens file and print its new token (shown this once only).
    AddToken(AddTokenArgs),
    /// Print a new webhook secret (`whsec_…`) for --webhook-secret.
    WebhookSecret,
    /// Hold many waiting requests on one gateway against a fleet with no worker, then start
    /// a worker: the gateway's memory per waiting request, and how soon decisions come.
    Bench(bench::BenchArgs),
}

/// Arguments of the service itself.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    fleet: OptionalFleetArgs,
    /// The address of the HTTP API.
    #[arg(long, env = "AIRLOCK_GATEWAY_LISTEN", default_value = "127.0.0.1:8090")]
    listen: SocketAddr,
    /// The callers: a YAML list of {name, token_sha256, policies, inline} (see `add-token`).
    #[arg(long, env = "AIRLOCK_GATEWAY_TOKENS")]
    tokens: Option<PathBuf>,
    /// The secret webhooks are signed with (`whsec_…`, see `webhook-secret`); without it,
    /// requests with a callback_url are refused.
    #[arg(long, env = "AIRLOCK_GATEWAY_WEBHOOK_SECRET", hide_env_values = true)]
    webhook_secret: Option<WebhookSecret>,
    /// The webhook delivery log, a SQLite file (created if missing): webhooks not yet
    /// delivered survive a restart and are resumed. Without it they live in memory only.
    #[arg(long, env = "AIRLOCK_GATEWAY_WEBHOOK_LOG")]
    webhook_log: Option<PathBuf>,
    /// Callback URLs may name loopback, link-local, private, unspecified and cloud metadata
    /// addresses (refused without it, when taken and at every attempt): for receivers on the
    /// gateway's own host or network.
    #[arg(long, env = "AIRLOCK_GATEWAY_ALLOW_PRIVATE_CALLBACKS")]
    allow_private_callbacks: bool,
    /// The records store, a SQLite file (created if missing): decisions and idempotency keys
    /// survive a restart, for --retention. Without it they live in memory only.
    #[arg(long, env = "AIRLOCK_GATEWAY_STORE")]
    store: Option<PathBuf>,
    #[command(flatten)]
    verify: VerifyArgs,
    /// The largest request body, in bytes.
    #[arg(long, default_value_t = 1024 * 1024)]
    max_body: usize,
    /// The longest `Prefer: wait` honoured, in seconds.
    #[arg(long, default_value_t = 60)]
    max_wait: u64,
    /// Seconds the fleet may take when a request gives no timeout (then it fails closed).
    #[arg(long, default_value_t = 30.0)]
    default_timeout: f64,
    /// The longest timeout a request may give, in seconds.
    #[arg(long, default_value_t = 86_400.0)]
    max_timeout: f64,
    /// Seconds a decision stays readable (and its idempotency key remembered) once made.
    #[arg(long, default_value_t = 3600)]
    retention: u64,
    /// Requests per second each token may make, sustained.
    #[arg(long, default_value_t = 50.0)]
    rate: f64,
    /// Requests each token may make at once after a quiet spell.
    #[arg(long, default_value_t = 100)]
    burst: u32,
    /// Requests each token may have pending (sent, not yet decided) at once; `429
    /// too_many_pending` beyond.
    #[arg(long, default_value_t = Quota::default().requests)]
    max_pending: usize,
    /// Bytes of request bodies each token may have pending at once (at least --max-body);
    /// `429 too_many_pending_bytes` beyond.
    #[arg(long, default_value_t = Quota::default().bytes)]
    max_pending_bytes: usize,
    #[command(flatten)]
    server: ServerArgs,
    #[command(flatten)]
    webhook_retry: WebhookRetryArgs,
    #[command(flatten)]
    telemetry: TelemetryArgs,
}

/// Arguments of `airlock gateway add-token`.
#[derive(Debug, Args)]
pub struct AddTokenArgs {
    /// The tokens file (created if missing).
    #[arg(long)]
    tokens: PathBuf,
    /// The caller's name.
    #[arg(long)]
    name: String,
    /// A named policy the caller may use (repeat or comma-separate; `*` for all).
    #[arg(long = "policy", value_delimiter = ',')]
    policies: Vec<String>,
    /// The caller may also send policy documents of its own.
    #[arg(long)]
    inline: bool,
}

/// Runs the gateway until a signal (with its telemetry), or a subcommand.
pub fn run(args: GatewayArgs) -> ExitCode {
    match args.command {
        Some(GatewayCommand::AddToken(add)) => block_on(LOG_TOOL, async { add_token(add) }),
        Some(GatewayCommand::WebhookSecret) => block_on(LOG_TOOL, async {
            println!("{}", WebhookSecret::generate());
            Ok(())
        }),
        Some(GatewayCommand::Bench(bench)) => block_on(LOG_TOOL, bench::run(bench)),
        None => {
            let telemetry = args.serve.telemetry.clone();
            block_on_role("airlock-gateway", &telemetry, |metrics| serve(args.serve, metrics))
        }
    }
}

fn add_token(args: AddTokenArgs) -> Result<(), Failure> {
    let token = tokens::add_token(&args.tokens, &args.name, &args.policies, args.inline)
        .map_err(|e| Failure::config(e.to_string()))?;
    eprintln!(
        "Added '{}' (policies: {}; inline: {}) to {}. The token below is shown once and stored nowhere:",
        args.name,
        if args.policies.is_empty() { "none".to_owned() } else { args.policies.join(", ") },
        if args.inline { "yes" } else { "no" },
        args.tokens.display()
    );
    println!("{token}");
    Ok(())
}

async fn serve(args: ServeArgs, metrics: Arc<Metrics>) -> Result<(), Failure> {
    let fleet = args.fleet.required().ok_or_else(|| Failure::config("--amqp (or AIRLOCK_AMQP_URL) is required"))?;
    let tokens_file =
        args.tokens.ok_or_else(|| Failure::config("--tokens FILE is required (see `airlock gateway add-token`)"))?;
    let tokens = Tokens::load(&tokens_file).map_err(|e| Failure::config(e.to_string()))?;
    let limits = Limits {
        max_body: args.max_body,
        max_wait: Duration::from_secs(args.max_wait),
        default_timeout: seconds(args.default_timeout, "--default-timeout")?,
        max_timeout: seconds(args.max_timeout, "--max-timeout")?,
        retention: Duration::from_secs(args.retention),
        rate: RateConfig { per_second: args.rate, burst: args.burst },
        server: args.server.limits()?,
        pending: Quota { requests: args.max_pending, bytes: args.max_pending_bytes },
    };
    if args.webhook_log.is_some() && args.webhook_secret.is_none() {
        return Err(Failure::config("--webhook-log is for callbacks: it needs --webhook-secret"));
    }
    if args.allow_private_callbacks && args.webhook_secret.is_none() {
        return Err(Failure::config("--allow-private-callbacks is for callbacks: it needs --webhook-secret"));
    }
    let webhooks = args.webhook_secret.map(|secret| WebhookConfig {
        secret,
        retry: args.webhook_retry.policy(),
        log: args.webhook_log,
        allow_private_callbacks: args.allow_private_callbacks,
    });
    let mut config = GatewayConfig {
        prefix: fleet.options.prefix.clone(),
        runner_id: String::new(),
        listen: args.listen,
        tokens,
        replies: args.verify.replies()?,
        limits,
        webhooks,
        store: args.store,
        metrics,
    };
    config.validate().map_err(|e| Failure::config(format!("{}: {e}", tokens_file.display())))?;
    let transport = connect(&fleet, "gateway").await?;
    config.runner_id = airlock_gateway::runner_id(transport.user());
    airlock_gateway::run(transport, config, shutdown_signal()).await.map_err(|e| Failure::other(e.to_string()))
}
