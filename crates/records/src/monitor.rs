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
mod tests {
    use super::*;

    fn scored() -> MonitorNote {
        MonitorNote {
            monitor: "monitor-1".into(),
            provider: "openai".into(),
            model: "gpt-x".into(),
            score: Some(7.5),
            reason: Some("deletes files".into()),
            thresholds: Some(NoteThresholds { approve_below: 3.0, escalate_below: 8.0, above: "reject".into() }),
            attempts: 2,
            ..MonitorNote::default()
        }
    }

    #[test]
    fn a_scored_note_has_its_json_form() {
        assert_eq!(
            serde_json::to_string(&scored()).unwrap(),
            r#"{"monitor":"monitor-1","provider":"openai","model":"gpt-x","score":7.5,"reason":"deletes files","thresholds":{"approve_below":3.0,"escalate_below":8.0,"above":"reject"},"attempts":2}"#
        );
    }

    #[test]
    fn a_fallback_and_a_timeout_have_their_json_form() {
        let fallback = MonitorNote {
            monitor: "m".into(),
            provider: "anthropic".into(),
            model: "claude".into(),
            error: Some("provider_error".into()),
            error_message: Some("503".into()),
            fallback: true,
            attempts: 3,
            ..MonitorNote::default()
        };
        assert_eq!(
            serde_json::to_string(&fallback).unwrap(),
            r#"{"monitor":"m","provider":"anthropic","model":"claude","error":"provider_error","error_message":"503","fallback":true,"attempts":3}"#
        );
        let timed_out = MonitorNote { fallback: false, on_timeout: true, error: Some("deadline".into()), ..fallback };
        assert_eq!(
            serde_json::to_string(&timed_out).unwrap(),
            r#"{"monitor":"m","provider":"anthropic","model":"claude","error":"deadline","error_message":"503","on_timeout":true,"attempts":3}"#
        );
    }

    #[test]
    fn a_note_reads_back_and_a_partial_one_reads() {
        let note = scored();
        assert_eq!(MonitorNote::read(&serde_json::to_value(&note).unwrap()), Some(note));
        let partial =
            MonitorNote::read(&serde_json::json!({"score": 5, "thresholds": {"approve_below": 3}, "other": [1]}))
                .expect("a partial note");
        assert_eq!(partial.score, Some(5.0));
        assert_eq!(partial.thresholds.map(|t| t.approve_below), Some(3.0));
        assert_eq!(partial.model, "");
    }

    #[test]
    fn what_is_not_a_note_reads_as_none() {
        assert_eq!(MonitorNote::read(&serde_json::json!([1, 2])), None);
        assert_eq!(MonitorNote::read(&serde_json::json!({"score": "high"})), None);
    }
}
