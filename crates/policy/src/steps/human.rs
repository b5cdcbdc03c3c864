//! `human`: an external step bound for the human queue of a pool.

use std::fmt;
use std::time::Duration;

use super::external::Timeout;
use super::{ParamError, Params, deny_unknown, list, opt_f64, opt_str, opt_str_list, type_name};
use crate::call::{Decision, Kind};
use crate::limits;

/// The step's name in a policy file.
pub const NAME: &str = "human";

/// The pool a human step goes to when the policy names none.
pub const DEFAULT_POOL: &str = "default";

/// A person decides, from the reviewer service that serves `pool`.
#[derive(Debug, Clone, PartialEq)]
pub struct Human {
    /// The pool of reviewers asked.
    pub pool: String,
    /// The choices offered, in order; `modify` only when listed (an Airlock extension: the
    /// person may edit the call's arguments).
    pub choices: Vec<Decision>,
    /// Deadline settings.
    pub timeout: Timeout,
    /// How many distinct reviewers must approve (or, for a review, continue) before the
    /// step answers; any other answer by anyone decides at once.
    pub approvals: u32,
    /// Where the task moves when nobody in its pool answers in time.
    pub reroute: Option<Reroute>,
    /// How long before the task's deadline its pool is warned that it expires.
    pub warn_before: Option<Duration>,
}

/// A task nobody answered within `after` moves to the next pool of `to`, in order, keeping
/// its deadline.
#[derive(Debug, Clone, PartialEq)]
pub struct Reroute {
    /// How long a pool has to answer before the task moves on.
    pub after: Duration,
    /// The pools it moves to, in order; none is the step's `pool` or listed twice.
    pub to: Vec<String>,
}

impl Human {
    /// Reads `pool`, `choices`, `approvals`, `timeout`, `on_timeout`, `reroute_after`, `to`
    /// and `warn_before`.
    ///
    /// Choices default to Inspect's: approve, reject, terminate for approval; continue,
    /// terminate for review. `modify` is offered only when listed (Inspect drops it); a list
    /// of nothing but `modify` is an error, as in Inspect.
    /// `approvals` is a whole number from 1 (the default). `reroute_after` (seconds) and `to`
    /// (a pool or a list of pools) come together, every move before the `timeout`;
    /// `warn_before` (seconds) is shorter than the `timeout`.
    pub fn from_params(kind: Kind, params: &Params) -> Result<Self, ParamError> {
        deny_unknown(
            NAME,
            params,
            &["choices", "pool", "approvals", "timeout", "on_timeout", REROUTE_AFTER, TO, WARN_BEFORE],
        )?;
        let pool = opt_str(params, "pool")?.unwrap_or(DEFAULT_POOL);
        limits::check_pool_name(pool).map_err(|message| ParamError::at("pool", message))?;
        let choices = match opt_str_list(params, "choices")? {
            None => match kind {
                Kind::Approval => vec![Decision::Approve, Decision::Reject, Decision::Terminate],
                Kind::Review => vec![Decision::Continue, Decision::Terminate],
            },
            Some(names) => {
                let mut choices = Vec::new();
                for name in &names {
                    let decision: Decision = name.parse().map_err(|e: String| ParamError::at("choices", e))?;
                    if !kind.decisions().contains(&decision) {
                        return Err(ParamError::at(
                            "choices",
                            format!(
                                "'{decision}' is not a choice {kind} allows (expected some of {})",
                                list(kind.decisions())
                            ),
                        ));
                    }
                    if !choices.contains(&decision) {
                        choices.push(decision);
                    }
                }
                if choices.is_empty() {
                    return Err(ParamError::at("choices", "'choices' must offer at least one decision"));
                }
                if choices == [Decision::Modify] {
                    return Err(ParamError::at("choices", "a human cannot have 'modify' as the only choice"));
                }
                choices
            }
        };
        let timeout = Timeout::from_params(kind, params)?;
        let reroute = reroute(params, pool, timeout.after)?;
        let warn_before = duration(params, WARN_BEFORE)?;
        if let (Some(before), Some(timeout)) = (warn_before, timeout.after)
            && before >= timeout
        {
            let message = format!("'{WARN_BEFORE}' must be shorter than the 'timeout' ({}s)", timeout.as_secs_f64());
            return Err(ParamError::at(WARN_BEFORE, message));
        }
        Ok(Human { pool: pool.to_owned(), choices, timeout, approvals: approvals(params)?, reroute, warn_before })
    }

