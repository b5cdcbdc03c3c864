//! What a worker does with one message: pure logic that turns a request or a step result
//! into the messages to publish, with no I/O of its own.
//!
//! A request runs its chain until it is decided or reaches an external step. A decision goes
//! to the runner's reply queue, with a copy the broker routes to whoever records decisions; an external step gets a
//! `StepTask` (or a `HumanTask`) carrying the whole request and its chain state, and its
//! `StepResult` brings both back, so any worker continues any chain. The runner is then told
//! with a `Progress` that a step holds its call, so that it stops publishing it again.
//!
//! A delivery is read once, where it comes in, into an [`Inbound`]: its body decoded for its
//! queue and the trace it belongs to, which the worker's span adopts before
//! [`Handler::handle`] turns it into what to publish.
//!
//! Nothing is believed on the broker's word ([`crate::trust`]): replies are proved to the
//! runner, tasks are sealed, and an answer counts only for the external step its sealed task
//! names, from who may give it.
//!
//! A human step with `reroute_after` moves its task on: when nobody in its pool answered in
//! time, the reviewer service answers `escalate` with [`ReroutedMetadata`] naming the pool it
//! leaves and the next one, and the worker sends the task there, its deadline unchanged, with
//! that answer in the trail; the chain stays at the step.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use airlock_contract::v1;
use airlock_control::{APPROVER as CONTROL, ControlView, Controlled};
use airlock_policy::chain::{ChainState, Input, Outcome, PendingStep, Policy, TrailEntry, Verdict};
use airlock_policy::control::Response;
use airlock_policy::steps::human::Human;
use airlock_policy::steps::{ExternalStep, Route};
use airlock_policy::{Answer, Call, Decision, Kind};
use airlock_transport::{Destination, Message, Topology};
use prost::Message as _;
use serde_json::{Map, Value};

use crate::policies::PolicyStore;
use crate::trust::Trust;
use airlock_contract::v1::control_event::Event;
use airlock_records::code::{DeadReason, ErrorCode};
use airlock_records::convert::{
    RequestParts, answer_from_wire, call_from_wire, call_metadata, call_to_wire, counts_as_denial, decision_from_wire,
    decision_to_wire, entry_to_wire, first_with_nul, kind_to_wire, metadata_to_wire, request_parts, trail_from_wire,
};
use airlock_records::review::{Rerouted, ReroutedMetadata};
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
    /// An entry of the control log, appended (and confirmed) before anything else is
    /// published, so that every worker can read it before the runner reads the decision it
    /// records.
    Log,
    /// This fragment declared first, once per worker: the queue of a step the fleet knows,
    /// one of a policy the worker holds or a step it is configured with (`--step-user`).
    Declare(Topology),
    /// The queue of a step only a caller's inline policy names. No caller makes the fleet
    /// declare a queue, so it must stand already, declared by whoever serves the step; if no
    /// queue takes the message, the delivery ends as this refusal instead.
    Existing(Box<Handled>),
}

/// A delivery read once, where it comes in: the message, its body decoded as what its queue
/// carries, and the trace it belongs to. What follows reads this, never the bytes again.
#[derive(Debug)]
pub struct Inbound<'m> {
    message: &'m Message,
    body: Decoded,
    trace: BTreeMap<String, String>,
}

/// What an [`Inbound`]'s body decoded to.
// Read once per delivery and kept where it was read: boxing either would cost an allocation
// per message.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Decoded {
    /// From the requests queue: a runner's request, with the digest of its exact bytes.
    Request(Result<(v1::Request, [u8; 32]), prost::DecodeError>),
    /// From the results queue: a step's result.
    Result(Result<v1::StepResult, prost::DecodeError>),
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
    /// The response of the fleet's control the call was handled under, if any.
    pub controlled: Option<&'static str>,
}

/// A chain's decision, as a [`Report`] counts it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// The decision.
    pub decision: Decision,
    /// The step that decided: its name, `policy`, or empty when nothing matched a review.
    pub approver: String,
    /// The decision came from a deadline: nobody answered.
    pub timed_out: bool,
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
struct Incoming<'m> {
    /// The sealed task.
    task: &'m v1::StepTask,
    /// The answer.
    answer: &'m v1::StepAnswer,
    /// The whole result, whose signature a human answer needs.
    result: &'m v1::StepResult,
}

