//! The sweeper: keeps the calls' timers, hands what is due for a repeat to the publisher,
//! fails closed what ran out of time and withdraws it with a `Cancel`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use airlock_contract::v1;
use airlock_records::convert::{kind_to_wire, request_parts};
use airlock_records::time::now_ms;
use airlock_transport::{Message, Transport};
use futures_util::StreamExt as _;
use prost::Message as _;
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::warn;

use crate::pending::Due;
use crate::{ClientError, Inner, TIMEOUT_APPROVER, lock};

/// Calls failed closed in one go (each one's request is decoded for its decision).
const MAX_EXPIRING: usize = 1024;

/// Cancels of calls that ran out of time published at once.
const MAX_CANCELLING: usize = 64;

/// Keeps the timers: sleeps until the earliest, hands the calls due for a repeat to the
/// publisher, and fails closed every call whose time ran out and withdraws them. Ends when
/// the client closes or is dropped.
pub(crate) async fn sweep<T: Transport>(weak: Weak<Inner<T>>, wake: Arc<Notify>) {
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let (due, next) = {
            let mut table = lock(&inner.table);
            if table.is_closed() {
                return;
            }
            (table.take_due(Instant::now(), MAX_EXPIRING), table.next_timer())
        };
        if due.repeated > 0 {
            inner.publisher.notify_one();
        }
        let due = due.due;
        if !due.is_empty() {
            inner.expire(due);
            // A mass expiry (the fleet away) goes in slices, the other tasks running between.
            drop(inner);
            tokio::task::yield_now().await;
            continue;
        }
        drop(inner);
        // No strong reference while it sleeps. A wake-up given since the table was read is
        // kept as a permit by `Notify`, so none is lost.
        match next {
            Some(deadline) => {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => {}
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

impl<T: Transport> Inner<T> {
    /// Fails closed the calls whose deadline passed (unless a reply came first): each caller
    /// gets its decision at once, and their cancels go out in the background (the broker may
    /// be slow or away).
    fn expire(&self, due: Vec<Due>) {
        let mut cancels = Vec::with_capacity(due.len());
        for Due { call, request } in due {
            // Read back from the request: its key, origin and times are all it needs.
            let (decision, cancel) = match Asked::read(&request) {
                Some(asked) => (Ok(self.fail_closed(&asked)), Some((asked.key, asked.kind))),
                None => (Err(ClientError::Invalid("the request could not be read back")), None),
            };
            let Some(settled) = lock(&self.table).settle(call, decision) else { continue };
            settled.wake();
            self.timed_out.fetch_add(1, Ordering::Relaxed);
            cancels.extend(cancel);
        }
        let (transport, destination) = (self.transport.clone(), self.cancels.clone());
        tokio::spawn(async move {
            futures_util::stream::iter(cancels)
                .for_each_concurrent(MAX_CANCELLING, |(key, kind)| {
                    let message = cancel_message(key, kind, "the runner stopped waiting: deadline passed");
                    let (transport, destination) = (&transport, &destination);
                    async move {
                        if let Err(e) = transport.publish(destination, message).await {
                            warn!(error = %e, "Could not publish a cancel.");
                        }
                    }
                })
                .await;
        });
    }

    /// Publishes a `Cancel` of the call `key` of `kind`: steps and reviewer services drop it.
    pub(crate) async fn cancel(&self, key: v1::CallKey, kind: v1::Kind, reason: &str) {
        if let Err(e) = self.transport.publish(&self.cancels, cancel_message(key, kind, reason)).await {
            warn!(error = %e, "Could not publish a cancel.");
        }
    }

    fn fail_closed(&self, asked: &Asked) -> v1::Decision {
        let (decision, what) = match asked.kind {
            v1::Kind::Review => (v1::DecisionKind::Terminate, "terminated the sample"),
            _ => (v1::DecisionKind::Reject, "rejected the call"),
        };
        let waited = asked.deadline_unix_ms.saturating_sub(asked.requested_at_unix_ms) as f64 / 1000.0;
        v1::Decision {
            decision_id: uuid::Uuid::now_v7().to_string(),
            key: Some(asked.key.clone()),
            kind: asked.kind.into(),
            decision: decision.into(),
            explanation: Some(format!(
                "No decision arrived within {waited:.1}s, so the runner failed closed and {what}."
            )),
            approver: TIMEOUT_APPROVER.into(),
            decided_by: self.config.runner_id.clone(),
            timed_out: true,
            requested_at_unix_ms: asked.requested_at_unix_ms,
            decided_at_unix_ms: now_ms(),
            origin: asked.origin.clone(),
            ..Default::default()
        }
    }
}

/// What a fail-closed decision says about the request it answers, read back from the request
/// as published.
struct Asked {
    key: v1::CallKey,
    kind: v1::Kind,
    origin: Option<v1::Origin>,
    requested_at_unix_ms: i64,
    deadline_unix_ms: i64,
}

impl Asked {
    fn read(body: &[u8]) -> Option<Self> {
        let request = v1::Request::decode(body).ok()?;
        let kind = kind_to_wire(request_parts(&request)?.kind);
        Some(Asked {
            key: request.key?,
            kind,
            origin: request.origin,
            requested_at_unix_ms: request.requested_at_unix_ms,
            deadline_unix_ms: request.deadline_unix_ms,
        })
    }
}

fn cancel_message(key: v1::CallKey, kind: v1::Kind, reason: &str) -> Message {
    let correlation = key.correlation_id(kind);
    let cancel = v1::Cancel { key: Some(key), kind: kind.into(), reason: reason.to_owned() };
    Message::new(cancel.encode_to_vec()).with_correlation_id(correlation)
}
