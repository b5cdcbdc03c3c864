//! Opening the store: its pool of either kind, and its schema brought up to date.

use std::str::FromStr;
use std::time::Duration;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::{Db, Store, StoreError, redact};

/// One step of the schema.
pub(super) struct Schema {
    /// Its version, from 1, in order.
    version: i64,
    /// What it adds.
    name: &'static str,
    /// Its SQL.
    sql: &'static str,
}

/// The schema, for SQLite.
pub(super) const SQLITE_MIGRATIONS: &[Schema] = &[
    Schema { version: 1, name: "tasks", sql: include_str!("../../migrations/sqlite/0001_tasks.sql") },
    Schema { version: 2, name: "webhooks", sql: include_str!("../../migrations/sqlite/0002_webhooks.sql") },
    Schema { version: 3, name: "sessions", sql: include_str!("../../migrations/sqlite/0003_sessions.sql") },
    Schema { version: 4, name: "triage", sql: include_str!("../../migrations/sqlite/0004_triage.sql") },
    Schema { version: 5, name: "approvals", sql: include_str!("../../migrations/sqlite/0005_approvals.sql") },
    Schema { version: 6, name: "standing", sql: include_str!("../../migrations/sqlite/0006_standing.sql") },
    Schema { version: 7, name: "cancels", sql: include_str!("../../migrations/sqlite/0007_cancels.sql") },
    Schema { version: 8, name: "session tokens", sql: include_str!("../../migrations/sqlite/0008_session_tokens.sql") },
    Schema {
        version: 9,
        name: "modified approvals",
        sql: include_str!("../../migrations/sqlite/0009_modified_approvals.sql"),
    },
    Schema { version: 10, name: "callers", sql: include_str!("../../migrations/sqlite/0010_callers.sql") },
];
/// The same schema, for PostgreSQL.
pub(super) const POSTGRES_MIGRATIONS: &[Schema] = &[
    Schema { version: 1, name: "tasks", sql: include_str!("../../migrations/postgres/0001_tasks.sql") },
    Schema { version: 2, name: "webhooks", sql: include_str!("../../migrations/postgres/0002_webhooks.sql") },
    Schema { version: 3, name: "sessions", sql: include_str!("../../migrations/postgres/0003_sessions.sql") },
    Schema { version: 4, name: "triage", sql: include_str!("../../migrations/postgres/0004_triage.sql") },
    Schema { version: 5, name: "approvals", sql: include_str!("../../migrations/postgres/0005_approvals.sql") },
    Schema { version: 6, name: "standing", sql: include_str!("../../migrations/postgres/0006_standing.sql") },
    Schema { version: 7, name: "cancels", sql: include_str!("../../migrations/postgres/0007_cancels.sql") },
    Schema {
        version: 8,
        name: "session tokens",
        sql: include_str!("../../migrations/postgres/0008_session_tokens.sql"),
    },
    Schema {
        version: 9,
        name: "modified approvals",
        sql: include_str!("../../migrations/postgres/0009_modified_approvals.sql"),
    },
    Schema { version: 10, name: "callers", sql: include_str!("../../migrations/postgres/0010_callers.sql") },
];

/// What brings a database up to the steps of `schema`.
pub(super) fn migrator(schema: &[Schema]) -> Migrator {
    let migrations = schema
        .iter()
        .map(|step| {
            Migration::new(step.version, step.name.into(), MigrationType::Simple, step.sql.into_sql_str(), false)
        })
        .collect();
    Migrator::with_migrations(migrations)
}

impl Store {
    /// Opens (creating a SQLite file if missing) and migrates the store at `url`:
    /// `sqlite:PATH`, `sqlite::memory:` (one connection, gone with the process) or
    /// `postgres://…`.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let store = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let options = PgConnectOptions::from_str(url)?;
            let pool = PgPoolOptions::new().max_connections(8).connect_with(options).await?;
            Store { db: Db::Postgres(pool) }
        } else if let Some(rest) = url.strip_prefix("sqlite:") {
            let memory = rest == ":memory:" || rest.is_empty();
            let options = if memory {
                SqliteConnectOptions::from_str("sqlite::memory:")?
            } else {
                SqliteConnectOptions::new().filename(rest.trim_start_matches("//")).create_if_missing(true)
            };
            // WAL lets the UI read while an answer is written; FULL sync makes a stored task
            // survive a power cut before its delivery is acknowledged.
            let options = options
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full)
                .busy_timeout(Duration::from_secs(10))
                .foreign_keys(true);
            let pool = SqlitePoolOptions::new()
                .max_connections(if memory { 1 } else { 4 })
                // An in-memory database lives as long as its connection.
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options)
                .await?;
            Store { db: Db::Sqlite(pool) }
        } else {
            return Err(StoreError::Unsupported(redact(url)));
        };
        store.migrate().await?;
        store.fill_triage_columns().await?;
        Ok(store)
    }

    /// Which database this is (`sqlite` or `postgres`), for logs.
    pub fn backend(&self) -> &'static str {
        match self.db {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let schema = match self.db {
            Db::Sqlite(_) => SQLITE_MIGRATIONS,
            Db::Postgres(_) => POSTGRES_MIGRATIONS,
        };
        // Locking (an advisory lock on PostgreSQL) lets several processes start at once.
        let migrator = migrator(schema);
        on_db!(self, pool => migrator.run(pool).await)?;
        Ok(())
    }

    /// Closes the pool (waits for connections in use to come back).
    pub async fn close(&self) {
        on_db!(self, pool => pool.close().await);
    }
}
