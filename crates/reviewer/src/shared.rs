//! What the service's parts share: the store, the reviewers, the decision path every answer
//! takes (a person's through the API or the UI, or a deadline's), and the change feed the UI
//! follows.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use airlock_contract::v1;
use airlock_integrity::SigningKey;
use airlock_policy::Decision;
use airlock_records::signed::sign_human_answer;
use airlock_records::time::now_ms;
use airlock_telemetry::metrics::{Metrics, PoolLabels, ReviewLabels};
use prost::Message as _;
use tokio::sync::{Notify, broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::auth::{LoginLimiter, Reviewers, Sessions};
use crate::logged::Logged;
use crate::site::Site;
use crate::store::{Decided, OutboxEntry, PendingId, Recording, Store, StoreError};
use crate::task::{DECIDED_BY_TIMEOUT, State, Task, Verdict};
use crate::webhooks::Webhooks;

/// How long the process that records a decision has to publish its answer before any other
/// sender may (its outbox lease).
pub const OUTBOX_LEASE: Duration = Duration::from_secs(30);

/// How often the pending list is compared with the store, to see what other processes on a
/// shared store changed.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// A change of the pending list, for the UI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A task became pending.
    Added {
        /// Its id.
        id: String,
        /// Its pool.
        pool: String,
    },
    /// A task left the pending list (decided or withdrawn).
    Removed {
        /// Its id.
        id: String,
        /// Its pool.
        pool: String,
    },
}

impl Change {
    /// The task's pool.
    pub fn pool(&self) -> &str {
        match self {
            Change::Added { pool, .. } | Change::Removed { pool, .. } => pool,
        }
    }
}

/// The state every part of one service process shares.
#[derive(Debug)]
pub struct Shared {
    /// The durable store.
    pub store: Store,
    /// Who may review.
    pub reviewers: Reviewers,
    /// The pools this service consumes and shows.
    pub pools: Vec<String>,
    /// Where browsers reach the UI, how long their sessions last, how sign-ins are limited.
    pub site: Site,
    /// Browser sessions.
    pub sessions: Sessions,
    /// Failed sign-ins per client address.
    pub logins: LoginLimiter,
    /// Changes of the pending list.
    pub changes: broadcast::Sender<Change>,
    /// Resolves when the service stops (ends the UI's event streams).
    pub stop: CancellationToken,
    /// Wakes the watcher: the pending list may have changed.
    pub(crate) changed: Notify,
    /// Wakes the deadline keeper: a task may have arrived with an earlier deadline.
    pub(crate) deadlines: Notify,
    /// The endpoints that page people.
    pub webhooks: Webhooks,
    /// Wakes the webhook sender: a webhook was written here.
    pub(crate) webhooks_due: Notify,
    /// Answers to publish now (their outbox rows are leased to this process).
    outbox: mpsc::UnboundedSender<OutboxEntry>,
    /// Where the service counts tasks taken and answers sent.
    pub metrics: Arc<Metrics>,
    /// The key answers are signed with (none in an unsigned fleet).
    signer: Option<Arc<SigningKey>>,
}

impl Shared {
    /// Shared state, and the receiving end of the answers to publish.
    pub fn new(
        store: Store,
        reviewers: Reviewers,
        pools: Vec<String>,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<OutboxEntry>) {
        Shared::observed(store, reviewers, pools, Site::default(), Arc::default(), None, Webhooks::default())
    }

    /// [`Shared::new`], serving browsers as `site` says, counting in `metrics`, signing
    /// answers with `signer` and paging people through `webhooks`.
    pub fn observed(
        store: Store,
        reviewers: Reviewers,
        pools: Vec<String>,
        site: Site,
        metrics: Arc<Metrics>,
        signer: Option<Arc<SigningKey>>,
        webhooks: Webhooks,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<OutboxEntry>) {
        let (outbox, answers) = mpsc::unbounded_channel();
        let shared = Shared {
            reviewers,
            pools,
            sessions: Sessions::new(store.clone(), site.session_ttl),
            store,
            logins: LoginLimiter::new(site.login_limit),
            site,
            changes: broadcast::channel(1024).0,
            stop: CancellationToken::new(),
            changed: Notify::new(),
            deadlines: Notify::new(),
            webhooks,
            webhooks_due: Notify::new(),
            outbox,
            metrics,
            signer,
        };
        (Arc::new(shared), answers)
    }

