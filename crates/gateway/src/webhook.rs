//! Decisions posted to a caller's `callback_url`, signed by the Standard Webhooks convention
//! (<https://www.standardwebhooks.com>).
//!
//! Each event carries `webhook-id` (the decision's id in the gateway: the same on every
//! retry, so a receiver drops duplicates by it), `webhook-timestamp` (unix seconds of the
//! attempt) and `webhook-signature: v1,<base64 HMAC-SHA256 over "{id}.{timestamp}.{body}">`
//! keyed by the base64-decoded part of the gateway's `whsec_…` secret. An attempt that does
//! not answer 2xx is retried with exponential backoff and jitter until the retry period ends
//! (`410 Gone` stops at once); the body is the same on every attempt.
//!
//! With a [`log::DeliveryLog`], each delivery is on disk before its first attempt and a
//! gateway started on the same log resumes those left over; without one, a stopped gateway
//! drops the retries it still owed.

pub mod log;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use airlock_telemetry::metrics::{Metrics, OutcomeLabels};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use self::log::{Delivery, DeliveryLog, LogError};

/// The prefix of a webhook secret's text.
pub const SECRET_PREFIX: &str = "whsec_";
/// The event type of a decision.
pub const DECISION_READY: &str = "decision.ready";
/// The header naming the event (the same on every retry).
pub const HEADER_ID: &str = "webhook-id";
/// The header with the attempt's unix time, in seconds.
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
/// The header with the signature.
pub const HEADER_SIGNATURE: &str = "webhook-signature";

/// The shortest and longest keys Standard Webhooks allows, in bytes.
const KEY_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// The key webhooks are signed with.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret {
    key: Vec<u8>,
}

/// Why a webhook secret is not usable.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// No `whsec_` prefix.
    #[error("a webhook secret starts with {SECRET_PREFIX}")]
    Prefix,
    /// The rest is not base64.
    #[error("a webhook secret is whsec_ and base64: {0}")]
    Base64(base64::DecodeError),
    /// The key is too short or too long.
    #[error("a webhook secret's key is 24 to 64 bytes, this one {0}")]
    Length(usize),
}

impl WebhookSecret {
    /// A new random secret (32 bytes from the OS).
    pub fn generate() -> Self {
        let mut key = vec![0u8; 32];
        getrandom::fill(&mut key).expect("the OS random source works");
        WebhookSecret { key }
    }

    /// `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.key);
        let mut context = ring::hmac::Context::with_key(&key);
        context.update(id.as_bytes());
        context.update(b".");
        context.update(timestamp.to_string().as_bytes());
        context.update(b".");
        context.update(body);
        format!("v1,{}", STANDARD.encode(context.sign().as_ref()))
    }
}

impl FromStr for WebhookSecret {
    type Err = SecretError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let encoded = text.trim().strip_prefix(SECRET_PREFIX).ok_or(SecretError::Prefix)?;
        let key = STANDARD.decode(encoded).map_err(SecretError::Base64)?;
        if !KEY_BYTES.contains(&key.len()) {
            return Err(SecretError::Length(key.len()));
        }
        Ok(WebhookSecret { key })
    }
}

/// The secret's text, `whsec_<base64>`: for printing a new one, never for logs.
impl fmt::Display for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SECRET_PREFIX}{}", STANDARD.encode(&self.key))
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(..)")
    }
}

/// How long and how often a webhook is tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The wait after the first failed attempt; each further wait doubles it.
    pub first_delay: Duration,
    /// The longest wait between two attempts.
    pub max_delay: Duration,
    /// No attempt starts later than this after the first.
    pub period: Duration,
    /// How long one attempt may take.
    pub attempt_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            first_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(300),
            period: Duration::from_secs(3600),
            attempt_timeout: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt number `attempt` (from 1): `first_delay · 2^(attempt-1)`,
    /// capped, then a random point of its upper half, so receivers that failed together are
    /// not all retried at once.
    pub fn delay(&self, attempt: u32) -> Duration {
        let doubled = self.first_delay.saturating_mul(1u32.checked_shl(attempt.saturating_sub(1)).unwrap_or(u32::MAX));
        let capped = doubled.min(self.max_delay);
        let mut random = [0u8; 4];
        getrandom::fill(&mut random).expect("the OS random source works");
        let fraction = f64::from(u32::from_le_bytes(random)) / f64::from(u32::MAX);
        capped.mul_f64(0.5 + 0.5 * fraction)
    }

    /// When a delivery first tried at `first` is tried again after failed attempt number
    /// `attempts`, failed at `now`; `None` once that would be past the retry period.
    pub fn next_attempt(&self, first: SystemTime, attempts: u32, now: SystemTime) -> Option<SystemTime> {
        let next = now + self.delay(attempts);
        (next <= first + self.period).then_some(next)
    }
}

