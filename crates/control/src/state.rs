//! The fleet's control state: what the control log's entries add up to, and what it makes of
//! a call. Pure: every process folds the same entries in the same order into the same state.

use std::collections::{HashMap, HashSet};
use std::fmt;

use airlock_contract::v1::{self, ControlResponse, control_event::Event};
use airlock_policy::control::{Control, Response};

/// What the control log's entries add up to, by tenant and run.
#[derive(Debug, Default)]
pub struct ControlState {
    /// Runs by tenant, then run id: looked up with borrowed names, no allocation per call.
    runs: HashMap<String, HashMap<String, RunState>>,
    /// Entries folded so far.
    entries: u64,
}

/// One run's switches, incidents and samples.
#[derive(Debug, Default)]
struct RunState {
    /// A switch thrown by hand, until the next one.
    switch: Option<Switched>,
    /// The decisions marked as incidents since the last `resume`.
    incidents: HashSet<String>,
    /// Rejections counted by sample id, then epoch.
    samples: HashMap<String, HashMap<u32, Streak>>,
}

/// A switch thrown by hand on a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Switched {
    /// What it says.
    pub response: Switch,
    /// Who threw it.
    pub by: String,
    /// Why, as they said (may be empty).
    pub reason: String,
}

/// What a hand-thrown switch says; a person's pool is the policy's unless it names one.
#[derive(Debug, Clone, PartialEq)]
pub enum Switch {
    /// Every later call goes to a person, of this pool if it names one.
    Human(Option<String>),
    /// Every later call is decided by the named policy.
    Policy(String),
    /// Every later call ends its sample.
    Terminate,
}

/// A run the log named, as the state holds it: for people to read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunControl<'s> {
    /// The run's namespace (the call key's tenant; empty for none).
    pub tenant: &'s str,
    /// The run's id.
    pub run_id: &'s str,
    /// The switch thrown by hand on it, if one holds.
    pub switch: Option<&'s Switched>,
    /// What was marked as an incident in it since its last resume: decisions' or tasks' ids.
    pub incidents: &'s HashSet<String>,
}

/// A sample's rejections, each call counted once (a decision sent again is not a new one).
#[derive(Debug, Default)]
struct Streak {
    in_a_row: u32,
    total: u32,
    counted: HashSet<String>,
}

/// What the fleet does with a call instead of running its policy, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Controlled {
    /// The response.
    pub response: Response,
    /// Why, in words, for the trail and the person who reads it.
    pub why: String,
}

