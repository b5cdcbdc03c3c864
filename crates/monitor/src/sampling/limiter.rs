//! A provider's rate limit, held by every process that shares the provider's account: the
//! limiter `<name>` allows `N` requests per minute to all of them together.
//!
//! Every process of a limiter appends a beat to the log `<p>.limiter.<name>` every
//! [`BEAT`] and follows it; the processes live now are those whose last entry is younger than
//! [`LIVE_FOR`]. Each paces its own requests one every `live × 60 s / N`: together at most `N`
//! a minute (plus one request per process at the edge of a window). A process that joins
//! appends its first beat before its first request, so the others slow down as soon as they
//! read it; one that dies stops beating, and the others take its share [`LIVE_FOR`] later, so
//! the limit holds in both directions. A 429 with `Retry-After` is published as a pause in a
//! beat: no process of the limiter sends anything until it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_contract::v1::{self, control_event::Event};
use airlock_control::{ControlError, ControlLog, Fold};
use airlock_records::time::now_ms;
use airlock_telemetry::metrics::Metrics;
use airlock_transport::Transport;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{info, warn};

/// How often a process says it is alive.
pub const BEAT: Duration = Duration::from_secs(5);
/// How long after its last entry a process counts as alive: three beats.
pub const LIVE_FOR: Duration = Duration::from_secs(15);

/// One process's part of a fleet-wide rate limit.
#[derive(Debug)]
pub struct Limiter {
    per_minute: u32,
    own: Arc<str>,
    peers: Arc<Mutex<Peers>>,
    /// When this process may send its next request.
    next: Mutex<Instant>,
    /// Pauses to publish, as their end (unix ms).
    outbox: Option<mpsc::UnboundedSender<i64>>,
    metrics: Arc<Metrics>,
}

/// What the limiter's log says: the last entry of each process, and the latest pause.
#[derive(Debug, Default)]
struct Peers {
    last_seen: HashMap<String, i64>,
    paused_until: i64,
}

impl Limiter {
    /// A limiter of `per_minute` requests for process `own` alone (see [`shared`]).
    pub fn new(per_minute: u32, own: &str, metrics: Arc<Metrics>) -> Self {
        Limiter {
            per_minute: per_minute.max(1),
            own: own.into(),
            peers: Arc::default(),
            next: Mutex::new(Instant::now()),
            outbox: None,
            metrics,
        }
    }

    /// Waits until this process may send a request, and takes that slot.
    pub async fn acquire(&self) {
        loop {
            if let Some(pause) = self.paused_for() {
                tokio::time::sleep(pause).await;
                continue;
            }
            let live = self.processes();
            self.metrics.limiter_processes.set(live as i64);
            let slot = {
                let mut next = lock(&self.next);
                let slot = (*next).max(Instant::now());
                *next = slot + interval(self.per_minute, live);
                slot
            };
            tokio::time::sleep_until(slot).await;
            // A pause published while this waited holds this request back too.
            if self.paused_for().is_none() {
                return;
            }
        }
    }

    /// The processes of the limiter alive now, this one included: each takes that share.
    pub fn processes(&self) -> usize {
        lock(&self.peers).live(&self.own, now_ms())
    }

    /// The provider asked to wait `wait`: no process of the limiter sends until then.
    pub fn pause(&self, wait: Duration) {
        let until = now_ms() + i64::try_from(wait.as_millis()).unwrap_or(i64::MAX / 2);
        lock(&self.peers).pause(until);
        if let Some(outbox) = &self.outbox {
            let _ = outbox.send(until);
        }
    }

    /// How long the processes of the limiter still wait, if the provider asked them to.
    pub fn paused_for(&self) -> Option<Duration> {
        let left = lock(&self.peers).paused_until - now_ms();
        (left > 0).then(|| Duration::from_millis(left.unsigned_abs()))
    }
}

/// The time between two requests of one process when `live` processes share `per_minute`.
pub fn interval(per_minute: u32, live: usize) -> Duration {
    Duration::from_secs(60) * u32::try_from(live.max(1)).unwrap_or(u32::MAX) / per_minute.max(1)
}

impl Peers {
    /// The processes alive at `now`: `own` and each whose last entry is younger than
    /// [`LIVE_FOR`].
    fn live(&self, own: &str, now: i64) -> usize {
        let since = now - i64::try_from(LIVE_FOR.as_millis()).unwrap_or(i64::MAX);
        1 + self.last_seen.iter().filter(|(by, at)| by.as_str() != own && **at > since).count()
    }

