//! The stateless policy worker.
//!
//! It consumes the fleet's `requests` and `results` queues, runs each request's chain with
//! the policy engine, and publishes what follows: the decision (to the runner's reply queue,
//! copied by the broker to the auditor's) or the task of the next external step. A delivery is
//! acknowledged only after everything it caused is confirmed by the broker, so a worker can
//! die at any moment: the broker delivers the message again, and the runner recognises a
//! decision it already has.
//!
//! Layout:
//! - [`handler`]: a delivery read once, and what to publish for a request or a step result
//!   (pure, no I/O).
//! - [`trust`]: reply proofs, task seals, and who may answer a step.
//! - [`policies`]: inline and named policies, compiled once and reloaded on change.
//! - [`offline`]: the engine on a policy file and calls, without a fleet (`airlock policy`).
//! - [`run`]: the worker's handling of each delivery (publish, then acknowledge), served by
//!   the role loop of `airlock_transport::serve`.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod handler;
pub mod offline;
pub mod policies;
pub mod trust;

use std::collections::HashSet;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use airlock_records::time::now_ms;
use airlock_telemetry::events::DeadLettered;
use airlock_telemetry::metrics::{DecisionLabels, Metrics, ResponseLabels, SourceLabels, StepLabels};
use airlock_telemetry::propagation;
use airlock_transport::{Delivery, Message, Serve, Topology, Transport, TransportError};
use futures_util::future::try_join_all;
use tracing::{Instrument, debug, debug_span, info, warn};

use airlock_control::{ControlError, ControlLog};

use crate::handler::{Handled, Handler, Inbound, Outgoing, Queue, Report};
use crate::policies::PolicyStore;
use crate::trust::Trust;

/// How a worker runs.
#[derive(Debug)]
pub struct WorkerConfig {
    /// The fleet's prefix: every queue and exchange name starts with it.
    pub prefix: String,
    /// Messages handled at once (the consumers' prefetch).
    pub concurrency: u16,
    /// Where named policies live.
    pub policy_dir: Option<PathBuf>,
    /// Recorded as `decided_by` of built-in decisions.
    pub worker_id: String,
    /// Where the worker counts what it does (shared with whoever serves the metrics).
    pub metrics: Arc<Metrics>,
    /// The fleet key it proves and seals with, and who may answer its steps.
    pub trust: Trust,
}

/// The worker could not start or keep running.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The transport failed in a way retries do not cure.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The control log could not be read.
    #[error(transparent)]
    Control(#[from] ControlError),
}

/// Runs a worker until `shutdown` resolves or the transport closes, then stops consuming,
/// lets in-flight messages finish (up to [`airlock_transport::SHUTDOWN_GRACE`]) and closes the transport.
pub async fn run<T: Transport>(
    transport: T,
    config: WorkerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WorkerError> {
    let topology = Topology::new(config.prefix.clone());
    transport.declare(&topology).await?;
    let metrics = config.metrics.clone();
    // Nothing is decided before the control log is read to its end: a worker that starts
    // after a run was stopped must not approve its calls.
    let control =
        ControlLog::open(transport.clone(), &topology, config.worker_id.clone(), Some(metrics.clone())).await?;
    let worker = Arc::new(Worker {
        handler: Handler::new(
            topology.clone(),
            PolicyStore::new(config.policy_dir.clone()),
            config.worker_id.clone(),
            config.trust,
        )
        .with_control(control.view().clone()),
        transport: transport.clone(),
        topology: topology.clone(),
        declared: Mutex::new(HashSet::new()),
        metrics: metrics.clone(),
    });
    tokio::spawn(airlock_telemetry::metrics::count_reconnects(transport.reconnects(), metrics));
    let requests = transport.consume(&topology.requests_queue(), config.concurrency).await?;
    let results = transport.consume(&topology.results_queue(), config.concurrency).await?;
    info!(prefix = %config.prefix, worker = %config.worker_id, concurrency = config.concurrency, "Worker consuming.");

    let serve = Serve::new().consume(Source::Request, requests).consume(Source::Result, results);
    serve.run(|source, delivery| worker.clone().handle(source, delivery), shutdown).await;
    transport.close().await;
    info!("Worker stopped.");
    Ok(())
}

/// Which queue a delivery came from.
#[derive(Debug, Clone, Copy)]
enum Source {
    Request,
    Result,
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::Request => "requests",
            Source::Result => "results",
        }
    }

    /// Reads a delivery of this queue, once.
    fn read(self, message: &Message) -> Inbound<'_> {
        match self {
            Source::Request => Inbound::request(message),
            Source::Result => Inbound::result(message),
        }
    }
}

struct Worker<T> {
    handler: Handler,
    transport: T,
    topology: Topology,
    /// Step and human queues this worker declared already.
    declared: Mutex<HashSet<String>>,
    metrics: Arc<Metrics>,
}

impl<T: Transport> Worker<T> {
    /// Handles one delivery in a span that continues the trace of whoever sent it.
    async fn handle(self: Arc<Self>, source: Source, delivery: Delivery) {
        let correlation = delivery.message.correlation_id.clone().unwrap_or_default();
        let span = debug_span!("airlock.worker", queue = source.name(), correlation_id = %correlation);
        let inbound = source.read(&delivery.message);
        if !span.is_disabled() {
            propagation::adopt(&span, inbound.trace());
        }
        self.metrics.in_flight.inc();
        self.metrics.messages.get_or_create(&SourceLabels { source: source.name().into() }).inc();
        let handled = span.in_scope(|| self.handled(&inbound, now_ms()));
        self.settle(handled, delivery, correlation).instrument(span).await;
        self.metrics.in_flight.dec();
    }