/// A request read as far as its policy: the delivery it came in, its body's parts and the
/// policy that judges it, under the fleet's control.
struct Resolved<'a> {
    inbound: &'a Inbound<'a>,
    request: &'a v1::Request,
    /// The digest of the request as its runner sent it, which a task carries on.
    digest: &'a [u8; 32],
    parts: RequestParts<'a>,
    /// The policy the chain runs under now: the request's own, or the one control puts in
    /// its place.
    policy: Arc<Policy>,
    /// The request's own policy, whose `breaker:` and `incident:` say what control does.
    own: Arc<Policy>,
    /// The policy an external answer that came in was asked under.
    asked_under: Arc<Policy>,
    /// What control puts in place of the request's own policy, as tasks carry it.
    governing: Option<v1::Policy>,
    /// What the fleet's control does with the call, if anything.
    controlled: Option<Controlled>,
    /// Whether an answer that came in ends the chain it was asked in, which starts again
    /// under `policy` (control changed since it was asked), or ends (terminate).
    restart: bool,
}

/// What one message asks of its chain, read and checked: the call, where the chain stands,
/// and the external answer that moves it on, if one came.
struct Asked<'a> {
    resolved: &'a Resolved<'a>,
    call: Call,
    /// The tool's metadata the runner sent (an MCP server's tool annotations).
    metadata: Option<Map<String, Value>>,
    /// The trail as the wire carries it: its entries stay as they were recorded (with an
    /// answer that came in, when its chain starts again).
    recorded: Cow<'a, [v1::StepAnswer]>,
    state: ChainState,
    answer: Option<StepAnswered<'a>>,
    /// The broker user that published the request, which a next task carries on.
    requested_by: &'a str,
}

/// An external step's answer, checked: the step it answers, and the answer as the engine
/// takes it and as the trail records it (with who published it).
struct StepAnswered<'a> {
    step: PendingStep<'a>,
    answer: Answer,
    wire: v1::StepAnswer,
    /// The answer moves a human task to another pool instead of answering its step.
    moved: Option<Moved>,
}

/// A human task moving on: nobody in `from` answered within its step's `reroute_after`.
#[derive(Debug)]
struct Moved {
    /// The pool it leaves.
    from: String,
    /// The pool it goes to.
    to: String,
    /// The task's deadline (unix ms, 0 for none), which the move keeps.
    deadline: i64,
}

/// Turns deliveries into messages, for one fleet prefix.
#[derive(Debug)]
pub struct Handler {
    topology: Topology,
    policies: PolicyStore,
    worker_id: String,
    trust: Trust,
    control: ControlView,
}

// === impl Handler ===

impl Handler {
    /// A handler for the fleet of `topology`, resolving policies with `policies`, proving and
    /// checking with `trust`; `worker_id` is recorded as `decided_by` of what built-in steps
    /// decide.
    pub fn new(topology: Topology, policies: PolicyStore, worker_id: impl Into<String>, trust: Trust) -> Self {
        Handler { topology, policies, worker_id: worker_id.into(), trust, control: ControlView::default() }
    }

    /// Decides under the fleet's control state `control` (none applies without it).
    #[must_use]
    pub fn with_control(self, control: ControlView) -> Self {
        Handler { control, ..self }
    }

    /// Handles one delivery, read with [`Inbound::request`] or [`Inbound::result`].
    pub fn handle(&self, inbound: &Inbound<'_>, now_ms: i64) -> Handled {
        match &inbound.body {
            Decoded::Request(Ok((request, digest))) => self.on_request(inbound, request, digest, now_ms),
            Decoded::Request(Err(e)) => {
                self.dead(inbound.message, None, ErrorCode::BadMessage, format!("not an airlock.v1.Request: {e}"))
            }
            Decoded::Result(Ok(result)) => self.on_result(inbound, result, now_ms),
            Decoded::Result(Err(e)) => {
                Self::refuse(ErrorCode::BadMessage, format!("not an airlock.v1.StepResult: {e}"))
            }
        }
    }

