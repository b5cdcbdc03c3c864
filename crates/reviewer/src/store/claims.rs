//! Claims: a reviewer holds a pending task until a time. One row per task; a claim whose time
//! passed, or whose task left the pending list, holds nothing and is simply not read, so no
//! sweeper is needed. Taking one is a single conditional upsert, so of reviewers racing for a
//! task on any number of processes sharing the store exactly one wins.

use airlock_records::review::claim::ClaimView;

use super::{Db, Store, StoreError};
use crate::task::Task;

/// What a claim did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claiming {
    /// Taken, or extended by its holder: the claim as it stands.
    Held(ClaimView),
    /// Another reviewer holds a live claim on the task: theirs, unchanged.
    HeldBy(ClaimView),
    /// The task is not pending (or not there): nothing to claim.
    NotPending,
}

/// What a release did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Releasing {
    /// Released, or there was no live claim to release.
    Released,
    /// Another reviewer holds a live claim on the task, and the caller may not release it.
    HeldBy(ClaimView),
}

/// The live claim of a pending task at `$2`: holder and end.
const LIVE: &str = "SELECT c.reviewer, c.until_at FROM claims c JOIN tasks t ON t.id = c.task_id \
                    WHERE c.task_id = $1 AND t.state = 'pending' AND c.until_at > $2";

/// How often a claim is tried again when the claim that refused it ended before it could be
/// read: each try sees a newer state, so this is never reached but by a pathological race.
const TRIES: usize = 3;

impl Store {
    /// Claims pending task `id` for `reviewer` from `now` until `until` (unix ms), unless
    /// another reviewer (names compared without case) holds a claim on it that lasts past
    /// `now`; the holder's own claim is set to the new end.
    pub async fn claim_task(&self, id: &str, reviewer: &str, now: i64, until: i64) -> Result<Claiming, StoreError> {
        const CLAIM: &str = "INSERT INTO claims (task_id, reviewer, claimed_at, until_at) \
                             SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM tasks WHERE id = $1 AND state = 'pending') \
                             ON CONFLICT (task_id) DO UPDATE SET reviewer = excluded.reviewer, \
                             claimed_at = excluded.claimed_at, until_at = excluded.until_at \
                             WHERE claims.until_at <= excluded.claimed_at OR lower(claims.reviewer) = lower(excluded.reviewer) \
                             RETURNING reviewer, until_at";
        for _ in 0..TRIES {
            let held: Option<(String, i64)> = on_db!(self, pool => sqlx::query_as(CLAIM)
                .bind(id)
                .bind(reviewer)
                .bind(now)
                .bind(until)
                .fetch_optional(pool)
                .await?);
            if let Some((by, until_unix_ms)) = held {
                return Ok(Claiming::Held(ClaimView { by, until_unix_ms }));
            }
            if let Some(claim) = self.claim_of(id, now).await? {
                return Ok(Claiming::HeldBy(claim));
            }
            if !self.task(id).await?.is_some_and(|task| task.is_pending()) {
                return Ok(Claiming::NotPending);
            }
        }
        Ok(Claiming::NotPending)
    }

    /// Releases the claim on task `id` if `reviewer` holds it, or if `anyone` (an override) and
    /// whoever holds it; a claim that ended by `now` goes with it.
    pub async fn release_claim(
        &self,
        id: &str,
        reviewer: &str,
        anyone: bool,
        now: i64,
    ) -> Result<Releasing, StoreError> {
        const RELEASE: &str =
            "DELETE FROM claims WHERE task_id = $1 AND (lower(reviewer) = lower($2) OR until_at <= $3 OR $4)";
        on_db!(self, pool => {
            sqlx::query(RELEASE).bind(id).bind(reviewer).bind(now).bind(anyone).execute(pool).await?;
        });
        Ok(match self.claim_of(id, now).await? {
            Some(claim) => Releasing::HeldBy(claim),
            None => Releasing::Released,
        })
    }

    /// The claim that holds pending task `id` at `now`, if one does.
    pub async fn claim_of(&self, id: &str, now: i64) -> Result<Option<ClaimView>, StoreError> {
        let held: Option<(String, i64)> =
            on_db!(self, pool => sqlx::query_as(LIVE).bind(id).bind(now).fetch_optional(pool).await?);
        Ok(held.map(|(by, until_unix_ms)| ClaimView { by, until_unix_ms }))
    }

    /// The claims that hold pending tasks at `now`, each with its task's id, in no order (for
    /// the watcher of the pending list, which tells browsers when one changes).
    pub async fn live_claims(&self, now: i64) -> Result<Vec<(String, ClaimView)>, StoreError> {
        const SQL: &str = "SELECT c.task_id, c.reviewer, c.until_at FROM claims c JOIN tasks t ON t.id = c.task_id \
                           WHERE t.state = 'pending' AND c.until_at > $1";
        let rows: Vec<(String, String, i64)> =
            on_db!(self, pool => sqlx::query_as(SQL).bind(now).fetch_all(pool).await?);
        Ok(rows.into_iter().map(|(id, by, until_unix_ms)| (id, ClaimView { by, until_unix_ms })).collect())
    }

    /// Fills in the claims that hold those `tasks` that are pending at `now` (one query for all).
    pub(super) async fn load_claims(&self, tasks: &mut [Task], now: i64) -> Result<(), StoreError> {
        let ids: Vec<&str> = tasks.iter().filter(|t| t.is_pending()).map(|t| t.id.as_str()).collect();
        if ids.is_empty() {
            return Ok(());
        }
        let rows: Vec<(String, String, i64)> = on_db!(self, pool => {
            let mut query = sqlx::QueryBuilder::new("SELECT task_id, reviewer, until_at FROM claims WHERE until_at > ");
            query.push_bind(now).push(" AND task_id IN (");
            let mut separated = query.separated(", ");
            for id in &ids {
                separated.push_bind(id.to_string());
            }
            separated.push_unseparated(")");
            query.build_query_as().fetch_all(pool).await?
        });
        for (task_id, by, until_unix_ms) in rows {
            if let Some(task) = tasks.iter_mut().find(|t| t.id == task_id) {
                task.claim = Some(ClaimView { by, until_unix_ms });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