    /// Publishes what a delivery caused, then settles it with the broker.
    async fn settle(&self, mut handled: Handled, delivery: Delivery, correlation: String) {
        loop {
            match handled {
                Handled::Publish(outgoing, report) => match self.publish_all(outgoing).await {
                    Ok(None) => {
                        self.count(&report);
                        return settled(delivery.ack().await, &correlation);
                    }
                    // A step's queue did not stand: the delivery ends as its refusal.
                    Ok(Some(refusal)) => handled = refusal,
                    Err(e) => {
                        warn!(%correlation, error = %e, "Publishing failed; the message goes back to its queue.");
                        return settled(delivery.nack_requeue().await, &correlation);
                    }
                },
                Handled::Expired => {
                    debug!(%correlation, "Request past its deadline dropped: the runner failed closed already.");
                    self.metrics.expired.inc();
                    return settled(delivery.ack().await, &correlation);
                }
                Handled::Dead { reason, reply } => {
                    if let Some(reply) = reply
                        && let Err(e) = self.publish(*reply).await
                    {
                        warn!(%correlation, error = %e, "Could not tell the runner its request failed.");
                    }
                    let dead = DeadLettered { reason };
                    return dead.emit(&self.transport, &self.topology, delivery, Some(self.metrics.as_ref())).await;
                }
            }
        }
    }

    /// What the handler makes of a message. A panic in it is this message's failure alone:
    /// the message is dead-lettered with the panic's text, where unwinding would leave it
    /// unacknowledged, holding one of the consumer's slots until the worker restarts. What
    /// the handler shares between messages (compiled policies, reply keys) is written in one
    /// step under locks that recover from poisoning, so a panic leaves none of it half made.
    fn handled(&self, inbound: &Inbound<'_>, now: i64) -> Handled {
        let handle = || self.handler.handle(inbound, now);
        panic::catch_unwind(AssertUnwindSafe(handle)).unwrap_or_else(|panic| {
            let text = panic
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_owned());
            self.handler.failed(inbound, text)
        })
    }

    /// Counts what a handled message did to its chain.
    fn count(&self, report: &Report) {
        let metrics = &self.metrics;
        let kind = report.kind.map(|k| k.to_string()).unwrap_or_default();
        for step in &report.escalated {
            metrics.escalations.get_or_create(&StepLabels { step: step.clone() }).inc();
        }
        if let Some(answered) = &report.answered {
            let seconds = answered.took_ms as f64 / 1e3;
            metrics.step_latency.get_or_create(&StepLabels { step: answered.step.clone() }).observe(seconds);
            if answered.human {
                metrics.human_wait.observe(seconds);
            }
        }
        if let Some(response) = report.controlled {
            metrics.controlled.get_or_create(&ResponseLabels { response: response.into() }).inc();
        }
        if let Some(decided) = &report.decided {
            let step = if decided.approver.is_empty() { "none".to_owned() } else { decided.approver.clone() };
            let timed_out = decided.timed_out.to_string();
            let labels = DecisionLabels { kind: kind.clone(), decision: decided.decision.to_string(), step, timed_out };
            metrics.decisions.get_or_create(&labels).inc();
            let latency = metrics.decision_latency.get_or_create(&airlock_telemetry::metrics::KindLabels { kind });
            latency.observe(decided.latency_ms as f64 / 1e3);
        }
    }

    /// Publishes what one delivery caused: first its entries of the control log, then each
    /// message whose queue must stand already (the refusal of the first that no queue takes is
    /// returned, nothing else published), then the rest at once, so their confirms are
    /// awaited together.
    async fn publish_all(&self, outgoing: Vec<Outgoing>) -> Result<Option<Handled>, TransportError> {
        let (logged, outgoing): (Vec<_>, Vec<_>) =
            outgoing.into_iter().partition(|out| matches!(out.queue, Queue::Log));
        try_join_all(logged.into_iter().map(|out| self.publish(out))).await?;
        let (existing, rest): (Vec<_>, Vec<_>) =
            outgoing.into_iter().partition(|out| matches!(out.queue, Queue::Existing(_)));
        for mut out in existing {
            let Queue::Existing(refusal) = std::mem::replace(&mut out.queue, Queue::Standing) else {
                unreachable!("partitioned by their queue")
            };
            match self.publish(out).await {
                Err(TransportError::Unroutable { .. }) => return Ok(Some(*refusal)),
                published => published?,
            }
        }
        try_join_all(rest.into_iter().map(|out| self.publish(out))).await?;
        Ok(None)
    }

    async fn publish(&self, out: Outgoing) -> Result<(), TransportError> {
        if let Queue::Declare(fragment) = &out.queue {
            let name = out.destination.parts().1.to_owned();
            let known = self.declared.lock().unwrap_or_else(PoisonError::into_inner).contains(&name);
            if !known {
                self.transport.declare(fragment).await?;
                self.declared.lock().unwrap_or_else(PoisonError::into_inner).insert(name);
            }
        }
        let mut message = out.message;
        propagation::inject(&tracing::Span::current(), &mut message.headers);
        self.transport.publish(&out.destination, message).await
    }
}

fn settled(result: Result<(), TransportError>, correlation: &str) {
    if let Err(e) = result {
        // The broker redelivers what was not acknowledged; handlers are idempotent.
        warn!(%correlation, error = %e, "Acknowledgement failed.");
    }
}
