//! What every transport test needs: the broker gate, a unique fleet per test, cleanup and
//! hang guards.

use std::{future::Future, time::Duration};

use airlock_testkit::unreachable;
pub use airlock_testkit::{amqp_url, kill_connections, rabbitmqctl, unique_prefix};
use airlock_transport::{AmqpOptions, AmqpTransport, Consumer, Delivery, Topology, Transport, TransportError};

/// How long any test may take before it is declared hung. Only a hang guard: nothing is
/// measured against it.
pub const HANG_GUARD: Duration = Duration::from_secs(120);

/// The broker gate: a transport on the test broker, or `None` (with the reason printed) when
/// it cannot be reached. With `CI` set, an unreachable broker fails the test instead.
pub async fn broker(connection_name: &str) -> Option<AmqpTransport> {
    broker_with(AmqpOptions::new(amqp_url()).with_connection_name(connection_name)).await
}

/// [`broker`] with explicit options.
pub async fn broker_with(options: AmqpOptions) -> Option<AmqpTransport> {
    match AmqpTransport::connect_with(options).await {
        Ok(transport) => Some(transport),
        Err(error) => {
            unreachable(error);
            None
        }
    }
}

/// The fleet every suite test gets: the core topology, a step queue and two private queues,
/// both bound to the cancels exchange, the first also to the routing exchange on
/// `approval.*`.
pub fn fixture(prefix: &str) -> Topology {
    let topology = Topology::new(prefix);
    let (one, two) = (topology.reply_queue("one"), topology.reply_queue("two"));
    let (cancels, decisions) = (topology.cancels_exchange(), topology.route_exchange());
    topology
        .with_step("a")
        .with_reply_queue("one")
        .with_reply_queue("two")
        .with_binding(&cancels, &one, "")
        .with_binding(&cancels, &two, "")
        .with_binding(decisions, one, "approval.*")
}

/// Shows the transports' logs in test output, filtered by `RUST_LOG` (for instance
/// `RUST_LOG=airlock_transport=info` to watch recovery).
pub fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Declares `topology`, runs `body` under the hang guard, then deletes the topology through
/// `cleanup` (best effort, also when the body panicked or closed its transport) and passes
/// any panic on.
pub async fn run<T, F, Fut>(transport: T, cleanup: T, topology: Topology, body: F)
where
    T: Transport,
    F: FnOnce(T, Topology) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    logs();
    transport.declare(&topology).await.expect("declare");
    // A task of its own catches the body's panic, so cleanup still runs.
    let task = tokio::spawn(body(transport.clone(), topology.clone()));
    let outcome = tokio::time::timeout(HANG_GUARD, task).await;
    transport.close().await;
    if let Err(error) = cleanup.delete(&topology).await {
        eprintln!("cleanup of {} failed: {error}", topology.prefix());
    }
    cleanup.close().await;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(error)) => std::panic::resume_unwind(error.into_panic()),
        Err(_) => panic!("test hung for {HANG_GUARD:?}"),
    }
}

/// The next delivery, which must come.
pub async fn next(consumer: &mut Consumer) -> Delivery {
    tokio::time::timeout(HANG_GUARD, consumer.next()).await.expect("no delivery came").expect("the consumer ended")
}

/// Asserts `result` failed with `ChannelClosed`.
pub fn assert_channel_closed(result: Result<(), TransportError>) {
    assert!(matches!(result, Err(TransportError::ChannelClosed)), "{result:?}");
}
