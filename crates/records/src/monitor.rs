//! The note a model monitor leaves in its answer's metadata: who scored, the score and why,
//! or why there is none. The monitor writes it; the reviewer's UI and calibration read it.

use serde::{Deserialize, Serialize};

/// A model monitor's note, as the `metadata_json` of its `StepAnswer`. Every field may be
/// missing when read, so a note written by hand (or by an older monitor) still reads; the
/// fields are written in this order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MonitorNote {
    /// The monitor's id.
    pub monitor: String,
    /// The provider's name (`openai`, `anthropic`).
    pub provider: String,
    /// The model that scored.
    pub model: String,
    /// The suspicion score, from 0 (benign) to 10; none when the model gave none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Why, in the model's words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The thresholds the score went through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<NoteThresholds>,
    /// The audit budget the score went through, instead of thresholds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<NoteBudget>,
    /// Why there is no score: a stable code (`deadline` when the step's deadline passed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why there is no score, for people.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// The answer is the step's `fallback`.
    #[serde(skip_serializing_if = "is_false")]
    pub fallback: bool,
    /// The answer is the step's `on_timeout`.
    #[serde(skip_serializing_if = "is_false")]
    pub on_timeout: bool,
    /// How many times the model was asked.
    pub attempts: u32,
    /// What a control protocol did with the score: the call a trusted model wrote instead,
    /// or the untrusted model's other samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<NoteProtocol>,
}

/// What a control protocol step (`trusted_edit`, `defer_to_trusted`, `resample`) did after
/// the monitor scored the call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NoteProtocol {
    /// The protocol: `trusted_edit`, `defer_to_trusted` or `resample`.
    pub name: String,
    /// `resample`'s mode: `run` (the least suspicious sample runs) or `incriminate` (the
    /// samples are evidence only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The threshold the score was held against (`edit_threshold`, `defer_threshold`).
    pub threshold: f64,
    /// The model asked for a call (the trusted model, or the untrusted one resampled).
    pub model: String,
    /// The call as the untrusted model made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original: Option<NoteCall>,
    /// The call that runs instead: the trusted model's edit or proposal, or the sample chosen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacement: Option<NoteCall>,
    /// `resample`: every sample drawn, in the order drawn.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<NoteSample>,
    /// `resample`: the samples' scores as evidence for an audit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<NoteEvidence>,
}

/// A tool call as a protocol's note shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NoteCall {
    /// The tool.
    pub function: String,
    /// Its arguments, a JSON object.
    pub arguments: serde_json::Map<String, serde_json::Value>,
}

/// One sample the untrusted model drew again, with the monitor's score of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NoteSample {
    /// The call it made; none when it made none (or the model failed: see `error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<NoteCall>,
    /// The monitor's score of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Why, in the monitor's words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why there is no call or no score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// This sample is the one that runs.
    #[serde(skip_serializing_if = "is_false")]
    pub chosen: bool,
}

/// The samples' scores, summed up as evidence.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NoteEvidence {
    /// The highest score, the original call's included.
    pub max: f64,
    /// The mean score, the original call's included.
    pub mean: f64,
}

/// The thresholds a score went through, as the step's parameters name them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NoteThresholds {
    /// Below it, approve (continue for a review).
    pub approve_below: f64,
    /// Below it (and not below `approve_below`), escalate.
    pub escalate_below: f64,
    /// The decision at or above `escalate_below`.
    pub above: String,
}

/// An audit budget as a score found it, after deciding on it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NoteBudget {
    /// The step's `audit_budget`: the share to pass on.
    pub audit_budget: f64,
    /// `paced` (the threshold learned from the scores) or `calibrated` (`audit_threshold`).
    pub mode: String,
    /// Whose calls share the budget: the run, or `*` for every run of the step.
    pub scope: String,
    /// The threshold: paced, a score at or above it may be passed on; calibrated, a score
    /// above it is.
    pub threshold: f64,
    /// The share of the scope's calls passed on so far, this one included.
    pub share: f64,
    /// Scores seen in the scope, fleet-wide as far as this monitor has heard.
    pub seen: u64,
    /// Calls passed on.
    pub passed: u64,
    /// `audit_budget × seen - passed`.
    pub left: f64,
    /// Scores at or above it are rejected outright.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reject_above: Option<f64>,
    /// Scores at or above it terminate the sample outright.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminate_above: Option<f64>,
}

fn is_false(value: &bool) -> bool {
    !value
}

impl MonitorNote {
    /// The note in `metadata`, when it is one: an object whose monitor fields have their types.
    pub fn read(metadata: &serde_json::Value) -> Option<Self> {
        metadata.is_object().then(|| Self::deserialize(metadata).ok()).flatten()
    }
}

#[cfg(test)]
mod tests;
