//! What a policy says the fleet does beyond one call: a breaker per sample (`breaker:`) and
//! the response to incidents in a run (`incident:`). Both are top-level keys, which Inspect
//! ignores, so a policy file that uses them still runs under Inspect.
//!
//! ```yaml
//! breaker:                    # counted by the fleet, whichever workers decided
//!   rejections_in_a_row: 3    # approvals rejected (or terminated) in a row in one sample
//!   rejections_per_sample: 20 # ... or in all of one sample
//!   then: human               # every later call of the sample goes to a person (or: terminate)
//!   pool: oncall              # for human: default, the policy's first human step's pool
//! incident:                   # a person marked a decision of the run as an incident
//!   after: 1                  # incidents in the run before the response applies
//!   then: policy              # human, terminate, or policy
//!   policy: strict            # for policy: a policy the workers hold
//! ```
//!
//! Without `incident:`, one incident sends every later call of its run to a person. Deadlines
//! and reviewer failures are not rejections: a breaker never counts them.

use std::fmt;

use serde_json::{Map, Value};

use crate::document::{Document, PolicyError, Section};
use crate::limits;
use crate::steps::human::DEFAULT_POOL;
use crate::steps::{ExternalStep, ParamError, Step, deny_unknown, opt_str, type_name};

/// The top-level key of the breaker.
pub const BREAKER: &str = "breaker";
/// The top-level key of the incident rule.
pub const INCIDENT: &str = "incident";

/// A policy's control settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Control {
    /// The pool a person is asked from when a response names none: the first human step's,
    /// else `default`.
    pub pool: String,
    /// The breaker per sample, if the policy has one.
    pub breaker: Option<Breaker>,
    /// What incidents in a run bring.
    pub incident: IncidentRule,
}

/// After how many rejections a sample's later calls get `then`.
#[derive(Debug, Clone, PartialEq)]
pub struct Breaker {
    /// Rejections in a row (no approval between them).
    pub in_a_row: Option<u32>,
    /// Rejections in the whole sample.
    pub per_sample: Option<u32>,
    /// What every later call of the sample gets.
    pub then: Response,
}

/// After how many incidents a run's later calls get `then`.
#[derive(Debug, Clone, PartialEq)]
pub struct IncidentRule {
    /// Incidents marked in the run.
    pub after: u32,
    /// What every later call of the run gets.
    pub then: Response,
}

/// What the fleet does with a call under control instead of running its policy.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Response {
    /// A person decides, from the pool's reviewers.
    Human {
        /// The pool.
        pool: String,
    },
    /// The named policy the workers hold decides.
    Policy {
        /// Its name.
        name: String,
    },
    /// The call ends its sample.
    Terminate,
}

impl Breaker {
    /// Whether `in_a_row` rejections in a row and `total` in the sample trip it.
    pub fn trips(&self, in_a_row: u32, total: u32) -> bool {
        self.in_a_row.is_some_and(|k| in_a_row >= k) || self.per_sample.is_some_and(|m| total >= m)
    }
}

impl Control {
    /// Reads `breaker:` and `incident:` of `document`; `steps` are the compiled steps of the
    /// section being compiled, whose first human step gives the default pool.
    pub fn from_document<'s>(
        document: &Document,
        steps: impl IntoIterator<Item = &'s Step>,
    ) -> Result<Control, PolicyError> {
        let pool = steps
            .into_iter()
            .find_map(|step| match step {
                Step::External(ExternalStep::Human(human)) => Some(human.pool.as_str()),
                _ => None,
            })
            .unwrap_or(DEFAULT_POOL);
        let section = |key: &str| document.sections.iter().find(|section| section.name == key);
        let fail = |section: &Section, ParamError { key, message }: ParamError| {
            let location = key
                .and_then(|key| section.param_locations.iter().find(|(k, _)| *k == key).map(|(_, l)| *l))
                .unwrap_or(section.location);
            document.error(location, format!("'{}': {message}", section.name))
        };
        let breaker = section(BREAKER).map(|s| breaker(&s.params, pool).map_err(|e| fail(s, e))).transpose()?;
        let incident = match section(INCIDENT) {
            Some(s) => incident(&s.params, pool).map_err(|e| fail(s, e))?,
            None => IncidentRule { after: 1, then: Response::Human { pool: pool.to_owned() } },
        };
        Ok(Control { pool: pool.to_owned(), breaker, incident })
    }
}

