//! `airlock`: one program for every role of the fleet.
//!
//! Layout: `main` parses the command line once and hands each subcommand to its module in
//! `commands/`; each module maps its errors to an exit status (64 for bad usage or config).
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

mod commands;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Airlock approves and reviews the tool calls of AI agents under evaluation, at fleet scale.
#[derive(Debug, Parser)]
#[command(name = "airlock", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check policy files and try them on calls, without a fleet.
    #[command(subcommand)]
    Policy(commands::policy::PolicyCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Policy(command) => commands::policy::run(command),
    }
}
