//! Publishing with confirms on one shared channel.
//!
//! Every publish of a transport goes through the same confirm-mode channel: lapin numbers the
//! messages and resolves each one's confirm on its own, so any number of tasks can have
//! publishes in flight at once (pipelined confirms). The channel slot is locked only to clone
//! the channel out, never across a publish or a confirm.
//!
//! A publish whose connection or channel died before its confirm arrived is sent again on a
//! new channel, a bounded number of times. The broker may then hold it twice: delivery is at
//! least once, and consumers deduplicate.

use std::sync::{Arc, Mutex, PoisonError};

use lapin::{Channel, Confirmation, options::BasicPublishOptions, options::ConfirmSelectOptions};
use tracing::{info, warn};

use super::{Inner, wire};
use crate::{Destination, Message, TransportError, message::check_short};

/// The shared publishing channel, opened on first use and reopened when it dies.
#[derive(Debug, Default)]
pub(super) struct Publisher {
    /// Behind an `Arc` so handing it to a publish is one reference count, not a clone of
    /// lapin's many handles.
    channel: Mutex<Option<Arc<Channel>>>,
    opening: tokio::sync::Mutex<()>,
}

impl Publisher {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Arc<Channel>>> {
        self.channel.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn live(&self) -> Option<Arc<Channel>> {
        self.slot().as_ref().filter(|channel| channel.status().connected()).cloned()
    }

    /// The live publishing channel, or a new one in confirm mode.
    async fn channel(&self, inner: &Inner) -> Result<Arc<Channel>, TransportError> {
        if let Some(channel) = self.live() {
            return Ok(channel);
        }
        let _opening = self.opening.lock().await;
        if let Some(channel) = self.live() {
            return Ok(channel);
        }
        let connection = inner.link.connection(inner).await?;
        let channel = connection.create_channel().await.map_err(|e| wire::error(e, || "channel".to_owned()))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| wire::error(e, || "channel".to_owned()))?;
        info!("Publishing channel open.");
        let channel = Arc::new(channel);
        *self.slot() = Some(channel.clone());
        Ok(channel)
    }

    /// Takes the channel away (closing the transport), for the caller to close.
    pub(super) fn take(&self) -> Option<Arc<Channel>> {
        self.slot().take()
    }
}

impl Inner {
    /// Publishes and waits for the broker's confirm, retrying across reconnects.
    pub(super) async fn publish(&self, destination: &Destination, message: Message) -> Result<(), TransportError> {
        message.validate()?;
        let (exchange, routing_key) = destination.parts();
        check_short("exchange name", exchange)?;
        check_short("routing key", routing_key)?;
        for copy in destination.copies() {
            check_short("routing key", copy)?;
        }
        // Publishing straight to a queue must reach it: the broker returns the message if the
        // queue is missing. An exchange with no bindings may drop it (nobody listens).
        let mandatory = destination.must_reach_a_queue();
        let mut backoff = self.backoff();
        let mut attempt = 1;
        loop {
            if self.is_closed() {
                return Err(TransportError::Closed);
            }
            let error = match self.publish_once(destination, mandatory, &message).await {
                Ok(Confirmation::Ack(None)) => return Ok(()),
                Ok(Confirmation::Ack(Some(_)) | Confirmation::Nack(Some(_))) => {
                    return Err(TransportError::Unroutable { destination: destination.to_string() });
                }
                Ok(Confirmation::Nack(None)) => {
                    return Err(TransportError::Nack { destination: destination.to_string() });
                }
                Ok(Confirmation::NotRequested) => {
                    // Only a channel without confirm mode answers this; ours always has it.
                    return Err(TransportError::Broker("publisher confirms are not enabled on the channel".into()));
                }
                Err(error) => error,
            };
            if attempt >= self.options.attempts || !worth_retrying(&error, destination, attempt) {
                return Err(error);
            }
            let delay = backoff.next_delay();
            warn!(%destination, attempt, error = %error, ?delay, "Publish failed; retrying.");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    async fn publish_once(
        &self,
        destination: &Destination,
        mandatory: bool,
        message: &Message,
    ) -> Result<Confirmation, TransportError> {
        let (exchange, routing_key) = destination.parts();
        let channel = self.publisher.channel(self).await?;
        let options = BasicPublishOptions { mandatory, immediate: false };
        let what = || format!("exchange {exchange}");
        let confirm = channel
            .basic_publish(
                exchange.into(),
                routing_key.into(),
                options,
                &message.body,
                wire::properties(message, self.nodes.user(), destination.copies()),
            )
            .await
            .map_err(|e| wire::error(e, what))?;
        confirm.await.map_err(|e| wire::error(e, what))
    }
}

/// Connection trouble is retried, and so is a channel that closed under a publish in flight.
/// A channel-level error is retried once: all publishes share the channel, and when one of
/// them makes the broker close it (say, an exchange that does not exist) the confirms of every
/// other publish in flight fail with that same error, or find the channel closing. Sent again
/// on a new channel, those go through; the culprit fails again and reports its own error.
/// (A publish whose confirm was lost may arrive twice: delivery is at least once.)
fn worth_retrying(error: &TransportError, destination: &Destination, attempt: u32) -> bool {
    match error {
        TransportError::Unavailable(_) | TransportError::ChannelClosed => true,
        TransportError::NotFound { .. }
        | TransportError::Precondition { .. }
        | TransportError::AccessRefused { .. }
        | TransportError::Broker(_) => {
            // The default exchange (publishing to a queue) never fails this way itself.
            matches!(destination, Destination::Queue(_)) || attempt == 1
        }
        _ => false,
    }
}
