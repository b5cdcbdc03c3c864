//! Tasks at the desk as the intake hands them over: stored, then decided at once by the
//! standing decision that covers them or else paged about; and withdrawn by their runner.

use airlock_records::time::now_ms;
use tracing::warn;

use super::Desk;
use crate::logged::Logged;
use crate::store::{Inserted, StoreError, Withdrawal};
use crate::task::{Incoming, Task};
use crate::webhooks::EventKind;

impl Desk {
    /// Stores `incoming` as task `id`, received at `now`. Nobody is paged yet: whether anyone
    /// is waits for the standing decisions ([`Desk::admit`]).
    pub async fn insert(&self, id: &str, incoming: &Incoming, now: i64) -> Result<Inserted, StoreError> {
        self.store.insert_as(id, incoming, now, &[]).await
    }

    /// After `task` was stored: wakes the deadline loop, then decides the task by the standing
    /// decision that covers it, if one does, or else pages the endpoints of its pool
    /// (`task.created`) and tells the watcher. Whether the task waits for a person.
    pub async fn admit(&self, task: &Task) -> bool {
        self.deadlines.notify_one();
        // One read, after the task is stored: a standing decision made meanwhile either sees
        // the task among the pending ones or is seen here. Nobody is paged about a task it
        // decides.
        match self.settle(task, now_ms()).await {
            Ok(Some(_)) => return false,
            Ok(None) => {}
            Err(e) => {
                warn!(task = %task.id, error = %Logged(&e), "Reading the standing decisions failed; the task waits for a person.")
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
