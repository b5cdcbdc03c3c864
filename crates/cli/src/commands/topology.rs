//! `airlock topology apply` / `delete`: the fleet's queues and exchanges; `airlock topology
//! definitions`: its broker users by role, as RabbitMQ definitions
//! ([`roles`]). `apply` then checks the replicas of the quorum queues through the management
//! API ([`members`]).

mod members;
mod roles;

use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_transport::{Topology, Transport};
use clap::{Args, Subcommand};

use self::roles::RolesFile;
use super::{Failure, FleetArgs, connect, print_json};

/// Topology tools.
#[derive(Debug, Subcommand)]
pub enum TopologyCommand {
    /// Declare the fleet's queues and exchanges (idempotent) and print their names, then
    /// warn about quorum queues with fewer replicas than --quorum-group-size or with replicas
    /// down (asked of the broker's management API).
    Apply(ApplyArgs),
    /// Delete the fleet's queues and exchanges, with every message still in them: the core,
    /// the decision log's queue, and each step's and pool's queue named, with a step's logs of
    /// scores, model answers and its rate limiter of the same name.
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

/// `apply`'s arguments: the fleet, and where its broker's management API is.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    topology: TopologyArgs,
    /// The broker's management API (comma-separated for several nodes), where the replicas of
    /// the quorum queues are checked, e.g. http://rabbit-1:15672; a user and password in the
    /// URL replace the AMQP URL's [default: each --amqp node's host, port 15672]
    #[arg(long, env = "AIRLOCK_MANAGEMENT_URL")]
    management_url: Option<String>,
}

/// Runs a topology subcommand.
pub async fn run(command: TopologyCommand) -> Result<(), Failure> {
    let (TopologyArgs { fleet, steps, pools }, management_url, apply) = match command {
        TopologyCommand::Apply(ApplyArgs { topology, management_url }) => (topology, management_url, true),
        TopologyCommand::Delete(args) => (args, None, false),
        TopologyCommand::Definitions { roles } => return definitions(&roles),
    };
    let mut topology = Topology::new(fleet.options.prefix.clone());
    for step in &steps {
        topology = topology.with_step(step);
        if !apply {
            // Each is declared by the step's monitor processes; the age matters only then.
            topology = topology.with_scores_log(step).with_samples_log(step, Duration::ZERO).with_limiter_log(step);
        }
    }
    if !apply {
        topology = topology.with_decisions_queue(airlock_audit::AUDIT_QUEUE);
    }
    for pool in &pools {
        topology = topology.with_human_pool(pool);
    }
    let transport = connect(&fleet, "topology").await?;
    let done = if apply { transport.declare(&topology).await } else { transport.delete(&topology).await };
    transport.close().await;
    let verb = if apply { "declaring" } else { "deleting" };
    // With the broker's own words (which argument of which queue differs, say).
    done.map_err(|e| match std::error::Error::source(&e) {
        Some(source) => Failure::other(format!("{verb} the topology failed: {e}: {source}")),
        None => Failure::other(format!("{verb} the topology failed: {e}")),
    })?;
    if !apply {
        println!("deleted the queues and exchanges of '{}'", fleet.options.prefix);
        return Ok(());
    }
    for exchange in topology.exchanges() {
        println!("exchange {}", exchange.name);
    }
    for queue in topology.queues() {
        println!("queue    {}", queue.name);
    }
    check_members(&topology, &fleet, management_url.as_deref()).await;
    Ok(())
}

/// Warns, on stderr, about each quorum queue of `topology` with fewer replicas than the
/// fleet's group size or with replicas down; says so when they could not be checked (no
/// management API where expected), which is a warning too, not a failure: the topology is
/// declared either way.
async fn check_members(topology: &Topology, fleet: &FleetArgs, management_url: Option<&str>) {
    let wanted = fleet.options.replication.quorum_group_size;
    let unchecked = |why: &str| {
        eprintln!(
            "warning: the replicas of the quorum queues were not checked: {why}. The management API \
             tells them (enable the rabbitmq_management plugin, or give --management-url)."
        );
    };
    let apis = match members::Api::for_fleet(&fleet.amqp, management_url) {
        Ok(apis) => apis,
        Err(e) => return unchecked(&e),
    };
    let http = match super::http_client() {
        Ok(http) => http,
        Err(e) => return unchecked(&format!("no HTTP client: {e}")),
    };
    // Every queue of a fleet is a quorum queue.
    for queue in topology.queues() {
        match members::members(&http, &apis, &queue.name).await {
            Ok(members) => {
                for shortfall in members.shortfalls(&queue.name, wanted) {
                    eprintln!("warning: {shortfall}");
                }
            }
            Err(e) => return unchecked(&e),
        }
    }
}

fn definitions(path: &Path) -> Result<(), Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| Failure::config(format!("{}: {e}", path.display())))?;
    let roles: RolesFile =
        serde_saphyr::from_str(&text).map_err(|e| Failure::config(format!("{}: {e}", path.display())))?;
    let definitions = roles.definitions().map_err(|e| Failure::config(format!("{}: {e}", path.display())))?;
    print_json(&definitions)
}
