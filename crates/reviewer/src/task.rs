//! A human task as the service keeps it, and the answers a person can give.

use airlock_contract::v1;
use airlock_policy::{Decision, Kind};
use airlock_records::convert::{RequestParts, first_with_nul, kind_to_wire, request_parts};
use airlock_records::review::claim::ClaimView;
use airlock_records::review::{ApprovalView, ApprovalsMetadata, Caller, PolicyView, Rerouted, ReroutedMetadata};
use prost::Message as _;
use serde_json::Value;

/// Who is recorded as having decided a task whose deadline passed.
pub const DECIDED_BY_TIMEOUT: &str = "timeout";

/// Who is recorded as having answered a task that moved on to the next pool of its step's
/// route, nobody in its pool having answered in time: its answer is `escalate`.
pub const DECIDED_BY_REROUTE: &str = "reroute";

/// The pseudo-decision for a task dismissed without an answer: it is answered `terminate`,
/// as Inspect's human reviewer fails closed when a surface ends without a choice.
pub const DISMISS: &str = "dismiss";

/// Where a task stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Waiting for a person.
    Pending,
    /// Answered (by a person, or by its deadline).
    Decided(Verdict),
    /// Withdrawn by its runner: nobody answers it.
    Cancelled {
        /// When (unix ms).
        at: i64,
        /// Why, as the runner said.
        reason: String,
    },
}

/// A recorded answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// What was decided.
    pub decision: Decision,
    /// Why.
    pub explanation: String,
    /// The reviewer's name, or [`DECIDED_BY_TIMEOUT`].
    pub decided_by: String,
    /// When (unix ms).
    pub decided_at: i64,
}

impl Verdict {
    /// Whether the deadline gave it, nobody having answered.
    pub fn timed_out(&self) -> bool {
        self.decided_by == DECIDED_BY_TIMEOUT
    }
}

/// One human task.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The service's id for it (a UUID v7), used in URLs.
    pub id: String,
    /// The call's correlation id (`kind/run/sample/epoch/call`).
    pub correlation: String,
    /// The pool it is for.
    pub pool: String,
    /// The chain step it answers.
    pub step: u32,
    /// When the service received it (unix ms).
    pub received_at: i64,
    /// When it must be answered (unix ms), if ever.
    pub deadline: Option<i64>,
    /// The task as the policy worker sent it.
    pub human: v1::HumanTask,
    /// Where it stands.
    pub state: State,
    /// The approvals given so far, in order (only a step that needs several keeps them).
    pub approvals: Vec<ApprovalView>,
    /// Who holds it and until when, while a claim on it lasts ([`crate::desk::claims`]); a
    /// pending task only.
    pub claim: Option<ClaimView>,
    /// Whether the service planted it ([`crate::canary`]): its verdict is kept, never sent.
    /// Nothing a reviewer is shown reads it.
    pub canary: bool,
}

impl Task {
    /// The step task inside.
    pub fn step_task(&self) -> &v1::StepTask {
        static EMPTY: std::sync::OnceLock<v1::StepTask> = std::sync::OnceLock::new();
        self.human.task.as_ref().unwrap_or_else(|| EMPTY.get_or_init(v1::StepTask::default))
    }

    /// The request inside.
    pub fn request(&self) -> Option<&v1::Request> {
        self.step_task().request.as_ref()
    }

