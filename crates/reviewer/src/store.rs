//! The durable store: human tasks, the outbox of answers, and withdrawn calls, in SQLite or
//! PostgreSQL behind one type.
//!
//! Both databases get the same schema (one migration set per dialect, differing only in the
//! blob type) and the same SQL text: sqlx binds `$1`-style parameters on both. [`Store`]
//! holds a pool of either kind and runs each statement on whichever it has.
//!
//! Invariants the SQL keeps, whatever number of processes share a PostgreSQL store:
//! - one task per broker user that asked, call, kind and step (`dedup_key` is unique; a
//!   duplicate insert does nothing), so no user's request can take the place of another's;
//! - a task is decided once: the decision is a conditional `UPDATE … WHERE state = 'pending'`,
//!   and the outbox row carrying the answer is written in the same transaction, so an answer
//!   exists exactly when a decision does;
//! - an answer is published by one process at a time: a sender leases its outbox row with a
//!   conditional `UPDATE … WHERE lease_until <= now`, and a lease that ran out (its process
//!   died) lets another sender resend it;
//! - a webhook is written in the transaction of the change it announces (a task stored, a
//!   decision recorded), and each attempt is leased the same way as an answer, so processes
//!   sharing the store send each event once;
//! - the pending list is paged and filtered (`triage`) in SQL on columns written with the task,
//!   always within the caller's pools;
//! - a task that needs several approvals takes one per reviewer (names compared without
//!   case), each of the call as asked or of one modified call, in a transaction that first
//!   locks the task's row, so the approval that completes the count of one call is seen by
//!   exactly one of the processes racing to give it, and it decides the task in that
//!   transaction;
//! - a browser session is a row keyed by the SHA-256 of its id, holding the SHA-256 of the
//!   token it was opened with, so every process sharing the store accepts it and refuses it
//!   once it is logged out (anywhere), expired, or its reviewer's token replaced;
//! - a standing decision is a numbered row, read afresh each time one is
//!   applied, so a revocation anywhere stops it everywhere;
//! - a cancel withdraws only tasks whose request the cancel's publisher published
//!   (`requested_by`), and is remembered under that publisher, so a task arriving after it is
//!   dropped only when the same broker user asked for it.

use std::str::FromStr;
use std::time::Duration;

use airlock_contract::v1;
use airlock_policy::Decision;
use airlock_telemetry::metrics::AnswerLabels;
use prost::Message as _;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::postgres::{PgConnectOptions, PgDatabaseError, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ColumnIndex, Decode, QueryBuilder, Row, SqlSafeStr, Type};

use crate::task::{Incoming, State, Task, Verdict};
use crate::triage::Columns;

/// One step of the schema.
struct Schema {
    /// Its version, from 1, in order.
    version: i64,
    /// What it adds.
    name: &'static str,
    /// Its SQL.
    sql: &'static str,
}

/// The schema, for SQLite.
const SQLITE_MIGRATIONS: &[Schema] = &[
    Schema { version: 1, name: "tasks", sql: include_str!("../migrations/sqlite/0001_tasks.sql") },
    Schema { version: 2, name: "webhooks", sql: include_str!("../migrations/sqlite/0002_webhooks.sql") },
    Schema { version: 3, name: "sessions", sql: include_str!("../migrations/sqlite/0003_sessions.sql") },
    Schema { version: 4, name: "triage", sql: include_str!("../migrations/sqlite/0004_triage.sql") },
    Schema { version: 5, name: "approvals", sql: include_str!("../migrations/sqlite/0005_approvals.sql") },
    Schema { version: 6, name: "standing", sql: include_str!("../migrations/sqlite/0006_standing.sql") },
    Schema { version: 7, name: "cancels", sql: include_str!("../migrations/sqlite/0007_cancels.sql") },
    Schema { version: 8, name: "session tokens", sql: include_str!("../migrations/sqlite/0008_session_tokens.sql") },
    Schema {
        version: 9,
        name: "modified approvals",
        sql: include_str!("../migrations/sqlite/0009_modified_approvals.sql"),
    },
    Schema { version: 10, name: "callers", sql: include_str!("../migrations/sqlite/0010_callers.sql") },
];
/// The same schema, for PostgreSQL.
const POSTGRES_MIGRATIONS: &[Schema] = &[
    Schema { version: 1, name: "tasks", sql: include_str!("../migrations/postgres/0001_tasks.sql") },
    Schema { version: 2, name: "webhooks", sql: include_str!("../migrations/postgres/0002_webhooks.sql") },
    Schema { version: 3, name: "sessions", sql: include_str!("../migrations/postgres/0003_sessions.sql") },
    Schema { version: 4, name: "triage", sql: include_str!("../migrations/postgres/0004_triage.sql") },
    Schema { version: 5, name: "approvals", sql: include_str!("../migrations/postgres/0005_approvals.sql") },
    Schema { version: 6, name: "standing", sql: include_str!("../migrations/postgres/0006_standing.sql") },
    Schema { version: 7, name: "cancels", sql: include_str!("../migrations/postgres/0007_cancels.sql") },
    Schema { version: 8, name: "session tokens", sql: include_str!("../migrations/postgres/0008_session_tokens.sql") },
    Schema {
        version: 9,
        name: "modified approvals",
        sql: include_str!("../migrations/postgres/0009_modified_approvals.sql"),
    },
    Schema { version: 10, name: "callers", sql: include_str!("../migrations/postgres/0010_callers.sql") },
];

