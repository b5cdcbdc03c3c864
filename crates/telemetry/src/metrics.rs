//! The fleet's metrics in the Prometheus text format, named by Prometheus conventions and
//! kept low in cardinality: kinds, decisions, step names and reasons, never call ids.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::server::{self, ServerLimits};

/// Labels by kind (`approval`, `review`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// Approval or review.
    pub kind: String,
}

/// Labels by the queue a message came from.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    /// `requests` or `results`.
    pub source: String,
}

/// Labels of a decision.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    /// Approval or review.
    pub kind: String,
    /// approve, reject, …
    pub decision: String,
    /// The deciding step's name, `policy`, or `none`.
    pub step: String,
    /// `true` when the decision came from a deadline (nobody answered), `false` otherwise: a
    /// reject that timed out is no refusal.
    pub timed_out: String,
}

/// Labels by step name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabels {
    /// The step's name.
    pub step: String,
}

/// Labels of an external step's answer.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AnswerLabels {
    /// The step's name (`human`, `monitor`, …).
    pub step: String,
    /// What it answered.
    pub decision: String,
}

/// Labels by reason code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// A stable code (`bad_message`, `invalid_policy`, …).
    pub reason: String,
}

/// Labels of an HTTP answer of the gateway.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// The route's path template (`/v1/decisions/{id}`), or `unmatched`.
    pub route: String,
    /// The status code answered.
    pub status: String,
}

/// Labels of an outcome: of a webhook attempt, of a model call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// A webhook's `delivered`, `retried`, `gone` (the receiver answered 410) or `given_up`;
    /// a model call's `hit` or `miss`.
    pub outcome: String,
}

/// Labels of a human task's decision, by the reviewer service.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReviewLabels {
    /// The task's pool.
    pub pool: String,
    /// `person` (through the UI or the API), `standing` (a person's standing decision) or
    /// `timeout` (its deadline passed).
    pub decider: String,
}

/// Labels of a person's decisions, by the reviewer service.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReviewerLabels {
    /// The task's pool.
    pub pool: String,
    /// The reviewer's name, as in the tokens file.
    pub reviewer: String,
}

/// Labels of calls handled under control.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResponseLabels {
    /// `human`, `policy` or `terminate`.
    pub response: String,
}

/// Labels by human pool.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    /// The pool.
    pub pool: String,
}

/// Labels of an audit budget.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BudgetLabels {
    /// The monitor step.
    pub step: String,
    /// The run whose calls share the budget, or `*` for a budget across runs.
    pub run: String,
}

/// Every metric a role may move; each role moves the ones that concern it.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Requests and step results taken from the queues.
    pub messages: Family<SourceLabels, Counter>,
    /// Final decisions, by kind, decision, deciding step and whether they timed out.
    pub decisions: Family<DecisionLabels, Counter>,
    /// From the runner's request to the decision, seconds.
    pub decision_latency: Family<KindLabels, Histogram>,
    /// Answers of external steps, from being asked to answering, seconds.
    pub step_latency: Family<StepLabels, Histogram>,
    /// Time a task waited for a person, seconds.
    pub human_wait: Histogram,
    /// Answers given by external steps (people, monitors), by step and decision.
    pub step_answers: Family<AnswerLabels, Counter>,
    /// Escalations, by the step that escalated.
    pub escalations: Family<StepLabels, Counter>,
    /// Messages sent to the dead-letter queue, by reason.
    pub dead_lettered: Family<ReasonLabels, Counter>,
    /// Requests dropped because their deadline had passed.
    pub expired: Counter,
    /// Reconnections to the broker.
    pub reconnects: Counter,
    /// Messages being handled now.
    pub in_flight: Gauge,
    /// The gateway's HTTP answers, by route and status.
    pub gateway_requests: Family<RouteLabels, Counter>,
    /// Requests the gateway sent to the fleet whose decision has not come yet.
    pub gateway_waiting: Gauge,
    /// Webhook attempts, by outcome.
    pub webhook_deliveries: Family<OutcomeLabels, Counter>,
    /// Webhooks neither delivered nor given up yet (those in the delivery log, when there is one).
    pub webhook_backlog: Gauge,
    /// Reviewer service: from a task's arrival in the store to its decision, seconds, by pool
    /// and decider.
    pub review_seconds: Family<ReviewLabels, Histogram>,
    /// Reviewer service: pending tasks per pool, as the store holds them.
    pub review_pending: Family<PoolLabels, Gauge>,
    /// Reviewer service: the age of each pool's oldest pending task, seconds (0 when none).
    pub review_oldest_pending: Family<PoolLabels, Gauge>,
    /// Reviewer service: tasks decided by standing decisions, per pool.
    pub review_standing: Family<PoolLabels, Counter>,
    /// Reviewer service: tasks a person decided (or approved, on a step that needs several),
    /// per pool and reviewer; its rate is decisions per reviewer-hour.
    pub review_decisions: Family<ReviewerLabels, Counter>,
    /// Reviewer service: cancels dropped because a broker user other than the one that asked
    /// published them (the call's tasks stay pending).
    pub review_cancels_dropped: Counter,
    /// From a run switch or incident being appended to the control log to this process
    /// applying it, seconds.
    pub control_lag: Histogram,
    /// Calls handled under control (a run switch, incidents, a breaker), by response.
    pub controlled: Family<ResponseLabels, Counter>,
    /// Monitor: the share of a budgeted step's calls passed on so far, by step and run.
    pub budget_share: Family<BudgetLabels, Gauge<f64, AtomicU64>>,
    /// Monitor: a budgeted step's threshold now (paced: learned; calibrated: fixed).
    pub budget_threshold: Family<BudgetLabels, Gauge<f64, AtomicU64>>,
    /// Monitor: the calls a budget may still pass on, `b × seen - passed`.
    pub budget_left: Family<BudgetLabels, Gauge<f64, AtomicU64>>,
    /// Monitor: model calls answered by the cache (`hit`: known, or shared with an identical
    /// call in flight) or sent to the model (`miss`).
    pub sample_cache: Family<OutcomeLabels, Counter>,
    /// Monitor: the live processes of its rate limiter, each taking that share of the limit.
    pub limiter_processes: Gauge,
}

