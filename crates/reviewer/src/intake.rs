//! Intake: human tasks from the pools' queues into the store, then acknowledged; and the
//! runners' `Cancel`s, which withdraw tasks.
//!
//! A cancel withdraws only the tasks of a call whose request its publisher published: the
//! cancel's `user_id` (which RabbitMQ checks against the publisher, and the AMQP transport
//! always sets) must be the task's `requested_by` (which the worker took from the request's
//! `user_id` and sealed; the human queues are written only by workers). A cancel from anyone
//! else leaves the tasks pending for a person, and is logged and counted
//! (`airlock_reviewer_cancels_dropped_total`): when it comes, if the call has a task, or else
//! when the call's first task is stored. On the in-process transport neither names a user,
//! and a cancel naming none withdraws a task whose request named none.
//!
//! A task is acknowledged only once it is durable in the store, and never held open while a
//! person thinks: the broker cuts deliveries left unacknowledged for 30 minutes, and a person
//! may take hours. A task the store holds already (a redelivery, a duplicate publish) is
//! acknowledged without a second row. While the store is unreachable the delivery is kept and
//! the insert retried with backoff; at shutdown it goes back to its queue.
//!
//! A newly stored task is announced to its runner: a `Progress` reply (pool, task id, step)
//! to the request's reply queue under the call's correlation id, so that the runner can page
//! someone. It is best effort and unproved, and it never settles the call.
//!
//! A task a reviewer's standing decision covers is stored, then decided by it at once (it
//! stays in the history), without paging anyone or announcing it to the runner.

use std::sync::Arc;
use std::time::Duration;

use airlock_contract::v1;
use airlock_records::code::DeadReason;
use airlock_records::time::now_ms;
use airlock_telemetry::metrics::{ReasonLabels, SourceLabels};
use airlock_transport::{Consumer, Delivery, Message, Order, Serve, Topology, Transport};
use prost::Message as _;
use tracing::{debug, info, warn};

use crate::shared::Shared;
use crate::standing;
use crate::store::Inserted;
use crate::task::Incoming;
use crate::webhooks::EventKind;

/// Retry delays while the store fails, capped at the last.
const RETRY: [Duration; 4] =
    [Duration::from_millis(200), Duration::from_secs(1), Duration::from_secs(3), Duration::from_secs(10)];

/// Consumes the pools' queues until the service stops, then cancels the consumers and lets
/// the deliveries in hand finish.
pub async fn consume_pools<T: Transport>(
    shared: Arc<Shared>,
    transport: T,
    topology: Topology,
    pools: Vec<(String, Consumer)>,
) {
    let serve = pools.into_iter().fold(Serve::new(), |serve, (pool, consumer)| serve.consume(pool, consumer));
    let taking = |pool: String, delivery: Delivery| {
        // The task continues the trace of the worker that forwarded it.
        let correlation = delivery.message.correlation_id.as_deref().unwrap_or_default();
        let span = tracing::debug_span!("airlock.reviewer", %pool, correlation_id = correlation);
        airlock_telemetry::propagation::adopt(&span, &delivery.message.headers);
        let taking = take(shared.clone(), transport.clone(), topology.clone(), pool, delivery);
        tracing::Instrument::instrument(taking, span)
    };
    serve.run(taking, shared.stop.clone().cancelled_owned()).await;
    debug!("Intake stopped.");
}