/// What brings a database up to the steps of `schema`.
fn migrator(schema: &[Schema]) -> Migrator {
    let migrations = schema
        .iter()
        .map(|step| {
            Migration::new(step.version, step.name.into(), MigrationType::Simple, step.sql.into_sql_str(), false)
        })
        .collect();
    Migrator::with_migrations(migrations)
}

/// Task states as stored.
const PENDING: &str = "pending";
const DECIDED: &str = "decided";
const CANCELLED: &str = "cancelled";

/// The columns a [`Task`] is read from (by name, in [`task_from_row`]).
const TASK_COLUMNS: &str = "id, correlation, pool, step, body, received_at, deadline_at, state, decision, \
                            explanation, decided_by, decided_at, reason";

/// The stored `deadline_at` of a task without a deadline: the column is `NOT NULL`, and every
/// query on deadlines skips it with `deadline_at > 0`.
const NO_DEADLINE: i64 = 0;

/// Writes a [`NewWebhook`] ($1 id, $2 endpoint, $3 body) at $4, due at once.
const ADD_WEBHOOK: &str = "INSERT INTO webhooks (id, endpoint, body, created_at, next_attempt, attempts, lease_until) \
                           VALUES ($1, $2, $3, $4, $4, 0, 0)";

/// What can go wrong with the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store's location is not one this service knows.
    #[error("unsupported store '{0}': use sqlite:PATH, sqlite::memory: or postgres://…")]
    Unsupported(String),
    /// The database failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// The schema could not be brought up to date.
    #[error("migrating the store failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored row cannot be read back.
    #[error("corrupt stored task {id}: {what}")]
    Corrupt {
        /// The task.
        id: String,
        /// What is wrong.
        what: String,
    },
}

impl StoreError {
    /// Whether the same statement may succeed later: the database was unreachable, restarting,
    /// busy or out of resources. Otherwise it refused what it was given (a value its text
    /// cannot hold, a constraint), and trying again changes nothing. Read from the error's
    /// kind and the database's own code (SQLSTATE, SQLite result code), never its message.
    pub fn is_transient(&self) -> bool {
        let StoreError::Database(error) = self else { return false };
        match error {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::BeginFailed => true,
            sqlx::Error::Database(db) => match db.try_downcast_ref::<PgDatabaseError>() {
                // SQLSTATE classes: connection exception, transaction rollback, insufficient
                // resources, operator intervention (a shutdown), system error.
                Some(pg) => matches!(pg.code().get(..2), Some("08" | "40" | "53" | "57" | "58")),
                // SQLite primary result codes: BUSY, LOCKED, NOMEM, IOERR, FULL, CANTOPEN.
                None => db
                    .code()
                    .and_then(|code| code.parse::<i32>().ok())
                    .is_some_and(|code| matches!(code & 0xff, 5 | 6 | 7 | 10 | 13 | 14)),
            },
            _ => false,
        }
    }
}

/// What storing an incoming task did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inserted {
    /// A new pending task, with its id.
    Created(String),
    /// The same broker user's call, kind and step was stored before: nothing changed.
    Duplicate,
    /// The runner withdrew the call before the task arrived: nothing stored.
    Withdrawn,
}

