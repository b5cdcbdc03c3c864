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
