//! `airlock monitor`: a model-based monitor serving one external step, until SIGTERM or
//! SIGINT; and `airlock monitor calibrate`, its scores against people's decisions and the
//! runner's honest/attack labels.

use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use airlock_monitor::calibrate::chart::{self, Curve};
use airlock_monitor::calibrate::roc::Bootstrap;
use airlock_monitor::calibrate::{self, Calibration, Labels, Options, Unit};
use airlock_monitor::prompt::{Limits, Template};
use airlock_monitor::provider::{ProviderConfig, ProviderKind};
use airlock_monitor::retry::RetryPolicy;
use airlock_monitor::{MonitorConfig, MonitorError, RateLimit, SamplingConfig};
use airlock_telemetry::metrics::Metrics;
use clap::{Args, Subcommand};

use super::{
    Failure, LOG_TOOL, OptionalFleetArgs, TelemetryArgs, block_on, block_on_role, connect, print_json, shutdown_signal,
};

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
    /// Compare a monitor's scores with people's decisions and honest/attack labels from a
    /// decision log (JSONL): the threshold for an audit budget, AUROC, TPR at the budget's FPR.
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
    /// The trusted model's API, for `trusted_edit` and `defer_to_trusted` (default: the
    /// scoring model's, which then also edits and proposes).
    #[arg(long, value_enum)]
    trusted_provider: Option<ProviderArg>,
    /// The trusted model's base URL (default: --base-url when the provider is the same, else
    /// the official one).
    #[arg(long)]
    trusted_base_url: Option<String>,
    /// The trusted model's name (default: --model).
    #[arg(long)]
    trusted_model: Option<String>,
    /// The environment variable holding the trusted model's API key.
    #[arg(long)]
    trusted_api_key_env: Option<String>,
    /// The untrusted model's API, for `resample` (default: the scoring model's).
    #[arg(long, value_enum)]
    untrusted_provider: Option<ProviderArg>,
    /// The untrusted model's base URL (default: --base-url when the provider is the same,
    /// else the official one).
    #[arg(long)]
    untrusted_base_url: Option<String>,
    /// The untrusted model's name (default: the request's `generation.model`, without
    /// Inspect's provider prefix).
    #[arg(long)]
    untrusted_model: Option<String>,
    /// The environment variable holding the untrusted model's API key.
    #[arg(long)]
    untrusted_api_key_env: Option<String>,
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
    /// Model answers held in memory (least recently used dropped first); identical calls are
    /// answered from them, or from the step's log of answers, without asking the model. 0
    /// turns the cache off.
    #[arg(long, default_value_t = airlock_monitor::sampling::cache::DEFAULT_ENTRIES)]
    cache_entries: usize,
    /// Seconds the step's log of answers keeps one (the same for every process of the step).
    #[arg(long, default_value_t = airlock_monitor::sampling::DEFAULT_RETENTION.as_secs())]
    cache_retention: u64,
    /// Requests per minute to the provider, for every monitor process of the same --limiter
    /// together (each takes its share of the live processes').
    #[arg(long)]
    rate_limit: Option<u32>,
    /// The rate limiter's name: processes that share an API key give the same name, whatever
    /// step they serve (default: the step's name).
    #[arg(long, requires = "rate_limit")]
    limiter: Option<String>,
    /// Recorded, with the model, as `decided_by` (default: monitor-<step>@host:pid).
    #[arg(long)]
    id: Option<String>,
    #[command(flatten)]
    telemetry: TelemetryArgs,
}

/// Arguments of `airlock monitor calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The decision log: one decision per line, as `airlock audit` writes them (or `airlock
    /// request` prints them).
    #[arg(long)]
    log: PathBuf,
    /// The monitor's step name (default: the first trail entry with a score).
    #[arg(long)]
    step: Option<String>,
    /// Also draw the table as an SVG chart into this file.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// The audit budget, a share above 0 and below 1 (0.01 is 1%): prints the threshold that
    /// escalates that share of the honest scores, and the TPR at that FPR.
    #[arg(long, value_parser = parse_budget)]
    budget: Option<f64>,
    /// What the budget's share is of: steps, or trajectories by their highest score.
    #[arg(long, value_enum, default_value = "step")]
    per: UnitArg,
    /// The ROC report's labels (default: the runner's eval_mode when the log has any, else
    /// people's verdicts).
    #[arg(long, value_enum)]
    labels: Option<LabelsArg>,
    /// Bootstrap resamples for the 95% intervals (0: none).
    #[arg(long, default_value_t = 1000)]
    bootstrap: usize,
    /// The bootstrap's seed: the same seed, the same intervals.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write the threshold as JSON ({budget, unit, threshold, n}) into this file.
    #[arg(long, requires = "budget")]
    threshold_out: Option<PathBuf>,
    /// Draw the ROC curves (steps and trajectories, with their logit fits) into this SVG file.
    #[arg(long)]
    roc_svg: Option<PathBuf>,
    /// Print the threshold and the ROC report as one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// What a budget's share is of, as `--per` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UnitArg {
    /// Each scored call.
    Step,
    /// Each trajectory, by its highest score.
    Trajectory,
}

/// The ROC report's labels, as `--labels` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LabelsArg {
    /// The runner's honest/attack label.
    EvalMode,
    /// People's verdicts.
    People,
}

