//! Opening a reply: checking its proof for the runner's key and the exact request it
//! answers, and matching it to the call waiting for it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use airlock_contract::v1;
use airlock_records::signed::open_reply;
use airlock_records::time::now_ms;
use airlock_transport::Message;
use prost::Message as _;
use tracing::{debug, warn};

use crate::{ClientError, Inner, lock};

impl<T> Inner<T> {
    /// Hands a reply to the call waiting for it once its proof holds; counts it as ignored
    /// when nothing waits for it, as rejected when it does not hold. A progress settles
    /// nothing: it is counted and the call keeps waiting.
    pub(crate) fn deliver(&self, message: &Message) {
        let correlation = message.correlation_id.as_deref().unwrap_or_default();
        let waiting = lock(&self.table).awaiting(correlation);
        let Some((call, request)) = waiting else {
            debug!(%correlation, "Reply for nothing pending (duplicate or late) ignored.");
            self.ignored_replies.fetch_add(1, Ordering::Relaxed);
            return;
        };
        // Only a reply proved for the request's exact bytes is taken; unproved replies need
        // no digest.
        let digest = match self.runner_keys {
            Some(_) => airlock_integrity::digest(&request),
            None => [0; 32],
        };
        let body = match open_reply(&message.body, self.runner_keys.as_ref(), &digest) {
            Ok(body) => body,
            Err(e) => {
                warn!(%correlation, error = %e, "A reply was dropped; the request keeps waiting.");
                self.rejected_replies.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let outcome = match body {
            v1::reply_body::Body::Decision(decision) if decision.requested_at_unix_ms != requested_at(&request) => {
                // About an earlier request for the same call (its key was reused).
                debug!(%correlation, "Decision about an earlier request ignored.");
                self.ignored_replies.fetch_add(1, Ordering::Relaxed);
                return;
            }
            v1::reply_body::Body::Decision(decision) => Ok(decision),
            v1::reply_body::Body::Error(error) => {
                Err(ClientError::Refused { code: error.code, message: error.message })
            }
            v1::reply_body::Body::Progress(progress) => {
                // Unproved and not final: the call keeps waiting for its decision, no longer
                // repeated (at worst, a forged progress makes a call wait for its deadline, as
                // one with no repeats would).
                debug!(%correlation, step = progress.step, pool = %progress.pool, task = %progress.task_id, "A step holds the call.");
                lock(&self.table).hold(call);
                self.progress_replies.fetch_add(1, Ordering::Relaxed);
                if let Some(hook) = self.on_progress.get() {
                    hook(correlation, &progress);
                }
                return;
            }
        };
        let latency = Duration::from_millis(now_ms().saturating_sub(requested_at(&request)).max(0) as u64);
        let mut table = lock(&self.table);
        table.answered(call, latency);
        // Proved for this very call (not one that timed out meanwhile and was asked again).
        let settled = table.settle(call, outcome);
        drop(table);
        match settled {
            Some(settled) => settled.wake(),
            None => {
                self.ignored_replies.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// When `request` (encoded) was asked; its other fields are skipped, not decoded.
fn requested_at(request: &[u8]) -> i64 {
    /// The one field of `v1::Request` a reply's decision is matched on.
    #[derive(Clone, PartialEq, prost::Message)]
    struct Times {
        #[prost(int64, tag = "8")]
        requested_at_unix_ms: i64,
    }
    Times::decode(request).map_or(0, |times| times.requested_at_unix_ms)
}
