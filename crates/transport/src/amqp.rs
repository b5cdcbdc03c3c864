//! The AMQP transport: RabbitMQ through lapin. The only module that touches lapin.
//!
//! Layout:
//! - `link`: one broker connection, dialled on demand; every new connection re-declares the
//!   topology this transport knows before anyone uses it.
//! - `nodes`: the broker's addresses (a cluster's nodes), tried in turn.
//! - `publish`: the shared confirm-mode channel and the publish retry loop.
//! - `consume`: consumers that re-subscribe after connection loss.
//! - `wire`: messages, properties, queue arguments and errors, to and from lapin types.
//!
//! One connection per transport, opened lazily and reopened on demand, carries the publishing
//! channel, the consumers' channels and short-lived channels for declarations. lapin runs one
//! I/O thread per connection and every frame crosses to it and back: a second connection for
//! consumers cost a worker about 20 µs of CPU per message and the fleet a tenth of its
//! throughput (`airlock bench`, see BENCHMARKS.md). The price: while the broker blocks
//! publishers (a memory or disk alarm), a role's consumers stall with its publishes, where
//! they would otherwise go on acknowledging; no role gets far then anyway, since a worker
//! acknowledges only what it has published.
//!
//! Recovery is explicit rather than lapin's `enable_auto_recover`: that gives up after a
//! bounded number of attempts (16 by default) and leaves publishes failing while it
//! reconnects, so an explicit path is needed anyway, and one path is easier to reason about
//! and test. A dead connection is noticed through its status; the next user dials a new one.

mod consume;
mod link;
mod nodes;
mod publish;
mod wire;

