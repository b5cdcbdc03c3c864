//! The decision desk: the one path that writes tasks, their answers in the outbox and the
//! webhooks announcing them. It owns the rules of deciding a task — the choices a task
//! offers, `dismiss`, the explanation kept, a modify's call, the approvals a step needs, the
//! conflicts of a task decided or withdrawn before, the standing decisions applied, a
//! deadline's `on_timeout` — and returns the decided task or a [`Refusal`] saying why not.
//! The HTTP handlers only translate that into JSON or pages.
//!
//! Every answer, a person's, a deadline's or a standing decision's, is recorded the same
//! way: signed, written with its outbox row and its webhooks in one transaction, measured,
//! then handed to the outbox to publish at once.
//!
//! A canary's answer ([`crate::canary`]) is recorded the same way but for the answer itself:
//! nothing is signed, written to the outbox or handed to it; the transaction keeps whom the
//! verdict counts for (the person, or a standing decision's author) instead.
//!
//! Layout:
//! - [`Desk`] (here): its state, a person's decision checked and recorded, a deadline's.
//! - [`refusal`]: why a decision (or a standing decision) is refused, with the texts shown.
//! - [`approvals`]: two-person (N-person) approval: approvals counted, the last one deciding.
//! - [`claims`]: claims: a task held by one reviewer for a while, the others kept from
//!   deciding it unless they hold the pool's override.
//! - [`standing`]: standing decisions made, revoked, and applied to pending and new tasks.
//! - [`groups`]: identical pending calls grouped, and one confirmed decision for a group.
//! - [`intake`]: tasks stored as they arrive, paged or settled at once, and withdrawn; canaries
//!   planted.
//! - [`control`]: the fleet's control log followed: incidents marked, runs switched, and the
//!   pending tasks of a run it ends answered `terminate`.

pub mod approvals;
pub mod claims;
pub mod control;
pub mod groups;
pub mod intake;
pub mod refusal;
pub mod standing;

use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use airlock_contract::v1;
use airlock_integrity::SigningKey;
use airlock_policy::Decision;
use airlock_records::review::standing::StandingDecision;
use airlock_records::signed::sign_human_answer;
use airlock_records::time::now_ms;
use airlock_telemetry::metrics::{AnswerLabels, Metrics, ReviewLabels, ReviewerLabels};
use prost::Message as _;
use serde_json::Value;
use tokio::sync::{Notify, mpsc};
use tracing::{debug, warn};

pub use claims::Claims;
pub use refusal::Refusal;

use crate::auth::Reviewer;
use crate::logged::Logged;
use crate::modify::{modified_call, parse_arguments};
use crate::site::PublicUrl;
use crate::store::{Answerer, Decided, Delivery, OutboxEntry, Recording, Store, StoreError};
use crate::task::{
    DECIDED_BY_REROUTE, DECIDED_BY_TIMEOUT, DISMISS, DISMISSED_EXPLANATION, State, Task, Verdict, default_explanation,
    reroute_explanation, timeout_explanation,
};
use crate::webhooks::{EventKind, Webhooks};

/// The longest explanation kept.
pub const MAX_EXPLANATION: usize = 4000;

/// How long the process that records a decision has to publish its answer before any other
/// sender may (its outbox lease).
pub const OUTBOX_LEASE: Duration = Duration::from_secs(30);

/// The decision desk of one service process.
#[derive(Debug)]
pub struct Desk {
    store: Store,
    pools: Vec<String>,
    public_url: Option<PublicUrl>,
    webhooks: Webhooks,
    /// Answers to publish now (their outbox rows are leased to this process).
    outbox: mpsc::UnboundedSender<OutboxEntry>,
    signer: Option<Arc<SigningKey>>,
    /// How long claims last.
    claims: Claims,
    /// Where the service counts tasks taken, decisions made and answers sent.
    pub metrics: Arc<Metrics>,
    /// Wakes the watcher of the pending list: it changed here.
    changed: Notify,
    /// Wakes the deadline loop: a task arrived, perhaps with an earlier deadline.
    deadlines: Notify,
    /// Wakes the webhook sender: a webhook was written here.
    webhooks_due: Notify,
    /// The fleet's control log, once the service follows it.
    control: OnceLock<control::Control>,
}

/// A person's answer to a task, as the API's body or the UI's form gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// A choice of the task, or `dismiss`.
    pub decision: String,
    /// Why, if the person said.
    pub explanation: Option<String>,
    /// A modify's new arguments.
    pub arguments: Option<Arguments>,
}

/// A modify's new arguments, as they came.
#[derive(Debug, Clone, PartialEq)]
pub enum Arguments {
    /// Already JSON (the API's body).
    Json(Value),
    /// JSON text still to read (the UI's editor).
    Text(String),
}

