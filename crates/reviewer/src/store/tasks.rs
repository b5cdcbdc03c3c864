//! Tasks in the store: stored once per call, listed, decided once, withdrawn by their
//! runner's cancel; and the withdrawn calls remembered for tasks that arrive after it.

use airlock_records::review::standing::StandingDecision;
use airlock_records::time::now_ms;
use prost::Message as _;
use sqlx::QueryBuilder;

use super::standing::{active_query, standing_from_row};
use super::{
    ADD_WEBHOOK, CanaryMark, Db, Delivery, NO_DEADLINE, NewWebhook, OutboxEntry, Recording, Store, StoreError,
    TASK_COLUMNS, push_pools, task_from_row,
};
use crate::groups::group_of;
use crate::standing::applies;
use crate::task::{Incoming, Task};
use crate::triage::Columns;

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

/// What storing an incoming task did ([`Store::insert_as`]), and whether a standing decision
/// covers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// What storing the task did.
    pub inserted: Inserted,
    /// The standing decision that covers the new task, read in the transaction that stored it
    /// (then its webhooks were not written); `None` when none does, or nothing was stored.
    pub covered_by: Option<StandingDecision>,
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

/// What a decision attempt did.
#[derive(Debug, Clone, PartialEq)]
pub enum Decided {
    /// The decision was recorded; its answer is in the outbox, leased to the caller (none for
    /// a canary, whose answer goes nowhere).
    Recorded(Option<OutboxEntry>),
    /// The task was not pending (decided or withdrawn before): nothing changed. Carries the
    /// task as it stands.
    NotPending(Box<Task>),
    /// No such task.
    NotFound,
}

/// A time a pending task has due.
#[derive(Debug, Clone, Copy)]
enum Due {
    /// Its deadline: its step's `on_timeout` answers it.
    Deadline,
    /// Its move to the next pool of its step's route.
    Reroute,
    /// The warning that it expires.
    Warning,
}

/// The first statement of the transactions that settle whether a call's task stands: a task's
/// insert (which looks for a withdrawal) and a cancel (which looks for the tasks). Under
/// PostgreSQL's default isolation each can miss the other's uncommitted row, so a cancel that
/// crosses its task's insert left the task pending, or a foreign cancel uncounted; serializable,
/// one of the two fails (`40001`, transient) and is tried again, seeing the other. SQLite needs
/// nothing: both begin with a write, and it has one writer at a time.
const SERIALIZABLE: &str = "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE";

/// The next statement of a task's insert on PostgreSQL, before it reads anything: a standing
/// decision made while the insert runs waits for it to commit, and then finds the task among
/// the pending ones; one made before is committed when the insert reads the standing
/// decisions, and is seen. Inserts do not wait for one another (`SHARE` conflicts with writes
/// only). SQLite needs nothing: the insert begins with a write, and it has one writer at a
/// time.
const STANDING_HELD: &str = "LOCK TABLE standing IN SHARE MODE";

impl Store {
    /// Stores an incoming task unless the same broker user's call, kind and step is stored
    /// already or the call was withdrawn by the broker user that asked for it. Durable when this returns: the
    /// delivery may then be acknowledged.
    pub async fn insert(&self, incoming: &Incoming, now: i64) -> Result<Inserted, StoreError> {
        let task = incoming.pending(&uuid::Uuid::now_v7().to_string(), now);
        Ok(self.insert_as(incoming, &task, &[]).await?.inserted)
    }

    /// [`Store::insert`] as `task`, the pending task `incoming` makes (its id, received at its
    /// `received_at`), reading in the same transaction the standing decision that covers it:
    /// the newest active one of its pool that [applies](applies) to it then. When none does, the `webhooks` announcing the task are written in that
    /// transaction too; when one does, none are, and the task is that standing decision's to
    /// decide.
    pub async fn insert_as(
        &self,
        incoming: &Incoming,
        task: &Task,
        webhooks: &[NewWebhook],
    ) -> Result<Stored, StoreError> {
        self.store_task(incoming, task, None, webhooks).await
    }