/// What a cancel did to the tasks of its call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Withdrawal {
    /// The pending tasks it withdrew: those whose request its publisher published.
    pub withdrawn: Vec<String>,
    /// The pending tasks it left pending, since another broker user published their request.
    pub kept: Vec<String>,
}

/// A pending task's id and pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingId {
    /// The task's id.
    pub id: String,
    /// Its pool.
    pub pool: String,
    /// When it was stored (unix ms).
    pub received_at: i64,
}

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

/// What a decision attempt did.
#[derive(Debug, Clone, PartialEq)]
pub enum Decided {
    /// The decision was recorded; its answer is in the outbox, leased to the caller.
    Recorded(OutboxEntry),
    /// The task was not pending (decided or withdrawn before): nothing changed. Carries the
    /// task as it stands.
    NotPending(Box<Task>),
    /// No such task.
    NotFound,
}

#[derive(Debug, Clone)]
enum Db {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// The first statement of the transactions that settle whether a call's task stands: a task's
/// insert (which looks for a withdrawal) and a cancel (which looks for the tasks). Under
/// PostgreSQL's default isolation each can miss the other's uncommitted row, so a cancel that
/// crosses its task's insert left the task pending, or a foreign cancel uncounted; serializable,
/// one of the two fails (`40001`, transient) and is tried again, seeing the other. SQLite needs
/// nothing: both begin with a write, and it has one writer at a time.
const SERIALIZABLE: &str = "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE";

/// Runs `$body` with `$pool` bound to whichever pool the store has; the body is compiled once
/// per database, so the same SQL text and code serve both.
macro_rules! on_db {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.db {
            Db::Sqlite($pool) => $body,
            Db::Postgres($pool) => $body,
        }
    };
}

/// In transaction `$tx`: writes the [`NewWebhook`]s `$webhooks` at `$at`, due at once.
macro_rules! add_webhooks {
    ($tx:expr, $webhooks:expr, $at:expr) => {
        for webhook in $webhooks {
            sqlx::query(ADD_WEBHOOK)
                .bind(&webhook.id)
                .bind(&webhook.endpoint)
                .bind(&webhook.body)
                .bind($at)
                .execute(&mut *$tx)
                .await?;
        }
    };
}

/// In transaction `$tx`: records `$verdict` on `$task` if it is still pending, with `$answer`
/// in the outbox leased until `$lease_until` and the `$webhooks` announcing it; whether it did.
macro_rules! record_decision {
    ($tx:expr, $task:expr, $verdict:expr, $answer:expr, $lease_until:expr, $webhooks:expr) => {{
        const UPDATE: &str = "UPDATE tasks SET state = 'decided', decision = $2, explanation = $3, \
                              decided_by = $4, decided_at = $5 WHERE id = $1 AND state = 'pending'";
        const OUTBOX: &str = "INSERT INTO outbox (task_id, correlation, body, created_at, lease_until) \
                              VALUES ($1, $2, $3, $4, $5)";
        let updated = sqlx::query(UPDATE)
            .bind(&$task.id)
            .bind($verdict.decision.as_str())
            .bind(&$verdict.explanation)
            .bind(&$verdict.decided_by)
            .bind($verdict.decided_at)
            .execute(&mut *$tx)
            .await?
            .rows_affected();
        if updated == 1 {
            sqlx::query(OUTBOX)
                .bind(&$task.id)
                .bind(&$task.correlation)
                .bind($answer)
                .bind($verdict.decided_at)
                .bind($lease_until)
                .execute(&mut *$tx)
                .await?;
            add_webhooks!($tx, $webhooks, $verdict.decided_at);
        }
        updated == 1
    }};
}

