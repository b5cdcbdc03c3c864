//! The outbox of answers: each leased to one sender at a time until the broker confirms it.

use airlock_telemetry::metrics::AnswerLabels;

use super::{Db, Store, StoreError};

/// An answer waiting in the outbox, leased to the caller for sending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    /// The task answered.
    pub task_id: String,
    /// The call's correlation id (sent as the message's).
    pub correlation: String,
    /// The encoded `StepResult`.
    pub body: Vec<u8>,
    /// The metric labels of the answer (its step's name and decision), known to whoever built
    /// it; `None` for an entry read back from the store, whose labels are in its body.
    pub labels: Option<AnswerLabels>,
}

impl Store {
    /// Leases up to `limit` unsent answers whose lease ran out (or that were never leased)
    /// to the caller until `lease_until`, oldest first.
    pub async fn claim_unsent(&self, now: i64, lease_until: i64, limit: u32) -> Result<Vec<OutboxEntry>, StoreError> {
        const CANDIDATES: &str = "SELECT task_id FROM outbox WHERE sent_at IS NULL AND lease_until <= $1 \
                                  ORDER BY created_at LIMIT $2";
        const CLAIM: &str = "UPDATE outbox SET lease_until = $2 \
                             WHERE task_id = $1 AND sent_at IS NULL AND lease_until <= $3 \
                             RETURNING task_id, correlation, body";
        let candidates: Vec<(String,)> =
            on_db!(self, pool => sqlx::query_as(CANDIDATES).bind(now).bind(i64::from(limit)).fetch_all(pool).await?);
        let mut claimed = Vec::with_capacity(candidates.len());
        for (task_id,) in candidates {
            let row: Option<(String, String, Vec<u8>)> = on_db!(self, pool => sqlx::query_as(CLAIM)
                .bind(&task_id)
                .bind(lease_until)
                .bind(now)
                .fetch_optional(pool)
                .await?);
            if let Some((task_id, correlation, body)) = row {
                claimed.push(OutboxEntry { task_id, correlation, body, labels: None });
            }
        }
        Ok(claimed)
    }

    /// Marks an answer as published (confirmed by the broker): it is never sent again.
    pub async fn mark_sent(&self, task_id: &str, now: i64) -> Result<(), StoreError> {
        on_db!(self, pool => sqlx::query("UPDATE outbox SET sent_at = $2 WHERE task_id = $1")
            .bind(task_id)
            .bind(now)
            .execute(pool)
            .await
            .map(drop)?);
        Ok(())
    }

    /// Gives up a lease early (a publish failed), so the next sweep retries at once.
    pub async fn release(&self, task_id: &str) -> Result<(), StoreError> {
        on_db!(self, pool => sqlx::query("UPDATE outbox SET lease_until = 0 WHERE task_id = $1 AND sent_at IS NULL")
            .bind(task_id)
            .execute(pool)
            .await
            .map(drop)?);
        Ok(())
    }

    /// How many answers are not confirmed sent yet.
    pub async fn unsent(&self) -> Result<u64, StoreError> {
        let (count,): (i64,) = on_db!(self, pool =>
            sqlx::query_as("SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL").fetch_one(pool).await?);
        Ok(count.max(0) as u64)
    }
}