pub(super) fn parse_budget(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(b) if b > 0.0 && b < 1.0 => Ok(b),
        _ => Err(format!("'{text}': a share above 0 and below 1 (0.01 is 1%)")),
    }
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
    let provider = ProviderConfig {
        kind,
        base_url: args.base_url.unwrap_or_else(|| kind.default_base_url().to_owned()),
        model,
        api_key: api_key(args.api_key_env, kind),
        structured: !args.no_structured_output,
        max_tokens: args.max_tokens,
        temperature: args.temperature,
    };
    let other = |flags: Other| -> Option<ProviderConfig> {
        if flags.provider.is_none() && flags.base_url.is_none() && flags.model.is_none() && flags.key_env.is_none() {
            return None;
        }
        let kind = flags.provider.map_or(provider.kind, ProviderKind::from);
        let same = kind == provider.kind;
        Some(ProviderConfig {
            kind,
            base_url: flags
                .base_url
                .unwrap_or_else(|| if same { provider.base_url.clone() } else { kind.default_base_url().to_owned() }),
            model: flags.model.unwrap_or_default(),
            api_key: match (flags.key_env, same) {
                (None, true) => provider.api_key.clone(),
                (key_env, _) => api_key(key_env, kind),
            },
            temperature: None,
            ..provider.clone()
        })
    };
    let mut trusted = other(Other {
        provider: args.trusted_provider,
        base_url: args.trusted_base_url,
        model: args.trusted_model,
        key_env: args.trusted_api_key_env,
    });
    if let Some(trusted) = trusted.as_mut().filter(|t| t.model.is_empty()) {
        trusted.model = provider.model.clone();
    }
    let untrusted = other(Other {
        provider: args.untrusted_provider,
        base_url: args.untrusted_base_url,
        model: args.untrusted_model,
        key_env: args.untrusted_api_key_env,
    });
    let config = MonitorConfig {
        prefix: fleet.options.prefix.clone(),
        step: step.clone(),
        monitor_id: args.id.unwrap_or_else(|| default_id(&step)),
        concurrency: args.concurrency,
        provider,
        trusted,
        untrusted,
        template,
        limits: Limits::default(),
        fallback: args.fallback,
        retry: RetryPolicy {
            attempts: args.attempts,
            attempt_timeout: Duration::from_secs_f64(args.request_timeout),
            ..RetryPolicy::default()
        },
        sampling: SamplingConfig {
            cache_entries: args.cache_entries,
            cache_retention: Duration::from_secs(args.cache_retention),
            rate_limit: args
                .rate_limit
                .map(|per_minute| RateLimit { limiter: args.limiter.unwrap_or_else(|| step.clone()), per_minute }),
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
    let options = Options {
        budget: args.budget,
        per: match args.per {
            UnitArg::Step => Unit::Step,
            UnitArg::Trajectory => Unit::Trajectory,
        },
        labels: args.labels.map(|labels| match labels {
            LabelsArg::EvalMode => Labels::EvalMode,
            LabelsArg::People => Labels::People,
        }),
        bootstrap: Bootstrap { resamples: args.bootstrap, seed: args.seed },
    };
    let calibration = Calibration::of(&log, options);
    let rows = calibrate::rows(&log.samples, calibrate::default_thresholds());
    if args.json {
        print_json(&calibration)?;
    } else {
        print!("{}\n{}", calibrate::table(&log, &rows), calibration.summary());
    }
    let title = |what: &str| format!("{what}{} — {}", args.step.as_deref().unwrap_or("monitor"), args.log.display());
    let write = |path: &PathBuf, text: String| {
        fs::write(path, text).map_err(|e| Failure::other(format!("{}: {e}", path.display())))
    };
    if let Some(svg) = &args.svg {
        write(svg, chart::svg(&rows, &title("")))?;
    }
    if let Some(svg) = &args.roc_svg {
        let curves: Vec<Curve<'_>> = [("steps", &calibration.steps), ("trajectories", &calibration.per_trajectory)]
            .into_iter()
            .filter_map(|(name, report)| {
                let report = report.as_ref()?;
                Some(Curve { name, points: &report.curve, fit: report.at_fpr.as_ref().and_then(|at| at.fit) })
            })
            .collect();
        write(svg, chart::roc_svg(&curves, args.budget, &title("ROC of ")))?;
    }
    if let Some(out) = &args.threshold_out {
        let Some(t) = &calibration.threshold else {
            return Err(Failure::other(format!("{}: no honest scores to take a threshold from", args.log.display())));
        };
        let json = serde_json::json!({"budget": t.budget, "unit": t.unit, "threshold": t.threshold, "n": t.n});
        write(out, format!("{json}\n"))?;
    }
    Ok(())
}

/// The flags of the trusted or the untrusted model.
struct Other {
    provider: Option<ProviderArg>,
    base_url: Option<String>,
    model: Option<String>,
    key_env: Option<String>,
}

/// The API key in `key_env` (default: the provider's usual variable); none when unset.
fn api_key(key_env: Option<String>, kind: ProviderKind) -> Option<String> {
    let key_env = key_env.unwrap_or_else(|| kind.default_key_env().to_owned());
    let key = std::env::var(&key_env).ok().filter(|key| !key.is_empty());
    if key.is_none() {
        tracing::warn!(variable = %key_env, "No API key in the environment; requests carry none.");
    }
    key
}

/// `monitor-<step>@host:pid`.
fn default_id(step: &str) -> String {
    format!("monitor-{step}@{}:{}", super::host_name(), std::process::id())
}
