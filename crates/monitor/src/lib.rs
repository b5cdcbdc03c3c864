//! The model-based monitor: serves an external step by asking a model how suspicious a tool
//! call is, and answers with the decision the step's thresholds give for the score.
//!
//! It consumes `<prefix>.step.<name>`, builds a prompt from the task's request (the call, its
//! view, the conversation, and for a review the result), asks the model through its HTTP API,
//! and publishes a `StepResult` (the task echoed back with the answer) to the task's
//! `reply_to`. A task is acknowledged only after its result is confirmed by the broker; no
//! failure of the model loses a task or stops the monitor: it answers the fallback, or the
//! task's `on_timeout` once its deadline has come.
//!
//! Layout:
//! - [`config`]: the monitor's configuration, checked before anything connects.
//! - [`params`]: the step's parameters in a policy (`approve_below`, `escalate_below`,
//!   `above`, or `audit_budget` and its companions; `fallback`) and the score → decision
//!   mapping; `airlock policy check`'s check of them.
//! - [`budget`]: the audit budget: the share of a step's calls passed on, paced or
//!   calibrated, per step and run, fed by this process's scores and the fleet's.
//! - [`prompt`]: the system prompt and the user message's template.
//! - [`provider`]: the HTTP call, with one module per API (`openai`, `anthropic`).
//! - [`score`]: reading the model's own verdict from a reply, never one it quotes of the
//!   request; different scores in one reply are no verdict.
//! - [`scores`]: a budgeted step's scores shared by every process serving it, through the
//!   step's log of scores.
//! - [`sampling`]: identical model calls answered once across the fleet (a cache keyed by the
//!   exact input, shared through the step's log of answers), and a provider's rate limit
//!   shared by every process of a named limiter.
//! - [`retry`]: backoff, `Retry-After`, and the deadline over all attempts.
//! - [`protocol`]: control protocols (`trusted_edit`, `defer_to_trusted`, `resample`): their
//!   parameters and rule, the model requests they make ([`protocol::requests`]), and how a
//!   task runs one ([`protocol::run`]).
//! - [`answer`]: the `StepAnswer` for an outcome, with the score (and what a protocol did) in
//!   its metadata.
//! - [`calibrate`]: monitor scores against people's verdicts and honest/attack labels, from
//!   a decision log: the threshold for a budget, AUROC and TPR at the budget's FPR
//!   ([`calibrate::roc`]), the tables and charts.
//! - [`report`]: the control report: usefulness, safety at audit budgets, audit coverage and
//!   catch rate per protocol, from a decision log and Inspect's eval logs, as ControlArena
//!   computes them.
//! - [`run`]: ask / publish / acknowledge for each task, in a span that continues the
//!   sender's trace, served by the role loop of `airlock_transport::serve`.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod answer;
pub mod budget;
pub mod calibrate;
pub mod config;
pub mod params;
pub mod prompt;
pub mod protocol;
pub mod provider;
pub mod report;
pub mod retry;
pub mod sampling;
pub mod score;
pub mod scores;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use airlock_contract::v1;
use airlock_policy::Kind;
use airlock_records::code::DeadReason;
use airlock_records::convert::{decision_from_wire, request_parts};
use airlock_records::monitor::NoteBudget;
use airlock_records::time::{Deadline, now_ms};
use airlock_telemetry::events::DeadLettered;
use airlock_telemetry::metrics::{SourceLabels, StepLabels};
use airlock_telemetry::propagation;
use airlock_transport::{Delivery, Message, Serve, Topology, Transport, TransportError};
use prost::Message as _;
use tokio::time::Instant;
use tracing::{Instrument, debug, debug_span, info, warn};

/// A step's decision (the policy engine's), as the configuration's fallback takes it.
pub use airlock_policy::Decision;

pub use crate::answer::{Basis, FallbackCode, Identity, Outcome};
pub use crate::budget::{Budgets, Entry};
pub use crate::config::{ConfigError, MonitorConfig};
use crate::params::{AuditBudget, Rule, StepParams};
use crate::provider::{Provider, ProviderConfig, ProviderError};
use crate::retry::Exhausted;
use crate::sampling::{Cache, Draw, Limiter};
pub use crate::sampling::{RateLimit, SamplingConfig};

/// Kept free before a step's deadline, for the answer to travel to a worker.
pub const ANSWER_MARGIN: Duration = Duration::from_millis(200);

/// The monitor could not start or keep running.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// The configuration cannot work.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP client cannot be built.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The transport failed in a way retries do not cure.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The step's log of scores could not be read.
    #[error(transparent)]
    Scores(#[from] airlock_control::ControlError),
}

