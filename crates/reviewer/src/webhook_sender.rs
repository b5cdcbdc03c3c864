//! The sender of the webhooks the store owes: it leases those due, one attempt per lease, as
//! the outbox leases answers, so processes sharing a store send each event once, with the
//! same `webhook-id` on every attempt. What is sent, and to whom, is [`crate::webhooks`]' (and
//! [`crate::slack::api`]'s for the rows owed to Slack).

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use airlock_records::time::now_ms;
use airlock_webhook::Outcome;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::desk::Desk;
use crate::slack;
use crate::store::OwedWebhook;

/// How often due webhooks are looked for, when nothing here wrote one.
const POLL: Duration = Duration::from_secs(1);
/// Webhooks leased per look.
const BATCH: u32 = 64;
/// How long over webhooks are kept (for looking into a delivery), before they are forgotten.
const KEEP_DONE: Duration = Duration::from_secs(7 * 24 * 3600);
/// How much longer than one attempt may take a lease lasts.
const LEASE_MARGIN: Duration = Duration::from_secs(30);

/// Sends the webhooks the `desk` wrote (or another process of its store did) as they fall
/// due, until `stop`; attempts under way then finish.
pub async fn run(desk: Arc<Desk>, stop: CancellationToken) {
    if desk.webhooks().is_empty() {
        return;
    }
    let http = match airlock_webhook::http_client() {
        Ok(http) => http,
        Err(e) => {
            warn!(error = %e, "No webhooks are sent.");
            return;
        }
    };
    let lease = desk.webhooks().retry.attempt_timeout + LEASE_MARGIN;
    let tracker = TaskTracker::new();
    loop {
        let now = now_ms();
        match desk.store().claim_webhooks(now, now + lease.as_millis() as i64, BATCH).await {
            Ok(due) => {
                for webhook in due {
                    tracker.spawn(attempt(desk.clone(), http.clone(), webhook));
                }
            }
            Err(e) => warn!(error = %e, "Looking for webhooks due failed."),
        }
        count_backlog(&desk).await;
        let _ = desk.store().prune_webhooks(now - KEEP_DONE.as_millis() as i64).await;
        tokio::select! {
            () = stop.cancelled() => break,
            () = desk.webhooks_due().notified() => {}
            () = tokio::time::sleep(POLL) => {}
        }
    }
    tracker.close();
    tracker.wait().await;
}

/// One attempt of a leased webhook, and what comes after it: done, or the next attempt.
async fn attempt(desk: Arc<Desk>, http: reqwest::Client, webhook: OwedWebhook) {
    let attempts = webhook.attempts.saturating_add(1);
    let retry = desk.webhooks().retry;
    let outcome = match desk.webhooks().endpoint(&webhook.endpoint) {
        _ if slack::api::owes(&webhook.endpoint) => slack::api::deliver(&desk, &webhook, retry.attempt_timeout).await,
        Some(endpoint) => {
            let (url, id, body) = (endpoint.url.as_str(), &webhook.id, &webhook.body);
            airlock_webhook::attempt(&http, &endpoint.secret, url, id, body, attempts, retry.attempt_timeout).await
        }
        None => {
            warn!(webhook_id = %webhook.id, endpoint = %webhook.endpoint, "Webhook given up: its endpoint is no longer configured.");
            Outcome::GivenUp
        }
    };
    let outcome = match outcome {
        Outcome::Retried => {
            let first = UNIX_EPOCH + Duration::from_millis(webhook.created_at.max(0) as u64);
            match retry.next_attempt(first, attempts, std::time::SystemTime::now()) {
                Some(next) => {
                    let next = next.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as i64;
                    if let Err(e) = desk.store().webhook_retry(&webhook.id, attempts, next).await {
                        warn!(webhook_id = %webhook.id, error = %e, "The webhook's next attempt is not stored; its lease ends first.");
                    }
                    airlock_webhook::count(&desk.metrics, Outcome::Retried);
                    return;
                }
                None => {
                    warn!(webhook_id = %webhook.id, attempts, "Webhook given up: its retry period ended.");
                    Outcome::GivenUp
                }
            }
        }
        over => over,
    };
    if let Err(e) = desk.store().webhook_done(&webhook.id, attempts, outcome.label(), now_ms()).await {
        warn!(webhook_id = %webhook.id, error = %e, "The webhook is not marked over; it may be sent again.");
    }
    info!(webhook_id = %webhook.id, outcome = outcome.label(), attempts, "Webhook over.");
    airlock_webhook::count(&desk.metrics, outcome);
    count_backlog(&desk).await;
}

/// Sets `airlock_webhook_backlog` to the webhooks the store still owes (whichever process of a
/// shared store sends them).
async fn count_backlog(desk: &Desk) {
    if let Ok(owed) = desk.store().webhooks_owed().await {
        desk.metrics.webhook_backlog.set(owed as i64);
    }
}
