//! `airlock policy check` and `airlock policy eval`: the policy engine from the shell.

use std::fs;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use airlock_policy::chain::{ChainState, Input, Outcome, Policy, TrailEntry, Verdict};
use airlock_policy::document::Document;
use airlock_policy::{Call, Kind, render};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::EXIT_CONFIG;

/// Policy tools.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Validate a policy file and print its normalized chains.
    Check {
        /// The Inspect policy file (YAML or JSON).
        file: PathBuf,
    },
    /// Evaluate calls against a policy's built-in steps; one JSON object per call, in order.
    Eval(EvalArgs),
}

/// Arguments of `airlock policy eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The Inspect policy file.
    #[arg(long)]
    policy: PathBuf,
    /// Which chain to run.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(["approval", "review"]))]
    kind: String,
    /// One call: Inspect's ToolCall JSON (`{"id", "function", "arguments"}`).
    #[arg(long, conflicts_with = "calls", required_unless_present = "calls")]
    call: Option<PathBuf>,
    /// Many calls, one ToolCall JSON per line.
    #[arg(long)]
    calls: Option<PathBuf>,
    /// For a review: the tool's output.
    #[arg(long)]
    output: Option<String>,
}

/// Runs a policy subcommand and maps its failures to exit statuses.
pub fn run(command: PolicyCommand) -> ExitCode {
    match command {
        PolicyCommand::Check { file } => check(&file),
        PolicyCommand::Eval(args) => eval(&args),
    }
}

fn check(file: &Path) -> ExitCode {
    let document = match read(file)
        .and_then(|text| Document::parse(&file.display().to_string(), &text).map_err(|e| e.to_string()))
    {
        Ok(document) => document,
        Err(message) => return config_error(&message),
    };
    let mut compiled = 0;
    for kind in [Kind::Approval, Kind::Review] {
        let present = match kind {
            Kind::Approval => document.approvers.is_some(),
            Kind::Review => document.reviewers.is_some(),
        };
        if !present {
            continue;
        }
        match Policy::compile(&document, kind) {
            Ok(policy) => {
                for warning in policy.warnings() {
                    eprintln!("warning: {warning}");
                }
                print!("{policy}");
                compiled += 1;
            }
            Err(e) => return config_error(&e.to_string()),
        }
    }
    if compiled == 0 {
        return config_error(&format!(
            "{}: the policy has neither an 'approvers:' nor a 'reviewers:' list",
            file.display()
        ));
    }
    ExitCode::SUCCESS
}

fn eval(args: &EvalArgs) -> ExitCode {
    let kind: Kind = args.kind.parse().expect("clap checked the kind");
    let policy = match read(&args.policy)
        .and_then(|text| Policy::parse(&args.policy.display().to_string(), &text, kind).map_err(|e| e.to_string()))
    {
        Ok(policy) => policy,
        Err(message) => return config_error(&message),
    };
    let lines: Vec<String> = match (&args.call, &args.calls) {
        (Some(file), _) => match read(file) {
            Ok(text) => vec![text],
            Err(message) => return config_error(&message),
        },
        (None, Some(file)) => match fs::File::open(file) {
            Ok(f) => {
                io::BufReader::new(f).lines().map_while(Result::ok).filter(|line| !line.trim().is_empty()).collect()
            }
            Err(e) => return config_error(&format!("{}: {e}", file.display())),
        },
        (None, None) => unreachable!("clap requires --call or --calls"),
    };
    let mut stdout = io::stdout().lock();
    let mut failures = 0;
    for line in &lines {
        let result = evaluate_line(&policy, line, args.output.as_deref());
        failures += usize::from(result.get("error").is_some());
        if writeln!(stdout, "{result}").is_err() {
            return ExitCode::FAILURE;
        }
    }
    if failures > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

/// One call's result as a JSON object; a bad line gives `{"error": …}` in its place.
fn evaluate_line(policy: &Policy, line: &str, output: Option<&str>) -> Value {
    let call = match serde_json::from_str::<Value>(line)
        .map_err(|e| e.to_string())
        .and_then(|v| Call::from_json(&v).map_err(|e| e.to_string()))
    {
        Ok(call) => call,
        Err(message) => return json!({ "error": format!("bad call: {message}") }),
    };
    let rendered = render::format_function_call(&call);
    let input = Input { call: &call, message: "", output };
    match policy.evaluate(&input, ChainState::default()) {
        Verdict::Decided(outcome) => decided_json(&outcome, &rendered),
        Verdict::Pending { step, state } => json!({
            "pending": { "step": step, "approver": policy.steps()[step].name },
            "trail": trail_json(&state.trail),
            "rendered": rendered,
        }),
        Verdict::Failed(error) => json!({ "error": error.to_string(), "rendered": rendered }),
    }
}

fn decided_json(outcome: &Outcome, rendered: &str) -> Value {
    let mut object = json!({
        "decision": outcome.decision.as_str(),
        "explanation": outcome.explanation,
        "approver": outcome.approver,
        "trail": trail_json(&outcome.trail),
        "rendered": rendered,
    });
    if let Some(modified) = &outcome.modified {
        object["modified"] = modified.to_json();
    }
    object
}

fn trail_json(trail: &[TrailEntry]) -> Value {
    trail
        .iter()
        .map(|t| json!({ "approver": t.approver, "decision": t.answer.decision.as_str(), "explanation": t.answer.explanation }))
        .collect()
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn config_error(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(EXIT_CONFIG)
}
