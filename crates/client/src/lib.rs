//! The runner's client: publishes approval and review requests and waits for their decisions.
//!
//! One client serves every sample of a runner process over one transport, with tens of
//! thousands of requests in flight. Replies come back on the runner's own queue, which
//! outlives reconnects; each reply is matched to its request by the correlation id (the kind
//! and call key). The client never waits past a request's deadline: it then answers a
//! fail-closed decision itself (reject for approval, terminate for review) and withdraws the
//! request with a `Cancel`. A request not answered within a soft deadline, a multiple of the
//! latency seen (see [`Repeats`]), is published again, so that a worker whose link went
//! silent holds nobody's call for long. A reply that matches nothing pending (a duplicate, or
//! one that came after the deadline) is ignored and counted.
//!
//! Given the fleet's public keys, the client makes an ephemeral X25519 key, sends its public
//! half with every request, and takes a reply only when its proof holds for that key and the
//! exact bytes of the request it answers: a reply anyone else made (forged, or replayed from
//! another call) is dropped, logged and counted, and the request keeps waiting until its
//! deadline. A `Progress` reply (a step holds the call: from the worker that handed it to an
//! external step, and from the reviewer service that took its human task) is unproved and not
//! final: it is counted, ends the call's repeats and settles nothing. Proof is the
//! default a runner cannot forget: a client is made with the fleet's keys ([`ReplyTrust::Proved`],
//! at least one, or it does not start) or told [`ReplyTrust::Insecure`] in so many words, and
//! then warns at every start that its decisions are not proved.
//!
//! No task, timer or channel per call: a waiting call is one entry of one table (see
//! `pending`), holding the request's bytes once, and its caller's future only names that
//! entry and polls it. One publisher task publishes what callers submit, a bounded number at
//! a time; one reader task takes replies and settles the entries they prove; one sweeper task
//! keeps the timers, repeats what is unanswered, fails closed what runs out of time and
//! withdraws it. A caller that stops waiting (drops its future) takes its entry out.
//!
//! Layout:
//! - [`Client`] here: its configuration, errors and counters, and the future of one call.
//! - `pending`: the table of waiting calls and their timers.
//! - `publisher`: the task that publishes what callers submit.
//! - `reader`: the task that takes replies and acknowledges them in batches.
//! - `reply`: opening a reply: its proof for the request it answers, and the call it settles.
//! - `sweeper`: the task that keeps the timers: repeats, fail-closed decisions and cancels.
//! - `reconnects`: the task that publishes every pending request again after a reconnect.
//! - [`request`]: building a request for one call, and sending one as a runner of its own
//!   (`airlock request`).
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

mod pending;
mod publisher;
mod reader;
mod reconnects;
mod reply;
pub mod request;
mod sweeper;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use airlock_contract::v1;
use airlock_integrity::{Fleet, KeyError, PublicKeys, RunnerKeys};
use airlock_policy::Kind;
use airlock_records::convert::{kind_to_wire, request_parts};
use airlock_records::time::{Deadline, now_ms};
use airlock_transport::{Destination, Topology, Transport, TransportError};
use futures_util::TryStreamExt as _;
use prost::Message as _;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;
use tracing::instrument::Instrumented;
use tracing::{Instrument, Span, warn};

pub use pending::TraceHeaders;
use pending::{Call, CallId, Refused, Table};
use publisher::MAX_PUBLISHING;

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
    /// Whose replies are taken: those the fleet's keys prove, or (chosen explicitly) any.
    pub replies: ReplyTrust,
    /// When a request not yet answered is published again.
    pub repeats: Repeats,
}

/// When a request not answered within its soft deadline is published again (under the same
/// correlation id; the first proved answer wins, later ones are ignored and counted).
///
/// The soft deadline is 8 times the reply latency the client has seen, within
/// `floor..=ceiling` (the ceiling until a reply was seen); it doubles with each repeat, and
/// there is none at or past the request's deadline, nor once a step holds the call (a
/// progress came: a worker handed it to an external step, or a reviewer service took it). A
/// client makes at most 1,000 repeats in a burst, and gets a tenth of one back per call
/// answered, so a fleet that answers nothing is not sent every waiting call again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeats {
    /// Repeats of one request at most; 0 never repeats.
    pub at_most: u8,
    /// The shortest soft deadline.
    pub floor: Duration,
    /// The longest soft deadline.
    pub ceiling: Duration,
}

