//! `airlock bench`: the fleet's round trip over RabbitMQ against a bare AMQP echo, in one run.
//!
//! It starts its own policy workers (this program, `airlock worker`) and sends approval
//! requests through the runner's client, then sends the same traffic (same size, same number
//! in flight, same durability) through two request/reply echoes: a bare one on lapin alone,
//! with none of Airlock's code (`airlock bench-bare-echo`), the denominator; and one on
//! Airlock's own transport (`airlock bench-echo`), which tells the transport's share. The
//! report puts the three side by side, with each side's CPU time per round trip in the
//! runner, the responder and the broker (from `/proc`), against the targets of the design:
//! the fleet at 80% of the bare echo's throughput or better, at most 0.3 ms added to the
//! median latency, a worker under 50 MB, at most 15 µs more worker CPU per message than the
//! bare responder, at most 30 µs runner CPU per round trip. Targets are reported, never
//! enforced.
//!
//! Layout:
//! - `traffic`: the closed-loop load driver and its latency percentiles.
//! - `fleet`: requests through the client to the workers, with the bench's policy.
//! - `echo`: the echo on Airlock's transport (`airlock bench-echo`) and its requester.
//! - `bare`: the echo on lapin alone (`airlock bench-bare-echo`) and its requester.
//! - `children`: starting, measuring and stopping the child processes.
//! - `cpu`: CPU time of processes, from `/proc`.
//! - `pending`: `--pending N`, the runner's memory with N calls pending.
//! - `report`: the text and JSON reports.

mod bare;
pub(in crate::commands) mod children;
mod cpu;
mod echo;
mod fleet;
mod pending;
mod report;
mod traffic;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_client::{ClientConfig, Repeats, ReplyTrust};
use airlock_integrity::{FleetKey, KeyFile as _};
use airlock_transport::{Topology, Transport};
use clap::Args;

use self::bare::BareRequester;
pub use self::bare::{BareEchoArgs, serve as serve_bare_echo};
use self::children::Children;
use self::cpu::Pids;
use self::echo::{ECHO, EchoRequester};
pub use self::echo::{EchoArgs, serve as serve_echo};
use self::fleet::{FleetLoad, echo_body};
use self::report::{Report, Side};
use self::traffic::{Load, Requester};
use super::{Failure, FleetArgs, TlsArgs, VerifyArgs, connect, shutdown_signal};

/// Arguments of `airlock bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The broker, e.g. amqp://guest:guest@127.0.0.1:5672/%2f; a cluster as the comma-separated URLs of its nodes
    #[arg(long, env = "AIRLOCK_AMQP_URL")]
    amqp: String,
    /// The fleet's prefix (default: a fresh one, removed at the end).
    #[arg(long)]
    prefix: Option<String>,
    /// With --workers 0, how the running fleet's decisions are taken (one of the two is
    /// required then); the bench's own workers run with a key made for the run.
    #[command(flatten)]
    verify: VerifyArgs,
    #[command(flatten)]
    tls: TlsArgs,
    /// Policy workers to start; 0 uses the workers already running on --prefix, and needs
    /// their --verify-key (or --insecure).
    #[arg(long, default_value_t = 1)]
    workers: u16,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 64)]
    inflight: usize,
    /// Requests measured (after the warm-up), for the fleet and again for each echo.
    #[arg(long, default_value_t = 20_000)]
    requests: u64,
    /// The encoded size of each request, in bytes (padded with the assistant's message).
    #[arg(long, default_value_t = 1500)]
    size: usize,
    /// Rounds the measured requests are split into, rotating the fleet and the echoes.
    #[arg(long, default_value_t = 4)]
    rounds: u64,
    /// Requests sent before measuring, not counted.
    #[arg(long, default_value_t = 500)]
    warmup: u64,
    /// Seconds a request may wait before it counts as lost.
    #[arg(long, default_value_t = 30.0)]
    timeout: f64,
    /// Times the runner publishes a request again that is unanswered past its soft deadline
    /// (0: never), as every runner does three times by default.
    #[arg(long, default_value_t = Repeats::default().at_most)]
    repeats: u8,
    /// Seconds the whole bench may take before it gives up (and still cleans up).
    #[arg(long, default_value_t = 600.0)]
    max_seconds: f64,
    /// Print one JSON object instead of the readable report.
    #[arg(long)]
    json: bool,
    /// Instead: hold this many calls pending (nobody answers) and print the runner's resident
    /// memory as one JSON object.
    #[arg(long, value_name = "N")]
    pending: Option<usize>,
}

