//! `airlock gateway bench`: what waiting HTTP requests cost a gateway, and how soon their
//! decisions come once a worker starts.
//!
//! It starts a gateway (this program, `airlock gateway`) on a fresh prefix nobody serves,
//! sends `--waiting` approval requests with `Prefer: wait` long enough that none returns, and
//! once the broker holds every request reads the gateway's peak resident memory from
//! `/proc`. Then it starts one policy worker (`airlock worker`) and times each response from
//! the worker's start; last, with the worker running, it times `--sequential` requests one
//! after the other. The gateway and the worker are child processes, stopped with SIGTERM;
//! the prefix's queues and exchanges are deleted at the end.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use airlock_transport::{AmqpTransport, Topology, Transport};
use clap::Args;
use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use serde_json::json;
use tokio::time::Instant;

use crate::commands::bench::children::Children;
use crate::commands::{Failure, FleetArgs, TlsArgs, connect};

/// Arguments of `airlock gateway bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The broker, e.g. amqp://guest:guest@127.0.0.1:5672/%2f
    #[arg(long, env = "AIRLOCK_AMQP_URL")]
    amqp: String,
    #[command(flatten)]
    tls: TlsArgs,
    /// Requests held waiting at once.
    #[arg(long, default_value_t = 10_000)]
    waiting: usize,
    /// Requests timed one after the other once the worker runs.
    #[arg(long, default_value_t = 500)]
    sequential: usize,
    /// Seconds the whole bench may take before it gives up (and still cleans up).
    #[arg(long, default_value_t = 600.0)]
    max_seconds: f64,
}

/// The policy every request is decided by: approve everything, at once.
const POLICY: &str = "approvers:\n  - name: auto\n    tools: \"*\"\n    decision: approve\n";

/// Seconds each request asks to wait, and may take in the fleet: longer than the bench.
const WAIT: u64 = 3600;

/// Requests opened at once while the waiting ones are sent (the listener's backlog).
const OPENING: usize = 256;

/// How often the broker is asked whether every request is queued.
const POLL: Duration = Duration::from_millis(200);

const MB: f64 = 1024.0 * 1024.0;

/// Runs the bench and prints its JSON report.
pub async fn run(args: BenchArgs) -> Result<(), Failure> {
    if args.waiting == 0 || !(args.max_seconds > 0.0 && args.max_seconds.is_finite()) {
        return Err(Failure::config("--waiting and --max-seconds must be above 0"));
    }
    let unique = format!("{}-{}", std::process::id(), &uuid::Uuid::now_v7().simple().to_string()[24..]);
    let prefix = format!("airlock-bench-gateway-{unique}");
    let dir = std::env::temp_dir().join(format!("airlock-bench-gateway-{unique}"));
    std::fs::create_dir_all(&dir).map_err(|e| Failure::other(format!("{}: {e}", dir.display())))?;
    let fleet = FleetArgs::of_bench(&args.amqp, &args.tls, &prefix);
    let transport = connect(&fleet, "bench gateway").await?;
    let mut children = Children::default();
    let guard = Duration::from_secs_f64(args.max_seconds);
    let outcome = tokio::time::timeout(guard, measure(&args, &prefix, &dir, &transport, &mut children))
        .await
        .unwrap_or_else(|_| Err(Failure::other(format!("the bench took longer than {guard:?}"))));
    children.stop_all().await;
    let _ = transport.delete(&Topology::new(prefix.clone())).await;
    transport.close().await;
    let _ = std::fs::remove_dir_all(&dir);
    let report = outcome?;
    println!("{}", serde_json::to_string_pretty(&report).expect("a report serialises"));
    Ok(())
}