impl ControlState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many entries were folded in.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Folds one entry of the log in.
    pub fn apply(&mut self, event: &v1::ControlEvent) {
        self.entries += 1;
        match &event.event {
            Some(Event::RunSwitch(switch)) => {
                let Some(run) = &switch.run else { return };
                let state = self.run_mut(&run.tenant, &run.run_id);
                state.switch = match switch.response() {
                    ControlResponse::None => {
                        // A resume starts the run's count of incidents over.
                        state.incidents.clear();
                        None
                    }
                    response => Some(Switched {
                        response: match response {
                            ControlResponse::Human => {
                                Switch::Human(Some(switch.pool.clone()).filter(|p| !p.is_empty()))
                            }
                            ControlResponse::Policy => Switch::Policy(switch.policy.clone()),
                            _ => Switch::Terminate,
                        },
                        by: event.by.clone(),
                        reason: switch.reason.clone(),
                    }),
                };
            }
            Some(Event::Incident(incident)) => {
                let Some(key) = &incident.key else { return };
                self.run_mut(&key.tenant, &key.run_id).incidents.insert(incident.marked.clone());
            }
            Some(Event::Outcome(outcome)) => {
                let Some(key) = &outcome.key else { return };
                let run = self.run_mut(&key.tenant, &key.run_id);
                let streak = run.samples.entry(key.sample_id.clone()).or_default().entry(key.epoch).or_default();
                if streak.counted.insert(key.tool_call_id.clone()) {
                    if outcome.denied {
                        streak.in_a_row += 1;
                        streak.total += 1;
                    } else {
                        streak.in_a_row = 0;
                    }
                }
            }
            Some(Event::Score(_) | Event::Joined(_) | Event::Sampled(_) | Event::Beat(_) | Event::Claim(_)) | None => {}
        }
    }

    /// The runs the log named (a switch, an incident or a breaker's count), in no order.
    pub fn runs(&self) -> impl Iterator<Item = RunControl<'_>> {
        self.runs.iter().flat_map(|(tenant, runs)| runs.iter().map(move |(run_id, run)| run.control(tenant, run_id)))
    }

    /// The run `run_id` of `tenant`, if the log named it.
    pub fn run(&self, tenant: &str, run_id: &str) -> Option<RunControl<'_>> {
        let (tenant, runs) = self.runs.get_key_value(tenant)?;
        let (run_id, run) = runs.get_key_value(run_id)?;
        Some(run.control(tenant, run_id))
    }

    /// What a switch thrown by hand on the run of `key` does with the call, whatever its
    /// policy says (a person of `pool` unless the switch names another); `None` without one.
    pub fn switched(&self, key: &v1::CallKey, pool: &str) -> Option<Controlled> {
        let switched = self.runs.get(&key.tenant)?.get(&key.run_id)?.switch.as_ref()?;
        let response = match &switched.response {
            Switch::Human(named) => Response::Human { pool: named.clone().unwrap_or_else(|| pool.to_owned()) },
            Switch::Policy(name) => Response::Policy { name: name.clone() },
            Switch::Terminate => Response::Terminate,
        };
        let reason = if switched.reason.is_empty() { String::new() } else { format!(": {}", switched.reason) };
        Some(Controlled { response, why: format!("{} was switched by {}{reason}", RunName(key), switched.by) })
    }

    /// What the fleet does with the call `key` decided by a policy with `control`: a switch
    /// thrown by hand on its run wins; otherwise the stricter of what the run's incidents and
    /// the sample's breaker bring; `None` when nothing applies.
    pub fn response(&self, key: &v1::CallKey, control: &Control) -> Option<Controlled> {
        let run = self.runs.get(&key.tenant)?.get(&key.run_id)?;
        let name = RunName(key);
        if run.switch.is_some() {
            return self.switched(key, &control.pool);
        }
        let incidents = u32::try_from(run.incidents.len()).unwrap_or(u32::MAX);
        let by_incidents = (incidents >= control.incident.after).then(|| Controlled {
            response: control.incident.then.clone(),
            why: format!("{incidents} incident(s) marked in {name}"),
        });
        let by_breaker = control.breaker.as_ref().and_then(|breaker| {
            let streak = run.samples.get(&key.sample_id)?.get(&key.epoch)?;
            breaker.trips(streak.in_a_row, streak.total).then(|| Controlled {
                response: breaker.then.clone(),
                why: format!(
                    "sample {} (epoch {}) of {name} had {} rejection(s) in a row, {} in all",
                    key.sample_id, key.epoch, streak.in_a_row, streak.total
                ),
            })
        });
        [by_incidents, by_breaker].into_iter().flatten().max_by_key(|controlled| severity(&controlled.response))
    }

    fn run_mut(&mut self, tenant: &str, run_id: &str) -> &mut RunState {
        self.runs.entry(tenant.to_owned()).or_default().entry(run_id.to_owned()).or_default()
    }
}

impl RunState {
    fn control<'s>(&'s self, tenant: &'s str, run_id: &'s str) -> RunControl<'s> {
        RunControl { tenant, run_id, switch: self.switch.as_ref(), incidents: &self.incidents }
    }
}

/// How far a response takes a call from its policy: a person, another policy, the end.
fn severity(response: &Response) -> u8 {
    match response {
        Response::Human { .. } => 0,
        Response::Policy { .. } => 1,
        Response::Terminate => 2,
    }
}

/// A run as people read it: `run r1`, or `run r1 of tenant t`.
struct RunName<'k>(&'k v1::CallKey);

impl fmt::Display for RunName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "run {}", self.0.run_id)?;
        if !self.0.tenant.is_empty() {
            write!(f, " of tenant {}", self.0.tenant)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