/// An event's body: `{type, timestamp, data}`.
#[derive(Debug, Clone, Serialize)]
pub struct Event<T> {
    /// [`DECISION_READY`].
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// When the event happened (RFC 3339, UTC).
    pub timestamp: String,
    /// What happened.
    pub data: T,
}

/// Sends webhooks.
#[derive(Debug, Clone)]
pub struct Webhooks {
    secret: Arc<WebhookSecret>,
    retry: RetryPolicy,
    http: reqwest::Client,
    log: Option<DeliveryLog>,
    metrics: Arc<Metrics>,
}

/// What became of one attempt, or of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// The receiver answered 2xx.
    Delivered,
    /// It did not; another attempt comes.
    Retried,
    /// It answered `410 Gone`: no more attempts.
    Gone,
    /// The retry period ended.
    GivenUp,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::Retried => "retried",
            Outcome::Gone => "gone",
            Outcome::GivenUp => "given_up",
        }
    }
}

/// Why webhooks cannot be sent.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the webhook client: {0}")]
pub struct ClientError(String);

/// An HTTP client for webhooks: `https://` verified against the platform's roots, with rustls
/// on ring (the build has no default TLS provider); redirects are not followed.
pub fn http_client() -> Result<reqwest::Client, ClientError> {
    let crypto = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(crypto)
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError(e.to_string()))?;
    let tls = rustls_platform_verifier::BuilderVerifierExt::with_platform_verifier(tls)
        .map_err(|e| ClientError(e.to_string()))?
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("airlock-gateway/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ClientError(e.to_string()))
}

