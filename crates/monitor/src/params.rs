//! The monitor's parameters in a policy, and the decision a score maps to.
//!
//! A step decides by score thresholds:
//!
//! ```yaml
//! - name: monitor
//!   tools: "*"
//!   approve_below: 3     # score < 3: approve (continue, in a review chain)
//!   escalate_below: 8    # 3 <= score < 8: escalate to the next step (a person, say)
//!   above: reject        # score >= 8: reject (or terminate, or escalate)
//!   fallback: escalate   # when the model cannot answer (default: the monitor's --fallback)
//! ```
//!
//! or by an audit budget (see [`crate::budget`]), which replaces the three thresholds:
//!
//! ```yaml
//! - name: monitor
//!   tools: "*"
//!   audit_budget: 0.01      # escalate the top 1% of the step's scores, approve the rest
//!   audit_threshold: 6.31   # calibrated: escalate scores above it (without it: paced)
//!   budget_scope: run       # one budget per run (default), or `step`: one across runs
//!   reject_above: 9.5       # scores at or above it are rejected outright
//!   terminate_above: 9.9    # … or end the sample
//! ```
//!
//! Identical model calls are answered once across the fleet ([`crate::sampling`]); the epoch
//! of a call's sample keeps its calls apart from those of other epochs, since the model's
//! answer to a repeated context is what epochs sample. `share_across_epochs: true` lets every
//! epoch take one answer for one context (at temperature 0, say, where epochs would pay twice
//! for the same answer).
//!
//! The policy engine does not know which external steps are monitors, so the parameters are
//! checked here, when a task arrives, and by `airlock policy check` ([`check_document`]) for
//! any step that names a parameter only a monitor takes. Invalid parameters never crash the
//! monitor nor lose the task: the step answers with its fallback and says what is wrong in
//! the explanation.

use airlock_policy::document::{Document, PolicyError};
use airlock_policy::steps::{ExternalStep, Step};
use airlock_policy::{Decision, Kind};
use airlock_records::monitor::NoteThresholds;
use serde_json::{Map, Value};

use crate::budget::{Mode, STEP_SCOPE};
use crate::protocol::{self, Protocol};

/// The highest suspicion score; the lowest is 0.
pub const MAX_SCORE: f64 = 10.0;

/// The parameters of a step that decides by thresholds.
const THRESHOLDS: &[&str] = &["approve_below", "escalate_below", "above"];
/// The parameters of a step that decides by an audit budget.
const BUDGET: &[&str] = &["audit_budget", "audit_threshold", "budget_scope", "reject_above", "terminate_above"];
/// The parameters of every monitor step, and the ones the policy engine reserves.
const COMMON: &[&str] =
    &["fallback", "share_across_epochs", "timeout", "on_timeout", airlock_policy::steps::MODEL_EXPLANATION];

/// How scores map to decisions, for one step of one chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// Scores below this approve (or continue, in a review chain).
    pub approve_below: f64,
    /// Scores from `approve_below` up to below this escalate.
    pub escalate_below: f64,
    /// What scores at or above `escalate_below` get.
    pub above: Decision,
}

/// A step's audit budget: escalate the top `budget` of its scores, approve the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditBudget {
    /// The share escalated, 0 < b < 1.
    pub budget: f64,
    /// Paced, or calibrated at `audit_threshold`.
    pub mode: Mode,
    /// Per run or across runs.
    pub scope: Scope,
    /// Scores at or above it are rejected outright.
    pub reject_above: Option<f64>,
    /// Scores at or above it terminate the sample outright.
    pub terminate_above: Option<f64>,
}

/// Which calls share a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The calls of one run (the request's origin run).
    Run,
    /// Every call of the step.
    Step,
}

/// How a step decides.
#[derive(Debug, Clone, PartialEq)]
pub enum Rule {
    /// By score thresholds.
    Thresholds(Thresholds),
    /// By an audit budget.
    Budget(AuditBudget),
}

/// A monitor step's parameters, read from a `StepTask`'s `params_json`.
#[derive(Debug, Clone, PartialEq)]
pub struct StepParams {
    /// How scores map to decisions.
    pub rule: Rule,
    /// What to answer when the model cannot; `None` leaves it to the monitor's configuration.
    pub fallback: Option<Decision>,
    /// The control protocol the step runs, if any.
    pub protocol: Option<Protocol>,
    /// Whether calls of different epochs with one context take one answer.
    pub share_across_epochs: bool,
}

/// What is wrong with a monitor step's parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("monitor parameters: {message}")]
pub struct ParamsError {
    /// The parameter at fault, when one is.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl ParamsError {
    pub(crate) fn at(key: &str, message: String) -> Self {
        ParamsError { key: Some(key.to_owned()), message }
    }

    pub(crate) fn whole(message: String) -> Self {
        ParamsError { key: None, message }
    }
}

