//! `airlock topology apply` / `delete`: the fleet's queues and exchanges; `airlock topology
//! definitions`: its broker users by role, as RabbitMQ definitions
//! ([`airlock_transport::roles`]).

use std::path::{Path, PathBuf};

use airlock_transport::roles::RolesFile;
use airlock_transport::{Topology, Transport};
use clap::{Args, Subcommand};

use super::{Failure, FleetArgs, connect, print_json};

/// Topology tools.
#[derive(Debug, Subcommand)]
pub enum TopologyCommand {
    /// Declare the fleet's queues and exchanges (idempotent) and print their names.
    Apply(TopologyArgs),
    /// Delete the fleet's queues and exchanges, with every message still in them.
    Delete(TopologyArgs),
    /// Print RabbitMQ definitions (users, vhost, permissions) that give each broker user of a
    /// roles file the least its role needs; load them with `rabbitmqctl import_definitions`.
    Definitions {
        /// The roles file (YAML): `prefix`, `vhost`, and `users` with `name`, `role`
        /// (runner, worker, step:<name>, reviewer, auditor), `password`, and for a reviewer
        /// `instance` and `pools`.
        #[arg(long)]
        roles: PathBuf,
    },
}

/// Which fleet, and which of its run-time queues besides the core ones.
#[derive(Debug, Args)]
pub struct TopologyArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    /// The queue of each of these external steps too.
    #[arg(long, value_delimiter = ',')]
    steps: Vec<String>,
    /// The human queue of each of these pools too.
    #[arg(long, value_delimiter = ',')]
    pools: Vec<String>,
}

/// Runs a topology subcommand.
pub async fn run(command: TopologyCommand) -> Result<(), Failure> {
    let (TopologyArgs { fleet, steps, pools }, apply) = match command {
        TopologyCommand::Apply(args) => (args, true),
        TopologyCommand::Delete(args) => (args, false),
        TopologyCommand::Definitions { roles } => return definitions(&roles),
    };
    let mut topology = Topology::new(fleet.prefix.clone());
    for step in &steps {
        topology = topology.with_step(step);
    }
    for pool in &pools {
        topology = topology.with_human_pool(pool);
    }
    let transport = connect(&fleet, "topology").await?;
    let done = if apply { transport.declare(&topology).await } else { transport.delete(&topology).await };
    transport.close().await;
    let verb = if apply { "declaring" } else { "deleting" };
    done.map_err(|e| Failure::other(format!("{verb} the topology failed: {e}")))?;
    if !apply {
        println!("deleted the queues and exchanges of '{}'", fleet.prefix);
        return Ok(());
    }
    for exchange in topology.exchanges() {
        println!("exchange {}", exchange.name);
    }
    for queue in topology.queues() {
        println!("queue    {}", queue.name);
    }
    Ok(())
}

fn definitions(path: &Path) -> Result<(), Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| Failure::config(format!("{}: {e}", path.display())))?;
    let roles: RolesFile =
        serde_saphyr::from_str(&text).map_err(|e| Failure::config(format!("{}: {e}", path.display())))?;
    let definitions = roles.definitions().map_err(|e| Failure::config(format!("{}: {e}", path.display())))?;
    print_json(&definitions)
}