/// A handle on the store; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    db: Db,
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

    /// Stores an incoming task unless the same broker user's call, kind and step is stored
    /// already or the call was withdrawn by the broker user that asked for it. Durable when this returns: the
    /// delivery may then be acknowledged.
    pub async fn insert(&self, incoming: &Incoming, now: i64) -> Result<Inserted, StoreError> {
        self.insert_as(&uuid::Uuid::now_v7().to_string(), incoming, now, &[]).await
    }

    /// [`Store::insert`] as task `id`, with the `webhooks` announcing it written in the same
    /// transaction (none when the task is not stored).
    pub async fn insert_as(
        &self,
        id: &str,
        incoming: &Incoming,
        now: i64,
        webhooks: &[NewWebhook],
    ) -> Result<Inserted, StoreError> {
        const SQL: &str = "INSERT INTO tasks (id, dedup_key, correlation, pool, step, body, received_at, \
                           deadline_at, state, function, run_id, sample_id, search, requested_by) \
                           SELECT $1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10, $11, $12, $13 \
                           WHERE NOT EXISTS (SELECT 1 FROM withdrawn WHERE correlation = $3 AND cancelled_by = $13) \
                           ON CONFLICT (dedup_key) DO NOTHING";
        let body = incoming.human.encode_to_vec();
        let columns = Columns::of(&incoming.human);
        let affected = on_db!(self, pool => {
            let mut tx = pool.begin().await?;
            if matches!(self.db, Db::Postgres(_)) {
                sqlx::query(SERIALIZABLE).execute(&mut *tx).await?;
            }
            let affected = sqlx::query(SQL)
                .bind(id)
                .bind(incoming.dedup_key())
                .bind(&incoming.correlation)
                .bind(&incoming.pool)
                .bind(i64::from(incoming.step()))
                .bind(&body)
                .bind(now)
                .bind(incoming.deadline().unwrap_or(NO_DEADLINE))
                .bind(&columns.function)
                .bind(&columns.run_id)
                .bind(&columns.sample_id)
                .bind(&columns.search)
                .bind(incoming.requested_by())
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if affected == 1 {
                add_webhooks!(tx, webhooks, now);
            }
            tx.commit().await?;
            affected
        });
        if affected == 1 {
            return Ok(Inserted::Created(id.to_owned()));
        }
        let withdrawn: Option<(i64,)> = on_db!(self, pool =>
            sqlx::query_as("SELECT withdrawn_at FROM withdrawn WHERE correlation = $1 AND cancelled_by = $2")
                .bind(&incoming.correlation)
                .bind(incoming.requested_by())
                .fetch_optional(pool)
                .await?);
        Ok(if withdrawn.is_some() { Inserted::Withdrawn } else { Inserted::Duplicate })
    }

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

    /// One task, in any state.
    pub async fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
        let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1");
        let task = on_db!(self, pool => {
            let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_optional(pool).await?;
            row.as_ref().map(task_from_row).transpose()?
        });
        let Some(mut task) = task else { return Ok(None) };
        self.load_approvals(std::slice::from_mut(&mut task)).await?;
        Ok(Some(task))
    }

    /// The pending tasks of `pools` (every pool when `None`), oldest first.
    pub async fn pending(&self, pools: Option<&[String]>) -> Result<Vec<Task>, StoreError> {
        self.tasks_where("state = 'pending'", pools, "received_at ASC, id ASC", None).await
    }

    /// The tasks that left the pending list (decided or withdrawn) of `pools`, newest first.
    pub async fn history(&self, pools: Option<&[String]>, limit: u32) -> Result<Vec<Task>, StoreError> {
        self.tasks_where("state <> 'pending'", pools, "decided_at DESC, id DESC", Some(limit)).await
    }

    async fn tasks_where(
        &self,
        condition: &str,
        pools: Option<&[String]>,
        order: &str,
        limit: Option<u32>,
    ) -> Result<Vec<Task>, StoreError> {
        if pools.is_some_and(<[String]>::is_empty) {
            return Ok(Vec::new());
        }
        on_db!(self, pool => {
            let mut query = QueryBuilder::new(format!("SELECT {TASK_COLUMNS} FROM tasks WHERE {condition}"));
            push_pools(&mut query, pools);
            query.push(format!(" ORDER BY {order}"));
            if let Some(limit) = limit {
                query.push(" LIMIT ").push_bind(i64::from(limit));
            }
            let mut tasks = query.build().fetch_all(pool).await?.iter().map(task_from_row).collect::<Result<Vec<_>, _>>()?;
            self.load_approvals(&mut tasks).await?;
            Ok(tasks)
        })
    }

    /// The ids and pools of every pending task, in no order (cheap: no bodies, no sort), for
    /// change detection.
    pub async fn pending_ids(&self) -> Result<Vec<PendingId>, StoreError> {
        const SQL: &str = "SELECT id, pool, received_at FROM tasks WHERE state = 'pending'";
        let rows: Vec<(String, String, i64)> = on_db!(self, pool => sqlx::query_as(SQL).fetch_all(pool).await?);
        Ok(rows.into_iter().map(|(id, pool, received_at)| PendingId { id, pool, received_at }).collect())
    }

    /// Records `verdict` on `task` if it is still pending, with `answer` (its encoded
    /// `StepResult`) in the outbox leased to the caller until `lease_until` and the
    /// `webhooks` announcing it. The first decision wins; any later one changes nothing and
    /// gets [`Decided::NotPending`].
    pub async fn decide(
        &self,
        task: &Task,
        verdict: &Verdict,
        answer: &[u8],
        lease_until: i64,
        webhooks: &[NewWebhook],
    ) -> Result<Decided, StoreError> {
        let recorded = on_db!(self, pool => {
            let mut tx = pool.begin().await?;
            if record_decision!(tx, task, verdict, answer, lease_until, webhooks) {
                tx.commit().await?;
                true
            } else {
                tx.rollback().await?;
                false
            }
        });
        if recorded {
            return Ok(Decided::Recorded(OutboxEntry {
                task_id: task.id.clone(),
                correlation: task.correlation.clone(),
                body: answer.to_vec(),
                labels: None,
            }));
        }
        Ok(match self.task(&task.id).await? {
            Some(task) => Decided::NotPending(Box::new(task)),
            None => Decided::NotFound,
        })
    }

    /// Withdraws the pending tasks of a call (every step of it) whose request the broker user
    /// `cancelled_by` published (`""` for none: the in-process transport names no user), and
    /// remembers the call under that user, so a task of it that arrives later from the same
    /// user's request is dropped. The call's tasks another user asked for stay pending, and
    /// then the cancel is not remembered: it is dropped (and counted) now, not again when a
    /// task of the call is stored ([`Store::forget_foreign_cancels`]).
    pub async fn cancel(
        &self,
        correlation: &str,
        cancelled_by: &str,
        reason: &str,
        now: i64,
    ) -> Result<Withdrawal, StoreError> {
        const REMEMBER: &str = "INSERT INTO withdrawn (correlation, cancelled_by, withdrawn_at, reason) \
                                VALUES ($1, $2, $3, $4) ON CONFLICT (correlation, cancelled_by) DO NOTHING";
        const WITHDRAW: &str = "UPDATE tasks SET state = 'cancelled', decided_at = $3, reason = $4 \
                                WHERE correlation = $1 AND requested_by = $2 AND state = 'pending' RETURNING id";
        const KEPT: &str = "SELECT id FROM tasks WHERE correlation = $1 AND requested_by <> $2 AND state = 'pending'";
        let (withdrawn, kept): (Vec<(String,)>, Vec<(String,)>) = on_db!(self, pool => {
            let mut tx = pool.begin().await?;
            if matches!(self.db, Db::Postgres(_)) {
                sqlx::query(SERIALIZABLE).execute(&mut *tx).await?;
            }
            let withdrawn = sqlx::query_as(WITHDRAW)
                .bind(correlation)
                .bind(cancelled_by)
                .bind(now)
                .bind(reason)
                .fetch_all(&mut *tx)
                .await?;
            let kept: Vec<(String,)> =
                sqlx::query_as(KEPT).bind(correlation).bind(cancelled_by).fetch_all(&mut *tx).await?;
            if kept.is_empty() {
                sqlx::query(REMEMBER).bind(correlation).bind(cancelled_by).bind(now).bind(reason).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            (withdrawn, kept)
        });
        let ids = |rows: Vec<(String,)>| rows.into_iter().map(|(id,)| id).collect();
        Ok(Withdrawal { withdrawn: ids(withdrawn), kept: ids(kept) })
    }

    /// Forgets the cancels of a call remembered under broker users other than `requested_by`,
    /// once a task of the call that `requested_by` asked for is stored: they withdrew nothing
    /// and never will. Returns the users that sent them, so that they are counted once.
    pub async fn forget_foreign_cancels(
        &self,
        correlation: &str,
        requested_by: &str,
    ) -> Result<Vec<String>, StoreError> {
        const SQL: &str = "DELETE FROM withdrawn WHERE correlation = $1 AND cancelled_by <> $2 RETURNING cancelled_by";
        let users: Vec<(String,)> =
            on_db!(self, pool => sqlx::query_as(SQL).bind(correlation).bind(requested_by).fetch_all(pool).await?);
        Ok(users.into_iter().map(|(user,)| user).collect())
    }

    /// Forgets withdrawn calls older than `before` (unix ms): their tasks cannot arrive any more.
    pub async fn prune_withdrawn(&self, before: i64) -> Result<u64, StoreError> {
        Ok(on_db!(self, pool => sqlx::query("DELETE FROM withdrawn WHERE withdrawn_at < $1")
            .bind(before)
            .execute(pool)
            .await?
            .rows_affected()))
    }

    /// The earliest deadline of a pending task.
    pub async fn next_deadline(&self) -> Result<Option<i64>, StoreError> {
        const SQL: &str = "SELECT MIN(deadline_at) FROM tasks WHERE state = 'pending' AND deadline_at > 0";
        let (min,): (Option<i64>,) = on_db!(self, pool => sqlx::query_as(SQL).fetch_one(pool).await?);
        Ok(min)
    }

    /// The pending tasks whose deadline is at or before `now`.
    pub async fn expired(&self, now: i64) -> Result<Vec<Task>, StoreError> {
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE state = 'pending' AND deadline_at > 0 AND deadline_at <= $1 \
             ORDER BY deadline_at"
        );
        let mut tasks = on_db!(self, pool => {
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(now).fetch_all(pool).await?;
            rows.iter().map(task_from_row).collect::<Result<Vec<_>, _>>()?
        });
        self.load_approvals(&mut tasks).await?;
        Ok(tasks)
    }

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

    /// Closes the pool (waits for connections in use to come back).
    pub async fn close(&self) {
        on_db!(self, pool => pool.close().await);
    }
}