impl Repeats {
    /// No request is ever published again but after a reconnect.
    pub const NEVER: Repeats = Repeats { at_most: 0, floor: Duration::ZERO, ceiling: Duration::ZERO };
}

impl Default for Repeats {
    /// Three repeats, the soft deadline between 1 s and 10 s: a silent link costs a call about
    /// a second instead of the heartbeat's 10 to 15.
    fn default() -> Self {
        Repeats { at_most: 3, floor: Duration::from_secs(1), ceiling: Duration::from_secs(10) }
    }
}

/// Which replies a runner takes. There is no default: a runner without the fleet's public key
/// would take a decision anyone able to publish to its reply queue made, so running so is a
/// choice made in so many words.
#[derive(Debug, Clone)]
pub enum ReplyTrust {
    /// A reply is taken only with the proof of one of these fleet keys (`fleet.pub`); an empty
    /// set is refused when the client starts ([`ClientError::NoFleetKey`]).
    Proved(PublicKeys<Fleet>),
    /// Replies are taken unproved, as from a fleet that runs `--insecure-unsigned`: a forged
    /// decision is taken as the fleet's. The client warns at every start.
    Insecure,
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
    /// [`ReplyTrust::Proved`] with no key: nothing could be proved, so no reply would be taken.
    #[error("no fleet public key to prove replies with (pass the fleet's fleet.pub, or run insecure)")]
    NoFleetKey,
    /// The client was closed while the request waited (or before it was made).
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
    /// Progress replies (a step holds a call) to a waiting call: they end its repeats and
    /// never settle it. Not proved, so anyone able to publish to the reply queue can make one.
    pub progress_replies: u64,
    /// Requests published again after a reconnect.
    pub resent: u64,
    /// Requests published again because their soft deadline passed unanswered (see
    /// [`Repeats`]).
    pub repeated: u64,
}

/// What a runner does with a progress reply to a waiting call: given its correlation id and
/// the progress (unproved; see [`ClientStats::progress_replies`]).
pub type ProgressHook = Box<dyn Fn(&str, &v1::Progress) + Send + Sync>;

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
    /// Where requests are published, and cancels.
    requests: Destination,
    cancels: Destination,
    /// Every call, from its registration until its caller takes its outcome.
    table: Mutex<Table>,
    /// Wakes the sweeper: a call with an earlier deadline came, or the client closed or was
    /// dropped. Shared with the sweeper, which waits on it without keeping the client alive.
    sweeper: Arc<Notify>,
    /// Wakes the publisher: calls to publish came, or the client closed or was dropped.
    publisher: Arc<Notify>,
    /// This runner's key, when replies must be proved.
    runner_keys: Option<RunnerKeys>,
    ignored_replies: AtomicU64,
    rejected_replies: AtomicU64,
    timed_out: AtomicU64,
    progress_replies: AtomicU64,
    resent: AtomicU64,
    /// Told of each progress reply to a waiting call, once set.
    on_progress: OnceLock<ProgressHook>,
    /// Stops the reply reader, which then cancels its consumer.
    stop_reader: Mutex<Option<oneshot::Sender<()>>>,
    reader: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// How long closing waits for the broker to cancel the reply consumer, and then to delete the
/// reply queue: a cluster recovering from a node's loss may leave either unanswered for
/// minutes, and the queue expires on its own.
pub const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// A deadline further away than any wait: where a timeout too long to add up is capped.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// This runner's key for the fleet's keys, made before anything is declared: a client that
/// could prove nothing does not start; one told to run insecure has none.
fn runner_keys(config: &ClientConfig) -> Result<Option<RunnerKeys>, ClientError> {
    match &config.replies {
        ReplyTrust::Proved(keys) if keys.iter().next().is_none() => Err(ClientError::NoFleetKey),
        ReplyTrust::Proved(keys) => Ok(Some(RunnerKeys::new(keys)?)),
        ReplyTrust::Insecure => Ok(None),
    }
}

