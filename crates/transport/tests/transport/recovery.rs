//! RabbitMQ only: what happens when connections die under a consumer and a publisher.
//!
//! Connections are closed on the broker with `rabbitmqctl close_connection` (only this test's
//! connections, found by name; `AIRLOCK_TEST_KILL=all` uses `close_all_connections`), which
//! is what a broker restart or a network cut looks like to the client.

use std::{
    collections::BTreeMap,
    future::Future,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use airlock_transport::{AmqpOptions, AmqpTransport, Destination, Message, Topology, Transport, TransportError};

use crate::support::{
    HANG_GUARD, amqp_url, assert_channel_closed, broker, broker_with, fixture, kill_connections, next, rabbitmqctl,
    run, unique_prefix,
};

/// Runs `body` on a transport (options adjusted by `options`) with the fixture declared, and
/// cleans up through a second connection, whatever happens; skips without a broker.
async fn on_broker<F, Fut>(options: impl FnOnce(AmqpOptions) -> AmqpOptions, body: F)
where
    F: FnOnce(AmqpTransport, Topology) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let prefix = unique_prefix();
    let Some(transport) = broker_with(options(AmqpOptions::new(amqp_url()).with_connection_name(&prefix))).await else {
        return;
    };
    // Named apart, so killing the test's connections spares it.
    let cleanup = broker(&format!("{prefix}-cleanup")).await.expect("broker");
    run(transport, cleanup, fixture(&prefix), body).await;
}

/// Publishes `ids` one after the other; every publish must end confirmed.
async fn publish_all(transport: &AmqpTransport, queue: &str, ids: std::ops::Range<usize>) {
    let destination = Destination::queue(queue);
    for i in ids {
        let message = Message::new(format!("{i}")).with_message_id(format!("m-{i}"));
        transport.publish(&destination, message).await.unwrap();
    }
}