/// Runs a monitor until `shutdown` resolves or the transport closes, then stops consuming,
/// lets in-flight tasks finish (up to [`airlock_transport::SHUTDOWN_GRACE`]; the rest go back
/// to the queue) and closes the transport. It counts in the configuration's metrics: tasks
/// taken (`messages{source="step"}`), answer latency and escalations by step, dead-lettered
/// tasks, expired tasks, tasks in flight.
pub async fn run<T: Transport>(
    transport: T,
    config: MonitorConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), MonitorError> {
    config.validate()?;
    let mut topology = Topology::new(config.prefix.clone()).with_step(&config.step).with_scores_log(&config.step);
    let mut own = Topology::empty(config.prefix.clone()).with_step(&config.step).with_scores_log(&config.step);
    let sampling = &config.sampling;
    if sampling.cache_entries > 0 {
        topology = topology.with_samples_log(&config.step, sampling.cache_retention);
        own = own.with_samples_log(&config.step, sampling.cache_retention);
    }
    if let Some(limit) = &sampling.rate_limit {
        topology = topology.with_limiter_log(&limit.limiter);
        own = own.with_limiter_log(&limit.limiter);
    }
    transport.declare_own(&topology, &own).await?;
    let models = models(&transport, &topology, &config).await?;
    tokio::spawn(airlock_telemetry::metrics::count_reconnects(transport.reconnects(), config.metrics.clone()));
    let queue = topology.step_queue(&config.step);
    let tasks = transport.consume(&queue, config.concurrency).await?;
    info!(
        %queue, provider = %config.provider.kind, model = %config.provider.model, endpoint = %models.scorer.endpoint(),
        concurrency = config.concurrency, "Monitor consuming."
    );
    let identity = Identity {
        monitor_id: config.monitor_id.clone(),
        provider: config.provider.kind.as_str(),
        model: config.provider.model.clone(),
    };
    let budgets = Budgets::new(config.metrics.clone());
    let budgets = scores::shared(transport.clone(), &topology, &config.step, &config.monitor_id, budgets).await?;
    let monitor = Arc::new(Monitor { config, models, identity, transport: transport.clone(), topology, budgets });

    let observe = |(), delivery: Delivery| {
        // One span per task, continuing the trace of the worker that sent it.
        let correlation = delivery.message.correlation_id.clone().unwrap_or_default();
        let span = debug_span!("airlock.monitor", step = %monitor.config.step, correlation_id = %correlation);
        propagation::adopt(&span, &delivery.message.headers);
        monitor.clone().observe(delivery).instrument(span)
    };
    Serve::new().consume((), tasks).run(observe, shutdown).await;
    transport.close().await;
    info!("Monitor stopped.");
    Ok(())
}

struct Monitor<T> {
    config: MonitorConfig,
    models: Models,
    identity: Identity,
    transport: T,
    topology: Topology,
    budgets: Arc<Budgets>,
}

impl<T: Transport> Monitor<T> {
    async fn observe(self: Arc<Self>, delivery: Delivery) {
        let metrics = self.config.metrics.clone();
        metrics.messages.get_or_create(&SourceLabels { source: "step".into() }).inc();
        metrics.in_flight.inc();
        self.handle(delivery).await;
        metrics.in_flight.dec();
    }

    async fn handle(self: Arc<Self>, delivery: Delivery) {
        let started = now_ms();
        let task = match v1::StepTask::decode(delivery.message.body.as_ref()) {
            Ok(task) => task,
            Err(e) => {
                return self.dead(delivery, DeadReason::bad_message(format!("not an airlock.v1.StepTask: {e}"))).await;
            }
        };
        let Some(request) = &task.request else {
            return self.dead(delivery, DeadReason::bad_message("the StepTask carries no request")).await;
        };
        let Some(kind) = request_parts(request).map(|parts| parts.kind) else {
            let reason = DeadReason::bad_message("the request has neither an approval nor a review body");
            return self.dead(delivery, reason).await;
        };
        if Deadline::from_wire(request.deadline_unix_ms).is_some_and(|deadline| deadline.has_passed(started)) {
            // The runner has failed closed already: nobody waits for this answer.
            debug!("Task past its request's deadline dropped.");
            self.config.metrics.expired.inc();
            return settle(delivery.ack().await);
        }

        let outcome = self.decide(&task, kind, started).await;
        match &outcome {
            Outcome::Scored { score, decision, .. } => {
                info!(step = %task.name, score = score.value, %decision, "Call scored.");
            }
            Outcome::Fallback { decision, code, why, .. } => {
                warn!(step = %task.name, %code, %why, %decision, "No score; answering the fallback.");
            }
            Outcome::TimedOut { decision, why, .. } => {
                warn!(step = %task.name, %why, %decision, "Deadline passed; answering on_timeout.");
            }
        }
        let answered = now_ms();
        let step = StepLabels { step: task.name.clone() };
        let seconds = Duration::from_millis(u64::try_from(answered - started).unwrap_or(0)).as_secs_f64();
        self.config.metrics.step_latency.get_or_create(&step).observe(seconds);
        if outcome.decision() == Decision::Escalate {
            self.config.metrics.escalations.get_or_create(&step).inc();
        }
        let call_id = request_parts(request).and_then(|parts| parts.call).map_or("", |call| call.id.as_str());
        let answer = answer::step_answer(&self.identity, &outcome, call_id, started, answered);
        let result = v1::StepResult { task: Some(task), answer: Some(answer), ..Default::default() };
        let destination = self.topology.results_route();
        let mut message = Message::new(result.encode_to_vec());
        message.correlation_id = delivery.message.correlation_id.clone();
        propagation::inject(&tracing::Span::current(), &mut message.headers);
        match self.transport.publish(&destination, message).await {
            Ok(()) => settle(delivery.ack().await),
            Err(e) => {
                warn!(error = %e, "Publishing the result failed; the task goes back to its queue.");
                settle(delivery.nack_requeue().await);
            }
        }
    }

