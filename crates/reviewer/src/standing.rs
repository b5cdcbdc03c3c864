//! Standing decisions: a reviewer answers a task "and every identical call", and the answer
//! also decides the pending and future tasks of the same pool, kind and step whose call
//! matches, within the task's sample, run or pool, until it expires or is revoked. Only the
//! calls of the same caller (the broker user that published the request and the tenant its
//! key names, [`Task::caller`]) under the same policy (name and digest): run and sample ids
//! are the caller's to choose, so another caller naming the same run is no part of it.
//!
//! A call's identity is its text as a Python call expression
//! ([`format_call_expression`]): Inspect's rendering, but with strings quoted as Python's
//! `repr`, so that no crafted argument (a quote, a newline) makes one call's text equal
//! another's. A standing decision's pattern is an fnmatch glob over that whole text
//! ([`WholeGlob`], no `*` appended); the default pattern is the task's own text escaped
//! ([`exact_pattern`]), which matches that call alone.
//!
//! A standing decision never gives `modify` or an answer the task does not offer, and never
//! approves a task whose step needs several approvals ([`standing_may_decide`]). A task it
//! decides is recorded like a person's decision (through [`Shared::decide`]'s path, its answer
//! signed and sent through the outbox) with `decided_by` `alice (standing #17)`.

use airlock_policy::Decision;
use airlock_policy::glob::WholeGlob;
use airlock_policy::render::format_call_expression;
use airlock_records::convert::call_from_wire;
use airlock_records::review::standing::StandingDecision;
use airlock_records::time::now_ms;
use airlock_telemetry::metrics::PoolLabels;
use tracing::info;

use crate::shared::Shared;
use crate::store::{Decided, StoreError};
use crate::task::{Task, Verdict};

/// The longest a standing decision may last: a working day and then some.
pub const MAX_SECONDS: u64 = 24 * 3600;

/// The longest pattern kept, in characters.
pub const MAX_PATTERN: usize = 4000;

/// The text a standing decision's pattern is matched against: the task's call as a Python
/// call expression; `None` when the task carries no readable call (no standing decision
/// applies to it).
pub fn call_text(task: &Task) -> Option<String> {
    let call = call_from_wire(task.call()?).ok()?;
    Some(format_call_expression(&call))
}

/// The pattern that matches the task's call and no other: its [`call_text`] with every glob
/// character escaped.
pub fn exact_pattern(task: &Task) -> Option<String> {
    call_text(task).map(|text| airlock_policy::glob::escape(&text))
}

/// Whether a standing decision may give `decision` to `task`: false for an approving decision
/// (`approve`, `continue`) when the task's step needs several approvals; rejections,
/// terminations and escalations are always allowed.
pub fn standing_may_decide(task: &Task, decision: Decision) -> bool {
    decision != task.approving() || task.approvals_needed() <= 1
}

/// Whether `standing` decides `task` at `now`: active, same pool, kind and step, same caller
/// and policy, the call within its scope, its decision one the task offers and may take from
/// it, and the task's whole call text matching its pattern.
pub fn applies(standing: &StandingDecision, task: &Task, now: i64) -> bool {
    standing.revoked_at_unix_ms.is_none()
        && standing.expires_at_unix_ms > now
        && task.is_pending()
        && task.pool == standing.pool
        && task.kind() == standing.kind
        && task.step == standing.step
        && task.caller() == standing.caller
        && task.policy() == standing.policy
        && task.request().and_then(|r| r.key.as_ref()).is_some_and(|key| standing.scope.contains(key))
        && standing.decision != Decision::Modify
        && task.choices().contains(&standing.decision)
        && standing_may_decide(task, standing.decision)
        && call_text(task).is_some_and(|text| WholeGlob::new(&standing.pattern).is_ok_and(|glob| glob.is_match(&text)))
}

/// Who is recorded as having decided a task by `standing`: `alice (standing #17)`.
pub fn decided_by(standing: &StandingDecision) -> String {
    format!("{} (standing #{})", standing.author, standing.id)
}

/// The explanation a task decided by `standing` gets (the model sees it): the author's,
/// naming the standing decision.
pub fn explanation(standing: &StandingDecision) -> String {
    format!(
        "{} (standing decision #{} by {} for identical calls in {})",
        standing.explanation, standing.id, standing.author, standing.scope
    )
}

/// Records `standing`'s decision on `task`, as a person's decision is recorded; whether this
/// recorded it (false when the task was decided or withdrawn first).
async fn decide(shared: &Shared, standing: &StandingDecision, task: &Task) -> Result<bool, StoreError> {
    let verdict = Verdict {
        decision: standing.decision,
        explanation: explanation(standing),
        decided_by: decided_by(standing),
        decided_at: now_ms(),
    };
    let decided = shared.record(task, verdict, None, "standing").await?;
    let recorded = matches!(decided, Decided::Recorded(_));
    if recorded {
        shared.metrics.review_standing.get_or_create(&PoolLabels { pool: task.pool.clone() }).inc();
        info!(task = %task.id, standing = standing.id, decision = %standing.decision, "Task decided by a standing decision.");
    }
    Ok(recorded)
}

/// Decides the pending tasks `standing` applies to at `now`; their ids.
pub async fn apply_to_pending(
    shared: &Shared,
    standing: &StandingDecision,
    now: i64,
) -> Result<Vec<String>, StoreError> {
    let mut decided = Vec::new();
    for task in shared.store.pending(Some(std::slice::from_ref(&standing.pool))).await? {
        if applies(standing, &task, now) && decide(shared, standing, &task).await? {
            decided.push(task.id);
        }
    }
    Ok(decided)
}

/// The newest active standing decision of the task's pool that applies to `task` at `now`.
pub async fn covering(shared: &Shared, task: &Task, now: i64) -> Result<Option<StandingDecision>, StoreError> {
    let active = shared.store.active_standing(std::slice::from_ref(&task.pool), now).await?;
    Ok(active.into_iter().find(|standing| applies(standing, task, now)))
}

/// Decides a newly stored `task` by the standing decision that covers it at `now`, if one
/// does; the standing decision that decided it.
pub async fn settle(shared: &Shared, task: &Task, now: i64) -> Result<Option<StandingDecision>, StoreError> {
    match covering(shared, task, now).await? {
        Some(standing) if decide(shared, &standing, task).await? => Ok(Some(standing)),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests;