impl<T: Transport> Client<T> {
    /// Declares the fleet's topology and this runner's reply queue, and starts reading replies.
    /// A runner whose broker user may not declare the fleet's core (a role user of `airlock
    /// topology definitions`) declares its reply queue only; the fleet's workers declare the
    /// core.
    pub async fn connect(transport: T, config: ClientConfig) -> Result<Self, ClientError> {
        let runner_keys = runner_keys(&config)?;
        let topology = Topology::new(config.prefix.clone()).with_reply_queue(&config.runner_id);
        let own = Topology::empty(config.prefix.clone()).with_reply_queue(&config.runner_id);
        transport.declare_own(&topology, &own).await?;
        Self::start(transport, config, topology, runner_keys).await
    }

    /// Like [`connect`](Self::connect), but declares this runner's reply queue and its binding
    /// only, never the fleet's core: a prefix no fleet runs on fails with
    /// [`TransportError::NotFound`] (no `<prefix>.route` to bind to) instead of being made.
    pub async fn connect_own(transport: T, config: ClientConfig) -> Result<Self, ClientError> {
        let runner_keys = runner_keys(&config)?;
        let own = Topology::empty(config.prefix.clone()).with_reply_queue(&config.runner_id);
        transport.declare(&own).await?;
        let topology = Topology::new(config.prefix.clone()).with_reply_queue(&config.runner_id);
        Self::start(transport, config, topology, runner_keys).await
    }

    async fn start(
        transport: T,
        config: ClientConfig,
        topology: Topology,
        runner_keys: Option<RunnerKeys>,
    ) -> Result<Self, ClientError> {
        let reply_queue = topology.reply_queue(&config.runner_id);
        let replies = transport.consume(&reply_queue, 0).await?;
        let (stop_reader, stopped) = oneshot::channel();
        let table = Mutex::new(Table::new(config.repeats));
        let inner = Arc::new(Inner {
            transport,
            requests: topology.requests_route(),
            cancels: Destination::exchange(topology.cancels_exchange(), ""),
            topology,
            config,
            reply_queue,
            table,
            sweeper: Arc::new(Notify::new()),
            publisher: Arc::new(Notify::new()),
            runner_keys,
            ignored_replies: AtomicU64::new(0),
            rejected_replies: AtomicU64::new(0),
            timed_out: AtomicU64::new(0),
            progress_replies: AtomicU64::new(0),
            resent: AtomicU64::new(0),
            on_progress: OnceLock::new(),
            stop_reader: Mutex::new(Some(stop_reader)),
            reader: Mutex::new(None),
        });
        // Said once the client runs, so an attempt that failed (and is tried again) says nothing.
        if inner.runner_keys.is_none() {
            warn!(
                runner_id = %inner.config.runner_id,
                "Running insecure: decisions are not proved, and a forged one is taken as the fleet's."
            );
        }
        let reader = tokio::spawn(reader::read(Arc::downgrade(&inner), replies, stopped));
        *lock(&inner.reader) = Some(reader);
        tokio::spawn(sweeper::sweep(Arc::downgrade(&inner), inner.sweeper.clone()));
        tokio::spawn(publisher::publish(Arc::downgrade(&inner), inner.publisher.clone()));
        tokio::spawn(reconnects::resend_after_reconnects(Arc::downgrade(&inner)));
        Ok(Client { inner })
    }

