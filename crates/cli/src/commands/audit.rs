//! `airlock audit log` and `airlock audit query`: arguments for [`airlock_audit`].

use std::fs::File;
use std::io::{self, BufReader};
use std::path::PathBuf;

use airlock_audit::query::Query;
use airlock_audit::{AuditConfig, DecisionLog};
use clap::{Args, Subcommand};

use super::{Failure, FleetArgs, connect, shutdown_signal};

/// The decision log.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Write every decision of the fleet to a JSONL file, until SIGTERM or SIGINT.
    Log(LogArgs),
    /// Print the records of a decision log that match every filter given.
    Query(QueryArgs),
}

/// Arguments of `airlock audit log`.
#[derive(Debug, Args)]
pub struct LogArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    /// The JSONL file to append to.
    #[arg(long)]
    out: PathBuf,
    /// Argument and metadata keys whose values are replaced by `***` (e.g. password,token).
    #[arg(long, value_delimiter = ',')]
    mask: Vec<String>,
}

/// Arguments of `airlock audit query`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The decision log.
    #[arg(long)]
    file: PathBuf,
    /// Decisions of this sample.
    #[arg(long)]
    sample: Option<String>,
    /// Decisions of this run.
    #[arg(long)]
    run: Option<String>,
    /// Decisions made by this reviewer (or worker, plugin, …).
    #[arg(long)]
    decided_by: Option<String>,
    /// Decisions made under this policy digest.
    #[arg(long)]
    digest: Option<String>,
}

/// Runs an audit subcommand.
pub async fn run(command: AuditCommand) -> Result<(), Failure> {
    match command {
        AuditCommand::Log(args) => log(args).await,
        AuditCommand::Query(args) => query(args),
    }
}

async fn log(args: LogArgs) -> Result<(), Failure> {
    let log = DecisionLog::open(&args.out, args.mask).map_err(|e| Failure::config(e.to_string()))?;
    let transport = connect(&args.fleet, "audit").await?;
    eprintln!("Writing the decisions of '{}' to {}.", args.fleet.options.prefix, args.out.display());
    let config = AuditConfig { prefix: args.fleet.options.prefix, log };
    airlock_audit::run(transport, config, shutdown_signal()).await.map_err(|e| Failure::other(e.to_string()))
}

fn query(args: QueryArgs) -> Result<(), Failure> {
    let file = File::open(&args.file).map_err(|e| Failure::config(format!("{}: {e}", args.file.display())))?;
    let query = Query { sample: args.sample, run: args.run, decided_by: args.decided_by, digest: args.digest };
    query.run(BufReader::new(file), io::stdout().lock()).map(drop).map_err(|e| Failure::other(e.to_string()))
}
