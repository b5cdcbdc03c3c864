//! The baseline: a bare AMQP request/reply echo with the durability the fleet has (a durable
//! quorum work queue, persistent messages, publisher confirms on both sides, the request
//! acknowledged after its reply is confirmed) and nothing else.
//!
//! The responder runs as its own process (`airlock bench-echo`), like a worker; the
//! requester runs in the bench, like the runner's client: one reply queue, one reader task,
//! replies matched to requests by correlation id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_transport::{AmqpTransport, Delivery, Destination, Message, Topology, Transport};
use clap::Args;
use tokio::sync::oneshot;
use tracing::{debug, info, warn};

use super::Settings;
use super::children::Children;
use super::fleet::echo_body;
use super::traffic::{Outcome, Phase, drive};
use crate::commands::{Failure, FleetArgs, connect, shutdown_signal};

/// The echo queue's suffix: `<prefix>.echo`.
pub const ECHO: &str = "echo";

/// Arguments of `airlock bench-echo`.
#[derive(Debug, Args)]
pub struct EchoArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    /// The suffix of the queue to serve (`<prefix>.<queue>`).
    #[arg(long, default_value = ECHO)]
    queue: String,
    /// Messages handled at once (the consumer's prefetch).
    #[arg(long, default_value_t = 64)]
    concurrency: u16,
}

/// The topology of the echo: its work queue, and the requester's reply queue if any.
pub fn topology(prefix: &str, queue: &str, requester: Option<&str>) -> Topology {
    let topology = Topology::empty(prefix).with_work_queue(queue);
    match requester {
        Some(owner) => topology.with_reply_queue(owner),
        None => topology,
    }
}

/// Serves the echo queue until SIGTERM or SIGINT: every message goes back to its
/// `reply_to` with its correlation id, and is acknowledged once that is confirmed.
pub async fn serve(args: EchoArgs) -> Result<(), Failure> {
    if args.concurrency == 0 {
        return Err(Failure::config("--concurrency must be at least 1"));
    }
    let transport = connect(&args.fleet, "bench-echo").await?;
    let topology = topology(&args.fleet.prefix, &args.queue, None);
    let fail = |e: &dyn std::fmt::Display| Failure::other(e.to_string());
    transport.declare(&topology).await.map_err(|e| fail(&e))?;
    let mut requests = transport.consume(&topology.name(&args.queue), args.concurrency).await.map_err(|e| fail(&e))?;
    info!(queue = %requests.queue(), concurrency = args.concurrency, "Echo consuming.");
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            delivery = requests.next() => match delivery {
                Some(delivery) => { tokio::spawn(echo(transport.clone(), delivery)); }
                None => break,
            },
        }
    }
    requests.cancel().await;
    transport.close().await;
    Ok(())
}

async fn echo(transport: AmqpTransport, delivery: Delivery) {
    let (message, acker) = delivery.into_parts();
    let Some(reply_to) = message.reply_to else {
        warn!("An echo request without reply_to was dropped.");
        let _ = acker.reject().await;
        return;
    };
    let reply = Message { body: message.body, correlation_id: message.correlation_id, ..Message::default() };
    let settled = match transport.publish(&Destination::queue(reply_to), reply).await {
        Ok(()) => acker.ack().await,
        Err(e) => {
            warn!(error = %e, "Echo reply failed; the request goes back to its queue.");
            acker.nack_requeue().await
        }
    };
    if let Err(e) = settled {
        warn!(error = %e, "Echo acknowledgement failed.");
    }
}

/// The requesting side of the echo, warmed up and ready to measure.
pub struct EchoLoad {
    requester: EchoClient,
    body: Arc<Message>,
    timeout: Duration,
    runs: u32,
}

impl EchoLoad {
    /// Connects a requester with `owner`'s reply queue and warms the echo up.
    pub async fn start(
        transport: AmqpTransport,
        prefix: &str,
        owner: &str,
        settings: &Settings,
        children: &mut Children,
    ) -> Result<Self, Failure> {
        let requester = EchoClient::connect(transport, prefix, owner).await?;
        let body = Arc::new(echo_body(settings.size, &requester.inner.reply_queue, settings.timeout));
        let load = EchoLoad { requester, body, timeout: settings.timeout, runs: 0 };
        let probe = load.drive("probe", 1, 1).await;
        children.check_alive()?;
        if probe.answered == 0 {
            return Err(Failure::other(format!("the echo responder did not answer within {:?}", settings.timeout)));
        }
        load.drive("warmup", settings.warmup, settings.inflight).await;
        Ok(load)
    }