/// What recording an answer did.
#[derive(Debug, Clone, PartialEq)]
pub enum Recorded {
    /// Recorded: the task as decided; its answer went to the outbox.
    Decided(Box<Task>),
    /// The task was not pending (decided or withdrawn before): nothing changed. Carries the
    /// task as it stands.
    NotPending(Box<Task>),
    /// No such task.
    NotFound,
}

impl Recorded {
    /// The decided task, or the refusal of a task that was not pending or not there.
    fn decided(self) -> Result<Task, Refusal> {
        match self {
            Recorded::Decided(task) => Ok(*task),
            Recorded::NotPending(task) => Err(Refusal::not_pending(&task)),
            Recorded::NotFound => Err(Refusal::NotFound),
        }
    }
}

/// An answer about to be recorded: what the store writes, the task as it will stand, and the
/// labels its publishing is counted under.
#[derive(Debug, Clone)]
struct Draft {
    recording: Recording,
    decided: Task,
    labels: Option<AnswerLabels>,
}

impl Desk {
    /// A desk over `store` for `pools`, linking tasks to `public_url` in the webhooks it
    /// writes for `webhooks`' endpoints, counting in `metrics` and signing answers with
    /// `signer`, letting reviewers claim tasks as `claims` says; and the receiving end of the
    /// answers to publish.
    pub fn new(
        store: Store,
        pools: Vec<String>,
        public_url: Option<PublicUrl>,
        webhooks: Webhooks,
        metrics: Arc<Metrics>,
        signer: Option<Arc<SigningKey>>,
        claims: Claims,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<OutboxEntry>) {
        let (outbox, answers) = mpsc::unbounded_channel();
        let desk = Desk {
            store,
            pools,
            public_url,
            webhooks,
            outbox,
            signer,
            claims,
            metrics,
            changed: Notify::new(),
            deadlines: Notify::new(),
            webhooks_due: Notify::new(),
            control: OnceLock::new(),
        };
        (Arc::new(desk), answers)
    }

    /// The durable store. Tasks, answers and webhooks are written through the desk's methods.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The pools this service serves.
    pub fn pools(&self) -> &[String] {
        &self.pools
    }

    /// How claims work here.
    pub fn claims(&self) -> Claims {
        self.claims
    }

    /// Whether this service serves `pool`.
    pub fn serves(&self, pool: &str) -> bool {
        self.pools.iter().any(|p| p == pool)
    }

    /// The endpoints that page people.
    pub fn webhooks(&self) -> &Webhooks {
        &self.webhooks
    }

    /// Notified when the pending list changed here.
    pub(crate) fn changed(&self) -> &Notify {
        &self.changed
    }

    /// Notified when a task arrived here (its deadline may be the next).
    pub(crate) fn deadlines(&self) -> &Notify {
        &self.deadlines
    }

    /// Notified when a webhook was written here.
    pub(crate) fn webhooks_due(&self) -> &Notify {
        &self.webhooks_due
    }

    /// Tells the watcher the pending list changed here.
    pub fn poke(&self) {
        self.changed.notify_one();
    }

    /// The task `id`, in any state, if `reviewer` may see it: of a pool this service serves
    /// and the reviewer reviews.
    pub async fn visible(&self, reviewer: &Reviewer, id: &str) -> Result<Task, Refusal> {
        match self.store.task(id).await? {
            Some(task) if self.serves(&task.pool) && reviewer.sees(&task.pool) => Ok(task),
            _ => Err(Refusal::NotFound),
        }
    }

    /// Decides task `id` with `reviewer`'s `answer`: a choice of the task, or `dismiss`; an
    /// explanation trimmed, at most [`MAX_EXPLANATION`] characters, without NUL; a modify's
    /// arguments. On a step that needs several approvals an approving answer (or a modify) is
    /// one approval. Refused while another reviewer claims the task, unless `reviewer` holds
    /// the pool's override ([`claims`]). The task as it stands after it.
    pub async fn decide(&self, reviewer: &Reviewer, id: &str, answer: Answer) -> Result<Task, Refusal> {
        let arguments = match answer.arguments {
            Some(Arguments::Text(text)) => Some(parse_arguments(&text)?),
            Some(Arguments::Json(value)) => Some(value),
            None => None,
        };
        let task = self.visible(reviewer, id).await?;
        let (decision, explanation) = ruling(&task, &answer.decision, answer.explanation)?;
        let modified = modified_call(&task, decision, arguments)?;
        if !task.is_pending() {
            return Err(Refusal::not_pending(&task));
        }
        let decided_by = self.decider(reviewer, &task)?;
        // On a step that needs several approvals, a modify is one approval of the modified call.
        let decided = if (decision == task.approving() || modified.is_some()) && task.approvals_needed() > 1 {
            self.approve(&task, explanation, &reviewer.name, modified).await
        } else {
            let verdict = Verdict { decision, explanation, decided_by, decided_at: now_ms() };
            self.write(&task, verdict, modified, By::Person).await?.decided()
        };
        if decided.is_ok() {
            let labels = ReviewerLabels { pool: task.pool.clone(), reviewer: reviewer.name.clone() };
            self.metrics.review_decisions.get_or_create(&labels).inc();
        }
        decided
    }

