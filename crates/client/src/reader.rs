//! The reply reader: takes replies off the runner's queue, hands each to `Inner::deliver`
//! and acknowledges them in batches.

use std::sync::Weak;
use std::time::Duration;

use airlock_transport::{Acker, Consumer, TransportError};
use futures_util::future::{BoxFuture, FutureExt as _};
use tokio::sync::oneshot;
use tracing::debug;

use crate::Inner;

/// Replies one acknowledgement settles at most, and how long the first of them waits for it.
const ACK_BATCH: usize = 64;
const ACK_DELAY: Duration = Duration::from_millis(5);

/// How long an acknowledgement may take before the next is sent without it.
const ACK_WAIT: Duration = Duration::from_secs(1);

/// Reads replies until the client closes. Replies are handed out in order, so one
/// acknowledgement settles a reply and all before it: it is sent [`ACK_DELAY`] after the first
/// reply it covers, or after [`ACK_BATCH`] replies, without waiting for it before the next
/// reply. (An acknowledgement costs the runner about as much CPU as the rest of a reply.)
///
/// One acknowledgement is under way at a time: lapin sends each from a task of its own, so
/// two could reach the broker in either order, and one that covers replies a later-numbered
/// one settled already names a delivery the broker no longer knows, which closes the channel
/// (every unsettled reply then comes again).
pub(crate) async fn read<T>(weak: Weak<Inner<T>>, mut replies: Consumer, mut stopped: oneshot::Receiver<()>) {
    let acked = |result: Result<(), TransportError>| {
        if let Err(e) = result {
            debug!(error = %e, "Reply acknowledgement failed; a duplicate may follow.");
        }
    };
    let mut acking: Option<BoxFuture<'static, Result<(), TransportError>>> = None;
    let mut unacked: Option<Acker> = None;
    let mut held = 0;
    let due = tokio::time::sleep(ACK_DELAY);
    tokio::pin!(due);
    loop {
        tokio::select! {
            biased;
            _ = &mut stopped => break,
            result = async { acking.as_mut().expect("guarded").await }, if acking.is_some() => {
                acked(result);
                acking = None;
                if held >= ACK_BATCH {
                    acking = ack_held(&mut unacked, &mut held);
                }
            }
            () = &mut due, if unacked.is_some() && acking.is_none() => {
                acking = ack_held(&mut unacked, &mut held);
            }
            delivery = replies.next() => {
                // Ends with the consumer (the transport closed), or with the client.
                let (Some(delivery), Some(inner)) = (delivery, weak.upgrade()) else { break };
                let (message, acker) = delivery.into_parts();
                inner.deliver(&message);
                if held == 0 {
                    due.as_mut().reset(tokio::time::Instant::now() + ACK_DELAY);
                }
                held += 1;
                unacked = Some(acker);
                if held >= ACK_BATCH && acking.is_none() {
                    acking = ack_held(&mut unacked, &mut held);
                }
            }
        }
    }
    if let Some(acking) = acking {
        acked(acking.await);
    }
    if let Some(acker) = unacked {
        acked(acker.ack_through().await);
    }
    replies.cancel().await;
}

/// The acknowledgement of the replies held so far (the latest one's, `multiple`), which
/// then number none. It is given up after [`ACK_WAIT`]: one sent on a connection that died
/// may never be answered, and waiting for it would leave every later reply unacknowledged
/// (a quorum queue stops delivering once 2,000 are).
fn ack_held(unacked: &mut Option<Acker>, held: &mut usize) -> Option<BoxFuture<'static, Result<(), TransportError>>> {
    *held = 0;
    unacked.take().map(|acker| {
        tokio::time::timeout(ACK_WAIT, acker.ack_through())
            .map(|acked| acked.unwrap_or(Err(TransportError::ChannelClosed)))
            .boxed()
    })
}
