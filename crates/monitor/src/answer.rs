//! The step's answer for what happened to a task: a score mapped through the thresholds, a
//! fallback, or a timeout. Pure: the same outcome always gives the same answer.

use airlock_contract::v1;
use airlock_policy::Decision;
use airlock_records::convert::decision_to_wire;
use airlock_records::monitor::{MonitorNote, NoteBudget, NoteCall, NoteProtocol};

use crate::params::Thresholds;
use crate::protocol::requests::to_wire;
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
    /// The model scored the call; the thresholds or the budget gave `decision`.
    Scored {
        /// The model's verdict.
        score: Score,
        /// What the score went through.
        basis: Basis,
        /// What it gives for the score.
        decision: Decision,
        /// Attempts it took.
        attempts: u32,
        /// What the step's control protocol did, if it runs one.
        protocol: Option<Box<Acted>>,
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

/// What a control protocol did with a scored call.
#[derive(Debug, Clone, PartialEq)]
pub struct Acted {
    /// The trail: every call proposed or sampled, with its score.
    pub note: NoteProtocol,
    /// The call that runs instead of the original (the answer is a modify).
    pub modified: Option<NoteCall>,
    /// What happened, in a few words, for the explanation.
    pub summary: String,
    /// Why the protocol could not finish; the decision is then the fallback or `on_timeout`.
    pub failure: Option<Failure>,
}

/// A control protocol's model failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// An error retries did not cure, or a task the protocol cannot act on: the fallback.
    Fallback {
        /// Why.
        code: FallbackCode,
        /// What went wrong.
        why: String,
    },
    /// The step's deadline came first: `on_timeout`.
    TimedOut {
        /// What was going on.
        why: String,
    },
}

/// What a score went through to become a decision.
#[derive(Debug, Clone, PartialEq)]
pub enum Basis {
    /// The step's thresholds.
    Thresholds(Thresholds),
    /// The step's audit budget, as it stood after deciding.
    Budget(NoteBudget),
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
    /// A model asked for a tool call made none, or one that cannot run.
    NoCall,
    /// A `resample` step's request does not say how its model was asked (`generation`).
    NoGeneration,
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
            FallbackCode::NoCall => "no_call",
            FallbackCode::NoGeneration => "no_generation",
        }
    }
}

impl std::fmt::Display for FallbackCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl Outcome {
    /// What the step's control protocol did, when it ran one.
    pub fn acted(&self) -> Option<&Acted> {
        match self {
            Outcome::Scored { protocol, .. } => protocol.as_deref(),
            _ => None,
        }
    }

    /// The decision answered.
    pub fn decision(&self) -> Decision {
        match self {
            Outcome::Scored { decision, .. }
            | Outcome::Fallback { decision, .. }
            | Outcome::TimedOut { decision, .. } => *decision,
        }
    }
}

/// The `StepAnswer` for `outcome`, asked at `started_ms` and answered at `answered_ms`; a
/// modify's call keeps the original's id, `call_id`.
pub fn step_answer(
    identity: &Identity,
    outcome: &Outcome,
    call_id: &str,
    started_ms: i64,
    answered_ms: i64,
) -> v1::StepAnswer {
    let mut note = MonitorNote {
        monitor: identity.monitor_id.clone(),
        provider: identity.provider.to_owned(),
        model: identity.model.clone(),
        ..MonitorNote::default()
    };
    let explanation = match outcome {
        Outcome::Scored { score, basis, decision, attempts, protocol } => {
            note.score = Some(score.value);
            note.reason = Some(score.reason.clone());
            note.attempts = *attempts;
            let why = match basis {
                Basis::Thresholds(thresholds) => {
                    note.thresholds = Some(thresholds.to_note());
                    String::new()
                }
                Basis::Budget(budget) => {
                    note.budget = Some(budget.clone());
                    format!(
                        "; audit budget {}%, threshold {}, {:.1}% passed on",
                        budget.audit_budget * 100.0,
                        budget.threshold,
                        budget.share * 100.0
                    )
                }
            };
            let reason = if score.reason.is_empty() { String::new() } else { format!(": {}", score.reason) };
            let scored = format!("Suspicion {}/10 from {} ({decision}{why}){reason}", score.value, identity.model);
            match protocol {
                None => scored,
                Some(acted) => {
                    note.protocol = Some(acted.note.clone());
                    let failed = match &acted.failure {
                        None => String::new(),
                        Some(Failure::Fallback { code, why }) => {
                            note.error = Some(code.as_str().to_owned());
                            note.error_message = Some(why.clone());
                            note.fallback = true;
                            format!(" ({why}); its fallback is {decision}")
                        }
                        Some(Failure::TimedOut { why }) => {
                            note.error = Some("deadline".to_owned());
                            note.error_message = Some(why.clone());
                            note.on_timeout = true;
                            format!(" ({why}); on_timeout is {decision}")
                        }
                    };
                    format!("{scored}. {}{failed}", acted.summary)
                }
            }
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
        modified: outcome.acted().and_then(|acted| acted.modified.as_ref()).map(|call| to_wire(call_id, call)),
        explanation: Some(explanation),
        metadata_json: serde_json::to_string(&note).expect("a note serialises"),
        decided_by: format!("{}/{}", identity.monitor_id, identity.model),
        started_at_unix_ms: started_ms,
        answered_at_unix_ms: answered_ms,
        published_by: String::new(),
        timed_out: matches!(outcome, Outcome::TimedOut { .. })
            || outcome.acted().is_some_and(|acted| matches!(acted.failure, Some(Failure::TimedOut { .. }))),
    }
}

#[cfg(test)]
mod tests;
