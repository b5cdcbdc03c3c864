//! `airlock monitor`: a model-based monitor serving one external step, until SIGTERM or
//! SIGINT; and `airlock monitor calibrate`, its scores against people's decisions.

use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use airlock_monitor::calibrate;
use airlock_monitor::prompt::{Limits, Template};
use airlock_monitor::provider::{ProviderConfig, ProviderKind};
use airlock_monitor::retry::RetryPolicy;
use airlock_monitor::{MonitorConfig, MonitorError};
use airlock_telemetry::metrics::Metrics;
use clap::{Args, Subcommand};

use super::{Failure, LOG_TOOL, OptionalFleetArgs, TelemetryArgs, block_on, block_on_role, connect, shutdown_signal};

/// Arguments of `airlock monitor`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct MonitorArgs {
    #[command(subcommand)]
    command: Option<MonitorCommand>,
    #[command(flatten)]
    run: RunArgs,
}

/// The model's API, as `--provider` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProviderArg {
    /// OpenAI chat completions (also vLLM, Ollama, llama.cpp).
    #[value(name = "openai")]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl From<ProviderArg> for ProviderKind {
    fn from(provider: ProviderArg) -> Self {
        match provider {
            ProviderArg::OpenAi => ProviderKind::OpenAi,
            ProviderArg::Anthropic => ProviderKind::Anthropic,
        }
    }
}

/// What else `airlock monitor` does.
#[derive(Debug, Subcommand)]
pub enum MonitorCommand {
    /// Compare a monitor's scores with people's decisions from a decision log (JSONL).
    Calibrate(CalibrateArgs),
}

/// Arguments of a running monitor.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    fleet: OptionalFleetArgs,
    /// The external step served: tasks come from `<prefix>.step.<step>`.
    #[arg(long)]
    step: Option<String>,
    /// The model's API.
    #[arg(long, value_enum)]
    provider: Option<ProviderArg>,
    /// The API's base URL (default: the official one; e.g. http://127.0.0.1:11434/v1 for Ollama).
    #[arg(long)]
    base_url: Option<String>,
    /// The model's name.
    #[arg(long)]
    model: Option<String>,
    /// The environment variable holding the API key (default: OPENAI_API_KEY or
    /// ANTHROPIC_API_KEY). Unset, no key is sent.
    #[arg(long)]
    api_key_env: Option<String>,
    /// Tasks, and so model calls, in flight at once.
    #[arg(long, default_value_t = 8)]
    concurrency: u16,
    /// A prompt template file (placeholders: {{call}}, {{history}}, {{view}}, {{output}}, …).
    #[arg(long)]
    prompt: Option<PathBuf>,
    /// The answer when the model cannot give one (a step's `fallback` parameter overrides it).
    #[arg(long, default_value = "escalate", value_parser = airlock_monitor::parse_fallback)]
    fallback: airlock_policy::Decision,
    /// Attempts per task, the first included (429, 5xx, timeouts and bad replies are retried).
    #[arg(long, default_value_t = 4)]
    attempts: u32,
    /// Seconds one model call may take (less when the step's deadline is nearer).
    #[arg(long, default_value_t = 60.0)]
    request_timeout: f64,
    /// Do not ask for structured output (for servers that reject `response_format` or tools).
    #[arg(long)]
    no_structured_output: bool,
    /// The longest reply, in tokens (Anthropic default 1024; OpenAI default none).
    #[arg(long)]
    max_tokens: Option<u32>,
    /// Sampling temperature (default: the API's).
    #[arg(long)]
    temperature: Option<f64>,
    /// Recorded, with the model, as `decided_by` (default: monitor-<step>@host:pid).
    #[arg(long)]
    id: Option<String>,
    #[command(flatten)]
    telemetry: TelemetryArgs,
}

/// Arguments of `airlock monitor calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The decision log: one decision per line, as `airlock request` prints them.
    #[arg(long)]
    log: PathBuf,
    /// The monitor's step name (default: the first trail entry with a score).
    #[arg(long)]
    step: Option<String>,
    /// Also draw the table as an SVG chart into this file.
    #[arg(long)]
    svg: Option<PathBuf>,
}

