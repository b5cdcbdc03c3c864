//! Airlock's messages, queues and errors to and from lapin's types.

use std::{collections::BTreeMap, num::NonZeroU32, sync::Arc};

use bytes::Bytes;
use lapin::{
    BasicProperties, ErrorKind,
    options::{BasicAckOptions, BasicNackOptions, BasicRejectOptions},
    protocol::{AMQPErrorKind, AMQPSoftError},
    types::{AMQPValue, FieldTable, LongString, ShortString},
};
use tracing::debug;

use crate::{
    Delivery, Message, TransportError,
    delivery::{Acker, AckerInner},
    message::HEADER_DELIVERY_COUNT,
    topology::{ExchangeKind, QueueKind},
};

/// `x-queue-type`.
const ARG_QUEUE_TYPE: &str = "x-queue-type";
/// `x-dead-letter-exchange`.
const ARG_DEAD_LETTER_EXCHANGE: &str = "x-dead-letter-exchange";
/// `x-delivery-limit` (quorum queues).
const ARG_DELIVERY_LIMIT: &str = "x-delivery-limit";
/// `x-quorum-initial-group-size` (quorum queues): replicas made when the queue is created.
const ARG_QUORUM_GROUP_SIZE: &str = "x-quorum-initial-group-size";
/// `x-initial-cluster-size` (streams): replicas made when the stream is created.
const ARG_STREAM_CLUSTER_SIZE: &str = "x-initial-cluster-size";
/// `x-max-age` (streams): how long an entry is kept, as `<n>s`.
const ARG_MAX_AGE: &str = "x-max-age";
/// `x-stream-offset`: where a stream consumer starts (`first`, or an offset), and on each
/// delivery the entry's offset.
pub(super) const ARG_STREAM_OFFSET: &str = "x-stream-offset";
/// `x-expires`, in milliseconds.
const ARG_EXPIRES: &str = "x-expires";
/// Persistent delivery mode.
const PERSISTENT: u8 = 2;

/// The broker arguments of a queue kind, quorum queues with `group_size` replicas (`None`:
/// the broker's default, and no argument). The only place they are built, so every
/// declaration of a queue by transports with the same options is identical and RabbitMQ never
/// answers PRECONDITION_FAILED to our own re-declarations; transports with different group
/// sizes do disagree, which is why the size is one setting for the whole fleet.
pub(super) fn queue_arguments(kind: &QueueKind, group_size: Option<NonZeroU32>) -> FieldTable {
    let mut arguments = FieldTable::default();
    let quorum = |arguments: &mut FieldTable| {
        arguments.insert(ARG_QUEUE_TYPE.into(), long_string("quorum"));
        if let Some(size) = group_size {
            arguments.insert(ARG_QUORUM_GROUP_SIZE.into(), AMQPValue::LongLongInt(i64::from(size.get())));
        }
    };
    match kind {
        QueueKind::Work { dead_letter_exchange, delivery_limit } => {
            quorum(&mut arguments);
            arguments.insert(ARG_DEAD_LETTER_EXCHANGE.into(), long_string(dead_letter_exchange));
            arguments.insert(ARG_DELIVERY_LIMIT.into(), AMQPValue::LongLongInt(i64::from(*delivery_limit)));
        }
        QueueKind::Dead => quorum(&mut arguments),
        QueueKind::Private { expires } => {
            quorum(&mut arguments);
            let millis = i64::try_from(expires.as_millis()).unwrap_or(i64::MAX);
            arguments.insert(ARG_EXPIRES.into(), AMQPValue::LongLongInt(millis));
        }
        QueueKind::Log { max_age } => {
            arguments.insert(ARG_QUEUE_TYPE.into(), long_string("stream"));
            arguments.insert(ARG_MAX_AGE.into(), long_string(&format!("{}s", max_age.as_secs().max(1))));
            if let Some(size) = group_size {
                arguments.insert(ARG_STREAM_CLUSTER_SIZE.into(), AMQPValue::LongLongInt(i64::from(size.get())));
            }
        }
    }
    arguments
}

fn long_string(value: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(value))
}

pub(super) fn exchange_kind(kind: ExchangeKind) -> lapin::ExchangeKind {
    match kind {
        ExchangeKind::Fanout => lapin::ExchangeKind::Fanout,
        ExchangeKind::Topic => lapin::ExchangeKind::Topic,
    }
}

/// The AMQP properties of `message`, published as `user`: persistent, with its ids and string
/// headers, and the routing keys it is copied to as `BCC` (which the broker removes before
/// delivery). Lengths were checked by [`Message::validate`].
pub(super) fn properties(message: &Message, user: &str, copies: &[String]) -> BasicProperties {
    let mut properties = BasicProperties::default().with_delivery_mode(PERSISTENT).with_user_id(short(user));
    if let Some(id) = &message.correlation_id {
        properties = properties.with_correlation_id(short(id));
    }
    if let Some(queue) = &message.reply_to {
        properties = properties.with_reply_to(short(queue));
    }
    if let Some(id) = &message.message_id {
        properties = properties.with_message_id(short(id));
    }
    if !message.headers.is_empty() || !copies.is_empty() {
        let mut headers = FieldTable::default();
        for (key, value) in &message.headers {
            headers.insert(short(key), long_string(value));
        }
        if !copies.is_empty() {
            let keys = copies.iter().map(|key| long_string(key)).collect::<Vec<_>>();
            headers.insert(short(HEADER_BCC), AMQPValue::FieldArray(keys.into()));
        }
        properties = properties.with_headers(headers);
    }
    properties
}

