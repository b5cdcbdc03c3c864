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
//! - the pending list is paged and filtered (`triage`), and grouped by identical call
//!   (`groups`), in SQL on columns written with the task, always within the caller's pools;
//! - a task that needs several approvals takes one per reviewer (names compared without
//!   case), each of the call as asked or of one modified call, in a transaction that first
//!   locks the task's row, so the approval that completes the count of one call is seen by
//!   exactly one of the processes racing to give it, and it decides the task in that
//!   transaction;
//! - a browser session is a row keyed by the SHA-256 of its id, holding the SHA-256 of the
//!   token it was opened with, so every process sharing the store accepts it and refuses it
//!   once it is logged out (anywhere), expired, or its reviewer's token replaced;
//! - a standing decision is a numbered row, read afresh each time one is
//!   applied, so a revocation anywhere stops it everywhere; a task's insert reads those that
//!   cover it in its own transaction, holding the table against a new one until it commits,
//!   so a standing decision made meanwhile either is seen or finds the task pending;
//! - a canary's decision writes no outbox row: its task is marked in the transaction that
//!   stores it (`canary`, with its row in `canaries`), and the transaction that decides it
//!   records whom its verdict counts for instead, so no answer of a canary can ever be sent;
//!   its `dedup_key` is its own (`canary/<id>`), so it never takes the place of a real task
//!   whose call gets the same key;
//! - a pending task is held by one claim at a time: a claim is one conditional upsert that
//!   takes the task's row only when its claim ended or is the same reviewer's, so of
//!   reviewers racing on any processes exactly one holds it;
//! - a cancel withdraws only tasks whose request the cancel's publisher published
//!   (`requested_by`), and is remembered under that publisher, so a task arriving after it is
//!   dropped only when the same broker user asked for it.
//!
//! Layout:
//! - `Store` (here): the handle, its errors, what every table's SQL shares.
//! - `open`: the pool opened and the schema migrated.
//! - `tasks`: tasks stored, listed, decided and withdrawn, and the withdrawn calls.
//! - `outbox`: answers leased to a sender until published.
//! - `webhooks`: webhooks written with their change, leased per attempt.
//! - `sessions`: browser sessions.
//! - `standing`: standing decisions made, listed, revoked.
//! - `approvals`: approvals counted, the last one deciding.
//! - `canaries`: canaries planted, and read back with their verdicts for the catch rates.
//! - `claims`: claims on pending tasks taken, extended, released, and read with their tasks.
//! - `triage`: the pending list paged and filtered.
//! - `slack`: the Slack message of each task, and the interaction payloads already used.
//! - `groups`: the groups of identical pending calls, and the tasks of one.

use std::str::FromStr;

use airlock_contract::v1;
use airlock_policy::Decision;
use prost::Message as _;
use sqlx::postgres::{PgDatabaseError, PgPool};
use sqlx::sqlite::SqlitePool;
use sqlx::{ColumnIndex, Decode, QueryBuilder, Row, Type};

use crate::task::{State, Task, Verdict};

/// Task states as stored.
const PENDING: &str = "pending";
const DECIDED: &str = "decided";
const CANCELLED: &str = "cancelled";

/// The columns a [`Task`] is read from (by name, in [`task_from_row`]).
const TASK_COLUMNS: &str = "id, correlation, pool, step, body, received_at, deadline_at, state, decision, \
                            explanation, decided_by, decided_at, reason, canary";

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

#[derive(Debug, Clone)]
enum Db {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}
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

