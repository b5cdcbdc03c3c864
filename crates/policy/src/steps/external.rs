//! Any step name that is not built in: a plugin or a model monitor serving `step.<name>`.

use std::fmt;
use std::time::Duration;

use super::{ParamError, Params, list, opt_decision, opt_f64};
use crate::call::{Decision, Kind};
use crate::limits;

/// How long an external step may take, and what it answers when it runs out.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeout {
    /// The step's own time limit; `None` leaves only the request's deadline.
    pub after: Option<Duration>,
    /// The answer when time runs out: fail closed unless the policy says otherwise.
    pub on_timeout: Decision,
}

/// A step that runs in its own queue; its parameters travel with the task.
#[derive(Debug, Clone, PartialEq)]
pub struct External {
    /// The step's name, as written in the policy (e.g. `monitor`, `evaltools/scanner`).
    pub name: String,
    /// Every parameter, `timeout` and `on_timeout` included, for the step to read.
    pub params: Params,
    /// Deadline settings.
    pub timeout: Timeout,
}

impl External {
    /// Reads `timeout` (seconds) and `on_timeout`; every other parameter is the step's own.
    pub fn from_params(name: &str, kind: Kind, params: &Params) -> Result<Self, ParamError> {
        Ok(External { name: name.to_owned(), params: params.clone(), timeout: Timeout::from_params(kind, params)? })
    }
}

impl fmt::Display for External {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (external)", self.name)
    }
}

impl Timeout {
    /// Reads `timeout` (seconds, above 0 and at most [`limits::MAX_STEP_TIMEOUT`]) and `on_timeout` (a decision of `kind`, not `modify`).
    pub fn from_params(kind: Kind, params: &Params) -> Result<Self, ParamError> {
        let after = match opt_f64(params, "timeout")? {
            None => None,
            Some(secs) => Some(limits::step_timeout(secs).map_err(|message| ParamError::at("timeout", message))?),
        };
        let on_timeout = opt_decision(params, "on_timeout", kind)?.unwrap_or(kind.fail_closed());
        if on_timeout == Decision::Modify {
            let allowed: Vec<Decision> = kind.decisions().iter().copied().filter(|d| *d != Decision::Modify).collect();
            return Err(ParamError::at(
                "on_timeout",
                format!(
                    "'on_timeout' cannot be modify: there is no call to run instead (use one of {})",
                    list(&allowed)
                ),
            ));
        }
        Ok(Timeout { after, on_timeout })
    }
}
