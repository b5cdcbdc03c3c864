//! Standing decisions at the desk: one made (its parameters checked, its task decided as the
//! reviewer's own decision, then it is stored and applied to the pending tasks it covers),
//! one revoked, and each applied to the tasks it covers, pending ones when it is made and new
//! ones as they arrive. What a standing decision covers is [`crate::standing`]'s.

use std::str::FromStr;

use airlock_policy::Decision;
use airlock_policy::glob::{GlobError, WholeGlob};
use airlock_records::review::standing::{Scope, ScopeKind, StandingBody, StandingCreated, StandingDecision};
use airlock_records::time::now_ms;
use airlock_telemetry::metrics::PoolLabels;
use tracing::info;

use super::claims::held_by_another;
use super::{Answer, By, Desk, Recorded, Refusal};
use crate::auth::Reviewer;
use crate::standing::{self, MAX_PATTERN, MAX_SECONDS, applies, standing_may_decide};
use crate::store::{NewStanding, StoreError};
use crate::task::{State, Task, Verdict};

/// Why the parameters of a standing decision are refused.
#[derive(Debug, thiserror::Error)]
pub enum Unstandable {
    /// `modify`, or a decision the task does not offer.
    #[error("a standing decision answers with one of the task's choices (not modify)")]
    NotAChoice,
    /// An approving decision on a step that needs several approvals.
    #[error("this task's step needs several approvals: a standing decision cannot approve it")]
    NeedsApprovals,
    /// A duration out of range.
    #[error("seconds: from 1 to {MAX_SECONDS}")]
    Seconds,
    /// A sample or run scope for a call whose key names none (`run` or `sample`).
    #[error("this task's call names no {0}")]
    NoScope(&'static str),
    /// A task without a readable call.
    #[error("this task's call cannot be read")]
    Unreadable,
    /// A pattern longer than [`MAX_PATTERN`] characters.
    #[error("the pattern is longer than {MAX_PATTERN} characters")]
    PatternTooLong,
    /// A pattern holding a NUL character.
    #[error("the pattern holds a NUL character, which the store cannot keep")]
    PatternNul,
    /// A pattern that is no glob.
    #[error(transparent)]
    Pattern(#[from] GlobError),
    /// A pattern that does not match the task's own call.
    #[error("the pattern does not match this task's own call")]
    Mismatch,
}

impl Desk {
    /// Answers a task as `reviewer` with `body` and makes the answer stand for every identical
    /// call: the standing parameters are checked first, then the task is decided as the
    /// reviewer's own decision, then the standing decision is stored and applied to the
    /// pending tasks it covers. The standing decision, and the other tasks it decided.
    pub async fn stand(&self, reviewer: &Reviewer, body: StandingBody) -> Result<StandingCreated, Refusal> {
        let task = self.visible(reviewer, &body.task).await?;
        let decision = Decision::from_str(&body.decision)
            .ok()
            .filter(|d| *d != Decision::Modify && task.choices().contains(d))
            .ok_or(Unstandable::NotAChoice)?;
        if !standing_may_decide(&task, decision) {
            return Err(Unstandable::NeedsApprovals.into());
        }
        if !(1..=MAX_SECONDS).contains(&body.seconds) {
            return Err(Unstandable::Seconds.into());
        }
        let scope = scope_of(&task, body.scope)?;
        let text = standing::call_text(&task).ok_or(Unstandable::Unreadable)?;
        let pattern = match body.pattern.filter(|p| !p.is_empty()) {
            Some(pattern) => pattern,
            None => standing::exact_pattern(&task).unwrap_or_default(),
        };
        if pattern.chars().count() > MAX_PATTERN {
            return Err(Unstandable::PatternTooLong.into());
        }
        if pattern.contains('\0') {
            return Err(Unstandable::PatternNul.into());
        }
        if !WholeGlob::new(&pattern).map_err(Unstandable::from)?.is_match(&text) {
            return Err(Unstandable::Mismatch.into());
        }
        let answer = Answer { decision: decision.as_str().to_owned(), explanation: body.explanation, arguments: None };
        let decided = self.decide(reviewer, &task.id, answer).await?;
        let State::Decided(verdict) = &decided.state else { return Err(Refusal::NotFound) };
        let now = now_ms();
        let new = NewStanding {
            author: reviewer.name.clone(),
            pool: task.pool.clone(),
            kind: task.kind(),
            step: task.step,
            scope,
            caller: task.caller(),
            policy: task.policy(),
            pattern,
            decision,
            explanation: verdict.explanation.clone(),
            created_at: now,
            expires_at: now + body.seconds as i64 * 1000,
        };
        let standing = self.store.add_standing(&new).await?;
        let decided = self.apply_to_pending(&standing, now).await?;
        Ok(StandingCreated { standing, decided })
    }

    /// Revokes standing decision `id` as `reviewer`, if it is of their pools and not revoked
    /// yet; it as revoked. It stops applying at once, on every process sharing the store.
    pub async fn revoke(&self, reviewer: &Reviewer, id: i64) -> Result<StandingDecision, Refusal> {
        let standing = self.store.standing_decision(id).await?.ok_or(Refusal::NoSuchStanding)?;
        if !(self.serves(&standing.pool) && reviewer.sees(&standing.pool)) {
            return Err(Refusal::NoSuchStanding);
        }
        if !self.store.revoke_standing(id, &reviewer.name, now_ms()).await? {
            return Err(Refusal::RevokedAlready);
        }
        self.store.standing_decision(id).await?.ok_or(Refusal::NoSuchStanding)
    }

    /// Decides the pending tasks `standing` applies to at `now`, but those another reviewer
    /// than its author claims; their ids.
    pub async fn apply_to_pending(&self, standing: &StandingDecision, now: i64) -> Result<Vec<String>, StoreError> {
        let mut decided = Vec::new();
        for task in self.store.pending(Some(std::slice::from_ref(&standing.pool))).await? {
            let free = held_by_another(&task, &standing.author).is_none();
            if free && applies(standing, &task, now) && self.decide_standing(standing, &task).await? {
                decided.push(task.id);
            }
        }
        Ok(decided)
    }

    /// Records `standing`'s decision on `task`, as a person's decision is recorded; whether
    /// this recorded it (false when the task was decided or withdrawn first).
    pub(super) async fn decide_standing(&self, standing: &StandingDecision, task: &Task) -> Result<bool, StoreError> {
        let verdict = Verdict {
            decision: standing.decision,
            explanation: standing::explanation(standing),
            decided_by: standing::decided_by(standing),
            decided_at: now_ms(),
        };
        let recorded = matches!(self.write(task, verdict, None, By::Standing(standing)).await?, Recorded::Decided(_));
        if recorded {
            self.metrics.review_standing.get_or_create(&PoolLabels { pool: task.pool.clone() }).inc();
            info!(task = %task.id, standing = standing.id, decision = %standing.decision, "Task decided by a standing decision.");
        }
        Ok(recorded)
    }
}

/// The task's sample, run or pool; a sample or run the task's call key leaves empty is refused
/// (it would cover every call without one).
fn scope_of(task: &Task, kind: ScopeKind) -> Result<Scope, Unstandable> {
    let key = task.request().and_then(|r| r.key.clone()).unwrap_or_default();
    match kind {
        ScopeKind::Pool => Ok(Scope::Pool),
        _ if key.run_id.is_empty() => Err(Unstandable::NoScope("run")),
        ScopeKind::Run => Ok(Scope::Run { run_id: key.run_id }),
        ScopeKind::Sample if key.sample_id.is_empty() => Err(Unstandable::NoScope("sample")),
        ScopeKind::Sample => Ok(Scope::Sample { run_id: key.run_id, sample_id: key.sample_id }),
    }
}