/// What both sides send.
#[derive(Debug, Clone)]
pub struct Settings {
    requests: u64,
    rounds: u64,
    warmup: u64,
    inflight: usize,
    size: usize,
    timeout: Duration,
    repeats: Repeats,
}

/// What the request tasks of a run report on the side: which workers decided, and the first
/// error, so a failing fleet is explained.
#[derive(Debug, Clone, Default)]
pub struct Shared {
    inner: Arc<Mutex<SharedInner>>,
}

#[derive(Debug, Default)]
struct SharedInner {
    deciders: HashSet<String>,
    first_error: Option<String>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, SharedInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn saw(&self, decided_by: String) {
        self.lock().deciders.insert(decided_by);
    }

    fn seen(&self, worker: &str) -> bool {
        self.lock().deciders.contains(worker)
    }

    fn error(&self, error: String) {
        self.lock().first_error.get_or_insert(error);
    }

    fn first_error(&self) -> Option<String> {
        self.lock().first_error.clone()
    }
}

/// The echo responder's name among the children.
const ECHO_RESPONDER: &str = "echo responder";
/// The bare echo's responder's name among the children.
const BARE_RESPONDER: &str = "bare echo responder";
/// The bare echo's queue suffix.
const BARE: &str = "bare-echo";

/// Runs the bench and prints its report.
pub async fn run(args: BenchArgs) -> Result<(), Failure> {
    if let Some(count) = args.pending {
        return pending::run(&args, count).await;
    }
    let positive = |seconds: f64| seconds > 0.0 && seconds.is_finite();
    if args.inflight == 0 || args.requests == 0 || args.warmup == 0 || args.rounds == 0 {
        return Err(Failure::config("--inflight, --requests, --rounds and --warmup must be at least 1"));
    }
    if args.rounds > args.requests {
        return Err(Failure::config("--rounds cannot exceed --requests"));
    }
    if !positive(args.timeout) || !positive(args.max_seconds) {
        return Err(Failure::config("--timeout and --max-seconds must be positive numbers of seconds"));
    }
    if args.workers == 0 && args.prefix.is_none() {
        return Err(Failure::config("--workers 0 uses running workers: give their --prefix"));
    }
    // The running fleet's decisions are taken as its key proves them; the bench's own
    // workers prove theirs with a key made for the run.
    let running = match args.workers {
        0 => Some(args.verify.tool_replies()?),
        _ if !args.verify.verify_key.is_empty() || args.verify.insecure => {
            return Err(Failure::config(
                "--verify-key and --insecure are for --workers 0: the bench's own workers run with a key made for the run",
            ));
        }
        _ => None,
    };
    let settings = Settings {
        requests: args.requests,
        rounds: args.rounds,
        warmup: args.warmup,
        inflight: args.inflight,
        size: args.size,
        timeout: Duration::from_secs_f64(args.timeout),
        repeats: Repeats { at_most: args.repeats, ..Repeats::default() },
    };
    let created = args.prefix.is_none();
    let unique = format!("{}-{}", std::process::id(), &uuid::Uuid::now_v7().simple().to_string()[24..]);
    let prefix = args.prefix.clone().unwrap_or_else(|| format!("airlock-bench-{unique}"));
    let names = Names {
        runner: format!("bench-{unique}"),
        echo_owner: format!("bench-echo-{unique}"),
        bare_owner: format!("bench-bare-{unique}"),
        keys: std::env::temp_dir().join(format!("airlock-bench-{unique}")),
    };

    // Fail fast, before starting anything, if the broker is not there.
    let fleet = FleetArgs::of_bench(&args.amqp, &args.tls, &prefix);
    let cleanup = connect(&fleet, "bench cleanup").await?;
    let mut children = Children::default();
    let guard = Duration::from_secs_f64(args.max_seconds);
    // SIGTERM or SIGINT ends the bench the way the guard does: children stopped, queues deleted.
    let outcome = tokio::select! {
        outcome = tokio::time::timeout(guard, bench(&args, running, &fleet, &settings, &names, &mut children)) => {
            outcome.map_err(|_| format!("the bench did not finish within {}s (--max-seconds)", args.max_seconds))
        }
        () = shutdown_signal() => Err("the bench was interrupted".to_owned()),
    };
    children.stop_all().await;
    let _ = std::fs::remove_dir_all(&names.keys);
    let mut topology = echo::topology(&prefix, ECHO, Some(&names.echo_owner))
        .with_reply_queue(&names.runner)
        .with_reply_queue(&names.bare_owner)
        .with_work_queue(BARE);
    if created {
        topology = topology_with_core(topology);
    }
    if let Err(e) = cleanup.delete(&topology).await {
        eprintln!("warning: could not delete the bench's queues on prefix '{prefix}': {e}");
    }
    cleanup.close().await;

    let report = outcome.map_err(Failure::other)??;
    if args.json {
        println!("{}", report.json());
    } else {
        print!("{}", report.text());
    }
    Ok(())
}

