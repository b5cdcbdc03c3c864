//! What the web side of one service process holds: the reviewers, their sessions and failed
//! sign-ins, the site, the pools shown, the store to read pages from, and the change feed
//! the UI follows. Request handlers read through it; every task they change, they change
//! through the [`Desk`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use airlock_records::review::claim::ClaimView;
use airlock_records::time::now_ms;
use airlock_telemetry::metrics::PoolLabels;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::auth::{LoginLimiter, Reviewers, Sessions};
use crate::desk::Desk;
use crate::site::Site;
use crate::store::{PendingId, Store};

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
    /// A pending task's claim was taken, extended, released or ended.
    Claimed {
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
            Change::Added { pool, .. } | Change::Removed { pool, .. } | Change::Claimed { pool, .. } => pool,
        }
    }
}

/// The web side's state.
#[derive(Debug)]
pub struct Web {
    /// The durable store, read for pages, lists and the history (tasks are written through
    /// the [`Desk`]).
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
}

impl Web {
    /// The web side over `store` for `reviewers` and `pools`, serving browsers as `site`
    /// says, until `stop`.
    pub fn new(store: Store, reviewers: Reviewers, pools: Vec<String>, site: Site, stop: CancellationToken) -> Self {
        Web {
            reviewers,
            pools,
            sessions: Sessions::new(store.clone(), site.session_ttl),
            store,
            logins: LoginLimiter::new(site.login_limit),
            site,
            changes: broadcast::channel(1024).0,
            stop,
        }
    }
}

/// Sets the per-pool gauges of the served pools from the store's pending list at `now`: every
/// process sharing a store reports the same figures (aggregate them with `max`, not `sum`).
fn gauge_pending(desk: &Desk, pending: &[PendingId], now: i64) {
    for pool in desk.pools() {
        let received: Vec<i64> = pending.iter().filter(|p| &p.pool == pool).map(|p| p.received_at).collect();
        let labels = PoolLabels { pool: pool.clone() };
        desk.metrics.review_pending.get_or_create(&labels).set(received.len() as i64);
        let age = received.iter().min().map_or(0, |at| (now - at).max(0) / 1000);
        desk.metrics.review_oldest_pending.get_or_create(&labels).set(age);
    }
}

/// Follows the pending list and broadcasts to `web`'s change feed what appears and leaves and
/// whose claim changes (a claim ending by itself included), whichever process of a shared
/// store changed it, and keeps the pending gauges: woken at once by the `desk`'s changes, and
/// every [`WATCH_INTERVAL`].
pub async fn watch(desk: Arc<Desk>, web: Arc<Web>) {
    let mut known: HashMap<String, String> = HashMap::new();
    let mut claims: HashMap<String, ClaimView> = HashMap::new();
    let mut first = true;
    loop {
        let at = now_ms();
        match desk.store().pending_ids().await {
            Ok(pending) => {
                gauge_pending(&desk, &pending, at);
                let now: HashMap<String, String> = pending.into_iter().map(|p| (p.id, p.pool)).collect();
                if !first {
                    for (id, pool) in &known {
                        if !now.contains_key(id) {
                            let _ = web.changes.send(Change::Removed { id: id.clone(), pool: pool.clone() });
                        }
                    }
                    for (id, pool) in &now {
                        if !known.contains_key(id) {
                            let _ = web.changes.send(Change::Added { id: id.clone(), pool: pool.clone() });
                        }
                    }
                }
                match desk.store().live_claims(at).await {
                    Ok(live) => {
                        let live: HashMap<String, ClaimView> = live.into_iter().collect();
                        let changed = live.iter().filter(|(id, claim)| claims.get(*id) != Some(*claim));
                        let ended = claims.keys().filter(|id| !live.contains_key(*id));
                        for id in changed.map(|(id, _)| id).chain(ended) {
                            if let Some(pool) = now.get(id).filter(|_| !first) {
                                let _ = web.changes.send(Change::Claimed { id: id.clone(), pool: pool.clone() });
                            }
                        }
                        claims = live;
                    }
                    Err(e) => warn!(error = %e, "Reading the claims failed."),
                }
                known = now;
                first = false;
            }
            Err(e) => warn!(error = %e, "Reading the pending list failed."),
        }
        tokio::select! {
            () = web.stop.cancelled() => return,
            () = desk.changed().notified() => {}
            () = tokio::time::sleep(WATCH_INTERVAL) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Reviewers;
    use crate::fixtures::{human, memory_store};
    use crate::http::AppState;
    use crate::store::Inserted;
    use airlock_policy::Decision;

    #[tokio::test]
    async fn decisions_and_pending_tasks_are_measured_per_pool() {
        let pools = vec!["ops".to_owned(), "security".to_owned()];
        let (state, _outbox) = AppState::new(memory_store().await, Reviewers::default(), pools);
        let desk = &state.desk;
        let Inserted::Created(id) = desk.store().insert(&human("ops", "s1", "c1", false, 0), 1_000).await.unwrap()
        else {
            panic!()
        };
        gauge_pending(desk, &desk.store().pending_ids().await.unwrap(), 61_000);
        let text = desk.metrics.render();
        assert!(text.contains("airlock_reviewer_pending{pool=\"ops\"} 1"), "{text}");
        assert!(text.contains("airlock_reviewer_pending{pool=\"security\"} 0"), "{text}");
        assert!(text.contains("airlock_reviewer_oldest_pending_seconds{pool=\"ops\"} 60"), "{text}");

        let task = desk.store().task(&id).await.unwrap().unwrap();
        desk.record(&task, Decision::Approve, String::new(), "alice").await.unwrap();
        gauge_pending(desk, &desk.store().pending_ids().await.unwrap(), 62_000);
        let text = desk.metrics.render();
        assert!(text.contains("airlock_reviewer_decision_seconds_count{pool=\"ops\",decider=\"person\"} 1"), "{text}");
        assert!(text.contains("airlock_reviewer_pending{pool=\"ops\"} 0"), "{text}");
        assert!(text.contains("airlock_reviewer_oldest_pending_seconds{pool=\"ops\"} 0"), "{text}");
    }
}
