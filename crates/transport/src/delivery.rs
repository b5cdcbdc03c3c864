//! A received message, how it is settled, and the stream of them.
//!
//! [`Acker`] and [`Consumer`] dispatch over a closed enum of the two transports, so this
//! module and [`amqp`] and [`memory`] use each other: each transport builds the [`Delivery`]s
//! it hands out, and settling one comes back to the transport that made it. The cycle is kept
//! on purpose: the set of transports is closed (the broker, and the in-memory one for tests),
//! and a match costs neither a boxed trait object per delivery nor an async trait that could
//! not be object-safe; a third transport adds one arm to each enum here.

use crate::{Message, TransportError, amqp, memory};

/// A message taken from a queue, waiting to be settled with [`ack`](Self::ack),
/// [`nack_requeue`](Self::nack_requeue) or [`reject`](Self::reject).
///
/// A delivery that is never settled stays with its consumer until the consumer is dropped or
/// its connection is lost; then the broker delivers it again.
#[derive(Debug)]
pub struct Delivery {
    /// The message.
    pub message: Message,
    /// Whether the message was delivered before (to this or another consumer) and not acked.
    pub redelivered: bool,
    /// How many times the message was returned to its queue (the quorum queue's
    /// `x-delivery-count`); `0` on a first delivery.
    pub delivery_count: u32,
    acker: Acker,
}

impl Delivery {
    pub(crate) fn new(message: Message, redelivered: bool, delivery_count: u32, acker: Acker) -> Self {
        Self { message, redelivered, delivery_count, acker }
    }

    /// The queue the message came from.
    pub fn queue(&self) -> &str {
        self.acker.queue()
    }

    /// Splits the delivery into its message and the handle that settles it.
    pub fn into_parts(self) -> (Message, Acker) {
        (self.message, self.acker)
    }

    /// Acknowledges the delivery: the broker forgets the message.
    pub async fn ack(self) -> Result<(), TransportError> {
        self.acker.ack().await
    }

    /// Acknowledges the delivery and every earlier one of its consumer not settled yet; see
    /// [`Acker::ack_through`].
    pub async fn ack_through(self) -> Result<(), TransportError> {
        self.acker.ack_through().await
    }

    /// Returns the message to its queue for another try. Past the queue's delivery limit it
    /// is dead-lettered instead.
    pub async fn nack_requeue(self) -> Result<(), TransportError> {
        self.acker.nack_requeue().await
    }

    /// Refuses the message for good: it goes to the queue's dead-letter exchange.
    pub async fn reject(self) -> Result<(), TransportError> {
        self.acker.reject().await
    }
}

/// Settles one delivery. All three methods fail with [`TransportError::ChannelClosed`] once
/// the delivery's consumer was dropped or its connection lost: the broker has already taken
/// the message back and delivers it again.
#[derive(Debug)]
pub struct Acker(pub(crate) AckerInner);

#[derive(Debug)]
pub(crate) enum AckerInner {
    Amqp(amqp::AmqpAcker),
    Memory(memory::MemoryAcker),
}

impl Acker {
    /// The queue the delivery came from.
    pub fn queue(&self) -> &str {
        match &self.0 {
            AckerInner::Amqp(acker) => acker.queue(),
            AckerInner::Memory(acker) => acker.queue(),
        }
    }

    /// See [`Delivery::ack`].
    pub async fn ack(self) -> Result<(), TransportError> {
        match self.0 {
            AckerInner::Amqp(acker) => acker.ack().await,
            AckerInner::Memory(acker) => acker.settle(memory::Settle::Ack),
        }
    }

    /// Acknowledges this delivery and every earlier one of its consumer that is not settled
    /// yet, in one acknowledgement (AMQP's `multiple`): for a reader that handles its
    /// deliveries in order, so that every earlier one is done with. Keep one under way per
    /// consumer: two may reach the broker in either order, and the broker closes the channel
    /// over one whose delivery a later one settled already.
    pub async fn ack_through(self) -> Result<(), TransportError> {
        match self.0 {
            AckerInner::Amqp(acker) => acker.ack_through().await,
            AckerInner::Memory(acker) => acker.settle(memory::Settle::AckThrough),
        }
    }

