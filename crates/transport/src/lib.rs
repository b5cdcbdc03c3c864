//! Airlock's message transport: the only place that knows a broker exists.
//!
//! Workers, clients and the reviewer service publish [`Message`]s to a [`Destination`] and
//! consume [`Delivery`]s from queues through the [`Transport`] trait. Two implementations give
//! the same observable semantics:
//!
//! - [`AmqpTransport`]: RabbitMQ through lapin, with publisher confirms, manual acks, quorum
//!   queues with a dead-letter exchange and a delivery limit, and explicit recovery from
//!   connection loss.
//! - [`MemoryTransport`]: in-process queues and exchanges on tokio, for `airlock demo` and fast
//!   tests.
//!
//! Layout:
//! - [`message`]: messages, destinations and wire header names.
//! - [`topology`]: the queues and exchanges of a fleet, named from its prefix.
//! - [`delivery`]: a received message, its acknowledgement and the consumer stream.
//! - [`error`]: [`TransportError`], the variants callers branch on.
//! - [`amqp`]: the RabbitMQ implementation (the only module that touches lapin).
//! - [`memory`]: the in-process implementation.
//! - [`serve`]: the loop every consuming role runs: consume, handle, stop in order.
//! - `backoff`: capped, jittered reconnect delays.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]
#![warn(missing_docs)]

pub mod amqp;
mod backoff;
pub mod delivery;
pub mod error;
pub mod memory;
pub mod message;
pub mod serve;
pub mod topology;

use std::future::Future;

pub use amqp::{AmqpOptions, AmqpTransport};
pub use delivery::{Acker, Consumer, Delivery, Follower};
pub use error::TransportError;
pub use memory::MemoryTransport;
pub use message::{Destination, Message};
pub use serve::{Order, SHUTDOWN_GRACE, Serve};
pub use topology::{Binding, Exchange, ExchangeKind, Queue, QueueKind, Topology};

/// Moves messages between the roles of a fleet.
///
/// Delivery is at least once: a message is acknowledged by its consumer after the work it
/// caused is durable, and anything unacknowledged when a consumer or its connection goes away
/// is delivered again (with [`Delivery::redelivered`] set). Handlers must therefore be
/// idempotent on the call id.
///
/// Implementations are cheap to clone (a handle on shared state) and safe to use from many
/// tasks at once.
pub trait Transport: Clone + Send + Sync + 'static {
    /// Declares every exchange, queue and binding of `topology`.
    ///
    /// Idempotent: declaring the same topology again is a no-op. Declaring an existing name
    /// with different settings fails with [`TransportError::Precondition`]. The transport
    /// remembers what it declared and declares it again after a reconnect.
    fn declare(&self, topology: &Topology) -> impl Future<Output = Result<(), TransportError>> + Send;

    /// Declares the fleet's `core` and a role's `own` part of the topology. A broker user of a
    /// role (see `airlock topology definitions`) may not declare the core, which the workers
    /// declare; refused it, this declares `own` alone.
    fn declare_own(&self, core: &Topology, own: &Topology) -> impl Future<Output = Result<(), TransportError>> + Send {
        async move {
            let mut both = core.clone();
            both.merge(own);
            match self.declare(&both).await {
                Err(TransportError::AccessRefused { .. }) => self.declare(own).await,
                declared => declared,
            }
        }
    }

    /// Deletes the queues and exchanges of `topology`, best effort (missing ones are skipped).
    ///
    /// Messages still in the deleted queues are lost; this is for tests and tooling.
    fn delete(&self, topology: &Topology) -> impl Future<Output = Result<(), TransportError>> + Send;

    /// Publishes `message` and returns once the broker has taken responsibility for it
    /// (publisher confirm on AMQP, enqueued in memory).
    ///
    /// Publishing to a [`Destination::Queue`] that does not exist fails with
    /// [`TransportError::Unroutable`]; publishing to an exchange that routes nowhere succeeds.
    /// Many publishes may be in flight at once from many tasks.
    fn publish(
        &self,
        destination: &Destination,
        message: Message,
    ) -> impl Future<Output = Result<(), TransportError>> + Send;

    /// Starts consuming `queue` with at most `prefetch` unacknowledged deliveries at a time
    /// (`0` means unlimited).
    ///
    /// The consumer survives connection loss: it reconnects, re-declares the known topology
    /// and subscribes again on its own.
    fn consume(&self, queue: &str, prefetch: u16) -> impl Future<Output = Result<Consumer, TransportError>> + Send;

    /// Reads the log `log` (a [`QueueKind::Log`]) from its first entry kept, then follows it.
    fn follow(&self, log: &str) -> impl Future<Output = Result<Follower, TransportError>> + Send;

    /// Counts reconnections to the broker after the first connection. What was in flight
    /// when a connection dropped may be uncertain; a subscriber can send it again.
    fn reconnects(&self) -> tokio::sync::watch::Receiver<u64>;

    /// Counts the messages ready for delivery in `queue` (not counting unacknowledged ones).
    fn message_count(&self, queue: &str) -> impl Future<Output = Result<u32, TransportError>> + Send;

    /// Closes the transport: consumers end, later publishes fail with
    /// [`TransportError::Closed`], and unacknowledged deliveries go back to their queues.
    fn close(&self) -> impl Future<Output = ()> + Send;

    /// Sends `delivery` to the dead-letter exchange of `topology` with `reason` in the
    /// [`message::HEADER_REASON`] header, then acknowledges the original.
    ///
    /// Used for messages that can never be handled (malformed, unknown version), so the reason
    /// is visible in the dead queue. The routing key is the queue the delivery came from.
    /// If the publish fails, the delivery is returned to its queue (and, past the delivery
    /// limit, dead-lettered by the broker without the reason) and the error is returned.
    fn publish_dead(
        &self,
        topology: &Topology,
        delivery: Delivery,
        reason: &str,
    ) -> impl Future<Output = Result<(), TransportError>> + Send {
        async move {
            let (mut message, acker) = delivery.into_parts();
            message.headers.insert(message::HEADER_REASON.to_owned(), reason.to_owned());
            let destination = Destination::exchange(topology.dead_letter_exchange(), acker.queue());
            match self.publish(&destination, message).await {
                Ok(()) => acker.ack().await,
                Err(error) => {
                    // Not stuck with this consumer: back to the queue, where the delivery
                    // limit ends its loop if the dead-letter exchange stays unreachable.
                    let _ = acker.nack_requeue().await;
                    Err(error)
                }
            }
        }
    }
}
