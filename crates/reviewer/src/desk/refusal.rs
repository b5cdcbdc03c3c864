//! Why the desk refuses a decision or a standing decision: a typed error whose texts are the
//! ones the API shows (its `{"error": …}`) and the UI's pages quote, and whose [`Grounds`]
//! say which kind of failure it is.

use airlock_policy::Decision;
use airlock_records::review::Settled;
use airlock_records::review::claim::ClaimView;

use super::MAX_EXPLANATION;
use super::control::Uncontrolled;
use super::standing::Unstandable;
use crate::modify::ModifyError;
use crate::store::StoreError;
use crate::task::{State, Task, Verdict};

/// Why a decision was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// No such task among the reviewer's pools (or the service's).
    #[error("no such task among your pools")]
    NotFound,
    /// A decision that is no decision at all.
    #[error("unknown decision '{decision}': this task offers {offered}")]
    UnknownDecision {
        /// The decision as asked.
        decision: String,
        /// The task's choices, comma-separated.
        offered: String,
    },
    /// A decision the task does not offer.
    #[error("'{decision}' is not one of this task's choices ({offered})")]
    NotOffered {
        /// The decision asked.
        decision: Decision,
        /// The task's choices, comma-separated.
        offered: String,
    },
    /// An explanation longer than [`MAX_EXPLANATION`] characters.
    #[error("the explanation is longer than {MAX_EXPLANATION} characters")]
    ExplanationTooLong,
    /// An explanation holding a NUL character.
    #[error("the explanation holds a NUL character, which the store cannot keep")]
    ExplanationNul,
    /// A modify's arguments that cannot be used (or arguments without a modify).
    #[error(transparent)]
    Modify(#[from] ModifyError),
    /// The task was decided before.
    #[error("already decided")]
    Decided(Verdict),
    /// The task was withdrawn by the runner before.
    #[error("withdrawn by the runner")]
    Withdrawn {
        /// Why the runner withdrew it.
        reason: String,
    },
    /// The task changed between reading and recording it.
    #[error("the task changed; try again")]
    Changed,
    /// The reviewer approved this task before, and it needs approvals from distinct reviewers.
    #[error("you approved this task already; it needs {needed} approvals from distinct reviewers ({so_far} so far)")]
    ApprovedAlready {
        /// The approvals the task needs.
        needed: u32,
        /// The approvals it has.
        so_far: usize,
    },
    /// Another reviewer claims the task (and the caller holds no override of its pool); the
    /// claim says until when.
    #[error("{} claims this task; only they, or a reviewer holding the pool's override, may decide it or release the claim", .0.by)]
    Claimed(ClaimView),
    /// A claim for no time, or longer than the service allows.
    #[error("a claim lasts 1 to {max} seconds")]
    ClaimTime {
        /// The longest claim, in seconds.
        max: u64,
    },
    /// The parameters of a standing decision cannot be used.
    #[error(transparent)]
    Standing(#[from] Unstandable),
    /// No such standing decision among the reviewer's pools (or the service's).
    #[error("no such standing decision among your pools")]
    NoSuchStanding,
    /// The standing decision was revoked before.
    #[error("revoked already")]
    RevokedAlready,
    /// A group answered with `modify`: a modify is a look at one call.
    #[error("a group is answered with one of its choices, not modify")]
    GroupModify,
    /// A group whose count is not the one the reviewer confirmed.
    #[error("the group has {count} pending tasks now; confirm that count")]
    GroupChanged {
        /// Its pending tasks now.
        count: usize,
    },
    /// An incident or a switch on a run that cannot be taken, or that the log did not take.
    #[error(transparent)]
    Control(#[from] Uncontrolled),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What kind of failure a [`Refusal`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grounds {
    /// Nothing by that id among the reviewer's pools.
    NotFound,
    /// The request cannot be taken as it is.
    Invalid,
    /// The task (or standing decision) is settled already; nothing changed.
    Conflict,
    /// The store failed; trying again may work.
    Unavailable,
}

impl Refusal {
    /// The refusal of a decision on `task`, which is no longer pending.
    pub fn not_pending(task: &Task) -> Self {
        match &task.state {
            State::Decided(verdict) => Refusal::Decided(verdict.clone()),
            State::Cancelled { reason, .. } => Refusal::Withdrawn { reason: reason.clone() },
            State::Pending => Refusal::Changed,
        }
    }

    /// Its kind.
    pub fn grounds(&self) -> Grounds {
        match self {
            Refusal::NotFound | Refusal::NoSuchStanding => Grounds::NotFound,
            Refusal::UnknownDecision { .. }
            | Refusal::NotOffered { .. }
            | Refusal::ExplanationTooLong
            | Refusal::ExplanationNul
            | Refusal::Modify(_)
            | Refusal::ClaimTime { .. }
            | Refusal::GroupModify
            | Refusal::Standing(_) => Grounds::Invalid,
            Refusal::Decided(_)
            | Refusal::Withdrawn { .. }
            | Refusal::Changed
            | Refusal::ApprovedAlready { .. }
            | Refusal::Claimed(_)
            | Refusal::GroupChanged { .. }
            | Refusal::RevokedAlready => Grounds::Conflict,
            Refusal::Control(e) if e.is_unavailable() => Grounds::Unavailable,
            Refusal::Control(_) => Grounds::Invalid,
            Refusal::Store(_) => Grounds::Unavailable,
        }
    }

    /// Who holds the task, and until when, for a task another reviewer claims.
    pub fn claim(&self) -> Option<ClaimView> {
        match self {
            Refusal::Claimed(claim) => Some(claim.clone()),
            _ => None,
        }
    }

    /// How the task was settled before, for a task decided or withdrawn already.
    pub fn settled(&self) -> Option<Settled> {
        match self {
            Refusal::Decided(verdict) => Some(Settled::Decided {
                decision: verdict.decision,
                decided_by: verdict.decided_by.clone(),
                decided_at_unix_ms: verdict.decided_at,
            }),
            Refusal::Withdrawn { reason } => Some(Settled::Withdrawn { reason: reason.clone() }),
            _ => None,
        }
    }
}
