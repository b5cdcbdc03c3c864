//! The runner's client: publishes approval and review requests and waits for their decisions.
//!
//! One client serves every sample of a runner process over one transport, with tens of
//! thousands of requests in flight. Replies come back on the runner's own queue, which
//! outlives reconnects; each reply is matched to its request by the correlation id (the kind
//! and call key). The client never waits past a request's deadline: it then answers a
//! fail-closed decision itself (reject for approval, terminate for review) and withdraws the
//! request with a `Cancel`. A reply that matches nothing pending (a duplicate, or one that
//! came after the deadline) is ignored and counted.
//!
//! Given the fleet's public keys, the client makes an ephemeral X25519 key, sends its public
//! half with every request, and takes a reply only when its proof holds for that key and the
//! exact bytes of the request it answers: a reply anyone else made (forged, or replayed from
//! another call) is dropped, logged and counted, and the request keeps waiting until its
//! deadline.
//!
//! Layout: [`Client`] here; [`request`]: building a request for one call, and sending one
//! as a runner of its own (`airlock request`).
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod request;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_contract::v1;
use airlock_integrity::{Fleet, KeyError, PublicKeys, RunnerKeys};
use airlock_records::signed::open_reply;
use airlock_records::time::{Deadline, now_ms};
use airlock_transport::{Destination, Message, Topology, Transport, TransportError};
use prost::Message as _;
use tokio::sync::oneshot;
use tracing::{Instrument, debug, warn};

/// The approver recorded on a decision the client made itself because time ran out.
pub const TIMEOUT_APPROVER: &str = "timeout";

/// How a client runs.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The fleet's prefix.
    pub prefix: String,
    /// A name unique to this runner process; it names the reply queue.
    pub runner_id: String,
    /// How long a request may wait when its caller gives no deadline.
    pub default_timeout: Duration,
    /// The fleet's public keys its replies must be proved with; `None` takes replies
    /// unproved, from a fleet that runs unsigned.
    pub fleet_keys: Option<PublicKeys<Fleet>>,
}

/// What went wrong with a request.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The request lacks what the fleet needs to route or answer it.
    #[error("invalid request: {0}")]
    Invalid(&'static str),
    /// A request with the same kind and call key is already waiting.
    #[error("a request for {0} is already pending")]
    AlreadyPending(String),
    /// The fleet could not process the request (bad policy, bad message, failed step).
    #[error("the fleet refused the request ({code}): {message}")]
    Refused {
        /// The wire `Error` code.
        code: String,
        /// What went wrong.
        message: String,
    },
    /// The transport failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The runner's key could not be made from the fleet's keys.
    #[error(transparent)]
    Keys(#[from] KeyError),
    /// The client was closed while the request waited.
    #[error("the client was closed")]
    Closed,
}

/// Counters a runner may log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Requests waiting for a decision now.
    pub pending: usize,
    /// Replies that matched nothing pending (duplicates or late ones), ignored.
    pub ignored_replies: u64,
    /// Replies whose proof did not hold (forged, replayed from another call, or not a reply
    /// at all), dropped while their request kept waiting.
    pub rejected_replies: u64,
    /// Requests that ran out of time and were failed closed.
    pub timed_out: u64,
}

/// A runner's connection to the fleet. Cheap to clone.
#[derive(Clone)]
pub struct Client<T: Transport> {
    inner: Arc<Inner<T>>,
}

