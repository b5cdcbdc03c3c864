//! `human`: an external step bound for the human queue of a pool.

use std::fmt;

use super::external::Timeout;
use super::{ParamError, Params, deny_unknown, list, opt_str, opt_str_list, type_name};
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
}

impl Human {
    /// Reads `pool`, `choices`, `approvals`, `timeout` and `on_timeout`.
    ///
    /// Choices default to Inspect's: approve, reject, terminate for approval; continue,
    /// terminate for review. `modify` is offered only when listed (Inspect drops it); a list
    /// of nothing but `modify` is an error, as in Inspect.
    /// `approvals` is a whole number from 1 (the default).
    pub fn from_params(kind: Kind, params: &Params) -> Result<Self, ParamError> {
        deny_unknown(NAME, params, &["choices", "pool", "approvals", "timeout", "on_timeout"])?;
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
        Ok(Human {
            pool: pool.to_owned(),
            choices,
            timeout: Timeout::from_params(kind, params)?,
            approvals: approvals(params)?,
        })
    }
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
        f.write_str(")")
    }
}