    /// Records `decision` with `explanation` on `task` as `decided_by`'s, as it is: the rules
    /// of [`Desk::decide`] are the caller's. The first answer wins: a later one changes
    /// nothing and gets [`Recorded::NotPending`].
    pub async fn record(
        &self,
        task: &Task,
        decision: Decision,
        explanation: String,
        decided_by: &str,
    ) -> Result<Recorded, StoreError> {
        let verdict = Verdict { decision, explanation, decided_by: decided_by.to_owned(), decided_at: now_ms() };
        let by = if verdict.timed_out() { By::Timeout } else { By::Person };
        self.write(task, verdict, None, by).await
    }

    /// Gives `task`, whose deadline passed, its step's `on_timeout` decision, as decided by
    /// [`DECIDED_BY_TIMEOUT`] (a person who answered first wins).
    pub async fn time_out(&self, task: &Task) -> Result<Recorded, StoreError> {
        let decision = task.on_timeout();
        self.record(task, decision, timeout_explanation(decision, &task.approvals), DECIDED_BY_TIMEOUT).await
    }

    /// Moves `task`, due to move on, to the next pool of its step's route: it is answered
    /// `escalate` as [`DECIDED_BY_REROUTE`], an answer the worker takes as the move, and
    /// leaves this pool's pending list (a person who answered first wins).
    pub async fn reroute(&self, task: &Task) -> Result<Recorded, StoreError> {
        let explanation = reroute_explanation(&task.pool, task.reroute_to().unwrap_or_default());
        let verdict = Verdict {
            decision: Decision::Escalate,
            explanation,
            decided_by: DECIDED_BY_REROUTE.to_owned(),
            decided_at: now_ms(),
        };
        self.write(task, verdict, None, By::Reroute).await
    }

    /// Warns the endpoints of `task`'s pool that it expires (`task.expiring`), once: whether
    /// this call warned (not when it was warned before or left the pending list).
    pub async fn warn(&self, task: &Task) -> Result<bool, StoreError> {
        let webhooks = self.webhooks.announce(EventKind::Expiring, task, self.public_url.as_ref());
        let warned = self.store.warn(task, &webhooks, now_ms()).await?;
        if warned && !webhooks.is_empty() {
            self.webhooks_due.notify_one();
        }
        Ok(warned)
    }

    /// Records `verdict` on `task` (with the `modified` call of a modify) if it is still
    /// pending, given `by` a person, a deadline, a standing decision or the fleet's control.
    async fn write(
        &self,
        task: &Task,
        verdict: Verdict,
        modified: Option<v1::ToolCall>,
        by: By<'_>,
    ) -> Result<Recorded, StoreError> {
        let draft = self.draft(task, verdict, modified, by);
        Ok(match self.store.decide(task, &draft.recording).await? {
            Decided::Recorded(entry) => {
                self.recorded(&draft, entry, by.label());
                Recorded::Decided(Box::new(draft.decided))
            }
            Decided::NotPending(task) => Recorded::NotPending(task),
            Decided::NotFound => Recorded::NotFound,
        })
    }

    /// What recording `verdict` on `task` (with the `modified` call of a modify) writes: the
    /// signed answer (the control's own, `by` it) and its outbox lease, or for a canary whom
    /// the verdict counts for and no answer at all; the webhooks announcing it; and the task as
    /// decided.
    fn draft(&self, task: &Task, verdict: Verdict, modified: Option<v1::ToolCall>, by: By<'_>) -> Draft {
        // A decided task is nobody's to hold: its claim went with the decision.
        let decided = Task { state: State::Decided(verdict.clone()), claim: None, ..task.clone() };
        let kind = Webhooks::decision_kind(&verdict.decided_by);
        let webhooks = self.webhooks.announce(kind, &decided, self.public_url.as_ref());
        if task.canary {
            let answerer = by.answerer(&verdict);
            let recording = Recording { verdict, delivery: Delivery::Canary { answerer }, webhooks };
            return Draft { recording, decided, labels: None };
        }
        let mut result = task.step_result(&verdict);
        if let Some(answer) = result.answer.as_mut() {
            answer.modified = modified;
            if let By::Control = by {
                answer.approver = airlock_control::APPROVER.to_owned();
            }
        }
        if let Some(key) = &self.signer {
            sign_human_answer(key, &mut result);
        }
        let labels = result
            .task
            .as_ref()
            .map(|step| AnswerLabels { step: step.name.clone(), decision: verdict.decision.as_str().to_owned() });
        let lease_until = verdict.decided_at + OUTBOX_LEASE.as_millis() as i64;
        let delivery = Delivery::Outbox { answer: result.encode_to_vec(), lease_until };
        Draft { recording: Recording { verdict, delivery, webhooks }, decided, labels }
    }

