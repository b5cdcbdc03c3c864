//! A log of the fleet, followed: a task reads each entry as it is appended and folds it into
//! what the process decides by: the control state for the control log, a monitor's budgets
//! for the log of a step's scores.

use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};
use std::time::Duration;

use airlock_contract::v1::{self, control_event::Event};
use airlock_records::time::now_ms;
use airlock_telemetry::metrics::Metrics;
use airlock_transport::{Follower, Message, Topology, Transport, TransportError};
use prost::Message as _;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::state::ControlState;

/// How long opening waits to read its own `Joined` back before it gives up.
pub const CATCH_UP_LIMIT: Duration = Duration::from_secs(60);

/// The control log could not be followed.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The transport failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The log ended, or did not bring this process's own entry back in time.
    #[error("the control log did not catch up: {0}")]
    CatchUp(&'static str),
}

/// The fleet's control state as it stands, shared by every task of a process.
#[derive(Debug, Clone)]
pub struct ControlView(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    state: RwLock<ControlState>,
    /// The number of entries folded in, sent after each one.
    applied: watch::Sender<u64>,
}

impl Default for ControlView {
    fn default() -> Self {
        ControlView::of(ControlState::default())
    }
}

impl ControlView {
    /// A view of `state`, followed by nothing: for tools and tests.
    pub fn of(state: ControlState) -> Self {
        let applied = watch::Sender::new(state.entries());
        ControlView(Arc::new(Shared { state: RwLock::new(state), applied }))
    }

    /// The state now. Held briefly: the follower waits for it to append.
    pub fn read(&self) -> RwLockReadGuard<'_, ControlState> {
        self.0.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The number of entries folded in, changed after each: for whoever acts on what the
    /// state says as soon as it changes, rather than at the next call.
    pub fn applied(&self) -> watch::Receiver<u64> {
        self.0.applied.subscribe()
    }

    fn apply(&self, event: &v1::ControlEvent) {
        let entries = {
            let mut state = self.0.state.write().unwrap_or_else(PoisonError::into_inner);
            state.apply(event);
            state.entries()
        };
        self.0.applied.send_replace(entries);
    }
}

/// What a process folds the entries of a log into.
pub trait Fold: Clone + Send + Sync + 'static {
    /// Folds one entry in.
    fn fold(&self, entry: &v1::ControlEvent);
}

impl Fold for ControlView {
    fn fold(&self, entry: &v1::ControlEvent) {
        self.apply(entry);
    }
}

/// A log of the fleet (the control log, by default), as one process appends to it and
/// follows it, folding its entries into `F`.
#[derive(Debug, Clone)]
pub struct ControlLog<T, F = ControlView> {
    transport: T,
    log: String,
    by: Arc<str>,
    view: F,
}

impl<T: Transport> ControlLog<T> {
    /// Follows the control log of `topology` as `by` (see [`ControlLog::follow`]), counting
    /// in `metrics` how long each switch and incident took to arrive.
    pub async fn open(
        transport: T,
        topology: &Topology,
        by: impl Into<String>,
        metrics: Option<Arc<Metrics>>,
    ) -> Result<Self, ControlError> {
        Self::follow(transport, topology.control_log(), by, ControlView::default(), metrics).await
    }
}

impl<T: Transport, F: Fold> ControlLog<T, F> {
    /// Follows the log `log` as `by` (recorded with what it appends), folding its entries into
    /// `fold`: reads every entry kept, appends a `Joined` of its own and reads on until it comes
    /// back, so `fold` holds everything appended before this returns; then a task keeps it
    /// current until the transport closes.
    pub async fn follow(
        transport: T,
        log: String,
        by: impl Into<String>,
        fold: F,
        metrics: Option<Arc<Metrics>>,
    ) -> Result<Self, ControlError> {
        let mut follower = transport.follow(&log).await?;
        let control = ControlLog { transport, log, by: by.into().into(), view: fold };
        let nonce = uuid::Uuid::now_v7().to_string();
        control.append(Event::Joined(v1::Joined { nonce: nonce.clone() })).await?;
        let caught_up = async {
            loop {
                let Some(message) = follower.next().await else {
                    return Err(ControlError::CatchUp("the transport closed"));
                };
                if let Some(event) = decode(&message) {
                    control.view.fold(&event);
                    if matches!(&event.event, Some(Event::Joined(joined)) if joined.nonce == nonce) {
                        return Ok(());
                    }
                }
            }
        };
        tokio::time::timeout(CATCH_UP_LIMIT, caught_up)
            .await
            .map_err(|_| ControlError::CatchUp("its own entry did not come back in time"))??;
        info!(log = %control.log, "Log read to its end.");
        tokio::spawn(follow(follower, control.view.clone(), metrics));
        Ok(control)
    }