    /// The request's body read into its parts, if it has one.
    fn parts(&self) -> Option<RequestParts<'_>> {
        self.request().and_then(request_parts)
    }

    /// Approval or review (approval when the request has no body).
    pub fn kind(&self) -> Kind {
        self.parts().map_or(Kind::Approval, |parts| parts.kind)
    }

    /// The choices offered, in order: the wire's, without unknown values or values the kind
    /// does not allow (a review never offers `modify`); Inspect's defaults when nothing but
    /// `modify` is left.
    pub fn choices(&self) -> Vec<Decision> {
        let kind = self.kind();
        let mut choices = Vec::new();
        for decision in self.human.choices.iter().filter_map(|c| decision_from_wire(*c)) {
            if kind.decisions().contains(&decision) && !choices.contains(&decision) {
                choices.push(decision);
            }
        }
        if choices.iter().all(|c| *c == Decision::Modify) {
            choices = match kind {
                Kind::Approval => vec![Decision::Approve, Decision::Reject, Decision::Terminate],
                Kind::Review => vec![Decision::Continue, Decision::Terminate],
            };
        }
        choices
    }

    /// How many distinct reviewers must give [`Task::approving`] before the step answers.
    pub fn approvals_needed(&self) -> u32 {
        self.human.approvals.max(1)
    }

    /// The approving choice: `approve`, or `continue` for a review.
    pub fn approving(&self) -> Decision {
        match self.kind() {
            Kind::Approval => Decision::Approve,
            Kind::Review => Decision::Continue,
        }
    }

    /// Whether `reviewer` (whatever the case of the name) has approved it.
    pub fn approved_by(&self, reviewer: &str) -> bool {
        self.approvals.iter().any(|a| same_reviewer(&a.reviewer, reviewer))
    }

    /// The pool it moved from, nobody there having answered in time; none in the step's first
    /// pool.
    pub fn rerouted_from(&self) -> Option<&str> {
        Some(self.human.rerouted_from.as_str()).filter(|pool| !pool.is_empty())
    }

    /// The pool it moves to if nobody answers by its `reroute_at`; none when it stays.
    pub fn reroute_to(&self) -> Option<&str> {
        Some(self.human.reroute_to.as_str()).filter(|pool| !pool.is_empty() && self.human.reroute_at_unix_ms > 0)
    }

    /// The runner's reply queue, as its request names it.
    pub fn reply_to(&self) -> &str {
        self.request().map_or("", |r| r.reply_to.as_str())
    }

    /// The `Reply` that warns the runner nobody answered the task yet, which expires at its
    /// deadline.
    pub fn warning(&self) -> v1::Reply {
        progress_reply(v1::Progress {
            pool: self.pool.clone(),
            task_id: self.id.clone(),
            step: self.step,
            expires_at_unix_ms: self.deadline.unwrap_or_default(),
        })
    }

    /// What a timeout answers.
    pub fn on_timeout(&self) -> Decision {
        decision_from_wire(self.step_task().on_timeout).unwrap_or(self.kind().fail_closed())
    }

    /// Whether a person may still answer it.
    pub fn is_pending(&self) -> bool {
        self.state == State::Pending
    }

    /// The call under decision, if the request carries one.
    pub fn call(&self) -> Option<&v1::ToolCall> {
        self.parts()?.call
    }

    /// The assistant message's text.
    pub fn message(&self) -> &str {
        self.parts().map_or("", |parts| parts.message)
    }

    /// The call's view, if the runner sent one.
    pub fn view(&self) -> Option<&v1::ToolCallView> {
        self.parts()?.view
    }

    /// For a review: what the call returned.
    pub fn result(&self) -> Option<Returned<'_>> {
        let parts = self.parts()?;
        parts.output.map(|output| Returned { message: parts.result, output })
    }

    /// Why the task is here: the chain's answers before this step, in order, as the request
    /// carries them in its chain state.
    pub fn trail(&self) -> &[v1::StepAnswer] {
        self.request().and_then(|r| r.chain.as_ref()).map_or(&[], |chain| chain.trail.as_slice())
    }

    /// The conversation the request carries, ending with the assistant message with the call.
    pub fn history(&self) -> Conversation<'_> {
        self.parts().map_or(Conversation { messages: &[], omitted: 0 }, |parts| Conversation {
            messages: parts.history,
            omitted: parts.history_omitted,
        })
    }

    /// The policy the call is decided by: its name (none for an inline document) and digest,
    /// the request's or, when it has none, that of the inline document it carries.
    pub fn policy(&self) -> Option<PolicyView> {
        let policy = self.request()?.policy.as_ref()?;
        let (name, inline) = match &policy.source {
            Some(v1::policy::Source::Name(name)) => (Some(name.clone()), None),
            Some(v1::policy::Source::Inline(text)) => (None, Some(text)),
            None => (None, None),
        };
        let digest = match inline {
            Some(text) if policy.digest.is_empty() => airlock_policy::document::digest(text),
            _ => policy.digest.clone(),
        };
        Some(PolicyView { name, digest })
    }

    /// Who asked: the broker user that published the request and the tenant its key names.
    pub fn caller(&self) -> Caller {
        Caller {
            requested_by: self.step_task().requested_by.clone(),
            tenant: self.request().and_then(|r| r.key.as_ref()).map(|key| key.tenant.clone()).unwrap_or_default(),
        }
    }

    /// Where the request comes from.
    pub fn origin(&self) -> Option<&v1::Origin> {
        self.request()?.origin.as_ref()
    }

    /// The answer a person (or the deadline) gives, as the `StepResult` the policy workers
    /// continue the chain with; its metadata names every approval the task holds, or for a
    /// move ([`DECIDED_BY_REROUTE`]) the pool it leaves and the next one.
    pub fn step_result(&self, verdict: &Verdict) -> v1::StepResult {
        let metadata_json = if verdict.decided_by == DECIDED_BY_REROUTE {
            let rerouted = Rerouted { from: self.pool.clone(), to: self.human.reroute_to.clone() };
            serde_json::to_string(&ReroutedMetadata { rerouted }).unwrap_or_default()
        } else if self.approvals.is_empty() {
            String::new()
        } else {
            let metadata = ApprovalsMetadata { approvals: self.approvals.clone() };
            serde_json::to_string(&metadata).unwrap_or_default()
        };
        let answer = v1::StepAnswer {
            step: Some(self.step),
            approver: self.step_task().name.clone(),
            decision: decision_to_wire(verdict.decision).into(),
            modified: None,
            explanation: Some(verdict.explanation.clone()),
            metadata_json,
            decided_by: verdict.decided_by.clone(),
            started_at_unix_ms: self.received_at,
            answered_at_unix_ms: verdict.decided_at,
            published_by: String::new(),
            timed_out: verdict.timed_out(),
        };
        v1::StepResult { task: self.human.task.clone(), answer: Some(answer), ..Default::default() }
    }
}