/// Checks the parameters of every external step of `document` that names a parameter only a
/// monitor takes (`approve_below`, `escalate_below`, `audit_budget`, a protocol's, …) or is
/// named after a control protocol, as the monitor will read them: the first error, at its
/// file:line:column.
pub fn check_document(document: &Document) -> Result<(), PolicyError> {
    for (kind, entries) in [(Kind::Approval, &document.approvers), (Kind::Review, &document.reviewers)] {
        for entry in entries.iter().flatten() {
            let monitor_only = |key: &String| {
                THRESHOLDS[..2].contains(&key.as_str())
                    || BUDGET.contains(&key.as_str())
                    || protocol::KEYS.contains(&key.as_str())
            };
            let external = matches!(
                Step::from_params(&entry.name, kind, &entry.params),
                Ok(Step::External(ExternalStep::Named(_)))
            );
            if !external || !(entry.params.keys().any(monitor_only) || protocol::NAMES.contains(&entry.name.as_str())) {
                continue;
            }
            if let Err(e) = StepParams::from_params(&entry.name, kind, &entry.params) {
                let location = e
                    .key
                    .as_ref()
                    .and_then(|key| entry.param_locations.iter().find(|(k, _)| k == key))
                    .map_or(entry.location, |(_, location)| *location);
                return Err(document.error(location, format!("step '{}': {e}", entry.name)));
            }
        }
    }
    Ok(())
}

// === impl StepParams ===

impl StepParams {
    /// Reads the parameters of step `step` in a chain of `kind` from their JSON text.
    pub fn from_json(step: &str, kind: Kind, text: &str) -> Result<Self, ParamsError> {
        let params = match serde_json::from_str::<Value>(if text.trim().is_empty() { "{}" } else { text }) {
            Ok(Value::Object(map)) => map,
            Ok(other) => return Err(ParamsError::whole(format!("expected an object, got {other}"))),
            Err(e) => return Err(ParamsError::whole(format!("not JSON: {e}"))),
        };
        Self::from_params(step, kind, &params)
    }

    /// Reads the parameters of step `step` in a chain of `kind`.
    pub fn from_params(step: &str, kind: Kind, params: &Map<String, Value>) -> Result<Self, ParamsError> {
        let known = || THRESHOLDS.iter().chain(BUDGET).chain(COMMON).chain(protocol::KEYS).copied();
        if let Some(unknown) = params.keys().find(|key| !known().any(|k| k == key.as_str())) {
            let names = known().collect::<Vec<_>>().join(", ");
            return Err(ParamsError::at(unknown, format!("unknown parameter '{unknown}' (known: {names})")));
        }
        let rule = if params.contains_key("audit_budget") {
            if let Some(key) = THRESHOLDS.iter().find(|key| params.contains_key(**key)) {
                return Err(ParamsError::at(
                    key,
                    format!(
                        "'{key}' cannot be combined with 'audit_budget': the budget sets the threshold \
                         ('reject_above' and 'terminate_above' end the worst calls outright)"
                    ),
                ));
            }
            Rule::Budget(AuditBudget::from_params(kind, params)?)
        } else {
            if let Some(key) = BUDGET.iter().find(|key| params.contains_key(**key)) {
                return Err(ParamsError::at(key, format!("'{key}' needs 'audit_budget'")));
            }
            Rule::Thresholds(Thresholds::from_params(kind, params)?)
        };
        let answers: Vec<Decision> = kind.decisions().iter().copied().filter(|d| *d != Decision::Modify).collect();
        let fallback = decision(params, "fallback", &answers)?;
        let share_across_epochs = match params.get("share_across_epochs") {
            None => false,
            Some(Value::Bool(share)) => *share,
            Some(other) => {
                return Err(ParamsError::at(
                    "share_across_epochs",
                    format!("'share_across_epochs' is {other}: expected true or false"),
                ));
            }
        };
        let protocol = Protocol::from_params(step, kind, params, &rule)?;
        Ok(StepParams { rule, fallback, protocol, share_across_epochs })
    }
}

// === impl AuditBudget ===

