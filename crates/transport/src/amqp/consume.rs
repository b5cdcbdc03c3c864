//! Consumers that outlive their connection.
//!
//! A consumer owns its channel (with `basic_qos(prefetch)` set before `basic_consume`) on the
//! transport's connection. When the channel or the connection dies, the lapin
//! consumer stream reports an error or ends; the next call to [`AmqpConsumer::next`] then
//! waits a capped, jittered backoff, gets a live connection (dialling one, which re-declares
//! the known topology), and subscribes again. Deliveries that were unacked on the dead
//! channel come back from the broker marked redelivered; settling the old ones fails with
//! [`TransportError::ChannelClosed`] instead of reaching the broker.
//!
//! Recovery runs inside `next`: no task per consumer, and nothing to do while nobody asks
//! for deliveries. `next` is cancel-safe: a caller that stops waiting for it (one branch of a
//! `select!`) leaves the backoff's end and a subscription under way in the consumer, and the
//! next call takes them up, so that neither is lost half made nor started again.

use std::{future::Future, future::poll_fn, pin::Pin, sync::Arc};

use futures_core::Stream;
use lapin::{
    Channel,
    options::{BasicCancelOptions, BasicConsumeOptions, BasicQosOptions},
    types::{AMQPValue, FieldTable, LongString},
};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::{Inner, wire};
use crate::{Delivery, TransportError, backoff::Backoff};

/// A consumer of an AMQP queue.
pub(crate) struct AmqpConsumer {
    inner: Arc<Inner>,
    queue: Arc<str>,
    prefetch: u16,
    subscription: Option<Subscription>,
    /// Set when the subscription was lost: wait before subscribing again.
    lost: bool,
    cancelled: bool,
    backoff: Backoff,
    /// After a loss, when the next subscription may be tried.
    retry_at: Option<tokio::time::Instant>,
    /// A subscription under way.
    subscribing: Option<Subscribing>,
    closed: watch::Receiver<bool>,
    /// For a log (a stream): where the next subscription starts, past the last entry read.
    log: Option<LogPosition>,
}

/// Where a log's reader stands: nothing read yet, or the offset after the last entry read.
#[derive(Clone, Copy, Debug)]
pub(super) enum LogPosition {
    First,
    Next(i64),
}

/// A subscription being made, kept across calls of `next`.
type Subscribing = Pin<Box<dyn Future<Output = Result<Subscription, TransportError>> + Send>>;

struct Subscription {
    channel: Channel,
    consumer: lapin::Consumer,
}

impl std::fmt::Debug for AmqpConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmqpConsumer")
            .field("queue", &self.queue)
            .field("prefetch", &self.prefetch)
            .field("subscribed", &self.subscription.is_some())
            .field("cancelled", &self.cancelled)
            .finish_non_exhaustive()
    }
}

impl AmqpConsumer {
    /// Subscribes to `queue`, retrying connection trouble a bounded number of times; a
    /// missing queue fails at once.
    /// With `log`, the queue is a stream read from that position on, and every later
    /// subscription starts after the last entry read.
    pub(super) async fn start(
        inner: Arc<Inner>,
        queue: &str,
        prefetch: u16,
        log: Option<LogPosition>,
    ) -> Result<Self, TransportError> {
        let queue: Arc<str> = queue.into();
        let subscription = inner
            .retrying("consume", || {
                let subscribing = subscribe(inner.clone(), queue.clone(), prefetch, log);
                async move {
                    match subscribing.await {
                        // A log with no replica on this node yet (one rejoining its cluster
                        // after a restart) is refused as a precondition: tried again, as a
                        // broker not ready is.
                        Err(refused @ TransportError::Precondition { .. }) if log.is_some() => {
                            Err(TransportError::Unavailable(Box::new(refused)))
                        }
                        subscribed => subscribed,
                    }
                }
            })
            .await?;
        Ok(Self {
            backoff: inner.backoff(),
            closed: inner.closed.subscribe(),
            inner,
            queue,
            prefetch,
            subscription: Some(subscription),
            lost: false,
            cancelled: false,
            retry_at: None,
            subscribing: None,
            log,
        })
    }

    pub(crate) fn queue(&self) -> &str {
        &self.queue
    }

