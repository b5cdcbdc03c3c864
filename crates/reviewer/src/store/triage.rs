//! The store's side of triage: a page of the pending list under a [`Filter`], its counts,
//! and the filter columns of tasks stored before they existed.
//!
//! Every value a caller gives is a bound parameter; the SQL text is made of constants only.

use airlock_contract::v1;
use prost::Message as _;
use sqlx::QueryBuilder;

use super::{Db, Store, StoreError, TASK_COLUMNS, push_pools, task_from_row};
use crate::triage::{Columns, Cursor, Filter, Page, PoolCount, Sort, contains_pattern};

/// Tasks back-filled per round when the store opens.
const FILL_BATCH: i64 = 500;

/// The SQL a sort orders by: the key expression (the same value as [`Sort::key`]) and the
/// direction.
fn order(sort: Sort) -> (&'static str, &'static str) {
    match sort {
        Sort::Oldest => ("received_at", "ASC"),
        Sort::Newest => ("received_at", "DESC"),
        Sort::Deadline => ("(CASE WHEN deadline_at > 0 THEN deadline_at ELSE 9223372036854775807 END)", "ASC"),
    }
}

/// Appends the pending condition, the caller's `pools` and `filter` at `now` (unix ms).
fn push_filter<DB: sqlx::Database>(query: &mut QueryBuilder<DB>, pools: &[String], filter: &Filter, now: i64)
where
    for<'a> String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    query.push(" WHERE state = 'pending'");
    push_pools(query, Some(pools));
    for (column, value) in
        [("pool", &filter.pool), ("function", &filter.tool), ("run_id", &filter.run), ("sample_id", &filter.sample)]
    {
        if let Some(value) = value {
            query.push(format!(" AND {column} = ")).push_bind(value.clone());
        }
    }
    if let Some(minutes) = filter.older_than_minutes {
        query.push(" AND received_at <= ").push_bind(now - i64::from(minutes) * 60_000);
    }
    if let Some(text) = &filter.search {
        query.push(" AND search LIKE ").push_bind(contains_pattern(text)).push(" ESCAPE '\\'");
    }
}

impl Store {
    /// Up to `limit` (all when `None`) pending tasks of `pools` that `filter` matches at `now`,
    /// in its order, after `cursor`; with how many match in all and the pending count of
    /// each of `pools`.
    pub async fn page(
        &self,
        pools: &[String],
        filter: &Filter,
        limit: Option<u32>,
        cursor: Option<&Cursor>,
        now: i64,
    ) -> Result<Page, StoreError> {
        let counts = self.pending_counts(pools).await?;
        if pools.is_empty() {
            return Ok(Page { tasks: Vec::new(), next: None, matching: 0, counts });
        }
        let (key, direction) = order(filter.sort);
        let after = if direction == "ASC" { ">" } else { "<" };
        let (mut tasks, matching) = on_db!(self, pool => {
            let mut query = QueryBuilder::new(format!("SELECT {TASK_COLUMNS} FROM tasks"));
            push_filter(&mut query, pools, filter, now);
            if let Some(cursor) = cursor {
                query.push(format!(" AND ({key} {after} ")).push_bind(cursor.key);
                query.push(format!(" OR ({key} = ")).push_bind(cursor.key);
                query.push(format!(" AND id {after} ")).push_bind(cursor.id.clone()).push("))");
            }
            query.push(format!(" ORDER BY {key} {direction}, id {direction}"));
            if let Some(limit) = limit {
                // One more than asked says whether there is a next page.
                query.push(" LIMIT ").push_bind(i64::from(limit) + 1);
            }
            let tasks = query.build().fetch_all(pool).await?.iter().map(task_from_row).collect::<Result<Vec<_>, _>>()?;
            let mut count = QueryBuilder::new("SELECT COUNT(*) FROM tasks");
            push_filter(&mut count, pools, filter, now);
            let (matching,): (i64,) = count.build_query_as().fetch_one(pool).await?;
            (tasks, matching)
        });
        let next = match limit {
            Some(limit) if tasks.len() > limit as usize => {
                tasks.truncate(limit as usize);
                tasks.last().map(|task| Cursor::after(task, filter.sort))
            }
            _ => None,
        };
        self.load_approvals(&mut tasks).await?;
        self.load_claims(&mut tasks, now).await?;
        Ok(Page { tasks, next, matching: matching.max(0) as u64, counts })
    }

    /// The pending tasks of each of `pools`, in their order (a pool with none as `0`).
    pub async fn pending_counts(&self, pools: &[String]) -> Result<Vec<PoolCount>, StoreError> {
        if pools.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<(String, i64)> = on_db!(self, pool => {
            let mut query = QueryBuilder::new("SELECT pool, COUNT(*) FROM tasks WHERE state = 'pending'");
            push_pools(&mut query, Some(pools));
            query.push(" GROUP BY pool");
            query.build_query_as().fetch_all(pool).await?
        });
        Ok(pools
            .iter()
            .map(|name| PoolCount {
                pool: name.clone(),
                pending: rows.iter().find(|(pool, _)| pool == name).map_or(0, |(_, n)| (*n).max(0) as u64),
            })
            .collect())
    }

    /// Fills the filter columns of tasks stored before they existed (their body is protobuf,
    /// which SQL cannot read); returns how many. A body that cannot be read gets empty ones.
    pub(super) async fn fill_triage_columns(&self) -> Result<u64, StoreError> {
        const UNFILLED: &str = "SELECT id, body FROM tasks WHERE function IS NULL LIMIT $1";
        const FILL: &str = "UPDATE tasks SET function = $2, run_id = $3, sample_id = $4, search = $5 WHERE id = $1";
        let mut filled = 0;
        loop {
            let rows: Vec<(String, Vec<u8>)> =
                on_db!(self, pool => sqlx::query_as(UNFILLED).bind(FILL_BATCH).fetch_all(pool).await?);
            if rows.is_empty() {
                return Ok(filled);
            }
            on_db!(self, pool => {
                let mut tx = pool.begin().await?;
                for (id, body) in &rows {
                    let columns = v1::HumanTask::decode(body.as_slice()).map(|h| Columns::of(&h)).unwrap_or_default();
                    sqlx::query(FILL)
                        .bind(id)
                        .bind(columns.function)
                        .bind(columns.run_id)
                        .bind(columns.sample_id)
                        .bind(columns.search)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
            });
            filled += rows.len() as u64;
        }
    }
}

#[cfg(test)]
mod tests;