    /// Whether this service serves `pool`.
    pub fn serves(&self, pool: &str) -> bool {
        self.pools.iter().any(|p| p == pool)
    }

    /// Records an answer to `task` if it is still pending, and hands the answer to the outbox.
    /// The first answer wins: a later one changes nothing and gets [`Decided::NotPending`].
    pub async fn decide(
        &self,
        task: &Task,
        decision: Decision,
        explanation: String,
        decided_by: &str,
    ) -> Result<Decided, StoreError> {
        let verdict = Verdict { decision, explanation, decided_by: decided_by.to_owned(), decided_at: now_ms() };
        let decider = if decided_by == DECIDED_BY_TIMEOUT { "timeout" } else { "person" };
        self.record(task, verdict, None, decider).await
    }

    /// [`Shared::decide`] `modify` as `reviewer`, the answer carrying `call` (the task's call
    /// with the person's arguments).
    pub async fn modify(
        &self,
        task: &Task,
        call: v1::ToolCall,
        explanation: String,
        reviewer: &str,
    ) -> Result<Decided, StoreError> {
        let verdict =
            Verdict { decision: Decision::Modify, explanation, decided_by: reviewer.to_owned(), decided_at: now_ms() };
        self.record(task, verdict, Some(call), "person").await
    }

    /// Records `verdict` (with the `modified` call of a modify) as [`Shared::decide`] does,
    /// measured as `decider`'s (`person`, `timeout` or `standing`).
    pub(crate) async fn record(
        &self,
        task: &Task,
        verdict: Verdict,
        modified: Option<v1::ToolCall>,
        decider: &'static str,
    ) -> Result<Decided, StoreError> {
        let recording = self.recording(task, verdict, modified);
        let Recording { verdict, answer, lease_until, webhooks } = &recording;
        let decided = self.store.decide(task, verdict, answer, *lease_until, webhooks).await?;
        if let Decided::Recorded(entry) = &decided {
            self.recorded(task, &recording, entry, decider);
        }
        Ok(decided)
    }

    /// What recording `verdict` on `task` (with the `modified` call of a modify) writes: the
    /// signed answer, its outbox lease, the webhooks announcing it.
    fn recording(&self, task: &Task, verdict: Verdict, modified: Option<v1::ToolCall>) -> Recording {
        let mut result = task.step_result(&verdict);
        if let Some(answer) = result.answer.as_mut() {
            answer.modified = modified;
        }
        if let Some(key) = &self.signer {
            sign_human_answer(key, &mut result);
        }
        let lease_until = verdict.decided_at + OUTBOX_LEASE.as_millis() as i64;
        let decided_task = Task { state: State::Decided(verdict.clone()), ..task.clone() };
        let kind = Webhooks::decision_kind(&verdict.decided_by);
        let webhooks = self.webhooks.announce(kind, &decided_task, self.site.public_url.as_ref());
        Recording { answer: result.encode_to_vec(), verdict, lease_until, webhooks }
    }

    /// After a decision was recorded: measures it as `decider`'s, wakes the webhook sender,
    /// hands the answer to the outbox.
    fn recorded(&self, task: &Task, recording: &Recording, entry: &OutboxEntry, decider: &'static str) {
        let Verdict { decision, decided_by, decided_at, .. } = &recording.verdict;
        let labels = ReviewLabels { pool: task.pool.clone(), decider: decider.into() };
        let waited = (decided_at - task.received_at).max(0) as f64 / 1000.0;
        self.metrics.review_seconds.get_or_create(&labels).observe(waited);
        if !recording.webhooks.is_empty() {
            self.webhooks_due.notify_one();
        }
        debug!(task = %task.id, correlation = %Logged(&task.correlation), %decision, %decided_by, "Task decided.");
        if self.outbox.send(entry.clone()).is_err() {
            // The outbox stopped (shutdown): the answer waits in the store for the next start.
            warn!(task = %task.id, "Outbox stopped; the answer is sent after the next start.");
        }
        self.poke();
    }