/// Runs the monitor, or calibrates; each on the runtime it needs.
pub fn run(args: MonitorArgs) -> ExitCode {
    match args.command {
        Some(MonitorCommand::Calibrate(args)) => block_on(LOG_TOOL, async move { calibrate(args) }),
        None => {
            let telemetry = args.run.telemetry.clone();
            block_on_role("airlock-monitor", &telemetry, |metrics| serve(args.run, metrics))
        }
    }
}

/// Runs the monitor until a signal, counting what it does in `metrics`.
async fn serve(args: RunArgs, metrics: Arc<Metrics>) -> Result<(), Failure> {
    let missing = |what: &str| Failure::config(format!("--{what} is required"));
    // Optional in clap, so that `airlock monitor calibrate` needs none of them.
    let fleet = args.fleet.required().ok_or_else(|| missing("amqp"))?;
    let step = args.step.ok_or_else(|| missing("step"))?;
    let kind = ProviderKind::from(args.provider.ok_or_else(|| missing("provider"))?);
    let model = args.model.ok_or_else(|| missing("model"))?;
    let template = match &args.prompt {
        None => Template::default(),
        Some(file) => {
            let text = fs::read_to_string(file).map_err(|e| Failure::config(format!("{}: {e}", file.display())))?;
            Template::parse(text).map_err(|e| Failure::config(format!("{}: {e}", file.display())))?
        }
    };
    if !(args.request_timeout > 0.0 && args.request_timeout.is_finite()) {
        return Err(Failure::config("--request-timeout must be a positive number of seconds"));
    }
    let key_env = args.api_key_env.unwrap_or_else(|| kind.default_key_env().to_owned());
    let api_key = std::env::var(&key_env).ok().filter(|key| !key.is_empty());
    if api_key.is_none() {
        tracing::warn!(variable = %key_env, "No API key in the environment; requests carry none.");
    }
    let config = MonitorConfig {
        prefix: fleet.options.prefix.clone(),
        step: step.clone(),
        monitor_id: args.id.unwrap_or_else(|| default_id(&step)),
        concurrency: args.concurrency,
        provider: ProviderConfig {
            kind,
            base_url: args.base_url.unwrap_or_else(|| kind.default_base_url().to_owned()),
            model,
            api_key,
            structured: !args.no_structured_output,
            max_tokens: args.max_tokens,
            temperature: args.temperature,
        },
        template,
        limits: Limits::default(),
        fallback: args.fallback,
        retry: RetryPolicy {
            attempts: args.attempts,
            attempt_timeout: Duration::from_secs_f64(args.request_timeout),
            ..RetryPolicy::default()
        },
        metrics,
    };
    config.validate().map_err(|e| Failure::config(e.to_string()))?;
    let transport = connect(&fleet, &format!("monitor {step}")).await?;
    airlock_monitor::run(transport, config, shutdown_signal()).await.map_err(|e| match e {
        MonitorError::Config(e) => Failure::config(e.to_string()),
        MonitorError::Provider(e) => Failure::config(e.to_string()),
        e => Failure::other(e.to_string()),
    })
}

fn calibrate(args: CalibrateArgs) -> Result<(), Failure> {
    let file = fs::File::open(&args.log).map_err(|e| Failure::config(format!("{}: {e}", args.log.display())))?;
    let log = calibrate::read_log(std::io::BufReader::new(file), args.step.as_deref())
        .map_err(|e| Failure::config(format!("{}: {e}", args.log.display())))?;
    if log.samples.is_empty() {
        return Err(Failure::other(format!("{}: no decision carries a monitor score", args.log.display())));
    }
    let rows = calibrate::rows(&log.samples, calibrate::default_thresholds());
    print!("{}", calibrate::table(&log, &rows));
    if let Some(svg) = &args.svg {
        let title = format!("{} — {}", args.step.as_deref().unwrap_or("monitor"), args.log.display());
        fs::write(svg, calibrate::svg(&rows, &title)).map_err(|e| Failure::other(format!("{}: {e}", svg.display())))?;
    }
    Ok(())
}

/// `monitor-<step>@host:pid`.
fn default_id(step: &str) -> String {
    format!("monitor-{step}@{}:{}", super::host_name(), std::process::id())
}
