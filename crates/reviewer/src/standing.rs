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
//! decides is recorded like a person's decision (through the [`Desk`](crate::desk::Desk)'s
//! path, its answer signed and sent through the outbox) with `decided_by` `alice (standing
//! #17)`; the desk makes, revokes and applies standing decisions ([`crate::desk::standing`]).

use airlock_policy::Decision;
use airlock_policy::glob::WholeGlob;
use airlock_policy::render::format_call_expression;
use airlock_records::convert::call_from_wire;
use airlock_records::review::standing::StandingDecision;

use crate::task::Task;

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

#[cfg(test)]
mod tests;
