//! What Airlock's tests share.
//!
//! - [`amqp_url`]: the broker tests use (`AIRLOCK_AMQP_URL`, default the local RabbitMQ).
//! - [`unreachable`]: the gate for a broker that cannot be reached: skip on a laptop, fail
//!   loudly when `CI` is set.
//! - [`unique_prefix`]: a fleet prefix no other test uses, so tests share one broker.
//! - [`kill_connections`] and [`rabbitmqctl`]: faults injected on the broker side.
//! - [`node`]: a RabbitMQ node of a test's own (TLS, the management API, stopping and
//!   starting again).
//! - [`cluster`]: a RabbitMQ cluster of a test's own, formed from such nodes.
//! - [`link`]: a TCP link of a test's own between a role and its broker, to freeze (half-open),
//!   thaw, drop, reset and delay.
//! - [`database`]: a throwaway PostgreSQL database (gated like the broker) or SQLite file for
//!   a test of a service that stores.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod cluster;
pub mod database;
pub mod link;
pub mod node;

use std::fmt::Debug;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The broker the tests use when `AIRLOCK_AMQP_URL` is unset.
pub const DEFAULT_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

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

/// The gate for a broker that could not be reached: with `CI` set the test fails loudly;
/// elsewhere the reason is printed and the caller skips the test.
pub fn unreachable(error: impl Debug) {
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and the broker at AIRLOCK_AMQP_URL is unreachable: {error:?}");
    }
    eprintln!("skipping: no broker at AIRLOCK_AMQP_URL ({error:?})");
}

/// Closes, on the broker, the connections named `name` (a transport's
/// `AmqpOptions::connection_name`), or `name (<host>:<pid>)` as the command line names its
/// roles': what a network cut or a broker restart looks like to a client, limited to one
/// test's connections so other users of a shared broker are left alone. With
/// `AIRLOCK_TEST_KILL=all`, runs `rabbitmqctl close_all_connections` instead. Returns how many
/// were closed.
pub async fn kill_connections(name: &str) -> usize {
    if std::env::var("AIRLOCK_TEST_KILL").as_deref() == Ok("all") {
        rabbitmqctl(&["close_all_connections", "test"]).await;
        return usize::MAX;
    }
    let listing = rabbitmqctl(&LIST_CONNECTIONS).await;
    let pids = connections_named(&listing, name);
    for pid in &pids {
        rabbitmqctl(&["close_connection", pid, "test"]).await;
    }
    pids.len()
}

/// `rabbitmqctl` arguments that list connections, one line each:
/// `<pid>\t[..., {"connection_name","<name>"}, ...]` (see [`connections_named`]).
pub const LIST_CONNECTIONS: [&str; 5] = ["list_connections", "-q", "--no-table-headers", "pid", "client_properties"];

/// The Erlang pids, in a [`LIST_CONNECTIONS`] listing, of the connections named `name`, or
/// `name (<host>:<pid>)` as the command line names its roles'.
pub fn connections_named<'a>(listing: &'a str, name: &str) -> Vec<&'a str> {
    let (exact, of_role) = (format!("{{\"connection_name\",\"{name}\"}}"), format!("{{\"connection_name\",\"{name} ("));
    listing
        .lines()
        .filter(|line| line.contains(&exact) || line.contains(&of_role))
        .filter_map(|line| line.split_once('\t').map(|(pid, _)| pid))
        .collect()
}

/// The figure of `queue` in a `rabbitmqctl list_queues -q --no-table-headers name <figure>`
/// listing (`<name>\t<figure>` a line), if the queue is listed.
pub fn queue_figure(listing: &str, queue: &str) -> Option<u64> {
    listing
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .find(|(name, _)| *name == queue)
        .and_then(|(_, figure)| figure.trim().parse().ok())
}

/// Runs `rabbitmqctl` and returns its output; fails the test if it fails.
pub async fn rabbitmqctl(args: &[&str]) -> String {
    ctl_output(std::process::Command::new("rabbitmqctl"), args).await
}

/// Runs `command` (a `rabbitmqctl`, e.g. a test node's [`node::Node::ctl`]) with `args` and
/// returns its output; fails the test if it fails.
pub async fn ctl_output(command: std::process::Command, args: &[&str]) -> String {
    let output = tokio::process::Command::from(command).args(args).output().await.expect("rabbitmqctl runs");
    assert!(output.status.success(), "rabbitmqctl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}
