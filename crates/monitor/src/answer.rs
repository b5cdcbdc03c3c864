//! The step's answer for what happened to a task: a score mapped through the thresholds, a
//! fallback, or a timeout. Pure: the same outcome always gives the same answer.

use airlock_contract::v1;
use airlock_policy::Decision;
use airlock_records::convert::decision_to_wire;
use airlock_records::monitor::MonitorNote;

use crate::params::Thresholds;
use crate::score::Score;

/// Who answers: recorded in every answer's metadata and `decided_by`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The monitor's id.
    pub monitor_id: String,
    /// The provider's name (`openai`, `anthropic`).
    pub provider: &'static str,
    /// The model.
    pub model: String,
}

/// What became of one task.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The model scored the call; the thresholds gave `decision`.
    Scored {
        /// The model's verdict.
        score: Score,
        /// The step's thresholds.
        thresholds: Thresholds,
        /// What they give for the score.
        decision: Decision,
        /// Attempts it took.
        attempts: u32,
    },
    /// The model could not answer, or the step is misconfigured: the fallback decision.
    Fallback {
        /// The fallback.
        decision: Decision,
        /// Why there is no score, as the answer's `metadata.error` records it.
        code: FallbackCode,
        /// What went wrong.
        why: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The step's deadline passed (or would have before the model could answer): the task's
    /// `on_timeout`.
    TimedOut {
        /// The task's `on_timeout`.
        decision: Decision,
        /// What was going on.
        why: String,
        /// Attempts made.
        attempts: u32,
    },
}

/// Why a monitor answered its fallback, in the answer's `metadata.error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackCode {
    /// The step's parameters do not parse.
    InvalidParams,
    /// The task cannot be turned into a prompt.
    BadTask,
    /// The API answered 429.
    RateLimited,
    /// The API answered another error status.
    HttpStatus,
    /// A model call took too long.
    Timeout,
    /// The API could not be reached.
    Unreachable,
    /// The reply could not be read.
    MalformedResponse,
    /// The reply held no score.
    NoScore,
    /// The model refused.
    Refused,
}

impl FallbackCode {
    /// The code as metadata and logs spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackCode::InvalidParams => "invalid_params",
            FallbackCode::BadTask => "bad_task",
            FallbackCode::RateLimited => "rate_limited",
            FallbackCode::HttpStatus => "http_status",
            FallbackCode::Timeout => "timeout",
            FallbackCode::Unreachable => "unreachable",
            FallbackCode::MalformedResponse => "malformed_response",
            FallbackCode::NoScore => "no_score",
            FallbackCode::Refused => "refused",
        }
    }
}

impl std::fmt::Display for FallbackCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl Outcome {
    /// The decision answered.
    pub fn decision(&self) -> Decision {
        match self {
            Outcome::Scored { decision, .. }
            | Outcome::Fallback { decision, .. }
            | Outcome::TimedOut { decision, .. } => *decision,
        }
    }
}

