//! What every transport test needs: the broker gate, a unique fleet per test, cleanup and
//! hang guards.

use std::{
    future::Future,
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use airlock_transport::{AmqpOptions, AmqpTransport, Consumer, Delivery, Topology, Transport, TransportError};

/// How long any test may take before it is declared hung. Only a hang guard: nothing is
/// measured against it.
pub const HANG_GUARD: Duration = Duration::from_secs(120);

const DEFAULT_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// The broker URL tests use.
pub fn amqp_url() -> String {
    std::env::var("AIRLOCK_AMQP_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// A prefix no other test (in this run or another) uses.
pub fn unique_prefix() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or_default();
    format!("test-{}-{nanos:x}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// The broker gate: a transport on the test broker, or `None` (with the reason printed) when
/// it cannot be reached. With `CI` set, an unreachable broker fails the test instead.
pub async fn broker(connection_name: &str) -> Option<AmqpTransport> {
    broker_with(AmqpOptions::new(amqp_url()).with_connection_name(connection_name)).await
}

/// [`broker`] with explicit options.
pub async fn broker_with(options: AmqpOptions) -> Option<AmqpTransport> {
    match AmqpTransport::connect_with(options).await {
        Ok(transport) => Some(transport),
        Err(error) if std::env::var_os("CI").is_some() => {
            panic!("CI is set and the broker at AIRLOCK_AMQP_URL is unreachable: {error:?}")
        }
        Err(error) => {
            eprintln!("skipping: no broker at AIRLOCK_AMQP_URL ({error:?})");
            None
        }
    }
}

/// The fleet every suite test gets: the core topology, a step queue and two private queues,
/// both bound to the cancels exchange, the first also to decisions on `approval.*`.
pub fn fixture(prefix: &str) -> Topology {
    let topology = Topology::new(prefix);
    let (one, two) = (topology.reply_queue("one"), topology.reply_queue("two"));
    let (cancels, decisions) = (topology.cancels_exchange(), topology.decisions_exchange());
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

/// Closes, on the broker, the connections of the transport named `name` (see [`broker`]):
/// the fault a network cut or a broker restart causes, limited to this test's connections so
/// other users of a shared broker are left alone. With `AIRLOCK_TEST_KILL=all`, runs
/// `rabbitmqctl close_all_connections` instead. Returns how many were closed.
pub async fn kill_connections(name: &str) -> usize {
    if std::env::var("AIRLOCK_TEST_KILL").as_deref() == Ok("all") {
        rabbitmqctl(&["close_all_connections", "test"]).await;
        return usize::MAX;
    }
    // One line per connection: `<pid>\t[..., {"connection_name","<name> (publish)"}, ...]`.
    let listing = rabbitmqctl(&["list_connections", "-q", "--no-table-headers", "pid", "client_properties"]).await;
    let ours = format!("{{\"connection_name\",\"{name} (");
    let mut closed = 0;
    for line in listing.lines().filter(|line| line.contains(&ours)) {
        if let Some((pid, _)) = line.split_once('\t') {
            rabbitmqctl(&["close_connection", pid, "test"]).await;
            closed += 1;
        }
    }
    closed
}

/// Runs `rabbitmqctl` and returns its output; fails the test if it fails.
pub async fn rabbitmqctl(args: &[&str]) -> String {
    let output = tokio::process::Command::new("rabbitmqctl").args(args).output().await.expect("rabbitmqctl runs");
    assert!(output.status.success(), "rabbitmqctl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}
