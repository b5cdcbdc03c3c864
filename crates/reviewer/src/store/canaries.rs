//! Canaries in the store: each a task marked `canary` with a row of its own (why it is bad,
//! what counts as caught, whom its verdict counts for), planted with the task's insert
//! ([`Store::plant`]) and read back with its verdict and approvals for the catch rates.

use std::str::FromStr;

use airlock_policy::Decision;
use airlock_records::review::ApprovalView;
use sqlx::{ColumnIndex, Decode, QueryBuilder, Row, Type};

use super::{Db, Store, StoreError, TASK_COLUMNS, push_pools, state_from_row, task_from_row};
use crate::task::{State, Task};

/// What the store keeps of a canary beside its task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanaryMark {
    /// Its name in the canaries file.
    pub name: String,
    /// Why the call is bad.
    pub explanation: String,
    /// The decisions that count as caught.
    pub expected: Vec<Decision>,
}

impl CanaryMark {
    /// `expected` as stored: the decisions' names, comma-separated.
    pub(super) fn expected_text(&self) -> String {
        self.expected.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(",")
    }

    /// Whether `decision` catches the canary.
    pub fn caught_by(&self, decision: Decision) -> bool {
        self.expected.contains(&decision)
    }
}

/// Whom a canary's verdict counts for: the reviewer who decided it, or the author of the
/// standing decision that did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answerer {
    /// The reviewer's name.
    pub reviewer: String,
    /// The standing decision that answered for them, if one did.
    pub standing: Option<i64>,
}

/// A planted canary as it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct PlantedCanary {
    /// Its task's id.
    pub task_id: String,
    /// The pool it was planted in.
    pub pool: String,
    /// What it is.
    pub mark: CanaryMark,
    /// When it was planted (unix ms).
    pub planted_at: i64,
    /// Its task's state: pending, or decided (by whom, what, when).
    pub state: State,
    /// Whom the verdict counts for (none while pending, for a deadline's verdict, and when
    /// approvals completing a count decided it).
    pub answerer: Option<Answerer>,
    /// The approvals given, when its step needs several: each a reviewer's answer.
    pub approvals: Vec<ApprovalView>,
}

/// The columns a [`PlantedCanary`] is read from (by name, in [`planted_from_row`]): its
/// task's and its own, which share no name.
const CANARY_COLUMNS: &str = "tasks.id, tasks.pool, state, decision, explanation, decided_by, decided_at, reason, \
                              name, why, expected, planted_at, answered_by, standing_id";

impl Store {
    /// The canaries planted in `pools`, newest first, at most `limit`, each with its task's
    /// state and its approvals.
    pub async fn canaries(&self, pools: &[String], limit: u32) -> Result<Vec<PlantedCanary>, StoreError> {
        if pools.is_empty() {
            return Ok(Vec::new());
        }
        let mut canaries = on_db!(self, pool => {
            let mut query = QueryBuilder::new(format!(
                "SELECT {CANARY_COLUMNS} FROM canaries JOIN tasks ON tasks.id = canaries.task_id WHERE 1 = 1"
            ));
            push_pools(&mut query, Some(pools));
            query.push(" ORDER BY planted_at DESC, tasks.id DESC LIMIT ").push_bind(i64::from(limit));
            query.build().fetch_all(pool).await?.iter().map(planted_from_row).collect::<Result<Vec<_>, _>>()?
        });
        self.canary_approvals(&mut canaries).await?;
        Ok(canaries)
    }

    /// Fills in the approvals given on `canaries` (one query for all).
    async fn canary_approvals(&self, canaries: &mut [PlantedCanary]) -> Result<(), StoreError> {
        let ids: Vec<String> = canaries.iter().map(|c| c.task_id.clone()).collect();
        for (task_id, approval) in self.approvals_of(&ids).await? {
            if let Some(canary) = canaries.iter_mut().find(|c| c.task_id == task_id) {
                canary.approvals.push(approval);
            }
        }
        Ok(())
    }

    /// The newest pending real tasks (no canary) of `pool`, at most `limit`: what a canary is
    /// modelled on.
    pub async fn templates(&self, pool: &str, limit: u32) -> Result<Vec<Task>, StoreError> {
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE state = 'pending' AND pool = $1 AND canary = 0 \
             ORDER BY received_at DESC, id DESC LIMIT $2"
        );
        on_db!(self, pool_ => {
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(pool).bind(i64::from(limit)).fetch_all(pool_).await?;
            rows.iter().map(task_from_row).collect::<Result<Vec<_>, _>>()
        })
    }
}

/// Reads a canary from a row of [`CANARY_COLUMNS`], on either database.
fn planted_from_row<'r, R>(row: &'r R) -> Result<PlantedCanary, StoreError>
where
    R: Row,
    &'r str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let task_id: String = row.try_get("id")?;
    let expected: String = row.try_get("expected")?;
    let expected =
        expected.split(',').filter(|d| !d.is_empty()).map(Decision::from_str).collect::<Result<Vec<_>, _>>().map_err(
            |e| StoreError::Corrupt { id: task_id.clone(), what: format!("canary's expected decisions: {e}") },
        )?;
    let answered_by: Option<String> = row.try_get("answered_by")?;
    let standing: Option<i64> = row.try_get("standing_id")?;
    Ok(PlantedCanary {
        state: state_from_row(row, &task_id)?,
        answerer: answered_by.map(|reviewer| Answerer { reviewer, standing }),
        pool: row.try_get("pool")?,
        mark: CanaryMark { name: row.try_get("name")?, explanation: row.try_get("why")?, expected },
        planted_at: row.try_get("planted_at")?,
        approvals: Vec::new(),
        task_id,
    })
}