/// In transaction `$tx`: records `$recording`'s verdict on `$task` if it is still pending,
/// with its answer in the outbox (or, for a canary, whom the verdict counts for) and the
/// webhooks announcing it; whether it did.
macro_rules! record_decision {
    ($tx:expr, $task:expr, $recording:expr) => {{
        const UPDATE: &str = "UPDATE tasks SET state = 'decided', decision = $2, explanation = $3, \
                              decided_by = $4, decided_at = $5 WHERE id = $1 AND state = 'pending'";
        const OUTBOX: &str = "INSERT INTO outbox (task_id, correlation, body, created_at, lease_until) \
                              VALUES ($1, $2, $3, $4, $5)";
        const COUNTED: &str = "UPDATE canaries SET answered_by = $2, standing_id = $3 WHERE task_id = $1";
        let Recording { verdict, delivery, webhooks } = $recording;
        let updated = sqlx::query(UPDATE)
            .bind(&$task.id)
            .bind(verdict.decision.as_str())
            .bind(&verdict.explanation)
            .bind(&verdict.decided_by)
            .bind(verdict.decided_at)
            .execute(&mut *$tx)
            .await?
            .rows_affected();
        if updated == 1 {
            match delivery {
                Delivery::Outbox { answer, lease_until } => {
                    sqlx::query(OUTBOX)
                        .bind(&$task.id)
                        .bind(&$task.correlation)
                        .bind(answer)
                        .bind(verdict.decided_at)
                        .bind(lease_until)
                        .execute(&mut *$tx)
                        .await?;
                }
                Delivery::Canary { answerer } => {
                    sqlx::query(COUNTED)
                        .bind(&$task.id)
                        .bind(answerer.as_ref().map(|a| a.reviewer.as_str()))
                        .bind(answerer.as_ref().and_then(|a| a.standing))
                        .execute(&mut *$tx)
                        .await?;
                }
            }
            add_webhooks!($tx, webhooks, verdict.decided_at);
        }
        updated == 1
    }};
}

/// A decision about to be recorded: the verdict, where its answer goes, and the webhooks
/// announcing it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// What is decided, by whom.
    pub verdict: Verdict,
    /// Where the answer goes: the outbox, or nowhere (a canary's).
    pub delivery: Delivery,
    /// The webhooks announcing the decision.
    pub webhooks: Vec<NewWebhook>,
}

/// Where a recorded decision's answer goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// To the fleet: `answer` (the encoded `StepResult`) is written to the outbox, leased to
    /// the caller until `lease_until` (unix ms).
    Outbox {
        /// The encoded `StepResult`.
        answer: Vec<u8>,
        /// Until when the caller holds the answer's outbox lease (unix ms).
        lease_until: i64,
    },
    /// Nowhere: the task is a canary, and its verdict is kept with it, counted for
    /// `answerer`; `None` for a deadline's verdict, and for approvals completing a count
    /// (each approval is kept, and counted, on its own).
    Canary {
        /// Whom the verdict counts for.
        answerer: Option<Answerer>,
    },
}

impl Recording {
    /// The outbox entry the recorded decision leaves leased to the caller: none for a canary.
    fn entry(&self, task: &Task) -> Option<OutboxEntry> {
        match &self.delivery {
            Delivery::Outbox { answer, .. } => Some(OutboxEntry {
                task_id: task.id.clone(),
                correlation: task.correlation.clone(),
                body: answer.clone(),
                labels: None,
            }),
            Delivery::Canary { .. } => None,
        }
    }
}

/// A handle on the store; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    db: Db,
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
    let state = state_from_row(row, &id)?;
    let step: i64 = row.try_get("step")?;
    let deadline: i64 = row.try_get("deadline_at")?;
    let canary: i64 = row.try_get("canary")?;
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
        claim: None,
        canary: canary != 0,
    })
}

/// Reads the state of task `id` from a row holding its `state`, `decision`, `explanation`,
/// `decided_by`, `decided_at` and `reason`, on either database.
fn state_from_row<'r, R>(row: &'r R, id: &str) -> Result<State, StoreError>
where
    R: Row,
    &'r str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let corrupt = |what: String| StoreError::Corrupt { id: id.to_owned(), what };
    let state: String = row.try_get("state")?;
    let at: Option<i64> = row.try_get("decided_at")?;
    Ok(match state.as_str() {
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
mod canaries;
mod claims;
mod groups;
mod open;
mod outbox;
mod sessions;
mod slack;
mod standing;
mod tasks;
mod triage;
mod webhooks;

#[cfg(test)]
mod tests;

pub use approvals::Approved;
pub use canaries::{Answerer, CanaryMark, PlantedCanary};
pub use claims::{Claiming, Releasing};
pub use groups::GroupCount;
pub use outbox::OutboxEntry;
pub use sessions::StoredSession;
pub use slack::{RowState, SlackPost};
pub use standing::NewStanding;
pub use tasks::{Decided, Inserted, PendingId, Stored, Withdrawal};
pub use webhooks::{NewWebhook, OwedWebhook};