impl Webhooks {
    /// A sender signing with `secret`, counting in `metrics`; deliveries live in memory until
    /// [`Webhooks::with_log`].
    pub fn new(secret: WebhookSecret, retry: RetryPolicy, metrics: Arc<Metrics>) -> Result<Self, ClientError> {
        Ok(Webhooks { secret: Arc::new(secret), retry, http: http_client()?, log: None, metrics })
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

    /// One signed attempt.
    async fn attempt(&self, delivery: &Delivery) -> Outcome {
        let (id, attempt) = (&delivery.id, delivery.attempts);
        let timestamp = unix_seconds();
        let signature = self.secret.sign(id, timestamp, &delivery.body);
        let sent = self
            .http
            .post(delivery.url.as_str())
            .timeout(self.retry.attempt_timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(HEADER_ID, id)
            .header(HEADER_TIMESTAMP, timestamp.to_string())
            .header(HEADER_SIGNATURE, signature)
            .body(delivery.body.clone())
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => {
                info!(webhook_id = %id, attempt, "Webhook delivered.");
                Outcome::Delivered
            }
            Ok(response) if response.status() == reqwest::StatusCode::GONE => {
                info!(webhook_id = %id, attempt, "The webhook receiver is gone; no more attempts.");
                Outcome::Gone
            }
            Ok(response) => {
                debug!(webhook_id = %id, attempt, status = %response.status(), "Webhook refused.");
                Outcome::Retried
            }
            Err(e) => {
                debug!(webhook_id = %id, attempt, error = %e, "Webhook not delivered.");
                Outcome::Retried
            }
        }
    }

    fn count(&self, outcome: Outcome) {
        self.metrics.webhook_deliveries.get_or_create(&OutcomeLabels { outcome: outcome.label().to_owned() }).inc();
    }
}

/// Now, in unix seconds.
fn unix_seconds() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Now, as RFC 3339 in UTC with milliseconds (`2026-12-01T15:32:57.123Z`).
pub fn rfc3339_now() -> String {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    rfc3339(since.as_secs() as i64, since.subsec_millis())
}

/// `seconds` since the epoch and `millis`, as RFC 3339 in UTC.
fn rfc3339(seconds: i64, millis: u32) -> String {
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    use super::log::tests::TempLog;
    use super::*;

    /// Nothing listens there: every attempt fails.
    const DOWN: &str = "http://127.0.0.1:1/hook";

    fn count(metrics: &Metrics, outcome: &str) -> u64 {
        metrics.webhook_deliveries.get_or_create(&OutcomeLabels { outcome: outcome.to_owned() }).get()
    }

    #[test]
    fn no_attempt_is_scheduled_past_the_retry_period() {
        let retry = RetryPolicy { period: Duration::from_secs(60), ..RetryPolicy::default() };
        let first = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let next = retry.next_attempt(first, 1, first + Duration::from_secs(10)).unwrap();
        assert!(next >= first + Duration::from_millis(10_500) && next <= first + Duration::from_secs(11), "{next:?}");
        assert_eq!(retry.next_attempt(first, 1, first + Duration::from_millis(59_600)), None);
    }

    #[tokio::test]
    async fn a_delivery_failing_past_its_period_is_given_up_counted_and_gone_from_the_log() {
        let file = TempLog::new();
        let log = DeliveryLog::open(&file.0).await.unwrap();
        let metrics = Arc::new(Metrics::new());
        let retry = RetryPolicy { period: Duration::ZERO, ..RetryPolicy::default() };
        let webhooks = Webhooks::new(WebhookSecret::generate(), retry, metrics.clone()).unwrap().with_log(log.clone());
        webhooks.send(&DOWN.parse().unwrap(), "w1", b"{}".to_vec(), &CancellationToken::new()).await;
        assert_eq!(log.pending().await.unwrap(), Vec::new());
        assert_eq!((count(&metrics, "given_up"), count(&metrics, "retried")), (1, 0));
        assert_eq!(metrics.webhook_backlog.get(), 0);
        log.close().await;
    }

    #[tokio::test]
    async fn a_stopping_gateway_leaves_a_delivery_awaiting_its_retry_in_the_log() {
        let file = TempLog::new();
        let log = DeliveryLog::open(&file.0).await.unwrap();
        let metrics = Arc::new(Metrics::new());
        let retry = RetryPolicy { first_delay: Duration::from_secs(3600), ..RetryPolicy::default() };
        let webhooks = Webhooks::new(WebhookSecret::generate(), retry, metrics.clone()).unwrap().with_log(log.clone());
        let stop = CancellationToken::new();
        stop.cancel();
        webhooks.send(&DOWN.parse().unwrap(), "w1", b"{\"x\":1}".to_vec(), &stop).await;
        let left = log.pending().await.unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!((left[0].id.as_str(), left[0].url.as_str(), &left[0].body[..]), ("w1", DOWN, &b"{\"x\":1}"[..]));
        assert_eq!(left[0].attempts, 1);
        assert!(left[0].next_attempt > left[0].first_attempt);
        assert_eq!((count(&metrics, "retried"), metrics.webhook_backlog.get()), (1, 1));
        log.close().await;

        // The next start resumes it, with its count of attempts, and counts it in its backlog.
        let metrics = Arc::new(Metrics::new());
        let log = DeliveryLog::open(&file.0).await.unwrap();
        let webhooks = Webhooks::new(WebhookSecret::generate(), retry, metrics.clone()).unwrap().with_log(log.clone());
        assert_eq!(webhooks.resume().await.unwrap(), left);
        assert_eq!(metrics.webhook_backlog.get(), 1);
        log.close().await;
    }

    #[test]
    fn signs_as_the_standard_webhooks_reference_does() {
        // The reference libraries' own test vector (standard-webhooks, libraries/*/tests).
        let secret: WebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap();
        let body = br#"{"test": 2432232314}"#;
        let signature = secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn a_secret_reads_back_from_its_text_and_bad_ones_are_refused() {
        let secret = WebhookSecret::generate();
        let text = secret.to_string();
        assert!(text.starts_with(SECRET_PREFIX));
        assert_eq!(text.parse::<WebhookSecret>().unwrap(), secret);
        assert!(format!("{secret:?}").find(&text[6..]).is_none(), "Debug hides the key");
        assert!(matches!("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse::<WebhookSecret>(), Err(SecretError::Prefix)));
        assert!(matches!("whsec_!!".parse::<WebhookSecret>(), Err(SecretError::Base64(_))));
        assert!(matches!("whsec_c2hvcnQ=".parse::<WebhookSecret>(), Err(SecretError::Length(5))));
    }

    #[test]
    fn delays_double_within_their_cap_and_jitter_in_their_upper_half() {
        let retry = RetryPolicy {
            first_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(10),
            period: Duration::from_secs(60),
            attempt_timeout: Duration::from_secs(1),
        };
        for (attempt, full) in [(1, 1), (2, 2), (3, 4), (4, 8), (5, 10), (40, 10)] {
            let delay = retry.delay(attempt);
            let full = Duration::from_secs(full);
            assert!(delay >= full / 2 && delay <= full, "attempt {attempt}: {delay:?}");
        }
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_614_265_330, 7), "2021-02-25T15:02:10.007Z");
        assert_eq!(rfc3339(951_782_400, 0), "2000-02-29T00:00:00.000Z");
    }
}
