//! The echo on Airlock's own transport, with the durability the fleet has (a durable quorum
//! work queue, persistent messages, publisher confirms on both sides, the request
//! acknowledged after its reply is confirmed) and nothing else: its difference to the bare
//! echo is the transport's cost.
//!
//! The responder runs as its own process (`airlock bench-echo`), like a worker; the
//! requester runs in the bench, like the runner's client: one reply queue, one reader task,
//! replies matched to requests by correlation id.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_transport::{AmqpTransport, Delivery, Destination, Message, Topology, Transport};
use clap::Args;
use tokio::sync::oneshot;
use tracing::{debug, info, warn};

use super::Settings;
use super::fleet::echo_body;
use super::traffic::{Outcome, Requester};
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
    let topology = topology(&args.fleet.options.prefix, &args.queue, None);
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

/// The requesting side of the echo: one reply queue, one reader task.
pub struct EchoRequester {
    transport: AmqpTransport,
    queue: Destination,
    reply_queue: String,
    request: Message,
    timeout: Duration,
    waiters: Arc<Waiters>,
}

impl EchoRequester {
    /// Declares the echo queue and `owner`'s reply queue under `prefix`, and reads replies.
    pub async fn connect(
        transport: AmqpTransport,
        prefix: &str,
        owner: &str,
        settings: &Settings,
    ) -> Result<Self, Failure> {
        let fail = |e: &dyn std::fmt::Display| Failure::other(format!("echo: {e}"));
        let topology = topology(prefix, ECHO, Some(owner));
        transport.declare(&topology).await.map_err(|e| fail(&e))?;
        let reply_queue = topology.reply_queue(owner);
        // Prefetch 0 (unlimited) as the runner's client reads its replies.
        let mut replies = transport.consume(&reply_queue, 0).await.map_err(|e| fail(&e))?;
        let waiters = Arc::new(Waiters::default());
        let reader = Arc::downgrade(&waiters);
        tokio::spawn(async move {
            while let Some(delivery) = replies.next().await {
                let Some(waiters) = reader.upgrade() else { break };
                waiters.answer(delivery.message.correlation_id.as_deref());
                if let Err(e) = delivery.ack().await {
                    debug!(error = %e, "Echo reply acknowledgement failed.");
                }
            }
        });
        Ok(EchoRequester {
            transport,
            queue: Destination::queue(topology.name(ECHO)),
            request: echo_body(settings.size, &reply_queue, settings.timeout),
            reply_queue,
            timeout: settings.timeout,
            waiters,
        })
    }
}

impl Requester for EchoRequester {
    async fn call(self: Arc<Self>, run: Arc<str>, index: u64) -> Outcome {
        let id = format!("{run}/{index}");
        let message = Message {
            body: self.request.body.clone(),
            correlation_id: Some(id.clone()),
            reply_to: Some(self.reply_queue.clone()),
            ..Message::default()
        };
        let sent = async {
            let published = self.transport.publish(&self.queue, message).await;
            published.inspect_err(|e| debug!(error = %e, "Echo request not published.")).is_ok()
        };
        self.waiters.ask(id, self.timeout, sent).await
    }

    fn duplicates(&self) -> u64 {
        self.waiters.ignored()
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

    /// Waits for request `id` once `sent` says it was sent (confirmed): answered by its
    /// reply, or lost when it was not sent or no reply came within `timeout`.
    pub async fn ask(&self, id: String, timeout: Duration, sent: impl Future<Output = bool>) -> Outcome {
        let (tx, answered) = oneshot::channel();
        self.pending().insert(id.clone(), tx);
        let outcome = match sent.await {
            true => match tokio::time::timeout(timeout, answered).await {
                Ok(Ok(())) => Outcome::Answered,
                _ => Outcome::Lost,
            },
            false => Outcome::Lost,
        };
        if outcome == Outcome::Lost {
            self.pending().remove(&id);
        }
        outcome
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

    /// Replies that matched nothing pending (duplicates or late ones).
    pub fn ignored(&self) -> u64 {
        self.ignored.load(Ordering::Relaxed)
    }
}
