//! What a model call costs the fleet: identical calls are sampled once, and a provider's rate
//! limit holds across every process that shares its account.
//!
//! Both sit around [`Provider::send`](crate::provider::Provider::send), the one place a model
//! request leaves the monitor, so every kind of request is covered.
//!
//! - [`Key`]: a call's identity, SHA-256 over the provider, the endpoint, the model, the
//!   request body's canonical bytes and the [`Draw`] (never the API key).
//! - [`cache`]: answers by key, in a bounded LRU; concurrent identical calls share one request;
//!   answers are published on the step's log of answers and taken from it by every process.
//! - [`limiter`]: requests per minute shared by the live processes of a named limiter; a 429's
//!   `Retry-After` pauses all of them.

pub mod cache;
pub mod limiter;

use std::fmt;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

pub use cache::Cache;
pub use limiter::Limiter;

/// How a monitor shares its model calls with the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplingConfig {
    /// Answers held in memory, the least recently used dropped first; 0 turns the cache off
    /// (every call asks the model, and the step's log of answers is not used).
    pub cache_entries: usize,
    /// How long the step's log of answers keeps one (every process of the step must say the
    /// same: the broker refuses a log declared again with another age).
    pub cache_retention: Duration,
    /// The fleet-wide rate limit this process takes its share of, if any.
    pub rate_limit: Option<RateLimit>,
}

/// A rate limit shared by every monitor process that names the same limiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    /// The limiter's name: processes serving different steps with one API key give one name.
    pub limiter: String,
    /// Requests per minute to the provider, for all the processes together.
    pub per_minute: u32,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        SamplingConfig { cache_entries: cache::DEFAULT_ENTRIES, cache_retention: DEFAULT_RETENTION, rate_limit: None }
    }
}

/// How long a step's log of answers keeps one by default: a day.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// Which draw of a context a call is. Calls with equal bodies and equal draws are one call,
/// answered once across the fleet (a redelivered task, a hedged request); calls that differ
/// in their draw are distinct calls, each sent to the model.
///
/// A step that draws `k` samples of one context on purpose (at a temperature above 0) gives
/// them the indices `0..k`: a redelivered task asks again for the same `k` draws and gets the
/// answers it had, while the `k` draws stay `k` calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Draw {
    /// The epoch of the sample the call is for; `None` where the step lets epochs share
    /// answers (`share_across_epochs: true`), since the request body carries no epoch.
    pub epoch: Option<u32>,
    /// The n-th draw of this context, from 0.
    pub index: u32,
}

/// The identity of a model call: SHA-256 over its exact input.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(pub [u8; 32]);

impl Key {
    /// The key of a request of `provider` (its kind's name) to `endpoint` for `model`, with
    /// `body`, as draw `draw`. Each part is length-prefixed, so no two inputs share bytes.
    pub fn of(provider: &str, endpoint: &str, model: &str, body: &Value, draw: Draw) -> Self {
        let mut hash = Sha256::new();
        let mut part = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_be_bytes());
            hash.update(bytes);
        };
        part(provider.as_bytes());
        part(endpoint.as_bytes());
        part(model.as_bytes());
        let mut canonical = Vec::new();
        write_canonical(body, &mut canonical);
        part(&canonical);
        let epoch = draw.epoch.map_or(Vec::new(), |epoch| epoch.to_be_bytes().to_vec());
        part(&epoch);
        part(&draw.index.to_be_bytes());
        Key(hash.finalize().into())
    }

    /// The key as a log entry carries it, if it is one.
    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(Key)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0[..8].iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// `value` as JSON with every object's keys sorted, so that two bodies equal as JSON values
/// have the same bytes whatever order they were built in.
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by_key(|(key, _)| key.as_str());
            out.push(b'{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(Value::String(key.clone()).to_string().as_bytes());
                out.push(b':');
                write_canonical(value, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => out.extend_from_slice(scalar.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn body() -> Value {
        json!({"model": "m", "messages": [{"role": "user", "content": "ls -la"}], "temperature": 0.7})
    }

    fn key(body: &Value, draw: Draw) -> Key {
        Key::of("openai", "http://x/v1/chat/completions", "m", body, draw)
    }

    #[test]
    fn equal_inputs_have_one_key_whatever_their_keys_order() {
        let reordered = json!({"temperature": 0.7, "messages": [{"content": "ls -la", "role": "user"}], "model": "m"});
        assert_eq!(key(&body(), Draw::default()), key(&reordered, Draw::default()));
        // Stable across versions, so a key published by one process is found by another:
        // computed apart, as SHA-256 over the length-prefixed parts, with sorted JSON keys.
        assert_eq!(format!("{:?}", key(&body(), Draw::default())), "dd6c73401a127b62");
    }

    #[test]
    fn every_byte_of_the_input_changes_the_key() {
        let base = key(&body(), Draw::default());
        let text = body().to_string();
        for i in 0..text.len() {
            let mut bytes = text.clone().into_bytes();
            bytes[i] ^= 0x01;
            // Flipped bytes that still parse are a different request, and a different key.
            if let Ok(changed) = serde_json::from_slice::<Value>(&bytes)
                && changed != body()
            {
                assert_ne!(key(&changed, Draw::default()), base, "byte {i}: {}", String::from_utf8_lossy(&bytes));
            }
        }
        let parts = [
            Key::of("anthropic", "http://x/v1/chat/completions", "m", &body(), Draw::default()),
            Key::of("openai", "http://y/v1/chat/completions", "m", &body(), Draw::default()),
            Key::of("openai", "http://x/v1/chat/completions", "m2", &body(), Draw::default()),
            key(&body(), Draw { epoch: Some(1), index: 0 }),
            key(&body(), Draw { epoch: Some(2), index: 0 }),
            key(&body(), Draw { epoch: None, index: 1 }),
            key(&json!({"model": "m", "messages": [], "temperature": 0.7}), Draw::default()),
        ];
        for (i, changed) in parts.iter().enumerate() {
            assert_ne!(*changed, base, "part {i}");
            assert!(parts[i + 1..].iter().all(|other| other != changed), "part {i} collides");
        }
        // Length prefixes: moving a byte from one part to the next is another input.
        assert_ne!(
            Key::of("openai", "ab", "c", &body(), Draw::default()),
            Key::of("openai", "a", "bc", &body(), Draw::default())
        );
    }
}
