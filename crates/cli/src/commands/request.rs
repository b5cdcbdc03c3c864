//! `airlock request`: the `curl` of Airlock. One request through the fleet
//! ([`airlock_client::request::send`]), its decision as one JSON object on stdout
//! ([`DecisionView`]). A reject is an answer, not a failure: the exit status is non-zero only
//! for bad usage, an unreachable broker, or a request the fleet refused.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use airlock_client::ClientError;
use airlock_client::request::OneRequest;
use airlock_policy::Call;
use airlock_records::view::{DecisionView, EvalMode, Refusal, RefusedView};
use clap::Args;

use super::{Failure, FleetArgs, KindArg, PolicyArgs, VerifyArgs, connect, print_json};

/// Arguments of `airlock request`.
#[derive(Debug, Args)]
pub struct RequestArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    #[command(flatten)]
    policy: PolicyArgs,
    /// Which chain to run.
    #[arg(long, value_enum)]
    kind: KindArg,
    /// The call: Inspect's ToolCall JSON.
    #[arg(long)]
    call: PathBuf,
    /// For a review: the tool's output.
    #[arg(long, default_value = "")]
    output: String,
    /// Seconds to wait before failing closed.
    #[arg(long, default_value_t = 30.0)]
    timeout: f64,
    /// Label the request's run for calibration (its origin's eval_mode, kept in the decision log).
    #[arg(long, value_enum)]
    eval_mode: Option<EvalModeArg>,
    #[command(flatten)]
    verify: VerifyArgs,
}

/// A run's label, as `--eval-mode` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EvalModeArg {
    /// An honest run.
    Honest,
    /// An attack run.
    Attack,
}

impl From<EvalModeArg> for EvalMode {
    fn from(mode: EvalModeArg) -> Self {
        match mode {
            EvalModeArg::Honest => EvalMode::Honest,
            EvalModeArg::Attack => EvalMode::Attack,
        }
    }
}

/// Sends the request and prints the decision.
pub async fn run(args: RequestArgs) -> Result<(), Failure> {
    let policy = args.policy.source()?;
    let call = read_call(&args.call)?;
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        return Err(Failure::config("--timeout must be a positive number of seconds"));
    }
    let replies = args.verify.tool_replies()?;
    let transport = connect(&args.fleet, "request").await?;
    let request = OneRequest {
        prefix: args.fleet.options.prefix.clone(),
        policy,
        kind: args.kind.into(),
        call,
        output: args.output,
        timeout: Duration::from_secs_f64(args.timeout),
        replies,
        user: transport.user().to_owned(),
        eval_mode: args.eval_mode.map(EvalMode::from),
    };
    match airlock_client::request::send(transport, request).await {
        Ok(decision) => print_json(&DecisionView::from_wire(&decision)),
        Err(ClientError::Refused { code, message }) => {
            let failure = Failure::other(format!("the fleet refused the request ({code})"));
            print_json(&RefusedView { error: Refusal { code, message } })?;
            Err(failure)
        }
        Err(e) => Err(Failure::other(e.to_string())),
    }
}

/// A call file: Inspect's ToolCall JSON.
fn read_call(path: &std::path::Path) -> Result<Call, Failure> {
    let text = read(path)?;
    Call::from_json_str(&text).map_err(|e| Failure::config(format!("{}: {e}", path.display())))
}

fn read(path: &std::path::Path) -> Result<String, Failure> {
    fs::read_to_string(path).map_err(|e| Failure::config(format!("{}: {e}", path.display())))
}
