//! What a worker does with one message: pure logic that turns a request or a step result
//! into the messages to publish, with no I/O of its own.
//!
//! A request runs its chain until it is decided or reaches an external step. A decision goes
//! to the runner's reply queue, with a copy the broker routes to whoever records decisions; an external step gets a
//! `StepTask` (or a `HumanTask`) carrying the whole request and its chain state, and its
//! `StepResult` brings both back, so any worker continues any chain. The runner is then told
//! with a `Progress` that a step holds its call, so that it stops publishing it again.
//!
//! Nothing is believed on the broker's word ([`crate::trust`]): replies are proved to the
//! runner, tasks are sealed, and an answer counts only for the external step its sealed task
//! names, from who may give it.

use std::collections::BTreeMap;

use airlock_contract::v1;
use airlock_policy::chain::PolicyStep;
use airlock_policy::chain::{ChainState, Input, Outcome, Policy, TrailEntry, Verdict};
use airlock_policy::steps::{ExternalStep, Route, Step};
use airlock_policy::{Decision, Kind};
use airlock_transport::{Destination, Message, Topology};
use prost::Message as _;

use crate::policies::PolicyStore;
use crate::trust::Trust;
use airlock_records::code::{DeadReason, ErrorCode};
use airlock_records::convert::{
    answer_from_wire, call_from_wire, call_to_wire, decision_to_wire, entry_to_wire, kind_to_wire, metadata_to_wire,
    request_parts, trail_from_wire,
};
use airlock_records::time::Deadline;

/// A message to publish, and what it needs of its queue first (step and human queues are
/// discovered from policies at run time).
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    /// Where it goes.
    pub destination: Destination,
    /// What it says.
    pub message: Message,
    /// What its queue needs first.
    pub queue: Queue,
}

/// What a message needs of its queue before it is published.
#[derive(Debug, Clone, PartialEq)]
pub enum Queue {
    /// Nothing: the fleet's core queues and a runner's reply queue stand.
    Standing,
    /// This fragment declared first, once per worker: the queue of a step the fleet knows,
    /// one of a policy the worker holds or a step it is configured with (`--step-user`).
    Declare(Topology),
    /// The queue of a step only a caller's inline policy names. No caller makes the fleet
    /// declare a queue, so it must stand already, declared by whoever serves the step; if no
    /// queue takes the message, the delivery ends as this refusal instead.
    Existing(Box<Handled>),
}

/// The external step a chain waits for, and where the chain goes on after it.
struct Pending<'p> {
    /// The step's index in the policy.
    index: usize,
    /// Where the chain continues once the step answers.
    next_step: usize,
    step: &'p PolicyStep,
    external: &'p ExternalStep,
    /// The digest of the request as its runner sent it, which the task carries on.
    request_digest: [u8; 32],
    /// The broker user that published the request, which the task carries on.
    requested_by: String,
}

/// The outcome of handling one delivery.
#[derive(Debug, Clone, PartialEq)]
pub enum Handled {
    /// Publish these (all confirmed), then acknowledge.
    Publish(Vec<Outgoing>, Report),
    /// The request's deadline passed: the runner has failed closed already; acknowledge.
    Expired,
    /// The message can never be handled: dead-letter it with `reason`, after sending
    /// `reply` (an `Error` to the runner) when the runner could be identified.
    Dead {
        /// Why, for the dead queue's header and the metrics.
        reason: DeadReason,
        /// The runner's `Error` reply.
        reply: Option<Box<Outgoing>>,
    },
}

/// What happened to a chain while handling one message, for metrics and logs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Approval or review.
    pub kind: Option<Kind>,
    /// The chain's decision, when it decided.
    pub decided: Option<Decided>,
    /// The external step the chain now waits for.
    pub forwarded: Option<String>,
    /// Steps that escalated while handling this message.
    pub escalated: Vec<String>,
    /// The external step whose answer came in.
    pub answered: Option<Answered>,
}

/// A chain's decision, as a [`Report`] counts it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// The decision.
    pub decision: Decision,
    /// The step that decided: its name, `policy`, or empty when nothing matched a review.
    pub approver: String,
    /// Milliseconds since the runner asked.
    pub latency_ms: i64,
}

/// An external step's answer, as a [`Report`] counts it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    /// The step's name.
    pub step: String,
    /// Milliseconds from the task's start to its answer.
    pub took_ms: i64,
    /// Whether a person answered (a human step).
    pub human: bool,
}