    /// [`Store::insert_as`] for a canary the service planted: `task` (marked
    /// [`Task::canary`]) is stored with its `mark` in the same transaction.
    pub async fn plant(
        &self,
        incoming: &Incoming,
        task: &Task,
        mark: &CanaryMark,
        webhooks: &[NewWebhook],
    ) -> Result<Stored, StoreError> {
        self.store_task(incoming, task, Some(mark), webhooks).await
    }

    async fn store_task(
        &self,
        incoming: &Incoming,
        task: &Task,
        canary: Option<&CanaryMark>,
        webhooks: &[NewWebhook],
    ) -> Result<Stored, StoreError> {
        const SQL: &str = "INSERT INTO tasks (id, dedup_key, correlation, pool, step, body, received_at, \
                           deadline_at, state, function, run_id, sample_id, search, requested_by, canary, \
                           reroute_at, warn_at, call_group) \
                           SELECT $1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10, $11, $12, $13, $14, $15, $16, $17 \
                           WHERE NOT EXISTS (SELECT 1 FROM withdrawn WHERE correlation = $3 AND cancelled_by = $13) \
                           ON CONFLICT (dedup_key) DO NOTHING";
        const PLANT: &str = "INSERT INTO canaries (task_id, name, why, expected, planted_at) \
                             VALUES ($1, $2, $3, $4, $5)";
        let body = incoming.human.encode_to_vec();
        let columns = Columns::of(&incoming.human);
        let (id, now) = (task.id.as_str(), task.received_at);
        // A canary is one of its own, whatever its key: it never takes the place of a real
        // task whose call gets the same key later (no real key starts with `canary/` and a
        // UUID, which holds no `/`).
        let dedup_key = match canary {
            Some(_) => format!("canary/{id}"),
            None => incoming.dedup_key(),
        };
        let (affected, covered_by) = on_db!(self, pool => {
            let mut tx = pool.begin().await?;
            if matches!(self.db, Db::Postgres(_)) {
                sqlx::query(SERIALIZABLE).execute(&mut *tx).await?;
                sqlx::query(STANDING_HELD).execute(&mut *tx).await?;
            }
            let affected = sqlx::query(SQL)
                .bind(id)
                .bind(dedup_key)
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
                .bind(i64::from(canary.is_some()))
                // A canary stays where it was planted, as a real task nobody moves would.
                .bind(if canary.is_some() { 0 } else { incoming.human.reroute_at_unix_ms.max(0) })
                .bind(incoming.human.warn_at_unix_ms.max(0))
                .bind(group_of(task))
                .execute(&mut *tx)
                .await?
                .rows_affected();
            let mut covered_by = None;
            if affected == 1 {
                if let Some(mark) = canary {
                    sqlx::query(PLANT)
                        .bind(id)
                        .bind(&mark.name)
                        .bind(&mark.explanation)
                        .bind(mark.expected_text())
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                }
                let active = active_query(std::slice::from_ref(&task.pool), now).build().fetch_all(&mut *tx).await?;
                let active = active.iter().map(standing_from_row).collect::<Result<Vec<_>, _>>()?;
                covered_by = active.into_iter().find(|standing| applies(standing, task, now));
                if covered_by.is_none() {
                    add_webhooks!(tx, webhooks, now);
                }
            }
            tx.commit().await?;
            (affected, covered_by)
        });
        if affected == 1 {
            return Ok(Stored { inserted: Inserted::Created(id.to_owned()), covered_by });
        }
        let withdrawn: Option<(i64,)> = on_db!(self, pool =>
            sqlx::query_as("SELECT withdrawn_at FROM withdrawn WHERE correlation = $1 AND cancelled_by = $2")
                .bind(&incoming.correlation)
                .bind(incoming.requested_by())
                .fetch_optional(pool)
                .await?);
        let inserted = if withdrawn.is_some() { Inserted::Withdrawn } else { Inserted::Duplicate };
        Ok(Stored { inserted, covered_by: None })
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
        self.load_claims(std::slice::from_mut(&mut task), now_ms()).await?;
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
            self.load_claims(&mut tasks, now_ms()).await?;
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

    /// Records `recording`'s verdict on `task` if it is still pending, with its answer in the
    /// outbox leased to the caller (a canary's: counted for whom it names, sent nowhere) and
    /// the webhooks announcing it. The first decision wins; any later one changes nothing and
    /// gets [`Decided::NotPending`].
    pub async fn decide(&self, task: &Task, recording: &Recording) -> Result<Decided, StoreError> {
        let recorded = on_db!(self, pool => {
            let mut tx = pool.begin().await?;
            if record_decision!(tx, task, recording) {
                tx.commit().await?;
                true
            } else {
                tx.rollback().await?;
                false
            }
        });
        if recorded {
            return Ok(Decided::Recorded(recording.entry(task)));
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

    /// The earliest time something is due for a pending task: its deadline, its move to the
    /// next pool, or its warning.
    pub async fn next_deadline(&self) -> Result<Option<i64>, StoreError> {
        const SQL: &str = "SELECT MIN(due) FROM (\
                           SELECT deadline_at AS due FROM tasks WHERE state = 'pending' AND deadline_at > 0 \
                           UNION ALL SELECT reroute_at FROM tasks WHERE state = 'pending' AND reroute_at > 0 \
                           UNION ALL SELECT warn_at FROM tasks WHERE state = 'pending' AND warn_at > 0) AS times";
        let (min,): (Option<i64>,) = on_db!(self, pool => sqlx::query_as(SQL).fetch_one(pool).await?);
        Ok(min)
    }

    /// The pending tasks whose deadline is at or before `now`.
    pub async fn expired(&self, now: i64) -> Result<Vec<Task>, StoreError> {
        self.due(Due::Deadline, now).await
    }

    /// The pending tasks due to move to their next pool at or before `now`.
    pub async fn rerouting(&self, now: i64) -> Result<Vec<Task>, StoreError> {
        self.due(Due::Reroute, now).await
    }

    /// The pending tasks whose pool is to be warned, at or before `now`, that they expire.
    pub async fn expiring(&self, now: i64) -> Result<Vec<Task>, StoreError> {
        self.due(Due::Warning, now).await
    }

    /// Writes `webhooks`, the warning that pending `task` expires, at `now`, unless it was
    /// written before or the task left the pending list: whether they were written.
    pub async fn warn(&self, task: &Task, webhooks: &[NewWebhook], now: i64) -> Result<bool, StoreError> {
        const SQL: &str = "UPDATE tasks SET warn_at = 0 WHERE id = $1 AND state = 'pending' AND warn_at > 0";
        Ok(on_db!(self, pool => {
            let mut tx = pool.begin().await?;
            let warned = sqlx::query(SQL).bind(&task.id).execute(&mut *tx).await?.rows_affected() == 1;
            if warned {
                add_webhooks!(tx, webhooks, now);
            }
            tx.commit().await?;
            warned
        }))
    }

    /// The pending tasks whose time `due` is at or before `now`, earliest first.
    async fn due(&self, due: Due, now: i64) -> Result<Vec<Task>, StoreError> {
        let column = match due {
            Due::Deadline => "deadline_at",
            Due::Reroute => "reroute_at",
            Due::Warning => "warn_at",
        };
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE state = 'pending' AND {column} > 0 AND {column} <= $1 \
             ORDER BY {column}"
        );
        let mut tasks = on_db!(self, pool => {
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(now).fetch_all(pool).await?;
            rows.iter().map(task_from_row).collect::<Result<Vec<_>, _>>()?
        });
        self.load_approvals(&mut tasks).await?;
        Ok(tasks)
    }
}
