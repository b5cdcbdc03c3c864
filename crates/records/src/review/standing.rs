//! Standing decisions as the reviewer API shows and takes them: `GET /api/standing`,
//! `POST /api/standing` (answer a task and every identical call), and the revocation's answer.

use std::fmt;

use airlock_contract::v1;
use airlock_policy::{Decision, Kind};
use serde::{Deserialize, Serialize};

use super::{Caller, PolicyView, decision_text, kind_text};

/// Where, beside its pool, a standing decision applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "scope", rename_all = "lowercase")]
pub enum Scope {
    /// The calls of one sample of one run (every epoch).
    Sample {
        /// The run.
        run_id: String,
        /// The sample.
        sample_id: String,
    },
    /// The calls of one run.
    Run {
        /// The run.
        run_id: String,
    },
    /// Every call of the pool (of the same caller and policy, as every standing decision).
    Pool,
}

/// A scope's kind, as a reviewer chooses it for the task at hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScopeKind {
    /// The task's sample.
    Sample,
    /// The task's run.
    Run,
    /// The task's pool.
    Pool,
}

/// A reviewer's answer to every call identical to one they decided, until it expires or is
/// revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandingDecision {
    /// Its number, named in the `decided_by` of the tasks it decides (`alice (standing #17)`).
    pub id: i64,
    /// The reviewer who made it.
    pub author: String,
    /// The pool whose tasks it decides.
    pub pool: String,
    /// The kind of task it decides (approval or review).
    #[serde(with = "kind_text")]
    pub kind: Kind,
    /// The chain step whose tasks it decides.
    pub step: u32,
    /// Where it applies within the pool.
    #[serde(flatten)]
    pub scope: Scope,
    /// Whose calls it decides: never another caller's, whatever the scope.
    pub caller: Caller,
    /// The policy the calls it decides are decided by (name and digest), as the task it was
    /// made on named it: never a call under another policy, or another version of it.
    pub policy: Option<PolicyView>,
    /// The glob a task's call, as a Python call expression, must match as a whole.
    pub pattern: String,
    /// What it answers.
    #[serde(with = "decision_text")]
    pub decision: Decision,
    /// The author's explanation.
    pub explanation: String,
    /// When it was made (unix ms).
    pub created_at_unix_ms: i64,
    /// When it stops applying (unix ms).
    pub expires_at_unix_ms: i64,
    /// When it was revoked (unix ms), if it was.
    pub revoked_at_unix_ms: Option<i64>,
    /// Who revoked it, if someone did.
    pub revoked_by: Option<String>,
}

/// The active standing decisions of the caller's pools: `{"standing": [...]}`, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandingList {
    /// The standing decisions.
    pub standing: Vec<StandingDecision>,
}

/// The body of `POST /api/standing`: answer task `task` and every identical call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StandingBody {
    /// The task answered, whose call the standing decision is about.
    pub task: String,
    /// A choice of the task other than `modify`.
    pub decision: String,
    /// Why; Inspect's fixed text when absent or blank.
    #[serde(default)]
    pub explanation: Option<String>,
    /// The task's sample, run or pool.
    pub scope: ScopeKind,
    /// How long it applies, in seconds.
    pub seconds: u64,
    /// The glob identical calls match; the task's call escaped (that call alone) when absent.
    #[serde(default)]
    pub pattern: Option<String>,
}

/// The answer of `POST /api/standing`: the standing decision, and the other pending tasks it
/// decided at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandingCreated {
    /// The standing decision made.
    #[serde(flatten)]
    pub standing: StandingDecision,
    /// The ids of the pending tasks it decided when it was made.
    pub decided: Vec<String>,
}

// === impl Scope ===

impl Scope {
    /// Its kind.
    pub fn kind(&self) -> ScopeKind {
        match self {
            Scope::Sample { .. } => ScopeKind::Sample,
            Scope::Run { .. } => ScopeKind::Run,
            Scope::Pool => ScopeKind::Pool,
        }
    }

    /// Whether the call `key` names lies within it.
    pub fn contains(&self, key: &v1::CallKey) -> bool {
        match self {
            Scope::Sample { run_id, sample_id } => &key.run_id == run_id && &key.sample_id == sample_id,
            Scope::Run { run_id } => &key.run_id == run_id,
            Scope::Pool => true,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Sample { run_id, sample_id } => write!(f, "sample {sample_id} of run {run_id}"),
            Scope::Run { run_id } => write!(f, "run {run_id}"),
            Scope::Pool => f.write_str("the whole pool"),
        }
    }
}

// === impl ScopeKind ===

impl ScopeKind {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ScopeKind::Sample => "sample",
            ScopeKind::Run => "run",
            ScopeKind::Pool => "pool",
        }
    }
}