/// The `StepAnswer` for `outcome`, asked at `started_ms` and answered at `answered_ms`.
pub fn step_answer(identity: &Identity, outcome: &Outcome, started_ms: i64, answered_ms: i64) -> v1::StepAnswer {
    let mut note = MonitorNote {
        monitor: identity.monitor_id.clone(),
        provider: identity.provider.to_owned(),
        model: identity.model.clone(),
        ..MonitorNote::default()
    };
    let explanation = match outcome {
        Outcome::Scored { score, thresholds, decision, attempts } => {
            note.score = Some(score.value);
            note.reason = Some(score.reason.clone());
            note.thresholds = Some(thresholds.to_note());
            note.attempts = *attempts;
            let reason = if score.reason.is_empty() { String::new() } else { format!(": {}", score.reason) };
            format!("Suspicion {}/10 from {} ({decision}){reason}", score.value, identity.model)
        }
        Outcome::Fallback { decision, code, why, attempts } => {
            note.error = Some(code.as_str().to_owned());
            note.error_message = Some(why.clone());
            note.fallback = true;
            note.attempts = *attempts;
            format!("The monitor could not score the call ({why}); its fallback is {decision}")
        }
        Outcome::TimedOut { decision, why, attempts } => {
            note.error = Some("deadline".to_owned());
            note.error_message = Some(why.clone());
            note.on_timeout = true;
            note.attempts = *attempts;
            format!("The step's deadline passed before the model answered ({why}); on_timeout is {decision}")
        }
    };
    v1::StepAnswer {
        step: None,
        approver: String::new(),
        decision: decision_to_wire(outcome.decision()).into(),
        modified: None,
        explanation: Some(explanation),
        metadata_json: serde_json::to_string(&note).expect("a note serialises"),
        decided_by: format!("{}/{}", identity.monitor_id, identity.model),
        started_at_unix_ms: started_ms,
        answered_at_unix_ms: answered_ms,
        published_by: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn identity() -> Identity {
        Identity { monitor_id: "monitor@h:1".into(), provider: "openai", model: "gpt-4o-mini".into() }
    }

    /// A score of 9 through thresholds 3 and 8, on the second attempt.
    fn scored() -> Outcome {
        Outcome::Scored {
            score: Score { value: 9.0, reason: "reads ~/.ssh".into() },
            thresholds: Thresholds { approve_below: 3.0, escalate_below: 8.0, above: Decision::Reject },
            decision: Decision::Reject,
            attempts: 2,
        }
    }

    #[test]
    fn a_score_is_recorded_with_its_reason_and_model() {
        let outcome = scored();
        let answer = step_answer(&identity(), &outcome, 10, 20);
        assert_eq!(answer.decision, i32::from(v1::DecisionKind::Reject));
        assert_eq!(answer.decided_by, "monitor@h:1/gpt-4o-mini");
        assert_eq!(answer.explanation.as_deref(), Some("Suspicion 9/10 from gpt-4o-mini (reject): reads ~/.ssh"));
        let metadata: Value = serde_json::from_str(&answer.metadata_json).unwrap();
        assert_eq!(metadata["score"].as_f64(), Some(9.0));
        assert_eq!(metadata["reason"], "reads ~/.ssh");
        assert_eq!(metadata["model"], "gpt-4o-mini");
        assert_eq!(metadata["thresholds"]["above"], "reject");
        assert_eq!((answer.started_at_unix_ms, answer.answered_at_unix_ms), (10, 20));
    }

    #[test]
    fn the_metadata_keeps_its_json_form() {
        assert_eq!(
            step_answer(&identity(), &scored(), 0, 0).metadata_json,
            r#"{"monitor":"monitor@h:1","provider":"openai","model":"gpt-4o-mini","score":9.0,"reason":"reads ~/.ssh","thresholds":{"approve_below":3.0,"escalate_below":8.0,"above":"reject"},"attempts":2}"#
        );
        let fallback = Outcome::Fallback {
            decision: Decision::Escalate,
            code: FallbackCode::NoScore,
            why: "empty".into(),
            attempts: 1,
        };
        assert_eq!(
            step_answer(&identity(), &fallback, 0, 0).metadata_json,
            r#"{"monitor":"monitor@h:1","provider":"openai","model":"gpt-4o-mini","error":"no_score","error_message":"empty","fallback":true,"attempts":1}"#
        );
        let timed_out = Outcome::TimedOut { decision: Decision::Terminate, why: "slow".into(), attempts: 3 };
        assert_eq!(
            step_answer(&identity(), &timed_out, 0, 0).metadata_json,
            r#"{"monitor":"monitor@h:1","provider":"openai","model":"gpt-4o-mini","error":"deadline","error_message":"slow","on_timeout":true,"attempts":3}"#
        );
    }

    #[test]
    fn failures_say_why() {
        let outcome = Outcome::Fallback {
            decision: Decision::Escalate,
            code: FallbackCode::RateLimited,
            why: "429".into(),
            attempts: 4,
        };
        let answer = step_answer(&identity(), &outcome, 0, 0);
        assert_eq!(answer.decision, i32::from(v1::DecisionKind::Escalate));
        assert!(answer.explanation.unwrap().contains("(429); its fallback is escalate"));
        let metadata: Value = serde_json::from_str(&answer.metadata_json).unwrap();
        assert_eq!((metadata["error"].as_str(), metadata["fallback"].as_bool()), (Some("rate_limited"), Some(true)));
        assert!(metadata.get("score").is_none());
        let outcome = Outcome::TimedOut { decision: Decision::Terminate, why: "slow".into(), attempts: 1 };
        let answer = step_answer(&identity(), &outcome, 0, 0);
        assert_eq!(answer.decision, i32::from(v1::DecisionKind::Terminate));
        assert!(answer.explanation.unwrap().contains("on_timeout is terminate"));
    }
}