/// RabbitMQ's sender-selected distribution header whose routing keys are not delivered.
const HEADER_BCC: &str = "BCC";

fn short(value: &str) -> ShortString {
    ShortString::from(value)
}

/// A received lapin delivery as an Airlock [`Delivery`] from `queue`.
pub(super) fn delivery(delivery: lapin::message::Delivery, queue: &Arc<str>) -> Delivery {
    let lapin::message::Delivery { redelivered, properties, data, acker, .. } = delivery;
    let owned = |value: &Option<ShortString>| value.as_ref().map(|s| s.as_str().to_owned());
    let mut headers = BTreeMap::new();
    let mut delivery_count = 0;
    if let Some(table) = properties.headers() {
        for (key, value) in table {
            match value {
                AMQPValue::LongString(text) => {
                    let text = String::from_utf8_lossy(text.as_bytes()).into_owned();
                    headers.insert(key.as_str().to_owned(), text);
                }
                AMQPValue::ShortString(text) => {
                    headers.insert(key.as_str().to_owned(), text.as_str().to_owned());
                }
                number if key.as_str() == HEADER_DELIVERY_COUNT => {
                    delivery_count = count(number);
                }
                _ => {}
            }
        }
    }
    let message = Message {
        body: Bytes::from(data),
        correlation_id: owned(properties.correlation_id()),
        reply_to: owned(properties.reply_to()),
        headers,
        message_id: owned(properties.message_id()),
        user_id: owned(properties.user_id()),
    };
    let acker = AmqpAcker { acker, queue: queue.clone() };
    Delivery::new(message, redelivered, delivery_count, Acker(AckerInner::Amqp(acker)))
}

/// The offset a stream delivery carries in its `x-stream-offset` header.
pub(super) fn stream_offset(delivery: &lapin::message::Delivery) -> Option<i64> {
    delivery.properties.headers().as_ref()?.inner().get(ARG_STREAM_OFFSET).map(wide)
}

fn count(value: &AMQPValue) -> u32 {
    u32::try_from(wide(value).max(0)).unwrap_or(u32::MAX)
}

fn wide(value: &AMQPValue) -> i64 {
    match *value {
        AMQPValue::ShortShortInt(n) => i64::from(n),
        AMQPValue::ShortShortUInt(n) => i64::from(n),
        AMQPValue::ShortInt(n) => i64::from(n),
        AMQPValue::ShortUInt(n) => i64::from(n),
        AMQPValue::LongInt(n) => i64::from(n),
        AMQPValue::LongUInt(n) => i64::from(n),
        AMQPValue::LongLongInt(n) => n,
        _ => 0,
    }
}

/// Settles one AMQP delivery.
#[derive(Debug)]
pub(crate) struct AmqpAcker {
    acker: lapin::Acker,
    queue: Arc<str>,
}

impl AmqpAcker {
    pub(crate) fn queue(&self) -> &str {
        &self.queue
    }

    pub(crate) async fn ack(self) -> Result<(), TransportError> {
        settled(self.acker.ack(BasicAckOptions::default()).await)
    }

    pub(crate) async fn ack_through(self) -> Result<(), TransportError> {
        settled(self.acker.ack(BasicAckOptions { multiple: true }).await)
    }

    pub(crate) async fn nack_requeue(self) -> Result<(), TransportError> {
        let options = BasicNackOptions { multiple: false, requeue: true };
        settled(self.acker.nack(options).await)
    }

    pub(crate) async fn reject(self) -> Result<(), TransportError> {
        let options = BasicRejectOptions { requeue: false };
        settled(self.acker.reject(options).await)
    }
}

/// lapin answers `Ok(false)` when the channel is gone (the acker was poisoned) and an error
/// when it went away during the call: either way the broker has the message back.
fn settled(result: lapin::Result<bool>) -> Result<(), TransportError> {
    match result {
        Ok(true) => Ok(()),
        Ok(false) => Err(TransportError::ChannelClosed),
        Err(error) => {
            debug!(error = %error, "Settling a delivery failed.");
            Err(TransportError::ChannelClosed)
        }
    }
}

