//! `airlock bench --pending N`: the memory of a runner holding N pending calls.
//!
//! One client submits N approval requests of `--size` bytes, with a timeout long enough that
//! none expires, to a fresh fleet prefix nobody serves. Once the broker holds every request
//! and the client has all N pending, the process's resident memory is read from
//! `/proc/self/status` and printed as one JSON object; then the client is closed and the
//! prefix's queues and exchanges deleted.
//!
//! The N calls are held as the client's own futures in one `FuturesUnordered`, not as a
//! task each: what is measured is what the client keeps per call, plus that future.

use std::time::Duration;

use airlock_client::{Client, ClientConfig, Repeats, ReplyTrust};
use airlock_contract::v1;
use airlock_transport::{AmqpTransport, Topology, Transport};
use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use serde_json::json;

use super::fleet::{key, template};
use super::{BenchArgs, topology_with_core};
use crate::commands::{Failure, FleetArgs, connect, shutdown_signal};

/// How long each call may wait: longer than any measurement, so none fails closed.
const WAIT: Duration = Duration::from_secs(3600);

/// How often the broker and the client are asked whether everything is pending.
const POLL: Duration = Duration::from_millis(200);

const MB: f64 = 1024.0 * 1024.0;

/// Runs the measurement of `count` pending calls and prints its JSON object.
pub async fn run(args: &BenchArgs, count: usize) -> Result<(), Failure> {
    if count == 0 {
        return Err(Failure::config("--pending must be at least 1"));
    }
    if !(args.max_seconds > 0.0 && args.max_seconds.is_finite()) {
        return Err(Failure::config("--max-seconds must be a positive number of seconds"));
    }
    if args.prefix.is_some() {
        // Its requests would stay queued there for an hour, for whichever worker comes next.
        return Err(Failure::config("--pending runs on a fresh prefix of its own: leave out --prefix"));
    }
    let unique = format!("{}-{}", std::process::id(), &uuid::Uuid::now_v7().simple().to_string()[24..]);
    let prefix = format!("airlock-bench-pending-{unique}");
    let runner = format!("bench-pending-{unique}");
    let fleet = FleetArgs::of_bench(&args.amqp, &args.tls, &prefix);
    let transport = connect(&fleet, "bench pending").await?;

    let guard = Duration::from_secs_f64(args.max_seconds);
    let outcome = tokio::select! {
        outcome = tokio::time::timeout(guard, measure(&transport, &prefix, &runner, args.size, count)) => {
            outcome.unwrap_or_else(|_| {
                Err(Failure::other(format!("not all pending within {}s (--max-seconds)", args.max_seconds)))
            })
        }
        () = shutdown_signal() => Err(Failure::other("the bench was interrupted")),
    };
    let topology = topology_with_core(Topology::empty(prefix.as_str()).with_reply_queue(&runner));
    if let Err(e) = transport.delete(&topology).await {
        eprintln!("warning: could not delete the bench's queues on prefix '{prefix}': {e}");
    }
    transport.close().await;
    println!("{}", outcome?);
    Ok(())
}

/// Connects the runner's client, holds `count` calls pending, and reads the memory then.
/// The client is closed (failing the calls) before this returns.
async fn measure(
    transport: &AmqpTransport,
    prefix: &str,
    runner: &str,
    size: usize,
    count: usize,
) -> Result<serde_json::Value, Failure> {
    transport.declare(&Topology::new(prefix)).await.map_err(|e| Failure::other(format!("declare: {e}")))?;
    let config = ClientConfig {
        prefix: prefix.to_owned(),
        runner_id: runner.to_owned(),
        default_timeout: WAIT,
        // Nobody answers: there is no reply to prove.
        replies: ReplyTrust::Insecure,
        repeats: Repeats::default(),
    };
    let client =
        Client::connect(transport.clone(), config).await.map_err(|e| Failure::other(format!("client: {e}")))?;
    let (template, request_bytes) = template(size, client.reply_queue(), WAIT);
    let before = Memory::read();
    let held = hold(transport, &client, prefix, &template, count).await;
    client.close().await;
    let after = held?;
    let mb = |bytes: u64| (bytes as f64 / MB * 10.0).round() / 10.0;
    Ok(json!({
        "pending": count,
        "rss_mb": mb(after.rss),
        "hwm_mb": mb(after.hwm),
        "request_bytes": request_bytes,
        "baseline_rss_mb": mb(before.rss),
        "bytes_per_call": after.rss.saturating_sub(before.rss) / count as u64,
    }))
}

/// Submits `count` copies of `template` (each with its own key) and polls them until the
/// broker holds every request and the client has all of them pending; the memory then.
async fn hold(
    transport: &AmqpTransport,
    client: &Client<AmqpTransport>,
    prefix: &str,
    template: &v1::Request,
    count: usize,
) -> Result<Memory, Failure> {
    let mut waiting = FuturesUnordered::new();
    for index in 0..count as u64 {
        let mut request = template.clone();
        request.key = Some(key("pending", index));
        waiting.push(client.decide(request, Some(WAIT)));
    }
    let queue = Topology::new(prefix).requests_queue();
    let mut poll = tokio::time::interval(POLL);
    loop {
        tokio::select! {
            // Polling the calls is what publishes them; none may end while nobody answers.
            ended = waiting.next() => {
                let why = match ended {
                    Some(Ok(decision)) => format!("decided by {}", decision.approver),
                    Some(Err(e)) => e.to_string(),
                    None => "no call left".to_owned(),
                };
                return Err(Failure::other(format!("a call ended while it should be pending: {why}")));
            }
            _ = poll.tick() => {
                let queued = transport.message_count(&queue).await.unwrap_or(0) as usize;
                if queued >= count && client.stats().pending == count {
                    return Ok(Memory::read());
                }
            }
        }
    }
}

/// Resident memory of this process, in bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Memory {
    /// `VmRSS`: resident now.
    rss: u64,
    /// `VmHWM`: the peak so far.
    hwm: u64,
}

impl Memory {
    fn read() -> Self {
        std::fs::read_to_string("/proc/self/status").map(|status| Self::parse(&status)).unwrap_or_default()
    }

    fn parse(status: &str) -> Self {
        let kib = |field: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(field))
                .and_then(|value| value.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
                .map_or(0, |kib| kib * 1024)
        };
        Memory { rss: kib("VmRSS:"), hwm: kib("VmHWM:") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_resident_and_peak() {
        let status = "Name:\tairlock\nVmHWM:\t   12345 kB\nVmRSS:\t   12000 kB\n";
        let memory = Memory::parse(status);
        assert_eq!((memory.rss, memory.hwm), (12000 * 1024, 12345 * 1024));
        assert!(Memory::read().rss > 0);
    }
}