/// The names of the bench's private queues' owners, and where its workers' key is made.
struct Names {
    runner: String,
    echo_owner: String,
    bare_owner: String,
    keys: PathBuf,
}

/// `topology` plus the core of a fleet on the same prefix.
fn topology_with_core(topology: Topology) -> Topology {
    let core = Topology::new(topology.prefix());
    let mut merged = topology;
    for queue in core.queues() {
        merged = merged.with_queue(queue.name.clone(), queue.kind.clone());
    }
    for exchange in core.exchanges() {
        merged = merged.with_exchange(exchange.name.clone(), exchange.kind);
    }
    merged
}

/// Both phases: the fleet with its workers, then the echo with its responder. `running`: how
/// the decisions of a fleet already running (`--workers 0`) are taken.
async fn bench(
    args: &BenchArgs,
    running: Option<ReplyTrust>,
    fleet: &FleetArgs,
    settings: &Settings,
    names: &Names,
    children: &mut Children,
) -> Result<Report, Failure> {
    let prefix = fleet.options.prefix.as_str();
    let concurrency = u16::try_from(settings.inflight).unwrap_or(u16::MAX).to_string();

    // Every child first: the workers and the echo responder serve different queues, so
    // each idles while the other side is measured.
    let runner = connect(fleet, "bench runner").await?;
    runner.declare(&Topology::new(prefix)).await.map_err(|e| Failure::other(format!("declare: {e}")))?;
    // Signed, as a fleet runs: the bench's workers prove every reply, its runner checks them.
    let replies = match running {
        Some(replies) => replies,
        None => ReplyTrust::Proved(
            FleetKey::generate_files(&names.keys, "fleet")
                .map_err(|e| Failure::other(e.to_string()))?
                .public_key()
                .into(),
        ),
    };
    let signing_key = names.keys.join("fleet.key");
    let signing_key =
        signing_key.to_str().ok_or_else(|| Failure::config("the temporary directory's path is not UTF-8"))?;
    let mut workers = Vec::new();
    for index in 0..args.workers {
        let id = format!("bench-worker-{index}");
        let worker_args =
            ["worker", "--prefix", prefix, "--concurrency", &concurrency, "--id", &id, "--signing-key", signing_key];
        children.spawn(&id, &args.amqp, &worker_args)?;
        workers.push(id);
    }
    let echo_args = ["bench-echo", "--prefix", prefix, "--queue", ECHO, "--concurrency", &concurrency];
    children.spawn(ECHO_RESPONDER, &args.amqp, &echo_args)?;
    let requester = connect(fleet, "bench echo requester").await?;

    let shared = Shared::default();
    let config = ClientConfig {
        prefix: prefix.to_owned(),
        runner_id: names.runner.clone(),
        default_timeout: settings.timeout,
        replies,
        repeats: settings.repeats,
    };
    let mut fleet_load = FleetLoad::start(runner.clone(), config, settings, &workers, children, &shared).await?;
    let echo = EchoRequester::connect(requester.clone(), prefix, &names.echo_owner, settings).await?;
    let mut echo_load = Load::start(echo, settings, children, || format!("is the {ECHO_RESPONDER} running?")).await?;
    let bare_queue = format!("{prefix}.{BARE}");
    let bare_replies = Topology::empty(prefix).reply_queue(&names.bare_owner);
    let bare_body = echo_body(settings.size, &bare_replies, settings.timeout).body.to_vec();
    // lapin alone speaks to one node: the first of a cluster's.
    let bare_node = args.amqp.split(',').next().unwrap_or_default().trim();
    let bare = BareRequester::connect(bare_node, &bare_queue, &bare_replies, bare_body, settings.timeout).await?;
    let bare_args = ["bench-bare-echo", "--queue", &bare_queue, "--concurrency", &concurrency];
    children.spawn(BARE_RESPONDER, bare_node, &bare_args)?;
    let mut bare_load = Load::start(bare, settings, children, || format!("is the {BARE_RESPONDER} running?")).await?;

    // Rounds rotate the three sides (and which goes first), so a load that comes and goes on
    // the machine weighs on all alike. Each side's CPU is read around its own rounds.
    let broker = cpu::broker_pid();
    let pids = |names: &[&str]| Pids {
        responders: children.pids(&names.iter().map(|&n| n.to_owned()).collect::<Vec<_>>()),
        broker,
    };
    let (fleet_pids, echo_pids, bare_pids) =
        (Pids { responders: children.pids(&workers), broker }, pids(&[ECHO_RESPONDER]), pids(&[BARE_RESPONDER]));
    let (mut fleet_side, mut echo_side, mut bare_side) = (Side::default(), Side::default(), Side::default());
    for round in 0..settings.rounds {
        let requests = settings.requests / settings.rounds + u64::from(round < settings.requests % settings.rounds);
        for turn in 0..3 {
            match (round + turn) % 3 {
                0 => fleet_side.add(fleet_pids.measure(fleet_load.run(requests, settings.inflight)).await),
                1 => echo_side.add(echo_pids.measure(echo_load.run(requests, settings.inflight)).await),
                _ => bare_side.add(bare_pids.measure(bare_load.run(requests, settings.inflight)).await),
            }
        }
        children.check_alive()?;
    }
    let worker_rss = children.peak_rss(&workers);
    let request_bytes = fleet_load.request_bytes();
    echo_side.duplicates = echo_load.requester().duplicates();
    bare_side.duplicates = bare_load.requester().duplicates();
    let runner_stats = fleet_load.finish().await;
    fleet_side.duplicates = runner_stats.ignored_replies;
    bare_load.requester().finish().await;
    runner.close().await;
    requester.close().await;
    children.stop_all().await;

    Ok(Report {
        prefix: prefix.to_owned(),
        settings: settings.clone(),
        workers: args.workers,
        request_bytes,
        fleet: fleet_side,
        echo: echo_side,
        bare: bare_side,
        worker_rss,
        repeated: runner_stats.repeated,
        first_error: shared.first_error(),
    })
}
