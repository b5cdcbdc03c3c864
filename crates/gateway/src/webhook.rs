//! Decisions posted to a caller's `callback_url`, signed by the Standard Webhooks convention
//! as [`airlock_webhook`] signs and retries them; the `webhook-id` is the decision's id in
//! the gateway, and the body is the same on every attempt.
//!
//! With a [`log::DeliveryLog`], each delivery is on disk before its first attempt and a
//! gateway started on the same log resumes those left over; without one, a stopped gateway
//! drops the retries it still owed.

pub mod log;

use std::sync::Arc;
use std::time::SystemTime;

use airlock_telemetry::metrics::Metrics;
use airlock_webhook::Outcome;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use self::log::{Delivery, DeliveryLog, LogError};
use crate::callback;

pub use airlock_webhook::{
    ClientError, Event, HEADER_ID, HEADER_SIGNATURE, HEADER_TIMESTAMP, RetryPolicy, SECRET_PREFIX, SecretError,
    WebhookSecret, http_client, http_client_resolving, rfc3339_now,
};

/// The event type of a decision.
pub const DECISION_READY: &str = "decision.ready";

/// Sends webhooks.
#[derive(Debug, Clone)]
pub struct Webhooks {
    secret: Arc<WebhookSecret>,
    retry: RetryPolicy,
    http: reqwest::Client,
    log: Option<DeliveryLog>,
    metrics: Arc<Metrics>,
    /// Whether callbacks may go to private addresses (`--allow-private-callbacks`).
    allow_private: bool,
}

impl Webhooks {
    /// A sender signing with `secret`, counting in `metrics`, to public addresses only
    /// unless `allow_private` ([`callback`]); deliveries live in memory until
    /// [`Webhooks::with_log`].
    pub fn new(
        secret: WebhookSecret,
        retry: RetryPolicy,
        metrics: Arc<Metrics>,
        allow_private: bool,
    ) -> Result<Self, ClientError> {
        let http = match allow_private {
            true => http_client()?,
            false => http_client_resolving(Arc::new(callback::PublicOnly))?,
        };
        Ok(Webhooks { secret: Arc::new(secret), retry, http, log: None, metrics, allow_private })
    }

    /// Checks that `url` may be called back (every address its host resolves to), unless
    /// private callbacks are allowed.
    pub async fn check(&self, url: &reqwest::Url) -> Result<(), callback::Refused> {
        if self.allow_private { Ok(()) } else { callback::check(url).await }
    }

    /// Keeps each delivery in `log` until it is over.
    pub fn with_log(self, log: DeliveryLog) -> Self {
        Webhooks { log: Some(log), ..self }
    }

    /// Closes the delivery log, if any (once no delivery runs).
    pub async fn close(&self) {
        if let Some(log) = &self.log {
            log.close().await;
        }
    }

    /// Whether deliveries are kept in a log.
    pub fn logged(&self) -> bool {
        self.log.is_some()
    }

    /// Sends `body` (an [`Event`]'s JSON) to `url` as event `id`: writes it to the log, then
    /// [`deliver`](Self::deliver)s it.
    pub async fn send(&self, url: &reqwest::Url, id: &str, body: Vec<u8>, stop: &CancellationToken) {
        let delivery = Delivery::new(id, url.as_str(), body, SystemTime::now());
        if let Some(log) = &self.log
            && let Err(e) = log.add(&delivery).await
        {
            warn!(webhook_id = %id, error = %e, "The webhook is not in the log; a restart would lose it.");
        }
        self.metrics.webhook_backlog.inc();
        self.deliver(delivery, stop).await;
    }

    /// The deliveries an earlier run left in the log, the soonest due first (none without a
    /// log); each is counted in the backlog until [`deliver`](Self::deliver)ed.
    pub async fn resume(&self) -> Result<Vec<Delivery>, LogError> {
        let Some(log) = &self.log else { return Ok(Vec::new()) };
        let left = log.pending().await?;
        self.metrics.webhook_backlog.inc_by(left.len() as i64);
        Ok(left)
    }

    /// Tries `delivery` when due until the receiver takes it, the retry period ends, or it
    /// answers `410 Gone`. With a log, `stop` ends the wait for the next attempt and leaves
    /// the delivery to the next start; without one, retries go on until the process ends.
    pub async fn deliver(&self, mut delivery: Delivery, stop: &CancellationToken) {
        loop {
            let wait = delivery.next_attempt.duration_since(SystemTime::now()).unwrap_or_default();
            if self.log.is_some() && !wait.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = stop.cancelled() => {
                        let (webhook_id, attempts) = (&delivery.id, delivery.attempts);
                        info!(%webhook_id, attempts, "Webhook left in the log for the next start.");
                        return;
                    }
                }
            } else {
                tokio::time::sleep(wait).await;
            }
            delivery.attempts += 1;
            let outcome = match self.attempt(&delivery).await {
                Outcome::Retried => self.reschedule(&mut delivery).await,
                over => over,
            };
            if outcome == Outcome::Retried {
                self.count(outcome);
                continue;
            }
            if let Some(log) = &self.log
                && let Err(e) = log.remove(&delivery.id).await
            {
                warn!(webhook_id = %delivery.id, error = %e, "The webhook stays in the log; a restart sends it again.");
            }
            self.metrics.webhook_backlog.dec();
            self.count(outcome);
            return;
        }
    }

    /// After a failed attempt: the next one scheduled (and logged), or none past the period.
    async fn reschedule(&self, delivery: &mut Delivery) -> Outcome {
        let attempts = delivery.attempts;
        let Some(next) = self.retry.next_attempt(delivery.first_attempt, attempts, SystemTime::now()) else {
            warn!(webhook_id = %delivery.id, attempts, "Webhook given up: its retry period ended.");
            return Outcome::GivenUp;
        };
        delivery.next_attempt = next;
        if let Some(log) = &self.log
            && let Err(e) = log.attempted(delivery).await
        {
            warn!(webhook_id = %delivery.id, error = %e, "The webhook's next attempt is not in the log.");
        }
        Outcome::Retried
    }

    /// One signed attempt. A literal address is checked here, as the resolver checks names:
    /// a delivery resumed from the log may have been taken by a gateway that allowed it.
    async fn attempt(&self, delivery: &Delivery) -> Outcome {
        let (url, id, body) = (delivery.url.as_str(), &delivery.id, &delivery.body);
        if !self.allow_private {
            let refused = match reqwest::Url::parse(url) {
                Ok(parsed) => callback::check_literal(&parsed).err().map(|e| e.to_string()),
                Err(e) => Some(e.to_string()),
            };
            if let Some(why) = refused {
                warn!(webhook_id = %id, error = %why, "Webhook given up: its URL is refused.");
                return Outcome::GivenUp;
            }
        }
        airlock_webhook::attempt(&self.http, &self.secret, url, id, body, delivery.attempts, self.retry.attempt_timeout)
            .await
    }

    fn count(&self, outcome: Outcome) {
        airlock_webhook::count(&self.metrics, outcome);
    }
}

#[cfg(test)]
mod tests;