/// An external step's answer, from a `StepResult` whose task's seal held.
struct Incoming {
    /// The sealed task's step index.
    step: usize,
    /// The sealed task's step name.
    name: String,
    /// The answer.
    answer: v1::StepAnswer,
    /// The whole result, whose signature a human answer needs.
    result: v1::StepResult,
}

/// Turns deliveries into messages, for one fleet prefix.
#[derive(Debug)]
pub struct Handler {
    topology: Topology,
    policies: PolicyStore,
    worker_id: String,
    trust: Trust,
}

impl Handler {
    /// A handler for the fleet of `topology`, resolving policies with `policies`, proving and
    /// checking with `trust`; `worker_id` is recorded as `decided_by` of what built-in steps
    /// decide.
    pub fn new(topology: Topology, policies: PolicyStore, worker_id: impl Into<String>, trust: Trust) -> Self {
        Handler { topology, policies, worker_id: worker_id.into(), trust }
    }

    /// Handles a `Request` from the requests queue.
    pub fn on_request(&self, message: &Message, now_ms: i64) -> Handled {
        let request = match v1::Request::decode(message.body.as_ref()) {
            Ok(request) => request,
            Err(e) => {
                return self.dead(message, None, ErrorCode::BadMessage, format!("not an airlock.v1.Request: {e}"));
            }
        };
        let digest = airlock_integrity::digest(&message.body);
        let fail = |code, text: String| self.dead(message, Some((&request, &digest)), code, text);
        if request.chain.is_some() {
            return fail(
                ErrorCode::Refused,
                "a runner's request carries no chain state; only sealed step tasks do".into(),
            );
        }
        if let Err(e) = self.trust.check_runner_key(&request.runner_key) {
            return self.dead(message, None, ErrorCode::BadMessage, e.to_string());
        }
        if let Some(name) = name_with_nul(&request) {
            return fail(
                ErrorCode::BadMessage,
                format!("the request's {name} holds a NUL character, which a reviewer's store cannot keep"),
            );
        }
        let trace = trace_headers(&message.headers);
        self.advance(message, request, digest, None, &trace, now_ms)
    }

    /// Handles a `StepResult` from the results queue.
    pub fn on_result(&self, message: &Message, now_ms: i64) -> Handled {
        let result = match v1::StepResult::decode(message.body.as_ref()) {
            Ok(result) => result,
            Err(e) => {
                return Self::refuse(ErrorCode::BadMessage, format!("not an airlock.v1.StepResult: {e}"));
            }
        };
        let (Some(task), Some(answer)) = (result.task.as_ref(), result.answer.clone()) else {
            return Self::refuse(ErrorCode::BadMessage, "a StepResult needs its task and an answer");
        };
        // Nothing of a result is read before its task's seal holds, and an answer refused is
        // not answered to the runner: the chain still waits for a true answer, or its deadline.
        if let Err(e) = self.trust.check_seal(task) {
            return Self::refuse(ErrorCode::Refused, e.to_string());
        }
        let Some(request) = task.request.clone() else {
            return Self::refuse(ErrorCode::BadMessage, "the StepResult's task carries no request");
        };
        let Ok(digest) = <[u8; 32]>::try_from(task.request_digest.as_slice()) else {
            return Self::refuse(ErrorCode::BadMessage, "the StepResult's task has no request digest");
        };
        if let Some(step) = answer.step.filter(|step| *step != task.step) {
            let text = format!("the answer is for step {step}, its task for step {}", task.step);
            return Self::refuse(ErrorCode::Refused, text);
        }
        let mut trace = trace_headers(&message.headers);
        if trace.is_empty() {
            trace = task.trace_context.clone();
        }
        let incoming = Incoming { step: task.step as usize, name: task.name.clone(), answer, result };
        self.advance(message, request, digest, Some(incoming), &trace, now_ms)
    }

    /// What becomes of a delivery whose handling failed (panicked) with `text`: a request is
    /// dead-lettered with the runner told, a step result dead-lettered.
    pub fn failed(&self, message: &Message, is_request: bool, text: impl Into<String>) -> Handled {
        let text = format!("the worker failed handling this message: {}", text.into());
        match v1::Request::decode(message.body.as_ref()) {
            Ok(request) if is_request => {
                let digest = airlock_integrity::digest(&message.body);
                self.dead(message, Some((&request, &digest)), ErrorCode::BadMessage, text)
            }
            _ => Self::refuse(ErrorCode::BadMessage, text),
        }
    }

