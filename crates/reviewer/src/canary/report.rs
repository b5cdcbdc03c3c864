//! Catch rates: the canaries of some pools as they stand, counted per pool and per reviewer.
//!
//! A canary is *caught* when its task was decided with one of its expected decisions, *missed*
//! when decided with another, *expired* when nobody answered before its deadline (whatever its
//! `on_timeout`), *pending* while it waits. A pool's catch rate is caught / answered over its
//! canaries.
//!
//! A reviewer's answers are each decision counted for them: theirs, or a standing decision's of
//! theirs (a canary a standing decision covers is answered by it as any task is, not kept
//! pending where identical real calls are not, and counts for the standing decision's
//! author), and each approval they gave on a step that needs several (an approval of a canary
//! misses it, whoever decides it in the end). A reviewer's catch rate is caught / answered
//! over their answers.

use std::collections::BTreeMap;

use airlock_policy::Decision;
use airlock_records::review::Settled;
use airlock_records::review::canary::{CanaryAnswer, CanaryReport, CanaryView, Outcome, PoolCatch, ReviewerCatch};

use crate::store::PlantedCanary;
use crate::task::{DECIDED_BY_TIMEOUT, State};

/// The catch rates of `canaries` (newest first), with the first `listed` of them each shown.
pub fn report(canaries: &[PlantedCanary], listed: usize) -> CanaryReport {
    let mut pools: BTreeMap<&str, PoolCatch> = BTreeMap::new();
    let mut reviewers: BTreeMap<String, ReviewerCatch> = BTreeMap::new();
    let mut views = Vec::with_capacity(listed.min(canaries.len()));
    for canary in canaries {
        let outcome = outcome(canary);
        let pool = pools.entry(&canary.pool).or_insert_with(|| PoolCatch {
            pool: canary.pool.clone(),
            planted: 0,
            answered: 0,
            caught: 0,
            missed: 0,
            expired: 0,
            pending: 0,
            catch_rate: None,
        });
        pool.planted += 1;
        match outcome {
            Outcome::Pending => pool.pending += 1,
            Outcome::Expired => pool.expired += 1,
            Outcome::Caught => pool.caught += 1,
            Outcome::Missed => pool.missed += 1,
        }
        let answers = answers(canary);
        for answer in &answers {
            // Names are compared without case, as reviewers are.
            let counted = reviewers.entry(answer.reviewer.to_lowercase()).or_insert_with(|| ReviewerCatch {
                reviewer: answer.reviewer.clone(),
                answered: 0,
                caught: 0,
                missed: 0,
                by_standing: 0,
                catch_rate: None,
            });
            counted.answered += 1;
            if answer.caught {
                counted.caught += 1;
            } else {
                counted.missed += 1;
            }
            counted.by_standing += u64::from(answer.standing.is_some());
        }
        if views.len() < listed {
            views.push(CanaryView {
                task: canary.task_id.clone(),
                pool: canary.pool.clone(),
                name: canary.mark.name.clone(),
                explanation: canary.mark.explanation.clone(),
                expected: canary.mark.expected.clone(),
                planted_at_unix_ms: canary.planted_at,
                outcome,
                settled: settled(&canary.state),
                answers,
            });
        }
    }
    let pools = pools
        .into_values()
        .map(|mut pool| {
            pool.answered = pool.caught + pool.missed;
            pool.catch_rate = rate(pool.caught, pool.answered);
            pool
        })
        .collect();
    let reviewers = reviewers
        .into_values()
        .map(|mut reviewer| {
            reviewer.catch_rate = rate(reviewer.caught, reviewer.answered);
            reviewer
        })
        .collect();
    CanaryReport { pools, reviewers, canaries: views }
}

/// How `canary` stands.
pub fn outcome(canary: &PlantedCanary) -> Outcome {
    match &canary.state {
        State::Pending => Outcome::Pending,
        State::Decided(verdict) if verdict.decided_by == DECIDED_BY_TIMEOUT => Outcome::Expired,
        State::Decided(verdict) if canary.mark.caught_by(verdict.decision) => Outcome::Caught,
        State::Decided(_) => Outcome::Missed,
        // Nothing withdraws a canary (no runner knows its key); were one withdrawn, nobody
        // answered it.
        State::Cancelled { .. } => Outcome::Expired,
    }
}

/// The answers counted for reviewers on `canary`, in order: each approval, then the verdict
/// of whom it counts for.
pub fn answers(canary: &PlantedCanary) -> Vec<CanaryAnswer> {
    let mut answers: Vec<CanaryAnswer> = canary
        .approvals
        .iter()
        .map(|approval| {
            let decision = if approval.modified_arguments.is_some() { Decision::Modify } else { Decision::Approve };
            CanaryAnswer {
                reviewer: approval.reviewer.clone(),
                decision,
                at_unix_ms: approval.at_unix_ms,
                standing: None,
                caught: canary.mark.caught_by(decision),
            }
        })
        .collect();
    if let (State::Decided(verdict), Some(answerer)) = (&canary.state, &canary.answerer) {
        answers.push(CanaryAnswer {
            reviewer: answerer.reviewer.clone(),
            decision: verdict.decision,
            at_unix_ms: verdict.decided_at,
            standing: answerer.standing,
            caught: canary.mark.caught_by(verdict.decision),
        });
    }
    answers
}

/// The verdict of a task no longer pending.
fn settled(state: &State) -> Option<Settled> {
    match state {
        State::Pending => None,
        State::Decided(verdict) => Some(Settled::Decided {
            decision: verdict.decision,
            decided_by: verdict.decided_by.clone(),
            decided_at_unix_ms: verdict.decided_at,
        }),
        State::Cancelled { reason, .. } => Some(Settled::Withdrawn { reason: reason.clone() }),
    }
}

fn rate(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}
