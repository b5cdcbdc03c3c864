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
//! A message that can never be stored goes to `<p>.dead` with its reason and is acknowledged,
//! so that it holds no prefetch slot and the consumer moves on: one that does not decode, a
//! task whose call key, pool, broker user or function holds a NUL character (PostgreSQL's text
//! cannot keep one; every store refuses it alike), a cancel whose call key or reason holds
//! one, and one the store refuses [`REFUSALS`] times (an error that is not
//! [transient](StoreError::is_transient)). A transient failure is retried as long as it lasts.
//!
//! A newly stored task is announced to its runner: a `Progress` reply (pool, task id, step)
//! to the request's reply queue under the call's correlation id, so that the runner can page
//! someone. It is best effort and unproved, and it never settles the call.
//!
//! After each new task, a service with canaries may plant one in the task's pool
//! ([`Planter::after`]), once the task's delivery is acknowledged.
//!
//! A task a reviewer's standing decision covers is stored, then decided by it at once (it
//! stays in the history), without paging anyone or announcing it to the runner: the
//! standing decisions are read once, in the transaction that stores the task, which writes
//! the `task.created` webhooks of a task none covers ([`Desk::insert`]); the desk then
//! decides a covered task by its standing decision ([`Desk::admit`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use airlock_contract::v1;
use airlock_records::code::DeadReason;
use airlock_records::convert::first_with_nul;
use airlock_records::time::now_ms;
use airlock_telemetry::events::DeadLettered;
use airlock_telemetry::metrics::SourceLabels;
use airlock_transport::{Consumer, Delivery, Message, Order, Serve, Topology, Transport};
use prost::Message as _;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::canary::Planter;
use crate::desk::Desk;
use crate::logged::Logged;
use crate::store::{Inserted, StoreError};
use crate::task::{Incoming, Task};

/// Retry delays while the store fails, capped at the last.
const RETRY: [Duration; 4] =
    [Duration::from_millis(200), Duration::from_secs(1), Duration::from_secs(3), Duration::from_secs(10)];

/// How many times the store may refuse a message (an error that is not transient) before it
/// is dead-lettered.
pub const REFUSALS: usize = 3;

/// Consumes the pools' queues until `stop`, then cancels the consumers and lets the
/// deliveries in hand finish; the tasks go to the `desk`, and after each new one the
/// `planter` (if any) may plant a canary.
pub async fn consume_pools<T: Transport>(
    desk: Arc<Desk>,
    stop: CancellationToken,
    transport: T,
    topology: Topology,
    pools: Vec<(String, Consumer)>,
    planter: Option<Arc<Planter>>,
) {
    let serve = pools.into_iter().fold(Serve::new(), |serve, (pool, consumer)| serve.consume(pool, consumer));
    let taking = |pool: String, delivery: Delivery| {
        // The task continues the trace of the worker that forwarded it.
        let correlation = delivery.message.correlation_id.as_deref().unwrap_or_default();
        let span = tracing::debug_span!("airlock.reviewer", %pool, correlation_id = %Logged(correlation));
        airlock_telemetry::propagation::adopt(&span, &delivery.message.headers);
        let taking = take(desk.clone(), stop.clone(), transport.clone(), topology.clone(), pool, delivery);
        let planter = planter.clone();
        let taking = async move {
            // Once the task is acknowledged: the delivery never waits for a canary.
            if let (Some(planter), Some(task)) = (planter, taking.await) {
                planter.after(&task).await;
            }
        };
        tracing::Instrument::instrument(taking, span)
    };
    serve.run(taking, stop.clone().cancelled_owned()).await;
    debug!("Intake stopped.");
}

/// How a store operation [`persist`] retried ended without success.
#[derive(Debug)]
enum Unstored {
    /// The service is stopping.
    Stopping,
    /// The store refused it [`REFUSALS`] times; this is the last refusal.
    Refused(StoreError),
}

