//! The behaviour both transports share. Each test is a generic function over the transport,
//! run once on [`MemoryTransport`] and once on RabbitMQ by the `both!` macro below.

use std::collections::BTreeSet;

use airlock_transport::{
    Destination, ExchangeKind, Message, QueueKind, Topology, Transport, TransportError,
    message::{
        DEATH_DELIVERY_LIMIT, DEATH_REJECTED, HEADER_FIRST_DEATH_QUEUE, HEADER_FIRST_DEATH_REASON, HEADER_REASON,
        HEADER_TRACEPARENT,
    },
    topology::{DELIVERY_LIMIT, PRIVATE_QUEUE_EXPIRES},
};

use crate::support::{assert_channel_closed, next};

/// Generates, for each named suite test, a `memory::<name>` and an `amqp::<name>` test.
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test]
                async fn $name() {
                    let prefix = crate::support::unique_prefix();
                    let transport = airlock_transport::MemoryTransport::new();
                    let topology = crate::support::fixture(&prefix);
                    crate::support::run(transport.clone(), transport, topology, super::$name).await;
                }
            )*
        }
        mod amqp {
            $(
                #[tokio::test]
                async fn $name() {
                    let prefix = crate::support::unique_prefix();
                    let Some(transport) = crate::support::broker(&prefix).await else {
                        return;
                    };
                    let cleanup = crate::support::broker(&prefix).await.expect("broker");
                    let topology = crate::support::fixture(&prefix);
                    crate::support::run(transport, cleanup, topology, super::$name).await;
                }
            )*
        }
    };
}

both!(
    publish_consume_ack,
    unacked_is_redelivered_after_consumer_drop,
    ack_through_settles_the_earlier_deliveries_of_its_consumer_only,
    reject_lands_in_dead_queue,
    nack_requeue_redelivers,
    delivery_limit_dead_letters_poison,
    fanout_reaches_every_bound_queue,
    topic_routes_by_key,
    one_publish_reaches_its_copies_once_each,
    prefetch_is_respected,
    publish_to_missing_queue_is_unroutable,
    publish_to_missing_exchange_is_not_found,
    declare_is_idempotent_and_conflicts_are_preconditions,
    publish_dead_records_the_reason,
    concurrent_publishes_are_all_confirmed,
    cancel_stops_deliveries_and_keeps_settling,
    closed_transport_refuses_work,
    every_follower_reads_a_log_from_its_first_entry,
);

fn id_of(delivery: &airlock_transport::Delivery) -> String {
    delivery.message.message_id.clone().expect("message id")
}