#[tokio::test]
async fn consumer_and_publisher_survive_killed_connections() {
    const KILLS: usize = 3;
    /// Messages published between two kills (and after the last).
    const BETWEEN: usize = 100;
    on_broker(
        |options| options,
        |transport, topology| async move {
            let prefix = topology.prefix().to_owned();
            let queue = topology.requests_queue();

            // The publisher publishes steadily until told to stop, so kills land mid-stream.
            let published = Arc::new(AtomicUsize::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let publishing = tokio::spawn({
                let (transport, queue) = (transport.clone(), queue.clone());
                let (published, stop) = (published.clone(), stop.clone());
                async move {
                    let destination = Destination::queue(&queue);
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let message = Message::new(format!("{i}")).with_message_id(format!("m-{i}"));
                        transport.publish(&destination, message).await.unwrap();
                        i += 1;
                        published.store(i, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    i
                }
            });
            // The consumer acks each delivery a little later, so some are unacked at each kill.
            let acked = Arc::new(Mutex::new(BTreeMap::<String, u32>::new()));
            let refused = Arc::new(AtomicUsize::new(0));
            let mut consumer = transport.consume(&queue, 20).await.unwrap();
            let consuming = tokio::spawn({
                let (acked, refused) = (acked.clone(), refused.clone());
                async move {
                    loop {
                        let delivery = next(&mut consumer).await;
                        let id = delivery.message.message_id.clone().unwrap();
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        match delivery.ack().await {
                            Ok(()) => *acked.lock().unwrap().entry(id).or_default() += 1,
                            Err(TransportError::ChannelClosed) => _ = refused.fetch_add(1, Ordering::Relaxed),
                            Err(error) => panic!("ack: {error}"),
                        }
                    }
                }
            });

            let work = async {
                for _ in 0..KILLS {
                    let target = published.load(Ordering::Relaxed) + BETWEEN;
                    until(|| published.load(Ordering::Relaxed) >= target && acked.lock().unwrap().len() >= target - 20)
                        .await;
                    assert!(kill_connections(&prefix).await >= 1, "no connection of {prefix} found to close");
                }
                let target = published.load(Ordering::Relaxed) + BETWEEN;
                until(|| published.load(Ordering::Relaxed) >= target).await;
                stop.store(true, Ordering::Relaxed);
                let total = publishing.await.unwrap();
                until(|| acked.lock().unwrap().len() >= total).await;
                total
            };
            let total = tokio::time::timeout(HANG_GUARD, work).await.expect("hung: not every message came through");
            consuming.abort();

            let acked = acked.lock().unwrap().clone();
            let missing: Vec<usize> = (0..total).filter(|i| !acked.contains_key(&format!("m-{i}"))).collect();
            assert!(missing.is_empty(), "lost: {missing:?}");
            assert_eq!(acked.len(), total, "acked ids that were never published");
            let twice = acked.values().filter(|&&n| n > 1).count();
            eprintln!(
                "{total} messages published and acked across {KILLS} kills; {} acks refused after a kill \
         (redelivered and acked later); {twice} ids acked twice (at least once delivery)",
                refused.load(Ordering::Relaxed)
            );
            assert_eq!(transport.message_count(&queue).await.unwrap(), 0);
        },
    )
    .await;
}

#[tokio::test]
async fn a_follower_goes_on_after_its_last_entry_across_killed_connections() {
    on_broker(
        |options| options,
        |transport, topology| async move {
            let prefix = topology.prefix().to_owned();
            let log = Topology::log_route(&topology.control_log());
            let mut follower = transport.follow(&topology.control_log()).await.unwrap();
            let mut read = Vec::new();
            for round in 0..3 {
                for i in 0..50 {
                    let entry = round * 50 + i;
                    transport.publish(&log, Message::new(format!("{entry}"))).await.unwrap();
                }
                while read.len() < (round + 1) * 50 {
                    let message = tokio::time::timeout(HANG_GUARD, follower.next()).await.expect("hung").unwrap();
                    read.push(String::from_utf8(message.body.to_vec()).unwrap());
                }
                assert!(kill_connections(&prefix).await >= 1, "no connection of {prefix} found to close");
            }
            let expected: Vec<String> = (0..150).map(|i| i.to_string()).collect();
            assert_eq!(read, expected, "every entry once, in order");
        },
    )
    .await;
}

/// Polls `condition` until it holds.
async fn until(mut condition: impl FnMut() -> bool) {
    while !condition() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn ack_after_connection_loss_fails_cleanly_and_the_message_returns() {
    on_broker(
        |options| options,
        |transport, topology| async move {
            let prefix = topology.prefix().to_owned();
            let queue = topology.requests_queue();
            transport.publish(&Destination::queue(&queue), Message::new("x").with_message_id("m-1")).await.unwrap();
            let mut consumer = transport.consume(&queue, 1).await.unwrap();
            let stale = next(&mut consumer).await;
            assert!(kill_connections(&prefix).await >= 1);

            // The consumer reconnects by itself and gets the message again.
            let again = next(&mut consumer).await;
            assert_eq!(again.message.message_id.as_deref(), Some("m-1"));
            assert!(again.redelivered);
            let stale_ack = tokio::time::timeout(HANG_GUARD, stale.ack()).await.expect("an ack on a dead channel hung");
            assert_channel_closed(stale_ack);
            again.ack().await.unwrap();
            assert_eq!(transport.message_count(&queue).await.unwrap(), 0);
        },
    )
    .await;
}

#[tokio::test]
async fn reply_queue_outlives_a_reconnect() {
    on_broker(
        |options| options,
        |transport, topology| async move {
            let prefix = topology.prefix().to_owned();
            let reply = Destination::queue(topology.reply_queue("one"));
            let mut consumer = transport.consume(&topology.reply_queue("one"), 10).await.unwrap();
            transport.publish(&reply, Message::new("before").with_correlation_id("c-1")).await.unwrap();
            next(&mut consumer).await.ack().await.unwrap();

            assert!(kill_connections(&prefix).await >= 1);
            // Published while nobody consumes: the queue is still there (not exclusive, not
            // auto-delete), so the publish is routed and waits for the consumer to come back.
            transport.publish(&reply, Message::new("after").with_correlation_id("c-2")).await.unwrap();
            let delivery = next(&mut consumer).await;
            assert_eq!(delivery.message.correlation_id.as_deref(), Some("c-2"));
            delivery.ack().await.unwrap();
        },
    )
    .await;
}

#[tokio::test]
async fn known_topology_is_declared_again_on_reconnect() {
    on_broker(
        |options| options,
        |transport, topology| async move {
            let prefix = topology.prefix().to_owned();
            let step = Topology::empty(&prefix).with_step("late");
            transport.declare(&step).await.unwrap();
            let queue = topology.step_queue("late");
            // Someone deletes the queue behind the transport's back, then the connection drops.
            let other = broker(&format!("{prefix}-other")).await.unwrap();
            other.delete(&step).await.unwrap();
            other.close().await;
            assert!(kill_connections(&prefix).await >= 1);

            // The reconnect declares it again, so publishing to it works.
            transport.publish(&Destination::queue(&queue), Message::new("x")).await.unwrap();
            assert_eq!(transport.message_count(&queue).await.unwrap(), 1);
            transport.delete(&step).await.unwrap();
        },
    )
    .await;
}

#[tokio::test]
async fn broker_nack_is_a_typed_error() {
    on_broker(
        |options| options,
        |transport, topology| async move {
            // A queue that holds nothing and refuses what does not fit: the broker nacks.
            let full = topology.name("full");
            let connection =
                lapin::Connection::connect(&amqp_url(), lapin::ConnectionProperties::default()).await.unwrap();
            let channel = connection.create_channel().await.unwrap();
            let mut arguments = lapin::types::FieldTable::default();
            arguments.insert("x-max-length".into(), lapin::types::AMQPValue::LongLongInt(0));
            arguments.insert("x-overflow".into(), lapin::types::AMQPValue::LongString("reject-publish".into()));
            channel
                .queue_declare(full.as_str().into(), lapin::options::QueueDeclareOptions::durable(), arguments)
                .await
                .unwrap();

            let result = transport.publish(&Destination::queue(&full), Message::new("x")).await;
            channel.queue_delete(full.as_str().into(), Default::default()).await.unwrap();
            connection.close(200, "done".into()).await.unwrap();
            assert!(matches!(result, Err(TransportError::Nack { .. })), "{result:?}");
            // The channel survives a nack.
            transport.publish(&Destination::queue(topology.requests_queue()), Message::new("x")).await.unwrap();
        },
    )
    .await;
}

#[tokio::test]
async fn bad_url_and_unreachable_broker_are_typed_errors() {
    let result = AmqpTransport::connect("not a url").await;
    assert!(matches!(result, Err(TransportError::Invalid(_))), "{result:?}");
    // Port 1 on localhost refuses connections.
    let result = AmqpTransport::connect("amqp://guest:guest@127.0.0.1:1/%2f").await;
    assert!(matches!(result, Err(TransportError::Unavailable(_))), "{result:?}");
}

/// Restarts the broker application (`rabbitmqctl stop_app` / `start_app`) under a consumer
/// and a publisher. Disruptive for everyone on the broker, so only on request:
/// `cargo test -p airlock-transport --test transport -- --ignored broker_restart`.
#[tokio::test]
#[ignore = "restarts the shared broker"]
async fn survives_a_broker_restart() {
    // Enough attempts to ride out a restart of several seconds.
    let options = |mut options: AmqpOptions| {
        options.attempts = 30;
        options.reconnect_max = Duration::from_secs(2);
        options
    };
    on_broker(options, |transport, topology| async move {
        let queue = topology.requests_queue();
        let mut consumer = transport.consume(&queue, 10).await.unwrap();
        publish_all(&transport, &queue, 0..50).await;

        rabbitmqctl(&["stop_app"]).await;
        let restart = async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            rabbitmqctl(&["start_app"]).await;
        };
        // Published while the broker is down: retried until it is back.
        let ((), ()) = tokio::join!(restart, publish_all(&transport, &queue, 50..100));

        let mut seen = BTreeMap::<String, u32>::new();
        while seen.len() < 100 {
            let delivery = next(&mut consumer).await;
            let id = delivery.message.message_id.clone().unwrap();
            if delivery.ack().await.is_ok() {
                *seen.entry(id).or_default() += 1;
            }
        }
        assert_eq!(transport.message_count(&queue).await.unwrap(), 0);
    })
    .await;
}