    /// The pool a task in `pool` moves to when nobody there answers in time: the one after
    /// it on the step's route (`pool`, then `to`), if any.
    pub fn next_pool(&self, pool: &str) -> Option<&str> {
        let to = &self.reroute.as_ref()?.to;
        let at = match to.iter().position(|p| p == pool) {
            Some(index) => index + 1,
            None if pool == self.pool => 0,
            None => return None,
        };
        to.get(at).map(String::as_str)
    }
}

const REROUTE_AFTER: &str = "reroute_after";
const TO: &str = "to";
const WARN_BEFORE: &str = "warn_before";

/// Reads an optional duration in seconds, under the rule of `timeout`.
fn duration(params: &Params, key: &str) -> Result<Option<Duration>, ParamError> {
    opt_f64(params, key)?
        .map(|secs| limits::step_duration(key, secs).map_err(|message| ParamError::at(key, message)))
        .transpose()
}

/// Reads `reroute_after` and `to` of a step whose first pool is `pool` and whose time limit
/// is `timeout`: both or neither, every pool a valid name listed once, every move before the
/// time limit.
fn reroute(params: &Params, pool: &str, timeout: Option<Duration>) -> Result<Option<Reroute>, ParamError> {
    let after = duration(params, REROUTE_AFTER)?;
    let to = opt_str_list(params, TO)?;
    let (after, to) = match (after, to) {
        (None, None) => return Ok(None),
        (Some(after), Some(to)) => (after, to),
        (Some(_), None) => {
            return Err(ParamError::at(REROUTE_AFTER, format!("'{REROUTE_AFTER}' needs '{TO}': the pools to move to")));
        }
        (None, Some(_)) => {
            return Err(ParamError::at(TO, format!("'{TO}' needs '{REROUTE_AFTER}': how long a pool has to answer")));
        }
    };
    if to.is_empty() {
        return Err(ParamError::at(TO, format!("'{TO}' must name at least one pool")));
    }
    for (index, next) in to.iter().enumerate() {
        limits::check_pool_name(next).map_err(|message| ParamError::at(TO, message))?;
        if next == pool || to[..index].contains(next) {
            return Err(ParamError::at(TO, format!("pool '{next}' is on the step's route twice")));
        }
    }
    if let Some(timeout) = timeout {
        let moves = u32::try_from(to.len()).unwrap_or(u32::MAX);
        if after.saturating_mul(moves) >= timeout {
            let message = format!(
                "'{REROUTE_AFTER}' times the {moves} pool(s) of '{TO}' must be shorter than the 'timeout' ({}s): \
                 every move comes before the task expires",
                timeout.as_secs_f64()
            );
            return Err(ParamError::at(REROUTE_AFTER, message));
        }
    }
    Ok(Some(Reroute { after, to }))
}

/// Reads `approvals`: a whole number of reviewers from 1, 1 when absent.
fn approvals(params: &Params) -> Result<u32, ParamError> {
    const KEY: &str = "approvals";
    let invalid =
        |what: String| ParamError::at(KEY, format!("'{KEY}' must be a whole number of reviewers from 1, not {what}"));
    match params.get(KEY) {
        None | Some(serde_json::Value::Null) => Ok(1),
        Some(serde_json::Value::Number(n)) => {
            n.as_u64().and_then(|n| u32::try_from(n).ok()).filter(|n| *n >= 1).ok_or_else(|| invalid(n.to_string()))
        }
        Some(other) => Err(invalid(type_name(other).to_owned())),
    }
}

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "human (pool: {}, choices: {}", self.pool, list(&self.choices))?;
        if self.approvals > 1 {
            write!(f, ", approvals: {}", self.approvals)?;
        }
        if let Some(reroute) = &self.reroute {
            write!(f, ", then after {}s each: {}", reroute.after.as_secs_f64(), reroute.to.join(", "))?;
        }
        f.write_str(")")
    }
}