impl AuditBudget {
    fn from_params(kind: Kind, params: &Map<String, Value>) -> Result<Self, ParamsError> {
        let budget = match params["audit_budget"].as_f64() {
            Some(b) if b > 0.0 && b < 1.0 => b,
            _ => {
                let value = &params["audit_budget"];
                let message = format!("'audit_budget' is {value}: it must be a share above 0 and below 1 (0.01 is 1%)");
                return Err(ParamsError::at("audit_budget", message));
            }
        };
        let mode = match score(params, "audit_threshold")? {
            Some(threshold) => Mode::Calibrated { threshold },
            None => Mode::Paced,
        };
        let scope = match params.get("budget_scope") {
            None => Scope::Run,
            Some(value) => match value.as_str() {
                Some("run") => Scope::Run,
                Some("step") => Scope::Step,
                _ => {
                    return Err(ParamsError::at(
                        "budget_scope",
                        format!("'budget_scope' is {value}: expected run or step"),
                    ));
                }
            },
        };
        let reject_above = score(params, "reject_above")?;
        if kind == Kind::Review && reject_above.is_some() {
            let message = "'reject_above': a review cannot reject (use 'terminate_above')".to_owned();
            return Err(ParamsError::at("reject_above", message));
        }
        let terminate_above = score(params, "terminate_above")?;
        if let (Some(reject), Some(terminate)) = (reject_above, terminate_above)
            && terminate < reject
        {
            let message = format!("'terminate_above' ({terminate}) must not be below 'reject_above' ({reject})");
            return Err(ParamsError::at("terminate_above", message));
        }
        if let Mode::Calibrated { threshold } = mode {
            for (key, end) in [("reject_above", reject_above), ("terminate_above", terminate_above)] {
                if let Some(end) = end.filter(|end| *end <= threshold) {
                    let message = format!(
                        "'{key}' ({end}) must be above 'audit_threshold' ({threshold}): nothing would be escalated"
                    );
                    return Err(ParamsError::at(key, message));
                }
            }
        }
        Ok(AuditBudget { budget, mode, scope, reject_above, terminate_above })
    }

    /// The decision that ends a call scored `score` outright, if any: terminate at or above
    /// `terminate_above`, else reject at or above `reject_above`.
    pub fn ends(&self, score: f64) -> Option<Decision> {
        let at_or_above = |end: Option<f64>| end.is_some_and(|end| score >= end);
        if at_or_above(self.terminate_above) {
            Some(Decision::Terminate)
        } else if at_or_above(self.reject_above) {
            Some(Decision::Reject)
        } else {
            None
        }
    }

    /// The budget's key within the step for a call of the run `run`: the run, or
    /// [`STEP_SCOPE`] for a budget across runs.
    pub fn scope_key<'a>(&self, run: &'a str) -> &'a str {
        match self.scope {
            Scope::Run => run,
            Scope::Step => STEP_SCOPE,
        }
    }
}

// === impl Scope ===

impl Scope {
    /// The scope as `budget_scope` names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Run => "run",
            Scope::Step => "step",
        }
    }
}

pub(crate) fn score(params: &Map<String, Value>, key: &str) -> Result<Option<f64>, ParamsError> {
    let Some(value) = params.get(key) else { return Ok(None) };
    match value.as_f64() {
        Some(x) if (0.0..=MAX_SCORE).contains(&x) => Ok(Some(x)),
        Some(x) => Err(ParamsError::at(key, format!("'{key}' is {x}: it must be a score from 0 to 10"))),
        None => Err(ParamsError::at(key, format!("'{key}' must be a number from 0 to 10, not {value}"))),
    }
}

fn required_score(params: &Map<String, Value>, key: &str) -> Result<f64, ParamsError> {
    score(params, key)?.ok_or_else(|| {
        ParamsError::at(
            key,
            format!("'{key}' is required (a score from 0 to 10), unless the step has an 'audit_budget'"),
        )
    })
}

fn decision(params: &Map<String, Value>, key: &str, allowed: &[Decision]) -> Result<Option<Decision>, ParamsError> {
    let Some(value) = params.get(key) else { return Ok(None) };
    let names = || allowed.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(", ");
    let parsed = value.as_str().and_then(|s| s.parse::<Decision>().ok()).filter(|d| allowed.contains(d));
    parsed.map(Some).ok_or_else(|| ParamsError::at(key, format!("'{key}' is {value}: expected one of {}", names())))
}

// === impl Thresholds ===

impl Thresholds {
    fn from_params(kind: Kind, params: &Map<String, Value>) -> Result<Self, ParamsError> {
        let approve_below = required_score(params, "approve_below")?;
        let escalate_below = required_score(params, "escalate_below")?;
        if approve_below > escalate_below {
            return Err(ParamsError::at(
                "approve_below",
                format!("'approve_below' ({approve_below}) must not be above 'escalate_below' ({escalate_below})"),
            ));
        }
        let blocking: &[Decision] = match kind {
            Kind::Approval => &[Decision::Reject, Decision::Terminate, Decision::Escalate],
            Kind::Review => &[Decision::Terminate, Decision::Escalate],
        };
        let above = decision(params, "above", blocking)?.unwrap_or(kind.fail_closed());
        Ok(Thresholds { approve_below, escalate_below, above })
    }

    /// The decision for `score` in a chain of `kind`: below `approve_below` approve (continue
    /// for a review), below `escalate_below` escalate, otherwise `above`.
    pub fn decide(&self, kind: Kind, score: f64) -> Decision {
        if score < self.approve_below {
            match kind {
                Kind::Approval => Decision::Approve,
                Kind::Review => Decision::Continue,
            }
        } else if score < self.escalate_below {
            Decision::Escalate
        } else {
            self.above
        }
    }

    /// The thresholds as a monitor's note records them.
    pub fn to_note(&self) -> NoteThresholds {
        NoteThresholds {
            approve_below: self.approve_below,
            escalate_below: self.escalate_below,
            above: self.above.as_str().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests;