    pub(crate) async fn next(&mut self) -> Option<Delivery> {
        loop {
            if *self.closed.borrow() {
                return None;
            }
            let Some(subscription) = &mut self.subscription else {
                if self.cancelled {
                    return None;
                }
                if !self.resubscribe().await {
                    return None;
                }
                continue;
            };
            let consumer = &mut subscription.consumer;
            match poll_fn(|cx| Pin::new(&mut *consumer).poll_next(cx)).await {
                Some(Ok(delivery)) => {
                    if self.log.is_some()
                        && let Some(offset) = wire::stream_offset(&delivery)
                    {
                        self.log = Some(LogPosition::Next(offset + 1));
                    }
                    return Some(wire::delivery(delivery, &self.queue));
                }
                Some(Err(error)) => {
                    warn!(queue = %self.queue, error = %error, "Consumer lost its channel.");
                    self.subscription = None;
                    self.lost = true;
                }
                None if self.cancelled => return None,
                None => {
                    // The channel closed, or the broker cancelled the consumer (its queue was
                    // deleted, or a quorum queue changed leader).
                    warn!(queue = %self.queue, "Consumer ended by the broker.");
                    self.subscription = None;
                    self.lost = true;
                }
            }
        }
    }

    /// One step of recovery: wait (after a loss), then try to subscribe. Returns `false` if
    /// the transport closed meanwhile. Cancel-safe: the wait's end and the attempt are kept.
    async fn resubscribe(&mut self) -> bool {
        if self.lost && self.retry_at.is_none() && self.subscribing.is_none() {
            let delay = self.backoff.next_delay();
            warn!(queue = %self.queue, ?delay, "Consumer reconnecting.");
            self.retry_at = Some(tokio::time::Instant::now() + delay);
        }
        if let Some(at) = self.retry_at {
            tokio::select! {
                () = tokio::time::sleep_until(at) => self.retry_at = None,
                _ = self.closed.wait_for(|closed| *closed) => return false,
            }
        }
        let (inner, queue, prefetch, log) = (self.inner.clone(), self.queue.clone(), self.prefetch, self.log);
        // Bounded, as a dial is: an attempt the broker leaves unanswered (a queue whose leader
        // is being elected again) is given up and made anew, never waited on for good.
        let limit = inner.options.connect_timeout;
        let attempt = self.subscribing.get_or_insert_with(|| {
            Box::pin(async move {
                match tokio::time::timeout(limit, subscribe(inner, queue, prefetch, log)).await {
                    Ok(subscribed) => subscribed,
                    Err(elapsed) => Err(TransportError::Unavailable(Box::new(elapsed))),
                }
            })
        });
        let result = attempt.await;
        self.subscribing = None;
        match result {
            Ok(subscription) => {
                info!(queue = %self.queue, "Consumer subscribed again.");
                self.subscription = Some(subscription);
                self.lost = false;
                self.backoff.reset();
                true
            }
            Err(TransportError::Closed) => false,
            Err(error) => {
                warn!(queue = %self.queue, error = %error, "Consumer could not subscribe.");
                self.lost = true;
                true
            }
        }
    }

    /// Asks the broker to stop delivering; deliveries already received can still be settled
    /// and [`next`](Self::next) drains what lapin already holds, then ends.
    pub(crate) async fn cancel(&mut self) {
        self.cancelled = true;
        if let Some(subscription) = &self.subscription {
            let tag = subscription.consumer.tag();
            let result = subscription.channel.basic_cancel(tag, BasicCancelOptions::default()).await;
            if let Err(error) = result {
                debug!(queue = %self.queue, error = %error, "Cancel failed; the channel is gone.");
                self.subscription = None;
            }
        }
    }
}

/// Opens a channel on the transport's connection, sets the prefetch and starts consuming, a
/// log from `log`.
async fn subscribe(
    inner: Arc<Inner>,
    queue: Arc<str>,
    prefetch: u16,
    log: Option<LogPosition>,
) -> Result<Subscription, TransportError> {
    let connection = inner.link.connection(&inner).await?;
    let what = || format!("queue {queue}");
    let channel = connection.create_channel().await.map_err(|e| wire::error(e, what))?;
    // Before basic_consume: the broker applies a qos to the consumers started after it.
    channel.basic_qos(prefetch, BasicQosOptions::default()).await.map_err(|e| wire::error(e, what))?;
    let mut arguments = FieldTable::default();
    let start = match log {
        None => None,
        Some(LogPosition::First) => Some(AMQPValue::LongString(LongString::from("first"))),
        Some(LogPosition::Next(offset)) => Some(AMQPValue::LongLongInt(offset)),
    };
    if let Some(start) = start {
        arguments.insert(wire::ARG_STREAM_OFFSET.into(), start);
    }
    let consumer = channel
        .basic_consume((&*queue).into(), "".into(), BasicConsumeOptions::default(), arguments)
        .await
        .map_err(|e| wire::error(e, what))?;
    Ok(Subscription { channel, consumer })
}
