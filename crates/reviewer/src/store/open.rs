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

/// The schema's migrations, `version name file` in order, as a dialect's folder of
/// `migrations/` holds them: both dialects list the same steps.
macro_rules! schema {
    ($dialect:literal) => {
        schema!($dialect;
            1 "tasks" "0001_tasks",
            2 "webhooks" "0002_webhooks",
            3 "sessions" "0003_sessions",
            4 "triage" "0004_triage",
            5 "approvals" "0005_approvals",
            6 "standing" "0006_standing",
            7 "cancels" "0007_cancels",
            8 "session tokens" "0008_session_tokens",
            9 "modified approvals" "0009_modified_approvals",
            10 "callers" "0010_callers",
            11 "canaries" "0011_canaries",
            12 "slack" "0012_slack",
            13 "reroutes" "0013_reroutes",
            14 "groups" "0014_groups",
            15 "claims" "0015_claims"
        )
    };
    ($dialect:literal; $($version:literal $name:literal $file:literal),*) => {
        &[$(Schema {
            version: $version,
            name: $name,
            sql: include_str!(concat!("../../migrations/", $dialect, "/", $file, ".sql")),
        }),*]
    };
}

/// The schema, for SQLite.
pub(super) const SQLITE_MIGRATIONS: &[Schema] = schema!("sqlite");
/// The same schema, for PostgreSQL.
pub(super) const POSTGRES_MIGRATIONS: &[Schema] = schema!("postgres");

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
        store.fill_groups().await?;
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
