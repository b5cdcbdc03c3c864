//! `airlock run pause|resume|terminate|switch RUN`: a switch thrown by hand on every later
//! call of an eval run, fleet-wide. It is an entry of the control log that every worker
//! applies as it reads it (and every worker started later, before it decides anything).

use airlock_contract::v1::{self, ControlResponse, control_event::Event};
use airlock_control::log::stamp;
use airlock_policy::limits;
use airlock_transport::{Message, Topology, Transport};
use clap::{Args, Subcommand};
use prost::Message as _;

use super::{Failure, FleetArgs, connect, print_json};

/// `airlock run`'s switches.
#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Send every later call of the run to a person.
    Pause(Switch),
    /// Lift the run's switch, and start its count of incidents over.
    Resume(Switch),
    /// End every sample of the run at its next call.
    Terminate(Switch),
    /// Decide every later call of the run by a stricter policy the workers hold.
    Switch(Switch),
}

/// Which run, and what the switch says.
#[derive(Debug, Args)]
pub struct Switch {
    #[command(flatten)]
    fleet: FleetArgs,
    /// The run's id (Inspect's run id).
    run: String,
    /// The run's namespace: the gateway token's name for a run asked through the gateway.
    #[arg(long, default_value = "")]
    tenant: String,
    /// Why, recorded with the switch and in the trail of every call it decides.
    #[arg(long, default_value = "")]
    reason: String,
    /// `pause`: the pool of people asked (default: the pool of each call's policy).
    #[arg(long)]
    pool: Option<String>,
    /// `switch`: the policy's name.
    #[arg(long)]
    policy: Option<String>,
    /// Who throws the switch (default: the user running this).
    #[arg(long, env = "USER", default_value = "operator")]
    by: String,
}

/// Appends the switch to the control log and prints it.
pub async fn run(command: RunCommand) -> Result<(), Failure> {
    let (response, switch) = match command {
        RunCommand::Pause(switch) => (ControlResponse::Human, switch),
        RunCommand::Resume(switch) => (ControlResponse::None, switch),
        RunCommand::Terminate(switch) => (ControlResponse::Terminate, switch),
        RunCommand::Switch(switch) => (ControlResponse::Policy, switch),
    };
    let event = event(response, &switch)?;
    let transport = connect(&switch.fleet, "run").await?;
    let topology = Topology::empty(switch.fleet.options.prefix.clone()).with_control_log();
    let published = async {
        transport.declare(&topology).await?;
        let entry = stamp(&switch.by, event);
        transport.publish(&Topology::log_route(&topology.control_log()), Message::new(entry.encode_to_vec())).await
    };
    let result = published.await;
    transport.close().await;
    result.map_err(|e| Failure::other(format!("the switch was not recorded: {e}")))?;
    print_json(&serde_json::json!({
        "run": switch.run,
        "tenant": switch.tenant,
        "response": response.as_str_name().trim_start_matches("CONTROL_RESPONSE_").to_lowercase(),
        "by": switch.by,
    }))
}

/// The switch's entry, its names checked.
fn event(response: ControlResponse, switch: &Switch) -> Result<Event, Failure> {
    if switch.run.is_empty() || switch.run.contains('\0') || switch.tenant.contains('\0') {
        return Err(Failure::config("the run id must be a non-empty text without NUL characters"));
    }
    let pool = match (&switch.pool, response) {
        (Some(pool), ControlResponse::Human) => {
            limits::check_pool_name(pool).map_err(Failure::config)?;
            pool.clone()
        }
        (Some(_), _) => return Err(Failure::config("--pool goes with `airlock run pause`")),
        (None, _) => String::new(),
    };
    let policy = match (&switch.policy, response) {
        (Some(name), ControlResponse::Policy) => {
            limits::check_policy_name(name).map_err(Failure::config)?;
            name.clone()
        }
        (None, ControlResponse::Policy) => return Err(Failure::config("`airlock run switch` needs --policy NAME")),
        (Some(_), _) => return Err(Failure::config("--policy goes with `airlock run switch`")),
        (None, _) => String::new(),
    };
    Ok(Event::RunSwitch(v1::RunSwitch {
        run: Some(v1::RunRef { run_id: switch.run.clone(), tenant: switch.tenant.clone() }),
        response: response.into(),
        pool,
        policy,
        reason: switch.reason.clone(),
    }))
}
