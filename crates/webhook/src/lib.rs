//! Outgoing webhooks as the gateway and the reviewer service both send them, signed by the
//! Standard Webhooks convention (<https://www.standardwebhooks.com>).
//!
//! Each event carries `webhook-id` (the same on every retry, so a receiver drops duplicates
//! by it), `webhook-timestamp` (unix seconds of the attempt) and `webhook-signature:
//! v1,<base64 HMAC-SHA256 over "{id}.{timestamp}.{body}">` keyed by the base64-decoded part
//! of a `whsec_…` secret. A sender retries an attempt that does not answer 2xx with
//! exponential backoff and jitter ([`RetryPolicy`]) until the retry period ends; `410 Gone`
//! stops at once. Where deliveries are kept between attempts is the sender's own business.
//!
//! Layout:
//! - [`WebhookSecret`]: a `whsec_` secret, parsed, generated, signing.
//! - [`RetryPolicy`]: backoff, jitter and the retry period.
//! - [`Event`]: the body's envelope, `{type, timestamp, data}`.
//! - [`http_client`] and [`attempt`]: one signed POST and what became of it ([`Outcome`],
//!   counted by [`count`] in `airlock_webhook_deliveries_total`).
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use airlock_records::time::Utc;
use airlock_telemetry::metrics::{Metrics, OutcomeLabels};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use tracing::{debug, info};

/// The prefix of a webhook secret's text.
pub const SECRET_PREFIX: &str = "whsec_";
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
    /// The event's type, such as `decision.ready` or `task.created`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// When the event happened (RFC 3339, UTC).
    pub timestamp: String,
    /// What happened.
    pub data: T,
}

/// Why webhooks cannot be sent.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the webhook client: {0}")]
pub struct ClientError(String);

/// An HTTP client for webhooks: `https://` verified against the platform's roots, with rustls
/// on ring (the build has no default TLS provider); redirects are not followed.
pub fn http_client() -> Result<reqwest::Client, ClientError> {
    builder()?.build().map_err(|e| ClientError(e.to_string()))
}

/// An [`http_client`] that resolves host names with `resolver` (the gateway's, which refuses
/// private addresses at every connection).
pub fn http_client_resolving(resolver: Arc<dyn reqwest::dns::Resolve>) -> Result<reqwest::Client, ClientError> {
    builder()?.dns_resolver(resolver).build().map_err(|e| ClientError(e.to_string()))
}

fn builder() -> Result<reqwest::ClientBuilder, ClientError> {
    let crypto = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(crypto)
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError(e.to_string()))?;
    let tls = rustls_platform_verifier::BuilderVerifierExt::with_platform_verifier(tls)
        .map_err(|e| ClientError(e.to_string()))?
        .with_no_client_auth();
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("airlock/", env!("CARGO_PKG_VERSION"))))
}

/// What became of one attempt, or of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
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
    /// The metric's label.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::Retried => "retried",
            Outcome::Gone => "gone",
            Outcome::GivenUp => "given_up",
        }
    }
}

/// Counts `outcome` in `airlock_webhook_deliveries_total`.
pub fn count(metrics: &Metrics, outcome: Outcome) {
    metrics.webhook_deliveries.get_or_create(&OutcomeLabels { outcome: outcome.label().to_owned() }).inc();
}

/// One signed attempt to POST `body` (JSON) to `url` as event `id`: [`Outcome::Delivered`],
/// [`Outcome::Gone`], or [`Outcome::Retried`] for any other answer or none within `timeout`.
pub async fn attempt(
    http: &reqwest::Client,
    secret: &WebhookSecret,
    url: &str,
    id: &str,
    body: &[u8],
    attempt: u32,
    timeout: Duration,
) -> Outcome {
    let timestamp = unix_seconds();
    let signature = secret.sign(id, timestamp, body);
    let sent = http
        .post(url)
        .timeout(timeout)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(HEADER_ID, id)
        .header(HEADER_TIMESTAMP, timestamp.to_string())
        .header(HEADER_SIGNATURE, signature)
        .body(body.to_vec())
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

/// Now, in unix seconds.
pub fn unix_seconds() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Now, as RFC 3339 in UTC with milliseconds (`2026-12-01T15:32:57.123Z`).
pub fn rfc3339_now() -> String {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    rfc3339(since.as_secs() as i64, since.subsec_millis())
}

/// `unix_ms` (milliseconds since the epoch), as RFC 3339 in UTC with milliseconds.
pub fn rfc3339_at(unix_ms: i64) -> String {
    rfc3339(unix_ms.div_euclid(1000), unix_ms.rem_euclid(1000) as u32)
}

/// `seconds` since the epoch and `millis`, as RFC 3339 in UTC.
fn rfc3339(seconds: i64, millis: u32) -> String {
    let Utc { year, month, day, hour, minute, second } = Utc::from_unix_seconds(seconds);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
}

#[cfg(test)]
mod tests;
