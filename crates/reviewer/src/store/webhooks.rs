//! Webhooks in the store: written with the change they announce, each attempt leased to one
//! sender, rescheduled until delivered or given up.

use super::{ADD_WEBHOOK, Db, Store, StoreError};

/// A webhook to write with the change it announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewWebhook {
    /// Its `webhook-id`, the same on every attempt.
    pub id: String,
    /// The endpoint's URL.
    pub endpoint: String,
    /// The body sent.
    pub body: Vec<u8>,
}

/// A webhook leased to the caller for one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwedWebhook {
    /// Its `webhook-id`.
    pub id: String,
    /// The endpoint's URL.
    pub endpoint: String,
    /// The body sent.
    pub body: Vec<u8>,
    /// When it was written (unix ms): its retry period starts then.
    pub created_at: i64,
    /// The attempts made so far.
    pub attempts: u32,
}

impl Store {
    /// Writes `webhooks` at `now`, due at once, in one transaction: those announcing a change
    /// stored before it was known whom to page ([`Store::insert_as`] writes them with it).
    pub async fn add_webhooks(&self, webhooks: &[NewWebhook], now: i64) -> Result<(), StoreError> {
        on_db!(self, pool => {
            let mut tx = pool.begin().await?;
            add_webhooks!(tx, webhooks, now);
            tx.commit().await?;
        });
        Ok(())
    }

    /// Leases up to `limit` webhooks due at `now` whose lease ran out (or that were never
    /// leased) to the caller until `lease_until`, for one attempt each, the soonest due first.
    pub async fn claim_webhooks(&self, now: i64, lease_until: i64, limit: u32) -> Result<Vec<OwedWebhook>, StoreError> {
        const CANDIDATES: &str = "SELECT id FROM webhooks WHERE done_at IS NULL AND next_attempt <= $1 \
                                  AND lease_until <= $1 ORDER BY next_attempt LIMIT $2";
        const CLAIM: &str = "UPDATE webhooks SET lease_until = $2 \
                             WHERE id = $1 AND done_at IS NULL AND lease_until <= $3 \
                             RETURNING id, endpoint, body, created_at, attempts";
        let candidates: Vec<(String,)> =
            on_db!(self, pool => sqlx::query_as(CANDIDATES).bind(now).bind(i64::from(limit)).fetch_all(pool).await?);
        let mut claimed = Vec::with_capacity(candidates.len());
        for (id,) in candidates {
            let row: Option<(String, String, Vec<u8>, i64, i64)> = on_db!(self, pool => sqlx::query_as(CLAIM)
                .bind(&id)
                .bind(lease_until)
                .bind(now)
                .fetch_optional(pool)
                .await?);
            if let Some((id, endpoint, body, created_at, attempts)) = row {
                let attempts = u32::try_from(attempts).unwrap_or(u32::MAX);
                claimed.push(OwedWebhook { id, endpoint, body, created_at, attempts });
            }
        }
        Ok(claimed)
    }

    /// After failed attempt number `attempts`: the next one at `next_attempt`, by whichever
    /// sender claims it then.
    pub async fn webhook_retry(&self, id: &str, attempts: u32, next_attempt: i64) -> Result<(), StoreError> {
        const SQL: &str = "UPDATE webhooks SET attempts = $2, next_attempt = $3, lease_until = 0 WHERE id = $1";
        on_db!(self, pool => sqlx::query(SQL)
            .bind(id)
            .bind(i64::from(attempts))
            .bind(next_attempt)
            .execute(pool)
            .await
            .map(drop)?);
        Ok(())
    }

    /// A webhook is over after `attempts`: delivered, gone or given up (`outcome`).
    pub async fn webhook_done(&self, id: &str, attempts: u32, outcome: &str, now: i64) -> Result<(), StoreError> {
        const SQL: &str = "UPDATE webhooks SET attempts = $2, outcome = $3, done_at = $4 WHERE id = $1";
        on_db!(self, pool => sqlx::query(SQL)
            .bind(id)
            .bind(i64::from(attempts))
            .bind(outcome)
            .bind(now)
            .execute(pool)
            .await
            .map(drop)?);
        Ok(())
    }

    /// How many webhooks are neither delivered nor given up.
    pub async fn webhooks_owed(&self) -> Result<u64, StoreError> {
        let (count,): (i64,) = on_db!(self, pool =>
            sqlx::query_as("SELECT COUNT(*) FROM webhooks WHERE done_at IS NULL").fetch_one(pool).await?);
        Ok(count.max(0) as u64)
    }

    /// Forgets webhooks over before `before` (unix ms).
    pub async fn prune_webhooks(&self, before: i64) -> Result<u64, StoreError> {
        Ok(on_db!(self, pool => sqlx::query("DELETE FROM webhooks WHERE done_at < $1")
            .bind(before)
            .execute(pool)
            .await?
            .rows_affected()))
    }
}