    /// Asks for approval of a call; `request.body` must be an approval.
    pub fn approve(&self, request: v1::Request) -> impl Future<Output = Result<v1::Decision, ClientError>> + Send + '_ {
        match request_parts(&request).map(|parts| parts.kind) {
            Some(Kind::Approval) => self.deciding(request, None, None),
            _ => self.refuse(ClientError::Invalid("approve() needs an approval body")),
        }
    }

    /// Asks for review of a call's result; `request.body` must be a review.
    pub fn review(&self, request: v1::Request) -> impl Future<Output = Result<v1::Decision, ClientError>> + Send + '_ {
        match request_parts(&request).map(|parts| parts.kind) {
            Some(Kind::Review) => self.deciding(request, None, None),
            _ => self.refuse(ClientError::Invalid("review() needs a review body")),
        }
    }

    /// Sends a request and waits for its decision, at most `timeout` (default: the
    /// configured one). Past it, the answer is a fail-closed decision made here.
    ///
    /// The call is registered, its deadline starts and its request goes to the publisher
    /// when this is called; the future only waits. Dropping it stops waiting and forgets the
    /// call. It holds the call's name and span, no more: the call is an entry of the
    /// client's table, which the future polls.
    pub fn decide(
        &self,
        request: v1::Request,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<v1::Decision, ClientError>> + Send + '_ {
        self.deciding(request, timeout, None)
    }

    /// [`Client::decide`] within a trace the caller carries (W3C `traceparent` and
    /// `tracestate`, as a runner in another language has them): the request carries `trace`
    /// instead of the current span's context, so the fleet's spans join the caller's trace.
    pub fn decide_in_trace(
        &self,
        request: v1::Request,
        timeout: Option<Duration>,
        trace: TraceHeaders,
    ) -> impl Future<Output = Result<v1::Decision, ClientError>> + Send + '_ {
        self.deciding(request, timeout, Some(trace).filter(|trace| !trace.is_empty()))
    }

    fn deciding(
        &self,
        request: v1::Request,
        timeout: Option<Duration>,
        trace: Option<TraceHeaders>,
    ) -> Instrumented<Deciding<'_>> {
        match self.submit(request, timeout, trace) {
            Ok((call, span)) => Deciding { table: &self.inner.table, stage: Stage::Waiting(call) }.instrument(span),
            Err(e) => self.refuse(e),
        }
    }

    fn refuse(&self, error: ClientError) -> Instrumented<Deciding<'_>> {
        Deciding { table: &self.inner.table, stage: Stage::Refused(Box::new(error)) }.instrument(tracing::Span::none())
    }

    /// Fills in what the client owns in `request`, encodes it and registers the call; its
    /// name in the table and its span. The request itself is not kept: only its bytes.
    fn submit(
        &self,
        mut request: v1::Request,
        timeout: Option<Duration>,
        trace: Option<TraceHeaders>,
    ) -> Result<(CallId, Span), ClientError> {
        let kind = kind_to_wire(request_parts(&request).ok_or(ClientError::Invalid("the request has no body"))?.kind);
        let key = request.key.as_ref().ok_or(ClientError::Invalid("the request has no call key"))?;
        let correlation = key.correlation_id(kind);
        let span = tracing::debug_span!("airlock.client", correlation_id = %correlation);
        let timeout = timeout.unwrap_or(self.inner.config.default_timeout);
        let now = now_ms();
        request.reply_to.clone_from(&self.inner.reply_queue);
        request.requested_at_unix_ms = now;
        request.deadline_unix_ms = Deadline::after(now, timeout).unix_ms();
        if let Some(keys) = &self.inner.runner_keys {
            request.runner_key = keys.public().to_vec();
        }
        if let Some(origin) = request.origin.as_mut()
            && origin.runner_id.is_empty()
        {
            origin.runner_id.clone_from(&self.inner.config.runner_id);
        }
        let body: Arc<[u8]> = request.encode_to_vec().into();
        drop(request);
        // The trace context goes with the request as the caller gave it, or only when a span
        // records it.
        let trace = trace.or_else(|| {
            (!span.is_disabled())
                .then(|| {
                    let mut headers = TraceHeaders::new();
                    airlock_telemetry::propagation::inject(&span, &mut headers);
                    headers
                })
                .filter(|headers| !headers.is_empty())
        });
        let now = Instant::now();
        let deadline = now.checked_add(timeout).unwrap_or(now + FAR_FUTURE);
        let call = Call::new(correlation, body, trace);
        let inserted = lock(&self.inner.table).insert(call, now, deadline).map_err(|refused| match refused {
            Refused::AlreadyPending(correlation) => ClientError::AlreadyPending(correlation.into()),
            Refused::Closed => ClientError::Closed,
        })?;
        if inserted.earliest {
            self.inner.sweeper.notify_one();
        }
        if inserted.first_to_publish {
            self.inner.publisher.notify_one();
        }
        Ok((inserted.call, span))
    }

    /// Publishes every pending request again (after a reconnect, the broker may have lost
    /// what was not yet confirmed). Duplicate decisions this causes are ignored.
    pub async fn resend_pending(&self) -> Result<usize, ClientError> {
        let resends = lock(&self.inner.table).to_resend();
        let count = resends.len();
        futures_util::stream::iter(resends.into_iter().map(Ok))
            .try_for_each_concurrent(MAX_PUBLISHING, |resend| {
                let message = self.inner.message(resend.correlation, resend.request, resend.trace);
                self.inner.transport.publish(&self.inner.requests, message)
            })
            .await?;
        self.inner.resent.fetch_add(count as u64, Ordering::Relaxed);
        Ok(count)
    }

    /// Sets what is done with each progress reply to a waiting call (once; `false` if one
    /// was set already).
    pub fn on_progress(&self, hook: ProgressHook) -> bool {
        self.inner.on_progress.set(hook).is_ok()
    }

    /// Withdraws a request: steps and reviewer services drop it.
    pub async fn cancel(&self, key: &v1::CallKey, kind: v1::Kind, reason: &str) {
        self.inner.cancel(key.clone(), kind, reason).await;
    }

    /// Counters for logs and tests.
    pub fn stats(&self) -> ClientStats {
        let (pending, repeated) = {
            let table = lock(&self.inner.table);
            (table.waiting(), table.repeated())
        };
        ClientStats {
            pending,
            repeated,
            ignored_replies: self.inner.ignored_replies.load(Ordering::Relaxed),
            rejected_replies: self.inner.rejected_replies.load(Ordering::Relaxed),
            timed_out: self.inner.timed_out.load(Ordering::Relaxed),
            progress_replies: self.inner.progress_replies.load(Ordering::Relaxed),
            resent: self.inner.resent.load(Ordering::Relaxed),
        }
    }

    /// Stops reading replies, fails every pending request with [`ClientError::Closed`], and
    /// deletes the reply queue: for a runner that is done. It waits at most [`CLOSE_WAIT`] for
    /// the broker at each of the two steps that need it. The transport stays open; a
    /// request made after this fails with [`ClientError::Closed`].
    pub async fn close(&self) {
        let stop = lock(&self.inner.stop_reader).take();
        let reader = lock(&self.inner.reader).take();
        if let (Some(stop), Some(mut reader)) = (stop, reader) {
            let _ = stop.send(());
            // The reader cancels its consumer on the broker, which may not answer.
            if tokio::time::timeout(CLOSE_WAIT, &mut reader).await.is_err() {
                warn!("The broker did not cancel the reply consumer in time; the reader is stopped.");
                reader.abort();
            }
        }
        // Woken outside the lock: each caller finds its call gone, `Closed`.
        let callers = lock(&self.inner.table).close();
        callers.into_iter().for_each(Waker::wake);
        self.inner.sweeper.notify_one();
        self.inner.publisher.notify_one();
        let queue = Topology::empty(self.inner.topology.prefix()).with_reply_queue(&self.inner.config.runner_id);
        match tokio::time::timeout(CLOSE_WAIT, self.inner.transport.delete(&queue)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!(error = %e, "Could not delete the reply queue; it expires on its own."),
            Err(_) => warn!("The broker did not delete the reply queue in time; it expires on its own."),
        }
    }

    /// The queue replies come back on.
    pub fn reply_queue(&self) -> &str {
        &self.inner.reply_queue
    }
}

