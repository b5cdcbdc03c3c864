//! `airlock policy check` and `airlock policy eval`: arguments for
//! [`airlock_worker::offline`], the policy engine from the shell; `check` also checks the
//! parameters of model monitor steps ([`airlock_monitor::params::check_document`]).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use airlock_monitor::params::check_document;
use airlock_policy::chain::Policy;
use airlock_policy::document::Document;
use airlock_worker::offline;
use clap::{Args, Subcommand};

use super::{EXIT_CONFIG, KindArg};

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
    #[arg(long, value_enum)]
    kind: KindArg,
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
    let name = file.display().to_string();
    let policies = match read(file).and_then(|text| {
        let policies = offline::check(&name, &text, dir_of(file)).map_err(|e| e.to_string())?;
        // The engine takes any parameters for an external step; a model monitor's are checked
        // as the monitor will read them.
        Document::parse(&name, &text).and_then(|document| check_document(&document)).map_err(|e| e.to_string())?;
        Ok(policies)
    }) {
        Ok(policies) => policies,
        Err(message) => return config_error(&message),
    };
    for policy in policies {
        for warning in policy.warnings() {
            eprintln!("warning: {warning}");
        }
        print!("{policy}");
    }
    ExitCode::SUCCESS
}

fn eval(args: &EvalArgs) -> ExitCode {
    let policy = match read(&args.policy).and_then(|text| {
        offline::load(&args.policy.display().to_string(), &text, dir_of(&args.policy))
            .and_then(|document| Policy::compile(&document, args.kind.into()))
            .map_err(|e| e.to_string())
    }) {
        Ok(policy) => policy,
        Err(message) => return config_error(&message),
    };
    // One read of the file, lines borrowed from it; one buffered writer for every result.
    let (file, one_call) = match (&args.call, &args.calls) {
        (Some(file), _) => (file, true),
        (None, Some(file)) => (file, false),
        (None, None) => unreachable!("clap requires --call or --calls"),
    };
    let text = match read(file) {
        Ok(text) => text,
        Err(message) => return config_error(&message),
    };
    let lines: Vec<&str> = match one_call {
        true => vec![text.as_str()],
        false => text.lines().filter(|line| !line.trim().is_empty()).collect(),
    };
    let mut out = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    let mut failures = 0;
    for line in lines {
        let view = offline::eval_line(&policy, line, args.output.as_deref());
        failures += usize::from(view.is_failure());
        let printed =
            serde_json::to_writer(&mut out, &view).map_err(io::Error::from).and_then(|()| out.write_all(b"\n"));
        if printed.is_err() {
            return ExitCode::FAILURE;
        }
    }
    if out.flush().is_err() {
        return ExitCode::FAILURE;
    }
    if failures > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

/// The directory a policy file's relative paths start from.
fn dir_of(file: &Path) -> &Path {
    file.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn config_error(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(EXIT_CONFIG)
}
