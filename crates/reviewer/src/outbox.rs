//! The outbox: answers are stored with their decision, then published to the results queue
//! with a publisher confirm, then marked sent.
//!
//! The process that records a decision holds its outbox row's lease and publishes at once. A
//! sweep, at start and every [`SWEEP_INTERVAL`], leases and publishes every unsent answer whose
//! lease ran out: those of a process that died before its publish was confirmed, or whose
//! publish failed. A restart therefore loses no answer, and the lease keeps two live
//! processes from sending one answer twice.
//!
//! An answer the desk hands over carries the labels it is counted under; one left unsent
//! and read back from the store has them read from its body, once, as it is swept.

use std::sync::Arc;
use std::time::Duration;

use airlock_contract::v1;
use airlock_telemetry::metrics::AnswerLabels;
use airlock_transport::{Destination, Message, Transport};
use prost::Message as _;
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use airlock_records::time::now_ms;

use tokio_util::sync::CancellationToken;

use crate::desk::{Desk, OUTBOX_LEASE};
use crate::logged::Logged;
use crate::store::OutboxEntry;
use crate::task::decision_from_wire;

/// How often unsent answers are looked for.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(5);
/// Answers leased per sweep.
const SWEEP_BATCH: u32 = 256;
/// How long a withdrawn call is remembered (a task for it arriving later is dropped).
const REMEMBER_WITHDRAWN: Duration = Duration::from_secs(24 * 3600);

/// Publishes the `desk`'s answers until `stop`; publishes in flight then finish.
pub async fn run<T: Transport>(
    desk: Arc<Desk>,
    stop: CancellationToken,
    transport: T,
    results: Destination,
    mut answers: mpsc::UnboundedReceiver<OutboxEntry>,
) {
    let tracker = TaskTracker::new();
    let mut sweep = tokio::time::interval(SWEEP_INTERVAL);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            entry = answers.recv() => match entry {
                Some(entry) => { tracker.spawn(send(desk.clone(), transport.clone(), results.clone(), entry)); }
                None => break,
            },
            _ = sweep.tick() => {
                let now = now_ms();
                match desk.store().claim_unsent(now, now + OUTBOX_LEASE.as_millis() as i64, SWEEP_BATCH).await {
                    Ok(entries) => {
                        if !entries.is_empty() {
                            info!(answers = entries.len(), "Sending answers left unsent.");
                        }
                        for entry in entries {
                            let entry = OutboxEntry { labels: stored_labels(&entry.body), ..entry };
                            tracker.spawn(send(desk.clone(), transport.clone(), results.clone(), entry));
                        }
                    }
                    Err(e) => warn!(error = %e, "Looking for unsent answers failed."),
                }
                let _ = desk.store().prune_withdrawn(now - REMEMBER_WITHDRAWN.as_millis() as i64).await;
            }
        }
    }
    tracker.close();
    tracker.wait().await;
}

/// The labels of an answer read back from the store: the step's name and the decision sent,
/// from its encoded `StepResult`.
pub(crate) fn stored_labels(body: &[u8]) -> Option<AnswerLabels> {
    let result = v1::StepResult::decode(body).ok()?;
    let decision = decision_from_wire(result.answer?.decision).map_or("unspecified", |d| d.as_str());
    Some(AnswerLabels { step: result.task?.name, decision: decision.to_owned() })
}

/// Publishes one answer, counted under its labels, and marks it sent once the broker
/// confirmed it.
pub async fn send<T: Transport>(desk: Arc<Desk>, transport: T, results: Destination, entry: OutboxEntry) {
    let message = Message::new(entry.body)
        .with_correlation_id(entry.correlation.clone())
        .with_message_id(format!("human-answer/{}", entry.task_id));
    match transport.publish(&results, message).await {
        Ok(()) => {
            if let Some(labels) = &entry.labels {
                desk.metrics.step_answers.get_or_create(labels).inc();
            }
            if let Err(e) = desk.store().mark_sent(&entry.task_id, now_ms()).await {
                warn!(task = %entry.task_id, error = %e, "Answer sent but not marked; it may be sent again.");
            } else {
                debug!(task = %entry.task_id, correlation = %Logged(&entry.correlation), "Answer sent.");
            }
        }
        Err(e) => {
            warn!(task = %entry.task_id, error = %e, "Publishing an answer failed; the next sweep retries.");
            let _ = desk.store().release(&entry.task_id).await;
        }
    }
}
