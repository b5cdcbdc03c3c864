//! Messages, where they go, and the names of the headers Airlock reads and writes.

use std::{collections::BTreeMap, fmt};

use bytes::Bytes;

use crate::TransportError;

/// Header carrying why a message was sent to the dead-letter exchange by
/// [`Transport::publish_dead`](crate::Transport::publish_dead).
pub const HEADER_REASON: &str = "x-airlock-reason";
/// Header carrying the W3C trace context of the message's producer.
pub const HEADER_TRACEPARENT: &str = "traceparent";
/// Header a RabbitMQ quorum queue sets to the number of times a message was returned to it.
pub const HEADER_DELIVERY_COUNT: &str = "x-delivery-count";
/// Header the broker sets on a dead-lettered message: why it was dead-lettered the first time
/// ([`DEATH_REJECTED`] or [`DEATH_DELIVERY_LIMIT`]).
pub const HEADER_FIRST_DEATH_REASON: &str = "x-first-death-reason";
/// Header the broker sets on a dead-lettered message: the queue it was dead-lettered from.
pub const HEADER_FIRST_DEATH_QUEUE: &str = "x-first-death-queue";
/// [`HEADER_FIRST_DEATH_REASON`] of a message a consumer rejected.
pub const DEATH_REJECTED: &str = "rejected";
/// [`HEADER_FIRST_DEATH_REASON`] of a message returned more often than the delivery limit.
pub const DEATH_DELIVERY_LIMIT: &str = "delivery_limit";

/// The longest name or property AMQP carries (a "short string").
pub const MAX_SHORT_STRING: usize = 255;

/// A message as it travels: an opaque body (protobuf in Airlock) and a few properties.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// The payload.
    pub body: Bytes,
    /// Correlates a reply with its request (Airlock uses the call key).
    pub correlation_id: Option<String>,
    /// The queue a reply should go to.
    pub reply_to: Option<String>,
    /// String headers: reasons, W3C `traceparent`. Non-string broker headers are not carried.
    pub headers: BTreeMap<String, String>,
    /// A producer-chosen id, for deduplication.
    pub message_id: Option<String>,
    /// The broker user that published it. The AMQP transport sets it to its own user on
    /// every publish, and RabbitMQ refuses a publish whose `user_id` is not the publisher's
    /// user, so a received value is the broker's word; absent when the publisher gave none.
    /// The in-memory transport, inside one process, carries what the publisher set.
    pub user_id: Option<String>,
}

impl Message {
    /// A message with `body` and no properties.
    pub fn new(body: impl Into<Bytes>) -> Self {
        Self { body: body.into(), ..Self::default() }
    }

    /// Sets the correlation id.
    #[must_use]
    pub fn with_correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }

    /// Sets the reply queue.
    #[must_use]
    pub fn with_reply_to(mut self, queue: impl Into<String>) -> Self {
        self.reply_to = Some(queue.into());
        self
    }

    /// Sets the message id.
    #[must_use]
    pub fn with_message_id(mut self, id: impl Into<String>) -> Self {
        self.message_id = Some(id.into());
        self
    }

    /// Adds a string header.
    #[must_use]
    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(key.into(), value.into());
        self
    }

    /// Checks the limits AMQP puts on properties, so both transports refuse the same messages.
    pub(crate) fn validate(&self) -> Result<(), TransportError> {
        let short = [
            ("correlation_id", self.correlation_id.as_deref()),
            ("reply_to", self.reply_to.as_deref()),
            ("message_id", self.message_id.as_deref()),
        ];
        for (what, value) in short {
            if let Some(value) = value {
                check_short(what, value)?;
            }
        }
        for key in self.headers.keys() {
            check_short("header name", key)?;
        }
        Ok(())
    }
}

/// Fails with [`TransportError::Invalid`] if `value` does not fit an AMQP short string.
pub(crate) fn check_short(what: &str, value: &str) -> Result<(), TransportError> {
    if value.len() > MAX_SHORT_STRING {
        return Err(TransportError::Invalid(format!(
            "{what} is {} bytes long, the limit is {MAX_SHORT_STRING}",
            value.len()
        )));
    }
    Ok(())
}

/// Where a message is published.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Destination {
    /// A queue, by name, through the broker's default exchange. The queue must exist.
    Queue(String),
    /// An exchange with a routing key; the exchange's bindings decide which queues get it.
    Exchange {
        /// The exchange's name.
        exchange: String,
        /// The routing key (ignored by fanout exchanges).
        routing_key: String,
    },
    /// A route of the fleet's routing exchange: an exchange and a routing key that must
    /// reach a queue (published mandatory, as a queue is).
    Route {
        /// The exchange's name.
        exchange: String,
        /// The routing key.
        routing_key: String,
        /// More routing keys of the same exchange the one message also goes to, in the same
        /// publish (RabbitMQ's sender-selected distribution, `BCC`: consumers do not see them).
        copies: Vec<String>,
    },
}

impl Destination {
    /// A queue, by name.
    pub fn queue(name: impl Into<String>) -> Self {
        Self::Queue(name.into())
    }

    /// An exchange with a routing key.
    pub fn exchange(exchange: impl Into<String>, routing_key: impl Into<String>) -> Self {
        Self::Exchange { exchange: exchange.into(), routing_key: routing_key.into() }
    }

    /// A route: `exchange` with `routing_key`, which must reach a queue.
    pub fn route(exchange: impl Into<String>, routing_key: impl Into<String>) -> Self {
        Self::Route { exchange: exchange.into(), routing_key: routing_key.into(), copies: Vec::new() }
    }

    /// This destination, and also `routing_key` of the same exchange: one publish the broker
    /// routes to both. The result is a route, published mandatory: a queue becomes a route of
    /// the default exchange (which routes copies by queue name too), and a plain exchange's
    /// message is returned unless it or a copy reaches a queue.
    #[must_use]
    pub fn with_copy(self, routing_key: impl Into<String>) -> Self {
        let (exchange, key, mut copies) = match self {
            Self::Queue(queue) => (String::new(), queue, Vec::new()),
            Self::Exchange { exchange, routing_key } => (exchange, routing_key, Vec::new()),
            Self::Route { exchange, routing_key, copies } => (exchange, routing_key, copies),
        };
        copies.push(routing_key.into());
        Self::Route { exchange, routing_key: key, copies }
    }

    /// The routing keys the message also goes to (see [`with_copy`](Self::with_copy)).
    pub fn copies(&self) -> &[String] {
        match self {
            Self::Route { copies, .. } => copies,
            _ => &[],
        }
    }

    /// The exchange and routing key as AMQP sees them (the default exchange is `""`).
    pub fn parts(&self) -> (&str, &str) {
        match self {
            Self::Queue(queue) => ("", queue),
            Self::Exchange { exchange, routing_key } | Self::Route { exchange, routing_key, .. } => {
                (exchange, routing_key)
            }
        }
    }

    /// Whether the message must reach a queue: published mandatory, and unroutable otherwise.
    pub fn must_reach_a_queue(&self) -> bool {
        matches!(self, Self::Queue(_) | Self::Route { .. })
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Queue(queue) => write!(f, "queue {queue}"),
            Self::Exchange { exchange, routing_key } | Self::Route { exchange, routing_key, .. } => {
                write!(f, "exchange {exchange} (routing key {routing_key:?})")
            }
        }
    }
}