    /// What becomes of a delivery whose handling failed (panicked) with `text`: a request is
    /// dead-lettered with the runner told, a step result dead-lettered.
    pub fn failed(&self, inbound: &Inbound<'_>, text: impl Into<String>) -> Handled {
        let text = format!("the worker failed handling this message: {}", text.into());
        match &inbound.body {
            Decoded::Request(Ok((request, digest))) => {
                self.dead(inbound.message, Some((request, digest)), ErrorCode::BadMessage, text)
            }
            _ => Self::refuse(ErrorCode::BadMessage, text),
        }
    }

    /// Handles a runner's `Request`.
    fn on_request(&self, inbound: &Inbound<'_>, request: &v1::Request, digest: &[u8; 32], now_ms: i64) -> Handled {
        let message = inbound.message;
        let fail = |code, text: String| self.dead(message, Some((request, digest)), code, text);
        if request.chain.is_some() {
            return fail(
                ErrorCode::Refused,
                "a runner's request carries no chain state; only sealed step tasks do".into(),
            );
        }
        if let Err(e) = self.trust.check_runner_key(&request.runner_key) {
            return self.dead(message, None, ErrorCode::BadMessage, e.to_string());
        }
        if let Some(name) = name_with_nul(request) {
            return fail(
                ErrorCode::BadMessage,
                format!("the request's {name} holds a NUL character, which a reviewer's store cannot keep"),
            );
        }
        self.advance(inbound, request, digest, None, now_ms)
    }

    /// Handles a step's `StepResult`.
    fn on_result(&self, inbound: &Inbound<'_>, result: &v1::StepResult, now_ms: i64) -> Handled {
        let (Some(task), Some(answer)) = (result.task.as_ref(), result.answer.as_ref()) else {
            return Self::refuse(ErrorCode::BadMessage, "a StepResult needs its task and an answer");
        };
        // Nothing of a result is read before its task's seal holds, and an answer refused is
        // not answered to the runner: the chain still waits for a true answer, or its deadline.
        if let Err(e) = self.trust.check_seal(task) {
            return Self::refuse(ErrorCode::Refused, e.to_string());
        }
        let Some(request) = task.request.as_ref() else {
            return Self::refuse(ErrorCode::BadMessage, "the StepResult's task carries no request");
        };
        let Ok(digest) = <[u8; 32]>::try_from(task.request_digest.as_slice()) else {
            return Self::refuse(ErrorCode::BadMessage, "the StepResult's task has no request digest");
        };
        if let Some(step) = answer.step.filter(|step| *step != task.step) {
            let text = format!("the answer is for step {step}, its task for step {}", task.step);
            return Self::refuse(ErrorCode::Refused, text);
        }
        self.advance(inbound, request, &digest, Some(Incoming { task, answer, result }), now_ms)
    }

