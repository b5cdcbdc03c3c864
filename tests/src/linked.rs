//! Roles for the fault suites (`partitions`, `soak`): on links of their own
//! (`airlock_testkit::link`) or straight to the broker, every connection with an AMQP
//! heartbeat short enough to find a silent link within a call's deadline.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use airlock_client::{Client, ClientConfig, Repeats};
use airlock_testkit::amqp_url;
use airlock_testkit::link::Link;
use airlock_transport::{AmqpOptions, AmqpTransport};
use serde_json::Value;
use tokio::process::{Child, Command};

use crate::soak::AuditRecord;
use crate::{TestKeys, airlock_bin};

/// The heartbeat every role of the fault suites runs with, in seconds, set as the broker
/// URL's `heartbeat` query (what the roles offer for it): each end gives a silent connection
/// up after two intervals, about 4 s.
pub const HEARTBEAT: u32 = 2;

/// `urls` (one URL or a comma-separated list) with [`HEARTBEAT`] on each.
pub fn with_heartbeat(urls: &str) -> String {
    let each = urls.split(',').map(|url| {
        let joiner = if url.contains('?') { '&' } else { '?' };
        format!("{url}{joiner}heartbeat={HEARTBEAT}")
    });
    each.collect::<Vec<_>>().join(",")
}

/// A transport through `link`, with connections named `name`.
pub async fn through(link: &Link, name: &str) -> AmqpTransport {
    let options = AmqpOptions::new(with_heartbeat(&link.url())).with_connection_name(name);
    AmqpTransport::connect_with(options).await.expect("a transport through the link")
}

/// A link in front of the test broker and a transport through it, with connections named
/// `name`.
pub async fn linked(name: &str) -> (Link, AmqpTransport) {
    let link = Link::to_broker(&amqp_url()).await.expect("a link to the broker");
    let transport = through(&link, name).await;
    (link, transport)
}

/// A transport straight to the test broker, with the same heartbeat as the linked roles.
pub async fn direct(name: &str) -> AmqpTransport {
    let options = AmqpOptions::new(with_heartbeat(&amqp_url())).with_connection_name(name);
    AmqpTransport::connect_with(options).await.expect("the broker answered a moment ago")
}

/// The runner `runner` of fleet `prefix` on `transport`, its calls failing closed after
/// `deadline`.
pub async fn runner(transport: &AmqpTransport, prefix: &str, deadline: Duration) -> Client<AmqpTransport> {
    let config = ClientConfig {
        prefix: prefix.into(),
        runner_id: "runner".into(),
        default_timeout: deadline,
        replies: TestKeys::get().replies(),
        repeats: Repeats::default(),
    };
    Client::connect(transport.clone(), config).await.expect("the runner's client starts")
}

/// `airlock audit log` of fleet `prefix` on `urls` with `args`, writing to `out`; killed when
/// dropped.
pub fn auditor(urls: &str, prefix: &str, out: &Path, args: &[&str]) -> Child {
    Command::new(airlock_bin())
        .args(["audit", "log", "--amqp", urls, "--prefix", prefix])
        .args(args)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("airlock audit log starts")
}

/// The records of the decision log at `path` so far (the auditor may be halfway through a
/// line), each with its call's tool call id. A line an auditor killed halfway through left
/// torn is no record: its decision is written again, whole, after a restart.
pub fn audit_records(path: &Path) -> Vec<AuditRecord> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    (text.split_inclusive('\n').filter(|line| line.ends_with('\n')))
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|record| AuditRecord {
            call: record["key"]["tool_call_id"].as_str().unwrap_or_default().to_owned(),
            decision_id: record["decision_id"].as_str().unwrap_or_default().to_owned(),
        })
        .collect()
}