struct Inner<T> {
    transport: T,
    topology: Topology,
    config: ClientConfig,
    reply_queue: String,
    pending: Mutex<HashMap<String, Pending>>,
    /// This runner's key, when replies must be proved.
    runner_keys: Option<RunnerKeys>,
    ignored_replies: AtomicU64,
    rejected_replies: AtomicU64,
    timed_out: AtomicU64,
    /// Stops the reply reader, which then cancels its consumer.
    stop_reader: Mutex<Option<oneshot::Sender<()>>>,
    /// Bounds the publishes under way ([`MAX_PUBLISHING`]).
    publishing: tokio::sync::Semaphore,
    reader: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Publishes under way at once: a burst of requests waits here rather than piling frames up
/// in the connection's buffers.
const MAX_PUBLISHING: usize = 256;

/// What a fail-closed decision needs to know about the request it answers.
struct Asked {
    origin: Option<v1::Origin>,
    requested_at_unix_ms: i64,
}

/// A request waiting for its reply, with what it takes to send it again.
struct Pending {
    reply: oneshot::Sender<v1::reply_body::Body>,
    message: Message,
    /// The SHA-256 of the request as published: its reply's proof is bound to it.
    digest: [u8; 32],
}

impl<T: Transport> Client<T> {
    /// Declares the fleet's topology and this runner's reply queue, and starts reading replies.
    /// A runner whose broker user may not declare the fleet's core (a role user of `airlock
    /// topology definitions`) declares its reply queue only; the fleet's workers declare the
    /// core.
    pub async fn connect(transport: T, config: ClientConfig) -> Result<Self, ClientError> {
        let runner_keys = config.fleet_keys.as_ref().map(RunnerKeys::new).transpose()?;
        let topology = Topology::new(config.prefix.clone()).with_reply_queue(&config.runner_id);
        let own = Topology::empty(config.prefix.clone()).with_reply_queue(&config.runner_id);
        transport.declare_own(&topology, &own).await?;
        let reply_queue = topology.reply_queue(&config.runner_id);
        let mut replies = transport.consume(&reply_queue, 0).await?;
        let (stop_reader, mut stopped) = oneshot::channel();
        let inner = Arc::new(Inner {
            transport,
            topology,
            config,
            reply_queue,
            pending: Mutex::new(HashMap::new()),
            runner_keys,
            ignored_replies: AtomicU64::new(0),
            rejected_replies: AtomicU64::new(0),
            timed_out: AtomicU64::new(0),
            stop_reader: Mutex::new(Some(stop_reader)),
            publishing: tokio::sync::Semaphore::new(MAX_PUBLISHING),
            reader: Mutex::new(None),
        });
        let weak = Arc::downgrade(&inner);
        let reader = tokio::spawn(async move {
            loop {
                let delivery = tokio::select! {
                    _ = &mut stopped => break,
                    delivery = replies.next() => match delivery {
                        Some(delivery) => delivery,
                        None => return,
                    },
                };
                let Some(inner) = weak.upgrade() else { break };
                inner.deliver(&delivery.message);
                if let Err(e) = delivery.ack().await {
                    debug!(error = %e, "Reply acknowledgement failed; a duplicate may follow.");
                }
            }
            replies.cancel().await;
        });
        *inner.reader.lock().expect("reader lock") = Some(reader);
        let client = Client { inner };
        tokio::spawn(resend_after_reconnects(Arc::downgrade(&client.inner)));
        Ok(client)
    }

    /// Asks for approval of a call; `request.body` must be an approval.
    pub async fn approve(&self, request: v1::Request) -> Result<v1::Decision, ClientError> {
        match request.body {
            Some(v1::request::Body::Approval(_)) => self.decide(request, None).await,
            _ => Err(ClientError::Invalid("approve() needs an approval body")),
        }
    }

    /// Asks for review of a call's result; `request.body` must be a review.
    pub async fn review(&self, request: v1::Request) -> Result<v1::Decision, ClientError> {
        match request.body {
            Some(v1::request::Body::Review(_)) => self.decide(request, None).await,
            _ => Err(ClientError::Invalid("review() needs a review body")),
        }
    }