    /// Tells the watcher the pending list changed here.
    pub fn poke(&self) {
        self.changed.notify_one();
    }
}

/// Sets the per-pool gauges of the served pools from the store's pending list at `now`: every
/// process sharing a store reports the same figures (aggregate them with `max`, not `sum`).
fn gauge_pending(shared: &Shared, pending: &[PendingId], now: i64) {
    for pool in &shared.pools {
        let received: Vec<i64> = pending.iter().filter(|p| &p.pool == pool).map(|p| p.received_at).collect();
        let labels = PoolLabels { pool: pool.clone() };
        shared.metrics.review_pending.get_or_create(&labels).set(received.len() as i64);
        let age = received.iter().min().map_or(0, |at| (now - at).max(0) / 1000);
        shared.metrics.review_oldest_pending.get_or_create(&labels).set(age);
    }
}

/// Follows the pending list and broadcasts what appears and leaves, whichever process of a
/// shared store changed it, and keeps the pending gauges: woken at once by local changes, and
/// every [`WATCH_INTERVAL`].
pub async fn watch(shared: Arc<Shared>) {
    let mut known: HashMap<String, String> = HashMap::new();
    let mut first = true;
    loop {
        match shared.store.pending_ids().await {
            Ok(pending) => {
                gauge_pending(&shared, &pending, now_ms());
                let now: HashMap<String, String> = pending.into_iter().map(|p| (p.id, p.pool)).collect();
                if !first {
                    for (id, pool) in &known {
                        if !now.contains_key(id) {
                            let _ = shared.changes.send(Change::Removed { id: id.clone(), pool: pool.clone() });
                        }
                    }
                    for (id, pool) in &now {
                        if !known.contains_key(id) {
                            let _ = shared.changes.send(Change::Added { id: id.clone(), pool: pool.clone() });
                        }
                    }
                }
                known = now;
                first = false;
            }
            Err(e) => warn!(error = %e, "Reading the pending list failed."),
        }
        tokio::select! {
            () = shared.stop.cancelled() => return,
            () = shared.changed.notified() => {}
            () = tokio::time::sleep(WATCH_INTERVAL) => {}
        }
    }
}

mod approvals;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{human, memory_store};
    use crate::store::Inserted;

    #[tokio::test]
    async fn decisions_and_pending_tasks_are_measured_per_pool() {
        let pools = vec!["ops".to_owned(), "security".to_owned()];
        let (shared, _outbox) = Shared::new(memory_store().await, Reviewers::default(), pools);
        let Inserted::Created(id) = shared.store.insert(&human("ops", "s1", "c1", false, 0), 1_000).await.unwrap()
        else {
            panic!()
        };
        gauge_pending(&shared, &shared.store.pending_ids().await.unwrap(), 61_000);
        let text = shared.metrics.render();
        assert!(text.contains("airlock_reviewer_pending{pool=\"ops\"} 1"), "{text}");
        assert!(text.contains("airlock_reviewer_pending{pool=\"security\"} 0"), "{text}");
        assert!(text.contains("airlock_reviewer_oldest_pending_seconds{pool=\"ops\"} 60"), "{text}");

        let task = shared.store.task(&id).await.unwrap().unwrap();
        shared.decide(&task, Decision::Approve, String::new(), "alice").await.unwrap();
        gauge_pending(&shared, &shared.store.pending_ids().await.unwrap(), 62_000);
        let text = shared.metrics.render();
        assert!(text.contains("airlock_reviewer_decision_seconds_count{pool=\"ops\",decider=\"person\"} 1"), "{text}");
        assert!(text.contains("airlock_reviewer_pending{pool=\"ops\"} 0"), "{text}");
        assert!(text.contains("airlock_reviewer_oldest_pending_seconds{pool=\"ops\"} 0"), "{text}");
    }
}
