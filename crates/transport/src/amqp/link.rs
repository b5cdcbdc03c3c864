//! One broker connection, dialled when first needed and again whenever it was lost, to
//! whichever node of the broker answers.

use std::num::NonZeroU32;
use std::sync::{
    Arc, Mutex, PoisonError,
    atomic::{AtomicU64, Ordering},
};

use lapin::{
    Connection, ConnectionProperties,
    options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions},
    types::FieldTable,
};
use tracing::{info, warn};

use super::{Inner, close_quietly, nodes::Node, wire};
use crate::{Topology, TransportError};

/// A connection slot. Many tasks may ask for the connection at once; one dials, the others
/// wait for it, so a lost connection is replaced once, not once per caller.
#[derive(Debug)]
pub(super) struct Link {
    current: Mutex<Option<Arc<Connection>>>,
    dialing: tokio::sync::Mutex<()>,
    /// Counts finished dial attempts: a caller that waited while someone else dialled in
    /// vain fails with them instead of dialling again, so an outage costs one attempt per
    /// round, not one per waiting caller.
    dials: AtomicU64,
    /// Whether a connection was ever made: the next one is a reconnection.
    connected_before: std::sync::atomic::AtomicBool,
}

impl Link {
    pub(super) fn new() -> Self {
        Self {
            current: Mutex::new(None),
            dialing: tokio::sync::Mutex::new(()),
            dials: AtomicU64::new(0),
            connected_before: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Arc<Connection>>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn live(&self) -> Option<Arc<Connection>> {
        self.slot().as_ref().filter(|connection| connection.status().connected()).cloned()
    }

    /// Whether the connection is up.
    pub(super) fn is_live(&self) -> bool {
        self.live().is_some()
    }

    /// The live connection, or a new one (with the known topology declared on it).
    pub(super) async fn connection(&self, inner: &Inner) -> Result<Arc<Connection>, TransportError> {
        if let Some(connection) = self.live() {
            return Ok(connection);
        }
        let dials = self.dials.load(Ordering::Acquire);
        let _dialing = self.dialing.lock().await;
        if let Some(connection) = self.live() {
            return Ok(connection);
        }
        if inner.is_closed() {
            return Err(TransportError::Closed);
        }
        if self.dials.load(Ordering::Acquire) != dials {
            return Err(TransportError::Unavailable("the broker could not be reached just now".into()));
        }
        let result = self.dial(inner).await;
        self.dials.fetch_add(1, Ordering::Release);
        result
    }

    /// Connects to the first node that answers, trying each once in the order `nodes` gives.
    /// Fails with the error of a single node, or one naming every node and its error.
    async fn dial(&self, inner: &Inner) -> Result<Arc<Connection>, TransportError> {
        let mut failures = Vec::new();
        for (index, node) in inner.nodes.in_turn() {
            match dial_node(inner, node).await {
                Ok(connection) => {
                    inner.nodes.connected(index);
                    let known = inner.known().clone();
                    declare(&connection, &known, inner.options.quorum_group_size, true).await?;
                    info!(node = %node.label, "Connected to the broker.");
                    *self.slot() = Some(connection.clone());
                    if self.connected_before.swap(true, Ordering::AcqRel) {
                        inner.reconnects.send_modify(|count| *count += 1);
                    }
                    return Ok(connection);
                }
                Err(error) => {
                    if inner.nodes.len() > 1 {
                        warn!(node = %node.label, error = %error, "Broker node unreachable; trying the next.");
                    }
                    failures.push((node.label.clone(), error));
                }
            }
        }
        if failures.len() == 1 {
            return Err(failures.remove(0).1);
        }
        let each: Vec<String> = failures.iter().map(|(label, error)| format!("{label}: {}", reasons(error))).collect();
        Err(TransportError::Unavailable(
            format!("none of its {} nodes answered ({})", failures.len(), each.join("; ")).into(),
        ))
    }

    /// Closes the connection, if any: the broker requeues what its consumers left unacked.
    /// Bounded by the connect timeout, so a broker that went silent cannot stall a shutdown.
    pub(super) async fn close(&self, inner: &Inner) {
        let connection = self.slot().take();
        let Some(connection) = connection else {
            return;
        };
        match tokio::time::timeout(inner.options.connect_timeout, connection.close(200, "closing".into())).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => info!(error = %error, "Connection was already closed."),
            Err(_) => warn!("The broker did not answer the close; dropping the connection."),
        }
    }
}

/// An error and its causes, `: `-separated.
fn reasons(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

/// A connection to `node`, within the connect timeout.
async fn dial_node(inner: &Inner, node: &Node) -> Result<Arc<Connection>, TransportError> {
    let name = inner.options.connection_name.as_str();
    let properties = ConnectionProperties::default().with_connection_name(name.into());
    let runtime = lapin::runtime::default_runtime().map_err(|e| TransportError::Unavailable(Box::new(e)))?;
    let connect = Connection::connect_uri_with_config(node.uri.clone(), properties, node.tls.clone(), runtime);
    match tokio::time::timeout(inner.options.connect_timeout, connect).await {
        Ok(Ok(connection)) => Ok(Arc::new(connection)),
        Ok(Err(e)) => Err(TransportError::Unavailable(Box::new(e))),
        Err(elapsed) => Err(TransportError::Unavailable(Box::new(elapsed))),
    }
}

/// Declares `topology` on a channel of `connection`, its quorum queues with `group_size`
/// replicas (`None`: the broker's default).
///
/// With `keep_going` (re-declaring after a reconnect), a declaration the broker refuses is
/// logged and skipped, on a new channel, so one conflicting queue does not stop the rest;
/// otherwise the first error is returned.
pub(super) async fn declare(
    connection: &Connection,
    topology: &Topology,
    group_size: Option<NonZeroU32>,
    keep_going: bool,
) -> Result<(), TransportError> {
    let open = || async { connection.create_channel().await.map_err(|e| wire::error(e, || "channel".to_owned())) };
    let mut channel = open().await?;
    let exchange_options = ExchangeDeclareOptions { durable: true, ..ExchangeDeclareOptions::default() };
    for exchange in topology.exchanges() {
        let result = channel
            .exchange_declare(
                exchange.name.as_str().into(),
                wire::exchange_kind(exchange.kind),
                exchange_options,
                FieldTable::default(),
            )
            .await
            .map_err(|e| wire::error(e, || format!("exchange {}", exchange.name)));
        if let Err(error) = result {
            skip_or_fail(error, keep_going)?;
            channel = open().await?;
        }
    }
    for queue in topology.queues() {
        let result = channel
            .queue_declare(
                queue.name.as_str().into(),
                QueueDeclareOptions::durable(),
                wire::queue_arguments(&queue.kind, group_size),
            )
            .await
            .map_err(|e| wire::error(e, || format!("queue {}", queue.name)));
        if let Err(error) = result {
            skip_or_fail(error, keep_going)?;
            channel = open().await?;
        }
    }
    for binding in topology.bindings() {
        let result = channel
            .queue_bind(
                binding.queue.as_str().into(),
                binding.exchange.as_str().into(),
                binding.routing_key.as_str().into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| wire::error(e, || format!("binding {} -> {}", binding.exchange, binding.queue)));
        if let Err(error) = result {
            skip_or_fail(error, keep_going)?;
            channel = open().await?;
        }
    }
    close_quietly(&channel, "declared").await;
    Ok(())
}

fn skip_or_fail(error: TransportError, keep_going: bool) -> Result<(), TransportError> {
    if !keep_going || matches!(error, TransportError::Unavailable(_)) {
        return Err(error);
    }
    warn!(error = %error, "Re-declaration refused; continuing with the rest.");
    Ok(())
}
