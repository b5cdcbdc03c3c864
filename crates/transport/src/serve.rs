//! One way to run a consuming role: take deliveries from its consumers, handle each one, and
//! stop in a fixed order.
//!
//! Every consuming role (the worker, the monitor, the reviewer's intake, the auditor) is the
//! same loop around its own handler:
//!
//! 1. until `shutdown` resolves, a handler failed, or a consumer ended: take each delivery
//!    and hand it to the handler (in its own task, or in order);
//! 2. stop consuming: cancel the token the loops watch, then cancel every consumer
//!    (`basic_cancel`), so nothing new arrives;
//! 3. let the handlers in flight finish and settle their deliveries (`TaskTracker::wait`);
//! 4. drop the consumers, which closes their channels: whatever is still unsettled goes back
//!    to its queue and is delivered again.
//!
//! Steps 2 and 3 run under one grace period; the role closes its transport afterwards, once
//! nothing else of it publishes. Handlers decide when to acknowledge: a delivery is settled by
//! the handler, never by the loop.

use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::{Consumer, Delivery};

/// How long a stopping role lets the deliveries in hand finish; the rest go back to their
/// queues.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How a role's deliveries are handed to its handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Each delivery in its own task: at most the consumer's prefetch at once.
    Concurrent,
    /// One delivery at a time per consumer, in the order received; the next is taken once the
    /// handler returned. For handlers that append to one file.
    InOrder,
}

/// The consumers of one role, each tagged with a source the handler is told, and how it
/// stops. Build it with [`Serve::new`] and [`Serve::consume`], then [`run`](Serve::run) it.
#[derive(Debug)]
pub struct Serve<K> {
    consumers: Vec<(K, Consumer)>,
    order: Order,
    grace: Duration,
}

impl<K> Default for Serve<K> {
    fn default() -> Self {
        Serve { consumers: Vec::new(), order: Order::Concurrent, grace: SHUTDOWN_GRACE }
    }
}

// === impl Serve ===

impl<K: Clone + Send + Sync> Serve<K> {
    /// No consumers yet; deliveries handled concurrently; [`SHUTDOWN_GRACE`] to stop.
    pub fn new() -> Self {
        Serve::default()
    }

    /// Adds a consumer; the handler gets `source` with each of its deliveries.
    #[must_use]
    pub fn consume(mut self, source: K, consumer: Consumer) -> Self {
        self.consumers.push((source, consumer));
        self
    }

    /// Hands deliveries over as `order` says.
    #[must_use]
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    /// How long stopping may wait for the deliveries in hand.
    #[must_use]
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Serves until `shutdown` resolves or a consumer ends (the transport closed), then stops
    /// in order (see the module documentation).
    pub async fn run<F, Fut>(self, handle: F, shutdown: impl Future<Output = ()>)
    where
        F: Fn(K, Delivery) -> Fut + Sync,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let served = self.try_run(|source, delivery| handle(source, delivery).map(Ok::<(), Infallible>), shutdown);
        let Ok(()) = served.await;
    }

    /// [`run`](Self::run) for a handler that can fail in a way the role cannot go on from
    /// (the auditor's file is not writable): the first error stops serving, as `shutdown`
    /// would, and is returned once the deliveries in hand are settled.
    pub async fn try_run<F, Fut, E>(self, handle: F, shutdown: impl Future<Output = ()>) -> Result<(), E>
    where
        F: Fn(K, Delivery) -> Fut + Sync,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Send + 'static,
    {
        let Serve { mut consumers, order, grace } = self;
        let run = Run { stop: CancellationToken::new(), tracker: TaskTracker::new(), failure: Arc::default(), order };
        let taking = join_all(consumers.iter_mut().map(|(source, consumer)| run.take(source, consumer, &handle)));
        let stopping = async {
            tokio::select! {
                () = shutdown => {}
                () = run.stop.cancelled() => {}
            }
            run.stop.cancel();
        };
        tokio::join!(taking, stopping);

        let queues: Vec<&str> = consumers.iter().map(|(_, consumer)| consumer.queue()).collect();
        info!(?queues, "Stopping: no new deliveries, finishing those in hand.");
        run.tracker.close();
        let drained = tokio::time::timeout(grace, async {
            for (_, consumer) in &mut consumers {
                consumer.cancel().await;
            }
            run.tracker.wait().await;
        });
        if drained.await.is_err() {
            warn!(?grace, "Deliveries in hand did not finish in time; the broker will deliver them again.");
        }
        // Closes the consumers' channels: what is still unsettled goes back to its queue.
        drop(consumers);
        match run.failure.lock().unwrap_or_else(PoisonError::into_inner).take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// What the loops of one [`Serve::try_run`] share.
struct Run<E> {
    /// Cancelled on shutdown, on a handler's failure, or when a consumer ends.
    stop: CancellationToken,
    /// The handlers in flight.
    tracker: TaskTracker,
    /// The first handler failure.
    failure: Arc<Mutex<Option<E>>>,
    order: Order,
}

impl<E: Send + 'static> Run<E> {
    /// Takes the deliveries of one consumer until the role stops.
    async fn take<K, F, Fut>(&self, source: &K, consumer: &mut Consumer, handle: &F)
    where
        K: Clone,
        F: Fn(K, Delivery) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
    {
        loop {
            let delivery = tokio::select! {
                () = self.stop.cancelled() => return,
                delivery = consumer.next() => match delivery {
                    Some(delivery) => delivery,
                    None => {
                        // The transport closed: the role cannot take anything more.
                        self.stop.cancel();
                        return;
                    }
                },
            };
            let handled = handle(source.clone(), delivery);
            match self.order {
                Order::InOrder => {
                    if let Err(error) = handled.await {
                        fail(&self.failure, &self.stop, error);
                        return;
                    }
                }
                Order::Concurrent => {
                    let (failure, stop) = (self.failure.clone(), self.stop.clone());
                    self.tracker.spawn(async move {
                        if let Err(error) = handled.await {
                            fail(&failure, &stop, error);
                        }
                    });
                }
            }
        }
    }
}

/// Keeps the first failure and stops the role.
fn fail<E>(failure: &Mutex<Option<E>>, stop: &CancellationToken, error: E) {
    failure.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(error);
    stop.cancel();
}

#[cfg(test)]
mod tests;
