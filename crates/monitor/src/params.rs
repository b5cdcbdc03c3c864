//! The monitor's parameters in a policy, and the decision a score maps to.
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
//! The policy engine does not know which external steps are monitors, so the parameters are
//! checked here, when a task arrives. Invalid parameters never crash the monitor nor lose the
//! task: the step answers with its fallback and says what is wrong in the explanation.

use airlock_policy::{Decision, Kind};
use airlock_records::monitor::NoteThresholds;
use serde_json::{Map, Value};

/// The highest suspicion score; the lowest is 0.
pub const MAX_SCORE: f64 = 10.0;

/// Every parameter the monitor reads, and the ones the policy engine reserves.
const KNOWN: &[&str] = &["approve_below", "escalate_below", "above", "fallback", "timeout", "on_timeout"];

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

/// A monitor step's parameters, read from a `StepTask`'s `params_json`.
#[derive(Debug, Clone, PartialEq)]
pub struct StepParams {
    /// The score thresholds.
    pub thresholds: Thresholds,
    /// What to answer when the model cannot; `None` leaves it to the monitor's configuration.
    pub fallback: Option<Decision>,
}

/// What is wrong with a monitor step's parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("monitor parameters: {0}")]
pub struct ParamsError(pub String);

// === impl StepParams ===

impl StepParams {
    /// Reads the parameters of a step in a chain of `kind` from their JSON text.
    pub fn from_json(kind: Kind, text: &str) -> Result<Self, ParamsError> {
        let params = match serde_json::from_str::<Value>(if text.trim().is_empty() { "{}" } else { text }) {
            Ok(Value::Object(map)) => map,
            Ok(other) => return Err(ParamsError(format!("expected an object, got {other}"))),
            Err(e) => return Err(ParamsError(format!("not JSON: {e}"))),
        };
        Self::from_params(kind, &params)
    }

    /// Reads the parameters of a step in a chain of `kind`.
    pub fn from_params(kind: Kind, params: &Map<String, Value>) -> Result<Self, ParamsError> {
        if let Some(unknown) = params.keys().find(|key| !KNOWN.contains(&key.as_str())) {
            return Err(ParamsError(format!("unknown parameter '{unknown}' (known: {})", KNOWN.join(", "))));
        }
        let approve_below = threshold(params, "approve_below")?;
        let escalate_below = threshold(params, "escalate_below")?;
        if approve_below > escalate_below {
            return Err(ParamsError(format!(
                "'approve_below' ({approve_below}) must not be above 'escalate_below' ({escalate_below})"
            )));
        }
        let blocking: &[Decision] = match kind {
            Kind::Approval => &[Decision::Reject, Decision::Terminate, Decision::Escalate],
            Kind::Review => &[Decision::Terminate, Decision::Escalate],
        };
        let above = decision(params, "above", blocking)?.unwrap_or(kind.fail_closed());
        let answers: Vec<Decision> = kind.decisions().iter().copied().filter(|d| *d != Decision::Modify).collect();
        let fallback = decision(params, "fallback", &answers)?;
        Ok(StepParams { thresholds: Thresholds { approve_below, escalate_below, above }, fallback })
    }
}

fn threshold(params: &Map<String, Value>, key: &str) -> Result<f64, ParamsError> {
    let value = params.get(key).ok_or_else(|| ParamsError(format!("'{key}' is required (a score from 0 to 10)")))?;
    match value.as_f64() {
        Some(x) if (0.0..=MAX_SCORE).contains(&x) => Ok(x),
        Some(x) => Err(ParamsError(format!("'{key}' is {x}: it must be a score from 0 to 10"))),
        None => Err(ParamsError(format!("'{key}' must be a number from 0 to 10, not {value}"))),
    }
}

fn decision(params: &Map<String, Value>, key: &str, allowed: &[Decision]) -> Result<Option<Decision>, ParamsError> {
    let Some(value) = params.get(key) else { return Ok(None) };
    let names = || allowed.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(", ");
    let parsed = value.as_str().and_then(|s| s.parse::<Decision>().ok()).filter(|d| allowed.contains(d));
    parsed.map(Some).ok_or_else(|| ParamsError(format!("'{key}' is {value}: expected one of {}", names())))
}

// === impl Thresholds ===

impl Thresholds {
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