fn latency() -> Histogram {
    // 0.1 ms … 28 min (0.0001 × 4¹²): from an in-process decision to a person's.
    Histogram::new(exponential_buckets(0.0001, 4.0, 13))
}

impl Metrics {
    /// A registry with every metric, prefixed `airlock_`.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("airlock");
        let messages = Family::default();
        let decisions = Family::default();
        let decision_latency = Family::<KindLabels, Histogram>::new_with_constructor(latency as fn() -> Histogram);
        let step_latency = Family::<StepLabels, Histogram>::new_with_constructor(latency as fn() -> Histogram);
        let human_wait = latency();
        let step_answers = Family::default();
        let escalations = Family::default();
        let dead_lettered = Family::default();
        let (expired, reconnects, in_flight) = (Counter::default(), Counter::default(), Gauge::default());
        registry.register("messages", "Requests and step results taken from the queues", messages.clone());
        registry.register(
            "decisions",
            "Final decisions by kind, decision, deciding step and whether they came from a deadline (timed_out)",
            decisions.clone(),
        );
        registry.register(
            "decision_latency_seconds",
            "From the runner's request to its decision",
            decision_latency.clone(),
        );
        registry.register(
            "step_latency_seconds",
            "External steps, from being asked to answering",
            step_latency.clone(),
        );
        registry.register("human_wait_seconds", "Time a task waited for a person", human_wait.clone());
        registry.register(
            "step_answers",
            "Answers given by external steps, by step and decision",
            step_answers.clone(),
        );
        registry.register("escalations", "Escalations by the step that escalated", escalations.clone());
        registry.register("dead_lettered", "Messages dead-lettered, by reason", dead_lettered.clone());
        registry.register("expired", "Requests dropped because their deadline had passed", expired.clone());
        registry.register("reconnects", "Reconnections to the broker", reconnects.clone());
        registry.register("in_flight", "Messages being handled now", in_flight.clone());
        let (gateway_requests, webhook_deliveries) = (Family::default(), Family::default());
        let (gateway_waiting, webhook_backlog) = (Gauge::default(), Gauge::default());
        registry.register(
            "gateway_requests",
            "The gateway's HTTP answers by route and status",
            gateway_requests.clone(),
        );
        registry.register(
            "gateway_waiting",
            "Requests the gateway sent to the fleet and not yet decided",
            gateway_waiting.clone(),
        );
        registry.register(
            "webhook_deliveries",
            "Webhook attempts by outcome: delivered, retried, gone, given_up",
            webhook_deliveries.clone(),
        );
        registry.register("webhook_backlog", "Webhooks neither delivered nor given up yet", webhook_backlog.clone());
        let review_seconds = Family::<ReviewLabels, Histogram>::new_with_constructor(latency as fn() -> Histogram);
        let (review_pending, review_oldest_pending) = (Family::default(), Family::default());
        registry.register(
            "reviewer_decision_seconds",
            "Human tasks, from their arrival in the reviewer's store to their decision, by pool and decider",
            review_seconds.clone(),
        );
        registry.register("reviewer_pending", "Pending human tasks per pool, in the store", review_pending.clone());
        registry.register(
            "reviewer_oldest_pending_seconds",
            "Age of each pool's oldest pending human task (0 when none)",
            review_oldest_pending.clone(),
        );
        let review_standing = Family::default();
        registry.register(
            "reviewer_standing_decisions",
            "Human tasks decided by a reviewer's standing decision instead of a person, per pool",
            review_standing.clone(),
        );
        let review_decisions = Family::default();
        registry.register(
            "reviewer_decisions",
            "Human tasks a person decided, or approved on a step that needs several, per pool and reviewer",
            review_decisions.clone(),
        );
        let review_cancels_dropped = Counter::default();
        registry.register(
            "reviewer_cancels_dropped",
            "Cancels dropped because a broker user other than the one that asked for the call published them",
            review_cancels_dropped.clone(),
        );
        let (control_lag, controlled) = (latency(), Family::default());
        registry.register(
            "control_lag_seconds",
            "From a run switch or incident being appended to the control log to this process applying it",
            control_lag.clone(),
        );
        registry.register(
            "controlled_calls",
            "Calls handled under a run switch, incidents or a breaker, by response",
            controlled.clone(),
        );
        let (budget_share, budget_threshold, budget_left) = (Family::default(), Family::default(), Family::default());
        registry.register(
            "budget_share",
            "Share of an audit-budgeted monitor step's calls passed on so far, by step and run",
            budget_share.clone(),
        );
        registry.register(
            "budget_threshold",
            "An audit-budgeted monitor step's score threshold now, by step and run",
            budget_threshold.clone(),
        );
        registry.register(
            "budget_left",
            "Calls an audit budget may still pass on (budget x scores seen - passed on), by step and run",
            budget_left.clone(),
        );
        let (sample_cache, limiter_processes) = (Family::default(), Gauge::default());
        registry.register(
            "sample_cache",
            "Monitor model calls by outcome: hit (answered without asking the model) or miss",
            sample_cache.clone(),
        );
        registry.register(
            "limiter_processes",
            "Live processes of the monitor's rate limiter, which share its requests per minute",
            limiter_processes.clone(),
        );
        Metrics {
            registry,
            messages,
            decisions,
            decision_latency,
            step_latency,
            human_wait,
            step_answers,
            escalations,
            dead_lettered,
            expired,
            reconnects,
            in_flight,
            gateway_requests,
            gateway_waiting,
            webhook_deliveries,
            webhook_backlog,
            review_seconds,
            review_pending,
            review_oldest_pending,
            review_standing,
            review_decisions,
            review_cancels_dropped,
            control_lag,
            controlled,
            budget_share,
            budget_threshold,
            budget_left,
            sample_cache,
            limiter_processes,
        }
    }

    /// The metrics in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String");
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Counts a transport's reconnections (its `reconnects()` watch) in `metrics`, until the
/// transport is gone.
pub async fn count_reconnects(mut reconnects: tokio::sync::watch::Receiver<u64>, metrics: Arc<Metrics>) {
    let mut seen = *reconnects.borrow_and_update();
    while reconnects.changed().await.is_ok() {
        let now = *reconnects.borrow_and_update();
        metrics.reconnects.inc_by(now.saturating_sub(seen));
        seen = now;
    }
}