/// Appends ` AND pool IN (…)` for a pool filter.
fn push_pools<DB: sqlx::Database>(query: &mut QueryBuilder<DB>, pools: Option<&[String]>)
where
    for<'a> String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    let Some(pools) = pools else { return };
    query.push(" AND pool IN (");
    let mut separated = query.separated(", ");
    for pool in pools {
        separated.push_bind(pool.clone());
    }
    separated.push_unseparated(")");
}

/// Reads a task from a row of [`TASK_COLUMNS`], on either database.
fn task_from_row<'r, R>(row: &'r R) -> Result<Task, StoreError>
where
    R: Row,
    &'r str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
{
    let id: String = row.try_get("id")?;
    let corrupt = |what: String| StoreError::Corrupt { id: id.clone(), what };
    let body: Vec<u8> = row.try_get("body")?;
    let human = v1::HumanTask::decode(body.as_slice()).map_err(|e| corrupt(format!("body: {e}")))?;
    let state: String = row.try_get("state")?;
    let at: Option<i64> = row.try_get("decided_at")?;
    let state = match state.as_str() {
        PENDING => State::Pending,
        DECIDED => {
            let decision: Option<String> = row.try_get("decision")?;
            let decision = Decision::from_str(decision.as_deref().unwrap_or_default())
                .map_err(|e| corrupt(format!("decision: {e}")))?;
            State::Decided(Verdict {
                decision,
                explanation: row.try_get::<Option<String>, _>("explanation")?.unwrap_or_default(),
                decided_by: row.try_get::<Option<String>, _>("decided_by")?.unwrap_or_default(),
                decided_at: at.unwrap_or_default(),
            })
        }
        CANCELLED => State::Cancelled {
            at: at.unwrap_or_default(),
            reason: row.try_get::<Option<String>, _>("reason")?.unwrap_or_default(),
        },
        other => return Err(corrupt(format!("unknown state '{other}'"))),
    };
    let step: i64 = row.try_get("step")?;
    let deadline: i64 = row.try_get("deadline_at")?;
    Ok(Task {
        correlation: row.try_get("correlation")?,
        pool: row.try_get("pool")?,
        step: u32::try_from(step).unwrap_or_default(),
        received_at: row.try_get("received_at")?,
        deadline: (deadline != NO_DEADLINE).then_some(deadline),
        human,
        state,
        id,
        approvals: Vec::new(),
    })
}

/// The store's location without a password, for messages and logs.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

mod approvals;
mod standing;
mod triage;

#[cfg(test)]
mod tests;

pub use approvals::{Approved, Recording};
pub use standing::NewStanding;