    fn seen(&mut self, by: &str, at: i64) {
        let last = self.last_seen.entry(by.to_owned()).or_default();
        *last = (*last).max(at);
    }

    fn pause(&mut self, until: i64) {
        self.paused_until = self.paused_until.max(until);
    }
}

/// Folds the limiter's log: every entry is a beat of its appender, some carry a pause.
#[derive(Debug, Clone)]
struct Beats(Arc<Mutex<Peers>>);

impl Fold for Beats {
    fn fold(&self, entry: &v1::ControlEvent) {
        let mut peers = lock(&self.0);
        peers.seen(&entry.by, entry.at_unix_ms);
        if let Some(Event::Beat(beat)) = &entry.event {
            peers.pause(beat.pause_until_unix_ms);
        }
    }
}

/// `limiter` shared through the log `log` as process `id` (unique to the process): the log is
/// read to its end before this returns, so the limiter knows who is alive; then a task beats
/// every [`BEAT`] and publishes the limiter's pauses until the transport closes.
pub async fn shared<T: Transport>(
    transport: T,
    log: String,
    id: &str,
    limiter: Limiter,
) -> Result<Arc<Limiter>, ControlError> {
    let (outbox, mut pauses) = mpsc::unbounded_channel();
    let limiter = Arc::new(Limiter { outbox: Some(outbox), ..limiter });
    let name = log.clone();
    let log = ControlLog::follow(transport, log, id, Beats(limiter.peers.clone()), None).await?;
    info!(log = %name, live = limiter.processes(), per_minute = limiter.per_minute, "Rate limiter joined.");
    tokio::spawn(async move {
        let mut beat = tokio::time::interval(BEAT);
        loop {
            let pause_until_unix_ms = tokio::select! {
                _ = beat.tick() => 0,
                pause = pauses.recv() => match pause {
                    Some(until) => until,
                    None => return,
                },
            };
            if let Err(error) = log.append(Event::Beat(v1::LimiterBeat { pause_until_unix_ms })).await {
                // Unheard, this process counts as gone: the others may send more, until the
                // provider's 429s slow everyone down.
                warn!(%error, "The rate limiter's beat was not appended.");
            }
        }
    });
    Ok(limiter)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_live_process_takes_its_share() {
        assert_eq!(interval(60, 1), Duration::from_secs(1));
        assert_eq!(interval(60, 3), Duration::from_secs(3));
        assert_eq!(interval(600, 2), Duration::from_millis(200));
        assert_eq!(interval(0, 0), Duration::from_secs(60), "nonsense is the slowest pace");
        // Over a window W each of p processes sends at most W / interval + 1 requests:
        // together N·W/60 + p.
        let (per_minute, processes, window) = (120u32, 4usize, Duration::from_secs(30));
        let each = window.as_millis() / interval(per_minute, processes).as_millis() + 1;
        assert_eq!(each * processes as u128, u128::from(per_minute) / 2 + processes as u128);
    }

    #[test]
    fn processes_are_alive_until_they_stop_beating() {
        let mut peers = Peers::default();
        let now = 1_000_000;
        assert_eq!(peers.live("me", now), 1, "a process alone has the whole limit");
        peers.seen("me", now - 100);
        peers.seen("a", now - 1_000);
        peers.seen("b", now - 14_000);
        peers.seen("gone", now - 16_000);
        assert_eq!(peers.live("me", now), 3);
        peers.seen("gone", now - 15_500);
        peers.seen("gone", now - 20_000);
        assert_eq!(peers.live("me", now), 3, "an older entry read late changes nothing");
        assert_eq!(peers.live("me", now + 2_000), 2, "b stopped beating");
        peers.pause(now + 5_000);
        peers.pause(now + 1_000);
        assert_eq!(peers.paused_until, now + 5_000, "the longest pause holds");
    }

    #[tokio::test]
    async fn a_pause_is_kept_until_it_ends() {
        let limiter = Limiter::new(6_000, "me", Arc::default());
        limiter.acquire().await;
        limiter.pause(Duration::from_secs(2));
        assert!(limiter.paused_for().is_some_and(|left| left > Duration::from_secs(1)));
    }
}
