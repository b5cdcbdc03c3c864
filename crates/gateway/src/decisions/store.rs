//! The records' store: a SQLite file holding every record and its idempotency key, so a
//! gateway that stops (or is killed) still answers `GET /v1/decisions/{id}` and recognises a
//! retry after it starts again.
//!
//! A record is written before its request goes to the fleet, its outcome once settled (with
//! the key cleared when a failure frees it), and it is deleted when its retention ends. The
//! file is locked while the gateway runs, as the webhook log is.

use std::path::Path;
use std::time::SystemTime;

use sqlx::Row;
use sqlx::sqlite::{SqlitePool, SqliteRow};

use super::Outcome;
use crate::sqlite::{millis, open_locked, time};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS records (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    idempotency_key TEXT,
    fingerprint BLOB NOT NULL,
    outcome TEXT,
    settled_ms INTEGER
)";

/// Why the store cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file could not be opened, read or written.
    #[error("records store: {0}")]
    Sql(#[from] sqlx::Error),
    /// A stored outcome is not one this gateway reads.
    #[error("records store: record {id} holds an outcome that does not read: {source}")]
    Outcome {
        /// The record.
        id: String,
        /// Why.
        source: serde_json::Error,
    },
}

/// One record as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// Its id.
    pub id: String,
    /// The caller that made it.
    pub owner: String,
    /// Its idempotency key; `None` once a failure freed it.
    pub key: Option<String>,
    /// The digest of what was asked.
    pub fingerprint: [u8; 32],
    /// Its outcome and when it came; `None` while pending.
    pub settled: Option<(Outcome, SystemTime)>,
}

/// The store; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
}

impl Store {
    /// Opens the store at `path` (created if missing) and locks it for this process.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        Ok(Store { pool: open_locked(path, SCHEMA).await? })
    }

    /// Writes a new pending record.
    pub async fn add(&self, id: &str, owner: &str, key: &str, fingerprint: &[u8; 32]) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO records (id, owner, idempotency_key, fingerprint) VALUES ($1, $2, $3, $4)")
            .bind(id)
            .bind(owner)
            .bind(key)
            .bind(&fingerprint[..])
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Writes a record's outcome; `free_key` clears its idempotency key.
    pub async fn settle(&self, id: &str, outcome: &Outcome, at: SystemTime, free_key: bool) -> Result<(), StoreError> {
        let json =
            serde_json::to_string(outcome).map_err(|source| StoreError::Outcome { id: id.to_owned(), source })?;
        let query = if free_key {
            "UPDATE records SET outcome = $1, settled_ms = $2, idempotency_key = NULL WHERE id = $3"
        } else {
            "UPDATE records SET outcome = $1, settled_ms = $2 WHERE id = $3"
        };
        sqlx::query(query).bind(json).bind(millis(at)).bind(id).execute(&self.pool).await?;
        Ok(())
    }

    /// Deletes records whose retention ended.
    pub async fn remove(&self, ids: &[String]) -> Result<(), StoreError> {
        for id in ids {
            sqlx::query("DELETE FROM records WHERE id = $1").bind(id).execute(&self.pool).await?;
        }
        Ok(())
    }

    /// Every record, the earliest settled first and the pending ones last.
    pub async fn all(&self) -> Result<Vec<Stored>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, owner, idempotency_key, fingerprint, outcome, settled_ms FROM records \
             ORDER BY settled_ms IS NULL, settled_ms, id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(stored).collect()
    }

    /// Closes the file and lets go of its lock.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

fn stored(row: &SqliteRow) -> Result<Stored, StoreError> {
    let id: String = row.try_get("id")?;
    let fingerprint: Vec<u8> = row.try_get("fingerprint")?;
    let outcome: Option<String> = row.try_get("outcome")?;
    let settled_ms: Option<i64> = row.try_get("settled_ms")?;
    let settled = match (outcome, settled_ms) {
        (Some(json), Some(at)) => {
            let outcome =
                serde_json::from_str(&json).map_err(|source| StoreError::Outcome { id: id.clone(), source })?;
            Some((outcome, time(at)))
        }
        _ => None,
    };
    Ok(Stored {
        owner: row.try_get("owner")?,
        key: row.try_get("idempotency_key")?,
        // A digest of another length matches no request: a retry under its key is refused.
        fingerprint: fingerprint.try_into().unwrap_or([0; 32]),
        settled,
        id,
    })
}