    /// Measures `requests` requests, `inflight` at a time.
    pub async fn run(&mut self, requests: u64, inflight: usize) -> Phase {
        self.runs += 1;
        let run = format!("measured-{}", self.runs);
        self.drive(&run, requests, inflight).await
    }

    /// Replies that matched nothing pending over the whole run.
    pub fn duplicates(&self) -> u64 {
        self.requester.ignored_replies()
    }

    async fn drive(&self, run: &str, requests: u64, inflight: usize) -> Phase {
        let (requester, body, timeout, run) =
            (self.requester.clone(), self.body.clone(), self.timeout, Arc::<str>::from(run));
        drive(requests, inflight, move |index| {
            let (requester, body, run) = (requester.clone(), body.clone(), run.clone());
            async move { requester.call(format!("{run}/{index}"), &body, timeout).await }
        })
        .await
    }
}

/// The requesting side of the echo.
#[derive(Clone)]
pub struct EchoClient {
    inner: Arc<Inner>,
}

struct Inner {
    transport: AmqpTransport,
    queue: Destination,
    reply_queue: String,
    waiters: Waiters,
}

impl EchoClient {
    /// Declares the echo queue and `owner`'s reply queue under `prefix`, and reads replies.
    pub async fn connect(transport: AmqpTransport, prefix: &str, owner: &str) -> Result<Self, Failure> {
        let fail = |e: &dyn std::fmt::Display| Failure::other(format!("echo: {e}"));
        let topology = topology(prefix, ECHO, Some(owner));
        transport.declare(&topology).await.map_err(|e| fail(&e))?;
        let reply_queue = topology.reply_queue(owner);
        // Prefetch 0 (unlimited) as the runner's client reads its replies.
        let mut replies = transport.consume(&reply_queue, 0).await.map_err(|e| fail(&e))?;
        let inner = Arc::new(Inner {
            transport,
            queue: Destination::queue(topology.name(ECHO)),
            reply_queue,
            waiters: Waiters::default(),
        });
        let reader = Arc::downgrade(&inner);
        tokio::spawn(async move {
            while let Some(delivery) = replies.next().await {
                let Some(inner) = reader.upgrade() else { break };
                inner.waiters.answer(delivery.message.correlation_id.as_deref());
                if let Err(e) = delivery.ack().await {
                    debug!(error = %e, "Echo reply acknowledgement failed.");
                }
            }
        });
        Ok(EchoClient { inner })
    }

    /// Sends the body of `request` (shared, not copied) as request `id` and waits up to
    /// `timeout` for it to come back.
    pub async fn call(&self, id: String, request: &Message, timeout: Duration) -> Outcome {
        let answered = self.inner.waiters.wait(id.clone());
        let message = Message {
            body: request.body.clone(),
            correlation_id: Some(id.clone()),
            reply_to: Some(self.inner.reply_queue.clone()),
            ..Message::default()
        };
        if let Err(e) = self.inner.transport.publish(&self.inner.queue, message).await {
            debug!(error = %e, "Echo request not published.");
            self.inner.waiters.forget(&id);
            return Outcome::Lost;
        }
        self.inner.waiters.outcome(&id, answered, timeout).await
    }

    /// Replies that matched nothing pending (duplicates or late ones).
    pub fn ignored_replies(&self) -> u64 {
        self.inner.waiters.ignored()
    }
}

/// The requests an echo's requester waits for, by correlation id, and the replies that
/// matched none.
#[derive(Debug, Default)]
pub struct Waiters {
    pending: Mutex<HashMap<String, oneshot::Sender<()>>>,
    ignored: AtomicU64,
}

impl Waiters {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<()>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for request `id`: resolved by its reply.
    pub fn wait(&self, id: String) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.pending().insert(id, tx);
        rx
    }

    /// A reply with correlation id `id` came: wakes its request, or counts it as ignored.
    pub fn answer(&self, id: Option<&str>) {
        match id.and_then(|id| self.pending().remove(id)) {
            Some(waiting) => {
                let _ = waiting.send(());
            }
            None => {
                self.ignored.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Stops waiting for request `id`.
    pub fn forget(&self, id: &str) {
        self.pending().remove(id);
    }

    /// How request `id` ends: answered, or lost after `timeout`.
    pub async fn outcome(&self, id: &str, answered: oneshot::Receiver<()>, timeout: Duration) -> Outcome {
        match tokio::time::timeout(timeout, answered).await {
            Ok(Ok(())) => Outcome::Answered,
            _ => {
                self.forget(id);
                Outcome::Lost
            }
        }
    }

    /// Replies that matched nothing pending (duplicates or late ones).
    pub fn ignored(&self) -> u64 {
        self.ignored.load(Ordering::Relaxed)
    }
}
