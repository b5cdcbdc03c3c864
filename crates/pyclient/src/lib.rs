//! The runner's client for Python: the module `airlock._native` of the Inspect integration.
//!
//! Inspect runs an eval on one thread and keeps it busy, so the client keeps off that thread:
//! a tokio runtime on a thread of its own runs [`airlock_client::Client`] over the AMQP
//! transport, which keeps the broker's nodes, TLS, reconnects and resends, the fleet's proofs,
//! deadlines and cancels. Python hands over a request's bytes with a ticket and returns at
//! once. Each outcome goes into one queue (the [`Outbox`]); the first one since the queue was
//! last drained rings a bell, a byte on a socket whose other end Python's event loop watches,
//! and its callback drains every outcome in one call. No runtime thread ever takes the GIL.
//!
//! The runner declares its reply queue and its binding only, as the workers declare the
//! fleet: until they have, a request waits (retrying with backoff) and, at its deadline, is
//! unanswered with the reason. So is one the broker refuses or cannot route.
//!
//! Layout: [`Client`], the Python class; `Shared`, what its tasks share; `ask` and
//! `connect`, the tasks; `Outbox` and [`Completion`], the way back.
#![deny(rust_2018_idioms)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use airlock_client::{
    Client as FleetClient, ClientConfig, ClientError, Repeats, ReplyTrust, TIMEOUT_APPROVER, TraceHeaders,
};
use airlock_contract::v1;
use airlock_integrity::{Fleet, PublicKeys};
use airlock_transport::{AmqpOptions, AmqpTransport, Topology, Transport, TransportError};
use prost::Message as _;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// Backoff of a request that could not be sent, and of the runner's declarations.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(2);
/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long closing may take before the runtime is dropped with what still runs.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// A timeout longer than this is capped (a year: nothing waits that long).
const LONGEST: Duration = Duration::from_secs(365 * 86_400);

/// What a drained completion is, its first item.
const ANSWERED: u8 = 0;
const UNANSWERED: u8 = 1;
const FAILED: u8 = 2;
const PROGRESS: u8 = 3;

/// How a request ended, or a progress of one, as Python drains it.
#[derive(Debug, PartialEq, Eq)]
pub enum Completion {
    /// The fleet's answer, an encoded `ReplyBody`: its decision (proved when the client has
    /// the fleet's keys), or the `Error` it answered with.
    Answered { ticket: u64, body: Vec<u8> },
    /// No decision before the deadline, with what kept it from coming when that is known.
    Unanswered { ticket: u64, reason: Option<String> },
    /// The request could not be asked (unreadable, or the client closed).
    Failed { ticket: u64, message: String },
    /// A progress reply (unproved) to the call waiting under `correlation`, encoded.
    Progress { correlation: String, progress: Vec<u8> },
}

impl Completion {
    /// `(kind, ticket, first, second)`: a progress has ticket 0, its correlation id and bytes.
    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let none = || py.None().into_bound(py);
        let items: [Bound<'py, PyAny>; 4] = match self {
            Completion::Answered { ticket, body } => [
                ANSWERED.into_pyobject(py)?.into_any(),
                ticket.into_pyobject(py)?.into_any(),
                PyBytes::new(py, body).into_any(),
                none(),
            ],
            Completion::Unanswered { ticket, reason } => [
                UNANSWERED.into_pyobject(py)?.into_any(),
                ticket.into_pyobject(py)?.into_any(),
                reason.into_pyobject(py)?.into_any(),
                none(),
            ],
            Completion::Failed { ticket, message } => [
                FAILED.into_pyobject(py)?.into_any(),
                ticket.into_pyobject(py)?.into_any(),
                message.into_pyobject(py)?.into_any(),
                none(),
            ],
            Completion::Progress { correlation, progress } => [
                PROGRESS.into_pyobject(py)?.into_any(),
                0u64.into_pyobject(py)?.into_any(),
                correlation.into_pyobject(py)?.into_any(),
                PyBytes::new(py, progress).into_any(),
            ],
        };
        PyTuple::new(py, items)
    }
}

/// The completions not yet drained, and the bell that says there are some.
pub struct Outbox {
    queue: Mutex<Vec<Completion>>,
    /// Whether the bell rang since the queue was last drained: one byte per drain at most.
    rung: AtomicBool,
    bell: UnixStream,
}

impl Outbox {
    /// An outbox ringing `bell`.
    pub fn new(bell: UnixStream) -> Self {
        Outbox { queue: Mutex::new(Vec::new()), rung: AtomicBool::new(false), bell }
    }

