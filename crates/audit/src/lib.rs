//! The auditor: every final decision the workers publish, written as one JSON line ([`airlock_records::view::DecisionRecord`]) exactly once, with the
//! argument and metadata keys the operator names masked; and the questions asked of the
//! file afterwards.
//!
//! The log's queue `<prefix>.audit` is durable and bound to the routing exchange under every
//! decision's key (`approval.*`, `review.*`): the broker copies each reply that carries a
//! decision there, so decisions made while the auditor is down wait for it. Only the workers
//! may publish to that exchange; the reply's proof is for its runner, and not checked here. A line is written and flushed before its
//! message is acknowledged; a redelivered decision whose id is already in the file is not
//! written again.
//!
//! Layout:
//! - [`log`]: the decision log file: ids already written, masking, appending.
//! - [`query`]: the records of a log that match filters (`airlock audit query`).
//! - [`run`]: declare the queue, then serve it with the role loop of
//!   `airlock_transport::serve`, one delivery after another ([`Auditor::handle`]).
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod log;
pub mod query;

use std::future::Future;
use std::sync::{Arc, Mutex};

use airlock_contract::v1;
use airlock_records::code::DeadReason;
use airlock_telemetry::events::DeadLettered;
use airlock_transport::{Delivery, Order, Serve, Topology, Transport, TransportError};
use prost::Message as _;
use tracing::{info, warn};

pub use crate::log::DecisionLog;
use crate::log::LogError;

/// The queue the auditor reads, after the prefix.
pub const AUDIT_QUEUE: &str = airlock_transport::topology::AUDIT;

/// Deliveries the auditor holds unacknowledged at once; lines are written one at a time.
const PREFETCH: u16 = 256;

/// How an auditor runs. The log is opened (with [`DecisionLog::open`]) before the broker is
/// reached, so a bad path is a configuration error found first.
#[derive(Debug)]
pub struct AuditConfig {
    /// The fleet's prefix: every queue and exchange name starts with it.
    pub prefix: String,
    /// The decision log to append to.
    pub log: DecisionLog,
}

/// The auditor could not start or keep running.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The decision log cannot be read or written.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The transport failed.
    #[error("{context}: {source}")]
    Transport {
        /// What the auditor was doing.
        context: String,
        /// Why it failed.
        source: TransportError,
    },
}

/// The auditor's queue and its bindings to every decision of the fleet of `prefix`.
pub fn topology(prefix: &str) -> Topology {
    Topology::empty(prefix).with_decisions_queue(AUDIT_QUEUE)
}

/// Runs an auditor until `shutdown` resolves or the transport closes: declares its queue,
/// writes every decision, then stops consuming and closes the transport.
pub async fn run<T: Transport>(
    transport: T,
    config: AuditConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), AuditError> {
    let topology = topology(&config.prefix);
    let queue = topology.name(AUDIT_QUEUE);
    let transport_error = |context: &str| {
        let context = context.to_owned();
        move |source| AuditError::Transport { context, source }
    };
    transport
        .declare_own(&Topology::new(config.prefix.clone()), &topology)
        .await
        .map_err(transport_error(&format!("declaring {queue}")))?;
    let decisions =
        transport.consume(&queue, PREFETCH).await.map_err(transport_error(&format!("consuming {queue}")))?;
    info!(prefix = %config.prefix, out = %config.log.path().display(), "Auditor writing the decision log.");
    let auditor = Arc::new(Auditor { transport: transport.clone(), topology, log: Mutex::new(config.log) });
    // In order: each line is written and flushed before its delivery is acknowledged, and a
    // log that cannot be written stops the auditor with the delivery unacknowledged.
    let handle = |(), delivery| {
        let auditor = auditor.clone();
        async move { auditor.handle(delivery).await }
    };
    let result = Serve::new().consume((), decisions).order(Order::InOrder).try_run(handle, shutdown).await;
    transport.close().await;
    info!("Auditor stopped.");
    result
}

/// What the auditor does with one delivery.
pub struct Auditor<T> {
    transport: T,
    topology: Topology,
    log: Mutex<DecisionLog>,
}

impl<T: Transport> Auditor<T> {
    /// Writes the delivery's decision to the log (unless it is there already) and
    /// acknowledges it; dead-letters a message that is not a reply carrying a decision. Fails
    /// only when the log cannot be written, leaving the delivery unacknowledged.
    pub async fn handle(&self, delivery: Delivery) -> Result<(), AuditError> {
        let Some(decision) = decision_of(&delivery.message.body) else {
            let reason = DeadReason::bad_message("not an airlock.v1.Reply carrying a Decision");
            // The auditor serves no metrics: the dead letter is logged, not counted.
            DeadLettered { reason }.emit(&self.transport, &self.topology, delivery, None).await;
            return Ok(());
        };
        self.log.lock().expect("decision log lock").append(&decision)?;
        if let Err(e) = delivery.ack().await {
            // Redelivered later, and recognised by its id.
            warn!(error = %e, "Acknowledgement failed.");
        }
        Ok(())
    }
}

/// The decision a worker's reply carries.
fn decision_of(reply: &[u8]) -> Option<v1::Decision> {
    let reply = v1::Reply::decode(reply).ok()?;
    match v1::ReplyBody::decode(reply.body.as_slice()).ok()?.body? {
        v1::reply_body::Body::Decision(decision) => Some(decision),
        v1::reply_body::Body::Error(_) | v1::reply_body::Body::Progress(_) => None,
    }
}
