//! `auto`: answers a fixed decision, like Inspect's `auto` approver.

use std::fmt;

use super::{ParamError, Params, Subject, deny_unknown, opt_decision};
use crate::call::{Answer, Decision, Kind};

/// The step's name in a policy file.
pub const NAME: &str = "auto";

/// The explanation Inspect's `auto_approver` gives.
pub const EXPLANATION: &str = "Automatic decision.";

/// Answers `decision` for every call it is asked about.
#[derive(Debug, Clone, PartialEq)]
pub struct Auto {
    decision: Decision,
}

impl Auto {
    /// `decision` defaults to `approve` for approval and `continue` for review.
    pub fn from_params(kind: Kind, params: &Params) -> Result<Self, ParamError> {
        deny_unknown(NAME, params, &["decision"])?;
        let default = match kind {
            Kind::Approval => Decision::Approve,
            Kind::Review => Decision::Continue,
        };
        Ok(Auto { decision: opt_decision(params, "decision", kind)?.unwrap_or(default) })
    }

    /// The configured decision, explained as Inspect explains it.
    pub fn decide(&self, _subject: &Subject<'_>) -> Answer {
        Answer::new(self.decision, EXPLANATION)
    }
}

impl fmt::Display for Auto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "auto (decision: {})", self.decision)
    }
}