/// Serves `GET /metrics` on `addr` until the process ends, within the default
/// [`ServerLimits`]; returns the bound address.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let metrics = metrics.clone();
            async move { ([(CONTENT_TYPE, "text/plain; version=0.0.4")], metrics.render()) }
        }),
    );
    tokio::spawn(server::serve(listener, app, ServerLimits::default(), std::future::pending()));
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_are_told_apart_up_to_half_an_hour() {
        // People take minutes; past the last bucket a quantile can only say "more than".
        let metrics = Metrics::new();
        metrics.human_wait.observe(20.0 * 60.0);
        let text = metrics.render();
        assert!(text.contains("airlock_human_wait_seconds_bucket{le=\"419.4304\"} 0"), "{text}");
        assert!(text.contains("airlock_human_wait_seconds_bucket{le=\"1677.7216\"} 1"), "{text}");
    }

    #[test]
    fn reconnects_are_counted_from_the_transport_s_count() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let metrics = Arc::new(Metrics::new());
        // A transport that had reconnected twice before it was watched.
        let (transport, reconnects) = tokio::sync::watch::channel(2u64);
        runtime.block_on(async {
            let counting = tokio::spawn(count_reconnects(reconnects, metrics.clone()));
            tokio::task::yield_now().await;
            transport.send(3).unwrap();
            tokio::task::yield_now().await;
            transport.send(5).unwrap();
            drop(transport);
            counting.await.unwrap();
        });
        assert_eq!(metrics.reconnects.get(), 3);
        assert!(metrics.render().contains("airlock_reconnects_total 3"));
    }
}
