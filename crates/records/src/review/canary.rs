//! Canaries' catch rates as the reviewer API shows them to admins (`GET /api/canaries`): per
//! pool and per reviewer, and each canary with every answer given to it. Never part of a
//! task's view.

use airlock_policy::Decision;
use serde::{Deserialize, Serialize};

use super::{Settled, decision_list, decision_text};

/// `GET /api/canaries`: the catch rates of the caller's pools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CanaryReport {
    /// Per pool, by name.
    pub pools: Vec<PoolCatch>,
    /// Per reviewer who answered a canary, by name.
    pub reviewers: Vec<ReviewerCatch>,
    /// The canaries, newest first.
    pub canaries: Vec<CanaryView>,
}

/// A pool's canaries: planted, and how they stand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolCatch {
    /// The pool.
    pub pool: String,
    /// Canaries planted.
    pub planted: u64,
    /// Decided by a person or a standing decision: `caught + missed`.
    pub answered: u64,
    /// Decided with an expected decision.
    pub caught: u64,
    /// Decided with any other.
    pub missed: u64,
    /// Left unanswered until their deadline.
    pub expired: u64,
    /// Still waiting.
    pub pending: u64,
    /// `caught / answered`; none before any answer.
    pub catch_rate: Option<f64>,
}

/// A reviewer's answers to canaries: each decision they gave (or a standing decision of
/// theirs gave), and each approval of a step that needs several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewerCatch {
    /// The reviewer.
    pub reviewer: String,
    /// Answers given.
    pub answered: u64,
    /// Answers with an expected decision.
    pub caught: u64,
    /// Answers with any other (an approval among them).
    pub missed: u64,
    /// Of the answers, those a standing decision of theirs gave.
    pub by_standing: u64,
    /// `caught / answered`; none before any answer.
    pub catch_rate: Option<f64>,
}

/// How a canary stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Still waiting.
    Pending,
    /// Decided with an expected decision.
    Caught,
    /// Decided with another.
    Missed,
    /// Nobody answered before its deadline.
    Expired,
}

impl Outcome {
    /// Its name, as the JSON has it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pending => "pending",
            Outcome::Caught => "caught",
            Outcome::Missed => "missed",
            Outcome::Expired => "expired",
        }
    }
}

/// One canary: what it is, how it stands, and every answer given to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CanaryView {
    /// Its task's id.
    pub task: String,
    /// The pool it was planted in.
    pub pool: String,
    /// Its name in the canaries file.
    pub name: String,
    /// Why the call is bad.
    pub explanation: String,
    /// The decisions that count as caught.
    #[serde(with = "decision_list")]
    pub expected: Vec<Decision>,
    /// When it was planted (unix ms).
    pub planted_at_unix_ms: i64,
    /// How it stands.
    pub outcome: Outcome,
    /// Its task's verdict: who decided what and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<Settled>,
    /// Every answer counted for a reviewer, in order.
    pub answers: Vec<CanaryAnswer>,
}

/// One reviewer's answer to a canary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanaryAnswer {
    /// Who.
    pub reviewer: String,
    /// What.
    #[serde(with = "decision_text")]
    pub decision: Decision,
    /// When (unix ms).
    pub at_unix_ms: i64,
    /// The standing decision of theirs that gave it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standing: Option<i64>,
    /// Whether it caught the canary.
    pub caught: bool,
}