    /// What to answer for `task`: a score through the thresholds, the fallback, or the
    /// task's `on_timeout`.
    async fn decide(&self, task: &v1::StepTask, kind: Kind, now: i64) -> Outcome {
        let on_timeout =
            decision_from_wire(task.on_timeout).filter(|d| kind.decisions().contains(d)).unwrap_or(kind.fail_closed());
        let deadline = Deadline::from_wire(task.deadline_unix_ms)
            .map(|deadline| Instant::now() + deadline.remaining(now).saturating_sub(ANSWER_MARGIN));
        if deadline.is_some_and(|d| d <= Instant::now()) {
            let why = "the deadline had passed when the monitor took the task".to_owned();
            return Outcome::TimedOut { decision: on_timeout, why, attempts: 0 };
        }
        let params = match StepParams::from_json(&task.name, kind, &task.params_json) {
            Ok(params) => params,
            Err(e) => {
                let decision = self.config.fallback_for(kind);
                return Outcome::Fallback {
                    decision,
                    code: FallbackCode::InvalidParams,
                    why: e.to_string(),
                    attempts: 0,
                };
            }
        };
        let fallback = params.fallback.unwrap_or_else(|| self.config.fallback_for(kind));
        let prompt = match self.config.template.render(task, self.config.limits) {
            Ok(prompt) => prompt,
            Err(e) => {
                return Outcome::Fallback { decision: fallback, code: FallbackCode::BadTask, why: e.0, attempts: 0 };
            }
        };
        // Redelivered and hedged tasks ask for the same draw, and take its answer.
        let epoch = task.request.as_ref().and_then(|r| r.key.as_ref()).map_or(0, |key| key.epoch);
        let draw = Draw { epoch: (!params.share_across_epochs).then_some(epoch), index: 0 };
        match self.config.retry.run(deadline, |timeout| self.models.scorer.ask(&prompt, draw, timeout)).await {
            Ok((score, attempts)) => {
                let (decision, basis, protocol) = match &params.protocol {
                    None => {
                        let (decision, basis) = self.rule(task, kind, &params.rule, score.value);
                        (decision, basis, None)
                    }
                    Some(protocol) => {
                        let context = protocol::run::Context {
                            task,
                            kind,
                            params: &params,
                            fallback,
                            on_timeout,
                            deadline,
                            draw,
                        };
                        let (decision, basis, acted) = self.protocol(&context, protocol, score.value).await;
                        (decision, basis, Some(Box::new(acted)))
                    }
                };
                Outcome::Scored { score, basis, decision, attempts, protocol }
            }
            Err(Exhausted::Failed { attempts, error }) => {
                Outcome::Fallback { decision: fallback, code: error.code(), why: error.to_string(), attempts }
            }
            Err(Exhausted::Deadline { attempts, last }) => {
                let why = match last {
                    Some(error) => format!("after {attempts} attempt(s); the last: {error}"),
                    None if attempts == 0 => "no time was left for an attempt".to_owned(),
                    None => format!("the model was still answering attempt {attempts}"),
                };
                Outcome::TimedOut { decision: on_timeout, why, attempts }
            }
        }
    }