use std::{
    fmt,
    future::Future,
    num::NonZeroU32,
    path::PathBuf,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use lapin::{
    Channel,
    options::{ExchangeDeleteOptions, QueueDeclareOptions, QueueDeleteOptions},
    tcp::OwnedTLSConfig,
    types::FieldTable,
    uri::{AMQPScheme, AMQPUri},
};
use tokio::sync::watch;
use tracing::{debug, warn};

pub(crate) use consume::AmqpConsumer;
use consume::LogPosition;
pub(crate) use wire::AmqpAcker;

use crate::{
    Consumer, Destination, Follower, Message, Topology, Transport, TransportError, backoff::Backoff,
    message::check_short,
};

/// Entries of a log a follower holds unread: a stream consumer needs a prefetch, and a reader
/// that keeps up never reaches it.
const FOLLOW_PREFETCH: u16 = 1000;
use link::Link;
use nodes::Nodes;
use publish::Publisher;

/// How to reach the broker and how hard to try.
#[derive(Clone)]
pub struct AmqpOptions {
    /// `amqp://user:password@host:port/vhost` (the default vhost is `%2f`); `amqps://` for
    /// TLS. `?heartbeat=<s>` overrides [`heartbeat`](Self::heartbeat), `?frame_max=<bytes>`
    /// overrides [`frame_max`](Self::frame_max).
    /// The nodes of a cluster as a comma-separated list of such URLs (one user and vhost):
    /// a dial tries them in turn, and a lost connection moves on to the next node.
    pub url: String,
    /// The name the broker shows for this transport's connection, e.g. the role and host.
    pub connection_name: String,
    /// Attempts for one publish, declaration or query across reconnects before it fails
    /// with [`TransportError::Unavailable`].
    pub attempts: u32,
    /// The first delay between reconnect attempts.
    pub reconnect_min: Duration,
    /// The longest delay between reconnect attempts (consumers retry forever).
    pub reconnect_max: Duration,
    /// How long one connection attempt may take.
    pub connect_timeout: Duration,
    /// A PEM file of CA certificates that an `amqps://` broker's certificate may chain to
    /// (besides the public web roots), e.g. a private CA's.
    pub ca_file: Option<PathBuf>,
    /// How many nodes of a cluster hold a replica of each quorum queue this transport creates
    /// (`x-quorum-initial-group-size`); `None` leaves it to the broker (RabbitMQ: up to
    /// three, its `quorum_cluster_size`). A property of the broker the fleet runs on, so it
    /// travels with the URL: every role of a fleet must give the same value, because the
    /// argument is part of every declaration and RabbitMQ refuses a re-declaration that
    /// differs (PRECONDITION_FAILED, "inequivalent arg 'x-quorum-initial-group-size'"). It
    /// counts only when a queue is created; see docs/replication.md.
    pub quorum_group_size: Option<NonZeroU32>,
    /// The largest frame, in bytes, to ask the broker for when the URL sets none (the broker
    /// may grant less). A message larger than a frame travels as several. lapin keeps 32
    /// frames of buffer each way on every connection: 1 MiB at the default of 16 KiB, 8 MiB
    /// at RabbitMQ's own default of 128 KiB.
    pub frame_max: u32,
    /// The AMQP heartbeat, in seconds, to ask the broker for when the URL sets none (the lower
    /// of the two sides' wins; 0 asks for none). A link that goes silent without closing (a
    /// cable pulled, a paused VM, a firewall dropping the flow) is given up by both ends once
    /// nothing came for two intervals, and the broker then gives the connection's
    /// unacknowledged deliveries to other consumers. It costs an 8-byte frame each way every
    /// half interval while a connection is idle, and nothing while traffic flows.
    pub heartbeat: u16,
}

/// The heartbeat a connection asks for by default: a silent link is found in 10 to 15 s, well
/// inside a call's usual deadline (RabbitMQ's own default, 60 s, would leave a frozen worker's
/// deliveries held for two minutes). Shorter intervals risk giving up a connection whose peer
/// is merely busy.
const DEFAULT_HEARTBEAT: u16 = 5;

/// The frame size a connection asks for by default: the fleet's requests and replies of a
/// few KB travel in one frame each, and lapin's buffers stay small.
const DEFAULT_FRAME_MAX: u32 = 16 * 1024;

impl AmqpOptions {
    /// Defaults for `url`: 10 attempts with reconnect delays from 100 ms up to 10 s (an
    /// operation rides out roughly 15 to 30 s of broker outage), 15 s to connect.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            connection_name: "airlock".to_owned(),
            attempts: 10,
            reconnect_min: Duration::from_millis(100),
            reconnect_max: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(15),
            ca_file: None,
            quorum_group_size: None,
            frame_max: DEFAULT_FRAME_MAX,
            heartbeat: DEFAULT_HEARTBEAT,
        }
    }

    /// Sets the replicas of the quorum queues this transport creates (`None`: the broker's
    /// default).
    #[must_use]
    pub fn with_quorum_group_size(mut self, size: Option<NonZeroU32>) -> Self {
        self.quorum_group_size = size;
        self
    }

    /// Sets the connection name.
    #[must_use]
    pub fn with_connection_name(mut self, name: impl Into<String>) -> Self {
        self.connection_name = name.into();
        self
    }

    /// Sets the CA file that an `amqps://` broker's certificate is verified against.
    #[must_use]
    pub fn with_ca_file(mut self, path: Option<PathBuf>) -> Self {
        self.ca_file = path;
        self
    }

    /// The TLS settings for connecting: the CA file's certificates, read now, so a missing or
    /// unreadable file fails at start rather than at the first reconnect.
    fn tls(&self, uri: &AMQPUri) -> Result<OwnedTLSConfig, TransportError> {
        let Some(path) = &self.ca_file else {
            return Ok(OwnedTLSConfig::default());
        };
        if uri.scheme != AMQPScheme::AMQPS {
            return Err(TransportError::Invalid(format!(
                "a CA file ({}) is given but the broker URL is not amqps://",
                path.display()
            )));
        }
        let pem = std::fs::read_to_string(path)
            .map_err(|e| TransportError::Invalid(format!("CA file {}: {e}", path.display())))?;
        if !pem.contains("-----BEGIN CERTIFICATE-----") {
            return Err(TransportError::Invalid(format!("CA file {}: no PEM certificate in it", path.display())));
        }
        Ok(OwnedTLSConfig { identity: None, cert_chain: Some(pem) })
    }
}

