//! Resending after a reconnect: whatever was in flight when the connection dropped may not
//! have reached the broker.

use std::sync::Weak;

use airlock_transport::Transport;
use tracing::{debug, warn};

use crate::{Client, Inner};

/// Publishes every pending request again after each reconnection: whatever was in flight
/// when the connection dropped may not have reached the broker. Ends with the client.
pub(crate) async fn resend_after_reconnects<T: Transport>(inner: Weak<Inner<T>>) {
    let Some(mut reconnects) = inner.upgrade().map(|inner| inner.transport.reconnects()) else { return };
    while reconnects.changed().await.is_ok() {
        let Some(inner) = inner.upgrade() else { return };
        match (Client { inner }).resend_pending().await {
            Ok(count) => debug!(count, "Pending requests sent again after a reconnect."),
            Err(e) => warn!(error = %e, "Sending pending requests again failed."),
        }
    }
}
