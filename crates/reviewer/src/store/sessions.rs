//! Browser sessions in the store, shared by every process: opened, looked up, logged out,
//! pruned once expired.

use super::{Db, Store, StoreError};

/// A browser session as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    /// The SHA-256 of the session's id (lowercase hex); the id itself is never stored.
    pub id_sha256: String,
    /// The reviewer's name.
    pub reviewer: String,
    /// The SHA-256 of the token it was opened with, as the tokens file lists it: the session
    /// holds only while the reviewer's token is that one.
    pub token_sha256: String,
    /// The token forms and scripts must echo.
    pub csrf: String,
    /// When it was opened (unix ms).
    pub created_at: i64,
    /// When it expires (unix ms).
    pub expires_at: i64,
}

impl Store {
    /// Stores a new browser session.
    pub async fn open_session(&self, session: &StoredSession) -> Result<(), StoreError> {
        const SQL: &str = "INSERT INTO sessions (id_sha256, reviewer, token_sha256, csrf, created_at, expires_at) \
                           VALUES ($1, $2, $3, $4, $5, $6)";
        on_db!(self, pool => sqlx::query(SQL)
            .bind(&session.id_sha256)
            .bind(&session.reviewer)
            .bind(&session.token_sha256)
            .bind(&session.csrf)
            .bind(session.created_at)
            .bind(session.expires_at)
            .execute(pool)
            .await
            .map(drop)?);
        Ok(())
    }

    /// The session whose id hashes to `id_sha256`, if it is neither logged out nor expired at
    /// `now` (one primary-key lookup).
    pub async fn session(&self, id_sha256: &str, now: i64) -> Result<Option<StoredSession>, StoreError> {
        const SQL: &str = "SELECT id_sha256, reviewer, token_sha256, csrf, created_at, expires_at FROM sessions \
                           WHERE id_sha256 = $1 AND logged_out_at IS NULL AND expires_at > $2";
        let row: Option<(String, String, String, String, i64, i64)> =
            on_db!(self, pool => sqlx::query_as(SQL).bind(id_sha256).bind(now).fetch_optional(pool).await?);
        Ok(row.map(|(id_sha256, reviewer, token_sha256, csrf, created_at, expires_at)| StoredSession {
            id_sha256,
            reviewer,
            token_sha256,
            csrf,
            created_at,
            expires_at,
        }))
    }

    /// Marks a session logged out at `now`: every process sharing the store refuses it from
    /// then on.
    pub async fn log_out(&self, id_sha256: &str, now: i64) -> Result<(), StoreError> {
        const SQL: &str = "UPDATE sessions SET logged_out_at = $2 WHERE id_sha256 = $1 AND logged_out_at IS NULL";
        on_db!(self, pool => sqlx::query(SQL).bind(id_sha256).bind(now).execute(pool).await.map(drop)?);
        Ok(())
    }

    /// Forgets the sessions expired at `now`, logged out or not.
    pub async fn prune_sessions(&self, now: i64) -> Result<u64, StoreError> {
        Ok(on_db!(self, pool => sqlx::query("DELETE FROM sessions WHERE expires_at <= $1")
            .bind(now)
            .execute(pool)
            .await?
            .rows_affected()))
    }
}
