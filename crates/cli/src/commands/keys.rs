//! `airlock keys generate`: the keys a signed fleet runs with.
//!
//! `fleet.key` goes to the workers (it proves replies and seals step tasks), `fleet.pub` to
//! runners (`--verify-key`); `reviewer.key` to a reviewer service, `reviewer.pub` to the
//! workers (`--reviewer-keys`). Secret files are written readable by their owner only, and
//! no file is ever overwritten.

use std::path::PathBuf;

use airlock_integrity::{FleetKey, KeyFile as _, SigningKey};
use clap::Subcommand;

use super::Failure;

/// Subcommands of `airlock keys`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Write a new fleet key (fleet.key, fleet.pub) and reviewer key (reviewer.key,
    /// reviewer.pub) into a directory.
    Generate {
        /// The directory (created if missing).
        #[arg(long)]
        out: PathBuf,
    },
}

/// Runs the subcommand.
pub fn run(command: KeysCommand) -> Result<(), Failure> {
    match command {
        KeysCommand::Generate { out } => {
            let fleet = FleetKey::generate_files(&out, "fleet").map_err(|e| Failure::config(e.to_string()))?;
            let reviewer = SigningKey::generate_files(&out, "reviewer").map_err(|e| Failure::config(e.to_string()))?;
            let dir = out.display();
            println!("fleet key {}: {dir}/fleet.key (workers), {dir}/fleet.pub (runners)", fleet.id());
            println!(
                "reviewer key {}: {dir}/reviewer.key (reviewer service), {dir}/reviewer.pub (workers)",
                reviewer.id()
            );
            Ok(())
        }
    }
}