    /// Queues `completion`; rings the bell unless it rang since the last drain.
    pub fn push(&self, completion: Completion) {
        lock(&self.queue).push(completion);
        if !self.rung.swap(true, Ordering::AcqRel) {
            // A full socket buffer means the bell is ringing already.
            let _ = (&self.bell).write(&[1]);
        }
    }

    /// Every completion queued so far, once `bell` (the other end) was emptied. A completion
    /// queued meanwhile is either taken now or rings again.
    pub fn drain(&self, bell: &UnixStream) -> Vec<Completion> {
        let mut bytes = [0u8; 64];
        while matches!((&*bell).read(&mut bytes), Ok(n) if n > 0) {}
        self.rung.store(false, Ordering::Release);
        std::mem::take(&mut *lock(&self.queue))
    }
}

/// What the class and its tasks share.
struct Shared {
    outbox: Outbox,
    /// The broker's URLs without credentials, for reasons.
    nodes: String,
    prefix: String,
    runner_id: String,
    /// The transport, once connected.
    transport: watch::Sender<Option<AmqpTransport>>,
    /// The fleet client, once the runner's reply queue is declared.
    client: watch::Sender<Option<FleetClient<AmqpTransport>>>,
    /// Why there is no client yet (the broker away, no fleet on the prefix).
    problem: Mutex<Option<String>>,
    /// The tasks of the calls under way, by ticket.
    calls: Mutex<HashMap<u64, AbortHandle>>,
    /// Calls not yet handed to the fleet client.
    unsent: AtomicUsize,
    /// Calls that ran out of time before the fleet client took them.
    timed_out: AtomicU64,
    /// The fleet's exchanges went away, and the reply queue's binding with them: every call
    /// binds it again (once `<prefix>.route` is back) before its request is sent.
    unbound: AtomicBool,
}

impl Shared {
    /// Why `error` kept a request from the fleet.
    fn explain(&self, error: &TransportError) -> String {
        match error {
            TransportError::Nack { .. } => {
                format!("the broker at {} refused the request (a negative confirm)", self.nodes)
            }
            TransportError::Unroutable { .. } => self.no_fleet(&format!("no queue {}.requests", self.prefix)),
            TransportError::NotFound { what } => self.no_fleet(&format!("no {what}")),
            TransportError::Unavailable(source) => {
                format!("the broker at {} could not be reached: {}", self.nodes, chain(source.as_ref()))
            }
            other => format!("the broker at {} could not be reached: {}", self.nodes, chain(other)),
        }
    }

    /// Why the runner's reply queue could not be declared: its binding needs `<prefix>.route`.
    fn explain_own(&self, error: &TransportError) -> String {
        match error {
            TransportError::NotFound { .. } => self.no_fleet(&format!("no exchange {}.route", self.prefix)),
            other => self.explain(other),
        }
    }

    fn no_fleet(&self, missing: &str) -> String {
        format!("{missing} on the broker at {}: no Airlock fleet runs on prefix '{}'", self.nodes, self.prefix)
    }

    /// Why nothing came, when the connection is down now.
    fn lost(&self) -> Option<String> {
        let connected = self.transport.borrow().as_ref().is_none_or(AmqpTransport::is_connected);
        (!connected).then(|| format!("the connection to the broker at {} was lost; reconnecting", self.nodes))
    }

    fn set_problem(&self, problem: Option<String>) {
        *lock(&self.problem) = problem;
    }

    /// The runner's own topology: its reply queue, bound to `<prefix>.route`.
    fn own(&self) -> Topology {
        Topology::empty(self.prefix.clone()).with_reply_queue(&self.runner_id)
    }
}

/// An error with its causes, `: `-separated.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}

/// What a client made with neither `fleet_keys` nor `insecure` is told.
const NO_FLEET_KEYS: &str = "no fleet public key: pass fleet_keys (the text of the fleet's fleet.pub), or \
     insecure=True to take replies unproved (insecure accepts forged decisions)";

/// A runner's link to one fleet, on a runtime of its own.
#[pyclass(module = "airlock._native", frozen)]
pub struct Client {
    shared: Arc<Shared>,
    handle: Handle,
    runtime: Mutex<Option<Runtime>>,
    /// The bell's end Python watches.
    bell: UnixStream,
}

