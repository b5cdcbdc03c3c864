//! The errors of a transport, by what the caller does about them.

/// The underlying error a [`TransportError`] was caused by (a lapin error on AMQP).
pub type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong while talking to the broker.
///
/// Callers branch on the variant: [`is_retryable`](Self::is_retryable) tells the transient
/// ones apart from those that will fail again the same way.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The broker refused to take responsibility for a published message (`basic.nack`).
    #[error("the broker refused the message published to {destination}")]
    Nack {
        /// Where the message was published.
        destination: String,
    },
    /// A message published to a queue found no queue of that name.
    #[error("no queue takes messages published to {destination}")]
    Unroutable {
        /// Where the message was published.
        destination: String,
    },
    /// The broker cannot be reached, or the connection was lost and retrying did not help.
    #[error("the broker is unavailable")]
    Unavailable(#[source] Source),
    /// A delivery was acknowledged after its channel closed (its consumer was dropped or the
    /// connection was lost). The broker delivers it again.
    #[error("the delivery's channel is closed; the broker will deliver it again")]
    ChannelClosed,
    /// A queue or exchange exists with settings that differ from the declared ones.
    #[error("{what} exists with different settings")]
    Precondition {
        /// The queue or exchange.
        what: String,
        /// The broker's error, when there is one.
        #[source]
        source: Option<Source>,
    },
    /// A queue or exchange does not exist.
    #[error("{what} does not exist")]
    NotFound {
        /// The queue or exchange.
        what: String,
    },
    /// The broker user may not do this (its permissions refuse it).
    #[error("access to {what} refused")]
    AccessRefused {
        /// What was refused.
        what: String,
        /// The broker's error.
        #[source]
        source: Source,
    },
    /// A name or property is not valid (too long for AMQP, a bad URL).
    #[error("invalid: {0}")]
    Invalid(String),
    /// The transport was closed.
    #[error("the transport is closed")]
    Closed,
    /// Any other error the broker reported (access refused, …).
    #[error("broker error")]
    Broker(#[source] Source),
}

impl TransportError {
    /// Whether the same operation may succeed later (after a reconnect).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable(_) | Self::ChannelClosed | Self::Nack { .. })
    }
}