    /// The external step an answer is for: the one its task names, if the answer comes from
    /// who must give it; refused otherwise.
    fn check_answer<'p>(
        &self,
        message: &Message,
        policy: &'p Policy,
        incoming: &Incoming<'_>,
    ) -> Result<PendingStep<'p>, String> {
        let index = incoming.task.step as usize;
        let Some(step) = policy.external_step(index) else {
            return Err(format!("step {index} takes no answers from outside the fleet"));
        };
        let name = step.name();
        if **name != *incoming.task.name {
            return Err(format!("step {index} is '{name}', not '{}'", incoming.task.name));
        }
        self.trust.check_publisher(name, message.user_id.as_deref()).map_err(|e| e.to_string())?;
        if matches!(step.external(), ExternalStep::Human(_)) {
            self.trust.check_reviewer(incoming.result).map_err(|e| e.to_string())?;
        }
        Ok(step)
    }

    /// Runs a request's chain from where it stands, with an external answer if one came: what
    /// the message asks is read ([`Handler::resolve`], [`Handler::read`]), the chain run
    /// ([`Asked::run`]), and what follows from its verdict published ([`Handler::publish`]).
    fn advance(
        &self,
        inbound: &Inbound<'_>,
        request: &v1::Request,
        digest: &[u8; 32],
        incoming: Option<Incoming<'_>>,
        now_ms: i64,
    ) -> Handled {
        // Reading that stops short ends the delivery: rarely, so what it ends as is boxed.
        let resolved = match self.resolve(inbound, request, digest, incoming.is_some(), now_ms) {
            Ok(resolved) => resolved,
            Err(handled) => return *handled,
        };
        let asked = match self.read(&resolved, incoming) {
            Ok(asked) => asked,
            Err(handled) => return *handled,
        };
        let verdict = match &resolved.controlled {
            Some(Controlled { response: Response::Terminate, why }) => Verdict::Decided(asked.terminate(why)),
            _ => asked.run(),
        };
        self.publish(&asked, verdict, now_ms)
    }

    /// Reads a request as far as its policy: its body's parts, its deadline (past it, the
    /// runner has failed closed already), the policy that judges it and what the fleet's
    /// control does with it; `answered` when a step's answer came with it.
    fn resolve<'a>(
        &self,
        inbound: &'a Inbound<'a>,
        request: &'a v1::Request,
        digest: &'a [u8; 32],
        answered: bool,
        now_ms: i64,
    ) -> Result<Resolved<'a>, Box<Handled>> {
        let fail =
            |code: ErrorCode, text: String| Box::new(self.dead(inbound.message, Some((request, digest)), code, text));
        let Some(parts) = request_parts(request) else {
            return Err(fail(ErrorCode::BadMessage, "the request has neither an approval nor a review body".into()));
        };
        if Deadline::from_wire(request.deadline_unix_ms).is_some_and(|deadline| deadline.has_passed(now_ms)) {
            return Err(Box::new(Handled::Expired));
        }
        let resolve = |policy: Option<&v1::Policy>| {
            self.policies.resolve(policy, parts.kind).map_err(|e| fail(e.code(), e.to_string()))
        };
        let own = resolve(request.policy.as_ref())?;
        let controlled = request.key.as_ref().and_then(|key| self.control.read().response(key, own.control()));
        let governing = controlled.as_ref().and_then(|controlled| governing(&controlled.response));
        let policy = match &governing {
            Some(governing) => resolve(Some(governing))?,
            None => own.clone(),
        };
        let was = request.chain.as_ref().and_then(|chain| chain.governing.as_ref());
        let asked_under = match was {
            Some(was) => resolve(Some(was))?,
            None => own.clone(),
        };
        let terminate = matches!(&controlled, Some(Controlled { response: Response::Terminate, .. }));
        let moved = was.map(|p| &p.source) != governing.as_ref().map(|p| &p.source);
        let restart = answered && (terminate || moved);
        Ok(Resolved { inbound, request, digest, parts, policy, own, asked_under, governing, controlled, restart })
    }

    /// Reads what a request asks of its chain: the answer that came in checked against the
    /// step its task names, then the call and the chain's state from the wire.
    fn read<'a>(&self, resolved: &'a Resolved<'a>, incoming: Option<Incoming<'a>>) -> Result<Asked<'a>, Box<Handled>> {
        let Resolved { inbound, request, parts, asked_under, .. } = resolved;
        let fail = |code: ErrorCode, text: String| Box::new(self.fail(resolved, code, text));
        let answered = incoming
            .map(|incoming| self.check_answer(inbound.message, asked_under, &incoming).map(|step| (step, incoming)))
            .transpose()
            .map_err(|text| Box::new(Self::refuse(ErrorCode::Refused, text)))?;
        let call = parts.call.ok_or_else(|| fail(ErrorCode::BadMessage, "the request has no call".into()))?;
        let metadata = call_metadata(call).map_err(|e| fail(ErrorCode::BadMessage, e.to_string()))?;
        let call = call_from_wire(call).map_err(|e| fail(ErrorCode::BadMessage, e.to_string()))?;
        let chain = request.chain.as_ref();
        let mut recorded = Cow::Borrowed(chain.map_or(&[][..], |chain| &chain.trail[..]));
        // A runner's own request names its publisher as the broker checked it; a result
        // brings back the name its sealed task carries, since its publisher is the step's.
        let requested_by = match &answered {
            None => inbound.message.user_id.as_deref().unwrap_or_default(),
            Some((_, incoming)) => incoming.task.requested_by.as_str(),
        };
        let mut answer = match answered {
            None => None,
            Some((step, incoming)) => {
                let answer =
                    answer_from_wire(incoming.answer).map_err(|e| fail(ErrorCode::InvalidAnswer, e.to_string()))?;
                let moved = Moved::read(step, &answer, incoming.task.deadline_unix_ms)
                    .map_err(|text| Box::new(Self::refuse(ErrorCode::Refused, text)))?;
                let published_by = inbound.message.user_id.clone().unwrap_or_default();
                let wire = v1::StepAnswer { published_by, ..incoming.answer.clone() };
                Some(StepAnswered { step, answer, wire, moved })
            }
        };
        let mut next_step = chain.map_or(0, |chain| chain.next_step as usize);
        if resolved.restart
            && let Some(ended) = answer.take()
        {
            // The answer ends the chain it was asked in: it stays in the trail, and the call
            // starts again under what control says now.
            let entry = TrailEntry {
                step: Some(ended.step.index()),
                approver: ended.step.name().clone(),
                answer: ended.answer,
            };
            recorded.to_mut().push(answered_entry(&entry, &ended.wire));
            next_step = 0;
        }
        let trail = trail_from_wire(&recorded).map_err(|e| fail(ErrorCode::BadMessage, format!("chain trail: {e}")))?;
        let state = ChainState { next_step, trail };
        Ok(Asked { resolved, call, metadata, recorded, state, answer, requested_by })
    }

    /// What follows from a chain's verdict: its decision for the runner, or the task of the
    /// step it waits for.
    fn publish(&self, asked: &Asked<'_>, verdict: Verdict<'_>, now_ms: i64) -> Handled {
        let Resolved { request, digest, parts, policy, .. } = asked.resolved;
        match verdict {
            Verdict::Decided(outcome) => {
                let mut report = asked.report(&outcome.trail);
                let approver = outcome.approver.as_deref().unwrap_or_default().to_owned();
                let latency_ms = now_ms - request.requested_at_unix_ms;
                let timed_out = outcome.timed_out;
                report.decided = Some(Decided { decision: outcome.decision, approver, timed_out, latency_ms });
                let trail = self.wire_trail(asked, &outcome.trail, now_ms);
                let decision = self.decision(request, parts.kind, policy, outcome, trail, now_ms);
                let counted = self.counted(asked.resolved, &decision);
                let reply = self.publish_decision(request, digest, parts.kind, decision);
                Handled::Publish(counted.into_iter().chain([reply]).collect(), report)
            }
            Verdict::Pending { step, state } => self.forward(asked, step, state, now_ms),
            Verdict::Failed(error) => self.fail(asked.resolved, ErrorCode::StepFailed, error.to_string()),
        }
    }

    /// The entry of the control log that counts `decision` for the breaker of the request's
    /// own policy: only approvals its chain decided, for a policy with a breaker.
    fn counted(&self, resolved: &Resolved<'_>, decision: &v1::Decision) -> Option<Outgoing> {
        resolved.own.control().breaker.as_ref()?;
        if resolved.parts.kind != Kind::Approval || decision.approver == CONTROL {
            return None;
        }
        // A deadline is no refusal: a call nobody answered in time counts as not denied.
        let outcome = v1::CallOutcome { key: decision.key.clone(), denied: counts_as_denial(decision) };
        let entry = airlock_control::log::stamp(&self.worker_id, Event::Outcome(outcome));
        let destination = Topology::log_route(&self.topology.control_log());
        Some(Outgoing { destination, message: Message::new(entry.encode_to_vec()), queue: Queue::Log })
    }

    /// The task of the external step a chain waits for, with the runner's word that the step
    /// holds its call.
    fn forward(&self, asked: &Asked<'_>, step: PendingStep<'_>, state: ChainState, now_ms: i64) -> Handled {
        let Resolved { request, digest, parts, .. } = asked.resolved;
        let mut report = asked.report(&state.trail);
        report.forwarded = Some(step.name().to_string());
        let trail = self.wire_trail(asked, &state.trail, now_ms);
        let pool = match step.external().route() {
            Route::Human { pool, .. } => asked.moved().map_or(pool, |moved| moved.to.clone()),
            Route::Step { .. } => String::new(),
        };
        let progress = self.progress(request, digest, parts.kind, step.index(), pool);
        let mut task = self.step_task(asked, step, state.next_step, trail, now_ms);
        if !self.declares(request, step) {
            let text = format!(
                "the inline policy's step {} goes to '{}', which nothing of this fleet serves",
                step.index(),
                task.destination.parts().1
            );
            task.queue = Queue::Existing(Box::new(self.fail(asked.resolved, ErrorCode::InvalidPolicy, text)));
        }
        Handled::Publish(std::iter::once(task).chain(progress).collect(), report)
    }

    /// Whether the worker declares the queue of `step`: a step of a policy it holds, or one it
    /// is configured with, but never one only a caller's inline policy names.
    fn declares(&self, request: &v1::Request, step: PendingStep<'_>) -> bool {
        let named =
            matches!(request.policy.as_ref().and_then(|p| p.source.as_ref()), Some(v1::policy::Source::Name(_)));
        named || matches!(step.external(), ExternalStep::Named(_) if self.trust.configures(step.name()))
    }

    /// The wire trail: entries already recorded stay as they were (with their deciders and
    /// times), the external answer keeps its decider, new built-in answers are this worker's.
    fn wire_trail(&self, asked: &Asked<'_>, trail: &[TrailEntry], now_ms: i64) -> Vec<v1::StepAnswer> {
        let recorded = &asked.recorded;
        let external = asked.answer.as_ref().map(|answered| &answered.wire);
        trail
            .iter()
            .enumerate()
            .map(|(index, entry)| match (recorded.get(index), external) {
                (Some(kept), _) => kept.clone(),
                (None, Some(answer)) if index == recorded.len() => answered_entry(entry, answer),
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
            timed_out: outcome.timed_out,
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
        let progress = v1::Progress { pool, task_id: String::new(), step: step as u32, ..Default::default() };
        let message = self.proved_reply(request, digest, kind, v1::reply_body::Body::Progress(progress));
        Some(Outgoing { destination, message, queue: Queue::Standing })
    }

    /// The task of the external step the chain waits for; its request names the digest of
    /// the policy resolved, so that whoever answers it knows which version of the policy asks.
    fn step_task(
        &self,
        asked: &Asked<'_>,
        step: PendingStep<'_>,
        next_step: usize,
        trail: Vec<v1::StepAnswer>,
        now_ms: i64,
    ) -> Outgoing {
        let Resolved { inbound, request, digest, policy, own, governing, .. } = asked.resolved;
        let kind = policy.kind();
        let mut forwarded = v1::Request::clone(request);
        let governing =
            governing.clone().map(|governing| v1::Policy { digest: policy.digest().to_owned(), ..governing });
        forwarded.chain = Some(v1::ChainState { next_step: next_step as u32, trail, governing });
        if let Some(resolved) = forwarded.policy.as_mut() {
            resolved.digest = own.digest().to_owned();
        }
        let timeout = step.external().timeout();
        let deadline = match asked.moved() {
            Some(moved) => Deadline::from_wire(moved.deadline),
            None => {
                let step_deadline = timeout.after.map(|after| Deadline::after(now_ms, after));
                Deadline::earliest(step_deadline, Deadline::from_wire(request.deadline_unix_ms))
            }
        };
        let mut task = v1::StepTask {
            request: Some(forwarded),
            step: step.index() as u32,
            name: step.name().to_string(),
            params_json: serde_json::Value::Object(step.policy_step().params.clone()).to_string(),
            deadline_unix_ms: Deadline::to_wire(deadline),
            on_timeout: decision_to_wire(timeout.on_timeout).into(),
            trace_context: inbound.trace.clone(),
            request_digest: digest.to_vec(),
            seal: Vec::new(),
            requested_by: asked.requested_by.to_owned(),
        };
        self.trust.seal(&mut task);
        let message = |body: Vec<u8>| {
            Message::new(body)
                .with_correlation_id(correlation(request, kind))
                .with_reply_to(self.topology.results_queue())
        };
        match step.external().route() {
            Route::Human { pool, choices, approvals } => {
                let (pool, rerouted_from) = match asked.moved() {
                    Some(moved) => (moved.to.clone(), moved.from.clone()),
                    None => (pool, String::new()),
                };
                let mut task = v1::HumanTask {
                    task: Some(task),
                    choices: choices.iter().map(|c| decision_to_wire(*c).into()).collect(),
                    pool: pool.clone(),
                    approvals,
                    rerouted_from,
                    ..Default::default()
                };
                if let ExternalStep::Human(human) = step.external() {
                    schedule(&mut task, human, deadline, now_ms);
                }
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

    /// Dead-letters a request that cannot go on, its runner told with a proved `Error`.
    fn fail(&self, resolved: &Resolved<'_>, code: ErrorCode, text: String) -> Handled {
        self.dead(resolved.inbound.message, Some((resolved.request, resolved.digest)), code, text)
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
    let names = [
        ("run id", key.run_id.as_str()),
        ("sample id", &key.sample_id),
        ("tool call id", &key.tool_call_id),
        ("function", function),
    ];
    first_with_nul(names).map(|(name, _)| name)
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

// === impl Inbound ===

impl<'m> Inbound<'m> {
    /// A delivery of the requests queue.
    pub fn request(message: &'m Message) -> Self {
        let body = v1::Request::decode(message.body.as_ref())
            .map(|request| (request, airlock_integrity::digest(&message.body)));
        Inbound { message, body: Decoded::Request(body), trace: trace_headers(&message.headers) }
    }

    /// A delivery of the results queue; a result whose sender kept no headers belongs to the
    /// trace its task carried.
    pub fn result(message: &'m Message) -> Self {
        let body = v1::StepResult::decode(message.body.as_ref());
        let mut trace = trace_headers(&message.headers);
        if trace.is_empty()
            && let Ok(v1::StepResult { task: Some(task), .. }) = &body
        {
            trace = task.trace_context.clone();
        }
        Inbound { message, body: Decoded::Result(body), trace }
    }

    /// The W3C trace context the delivery belongs to.
    pub fn trace(&self) -> &BTreeMap<String, String> {
        &self.trace
    }
}

// === impl Asked ===

impl<'a> Asked<'a> {
    /// Runs the chain from where it stands, or on from the external answer that came in; an
    /// answer that moves a human task keeps the chain at its step, the answer in the trail.
    fn run(&self) -> Verdict<'a> {
        let Resolved { policy, parts, .. } = self.resolved;
        let input =
            Input { call: &self.call, message: parts.message, output: parts.output, metadata: self.metadata.as_ref() };
        match &self.answer {
            None => policy.evaluate(&input, self.state.clone()),
            Some(answered) if answered.moved.is_some() => {
                let mut state = self.state.clone();
                state.trail.push(TrailEntry {
                    step: Some(answered.step.index()),
                    approver: answered.step.name().clone(),
                    answer: answered.answer.clone(),
                });
                Verdict::Pending { step: answered.step, state }
            }
            Some(answered) => policy.resume(&input, self.state.clone(), answered.step, answered.answer.clone()),
        }
    }

    /// The move of a human task that came in, if the answer is one.
    fn moved(&self) -> Option<&Moved> {
        self.answer.as_ref()?.moved.as_ref()
    }

    /// What handling the message did to its chain, whose trail is now `trail`: the steps that
    /// escalated since the wire's trail, and the external answer that came in.
    fn report(&self, trail: &[TrailEntry]) -> Report {
        Report {
            kind: Some(self.resolved.parts.kind),
            escalated: trail[self.recorded.len().min(trail.len())..]
                .iter()
                .filter(|entry| entry.answer.decision == Decision::Escalate)
                .map(|entry| entry.approver.to_string())
                .collect(),
            answered: self.answer.as_ref().map(|answered| {
                let wire = &answered.wire;
                let took = wire.answered_at_unix_ms.saturating_sub(wire.started_at_unix_ms);
                let human = matches!(answered.step.external(), ExternalStep::Human(_));
                Answered { step: answered.step.name().to_string(), took_ms: took, human }
            }),
            controlled: self.resolved.controlled.as_ref().map(|controlled| match controlled.response {
                Response::Human { .. } => "human",
                Response::Policy { .. } => "policy",
                Response::Terminate => "terminate",
            }),
            ..Report::default()
        }
    }

    /// The call's end under a `terminate` of the fleet's control: the trail so far, then the
    /// control's own entry saying why; the model is told no more than that its run stopped.
    fn terminate(&self, why: &str) -> Outcome {
        let mut trail = self.state.trail.clone();
        let approver: Arc<str> = CONTROL.into();
        trail.push(TrailEntry {
            step: None,
            approver: approver.clone(),
            answer: Answer::new(Decision::Terminate, why.to_owned()),
        });
        Outcome {
            decision: Decision::Terminate,
            modified: None,
            explanation: Some(STOPPED.into()),
            metadata: None,
            approver: Some(approver),
            step: None,
            timed_out: false,
            trail,
        }
    }
}

/// The trail's entry of an external step's answer `entry`, as `answer` came: with who gave
/// it, when, and the broker user that published it.
fn answered_entry(entry: &TrailEntry, answer: &v1::StepAnswer) -> v1::StepAnswer {
    v1::StepAnswer {
        published_by: answer.published_by.clone(),
        ..entry_to_wire(entry, &answer.decided_by, answer.started_at_unix_ms, answer.answered_at_unix_ms)
    }
}

// === impl Moved ===

impl Moved {
    /// The move `answer` of `step` makes, its task due at `deadline`: none unless it is a human
    /// step's answer with [`ReroutedMetadata`], which must `escalate` to the pool after the
    /// one it leaves on the step's route.
    fn read(step: PendingStep<'_>, answer: &Answer, deadline: i64) -> Result<Option<Self>, String> {
        let ExternalStep::Human(human) = step.external() else { return Ok(None) };
        let Some(metadata) = answer.metadata.as_ref().filter(|m| m.contains_key("rerouted")) else {
            return Ok(None);
        };
        let ReroutedMetadata { rerouted: Rerouted { from, to } } =
            serde_json::from_value(Value::Object(metadata.clone())).map_err(|e| format!("a move's metadata: {e}"))?;
        if answer.decision != Decision::Escalate {
            return Err(format!("a move answers escalate, not {}", answer.decision));
        }
        if human.next_pool(&from) != Some(to.as_str()) {
            let index = step.index();
            return Err(format!("step {index} does not move a task from pool '{from}' to pool '{to}'"));
        }
        Ok(Some(Moved { from, to, deadline }))
    }
}

/// Sets when `task`, sent now with `deadline`, moves on to the next pool of `human`'s route,
/// and when its pool is warned that it expires.
fn schedule(task: &mut v1::HumanTask, human: &Human, deadline: Option<Deadline>, now_ms: i64) {
    if let Some(reroute) = &human.reroute
        && let Some(next) = human.next_pool(&task.pool)
    {
        task.reroute_at_unix_ms = Deadline::after(now_ms, reroute.after).unix_ms();
        task.reroute_to = next.to_owned();
    }
    if let (Some(before), Some(deadline)) = (human.warn_before, deadline) {
        task.warn_at_unix_ms = deadline.unix_ms().saturating_sub(before.as_millis() as i64).max(1);
    }
}

/// What the model is told when the fleet's control ends its sample.
const STOPPED: &str = "This run was stopped by its overseers.";

/// The policy control puts in place of a request's own for `response`, as a task carries it:
/// for a person, a policy of one human step of the pool for every tool.
fn governing(response: &Response) -> Option<v1::Policy> {
    let source = match response {
        Response::Human { pool } => v1::policy::Source::Inline(format!(
            "approvers:\n  - name: human\n    tools: \"*\"\n    pool: {pool}\n\
             reviewers:\n  - name: human\n    tools: \"*\"\n    pool: {pool}\n"
        )),
        Response::Policy { name } => v1::policy::Source::Name(name.clone()),
        Response::Terminate => return None,
    };
    Some(v1::Policy { source: Some(source), digest: String::new() })
}

fn correlation(request: &v1::Request, kind: Kind) -> String {
    request.key.clone().unwrap_or_default().correlation_id(kind_to_wire(kind))
}

fn decision_name(decision: i32) -> &'static str {
    decision_from_wire(decision).map_or("unspecified", Decision::as_str)
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