/// Stores one delivered task, then acknowledges it.
async fn take<T: Transport>(shared: Arc<Shared>, transport: T, topology: Topology, pool: String, delivery: Delivery) {
    let source = SourceLabels { source: format!("human.{pool}") };
    shared.metrics.messages.get_or_create(&source).inc();
    let incoming = match Incoming::decode(&delivery.message.body, &pool) {
        Ok(incoming) => incoming,
        Err(e) => {
            warn!(%pool, error = %e, "Unusable human task dead-lettered.");
            let reason = DeadReason::bad_message(e.to_string());
            shared.metrics.dead_lettered.get_or_create(&ReasonLabels { reason: reason.code.as_str().to_owned() }).inc();
            if let Err(e) = transport.publish_dead(&topology, delivery, &reason.to_string()).await {
                warn!(error = %e, "Dead-lettering failed; the broker will deliver the task again.");
            }
            return;
        }
    };
    let mut attempt = 0;
    let (inserted, task) = loop {
        let (id, now) = (uuid::Uuid::now_v7().to_string(), now_ms());
        let task = incoming.pending(&id, now);
        // Nobody is paged about a task a standing decision is about to decide.
        let covered = standing::covering(&shared, &task, now).await.is_ok_and(|standing| standing.is_some());
        let webhooks = if covered {
            Vec::new()
        } else {
            shared.webhooks.announce(EventKind::Created, &task, shared.site.public_url.as_ref())
        };
        match shared.store.insert_as(&id, &incoming, now, &webhooks).await {
            Ok(inserted) => break (inserted, task),
            Err(e) => {
                let delay = RETRY[attempt.min(RETRY.len() - 1)];
                attempt += 1;
                warn!(correlation = %incoming.correlation, error = %e, ?delay, "Storing a task failed; retrying.");
                tokio::select! {
                    () = shared.stop.cancelled() => {
                        let _ = delivery.nack_requeue().await;
                        return;
                    }
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    };
    match &inserted {
        Inserted::Created(id) => {
            info!(task = %id, correlation = %incoming.correlation, pool = %incoming.pool, "Human task stored.");
            // Cancels that came first from users that did not ask withdrew nothing: count them.
            match shared.store.forget_foreign_cancels(&incoming.correlation, incoming.requested_by()).await {
                Ok(users) => dropped_cancels(&shared, &incoming.correlation, &users),
                Err(e) => debug!(task = %id, error = %e, "Reading the call's earlier cancels failed."),
            }
            shared.deadlines.notify_one();
            shared.webhooks_due.notify_one();
            // Read after the task is stored: a standing decision made meanwhile either sees
            // the task among the pending ones or is seen here.
            match standing::settle(&shared, &task, now_ms()).await {
                Ok(Some(_)) => {}
                Ok(None) => {
                    shared.poke();
                    announce(&transport, &topology, &incoming, id).await;
                }
                Err(e) => {
                    warn!(task = %id, error = %e, "Reading the standing decisions failed; the task waits for a person.");
                    shared.poke();
                    announce(&transport, &topology, &incoming, id).await;
                }
            }
        }
        Inserted::Duplicate => debug!(correlation = %incoming.correlation, "Duplicate human task ignored."),
        Inserted::Withdrawn => debug!(correlation = %incoming.correlation, "Human task for a withdrawn call dropped."),
    }
    if let Err(e) = delivery.ack().await {
        // Redelivered later and recognised as a duplicate.
        debug!(correlation = %incoming.correlation, error = %e, "Acknowledging a stored task failed.");
    }
}

/// Tells the runner that its call waits for a person, as task `id`. A failure is logged: the
/// call waits for its decision all the same.
async fn announce<T: Transport>(transport: &T, topology: &Topology, incoming: &Incoming, id: &str) {
    let Some(destination) = topology.reply_route(incoming.reply_to()) else {
        debug!(correlation = %incoming.correlation, reply_to = incoming.reply_to(), "No reply queue to announce the task to.");
        return;
    };
    let message = Message::new(incoming.progress(id).encode_to_vec()).with_correlation_id(incoming.correlation.clone());
    match transport.publish(&destination, message).await {
        Ok(()) => debug!(task = %id, correlation = %incoming.correlation, "Runner told its call waits for a person."),
        Err(e) => {
            warn!(task = %id, correlation = %incoming.correlation, error = %e, "Telling the runner its call waits failed.")
        }
    }
}

/// Logs and counts the cancels of the call `correlation` that `users` sent, none of whom asked
/// for it: the call's tasks stay pending.
fn dropped_cancels(shared: &Shared, correlation: &str, users: &[String]) {
    for cancelled_by in users {
        warn!(%correlation, %cancelled_by, "A cancel from a broker user that did not ask for the call dropped.");
        shared.metrics.review_cancels_dropped.inc();
    }
}

/// Consumes the service's private queue bound to the cancels exchange until the service
/// stops, one cancel at a time.
pub async fn consume_cancels(shared: Arc<Shared>, consumer: Consumer) {
    let serve = Serve::new().consume((), consumer).order(Order::InOrder);
    serve.run(|(), delivery| withdraw(shared.clone(), delivery), shared.stop.clone().cancelled_owned()).await;
}

/// Withdraws the tasks of one cancelled call that the cancel's publisher asked for, then
/// acknowledges the cancel; at shutdown, while the store fails, the cancel goes back to its
/// queue.
async fn withdraw(shared: Arc<Shared>, delivery: Delivery) {
    match v1::Cancel::decode(delivery.message.body.as_ref()) {
        Ok(cancel) => {
            let kind = v1::Kind::try_from(cancel.kind).unwrap_or(v1::Kind::Approval);
            let correlation = cancel.key.unwrap_or_default().correlation_id(kind);
            let reason = if cancel.reason.is_empty() { "withdrawn by the runner".to_owned() } else { cancel.reason };
            let cancelled_by = delivery.message.user_id.as_deref().unwrap_or_default();
            let mut attempt = 0;
            loop {
                match shared.store.cancel(&correlation, cancelled_by, &reason, now_ms()).await {
                    Ok(withdrawal) => {
                        if !withdrawal.withdrawn.is_empty() {
                            info!(%correlation, tasks = withdrawal.withdrawn.len(), "Human tasks withdrawn.");
                            shared.poke();
                        }
                        if !withdrawal.kept.is_empty() {
                            dropped_cancels(&shared, &correlation, &[cancelled_by.to_owned()]);
                        }
                        break;
                    }
                    Err(e) => {
                        let delay = RETRY[attempt.min(RETRY.len() - 1)];
                        attempt += 1;
                        warn!(%correlation, error = %e, "Withdrawing tasks failed; retrying.");
                        tokio::select! {
                            () = shared.stop.cancelled() => return,
                            () = tokio::time::sleep(delay) => {}
                        }
                    }
                }
            }
        }
        Err(e) => warn!(error = %e, "A message on the cancels queue is not an airlock.v1.Cancel; dropped."),
    }
    if let Err(e) = delivery.ack().await {
        debug!(error = %e, "Acknowledging a cancel failed.");
    }
}

#[cfg(test)]
mod tests;