/// What a reviewed call returned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Returned<'a> {
    /// The tool message the model will see, if the runner sent it.
    pub message: Option<&'a v1::ChatMessage>,
    /// The tool's raw output.
    pub output: &'a str,
}

/// The conversation a request carries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conversation<'a> {
    /// The messages, oldest first.
    pub messages: &'a [v1::ChatMessage],
    /// How many earlier messages the runner left out.
    pub omitted: u32,
}

/// A task received from the human queue, before it is stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    /// The decoded task.
    pub human: v1::HumanTask,
    /// Its correlation id.
    pub correlation: String,
    /// The pool (the task's, or the queue's when the task names none).
    pub pool: String,
}

/// Why a delivery is not a usable human task.
#[derive(Debug, thiserror::Error)]
pub enum IncomingError {
    /// The body is not a `HumanTask`.
    #[error("not an airlock.v1.HumanTask: {0}")]
    Decode(#[from] prost::DecodeError),
    /// Something the service needs is missing.
    #[error("the HumanTask carries no {0}")]
    Missing(&'static str),
    /// A name the store keeps as text (the call key, pool, broker user or function) holds a
    /// NUL character, which PostgreSQL's text refuses: the task is refused on every store
    /// alike. (Arguments may hold one: they are stored as bytes.)
    #[error("the HumanTask's {0} holds a NUL character, which the store cannot keep")]
    Nul(&'static str),
}

impl Incoming {
    /// Reads a delivery's body; `queue_pool` is the pool of the queue it came from.
    pub fn decode(body: &[u8], queue_pool: &str) -> Result<Self, IncomingError> {
        let human = v1::HumanTask::decode(body)?;
        let task = human.task.as_ref().ok_or(IncomingError::Missing("step task"))?;
        let request = task.request.as_ref().ok_or(IncomingError::Missing("request"))?;
        let key = request.key.as_ref().ok_or(IncomingError::Missing("call key"))?;
        let parts = request_parts(request).ok_or(IncomingError::Missing("approval or review body"))?;
        let correlation = key.correlation_id(kind_to_wire(parts.kind));
        let pool = if human.pool.is_empty() { queue_pool.to_owned() } else { human.pool.clone() };
        let names = [
            ("call key", correlation.as_str()),
            ("pool", &pool),
            ("broker user", &task.requested_by),
            ("function", parts.call.map_or("", |call| call.function.as_str())),
        ];
        if let Some((what, _)) = first_with_nul(names) {
            return Err(IncomingError::Nul(what));
        }
        Ok(Incoming { human, correlation, pool })
    }

    /// The step it answers.
    pub fn step(&self) -> u32 {
        self.human.task.as_ref().map_or(0, |t| t.step)
    }

    /// When it must be answered (unix ms), if ever (the wire's `0` or less is never).
    pub fn deadline(&self) -> Option<i64> {
        self.human.task.as_ref().map(|t| t.deadline_unix_ms).filter(|deadline| *deadline > 0)
    }

    /// The broker user that published the task's request, as the worker that took it saw it
    /// (`""` when it named none): the only user whose cancel withdraws the task.
    pub fn requested_by(&self) -> &str {
        self.human.task.as_ref().map_or("", |t| t.requested_by.as_str())
    }

    /// The runner's reply queue, as its request names it.
    pub fn reply_to(&self) -> &str {
        self.human.task.as_ref().and_then(|t| t.request.as_ref()).map_or("", |r| r.reply_to.as_str())
    }

    /// The `Reply` that tells the runner its call waits for a person, stored as task `id`.
    pub fn progress(&self, id: &str) -> v1::Reply {
        progress_reply(v1::Progress {
            pool: self.pool.clone(),
            task_id: id.to_owned(),
            step: self.step(),
            ..Default::default()
        })
    }

    /// The pending task it becomes when stored as `id` at `now`.
    pub fn pending(&self, id: &str, now: i64) -> Task {
        Task {
            id: id.to_owned(),
            correlation: self.correlation.clone(),
            pool: self.pool.clone(),
            step: self.step(),
            received_at: now,
            deadline: self.deadline(),
            human: self.human.clone(),
            state: State::Pending,
            approvals: Vec::new(),
            claim: None,
            canary: false,
        }
    }

    /// One task per broker user that asked, call, kind and step: a redelivered or duplicated
    /// task maps to the same key, and another user's request for the same call key is a task
    /// of its own (it cannot take the place of the first).
    /// A task that moved is one of its own in each pool of its step's route (each pool is on
    /// it once).
    pub fn dedup_key(&self) -> String {
        let key =
            format!("{}/{}#{}", airlock_contract::key::encode_part(self.requested_by()), self.correlation, self.step());
        match self.human.rerouted_from.is_empty() {
            true => key,
            false => format!("{key}@{}", self.pool),
        }
    }
}

/// Inspect's fixed explanation of a human answer, used when the person gives none.
pub fn default_explanation(kind: Kind, decision: Decision) -> &'static str {
    match (kind, decision) {
        (Kind::Review, Decision::Continue) => "Human operator reviewed the tool result and let the sample continue.",
        (Kind::Review, Decision::Escalate) => "Human operator escalated the tool result review.",
        (Kind::Review, _) => "Human operator reviewed the tool result and asked that the sample be terminated.",
        (Kind::Approval, Decision::Approve) => "Human operator approved tool call.",
        (Kind::Approval, Decision::Reject) => "Human operator rejected the tool call.",
        (Kind::Approval, Decision::Escalate) => "Human operator escalated the tool call approval.",
        (Kind::Approval, Decision::Modify) => "Human operator modified the tool call.",
        (Kind::Approval, _) => "Human operator asked that the sample be terminated.",
    }
}

/// The explanation of a dismissed task's `terminate`.
pub const DISMISSED_EXPLANATION: &str =
    "The human reviewer dismissed the task without one of the offered choices; the sample is terminated.";

/// The explanation of a task whose deadline passed, naming whoever approved it in part.
pub fn timeout_explanation(decision: Decision, approvals: &[ApprovalView]) -> String {
    let text = format!("No human decision before the deadline; the step's on_timeout decision ({decision}) applies.");
    if approvals.is_empty() {
        return text;
    }
    let names: Vec<&str> = approvals.iter().map(|a| a.reviewer.as_str()).collect();
    format!("{text} Approved only by {}.", names.join(", "))
}

/// `progress` as a `Reply` to the runner, unproved (the service holds no fleet key; it decides
/// nothing).
fn progress_reply(progress: v1::Progress) -> v1::Reply {
    let body = v1::ReplyBody { body: Some(v1::reply_body::Body::Progress(progress)) };
    v1::Reply { body: body.encode_to_vec(), ..Default::default() }
}

/// The explanation of a task that moves from `from` to `to`, nobody in `from` having answered
/// in time.
pub fn reroute_explanation(from: &str, to: &str) -> String {
    format!("No human decision in pool {from} in time; the task moves to pool {to}.")
}

/// Whether two reviewer names are one reviewer's: names are compared without case, so
/// `Alice` and `alice` are one approver.
pub fn same_reviewer(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Who decided a task the approvals of `approvals` decided: the reviewers joined by `+`, in
/// the order they approved (`alice+bob`).
pub fn approvers(approvals: &[ApprovalView]) -> String {
    approvals.iter().map(|a| a.reviewer.as_str()).collect::<Vec<_>>().join("+")
}

/// The approvals among `approvals` of the call `approval` approves: the call as asked, or
/// the same modified call (the same arguments, whatever their order).
pub fn agreeing(approvals: &[ApprovalView], approval: &ApprovalView) -> Vec<ApprovalView> {
    let parsed = |arguments: &str| serde_json::from_str::<Value>(arguments).ok();
    let same_call = |other: &ApprovalView| match (&other.modified_arguments, &approval.modified_arguments) {
        (None, None) => true,
        (Some(a), Some(b)) => a == b || parsed(a).is_some_and(|a| parsed(b) == Some(a)),
        _ => false,
    };
    approvals.iter().filter(|other| same_call(other)).cloned().collect()
}

pub use airlock_records::convert::{decision_from_wire, decision_to_wire};

/// The keyboard shortcut of a choice: its first letter, as Inspect's console prompt uses.
pub fn shortcut(decision: Decision) -> char {
    decision.as_str().chars().next().unwrap_or('?')
}