impl fmt::Display for Control {
    /// One line for the breaker (if any), one for the incident rule.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(breaker) = &self.breaker {
            let limits: Vec<String> = [
                breaker.in_a_row.map(|k| format!("{k} rejections in a row")),
                breaker.per_sample.map(|m| format!("{m} in a sample")),
            ]
            .into_iter()
            .flatten()
            .collect();
            writeln!(f, "  breaker: after {}, {}", limits.join(" or "), breaker.then)?;
        }
        let incident = &self.incident;
        writeln!(f, "  incident: after {} in a run, {}", incident.after, incident.then)
    }
}

impl fmt::Display for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Response::Human { pool } => write!(f, "human (pool: {pool})"),
            Response::Policy { name } => write!(f, "policy {name}"),
            Response::Terminate => f.write_str("terminate"),
        }
    }
}

fn breaker(params: &Map<String, Value>, pool: &str) -> Result<Breaker, ParamError> {
    deny_unknown(BREAKER, params, &["rejections_in_a_row", "rejections_per_sample", "then", "pool"])?;
    let in_a_row = opt_count(params, "rejections_in_a_row")?;
    let per_sample = opt_count(params, "rejections_per_sample")?;
    if in_a_row.is_none() && per_sample.is_none() {
        return Err(ParamError {
            key: None,
            message: "a breaker needs 'rejections_in_a_row', 'rejections_per_sample' or both".into(),
        });
    }
    let then = response(params, pool, &["human", "terminate"])?;
    Ok(Breaker { in_a_row, per_sample, then })
}

fn incident(params: &Map<String, Value>, pool: &str) -> Result<IncidentRule, ParamError> {
    deny_unknown(INCIDENT, params, &["after", "then", "pool", "policy"])?;
    let after = opt_count(params, "after")?.unwrap_or(1);
    let then = response(params, pool, &["human", "terminate", "policy"])?;
    Ok(IncidentRule { after, then })
}

/// Reads `then` (one of `allowed`, `human` when absent) with the `pool` or `policy` it needs.
fn response(params: &Map<String, Value>, default_pool: &str, allowed: &[&str]) -> Result<Response, ParamError> {
    let then = opt_str(params, "then")?.unwrap_or("human");
    let pool = opt_str(params, "pool")?;
    let policy = opt_str(params, "policy")?;
    if !allowed.contains(&then) {
        return Err(ParamError::at("then", format!("'then' must be one of {}, not '{then}'", allowed.join(", "))));
    }
    if pool.is_some() && then != "human" {
        return Err(ParamError::at("pool", "'pool' goes with 'then: human'"));
    }
    if policy.is_some() && then != "policy" {
        return Err(ParamError::at("policy", "'policy' goes with 'then: policy'"));
    }
    Ok(match then {
        "human" => {
            let pool = pool.unwrap_or(default_pool);
            limits::check_pool_name(pool).map_err(|message| ParamError::at("pool", message))?;
            Response::Human { pool: pool.to_owned() }
        }
        "policy" => {
            let name =
                policy.ok_or_else(|| ParamError::at("then", "'then: policy' needs 'policy', a policy's name"))?;
            limits::check_policy_name(name).map_err(|message| ParamError::at("policy", message))?;
            Response::Policy { name: name.to_owned() }
        }
        _ => Response::Terminate,
    })
}

/// Reads an optional whole number from 1.
fn opt_count(params: &Map<String, Value>, key: &str) -> Result<Option<u32>, ParamError> {
    let invalid = |what: String| ParamError::at(key, format!("'{key}' must be a whole number from 1, not {what}"));
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n >= 1)
            .map(Some)
            .ok_or_else(|| invalid(n.to_string())),
        Some(other) => Err(invalid(type_name(other).to_owned())),
    }
}

#[cfg(test)]
mod tests;