async fn measure(
    args: &BenchArgs,
    prefix: &str,
    dir: &Path,
    transport: &AmqpTransport,
    children: &mut Children,
) -> Result<serde_json::Value, Failure> {
    let tokens = dir.join("tokens.yaml");
    let token = airlock_gateway::tokens::add_token(&tokens, "bench", &[], true)
        .map_err(|e| Failure::other(format!("the bench's tokens file: {e}")))?;
    let listen = free_address()?;
    let (listen_text, tokens_text) = (listen.to_string(), tokens.display().to_string());
    let (waiting, waiting_rate, max_wait) =
        (args.waiting.to_string(), (args.waiting * 10).to_string(), WAIT.to_string());
    children.spawn(
        "gateway",
        &args.amqp,
        &[
            "gateway",
            "--prefix",
            prefix,
            "--listen",
            &listen_text,
            "--tokens",
            &tokens_text,
            "--max-wait",
            &max_wait,
            "--default-timeout",
            &max_wait,
            "--rate",
            &waiting_rate,
            "--burst",
            &waiting_rate,
            "--max-pending",
            &waiting,
            // The worker started later runs unsigned, as measured before runners had to say so.
            "--insecure",
        ],
    )?;
    let base = format!("http://{listen}");
    let http = airlock_gateway::webhook::http_client().map_err(|e| Failure::other(e.to_string()))?;
    wait_until_healthy(&http, &base, children).await?;
    let gateway = children.pids(&["gateway".to_owned()]);
    let idle = children.peak_rss(&["gateway".to_owned()]).first().copied().flatten();

    let client = Arc::new(Sender { http: http.clone(), base: base.clone(), token: token.clone() });
    let mut answers = FuturesUnordered::new();
    for index in 0..args.waiting {
        let client = client.clone();
        answers.push(tokio::spawn(async move { client.approve(&format!("w{index}"), WAIT).await }));
        if index % OPENING == OPENING - 1 {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let requests = Topology::new(prefix).requests_queue();
    loop {
        children.check_alive()?;
        let queued = transport.message_count(&requests).await.map_err(|e| Failure::other(e.to_string()))?;
        if queued as usize >= args.waiting {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let held = children.peak_rss(&["gateway".to_owned()]).first().copied().flatten();

    children.spawn("worker", &args.amqp, &["worker", "--prefix", prefix, "--insecure-unsigned", "--id", "bench"])?;
    let started = Instant::now();
    let mut drained = Vec::with_capacity(args.waiting);
    while let Some(answer) = answers.next().await {
        let status = answer.map_err(|e| Failure::other(e.to_string()))??;
        if status != 200 {
            return Err(Failure::other(format!("a waiting request was answered {status}, not 200")));
        }
        drained.push(started.elapsed());
    }
    drained.sort();

    let mut sequential = Vec::with_capacity(args.sequential);
    for index in 0..args.sequential {
        let sent = Instant::now();
        let status = client.approve(&format!("s{index}"), 60).await?;
        if status != 200 {
            return Err(Failure::other(format!("a request was answered {status}, not 200")));
        }
        sequential.push(sent.elapsed());
    }
    sequential.sort();

    let ms = |d: Duration| (d.as_secs_f64() * 1e5).round() / 100.0;
    let mb = |bytes: Option<u64>| bytes.map(|b| (b as f64 / MB * 10.0).round() / 10.0);
    let per_waiting = idle.zip(held).map(|(idle, held)| held.saturating_sub(idle) as f64 / args.waiting as f64);
    Ok(json!({
        "waiting": args.waiting,
        "gateway_pid": gateway.first(),
        "gateway_rss_idle_mb": mb(idle),
        "gateway_rss_holding_mb": mb(held),
        "bytes_per_waiting_request": per_waiting.map(f64::round),
        "after_worker_start_ms": {
            "first": drained.first().map(|d| ms(*d)),
            "p50": percentile(&drained, 0.50).map(ms),
            "p99": percentile(&drained, 0.99).map(ms),
            "all": drained.last().map(|d| ms(*d)),
        },
        "sequential": args.sequential,
        "sequential_ms": {
            "p50": percentile(&sequential, 0.50).map(ms),
            "p99": percentile(&sequential, 0.99).map(ms),
        },
    }))
}

/// Sends approvals to the gateway.
struct Sender {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Sender {
    /// Asks for approval of call `id`, waiting up to `wait` seconds; the response's status.
    async fn approve(&self, id: &str, wait: u64) -> Result<u16, Failure> {
        let body = json!({
            "call": {"id": id, "function": "bash", "arguments": {"cmd": "ls"}},
            "policy": {"inline": POLICY},
            "origin": {"run": "bench", "sample": "1"},
            "timeout": WAIT,
        });
        let response = self
            .http
            .post(format!("{}/v1/approvals", self.base))
            .bearer_auth(&self.token)
            .header("prefer", format!("wait={wait}"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| Failure::other(format!("a request failed: {e}")))?;
        Ok(response.status().as_u16())
    }
}

/// The value at fraction `p` of sorted `values`.
fn percentile(values: &[Duration], p: f64) -> Option<Duration> {
    let last = values.len().checked_sub(1)?;
    values.get(((last as f64) * p).round() as usize).copied()
}

/// A local address no one listens on now.
fn free_address() -> Result<SocketAddr, Failure> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| Failure::other(e.to_string()))?;
    listener.local_addr().map_err(|e| Failure::other(e.to_string()))
}

async fn wait_until_healthy(http: &reqwest::Client, base: &str, children: &mut Children) -> Result<(), Failure> {
    loop {
        children.check_alive()?;
        if let Ok(response) = http.get(format!("{base}/healthz")).send().await
            && response.status().is_success()
        {
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
}
