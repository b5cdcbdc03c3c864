//! The store's side of grouped calls ([`crate::groups`]): the groups of two or more pending
//! tasks within the caller's pools, the pending tasks of one group, and the group column of
//! tasks stored before it existed.

use sqlx::QueryBuilder;

use super::{Db, Store, StoreError, TASK_COLUMNS, push_pools, task_from_row};
use crate::groups::group_of;
use crate::task::Task;

/// Tasks whose group is filled per round when the store opens.
const FILL_BATCH: i64 = 500;

/// A group of identical pending calls, as the store counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupCount {
    /// The group ([`group_of`]).
    pub group: String,
    /// Its pending tasks within the pools asked about.
    pub count: u64,
    /// When its oldest pending task arrived (unix ms).
    pub oldest: i64,
}

impl Store {
    /// Up to `limit` groups of two or more pending tasks of `pools`, the largest first (the
    /// oldest first among equals).
    pub async fn groups(&self, pools: &[String], limit: u32) -> Result<Vec<GroupCount>, StoreError> {
        if pools.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<(String, i64, i64)> = on_db!(self, pool => {
            let mut query = QueryBuilder::new(
                "SELECT call_group, COUNT(*), MIN(received_at) FROM tasks \
                 WHERE state = 'pending' AND call_group <> ''",
            );
            push_pools(&mut query, Some(pools));
            query.push(" GROUP BY call_group HAVING COUNT(*) > 1 ORDER BY COUNT(*) DESC, MIN(received_at), call_group");
            query.push(" LIMIT ").push_bind(i64::from(limit));
            query.build_query_as().fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(group, count, oldest)| GroupCount { group, count: count.max(0) as u64, oldest })
            .collect())
    }

    /// The pending tasks of `group` within `pools`, oldest first, at most `limit`.
    pub async fn group_tasks(&self, pools: &[String], group: &str, limit: u32) -> Result<Vec<Task>, StoreError> {
        if pools.is_empty() || group.is_empty() {
            return Ok(Vec::new());
        }
        on_db!(self, pool => {
            let mut query = QueryBuilder::new(format!("SELECT {TASK_COLUMNS} FROM tasks WHERE state = 'pending'"));
            query.push(" AND call_group = ").push_bind(group.to_owned());
            push_pools(&mut query, Some(pools));
            query.push(" ORDER BY received_at, id LIMIT ").push_bind(i64::from(limit));
            query.build().fetch_all(pool).await?.iter().map(task_from_row).collect()
        })
    }

    /// Fills the group of pending tasks stored before the column existed; returns how many.
    pub(super) async fn fill_groups(&self) -> Result<u64, StoreError> {
        const FILL: &str = "UPDATE tasks SET call_group = $2 WHERE id = $1";
        let mut filled = 0;
        loop {
            let tasks: Vec<Task> = on_db!(self, pool => {
                let mut query = QueryBuilder::new(format!(
                    "SELECT {TASK_COLUMNS} FROM tasks WHERE call_group IS NULL AND state = 'pending' LIMIT "
                ));
                query.push_bind(FILL_BATCH);
                query.build().fetch_all(pool).await?.iter().map(task_from_row).collect::<Result<_, _>>()?
            });
            if tasks.is_empty() {
                return Ok(filled);
            }
            on_db!(self, pool => {
                let mut tx = pool.begin().await?;
                for task in &tasks {
                    sqlx::query(FILL).bind(&task.id).bind(group_of(task)).execute(&mut *tx).await?;
                }
                tx.commit().await?;
            });
            filled += tasks.len() as u64;
        }
    }
}

#[cfg(test)]
mod tests;