    /// The decision for `score` under the step's rule: its thresholds or its audit budget.
    fn rule(&self, task: &v1::StepTask, kind: Kind, rule: &Rule, score: f64) -> (Decision, Basis) {
        match rule {
            Rule::Thresholds(thresholds) => (thresholds.decide(kind, score), Basis::Thresholds(thresholds.clone())),
            Rule::Budget(budget) => self.budgeted(task, kind, budget, score),
        }
    }

    /// The decision for `score` under the step's audit budget: ended outright above
    /// `terminate_above`/`reject_above`, else escalated if the budget passes it on, else
    /// approved (continued); counted in the budget of the task's run (or of the step).
    fn budgeted(&self, task: &v1::StepTask, kind: Kind, budget: &AuditBudget, score: f64) -> (Decision, Basis) {
        let request = task.request.as_ref();
        let origin_run = request.and_then(|r| r.origin.as_ref()).map(|o| o.run_id.as_str()).filter(|r| !r.is_empty());
        let run = origin_run.or(request.and_then(|r| r.key.as_ref()).map(|k| k.run_id.as_str())).unwrap_or_default();
        let scope = budget.scope_key(run);
        let (decision, state) = match budget.ends(score) {
            Some(end) => (end, self.budgets.ended(&task.name, scope, budget.budget, budget.mode, score)),
            None => {
                let (passed, state) = self.budgets.decide(&task.name, scope, budget.budget, budget.mode, score);
                let decision = if passed { Decision::Escalate } else { config::as_kind(Decision::Approve, kind) };
                (decision, state)
            }
        };
        let note = NoteBudget {
            audit_budget: budget.budget,
            mode: budget.mode.as_str().to_owned(),
            scope: scope.to_owned(),
            threshold: state.threshold,
            share: state.share,
            seen: state.seen,
            passed: state.passed,
            left: state.left,
            reject_above: budget.reject_above,
            terminate_above: budget.terminate_above,
        };
        (decision, Basis::Budget(note))
    }

    async fn dead(&self, delivery: Delivery, reason: DeadReason) {
        DeadLettered { reason }
            .emit(&self.transport, &self.topology, delivery, Some(self.config.metrics.as_ref()))
            .await;
    }
}

/// The models a monitor asks.
struct Models {
    /// Scores calls.
    scorer: Provider,
    /// Edits and proposes calls.
    trusted: Provider,
    /// Draws samples again (the model's name comes from the request unless configured).
    untrusted: Provider,
}

/// The models of `config`, their calls going through the step's cache of answers and the
/// fleet's rate limiter when they are configured, joined as a process of its own (two
/// processes may share a monitor id, never this).
async fn models<T: Transport>(
    transport: &T,
    topology: &Topology,
    config: &MonitorConfig,
) -> Result<Models, MonitorError> {
    let process = format!("{}/{}", config.monitor_id, uuid::Uuid::now_v7());
    let sampling = &config.sampling;
    let cache = match sampling.cache_entries {
        0 => None,
        entries => {
            let cache = Cache::new(entries, config.metrics.clone());
            let log = topology.samples_log(&config.step);
            Some(sampling::cache::shared(transport.clone(), log, &process, cache).await?)
        }
    };
    let limiter = match &sampling.rate_limit {
        None => None,
        Some(limit) => {
            let limiter = Limiter::new(limit.per_minute, &process, config.metrics.clone());
            let log = topology.limiter_log(&limit.limiter);
            Some(sampling::limiter::shared(transport.clone(), log, &process, limiter).await?)
        }
    };
    let shared = |provider: &ProviderConfig| -> Result<Provider, MonitorError> {
        let mut provider = Provider::new(provider.clone())?;
        if let Some(cache) = &cache {
            provider = provider.with_cache(cache.clone());
        }
        if let Some(limiter) = &limiter {
            provider = provider.with_limiter(limiter.clone());
        }
        Ok(provider)
    };
    let scorer = shared(&config.provider)?;
    let trusted = config.trusted.as_ref().map_or_else(|| Ok(scorer.clone()), &shared)?;
    let untrusted = config.untrusted.as_ref().map_or_else(|| Ok(scorer.clone()), &shared)?;
    Ok(Models { scorer, trusted, untrusted })
}

fn settle(result: Result<(), TransportError>) {
    if let Err(e) = result {
        // The task is delivered again and answered again; the runner keeps one decision per call.
        warn!(error = %e, "Acknowledgement failed.");
    }
}

/// The decision a fallback flag names, for command lines: `escalate`, `reject`,
/// `terminate`, `approve` or `continue`.
pub fn parse_fallback(text: &str) -> Result<Decision, String> {
    match text.parse::<Decision>()? {
        Decision::Modify => Err("the fallback cannot be modify".into()),
        decision => Ok(decision),
    }
}