#[pymethods]
impl Client {
    /// Connects in the background to the broker at `url` (the comma-separated URLs of a
    /// cluster's nodes), as `runner_id`, under `connection_name`; `nodes` is `url` without
    /// credentials. With `ca_file` an `amqps://` broker is verified against it. Replies are
    /// taken only with their proof by `fleet_keys` (a fleet public key file's text), or, with
    /// `insecure` instead, unproved; one of the two is required.
    #[new]
    #[pyo3(signature = (url, nodes, prefix, runner_id, connection_name, ca_file=None, fleet_keys=None, insecure=false))]
    #[allow(clippy::too_many_arguments, reason = "Python's keyword arguments, each one a setting")]
    fn new(
        url: String,
        nodes: String,
        prefix: String,
        runner_id: String,
        connection_name: String,
        ca_file: Option<PathBuf>,
        fleet_keys: Option<&str>,
        insecure: bool,
    ) -> PyResult<Self> {
        let replies = match (fleet_keys, insecure) {
            (Some(_), true) => return Err(PyValueError::new_err("fleet_keys and insecure exclude each other")),
            (Some(text), false) => PublicKeys::<Fleet>::parse(text, "verify_key")
                .map(ReplyTrust::Proved)
                .map_err(|e| PyValueError::new_err(e.to_string()))?,
            (None, true) => ReplyTrust::Insecure,
            (None, false) => return Err(PyValueError::new_err(NO_FLEET_KEYS)),
        };
        let (ours, theirs) = UnixStream::pair().map_err(|e| PyOSError::new_err(e.to_string()))?;
        ours.set_nonblocking(true).map_err(|e| PyOSError::new_err(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("airlock-client")
            .enable_all()
            .build()
            .map_err(|e| PyOSError::new_err(e.to_string()))?;
        let shared = Arc::new(Shared {
            outbox: Outbox::new(theirs),
            nodes,
            prefix: prefix.clone(),
            runner_id: runner_id.clone(),
            transport: watch::Sender::new(None),
            client: watch::Sender::new(None),
            problem: Mutex::new(None),
            calls: Mutex::new(HashMap::new()),
            unsent: AtomicUsize::new(0),
            timed_out: AtomicU64::new(0),
            unbound: AtomicBool::new(false),
        });
        let mut options = AmqpOptions::new(url).with_connection_name(connection_name).with_ca_file(ca_file);
        options.connect_timeout = CONNECT_TIMEOUT;
        let config = ClientConfig { prefix, runner_id, default_timeout: LONGEST, replies, repeats: Repeats::default() };
        runtime.spawn(connect(Arc::downgrade(&shared), options, config));
        Ok(Client { shared, handle: runtime.handle().clone(), runtime: Mutex::new(Some(runtime)), bell: ours })
    }

    /// The file descriptor that becomes readable when completions wait to be drained.
    fn fileno(&self) -> i32 {
        self.bell.as_raw_fd()
    }

    /// Asks for a decision on `request` (an encoded `airlock.v1.Request`), waiting at most
    /// `timeout` seconds, published with the caller's `trace` context (`traceparent`,
    /// `tracestate`); its completion carries `ticket`. Returns at once.
    #[pyo3(signature = (ticket, request, timeout, trace=None))]
    fn ask(&self, ticket: u64, request: &[u8], timeout: f64, trace: Option<TraceHeaders>) -> PyResult<()> {
        let timeout = Duration::try_from_secs_f64(timeout)
            .map_err(|e| PyValueError::new_err(format!("timeout {timeout}: {e}")))?
            .min(LONGEST);
        let shared = self.shared.clone();
        shared.unsent.fetch_add(1, Ordering::Relaxed);
        let unsent = Unsent(Some(shared.clone()));
        // Held while spawning: the task takes its entry out only once it is in.
        let mut calls = lock(&self.shared.calls);
        let asked = Asked { ticket, request: request.to_vec(), timeout, trace: trace.unwrap_or_default() };
        let task = self.handle.spawn(ask(shared, asked, unsent));
        calls.insert(ticket, task.abort_handle());
        Ok(())
    }

    /// Stops waiting for the call of `ticket` (its sample ended); with `cancel` (an encoded
    /// `airlock.v1.Cancel`) its request is withdrawn too. Nothing completes for it.
    #[pyo3(signature = (ticket, cancel=None))]
    fn cancel(&self, ticket: u64, cancel: Option<&[u8]>) {
        if let Some(task) = lock(&self.shared.calls).remove(&ticket) {
            task.abort();
        }
        let Some(cancel) = cancel.and_then(|bytes| v1::Cancel::decode(bytes).ok()) else { return };
        let Some(client) = self.shared.client.borrow().clone() else { return };
        self.handle.spawn(async move {
            if let Some(key) = &cancel.key {
                client.cancel(key, cancel.kind(), &cancel.reason).await;
            }
        });
    }

    /// Every completion since the last drain, as `(kind, ticket, first, second)` tuples.
    fn drain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let completions = self.shared.outbox.drain(&self.bell);
        let items = completions.iter().map(|completion| completion.to_python(py)).collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// `(unsent, ignored, rejected, timed out, resent, progress replies, repeated)`.
    fn stats(&self) -> (usize, u64, u64, u64, u64, u64, u64) {
        let client = self.shared.client.borrow().as_ref().map(FleetClient::stats).unwrap_or_default();
        (
            self.shared.unsent.load(Ordering::Relaxed),
            client.ignored_replies,
            client.rejected_replies,
            client.timed_out + self.shared.timed_out.load(Ordering::Relaxed),
            client.resent,
            client.progress_replies,
            client.repeated,
        )
    }

    /// Deletes the reply queue and closes the connection, then stops the runtime; blocks (the
    /// GIL released) for at most a few seconds. Calls still waiting complete as failed.
    fn close(&self, py: Python<'_>) {
        let Some(runtime) = lock(&self.runtime).take() else { return };
        let shared = self.shared.clone();
        py.detach(move || {
            runtime.block_on(async {
                let closing = async {
                    if let Some(client) = shared.client.send_replace(None) {
                        client.close().await;
                    }
                    if let Some(transport) = shared.transport.send_replace(None) {
                        transport.close().await;
                    }
                };
                let _ = tokio::time::timeout(CLOSE_TIMEOUT, closing).await;
            });
            runtime.shutdown_timeout(Duration::from_secs(1));
        });
    }
}

/// Takes a call out of the unsent count when it is handed over, or dropped (cancelled).
struct Unsent(Option<Arc<Shared>>);

impl Unsent {
    fn sent(&mut self) {
        if let Some(shared) = self.0.take() {
            shared.unsent.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Unsent {
    fn drop(&mut self) {
        self.sent();
    }
}

/// One call: its outcome goes to the outbox, unless it was cancelled meanwhile.
/// One call as Python asked it.
struct Asked {
    ticket: u64,
    request: Vec<u8>,
    timeout: Duration,
    trace: TraceHeaders,
}

async fn ask(shared: Arc<Shared>, asked: Asked, unsent: Unsent) {
    let ticket = asked.ticket;
    let completion = decide(&shared, asked, unsent).await;
    if lock(&shared.calls).remove(&ticket).is_some() {
        shared.outbox.push(completion);
    }
}

async fn decide(shared: &Shared, asked: Asked, mut unsent: Unsent) -> Completion {
    let Asked { ticket, request, timeout, trace } = asked;
    let now = Instant::now();
    let deadline = now.checked_add(timeout).unwrap_or(now + LONGEST);
    let mut clients = shared.client.subscribe();
    let mut problem: Option<String> = None;
    let mut delay = RETRY_FIRST;
    loop {
        let client = match tokio::time::timeout_at(deadline, clients.wait_for(Option::is_some)).await {
            Ok(Ok(client)) => client.clone(),
            Ok(Err(_)) => return Completion::Failed { ticket, message: "the Airlock client was closed".into() },
            Err(_) => {
                shared.timed_out.fetch_add(1, Ordering::Relaxed);
                return Completion::Unanswered { ticket, reason: problem.or_else(|| lock(&shared.problem).clone()) };
            }
        };
        let Some(client) = client else { continue };
        let transport = shared.transport.borrow().clone();
        if shared.unbound.load(Ordering::Acquire)
            && let Some(transport) = transport
        {
            match transport.declare(&shared.own()).await {
                Ok(()) => shared.unbound.store(false, Ordering::Release),
                Err(e) => problem = Some(shared.explain_own(&e)),
            }
        }
        if !shared.unbound.load(Ordering::Acquire) {
            let asked = match v1::Request::decode(request.as_slice()) {
                Ok(asked) => asked,
                Err(e) => return Completion::Failed { ticket, message: format!("not an airlock.v1.Request: {e}") },
            };
            unsent.sent();
            let left = deadline.saturating_duration_since(Instant::now());
            let error = match client.decide_in_trace(asked, Some(left), trace.clone()).await {
                Ok(decision) if decision.approver == TIMEOUT_APPROVER && decision.decided_by == shared.runner_id => {
                    return Completion::Unanswered { ticket, reason: problem.or_else(|| shared.lost()) };
                }
                Ok(decision) => return answered(ticket, v1::reply_body::Body::Decision(decision)),
                Err(ClientError::Refused { code, message }) => {
                    let error = v1::Error { code, message, ..Default::default() };
                    return answered(ticket, v1::reply_body::Body::Error(error));
                }
                Err(ClientError::Transport(error)) => error,
                Err(other) => return Completion::Failed { ticket, message: other.to_string() },
            };
            problem = Some(shared.explain(&error));
            if matches!(error, TransportError::NotFound { .. } | TransportError::Unroutable { .. }) {
                shared.unbound.store(true, Ordering::Release);
            }
        }
        let retry = Instant::now() + delay;
        if retry >= deadline {
            tokio::time::sleep_until(deadline).await;
            shared.timed_out.fetch_add(1, Ordering::Relaxed);
            return Completion::Unanswered { ticket, reason: problem };
        }
        tokio::time::sleep_until(retry).await;
        delay = (delay * 2).min(RETRY_MAX);
    }
}

fn answered(ticket: u64, body: v1::reply_body::Body) -> Completion {
    Completion::Answered { ticket, body: v1::ReplyBody { body: Some(body) }.encode_to_vec() }
}

/// Connects to the broker and declares the runner's reply queue, retrying with backoff
/// (recording why each attempt failed) until both are done, or the class is gone.
async fn connect(shared: Weak<Shared>, options: AmqpOptions, config: ClientConfig) {
    let mut delay = RETRY_FIRST;
    loop {
        let Some(strong) = shared.upgrade() else { return };
        let existing = strong.transport.borrow().clone();
        let transport = match existing {
            Some(transport) => Ok(transport),
            None => AmqpTransport::connect_with(options.clone()).await,
        };
        match transport {
            Ok(transport) => {
                strong.transport.send_replace(Some(transport.clone()));
                match FleetClient::connect_own(transport, config.clone()).await {
                    Ok(client) => {
                        let outbox = Arc::downgrade(&strong);
                        client.on_progress(Box::new(move |correlation, progress| {
                            if let Some(shared) = outbox.upgrade() {
                                let progress = progress.encode_to_vec();
                                shared.outbox.push(Completion::Progress { correlation: correlation.into(), progress });
                            }
                        }));
                        strong.set_problem(None);
                        strong.client.send_replace(Some(client));
                        return;
                    }
                    Err(ClientError::Transport(error)) => strong.set_problem(Some(strong.explain_own(&error))),
                    Err(error) => strong.set_problem(Some(error.to_string())),
                }
            }
            Err(error) => strong.set_problem(Some(strong.explain(&error))),
        }
        drop(strong);
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(RETRY_MAX);
    }
}

/// Locks `mutex`; a panic elsewhere while it was held leaves nothing half-done here.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The module: [`Client`] and the kinds of completion.
#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Client>()?;
    module.add("ANSWERED", ANSWERED)?;
    module.add("UNANSWERED", UNANSWERED)?;
    module.add("FAILED", FAILED)?;
    module.add("PROGRESS", PROGRESS)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::ErrorKind;

    use super::*;

    fn decided(ticket: u64) -> Completion {
        Completion::Answered { ticket, body: vec![] }
    }

    #[test]
    fn one_drain_takes_every_completion_and_the_bell_rings_once_per_drain() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let outbox = Outbox::new(theirs);
        for ticket in 1..=3 {
            outbox.push(decided(ticket));
        }
        let mut bytes = [0u8; 8];
        assert_eq!((&ours).read(&mut bytes).unwrap(), 1, "one ring for three completions");
        outbox.push(decided(4));
        assert_eq!(outbox.drain(&ours), [decided(1), decided(2), decided(3), decided(4)]);
        assert_eq!((&ours).read(&mut bytes).unwrap_err().kind(), ErrorKind::WouldBlock, "nothing rang since");
        assert!(outbox.drain(&ours).is_empty());
        outbox.push(decided(5));
        assert_eq!((&ours).read(&mut bytes).unwrap(), 1, "a completion after a drain rings again");
    }

    #[test]
    fn a_drain_empties_the_bell() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let outbox = Outbox::new(theirs);
        outbox.push(decided(1));
        assert_eq!(outbox.drain(&ours), [decided(1)]);
        let mut bytes = [0u8; 8];
        assert_eq!((&ours).read(&mut bytes).unwrap_err().kind(), ErrorKind::WouldBlock);
    }

    #[test]
    fn causes_are_explained_once() {
        let error = TransportError::Unavailable("connection refused".into());
        assert_eq!(chain(&error), "the broker is unavailable: connection refused");
    }
}
