//! Tasks at the desk as the intake hands them over: stored, with their `task.created`
//! webhooks unless a standing decision covers them, then decided at once by the standing
//! decision that covers them; and withdrawn by their runner. Canaries planted the same way.

use airlock_records::review::standing::StandingDecision;
use airlock_records::time::now_ms;
use tracing::warn;

use super::Desk;
use crate::logged::Logged;
use crate::store::{CanaryMark, Inserted, StoreError, Stored, Withdrawal};
use crate::task::{Incoming, Task};
use crate::webhooks::EventKind;

impl Desk {
    /// Stores `incoming` as `task`, the pending task it makes, and reads the standing decision that
    /// covers it in the same transaction; the `task.created` webhooks paging the endpoints of
    /// its pool are written in that transaction when none does ([`Store::insert_as`]). One
    /// read, with the task's insert: a standing decision made meanwhile either sees the task
    /// among the pending ones or is seen there. Nobody is paged about a task it covers.
    ///
    /// [`Store::insert_as`]: crate::store::Store::insert_as
    pub async fn insert(&self, incoming: &Incoming, task: &Task) -> Result<Stored, StoreError> {
        self.store_task(incoming, task, None).await
    }

    /// Plants `incoming`, a canary's task, marked `mark`: stored as [`Desk::insert`] stores a
    /// task (with its webhooks, unless a standing decision covers it), then admitted as the
    /// intake admits one, without a word to any runner. Its task's id; `None` when a task of the
    /// same key was stored before.
    pub async fn plant(&self, incoming: &Incoming, mark: &CanaryMark) -> Result<Option<String>, StoreError> {
        let task = Task { canary: true, ..incoming.pending(&uuid::Uuid::now_v7().to_string(), now_ms()) };
        let stored = self.store_task(incoming, &task, Some(mark)).await?;
        if !matches!(stored.inserted, Inserted::Created(_)) {
            return Ok(None);
        }
        self.admit(&task, stored.covered_by.as_ref()).await;
        Ok(Some(task.id))
    }

    /// Stores `task` (a canary when `canary` marks it) with its webhooks, and wakes their sender.
    async fn store_task(
        &self,
        incoming: &Incoming,
        task: &Task,
        canary: Option<&CanaryMark>,
    ) -> Result<Stored, StoreError> {
        let webhooks = self.webhooks.announce(EventKind::Created, task, self.public_url.as_ref());
        let stored = match canary {
            Some(mark) => self.store.plant(incoming, task, mark, &webhooks).await?,
            None => self.store.insert_as(incoming, task, &webhooks).await?,
        };
        if matches!(stored.inserted, Inserted::Created(_)) && stored.covered_by.is_none() && !webhooks.is_empty() {
            self.webhooks_due.notify_one();
        }
        Ok(stored)
    }

    /// After `task` was stored, covered by the standing decision `covered_by` its insert read
    /// if one: wakes the deadline loop, then answers it `terminate` if the control log ends its
    /// run (see [`crate::desk::control`]), or decides it by that standing decision, or else
    /// tells the watcher. A task the standing decision did not decide after all (decided
    /// or withdrawn first, or the store failed) pages the endpoints of its pool now. Whether
    /// the task waits for a person.
    pub async fn admit(&self, task: &Task, covered_by: Option<&StandingDecision>) -> bool {
        self.deadlines.notify_one();
        if self.ended_by_control(task).await {
            return false;
        }
        if let Some(standing) = covered_by {
            match self.decide_standing(standing, task).await {
                Ok(true) => return false,
                Ok(false) => {}
                Err(e) => {
                    warn!(task = %task.id, error = %Logged(&e), "Deciding the task by its standing decision failed; the task waits for a person.")
                }
            }
            let webhooks = self.webhooks.announce(EventKind::Created, task, self.public_url.as_ref());
            if !webhooks.is_empty() {
                match self.store.add_webhooks(&webhooks, now_ms()).await {
                    Ok(()) => self.webhooks_due.notify_one(),
                    Err(e) => {
                        warn!(task = %task.id, error = %Logged(&e), "Writing the task's webhooks failed; nobody is paged.")
                    }
                }
            }
        }
        self.poke();
        true
    }

    /// Withdraws now the pending tasks of call `correlation` whose request `cancelled_by`
    /// published, for `reason` ([`Store::cancel`](crate::store::Store::cancel)).
    pub async fn withdraw(
        &self,
        correlation: &str,
        cancelled_by: &str,
        reason: &str,
    ) -> Result<Withdrawal, StoreError> {
        let withdrawal = self.store.cancel(correlation, cancelled_by, reason, now_ms()).await?;
        if !withdrawal.withdrawn.is_empty() {
            self.poke();
        }
        Ok(withdrawal)
    }
}
