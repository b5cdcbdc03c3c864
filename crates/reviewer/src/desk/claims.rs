//! Claims: a reviewer holds a pending task for a set time, so two people do not read the same
//! one. While a claim lasts, every other reviewer sees who holds it and until when, and cannot
//! decide the task, nor release the claim, unless they hold the override of its pool
//! ([`Reviewer::overrides`]); a decision over someone's claim says so in its `decided_by`
//! (`bob (over alice's claim)`). A claim ends by itself at its time, when its holder releases
//! it, or with the task. Standing decisions made meanwhile leave a task others hold alone;
//! deadlines, re-routing and the fleet's control answer it whoever holds it.
//!
//! Every way of deciding goes through [`Desk::decide`], so the web UI, the API, the console,
//! Slack and a group decision obey claims alike.

use std::time::Duration;

use airlock_records::review::claim::ClaimView;
use airlock_records::time::now_ms;

use super::{Desk, Refusal};
use crate::auth::Reviewer;
use crate::store::{Claiming, Releasing};
use crate::task::{Task, same_reviewer};

/// How long a claim lasts unless the reviewer asks for another time.
pub const DEFAULT_CLAIM: Duration = Duration::from_secs(300);
/// The longest claim a reviewer may ask for, unless the service is told otherwise.
pub const MAX_CLAIM: Duration = Duration::from_secs(3600);

/// How claims work on a service: how long they last, and whether opening a task in the UI
/// claims it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claims {
    /// How long a claim lasts when no time is asked for.
    pub default: Duration,
    /// The longest claim that may be asked for.
    pub max: Duration,
    /// Whether the UI claims a task, for [`Claims::default`], when a person opens (focuses) it.
    pub on_open: bool,
}

impl Default for Claims {
    fn default() -> Self {
        Claims { default: DEFAULT_CLAIM, max: MAX_CLAIM, on_open: false }
    }
}

impl Claims {
    /// What is wrong with these settings, if anything.
    pub fn problem(&self) -> Option<String> {
        if self.default.as_secs() == 0 || self.max.as_secs() == 0 {
            return Some("claims must last at least 1 second".into());
        }
        (self.default > self.max).then(|| {
            format!(
                "the default claim ({} s) is longer than the longest ({} s)",
                self.default.as_secs(),
                self.max.as_secs()
            )
        })
    }
}

impl Desk {
    /// Claims task `id` for `reviewer` for `seconds` (the service's default when `None`), or
    /// extends the reviewer's own claim to that; refused while another reviewer holds it.
    pub async fn claim(&self, reviewer: &Reviewer, id: &str, seconds: Option<u64>) -> Result<ClaimView, Refusal> {
        let max = self.claims.max.as_secs();
        let seconds = seconds.unwrap_or(self.claims.default.as_secs());
        if !(1..=max).contains(&seconds) {
            return Err(Refusal::ClaimTime { max });
        }
        let task = self.visible(reviewer, id).await?;
        if !task.is_pending() {
            return Err(Refusal::not_pending(&task));
        }
        let now = now_ms();
        let until = now.saturating_add(seconds as i64 * 1000);
        match self.store.claim_task(id, &reviewer.name, now, until).await? {
            Claiming::Held(claim) => {
                self.poke();
                Ok(claim)
            }
            Claiming::HeldBy(claim) => Err(Refusal::Claimed(claim)),
            Claiming::NotPending => {
                Err(self.store.task(id).await?.map_or(Refusal::NotFound, |t| Refusal::not_pending(&t)))
            }
        }
    }

    /// Releases `reviewer`'s claim on task `id` (anyone's, for a reviewer holding the pool's
    /// override); nothing to do when no claim holds it.
    pub async fn release(&self, reviewer: &Reviewer, id: &str) -> Result<(), Refusal> {
        let task = self.visible(reviewer, id).await?;
        match self.store.release_claim(id, &reviewer.name, reviewer.overrides(&task.pool), now_ms()).await? {
            Releasing::Released => {
                self.poke();
                Ok(())
            }
            Releasing::HeldBy(claim) => Err(Refusal::Claimed(claim)),
        }
    }

    /// Whom `reviewer` decides `task` as, given its claim: themselves when no one else holds
    /// it; `name (over holder's claim)` with the pool's override; refused otherwise.
    pub(super) fn decider(&self, reviewer: &Reviewer, task: &Task) -> Result<String, Refusal> {
        match held_by_another(task, &reviewer.name) {
            None => Ok(reviewer.name.clone()),
            Some(claim) if reviewer.overrides(&task.pool) => {
                Ok(format!("{} (over {}'s claim)", reviewer.name, claim.by))
            }
            Some(claim) => Err(Refusal::Claimed(claim.clone())),
        }
    }
}

/// The live claim on `task` of a reviewer other than `name`, if one holds it.
pub fn held_by_another<'a>(task: &'a Task, name: &str) -> Option<&'a ClaimView> {
    task.claim.as_ref().filter(|claim| !same_reviewer(&claim.by, name))
}
