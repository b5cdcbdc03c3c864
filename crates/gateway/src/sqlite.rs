//! The gateway's SQLite files (the records store and the webhook delivery log), opened the
//! same way.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::sqlite::SqliteSynchronous;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteLockingMode, SqlitePool, SqlitePoolOptions};

/// Opens the file at `path` (created if missing), locks it for this process and runs
/// `schema` on it.
pub(crate) async fn open_locked(path: &Path, schema: &'static str) -> Result<SqlitePool, sqlx::Error> {
    // FULL sync: what is written is on disk before the gateway acts on it. One connection
    // holding an exclusive lock: no other gateway takes over the same file.
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .locking_mode(SqliteLockingMode::Exclusive)
        .busy_timeout(Duration::ZERO);
    let pool =
        SqlitePoolOptions::new().max_connections(1).idle_timeout(None).max_lifetime(None).connect_with(options).await?;
    sqlx::query(schema).execute(&pool).await?;
    Ok(pool)
}

/// `time` as milliseconds since the epoch, as the files store times.
pub(crate) fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The time `millis` milliseconds after the epoch.
pub(crate) fn time(millis: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(millis).unwrap_or(0))
}