/// Sorts a lapin error into what the caller does about it; `what` names the queue or
/// exchange involved, for the precondition and not-found cases.
pub(super) fn error(error: lapin::Error, what: impl FnOnce() -> String) -> TransportError {
    let soft = match error.kind() {
        ErrorKind::ProtocolError(amqp) => match amqp.kind() {
            AMQPErrorKind::Soft(soft) => Some(soft.clone()),
            AMQPErrorKind::Hard(_) => None,
        },
        _ => None,
    };
    match soft {
        Some(AMQPSoftError::PRECONDITIONFAILED) => {
            TransportError::Precondition { what: what(), source: Some(Box::new(error)) }
        }
        Some(AMQPSoftError::NOTFOUND) => TransportError::NotFound { what: what() },
        Some(AMQPSoftError::ACCESSREFUSED) => TransportError::AccessRefused { what: what(), source: Box::new(error) },
        Some(_) => TransportError::Broker(Box::new(error)),
        None if is_connection_error(&error) => TransportError::Unavailable(Box::new(error)),
        None => TransportError::Broker(Box::new(error)),
    }
}

/// Errors that go away with a new connection (or channel).
fn is_connection_error(error: &lapin::Error) -> bool {
    match error.kind() {
        ErrorKind::IOError(_)
        | ErrorKind::InvalidChannel(_)
        | ErrorKind::InvalidChannelState(..)
        | ErrorKind::InvalidConnectionState(_)
        | ErrorKind::MissingHeartbeatError => true,
        ErrorKind::ProtocolError(amqp) => matches!(amqp.kind(), AMQPErrorKind::Hard(_)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn work() -> QueueKind {
        QueueKind::Work { dead_letter_exchange: "p.dlx".into(), delivery_limit: 5 }
    }

    #[test]
    fn work_queue_arguments() {
        let arguments = queue_arguments(&work(), None);
        let inner = arguments.inner();
        assert_eq!(inner.get(ARG_QUEUE_TYPE), Some(&long_string("quorum")));
        assert_eq!(inner.get(ARG_DEAD_LETTER_EXCHANGE), Some(&long_string("p.dlx")));
        assert_eq!(inner.get(ARG_DELIVERY_LIMIT), Some(&AMQPValue::LongLongInt(5)));
        assert_eq!(inner.get(ARG_QUORUM_GROUP_SIZE), None, "the broker's default");
    }

    #[test]
    fn a_group_size_goes_to_every_quorum_queue() {
        let three = NonZeroU32::new(3);
        for kind in [work(), QueueKind::Dead, QueueKind::Private { expires: Duration::from_secs(1) }] {
            let arguments = queue_arguments(&kind, three);
            assert_eq!(arguments.inner().get(ARG_QUEUE_TYPE), Some(&long_string("quorum")), "{kind:?}");
            assert_eq!(arguments.inner().get(ARG_QUORUM_GROUP_SIZE), Some(&AMQPValue::LongLongInt(3)), "{kind:?}");
        }
    }

    #[test]
    fn private_queue_arguments() {
        let arguments = queue_arguments(&QueueKind::Private { expires: Duration::from_secs(1800) }, None);
        assert_eq!(arguments.inner().get(ARG_QUEUE_TYPE), Some(&long_string("quorum")));
        assert_eq!(arguments.inner().get(ARG_EXPIRES), Some(&AMQPValue::LongLongInt(1_800_000)));
    }

    #[test]
    fn a_log_is_a_stream_with_its_age_and_replicas() {
        let log = QueueKind::Log { max_age: Duration::from_secs(86_400) };
        let arguments = queue_arguments(&log, NonZeroU32::new(3));
        let inner = arguments.inner();
        assert_eq!(inner.get(ARG_QUEUE_TYPE), Some(&long_string("stream")));
        assert_eq!(inner.get(ARG_MAX_AGE), Some(&long_string("86400s")));
        assert_eq!(inner.get(ARG_STREAM_CLUSTER_SIZE), Some(&AMQPValue::LongLongInt(3)));
        assert_eq!(inner.get(ARG_QUORUM_GROUP_SIZE), None, "a stream is not a quorum queue");
    }

    #[test]
    fn properties_carry_ids_and_headers() {
        let message = Message::new(&b"x"[..])
            .with_correlation_id("c")
            .with_reply_to("q")
            .with_message_id("m")
            .with_header("traceparent", "00-ab-cd-01");
        let properties = properties(&message, "runner-7", &["approval.approve".to_owned()]);
        assert_eq!(properties.user_id().as_ref().map(|s| s.as_str()), Some("runner-7"));
        assert_eq!(properties.correlation_id().as_ref().map(|s| s.as_str()), Some("c"));
        assert_eq!(properties.reply_to().as_ref().map(|s| s.as_str()), Some("q"));
        assert_eq!(properties.message_id().as_ref().map(|s| s.as_str()), Some("m"));
        assert_eq!(properties.delivery_mode(), &Some(PERSISTENT));
        let headers = properties.headers().as_ref().expect("headers");
        assert_eq!(headers.inner().get("traceparent"), Some(&long_string("00-ab-cd-01")));
        let bcc = AMQPValue::FieldArray(vec![long_string("approval.approve")].into());
        assert_eq!(headers.inner().get(HEADER_BCC), Some(&bcc));
    }
}