async fn publish_consume_ack<T: Transport>(transport: T, topology: Topology) {
    let queue = topology.requests_queue();
    let mut consumer = transport.consume(&queue, 10).await.unwrap();
    let sent = Message::new(&b"\x00body\xff"[..])
        .with_correlation_id("call-1")
        .with_reply_to(topology.reply_queue("one"))
        .with_message_id("m-1")
        .with_header(HEADER_TRACEPARENT, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    transport.publish(&Destination::queue(&queue), sent.clone()).await.unwrap();

    let delivery = next(&mut consumer).await;
    // The AMQP transport stamps its broker user on everything it publishes.
    assert!(delivery.message.user_id.as_deref().is_none_or(|user| !user.is_empty()));
    assert_eq!(Message { user_id: None, ..delivery.message.clone() }, sent);
    assert!(!delivery.redelivered);
    assert_eq!(delivery.delivery_count, 0);
    assert_eq!(delivery.queue(), queue);
    delivery.ack().await.unwrap();
    drop(consumer);
    assert_eq!(transport.message_count(&queue).await.unwrap(), 0);
}

async fn unacked_is_redelivered_after_consumer_drop<T: Transport>(transport: T, topology: Topology) {
    let queue = topology.requests_queue();
    let destination = Destination::queue(&queue);
    transport.publish(&destination, Message::new("x").with_message_id("m-1")).await.unwrap();
    let mut first = transport.consume(&queue, 1).await.unwrap();
    let delivery = next(&mut first).await;
    assert!(!delivery.redelivered);
    drop(first);

    let mut second = transport.consume(&queue, 1).await.unwrap();
    let again = next(&mut second).await;
    assert_eq!(id_of(&again), "m-1");
    assert!(again.redelivered);
    // The first consumer's channel is gone: settling its delivery fails without reaching the
    // broker, and does not disturb the second consumer.
    assert_channel_closed(delivery.ack().await);
    again.ack().await.unwrap();
    assert_eq!(transport.message_count(&queue).await.unwrap(), 0);
}

async fn ack_through_settles_the_earlier_deliveries_of_its_consumer_only<T: Transport>(
    transport: T,
    topology: Topology,
) {
    let queue = topology.requests_queue();
    let destination = Destination::queue(&queue);
    for id in ["m-1", "m-2", "m-3", "m-4"] {
        transport.publish(&destination, Message::new("x").with_message_id(id)).await.unwrap();
    }
    let mut other = transport.consume(&queue, 1).await.unwrap();
    assert_eq!(id_of(&next(&mut other).await), "m-1");
    let mut reader = transport.consume(&queue, 10).await.unwrap();
    let taken = [next(&mut reader).await, next(&mut reader).await, next(&mut reader).await];
    assert_eq!(taken.iter().map(id_of).collect::<Vec<_>>(), ["m-2", "m-3", "m-4"]);
    let [_, third, _] = taken;
    third.ack_through().await.unwrap();
    drop((reader, other));

    // m-2 went with m-3; the later m-4 and the other consumer's m-1 come back.
    let mut again = transport.consume(&queue, 10).await.unwrap();
    let back = [next(&mut again).await, next(&mut again).await];
    assert_eq!(back.iter().map(id_of).collect::<BTreeSet<_>>(), BTreeSet::from(["m-1".to_owned(), "m-4".to_owned()]));
    for delivery in back {
        delivery.ack().await.unwrap();
    }
    drop(again);
    assert_eq!(transport.message_count(&queue).await.unwrap(), 0);
}

async fn reject_lands_in_dead_queue<T: Transport>(transport: T, topology: Topology) {
    let queue = topology.step_queue("a");
    transport.publish(&Destination::queue(&queue), Message::new("poison").with_message_id("m-1")).await.unwrap();
    let mut consumer = transport.consume(&queue, 1).await.unwrap();
    next(&mut consumer).await.reject().await.unwrap();

    let mut dead = transport.consume(&topology.dead_queue(), 1).await.unwrap();
    let buried = next(&mut dead).await;
    assert_eq!(id_of(&buried), "m-1");
    assert_eq!(&buried.message.body[..], b"poison");
    let headers = &buried.message.headers;
    assert_eq!(headers.get(HEADER_FIRST_DEATH_REASON).map(String::as_str), Some(DEATH_REJECTED));
    assert_eq!(headers.get(HEADER_FIRST_DEATH_QUEUE), Some(&queue));
    buried.ack().await.unwrap();
    assert_eq!(transport.message_count(&queue).await.unwrap(), 0);
}

async fn nack_requeue_redelivers<T: Transport>(transport: T, topology: Topology) {
    let queue = topology.requests_queue();
    transport.publish(&Destination::queue(&queue), Message::new("x").with_message_id("m-1")).await.unwrap();
    let mut consumer = transport.consume(&queue, 1).await.unwrap();
    next(&mut consumer).await.nack_requeue().await.unwrap();
    let again = next(&mut consumer).await;
    assert_eq!(id_of(&again), "m-1");
    assert!(again.redelivered);
    assert_eq!(again.delivery_count, 1);
    again.ack().await.unwrap();
}

async fn delivery_limit_dead_letters_poison<T: Transport>(transport: T, topology: Topology) {
    let queue = topology.requests_queue();
    transport.publish(&Destination::queue(&queue), Message::new("crash").with_message_id("m-1")).await.unwrap();
    let mut consumer = transport.consume(&queue, 1).await.unwrap();
    // Delivered once, then returned DELIVERY_LIMIT times; the next return buries it.
    for count in 0..=DELIVERY_LIMIT {
        let delivery = next(&mut consumer).await;
        assert_eq!(delivery.delivery_count, count);
        delivery.nack_requeue().await.unwrap();
    }
    let mut dead = transport.consume(&topology.dead_queue(), 1).await.unwrap();
    let buried = next(&mut dead).await;
    assert_eq!(id_of(&buried), "m-1");
    assert_eq!(buried.message.headers.get(HEADER_FIRST_DEATH_REASON).map(String::as_str), Some(DEATH_DELIVERY_LIMIT));
    buried.ack().await.unwrap();
    assert_eq!(transport.message_count(&queue).await.unwrap(), 0);
}

async fn fanout_reaches_every_bound_queue<T: Transport>(transport: T, topology: Topology) {
    let mut one = transport.consume(&topology.reply_queue("one"), 1).await.unwrap();
    let mut two = transport.consume(&topology.reply_queue("two"), 1).await.unwrap();
    let cancels = Destination::exchange(topology.cancels_exchange(), "ignored");
    transport.publish(&cancels, Message::new("cancel").with_message_id("c-1")).await.unwrap();
    for consumer in [&mut one, &mut two] {
        let delivery = next(consumer).await;
        assert_eq!(id_of(&delivery), "c-1");
        delivery.ack().await.unwrap();
    }
}

async fn topic_routes_by_key<T: Transport>(transport: T, topology: Topology) {
    let decisions = topology.route_exchange();
    let queue = topology.reply_queue("one");
    let mut consumer = transport.consume(&queue, 10).await.unwrap();
    for (key, id) in [("review.continue", "unrouted"), ("approval.reject", "routed")] {
        transport
            .publish(&Destination::exchange(&decisions, key), Message::new(key).with_message_id(id))
            .await
            .unwrap();
    }
    // Publishes through one channel keep their order: the first delivery being the second
    // message shows the first was not routed here.
    let delivery = next(&mut consumer).await;
    assert_eq!(id_of(&delivery), "routed");
    delivery.ack().await.unwrap();
    assert_eq!(transport.message_count(&queue).await.unwrap(), 0);
}

/// A route with copies: one publish, which each queue a key reaches gets once, without the
/// copies' keys among its headers.
async fn one_publish_reaches_its_copies_once_each<T: Transport>(transport: T, topology: Topology) {
    let route = topology.route_exchange();
    let (one, two) = (topology.reply_queue("one"), topology.reply_queue("two"));
    let mut from_one = transport.consume(&one, 10).await.unwrap();
    let mut from_two = transport.consume(&two, 10).await.unwrap();
    // To two, copied to one (bound on `approval.*`); then to one, copied to one again.
    let to_two = Destination::route(&route, "reply.two").with_copy("approval.approve");
    transport.publish(&to_two, Message::new("a").with_message_id("to-two")).await.unwrap();
    let to_one = Destination::route(&route, "reply.one").with_copy("approval.reject").with_copy("review.continue");
    transport.publish(&to_one, Message::new("b").with_message_id("to-one")).await.unwrap();
    // Unroutable only when neither the key nor a copy reaches a queue.
    let nowhere = Destination::route(&route, "reply.nobody").with_copy("review.continue");
    assert!(matches!(transport.publish(&nowhere, Message::new("c")).await, Err(TransportError::Unroutable { .. })));
    let delivery = next(&mut from_two).await;
    assert_eq!(id_of(&delivery), "to-two");
    assert!(delivery.message.headers.is_empty(), "{:?}", delivery.message.headers);
    delivery.ack().await.unwrap();
    for id in ["to-two", "to-one"] {
        let delivery = next(&mut from_one).await;
        assert_eq!(id_of(&delivery), id);
        assert!(delivery.message.headers.is_empty(), "{:?}", delivery.message.headers);
        delivery.ack().await.unwrap();
    }
    assert_eq!(transport.message_count(&one).await.unwrap(), 0, "one copy each");
    assert_eq!(transport.message_count(&two).await.unwrap(), 0);
}

async fn prefetch_is_respected<T: Transport>(transport: T, topology: Topology) {
    let queue = topology.requests_queue();
    let destination = Destination::queue(&queue);
    for i in 0..5 {
        transport.publish(&destination, Message::new("x").with_message_id(format!("m-{i}"))).await.unwrap();
    }
    let mut consumer = transport.consume(&queue, 2).await.unwrap();
    let first = next(&mut consumer).await;
    let second = next(&mut consumer).await;
    // Two unsettled: the broker holds the other three back.
    assert_eq!(transport.message_count(&queue).await.unwrap(), 3);
    first.ack().await.unwrap();
    let third = next(&mut consumer).await;
    assert_eq!(transport.message_count(&queue).await.unwrap(), 2);
    let ids = [id_of(&second), id_of(&third)];
    assert_eq!(ids, ["m-1", "m-2"]);
    second.ack().await.unwrap();
    third.ack().await.unwrap();
}

async fn publish_to_missing_queue_is_unroutable<T: Transport>(transport: T, topology: Topology) {
    let missing = Destination::queue(topology.name("missing"));
    let result = transport.publish(&missing, Message::new("x")).await;
    assert!(matches!(result, Err(TransportError::Unroutable { .. })), "{result:?}");
    // The transport is still fine.
    transport.publish(&Destination::queue(topology.requests_queue()), Message::new("x")).await.unwrap();
}

async fn publish_to_missing_exchange_is_not_found<T: Transport>(transport: T, topology: Topology) {
    let queue = topology.requests_queue();
    let missing = Destination::exchange(topology.name("missing"), "");
    let good = Destination::queue(&queue);
    // The bad publish shares the publishing channel with good ones in flight: they must
    // still be confirmed.
    let (bad, first, second) = tokio::join!(
        transport.publish(&missing, Message::new("x")),
        transport.publish(&good, Message::new("1")),
        transport.publish(&good, Message::new("2")),
    );
    assert!(matches!(bad, Err(TransportError::NotFound { .. })), "{bad:?}");
    first.unwrap();
    second.unwrap();
    // Both arrived. A publish whose confirm was lost with the closing channel is sent again,
    // so one of them may arrive twice: delivery is at least once.
    let count = transport.message_count(&queue).await.unwrap();
    assert!((2..=3).contains(&count), "{count} messages");
    let mut consumer = transport.consume(&queue, 0).await.unwrap();
    let mut bodies = std::collections::BTreeSet::new();
    for _ in 0..count {
        let delivery = next(&mut consumer).await;
        bodies.insert(delivery.message.body.clone());
        delivery.ack().await.unwrap();
    }
    assert_eq!(bodies, [bytes::Bytes::from("1"), bytes::Bytes::from("2")].into());
}

async fn declare_is_idempotent_and_conflicts_are_preconditions<T: Transport>(transport: T, topology: Topology) {
    transport.declare(&topology).await.unwrap();
    transport.declare(&topology).await.unwrap();

    let prefix = topology.prefix();
    let queue_conflict = Topology::empty(prefix)
        .with_queue(topology.requests_queue(), QueueKind::Private { expires: PRIVATE_QUEUE_EXPIRES });
    let result = transport.declare(&queue_conflict).await;
    assert!(matches!(result, Err(TransportError::Precondition { .. })), "{result:?}");
    let exchange_conflict = Topology::empty(prefix).with_exchange(topology.cancels_exchange(), ExchangeKind::Topic);
    let result = transport.declare(&exchange_conflict).await;
    assert!(matches!(result, Err(TransportError::Precondition { .. })), "{result:?}");

    // A step discovered at run time, declared as a fragment, twice.
    let step = Topology::empty(prefix).with_step("late");
    transport.declare(&step).await.unwrap();
    transport.declare(&step).await.unwrap();
    let late = topology.step_queue("late");
    transport.publish(&Destination::queue(&late), Message::new("x")).await.unwrap();
    assert_eq!(transport.message_count(&late).await.unwrap(), 1);
    transport.delete(&step).await.unwrap();
}

async fn publish_dead_records_the_reason<T: Transport>(transport: T, topology: Topology) {
    let queue = topology.requests_queue();
    transport.publish(&Destination::queue(&queue), Message::new("not protobuf").with_message_id("m-1")).await.unwrap();
    let mut consumer = transport.consume(&queue, 1).await.unwrap();
    let delivery = next(&mut consumer).await;
    transport.publish_dead(&topology, delivery, "malformed request").await.unwrap();

    let mut dead = transport.consume(&topology.dead_queue(), 1).await.unwrap();
    let buried = next(&mut dead).await;
    assert_eq!(id_of(&buried), "m-1");
    assert_eq!(buried.message.headers.get(HEADER_REASON).map(String::as_str), Some("malformed request"));
    buried.ack().await.unwrap();
    drop(consumer);
    assert_eq!(transport.message_count(&queue).await.unwrap(), 0);
}

async fn concurrent_publishes_are_all_confirmed<T: Transport>(transport: T, topology: Topology) {
    const COUNT: usize = 300;
    let queue = topology.requests_queue();
    let mut publishes = tokio::task::JoinSet::new();
    for i in 0..COUNT {
        let transport = transport.clone();
        let destination = Destination::queue(&queue);
        publishes.spawn(async move {
            let message = Message::new(format!("{i}")).with_message_id(format!("m-{i}"));
            transport.publish(&destination, message).await
        });
    }
    while let Some(result) = publishes.join_next().await {
        result.unwrap().unwrap();
    }
    let mut consumer = transport.consume(&queue, 50).await.unwrap();
    let mut seen = BTreeSet::new();
    while seen.len() < COUNT {
        let delivery = next(&mut consumer).await;
        assert!(seen.insert(id_of(&delivery)), "duplicate {}", id_of(&delivery));
        delivery.ack().await.unwrap();
    }
    assert_eq!(transport.message_count(&queue).await.unwrap(), 0);
}

async fn cancel_stops_deliveries_and_keeps_settling<T: Transport>(transport: T, topology: Topology) {
    let queue = topology.requests_queue();
    for i in 0..2 {
        transport
            .publish(&Destination::queue(&queue), Message::new("x").with_message_id(format!("m-{i}")))
            .await
            .unwrap();
    }
    let mut consumer = transport.consume(&queue, 1).await.unwrap();
    let delivery = next(&mut consumer).await;
    consumer.cancel().await;
    // In flight when the consumer stopped: still settles.
    delivery.ack().await.unwrap();
    assert!(consumer.next().await.is_none());
    assert_eq!(transport.message_count(&queue).await.unwrap(), 1);
}

async fn closed_transport_refuses_work<T: Transport>(transport: T, topology: Topology) {
    let queue = topology.requests_queue();
    let mut consumer = transport.consume(&queue, 1).await.unwrap();
    transport.close().await;
    assert!(consumer.next().await.is_none());
    let result = transport.publish(&Destination::queue(&queue), Message::new("x")).await;
    assert!(matches!(result, Err(TransportError::Closed)), "{result:?}");
}

async fn every_follower_reads_a_log_from_its_first_entry<T: Transport>(transport: T, topology: Topology) {
    let log = topology.control_log();
    let destination = Topology::log_route(&log);
    for i in 0..3 {
        transport.publish(&destination, Message::new(format!("{i}"))).await.unwrap();
    }
    let mut early = transport.follow(&log).await.unwrap();
    for i in 0..3 {
        assert_eq!(read(&mut early).await, i.to_string());
    }
    transport.publish(&destination, Message::new("3")).await.unwrap();
    assert_eq!(read(&mut early).await, "3", "a follower sees what is appended after it caught up");
    // Reading takes nothing away: a later follower reads the whole log again.
    let mut late = transport.follow(&log).await.unwrap();
    for i in 0..4 {
        assert_eq!(read(&mut late).await, i.to_string());
    }
}

async fn read(follower: &mut airlock_transport::Follower) -> String {
    let message = tokio::time::timeout(std::time::Duration::from_secs(10), follower.next()).await.expect("an entry");
    String::from_utf8(message.expect("open").body.to_vec()).unwrap()
}