impl fmt::Debug for AmqpOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL carries the password: never print it.
        f.debug_struct("AmqpOptions")
            .field("connection_name", &self.connection_name)
            .field("attempts", &self.attempts)
            .field("reconnect_min", &self.reconnect_min)
            .field("reconnect_max", &self.reconnect_max)
            .field("connect_timeout", &self.connect_timeout)
            .field("ca_file", &self.ca_file)
            .field("quorum_group_size", &self.quorum_group_size)
            .field("frame_max", &self.frame_max)
            .field("heartbeat", &self.heartbeat)
            .finish_non_exhaustive()
    }
}

/// The AMQP transport. Clones share the connections.
#[derive(Clone, Debug)]
pub struct AmqpTransport {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    options: AmqpOptions,
    nodes: Nodes,
    /// Everything declared through this transport: declared again on every new connection.
    known: Mutex<Topology>,
    link: Link,
    publisher: Publisher,
    closed: watch::Sender<bool>,
    /// Connections dialled after the first, on either link.
    reconnects: watch::Sender<u64>,
}

// === impl AmqpTransport ===

impl AmqpTransport {
    /// Connects to the broker at `url` with default options.
    pub async fn connect(url: &str) -> Result<Self, TransportError> {
        Self::connect_with(AmqpOptions::new(url)).await
    }

    /// The broker user it connects and publishes as.
    pub fn user(&self) -> &str {
        self.inner.nodes.user()
    }

    /// Whether its connection is up now (`false` while it is lost and not yet made again).
    pub fn is_connected(&self) -> bool {
        self.inner.link.is_live()
    }

    /// Connects with `options`. Fails fast, after one try of each node, if the broker cannot
    /// be reached now: later connection losses are recovered from.
    pub async fn connect_with(options: AmqpOptions) -> Result<Self, TransportError> {
        let inner = Arc::new(Inner {
            nodes: Nodes::parse(&options)?,
            known: Mutex::new(Topology::empty("")),
            link: Link::new(),
            publisher: Publisher::default(),
            closed: watch::Sender::new(false),
            reconnects: watch::Sender::new(0),
            options,
        });
        inner.link.connection(&inner).await?;
        Ok(Self { inner })
    }
}

impl Transport for AmqpTransport {
    async fn declare(&self, topology: &Topology) -> Result<(), TransportError> {
        check_names(topology)?;
        let inner = &self.inner;
        inner
            .retrying("declare", || async {
                let connection = inner.link.connection(inner).await?;
                link::declare(&connection, topology, inner.options.quorum_group_size, false).await
            })
            .await?;
        inner.known().merge(topology);
        Ok(())
    }

    async fn delete(&self, topology: &Topology) -> Result<(), TransportError> {
        let inner = &self.inner;
        inner.known().remove(topology);
        inner.retrying("delete", || delete(inner, topology)).await
    }

    async fn publish(&self, destination: &Destination, message: Message) -> Result<(), TransportError> {
        self.inner.publish(destination, message).await
    }

    async fn consume(&self, queue: &str, prefetch: u16) -> Result<Consumer, TransportError> {
        check_short("queue name", queue)?;
        let consumer = AmqpConsumer::start(self.inner.clone(), queue, prefetch, None).await?;
        Ok(Consumer::amqp(consumer))
    }

    async fn follow(&self, log: &str) -> Result<Follower, TransportError> {
        check_short("queue name", log)?;
        let consumer = AmqpConsumer::start(self.inner.clone(), log, FOLLOW_PREFETCH, Some(LogPosition::First)).await?;
        Ok(Follower::amqp(consumer))
    }

    async fn message_count(&self, queue: &str) -> Result<u32, TransportError> {
        check_short("queue name", queue)?;
        let inner = &self.inner;
        inner
            .retrying("count", || async {
                let channel = inner.control_channel().await?;
                let options = QueueDeclareOptions::durable().passive();
                let declared = channel
                    .queue_declare(queue.into(), options, FieldTable::default())
                    .await
                    .map_err(|e| wire::error(e, || format!("queue {queue}")))?;
                close_quietly(&channel, "counted").await;
                Ok(declared.message_count())
            })
            .await
    }

