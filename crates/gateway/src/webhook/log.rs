//! The webhook delivery log: a SQLite file holding every delivery not yet delivered or given
//! up, so a gateway that stops (or is killed) resumes them with the same id and body.
//!
//! A delivery is written before its first attempt, its schedule is updated after each failed
//! one, and it is deleted once delivered, gone or given up. The file is held with an exclusive
//! lock while the gateway runs: two gateways on one log would each resume its deliveries.

use std::path::Path;
use std::time::SystemTime;

use sqlx::Row;
use sqlx::sqlite::{SqlitePool, SqliteRow};

use crate::sqlite::{millis, open_locked, time};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    body BLOB NOT NULL,
    first_attempt_ms INTEGER NOT NULL,
    next_attempt_ms INTEGER NOT NULL,
    attempts INTEGER NOT NULL
)";

/// One webhook on its way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The `webhook-id`: the decision's id, the same on every attempt.
    pub id: String,
    /// The receiver's URL.
    pub url: String,
    /// The event's JSON, the same on every attempt.
    pub body: Vec<u8>,
    /// When it was first due (its retry period counts from there).
    pub first_attempt: SystemTime,
    /// When it is next due.
    pub next_attempt: SystemTime,
    /// The attempts made so far.
    pub attempts: u32,
}

impl Delivery {
    /// A delivery of `body` to `url` as event `id`, due at `now`.
    pub fn new(id: &str, url: &str, body: Vec<u8>, now: SystemTime) -> Self {
        Delivery { id: id.to_owned(), url: url.to_owned(), body, first_attempt: now, next_attempt: now, attempts: 0 }
    }
}

/// Why the log cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("webhook delivery log: {0}")]
pub struct LogError(#[from] sqlx::Error);

/// The log; cheap to clone.
#[derive(Debug, Clone)]
pub struct DeliveryLog {
    pool: SqlitePool,
}

impl DeliveryLog {
    /// Opens the log at `path` (created if missing) and locks it for this process.
    pub async fn open(path: &Path) -> Result<Self, LogError> {
        Ok(DeliveryLog { pool: open_locked(path, SCHEMA).await? })
    }

    /// Writes a new delivery.
    pub async fn add(&self, delivery: &Delivery) -> Result<(), LogError> {
        sqlx::query(
            "INSERT OR REPLACE INTO deliveries (id, url, body, first_attempt_ms, next_attempt_ms, attempts) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&delivery.id)
        .bind(&delivery.url)
        .bind(&delivery.body)
        .bind(millis(delivery.first_attempt))
        .bind(millis(delivery.next_attempt))
        .bind(i64::from(delivery.attempts))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records a failed attempt: the count and when the next is due.
    pub async fn attempted(&self, delivery: &Delivery) -> Result<(), LogError> {
        sqlx::query("UPDATE deliveries SET next_attempt_ms = $1, attempts = $2 WHERE id = $3")
            .bind(millis(delivery.next_attempt))
            .bind(i64::from(delivery.attempts))
            .bind(&delivery.id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Deletes a delivery that is over (delivered, gone or given up).
    pub async fn remove(&self, id: &str) -> Result<(), LogError> {
        sqlx::query("DELETE FROM deliveries WHERE id = $1").bind(id).execute(&self.pool).await?;
        Ok(())
    }

    /// Closes the file and lets go of its lock.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Every delivery in the log, the soonest due first.
    pub async fn pending(&self) -> Result<Vec<Delivery>, LogError> {
        let rows = sqlx::query(
            "SELECT id, url, body, first_attempt_ms, next_attempt_ms, attempts FROM deliveries \
             ORDER BY next_attempt_ms, first_attempt_ms, id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(delivery).collect::<Result<_, sqlx::Error>>().map_err(LogError)
    }
}

fn delivery(row: &SqliteRow) -> Result<Delivery, sqlx::Error> {
    Ok(Delivery {
        id: row.try_get("id")?,
        url: row.try_get("url")?,
        body: row.try_get("body")?,
        first_attempt: time(row.try_get("first_attempt_ms")?),
        next_attempt: time(row.try_get("next_attempt_ms")?),
        attempts: u32::try_from(row.try_get::<i64, _>("attempts")?).unwrap_or(u32::MAX),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    /// A log file of its own, deleted when dropped.
    pub(crate) struct TempLog(pub(crate) std::path::PathBuf);

    impl TempLog {
        pub(crate) fn new() -> Self {
            TempLog(std::env::temp_dir().join(format!("airlock-webhook-log-{}.db", uuid::Uuid::now_v7())))
        }
    }

    impl Drop for TempLog {
        fn drop(&mut self) {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
            }
        }
    }

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
    }

    #[tokio::test]
    async fn deliveries_written_are_read_back_after_a_restart_soonest_first() {
        let file = TempLog::new();
        let log = DeliveryLog::open(&file.0).await.unwrap();
        let late = Delivery::new("late", "http://127.0.0.1:1/hook", b"{\"a\":1}".to_vec(), at(10));
        let soon = Delivery::new("soon", "https://example.com/h", b"{\"b\":2}".to_vec(), at(20));
        let done = Delivery::new("done", "http://127.0.0.1:1/hook", b"{}".to_vec(), at(0));
        for delivery in [&late, &soon, &done] {
            log.add(delivery).await.unwrap();
        }
        // `late` was due first but failed; its next attempt comes after `soon`'s first.
        let mut late_retry = late.clone();
        late_retry.attempts = 1;
        late_retry.next_attempt = at(30);
        log.attempted(&late_retry).await.unwrap();
        log.remove("done").await.unwrap();
        log.close().await;

        let reopened = DeliveryLog::open(&file.0).await.unwrap();
        assert_eq!(reopened.pending().await.unwrap(), vec![soon, late_retry]);
    }

    #[tokio::test]
    async fn a_log_in_use_cannot_be_opened_by_another_gateway() {
        let file = TempLog::new();
        let log = DeliveryLog::open(&file.0).await.unwrap();
        log.add(&Delivery::new("one", "http://127.0.0.1:1/", Vec::new(), at(0))).await.unwrap();
        assert!(DeliveryLog::open(&file.0).await.is_err(), "the second opener is refused");
        log.close().await;
        // Reopened with its table already there, as after a restart: locked all the same.
        let reopened = DeliveryLog::open(&file.0).await.expect("once closed, it opens");
        assert!(DeliveryLog::open(&file.0).await.is_err(), "the second opener is refused again");
        reopened.close().await;
    }
}
