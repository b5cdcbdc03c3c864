//! Slack in the store: the message posted for each task, and the interaction payloads used.

use super::{Db, Store, StoreError};

/// Where a task's Slack message is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackPost {
    /// The channel's id, as `chat.postMessage` answered it.
    pub channel: String,
    /// The message's timestamp, its id within the channel.
    pub ts: String,
}

/// Whether a webhook row is still owed, over, or was never written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowState {
    /// Not delivered nor given up yet.
    Owed,
    /// Delivered, gone or given up.
    Over,
    /// No such row (never written, or pruned).
    Missing,
}

impl Store {
    /// Keeps where `task_id`'s message was posted, at `now` (the first post kept wins).
    pub async fn slack_posted(&self, task_id: &str, message: &SlackPost, now: i64) -> Result<(), StoreError> {
        const SQL: &str = "INSERT INTO slack_messages (task_id, channel, ts, posted_at) VALUES ($1, $2, $3, $4) \
                           ON CONFLICT (task_id) DO NOTHING";
        on_db!(self, pool => sqlx::query(SQL)
            .bind(task_id)
            .bind(&message.channel)
            .bind(&message.ts)
            .bind(now)
            .execute(pool)
            .await
            .map(drop)?);
        Ok(())
    }

    /// Where `task_id`'s message was posted, once it was.
    pub async fn slack_message(&self, task_id: &str) -> Result<Option<SlackPost>, StoreError> {
        const SQL: &str = "SELECT channel, ts FROM slack_messages WHERE task_id = $1";
        let row: Option<(String, String)> =
            on_db!(self, pool => sqlx::query_as(SQL).bind(task_id).fetch_optional(pool).await?);
        Ok(row.map(|(channel, ts)| SlackPost { channel, ts }))
    }

    /// Whether the webhook `id` is owed, over or missing.
    pub async fn webhook_state(&self, id: &str) -> Result<RowState, StoreError> {
        const SQL: &str = "SELECT done_at FROM webhooks WHERE id = $1";
        let row: Option<(Option<i64>,)> =
            on_db!(self, pool => sqlx::query_as(SQL).bind(id).fetch_optional(pool).await?);
        Ok(match row {
            Some((None,)) => RowState::Owed,
            Some((Some(_),)) => RowState::Over,
            None => RowState::Missing,
        })
    }

    /// Marks the interaction payload `id` used at `now`: `true` the first time, `false` for a
    /// payload used before (a replay), whichever process of the store saw it. Payloads used
    /// before `forget_before` are forgotten (they are refused as stale anyway).
    pub async fn use_slack_payload(&self, id: &str, now: i64, forget_before: i64) -> Result<bool, StoreError> {
        const SQL: &str = "INSERT INTO slack_payloads (id, used_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING";
        let fresh = on_db!(self, pool => sqlx::query(SQL).bind(id).bind(now).execute(pool).await?.rows_affected());
        on_db!(self, pool => sqlx::query("DELETE FROM slack_payloads WHERE used_at < $1")
            .bind(forget_before)
            .execute(pool)
            .await
            .map(drop)?);
        Ok(fresh == 1)
    }
}