    fn reconnects(&self) -> watch::Receiver<u64> {
        self.inner.reconnects.subscribe()
    }

    async fn close(&self) {
        let inner = &self.inner;
        inner.closed.send_replace(true);
        // Closed before its connection: a channel merely dropped closes in the background
        // and races the connection's close.
        // Each bounded by the connect timeout: a broker that went silent cannot stall a shutdown.
        if let Some(channel) = inner.publisher.take()
            && tokio::time::timeout(inner.options.connect_timeout, close_quietly(&channel, "closing")).await.is_err()
        {
            warn!("The broker did not answer the publishing channel's close; closing the connection.");
        }
        inner.link.close(inner).await;
    }
}

// === impl Inner ===

impl Inner {
    fn known(&self) -> std::sync::MutexGuard<'_, Topology> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(self.options.reconnect_min, self.options.reconnect_max)
    }

    /// A fresh channel on the publishing connection for a declaration or a query, whose
    /// failure (a 404 or 406 closes the channel) must not disturb the publishing channel.
    async fn control_channel(&self) -> Result<Channel, TransportError> {
        let connection = self.link.connection(self).await?;
        connection.create_channel().await.map_err(|e| wire::error(e, || "channel".to_owned()))
    }

    /// Runs `op` until it succeeds, fails with an error that is not about the connection, or
    /// runs out of attempts.
    async fn retrying<T, F, Fut>(&self, what: &'static str, mut op: F) -> Result<T, TransportError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, TransportError>>,
    {
        let mut backoff = self.backoff();
        let mut attempt = 1;
        loop {
            let error = match op().await {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            if !matches!(error, TransportError::Unavailable(_)) || attempt >= self.options.attempts || self.is_closed()
            {
                return Err(error);
            }
            let delay = backoff.next_delay();
            warn!(operation = what, attempt, error = %error, ?delay, "Broker operation failed; retrying.");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }
}

/// Checks every name of `topology` fits AMQP before anything is sent.
fn check_names(topology: &Topology) -> Result<(), TransportError> {
    for exchange in topology.exchanges() {
        check_short("exchange name", &exchange.name)?;
    }
    for queue in topology.queues() {
        check_short("queue name", &queue.name)?;
    }
    for binding in topology.bindings() {
        check_short("routing key", &binding.routing_key)?;
    }
    Ok(())
}

/// Deletes the queues and exchanges of `topology` through `inner`'s publishing connection,
/// skipping the ones that fail (a failure closes the channel: the next item gets a new one).
async fn delete(inner: &Inner, topology: &Topology) -> Result<(), TransportError> {
    let mut channel = inner.control_channel().await?;
    for queue in topology.queues() {
        let result = channel.queue_delete(queue.name.as_str().into(), QueueDeleteOptions::default()).await;
        if let Err(e) = result {
            let error = wire::error(e, || format!("queue {}", queue.name));
            if matches!(error, TransportError::Unavailable(_)) {
                return Err(error);
            }
            debug!(queue = %queue.name, error = %error, "Queue not deleted.");
            channel = inner.control_channel().await?;
        }
    }
    for exchange in topology.exchanges() {
        let result = channel.exchange_delete(exchange.name.as_str().into(), ExchangeDeleteOptions::default()).await;
        if let Err(e) = result {
            let error = wire::error(e, || format!("exchange {}", exchange.name));
            if matches!(error, TransportError::Unavailable(_)) {
                return Err(error);
            }
            debug!(exchange = %exchange.name, error = %error, "Exchange not deleted.");
            channel = inner.control_channel().await?;
        }
    }
    close_quietly(&channel, "deleted").await;
    Ok(())
}

/// Closes a short-lived channel; a failure only means it is already gone.
async fn close_quietly(channel: &Channel, why: &str) {
    if let Err(error) = channel.close(200, why.into()).await {
        debug!(error = %error, "Channel close failed.");
    }
}
