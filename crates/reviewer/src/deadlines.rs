//! Deadlines: a pending task whose deadline passed gets its step's `on_timeout` decision,
//! recorded as decided by [`DECIDED_BY_TIMEOUT`](crate::task::DECIDED_BY_TIMEOUT), through the
//! same path as a person's answer ([`Desk::time_out`]; a person who answered first wins).
//! The same loop moves a task nobody answered within its step's `reroute_after` to the next
//! pool ([`Desk::reroute`]), and warns once that a task expires ([`Desk::warn`]).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use airlock_records::time::now_ms;

use airlock_transport::{Topology, Transport};

use crate::desk::Desk;
use crate::intake::tell_runner;
use crate::logged::Logged;
use crate::store::StoreError;
use crate::task::Task;

/// The longest sleep between looks at the store (other processes may add tasks to a shared
/// store without waking this one).
const MAX_SLEEP: Duration = Duration::from_secs(5);
/// The pause before retrying a deadline that could not be answered.
const RETRY: Duration = Duration::from_millis(500);

/// How long to sleep before the next look, given the earliest pending deadline.
pub fn sleep_for(next_deadline: Option<i64>, now: i64) -> Duration {
    match next_deadline {
        Some(deadline) if deadline > now => Duration::from_millis((deadline - now) as u64).min(MAX_SLEEP),
        // Only when answering failed (the store is down): retry soon, without spinning.
        Some(_) => RETRY,
        None => MAX_SLEEP,
    }
}

/// Answers the `desk`'s expired tasks, moves those due to move and warns of those about to
/// expire (their runners told through `transport` of fleet `topology`), until `stop`.
pub async fn run<T: Transport>(desk: Arc<Desk>, stop: CancellationToken, transport: T, topology: Topology) {
    loop {
        let now = now_ms();
        for task in found(desk.store().expired(now).await, "expired tasks") {
            match desk.time_out(&task).await {
                Ok(_) => {
                    let decision = task.on_timeout();
                    info!(task = %task.id, correlation = %Logged(&task.correlation), %decision, "Deadline passed.")
                }
                Err(e) => warn!(task = %task.id, error = %e, "Answering an expired task failed."),
            }
        }
        for task in found(desk.store().rerouting(now).await, "tasks to move") {
            match desk.reroute(&task).await {
                Ok(_) => {
                    let to = task.reroute_to().unwrap_or_default();
                    info!(task = %task.id, correlation = %Logged(&task.correlation), pool = %task.pool, %to, "Nobody answered in time; the task moves on.")
                }
                Err(e) => warn!(task = %task.id, error = %e, "Moving a task to its next pool failed."),
            }
        }
        for task in found(desk.store().expiring(now).await, "tasks about to expire") {
            match desk.warn(&task).await {
                Ok(true) => {
                    let call = (task.correlation.as_str(), task.reply_to());
                    tell_runner(&transport, &topology, call, task.warning(), &task.id).await;
                }
                Ok(false) => {}
                Err(e) => warn!(task = %task.id, error = %e, "Warning that a task expires failed."),
            }
        }
        let next = desk.store().next_deadline().await.unwrap_or(None);
        let sleep = sleep_for(next, now_ms());
        tokio::select! {
            () = stop.cancelled() => return,
            () = desk.deadlines().notified() => {}
            () = tokio::time::sleep(sleep) => {}
        }
    }
}

/// The tasks a look for `what` found: none when the look failed (logged; the next one tries
/// again).
fn found(looked: Result<Vec<Task>, StoreError>, what: &str) -> Vec<Task> {
    looked.unwrap_or_else(|e| {
        warn!(error = %e, "Looking for {what} failed.");
        Vec::new()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_until_the_next_deadline_at_most_max() {
        assert_eq!(sleep_for(None, 1_000), MAX_SLEEP);
        assert_eq!(sleep_for(Some(1_500), 1_000), Duration::from_millis(500));
        assert_eq!(sleep_for(Some(900), 1_000), RETRY);
        assert_eq!(sleep_for(Some(1_000 + 3_600_000), 1_000), MAX_SLEEP);
    }
}
