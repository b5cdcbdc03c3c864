//! The life of a role that serves on the fleet's transport (the gateway, the reviewer
//! service): its transport's reconnections counted, started, announced, served until told to
//! stop, stopped in order, its transport closed.

use std::future::Future;
use std::sync::Arc;

use airlock_transport::Transport;

use crate::metrics::{Metrics, count_reconnects};

/// A started service [`run`] serves until shutdown.
pub trait Started {
    /// Logs that the service is ready, with the URL it is reached at.
    fn ready(&self);

    /// Stops the service in order.
    fn stop(self) -> impl Future<Output = ()>;
}

/// Counts `transport`'s reconnections in `metrics`, starts the service with `start`, runs it
/// until `shutdown` resolves, then stops it in order and closes the transport.
pub async fn run<T: Transport, S: Started, E>(
    transport: T,
    metrics: Arc<Metrics>,
    start: impl Future<Output = Result<S, E>>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), E> {
    tokio::spawn(count_reconnects(transport.reconnects(), metrics));
    let service = start.await?;
    service.ready();
    shutdown.await;
    service.stop().await;
    transport.close().await;
    Ok(())
}