    /// What the entries are folded into, kept current.
    pub fn view(&self) -> &F {
        &self.view
    }

    /// Appends `event`, stamped with now and who appends it; returns once the broker holds it.
    pub async fn append(&self, event: Event) -> Result<(), TransportError> {
        self.append_as(&self.by, event).await
    }

    /// Appends `event` as `by`, a person this process acts for (a reviewer who marks an
    /// incident, an admin who throws a switch), stamped with now; returns once the broker
    /// holds it.
    pub async fn append_as(&self, by: &str, event: Event) -> Result<(), TransportError> {
        let entry = stamp(by, event);
        self.transport.publish(&Topology::log_route(&self.log), Message::new(entry.encode_to_vec())).await
    }
}

/// An entry as appended by `by`, now.
pub fn stamp(by: &str, event: Event) -> v1::ControlEvent {
    v1::ControlEvent { at_unix_ms: now_ms(), by: by.to_owned(), event: Some(event) }
}

/// Folds each new entry into `view` until the transport closes.
async fn follow(mut follower: Follower, view: impl Fold, metrics: Option<Arc<Metrics>>) {
    while let Some(message) = follower.next().await {
        let Some(event) = decode(&message) else { continue };
        view.fold(&event);
        if matches!(event.event, Some(Event::RunSwitch(_) | Event::Incident(_))) {
            let lag = Duration::from_millis(u64::try_from(now_ms() - event.at_unix_ms).unwrap_or(0));
            info!(by = %event.by, lag_ms = lag.as_millis() as u64, "Control entry applied.");
            if let Some(metrics) = &metrics {
                metrics.control_lag.observe(lag.as_secs_f64());
            }
        }
    }
}

/// An entry of the log, or `None` (logged) for one that is not a `ControlEvent`: no entry
/// can stop the fleet from reading the rest.
fn decode(message: &Message) -> Option<v1::ControlEvent> {
    match v1::ControlEvent::decode(message.body.as_ref()) {
        Ok(event) => Some(event),
        Err(error) => {
            warn!(%error, publisher = ?message.user_id, "Control log entry skipped: not an airlock.v1.ControlEvent.");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use airlock_contract::v1::ControlResponse;
    use airlock_transport::MemoryTransport;

    use super::*;
    use crate::state::Switch;

    #[tokio::test]
    async fn an_entry_appended_for_a_person_reaches_every_follower_and_wakes_its_watchers() {
        let transport = MemoryTransport::new();
        let topology = Topology::empty("t").with_control_log();
        transport.declare(&topology).await.unwrap();
        let reviewer = ControlLog::open(transport.clone(), &topology, "reviewer-1", None).await.unwrap();
        let worker = ControlLog::open(transport.clone(), &topology, "worker-1", None).await.unwrap();
        let mut applied = worker.view().applied();
        let before = *applied.borrow_and_update();
        assert_eq!(before, worker.view().read().entries());

        let switch = v1::RunSwitch {
            run: Some(v1::RunRef { run_id: "r1".into(), tenant: String::new() }),
            response: ControlResponse::Terminate.into(),
            ..Default::default()
        };
        reviewer.append_as("alice", Event::RunSwitch(switch)).await.unwrap();
        tokio::time::timeout(CATCH_UP_LIMIT, applied.changed()).await.expect("woken").unwrap();
        assert!(*applied.borrow() > before);
        let state = worker.view().read();
        let switched = state.run("", "r1").and_then(|run| run.switch).expect("the switch arrived");
        assert_eq!((&switched.response, switched.by.as_str()), (&Switch::Terminate, "alice"));
    }
}