/// The future of one call: polls the call's entry in the client's table until it is
/// settled. Dropped before, it takes the entry out (the caller stopped waiting).
struct Deciding<'a> {
    table: &'a Mutex<Table>,
    stage: Stage,
}

enum Stage {
    /// The call's name in the table.
    Waiting(CallId),
    /// Why there is no call, until told.
    Refused(Box<ClientError>),
    /// The outcome was told: the entry is gone.
    Done,
}

impl Future for Deciding<'_> {
    type Output = Result<v1::Decision, ClientError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Waiting(call) => {
                let polled = lock(self.table).poll(call, cx.waker());
                if polled.is_pending() {
                    self.stage = Stage::Waiting(call);
                }
                polled
            }
            Stage::Refused(refused) => Poll::Ready(Err(*refused)),
            Stage::Done => Poll::Ready(Err(ClientError::Closed)),
        }
    }
}

impl Drop for Deciding<'_> {
    fn drop(&mut self) {
        if let Stage::Waiting(call) = self.stage {
            lock(self.table).forget(call);
        }
    }
}
impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        // The sweeper and the publisher wait on these without keeping the client alive.
        self.sweeper.notify_one();
        self.publisher.notify_one();
    }
}

/// Locks `mutex`; a panic elsewhere while it was held leaves nothing half-done here.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