    /// After `draft` was recorded, leaving `entry` in the outbox (none for a canary): measures
    /// it as `decider`'s, wakes the webhook sender, hands the answer to the outbox.
    fn recorded(&self, draft: &Draft, entry: Option<OutboxEntry>, decider: &'static str) {
        let (task, recording) = (&draft.decided, &draft.recording);
        let Verdict { decision, decided_by, decided_at, .. } = &recording.verdict;
        let labels = ReviewLabels { pool: task.pool.clone(), decider: decider.into() };
        let waited = (decided_at - task.received_at).max(0) as f64 / 1000.0;
        self.metrics.review_seconds.get_or_create(&labels).observe(waited);
        if !recording.webhooks.is_empty() {
            self.webhooks_due.notify_one();
        }
        debug!(task = %task.id, correlation = %Logged(&task.correlation), %decision, %decided_by, "Task decided.");
        // A canary's answer goes nowhere: nothing reaches the fleet or a runner.
        if let Some(entry) = entry
            && self.outbox.send(OutboxEntry { labels: draft.labels.clone(), ..entry }).is_err()
        {
            // The outbox stopped (shutdown): the answer waits in the store for the next start.
            warn!(task = %task.id, "Outbox stopped; the answer is sent after the next start.");
        }
        self.poke();
    }
}

/// Who gives an answer the desk records.
#[derive(Debug, Clone, Copy)]
enum By<'a> {
    /// A person (the verdict's `decided_by`).
    Person,
    /// The people whose approvals of a two-person step agreed, the last of them now: each
    /// approval of a canary was counted for its reviewer as it came.
    Approvals,
    /// The task's deadline.
    Timeout,
    /// The task's move to the next pool, nobody in its pool having answered in time.
    Reroute,
    /// A standing decision, for its author.
    Standing(&'a StandingDecision),
    /// The fleet's control, ending the tasks of a run it stopped.
    Control,
}

impl By<'_> {
    /// The decider the answer is measured as.
    fn label(self) -> &'static str {
        match self {
            By::Person | By::Approvals => "person",
            By::Timeout => "timeout",
            By::Reroute => DECIDED_BY_REROUTE,
            By::Standing(_) => "standing",
            By::Control => airlock_control::APPROVER,
        }
    }

    /// Whom `verdict` counts for when it decides a canary: the person, or the standing
    /// decision's author; nobody for a deadline.
    fn answerer(self, verdict: &Verdict) -> Option<Answerer> {
        match self {
            By::Person => Some(Answerer { reviewer: verdict.decided_by.clone(), standing: None }),
            By::Approvals | By::Timeout | By::Reroute | By::Control => None,
            By::Standing(standing) => Some(Answerer { reviewer: standing.author.clone(), standing: Some(standing.id) }),
        }
    }
}

/// The decision and explanation `decision` and `explanation` give `task`: a choice of the
/// task with its explanation (the default one when none is given), or `dismiss`, which
/// terminates with [`DISMISSED_EXPLANATION`] and the person's note.
fn ruling(task: &Task, decision: &str, explanation: Option<String>) -> Result<(Decision, String), Refusal> {
    let choices = task.choices();
    let offered = || choices.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ");
    let explanation = explanation.map(|e| e.trim().to_owned()).filter(|e| !e.is_empty());
    if explanation.as_ref().is_some_and(|e| e.chars().count() > MAX_EXPLANATION) {
        return Err(Refusal::ExplanationTooLong);
    }
    if explanation.as_ref().is_some_and(|e| e.contains('\0')) {
        return Err(Refusal::ExplanationNul);
    }
    if decision == DISMISS {
        let text = match explanation {
            Some(note) => format!("{DISMISSED_EXPLANATION} ({note})"),
            None => DISMISSED_EXPLANATION.to_owned(),
        };
        return Ok((Decision::Terminate, text));
    }
    let parsed = Decision::from_str(decision)
        .map_err(|_| Refusal::UnknownDecision { decision: decision.to_owned(), offered: offered() })?;
    if !choices.contains(&parsed) {
        return Err(Refusal::NotOffered { decision: parsed, offered: offered() });
    }
    Ok((parsed, explanation.unwrap_or_else(|| default_explanation(task.kind(), parsed).to_owned())))
}

#[cfg(test)]
mod tests;
