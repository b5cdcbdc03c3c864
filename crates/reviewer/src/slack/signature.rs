//! Requests Slack signs: `X-Slack-Signature: v0=<hex>`, the HMAC-SHA256 of
//! `v0:<X-Slack-Request-Timestamp>:<body>` under the app's signing secret, compared in constant
//! time; a timestamp more than [`MAX_AGE_SECONDS`] away from now is refused, as Slack's SDKs
//! refuse it.

use airlock_tokens::{constant_time_eq, hex};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "x-slack-signature";
/// The header carrying the timestamp signed (unix seconds).
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";
/// How far a request's timestamp may be from now, in seconds.
pub const MAX_AGE_SECONDS: i64 = 5 * 60;

/// Why a request is not Slack's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unsigned {
    /// No signature or timestamp header, or not text.
    #[error("the request is not signed")]
    Missing,
    /// The timestamp is not a number of seconds.
    #[error("the request's timestamp is not a number")]
    BadTimestamp,
    /// The timestamp is more than five minutes from now.
    #[error("the request's timestamp is more than five minutes from now")]
    Stale,
    /// The signature is not the one the signing secret makes.
    #[error("the request's signature is wrong")]
    Forged,
}

/// Checks that `body`, sent at `timestamp` (the header's text) with `signature`, was signed
/// with `secret`, at most [`MAX_AGE_SECONDS`] from `now` (unix seconds).
pub fn verify(
    secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), Unsigned> {
    let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
        return Err(Unsigned::Missing);
    };
    let at: i64 = timestamp.trim().parse().map_err(|_| Unsigned::BadTimestamp)?;
    if now.abs_diff(at) > MAX_AGE_SECONDS as u64 {
        return Err(Unsigned::Stale);
    }
    let expected = sign(secret, timestamp, body);
    if constant_time_eq(expected.as_bytes(), signature.trim().as_bytes()) { Ok(()) } else { Err(Unsigned::Forged) }
}

/// `v0=<hex>` of `body` sent at `timestamp` under `secret`.
pub(crate) fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    format!("v0={}", hex(&mac.finalize().into_bytes()))
}

/// What a signed request is remembered by once used: the SHA-256 of its timestamp and body,
/// hex (a replay of it carries both unchanged).
pub fn payload_id(timestamp: &str, body: &[u8]) -> String {
    let mut digest = Sha256::new();
    digest.update(timestamp.as_bytes());
    digest.update(b":");
    digest.update(body);
    hex(&digest.finalize())
}
