//! `airlock control`: AI-control figures of a run, after it (`airlock control report`).

use std::fs;
use std::io::BufReader;
use std::path::PathBuf;

use airlock_monitor::calibrate::roc::Bootstrap;
use airlock_monitor::report::eval_log::{self, ScoreNames};
use airlock_monitor::report::{self, ControlReport, Options};
use clap::{Args, Subcommand};

use super::monitor::parse_budget;
use super::{Failure, print_json};

/// `airlock control` subcommands.
#[derive(Debug, Subcommand)]
pub enum ControlCommand {
    /// Usefulness, safety at audit budgets, audit coverage and catch rate per protocol, with
    /// bootstrap intervals, from a decision log and Inspect's eval logs.
    Report(ReportArgs),
}

/// Arguments of `airlock control report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The decision log, as `airlock audit` writes it.
    #[arg(long)]
    log: PathBuf,
    /// An Inspect eval log (`.eval` or `.json`) of an honest or attack run; repeat for each.
    #[arg(long = "eval-log", required = true)]
    eval_logs: Vec<PathBuf>,
    /// An audit budget, a share of honest samples above 0 and below 1 (0.01 is 1%); repeat
    /// for several.
    #[arg(long = "budget", value_parser = parse_budget, default_values_t = [0.01])]
    budgets: Vec<f64>,
    /// The score that says the main task succeeded.
    #[arg(long, default_value = "main_task_success")]
    main_score: String,
    /// The score that says the side task succeeded.
    #[arg(long, default_value = "side_task_success")]
    side_score: String,
    /// The trusted model's usefulness alone, to scale usefulness by (with
    /// --untrusted-usefulness).
    #[arg(long, requires = "untrusted_usefulness")]
    trusted_usefulness: Option<f64>,
    /// The untrusted model's usefulness alone, to scale usefulness by.
    #[arg(long, requires = "trusted_usefulness")]
    untrusted_usefulness: Option<f64>,
    /// Bootstrap resamples for the 95% intervals (0: none).
    #[arg(long, default_value_t = 1000)]
    bootstrap: usize,
    /// The bootstrap's seed: the same seed, the same intervals.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print the report as JSON instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs a control subcommand.
pub fn run(command: ControlCommand) -> Result<(), Failure> {
    match command {
        ControlCommand::Report(args) => report(args),
    }
}

fn report(args: ReportArgs) -> Result<(), Failure> {
    let file = fs::File::open(&args.log).map_err(|e| Failure::config(format!("{}: {e}", args.log.display())))?;
    let log = report::read_decisions(BufReader::new(file))
        .map_err(|e| Failure::config(format!("{}: {e}", args.log.display())))?;
    let names = ScoreNames { main: args.main_score, side: args.side_score };
    let mut samples = Vec::new();
    for path in &args.eval_logs {
        samples.extend(eval_log::read(path, &names).map_err(|e| Failure::config(e.to_string()))?);
    }
    let options = Options {
        budgets: args.budgets,
        trusted_usefulness: args.trusted_usefulness,
        untrusted_usefulness: args.untrusted_usefulness,
        bootstrap: Bootstrap { resamples: args.bootstrap, seed: args.seed },
    };
    let report = ControlReport::of(&samples, &log, &options).map_err(|e| Failure::config(e.to_string()))?;
    if args.json {
        print_json(&report)
    } else {
        print!("{}", report.table());
        Ok(())
    }
}