/// Runs `attempt` until the store takes it: with backoff, for as long as the store fails in
/// a way that passes; at most [`REFUSALS`] times while it refuses; until `stop`. `what` names
/// the message in the log.
async fn persist<T, Attempt>(
    stop: &CancellationToken,
    what: &str,
    mut attempt: impl FnMut() -> Attempt,
) -> Result<T, Unstored>
where
    Attempt: Future<Output = Result<T, StoreError>>,
{
    let (mut failures, mut refusals) = (0, 0);
    loop {
        let error = match attempt().await {
            Ok(done) => return Ok(done),
            Err(error) => error,
        };
        if !error.is_transient() {
            refusals += 1;
            if refusals == REFUSALS {
                return Err(Unstored::Refused(error));
            }
        }
        let delay = RETRY[failures.min(RETRY.len() - 1)];
        failures += 1;
        warn!(message = %Logged(what), error = %Logged(&error), ?delay, "The store failed; retrying.");
        tokio::select! {
            () = stop.cancelled() => return Err(Unstored::Stopping),
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// Sends `delivery` to the dead-letter queue with `reason`, logged and counted; if that
/// fails, the broker delivers it again.
async fn dead_letter<T: Transport>(
    shared: &Desk,
    transport: &T,
    topology: &Topology,
    delivery: Delivery,
    reason: DeadReason,
) {
    DeadLettered { reason }.emit(transport, topology, delivery, Some(shared.metrics.as_ref())).await;
}

/// Stores one delivered task, then acknowledges it; the task when it is new.
async fn take<T: Transport>(
    desk: Arc<Desk>,
    stop: CancellationToken,
    transport: T,
    topology: Topology,
    pool: String,
    delivery: Delivery,
) -> Option<Task> {
    let source = SourceLabels { source: format!("human.{pool}") };
    desk.metrics.messages.get_or_create(&source).inc();
    let incoming = match Incoming::decode(&delivery.message.body, &pool) {
        Ok(incoming) => incoming,
        Err(e) => {
            let reason = DeadReason::bad_message(format!("unusable human task: {e}"));
            dead_letter(&desk, &transport, &topology, delivery, reason).await;
            return None;
        }
    };
    let correlation = Logged(incoming.correlation.as_str());
    let (desk_ref, incoming_ref) = (&desk, &incoming);
    let storing = persist(&stop, &incoming.correlation, || async move {
        let task = incoming_ref.pending(&uuid::Uuid::now_v7().to_string(), now_ms());
        Ok((desk_ref.insert(incoming_ref, &task).await?, task))
    });
    let (stored, task) = match storing.await {
        Ok(stored) => stored,
        Err(Unstored::Stopping) => {
            let _ = delivery.nack_requeue().await;
            return None;
        }
        Err(Unstored::Refused(e)) => {
            let reason = DeadReason::bad_message(format!("the store refused the human task: {e}"));
            dead_letter(&desk, &transport, &topology, delivery, reason).await;
            return None;
        }
    };
    let new = matches!(stored.inserted, Inserted::Created(_)).then(|| task.clone());
    match &stored.inserted {
        Inserted::Created(id) => {
            info!(task = %id, %correlation, pool = %Logged(&incoming.pool), "Human task stored.");
            // Cancels that came first from users that did not ask withdrew nothing: count them.
            match desk.store().forget_foreign_cancels(&incoming.correlation, incoming.requested_by()).await {
                Ok(users) => dropped_cancels(&desk, &incoming.correlation, &users),
                Err(e) => debug!(task = %id, error = %Logged(&e), "Reading the call's earlier cancels failed."),
            }
            if desk.admit(&task, stored.covered_by.as_ref()).await {
                let reply = incoming.progress(id);
                tell_runner(&transport, &topology, (&incoming.correlation, incoming.reply_to()), reply, id).await;
            }
        }
        Inserted::Duplicate => debug!(%correlation, "Duplicate human task ignored."),
        Inserted::Withdrawn => debug!(%correlation, "Human task for a withdrawn call dropped."),
    }
    if let Err(e) = delivery.ack().await {
        // Redelivered later and recognised as a duplicate.
        debug!(%correlation, error = %Logged(&e), "Acknowledging a stored task failed.");
    }
    new
}

/// Tells the runner of call `correlation`, at its reply queue `reply_to`, `reply` (a progress
/// of task `id`: its call waits for a person, or its task expires). A failure is logged: the
/// call waits for its decision all the same.
pub(crate) async fn tell_runner<T: Transport>(
    transport: &T,
    topology: &Topology,
    (correlation, reply_to): (&str, &str),
    reply: v1::Reply,
    id: &str,
) {
    let logged = Logged(correlation);
    let Some(destination) = topology.reply_route(reply_to) else {
        debug!(correlation = %logged, reply_to = %Logged(reply_to), "No reply queue to tell the runner at.");
        return;
    };
    let message = Message::new(reply.encode_to_vec()).with_correlation_id(correlation.to_owned());
    match transport.publish(&destination, message).await {
        Ok(()) => debug!(task = %id, correlation = %logged, "Runner told of its call's task."),
        Err(e) => {
            warn!(task = %id, correlation = %logged, error = %Logged(&e), "Telling the runner of its call's task failed.")
        }
    }
}

/// Logs and counts the cancels of the call `correlation` that `users` sent, none of whom asked
/// for it: the call's tasks stay pending.
fn dropped_cancels(desk: &Desk, correlation: &str, users: &[String]) {
    for cancelled_by in users {
        warn!(
            correlation = %Logged(correlation),
            cancelled_by = %Logged(cancelled_by),
            "A cancel from a broker user that did not ask for the call dropped."
        );
        desk.metrics.review_cancels_dropped.inc();
    }
}

/// Consumes the service's private queue bound to the cancels exchange until `stop`, one
/// cancel at a time, withdrawing at the `desk`; a cancel that can never be applied is
/// dead-lettered through `transport` to `topology`'s dead-letter queue, so the ones behind
/// it are applied.
pub async fn consume_cancels<T: Transport>(
    desk: Arc<Desk>,
    stop: CancellationToken,
    transport: T,
    topology: Topology,
    consumer: Consumer,
) {
    let serve = Serve::new().consume((), consumer).order(Order::InOrder);
    let withdrawing =
        |(), delivery| withdraw(desk.clone(), stop.clone(), transport.clone(), topology.clone(), delivery);
    serve.run(withdrawing, stop.clone().cancelled_owned()).await;
}

/// A cancel as the service applies it: the call's correlation id, why, and who sent it.
#[derive(Debug)]
struct Withdrawing {
    correlation: String,
    reason: String,
    cancelled_by: String,
}

impl Withdrawing {
    /// Reads a delivered cancel; why it can never be applied otherwise.
    fn decode(message: &Message) -> Result<Self, DeadReason> {
        let cancel = v1::Cancel::decode(message.body.as_ref())
            .map_err(|e| DeadReason::bad_message(format!("not an airlock.v1.Cancel: {e}")))?;
        let kind = v1::Kind::try_from(cancel.kind).unwrap_or(v1::Kind::Approval);
        let correlation = cancel.key.unwrap_or_default().correlation_id(kind);
        let reason = if cancel.reason.is_empty() { "withdrawn by the runner".to_owned() } else { cancel.reason };
        if let Some((what, _)) = first_with_nul([("call key", correlation.as_str()), ("reason", &reason)]) {
            return Err(DeadReason::bad_message(format!(
                "the Cancel's {what} holds a NUL character, which the store cannot keep"
            )));
        }
        let cancelled_by = message.user_id.clone().unwrap_or_default();
        Ok(Withdrawing { correlation, reason, cancelled_by })
    }
}

/// Withdraws the tasks of one cancelled call that the cancel's publisher asked for, then
/// acknowledges the cancel; at shutdown, while the store fails, the cancel goes back to its
/// queue; one that can never be applied is dead-lettered.
async fn withdraw<T: Transport>(
    desk: Arc<Desk>,
    stop: CancellationToken,
    transport: T,
    topology: Topology,
    delivery: Delivery,
) {
    let cancel = match Withdrawing::decode(&delivery.message) {
        Ok(cancel) => cancel,
        Err(reason) => return dead_letter(&desk, &transport, &topology, delivery, reason).await,
    };
    let Withdrawing { correlation, reason, cancelled_by } = &cancel;
    let desk_ref = &desk;
    let withdrawing =
        persist(&stop, correlation, || async move { desk_ref.withdraw(correlation, cancelled_by, reason).await });
    match withdrawing.await {
        Ok(withdrawal) => {
            if !withdrawal.withdrawn.is_empty() {
                info!(correlation = %Logged(correlation), tasks = withdrawal.withdrawn.len(), "Human tasks withdrawn.");
            }
            if !withdrawal.kept.is_empty() {
                dropped_cancels(&desk, correlation, std::slice::from_ref(cancelled_by));
            }
        }
        // Back to its queue, in order, by the channel's closing.
        Err(Unstored::Stopping) => return,
        Err(Unstored::Refused(e)) => {
            let reason = DeadReason::bad_message(format!("the store refused the cancel: {e}"));
            return dead_letter(&desk, &transport, &topology, delivery, reason).await;
        }
    }
    if let Err(e) = delivery.ack().await {
        debug!(error = %Logged(&e), "Acknowledging a cancel failed.");
    }
}

#[cfg(test)]
mod tests;