    /// Sends a request and waits for its decision, at most `timeout` (default: the
    /// configured one). Past it, the answer is a fail-closed decision made here.
    pub async fn decide(
        &self,
        mut request: v1::Request,
        timeout: Option<Duration>,
    ) -> Result<v1::Decision, ClientError> {
        let kind = match request.body {
            Some(v1::request::Body::Approval(_)) => v1::Kind::Approval,
            Some(v1::request::Body::Review(_)) => v1::Kind::Review,
            None => return Err(ClientError::Invalid("the request has no body")),
        };
        let key = request.key.clone().ok_or(ClientError::Invalid("the request has no call key"))?;
        let timeout = timeout.unwrap_or(self.inner.config.default_timeout);
        let now = now_ms();
        request.reply_to = self.inner.reply_queue.clone();
        request.requested_at_unix_ms = now;
        request.deadline_unix_ms = Deadline::after(now, timeout).unix_ms();
        request.runner_key = self.inner.runner_keys.as_ref().map(|keys| keys.public().to_vec()).unwrap_or_default();
        if let Some(origin) = request.origin.as_mut()
            && origin.runner_id.is_empty()
        {
            origin.runner_id = self.inner.config.runner_id.clone();
        }
        let correlation = key.correlation_id(kind);
        let span = tracing::debug_span!("airlock.client", correlation_id = %correlation);
        self.send(request, kind, key, correlation, timeout).instrument(span).await
    }

    async fn send(
        &self,
        request: v1::Request,
        kind: v1::Kind,
        key: v1::CallKey,
        correlation: String,
        timeout: Duration,
    ) -> Result<v1::Decision, ClientError> {
        let encoded = request.encode_to_vec();
        let digest = airlock_integrity::digest(&encoded);
        let mut message = Message::new(encoded)
            .with_correlation_id(correlation.clone())
            .with_reply_to(self.inner.reply_queue.clone());
        // Only what a fail-closed decision needs is kept while waiting, not the whole request.
        let asked = Asked { origin: request.origin, requested_at_unix_ms: request.requested_at_unix_ms };
        airlock_telemetry::propagation::inject(&tracing::Span::current(), &mut message.headers);
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.inner.pending.lock().expect("pending lock");
            if pending.contains_key(&correlation) {
                return Err(ClientError::AlreadyPending(correlation));
            }
            pending.insert(correlation.clone(), Pending { reply: tx, message: message.clone(), digest });
        }
        let requests = self.inner.topology.requests_route();
        let published = {
            let _permit = self.inner.publishing.acquire().await.map_err(|_| ClientError::Closed)?;
            // Boxed: a publish's state is large and short-lived, and would otherwise stay
            // inlined in every waiting request's future.
            Box::pin(self.inner.transport.publish(&requests, message)).await
        };
        if let Err(e) = published {
            self.inner.forget(&correlation);
            return Err(e.into());
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(v1::reply_body::Body::Decision(decision))) => Ok(decision),
            Ok(Ok(v1::reply_body::Body::Error(error))) => {
                Err(ClientError::Refused { code: error.code, message: error.message })
            }
            Ok(Err(_)) => Err(ClientError::Closed),
            Err(_) => {
                self.inner.forget(&correlation);
                self.inner.timed_out.fetch_add(1, Ordering::Relaxed);
                Box::pin(self.cancel(&key, kind, "the runner stopped waiting: deadline passed")).await;
                Ok(self.fail_closed(key, asked, kind, timeout))
            }
        }
    }

    /// Publishes every pending request again (after a reconnect, the broker may have lost
    /// what was not yet confirmed). Duplicate decisions this causes are ignored.
    pub async fn resend_pending(&self) -> Result<usize, ClientError> {
        let messages: Vec<Message> =
            self.inner.pending.lock().expect("pending lock").values().map(|p| p.message.clone()).collect();
        let requests = self.inner.topology.requests_route();
        for message in &messages {
            self.inner.transport.publish(&requests, message.clone()).await?;
        }
        Ok(messages.len())
    }

    /// Withdraws a request: steps and reviewer services drop it.
    pub async fn cancel(&self, key: &v1::CallKey, kind: v1::Kind, reason: &str) {
        let cancel = v1::Cancel { key: Some(key.clone()), kind: kind.into(), reason: reason.to_owned() };
        let message = Message::new(cancel.encode_to_vec()).with_correlation_id(key.correlation_id(kind));
        let cancels = Destination::exchange(self.inner.topology.cancels_exchange(), "");
        if let Err(e) = self.inner.transport.publish(&cancels, message).await {
            warn!(error = %e, "Could not publish a cancel.");
        }
    }

    /// Counters for logs and tests.
    pub fn stats(&self) -> ClientStats {
        ClientStats {
            pending: self.inner.pending.lock().expect("pending lock").len(),
            ignored_replies: self.inner.ignored_replies.load(Ordering::Relaxed),
            rejected_replies: self.inner.rejected_replies.load(Ordering::Relaxed),
            timed_out: self.inner.timed_out.load(Ordering::Relaxed),
        }
    }

    /// Stops reading replies, fails every pending request with [`ClientError::Closed`], and
    /// deletes the reply queue: for a runner that is done. The transport stays open.
    pub async fn close(&self) {
        let stop = self.inner.stop_reader.lock().expect("reader lock").take();
        let reader = self.inner.reader.lock().expect("reader lock").take();
        if let (Some(stop), Some(reader)) = (stop, reader) {
            let _ = stop.send(());
            let _ = reader.await;
        }
        self.inner.pending.lock().expect("pending lock").clear();
        let queue = Topology::empty(self.inner.topology.prefix()).with_reply_queue(&self.inner.config.runner_id);
        if let Err(e) = self.inner.transport.delete(&queue).await {
            warn!(error = %e, "Could not delete the reply queue; it expires on its own.");
        }
    }

    /// The queue replies come back on.
    pub fn reply_queue(&self) -> &str {
        &self.inner.reply_queue
    }

    fn fail_closed(&self, key: v1::CallKey, asked: Asked, kind: v1::Kind, timeout: Duration) -> v1::Decision {
        let (decision, what) = match kind {
            v1::Kind::Review => (v1::DecisionKind::Terminate, "terminated the sample"),
            _ => (v1::DecisionKind::Reject, "rejected the call"),
        };
        v1::Decision {
            decision_id: uuid::Uuid::now_v7().to_string(),
            key: Some(key),
            kind: kind.into(),
            decision: decision.into(),
            explanation: Some(format!(
                "No decision arrived within {:.1}s, so the runner failed closed and {what}.",
                timeout.as_secs_f64()
            )),
            approver: TIMEOUT_APPROVER.into(),
            decided_by: self.inner.config.runner_id.clone(),
            requested_at_unix_ms: asked.requested_at_unix_ms,
            decided_at_unix_ms: now_ms(),
            origin: asked.origin,
            ..Default::default()
        }
    }
}

