//! The notable events every role has in common, one type each, whose one method logs the
//! event, counts it and does what it records: its log line, its label and its order are
//! written once, not in each role.

use airlock_records::code::DeadReason;
use airlock_transport::{Delivery, Topology, Transport};
use tracing::warn;

use crate::logged::Logged;
use crate::metrics::{Metrics, ReasonLabels};

/// A delivery that can never be handled (it does not decode, lacks a part, or is refused),
/// sent to the dead-letter queue with why, rather than back to its queue forever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLettered {
    /// Why: its code labels the count, its words go in the dead message's reason header.
    pub reason: DeadReason,
}

impl DeadLettered {
    /// Logs the delivery's queue, correlation id and reason (escaped: whoever published the
    /// message wrote them), counts it in [`Metrics::dead_lettered`] by the reason's code
    /// (`metrics` is `None` in a role that serves none), and sends it to `topology`'s
    /// dead-letter exchange, which acknowledges it. If that fails, the delivery is back in its
    /// queue and the broker delivers it again: that is logged too.
    pub async fn emit<T: Transport>(
        self,
        transport: &T,
        topology: &Topology,
        delivery: Delivery,
        metrics: Option<&Metrics>,
    ) {
        let queue = delivery.queue().to_owned();
        let correlation = delivery.message.correlation_id.clone().unwrap_or_default();
        let reason = self.reason;
        warn!(queue = %Logged(&queue), correlation = %Logged(&correlation), reason = %Logged(&reason), "Message dead-lettered.");
        if let Some(metrics) = metrics {
            metrics.dead_lettered.get_or_create(&ReasonLabels { reason: reason.code.as_str().to_owned() }).inc();
        }
        if let Err(e) = transport.publish_dead(topology, delivery, &reason.to_string()).await {
            warn!(
                queue = %Logged(&queue),
                correlation = %Logged(&correlation),
                error = %Logged(&e),
                "Dead-lettering failed; the broker will redeliver the message."
            );
        }
    }
}