    /// See [`Delivery::nack_requeue`].
    pub async fn nack_requeue(self) -> Result<(), TransportError> {
        match self.0 {
            AckerInner::Amqp(acker) => acker.nack_requeue().await,
            AckerInner::Memory(acker) => acker.settle(memory::Settle::Requeue),
        }
    }

    /// See [`Delivery::reject`].
    pub async fn reject(self) -> Result<(), TransportError> {
        match self.0 {
            AckerInner::Amqp(acker) => acker.reject().await,
            AckerInner::Memory(acker) => acker.settle(memory::Settle::Reject),
        }
    }
}

/// The deliveries of one queue, at most `prefetch` of them unsettled at a time.
///
/// Dropping the consumer gives its unsettled deliveries back to the queue (settling them
/// afterwards fails with [`TransportError::ChannelClosed`]). For a graceful stop, call
/// [`cancel`](Self::cancel), settle what is in flight, then drop the consumer.
#[derive(Debug)]
pub struct Consumer(ConsumerInner);

#[derive(Debug)]
enum ConsumerInner {
    Amqp(Box<amqp::AmqpConsumer>),
    Memory(memory::MemoryConsumer),
}

impl Consumer {
    pub(crate) fn amqp(consumer: amqp::AmqpConsumer) -> Self {
        Self(ConsumerInner::Amqp(Box::new(consumer)))
    }

    pub(crate) fn memory(consumer: memory::MemoryConsumer) -> Self {
        Self(ConsumerInner::Memory(consumer))
    }

    /// The queue consumed.
    pub fn queue(&self) -> &str {
        match &self.0 {
            ConsumerInner::Amqp(consumer) => consumer.queue(),
            ConsumerInner::Memory(consumer) => consumer.queue(),
        }
    }

    /// The next delivery; `None` once the consumer was cancelled (and what was already
    /// received is drained) or the transport closed.
    ///
    /// Connection loss does not end the stream: the consumer reconnects with backoff while
    /// this is awaited. Cancel-safe: dropping the future loses no delivery.
    pub async fn next(&mut self) -> Option<Delivery> {
        match &mut self.0 {
            ConsumerInner::Amqp(consumer) => consumer.next().await,
            ConsumerInner::Memory(consumer) => consumer.next().await,
        }
    }

    /// Stops new deliveries; those already received can still be settled.
    pub async fn cancel(&mut self) {
        match &mut self.0 {
            ConsumerInner::Amqp(consumer) => consumer.cancel().await,
            ConsumerInner::Memory(consumer) => consumer.cancel(),
        }
    }
}

/// A reader of a log ([`QueueKind::Log`](crate::QueueKind::Log)): every entry from the first
/// one kept, in the order appended, then each new one as it comes. Reading takes nothing away
/// and needs no settling.
///
/// Connection loss does not end it: it reconnects and goes on after the last entry it
/// returned, so no entry is returned twice or skipped.
#[derive(Debug)]
pub struct Follower(FollowerInner);

#[derive(Debug)]
enum FollowerInner {
    Amqp(Box<amqp::AmqpConsumer>),
    Memory(memory::MemoryFollower),
}

impl Follower {
    pub(crate) fn amqp(consumer: amqp::AmqpConsumer) -> Self {
        Self(FollowerInner::Amqp(Box::new(consumer)))
    }

    pub(crate) fn memory(follower: memory::MemoryFollower) -> Self {
        Self(FollowerInner::Memory(follower))
    }

    /// The next entry; `None` once the transport closed. Cancel-safe.
    pub async fn next(&mut self) -> Option<Message> {
        match &mut self.0 {
            FollowerInner::Amqp(consumer) => {
                let (message, acker) = consumer.next().await?.into_parts();
                // A stream keeps its entries: the acknowledgement only lets the broker send more.
                let _ = acker.ack().await;
                Some(message)
            }
            FollowerInner::Memory(follower) => follower.next().await,
        }
    }
}