/// Publishes every pending request again after each reconnection: whatever was in flight
/// when the connection dropped may not have reached the broker. Ends with the client.
async fn resend_after_reconnects<T: Transport>(inner: std::sync::Weak<Inner<T>>) {
    let Some(mut reconnects) = inner.upgrade().map(|inner| inner.transport.reconnects()) else { return };
    while reconnects.changed().await.is_ok() {
        let Some(inner) = inner.upgrade() else { return };
        match (Client { inner }).resend_pending().await {
            Ok(count) => debug!(count, "Pending requests sent again after a reconnect."),
            Err(e) => warn!(error = %e, "Sending pending requests again failed."),
        }
    }
}

impl<T> Inner<T> {
    /// Hands a reply to the request waiting for it once its proof holds; counts it as
    /// ignored when nothing waits for it, as rejected when it does not hold.
    fn deliver(&self, message: &Message) {
        let correlation = message.correlation_id.as_deref().unwrap_or_default();
        let digest = self.pending.lock().expect("pending lock").get(correlation).map(|pending| pending.digest);
        let Some(digest) = digest else {
            debug!(%correlation, "Reply for nothing pending (duplicate or late) ignored.");
            self.ignored_replies.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let body = match open_reply(&message.body, self.runner_keys.as_ref(), &digest) {
            Ok(body) => body,
            Err(e) => {
                warn!(%correlation, error = %e, "A reply was dropped; the request keeps waiting.");
                self.rejected_replies.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        if let Some(pending) = self.forget(correlation) {
            let _ = pending.reply.send(body);
        }
    }

    fn forget(&self, correlation: &str) -> Option<Pending> {
        self.pending.lock().expect("pending lock").remove(correlation)
    }
}