    /// Refuses an answer for a step that is not the external step its task names, or that
    /// does not come from who must give it.
    fn check_answer(&self, message: &Message, policy: &Policy, incoming: &Incoming) -> Result<(), String> {
        let step = policy.steps().get(incoming.step);
        let Some(Step::External(external)) = step.map(|step| &step.step) else {
            return Err(format!("step {} takes no answers from outside the fleet", incoming.step));
        };
        let name = step.map(|step| step.name.to_string()).unwrap_or_default();
        if name != incoming.name {
            return Err(format!("step {} is '{name}', not '{}'", incoming.step, incoming.name));
        }
        self.trust.check_publisher(&name, message.user_id.as_deref()).map_err(|e| e.to_string())?;
        if matches!(external, ExternalStep::Human(_)) {
            self.trust.check_reviewer(&incoming.result).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Runs a request's chain from where it stands, with an external answer if one came.
    fn advance(
        &self,
        message: &Message,
        request: v1::Request,
        digest: [u8; 32],
        incoming: Option<Incoming>,
        trace: &BTreeMap<String, String>,
        now_ms: i64,
    ) -> Handled {
        let fail = |code: ErrorCode, text: String| self.dead(message, Some((&request, &digest)), code, text);
        let Some(parts) = request_parts(&request) else {
            return fail(ErrorCode::BadMessage, "the request has neither an approval nor a review body".into());
        };
        let kind = parts.kind;
        if Deadline::from_wire(request.deadline_unix_ms).is_some_and(|deadline| deadline.has_passed(now_ms)) {
            return Handled::Expired;
        }
        let policy = match self.policies.resolve(request.policy.as_ref(), kind) {
            Ok(policy) => policy,
            Err(e) => return fail(e.code(), e.to_string()),
        };
        if let Some(incoming) = &incoming
            && let Err(text) = self.check_answer(message, &policy, incoming)
        {
            return Self::refuse(ErrorCode::Refused, text);
        }
        let Some(call) = parts.call else { return fail(ErrorCode::BadMessage, "the request has no call".into()) };
        let call = match call_from_wire(call) {
            Ok(call) => call,
            Err(e) => return fail(ErrorCode::BadMessage, e.to_string()),
        };
        let chain = request.chain.clone().unwrap_or_default();
        let trail = match trail_from_wire(&chain.trail) {
            Ok(trail) => trail,
            Err(e) => return fail(ErrorCode::BadMessage, format!("chain trail: {e}")),
        };
        let state = ChainState { next_step: chain.next_step as usize, trail };
        let input = Input { call: &call, message: parts.message, output: parts.output };
        let answer_step = incoming.as_ref().map(|incoming| incoming.step);
        // A runner's own request names its publisher as the broker checked it; a result
        // brings back the name its sealed task carries, since its publisher is the step's.
        let requested_by = match &incoming {
            None => message.user_id.clone().unwrap_or_default(),
            Some(incoming) => incoming.result.task.as_ref().map(|task| task.requested_by.clone()).unwrap_or_default(),
        };
        let (verdict, external) = match incoming {
            None => (policy.evaluate(&input, state), None),
            Some(Incoming { step, answer: wire_answer, .. }) => match answer_from_wire(&wire_answer) {
                Ok(answer) => {
                    let published_by = message.user_id.clone().unwrap_or_default();
                    (policy.resume(&input, state, step, answer), Some(v1::StepAnswer { published_by, ..wire_answer }))
                }
                Err(e) => return fail(ErrorCode::InvalidAnswer, e.to_string()),
            },
        };
        let wire_trail = |trail: &[TrailEntry]| self.wire_trail(&chain.trail, external.as_ref(), trail, now_ms);
        let report = |trail: &[TrailEntry]| Report {
            kind: Some(kind),
            escalated: trail[chain.trail.len().min(trail.len())..]
                .iter()
                .filter(|entry| entry.answer.decision == Decision::Escalate)
                .map(|entry| entry.approver.to_string())
                .collect(),
            answered: external.as_ref().and_then(|answer| {
                let step = policy.steps().get(answer_step?)?;
                let took = answer.answered_at_unix_ms.saturating_sub(answer.started_at_unix_ms);
                let human = matches!(step.step, Step::External(ExternalStep::Human(_)));
                Some(Answered { step: step.name.to_string(), took_ms: took, human })
            }),
            ..Report::default()
        };
        match verdict {
            Verdict::Decided(outcome) => {
                let mut report = report(&outcome.trail);
                let approver = outcome.approver.as_deref().unwrap_or_default().to_owned();
                let latency_ms = now_ms - request.requested_at_unix_ms;
                report.decided = Some(Decided { decision: outcome.decision, approver, latency_ms });
                let trail = wire_trail(&outcome.trail);
                let decision = self.decision(&request, kind, &policy, outcome, trail, now_ms);
                Handled::Publish(vec![self.publish_decision(&request, &digest, kind, decision)], report)
            }
            Verdict::Pending { step, state } => {
                let policy_step = &policy.steps()[step];
                let Step::External(external) = &policy_step.step else {
                    // The engine suspends a chain only at an external step.
                    return fail(ErrorCode::StepFailed, format!("the chain waits for step {step}, which is built in"));
                };
                let mut report = report(&state.trail);
                report.forwarded = Some(policy_step.name.to_string());
                let trail = wire_trail(&state.trail);
                let pending = Pending {
                    index: step,
                    next_step: state.next_step,
                    step: policy_step,
                    external,
                    request_digest: digest,
                    requested_by,
                };
                let pool = match external.route() {
                    Route::Human { pool, .. } => pool,
                    Route::Step { .. } => String::new(),
                };
                let progress = self.progress(&request, &digest, kind, step, pool);
                let mut task = self.step_task(&request, &policy, pending, trail, trace, now_ms);
                if !self.declares(&request, policy_step) {
                    let text = format!(
                        "the inline policy's step {step} goes to '{}', which nothing of this fleet serves",
                        task.destination.parts().1
                    );
                    task.queue = Queue::Existing(Box::new(fail(ErrorCode::InvalidPolicy, text)));
                }
                Handled::Publish(std::iter::once(task).chain(progress).collect(), report)
            }
            Verdict::Failed(error) => fail(ErrorCode::StepFailed, error.to_string()),
        }
    }

    /// Whether the worker declares the queue of `step`: a step of a policy it holds, or one it
    /// is configured with, but never one only a caller's inline policy names.
    fn declares(&self, request: &v1::Request, step: &PolicyStep) -> bool {
        let named =
            matches!(request.policy.as_ref().and_then(|p| p.source.as_ref()), Some(v1::policy::Source::Name(_)));
        named || matches!(&step.step, Step::External(ExternalStep::Named(_)) if self.trust.configures(&step.name))
    }

    /// The wire trail: entries already recorded stay as they were (with their deciders and
    /// times), the external answer keeps its decider, new built-in answers are this worker's.
    fn wire_trail(
        &self,
        recorded: &[v1::StepAnswer],
        external: Option<&v1::StepAnswer>,
        trail: &[TrailEntry],
        now_ms: i64,
    ) -> Vec<v1::StepAnswer> {
        trail
            .iter()
            .enumerate()
            .map(|(index, entry)| match (recorded.get(index), external) {
                (Some(kept), _) => kept.clone(),
                (None, Some(answer)) if index == recorded.len() => v1::StepAnswer {
                    published_by: answer.published_by.clone(),
                    ..entry_to_wire(entry, &answer.decided_by, answer.started_at_unix_ms, answer.answered_at_unix_ms)
                },
                _ => entry_to_wire(entry, &self.worker_id, now_ms, now_ms),
            })
            .collect()
    }

    fn decision(
        &self,
        request: &v1::Request,
        kind: Kind,
        policy: &Policy,
        outcome: Outcome,
        trail: Vec<v1::StepAnswer>,
        now_ms: i64,
    ) -> v1::Decision {
        let decided_by = match outcome.step {
            Some(step) => trail
                .iter()
                .rev()
                .find(|entry| entry.step == Some(step as u32))
                .map(|entry| entry.decided_by.clone())
                .unwrap_or_else(|| self.worker_id.clone()),
            None => self.worker_id.clone(),
        };
        v1::Decision {
            decision_id: decision_id(request, kind),
            key: request.key.clone(),
            kind: kind_to_wire(kind).into(),
            decision: decision_to_wire(outcome.decision).into(),
            modified: outcome.modified.as_ref().map(call_to_wire),
            explanation: outcome.explanation.map(|e| e.into_owned()),
            metadata_json: metadata_to_wire(outcome.metadata.as_ref()),
            approver: outcome.approver.map(|a| a.to_string()).unwrap_or_default(),
            step: outcome.step.map(|s| s as u32),
            trail,
            policy_digest: policy.digest().to_owned(),
            decided_by,
            requested_at_unix_ms: request.requested_at_unix_ms,
            decided_at_unix_ms: now_ms,
            origin: request.origin.clone(),
        }
    }

    /// The decision as one message: the proved reply to the runner's queue, copied by the
    /// broker under `<kind>.<decision>` to whoever records decisions.
    fn publish_decision(
        &self,
        request: &v1::Request,
        digest: &[u8; 32],
        kind: Kind,
        decision: v1::Decision,
    ) -> Outgoing {
        let key = Topology::decision_key(kind, decision_name(decision.decision));
        let destination = match self.topology.reply_route(&request.reply_to) {
            Some(reply) => reply.with_copy(key),
            None => Destination::exchange(self.topology.route_exchange(), key),
        };
        let message = self.proved_reply(request, digest, kind, v1::reply_body::Body::Decision(decision));
        Outgoing { destination, message, queue: Queue::Standing }
    }

    /// A reply to `request`'s runner saying `body`, proved for the request's exact bytes.
    fn proved_reply(
        &self,
        request: &v1::Request,
        digest: &[u8; 32],
        kind: Kind,
        body: v1::reply_body::Body,
    ) -> Message {
        let body = v1::ReplyBody { body: Some(body) }.encode_to_vec();
        let reply = self.trust.reply(body, &request.runner_key, digest);
        Message::new(reply.encode_to_vec()).with_correlation_id(correlation(request, kind))
    }

    /// The runner's word that a step holds its call (and so that it need not publish it
    /// again): a `Progress` to its reply queue, proved like a decision, naming no task.
    fn progress(
        &self,
        request: &v1::Request,
        digest: &[u8; 32],
        kind: Kind,
        step: usize,
        pool: String,
    ) -> Option<Outgoing> {
        let destination = self.topology.reply_route(&request.reply_to)?;
        let progress = v1::Progress { pool, task_id: String::new(), step: step as u32 };
        let message = self.proved_reply(request, digest, kind, v1::reply_body::Body::Progress(progress));
        Some(Outgoing { destination, message, queue: Queue::Standing })
    }

    /// The task of the external step the chain waits for; its request names the digest of
    /// the policy resolved, so that whoever answers it knows which version of the policy asks.
    fn step_task(
        &self,
        request: &v1::Request,
        policy: &Policy,
        pending: Pending<'_>,
        trail: Vec<v1::StepAnswer>,
        trace_context: &BTreeMap<String, String>,
        now_ms: i64,
    ) -> Outgoing {
        let Pending { index, next_step, step: policy_step, external, request_digest, requested_by } = pending;
        let kind = policy.kind();
        let mut forwarded = request.clone();
        forwarded.chain = Some(v1::ChainState { next_step: next_step as u32, trail });
        if let Some(resolved) = forwarded.policy.as_mut() {
            resolved.digest = policy.digest().to_owned();
        }
        let timeout = external.timeout();
        let step_deadline = timeout.after.map(|after| Deadline::after(now_ms, after));
        let deadline = Deadline::earliest(step_deadline, Deadline::from_wire(request.deadline_unix_ms));
        let mut task = v1::StepTask {
            request: Some(forwarded),
            step: index as u32,
            name: policy_step.name.to_string(),
            params_json: serde_json::Value::Object(policy_step.params.clone()).to_string(),
            deadline_unix_ms: Deadline::to_wire(deadline),
            on_timeout: decision_to_wire(timeout.on_timeout).into(),
            trace_context: trace_context.clone(),
            request_digest: request_digest.to_vec(),
            seal: Vec::new(),
            requested_by,
        };
        self.trust.seal(&mut task);
        let message = |body: Vec<u8>| {
            Message::new(body)
                .with_correlation_id(correlation(request, kind))
                .with_reply_to(self.topology.results_queue())
        };
        match external.route() {
            Route::Human { pool, choices, approvals } => {
                let task = v1::HumanTask {
                    task: Some(task),
                    choices: choices.iter().map(|c| decision_to_wire(*c).into()).collect(),
                    pool: pool.clone(),
                    approvals,
                };
                Outgoing {
                    destination: self.topology.human_route(&pool),
                    message: message(task.encode_to_vec()),
                    queue: Queue::Declare(Topology::empty(self.topology.prefix()).with_human_pool(&pool)),
                }
            }
            Route::Step { name } => Outgoing {
                destination: self.topology.step_route(&name),
                message: message(task.encode_to_vec()),
                queue: Queue::Declare(Topology::empty(self.topology.prefix()).with_step(&name)),
            },
        }
    }

    /// Dead-letters a step result with no reply: its sender is a step, which reads none, and
    /// where a reply would go is the sender's to say.
    fn refuse(code: ErrorCode, text: impl Into<String>) -> Handled {
        Handled::Dead { reason: DeadReason::new(code, text), reply: None }
    }

    /// Dead-letters `message`; with the request it carried (and that request's digest), the
    /// runner gets a proved `Error`, without it the reply is addressed by the message's
    /// properties and unproved.
    fn dead(
        &self,
        message: &Message,
        request: Option<(&v1::Request, &[u8; 32])>,
        code: ErrorCode,
        text: impl Into<String>,
    ) -> Handled {
        let reason = DeadReason::new(code, text);
        let reply_to =
            request.map(|(r, _)| r.reply_to.as_str()).filter(|q| !q.is_empty()).or(message.reply_to.as_deref());
        let correlation = message.correlation_id.clone();
        let reply = reply_to.and_then(|queue| self.topology.reply_route(queue)).map(|destination| {
            let error = v1::Error {
                key: request.and_then(|(r, _)| r.key.clone()),
                code: reason.code.as_str().to_owned(),
                message: reason.text.clone(),
            };
            let body = v1::ReplyBody { body: Some(v1::reply_body::Body::Error(error)) }.encode_to_vec();
            let reply = match request {
                Some((request, digest)) => self.trust.reply(body, &request.runner_key, digest),
                None => v1::Reply { body, ..Default::default() },
            };
            let mut message = Message::new(reply.encode_to_vec());
            message.correlation_id = correlation;
            Box::new(Outgoing { destination, message, queue: Queue::Standing })
        });
        Handled::Dead { reason, reply }
    }
}

/// The first name of `request` that stores keep as text (the call key's parts, the call's
/// function) holding a NUL character, which PostgreSQL's text refuses: refused where it
/// enters, rather than by a reviewer's store once a person is to be asked.
fn name_with_nul(request: &v1::Request) -> Option<&'static str> {
    let key = request.key.clone().unwrap_or_default();
    let function = request_parts(request).and_then(|parts| parts.call).map_or("", |call| call.function.as_str());
    [
        ("run id", key.run_id.as_str()),
        ("sample id", &key.sample_id),
        ("tool call id", &key.tool_call_id),
        ("function", function),
    ]
    .into_iter()
    .find_map(|(name, text)| text.contains('\0').then_some(name))
}

/// The W3C trace context among a message's headers.
fn trace_headers(headers: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    headers
        .iter()
        .filter(|(key, _)| TRACE_HEADERS.contains(&key.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The headers of W3C trace context.
const TRACE_HEADERS: [&str; 2] = ["traceparent", "tracestate"];

/// The trace a delivery belongs to: its headers' context, or for a step result whose sender
/// kept no headers, the context its task carried.
pub fn incoming_trace(message: &Message, is_result: bool) -> BTreeMap<String, String> {
    let trace = trace_headers(&message.headers);
    if !trace.is_empty() || !is_result {
        return trace;
    }
    v1::StepResult::decode(message.body.as_ref())
        .ok()
        .and_then(|result| result.task)
        .map(|task| task.trace_context)
        .unwrap_or_default()
}

fn correlation(request: &v1::Request, kind: Kind) -> String {
    request.key.clone().unwrap_or_default().correlation_id(kind_to_wire(kind))
}

fn decision_name(decision: i32) -> &'static str {
    airlock_records::convert::decision_from_wire(decision).map_or("unspecified", Decision::as_str)
}

/// A decision's id: the same for every decision of one request (its kind, its call key and
/// when its runner asked), so that a request decided twice (delivered again after a worker
/// died before acknowledging it, or published again by a runner whose answer was slow to
/// come) is one record in the audit log, whichever copy comes first.
fn decision_id(request: &v1::Request, kind: Kind) -> String {
    let mut named = correlation(request, kind).into_bytes();
    named.extend_from_slice(&request.requested_at_unix_ms.to_be_bytes());
    let digest = airlock_integrity::digest(&named);
    let bytes: [u8; 16] = digest[..16].try_into().expect("16 of SHA-256's 32 bytes");
    uuid::Builder::from_custom_bytes(bytes).into_uuid().to_string()
}

#[cfg(test)]
mod tests;
