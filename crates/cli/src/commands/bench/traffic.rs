//! Closed-loop load: `inflight` tasks, each sending its next request as soon as the previous
//! one is answered, until `requests` were sent; the latency of every answered request. Each
//! side of the bench is a [`Requester`] driven through a [`Load`].

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::Settings;
use super::children::Children;
use crate::commands::Failure;

/// One side's requesting end: sends a request and waits for its answer.
pub trait Requester: Send + Sync + 'static {
    /// Sends request `index` of run `run` (no two runs share a name) and waits for it.
    fn call(self: Arc<Self>, run: Arc<str>, index: u64) -> impl Future<Output = Outcome> + Send + 'static;

    /// Replies that matched nothing pending over the whole bench (duplicates or late ones).
    fn duplicates(&self) -> u64;
}

/// A side's requester, probed and warmed up: ready to measure.
pub struct Load<R> {
    requester: Arc<R>,
    runs: u32,
}

impl<R: Requester> Load<R> {
    /// Sends one request alone (a side that does not answer fails after one timeout, not
    /// after a whole warm-up of them), then warms up. `silent` says what a side that did not
    /// answer the probe may lack.
    pub async fn start(
        requester: R,
        settings: &Settings,
        children: &mut Children,
        silent: impl FnOnce() -> String,
    ) -> Result<Self, Failure> {
        let load = Load { requester: Arc::new(requester), runs: 0 };
        let probe = load.drive("probe", 1, 1).await;
        children.check_alive()?;
        if probe.answered == 0 {
            return Err(Failure::other(format!(
                "no answer within {:.0}s: {}",
                settings.timeout.as_secs_f64(),
                silent()
            )));
        }
        load.warm_up(0, settings).await;
        Ok(load)
    }

    /// Warm-up round `round`: `settings.warmup` requests, not measured.
    pub async fn warm_up(&self, round: u32, settings: &Settings) {
        self.drive(&format!("warmup-{round}"), settings.warmup, settings.inflight).await;
    }

    /// Measures `requests` requests, `inflight` at a time.
    pub async fn run(&mut self, requests: u64, inflight: usize) -> Phase {
        self.runs += 1;
        self.drive(&format!("measured-{}", self.runs), requests, inflight).await
    }

    /// The requester.
    pub fn requester(&self) -> &R {
        &self.requester
    }

    async fn drive(&self, run: &str, requests: u64, inflight: usize) -> Phase {
        let (requester, run) = (self.requester.clone(), Arc::<str>::from(run));
        drive(requests, inflight, move |index| requester.clone().call(run.clone(), index)).await
    }
}

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered by the other side.
    Answered,
    /// Failed closed (no answer in time) or failed.
    Lost,
}

/// What one phase of load measured.
#[derive(Debug, Clone, Default)]
pub struct Phase {
    /// Requests sent.
    pub requests: u64,
    /// Requests answered.
    pub answered: u64,
    /// Requests lost.
    pub lost: u64,
    /// From the first request sent to the last one settled.
    pub elapsed: Duration,
    /// Latencies of the answered requests, in nanoseconds, sorted.
    latencies: Vec<u64>,
}

impl Phase {
    /// Adds the requests of `other`, measured separately, to this phase.
    pub fn merge(&mut self, other: Phase) {
        self.requests += other.requests;
        self.answered += other.answered;
        self.lost += other.lost;
        self.elapsed += other.elapsed;
        self.latencies.extend(other.latencies);
        self.latencies.sort_unstable();
    }

    /// Answered requests per second over the phase.
    pub fn throughput(&self) -> f64 {
        let seconds = self.elapsed.as_secs_f64();
        if seconds > 0.0 { self.answered as f64 / seconds } else { 0.0 }
    }

    /// The latency at quantile `q` (nearest rank), in milliseconds; 0 when nothing was answered.
    pub fn percentile_ms(&self, q: f64) -> f64 {
        if self.latencies.is_empty() {
            return 0.0;
        }
        let rank = (q * self.latencies.len() as f64).ceil() as usize;
        let index = rank.clamp(1, self.latencies.len()) - 1;
        self.latencies[index] as f64 / 1e6
    }
}

/// Sends `requests` requests through `call` (given each request's index), `inflight` at a
/// time, and measures them.
pub async fn drive<F, Fut>(requests: u64, inflight: usize, call: F) -> Phase
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    let next = Arc::new(AtomicU64::new(0));
    let lanes = u64::try_from(inflight.max(1)).unwrap_or(u64::MAX).min(requests);
    let started = Instant::now();
    let mut lanes_running = JoinSet::new();
    for _ in 0..lanes {
        let (next, call) = (next.clone(), call.clone());
        lanes_running.spawn(async move {
            let mut latencies = Vec::new();
            let mut lost = 0;
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= requests {
                    break;
                }
                let sent = Instant::now();
                match call(index).await {
                    Outcome::Answered => latencies.push(nanos(sent.elapsed())),
                    Outcome::Lost => lost += 1,
                }
            }
            (latencies, lost)
        });
    }
    let mut phase = Phase { requests, ..Phase::default() };
    while let Some(lane) = lanes_running.join_next().await {
        // A lane only ends by running out of requests; a panic in one is a bug worth seeing.
        let (latencies, lost) = lane.expect("a load lane panicked");
        phase.latencies.extend(latencies);
        phase.lost += lost;
    }
    phase.elapsed = started.elapsed();
    phase.answered = phase.latencies.len() as u64;
    phase.latencies.sort_unstable();
    phase
}

fn nanos(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn every_request_is_sent_once_and_counted() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        let phase = drive(100, 8, move |index| {
            let record = record.clone();
            async move {
                record.lock().unwrap().push(index);
                if index % 10 == 0 { Outcome::Lost } else { Outcome::Answered }
            }
        })
        .await;
        let mut seen = seen.lock().unwrap().clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
        assert_eq!((phase.requests, phase.answered, phase.lost), (100, 90, 10));
    }

    #[test]
    fn merged_phases_add_up() {
        let mut phase =
            Phase { requests: 3, answered: 2, lost: 1, elapsed: Duration::from_secs(1), latencies: vec![1, 5] };
        phase.merge(Phase {
            requests: 2,
            answered: 2,
            lost: 0,
            elapsed: Duration::from_secs(3),
            latencies: vec![2, 9],
        });
        assert_eq!((phase.requests, phase.answered, phase.lost), (5, 4, 1));
        assert_eq!(phase.latencies, vec![1, 2, 5, 9]);
        assert_eq!(phase.throughput(), 1.0);
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let phase = Phase { latencies: (1..=100).map(|ms| ms * 1_000_000).collect(), ..Phase::default() };
        assert_eq!(phase.percentile_ms(0.5), 50.0);
        assert_eq!(phase.percentile_ms(0.99), 99.0);
        assert_eq!(phase.percentile_ms(1.0), 100.0);
        assert_eq!(Phase::default().percentile_ms(0.5), 0.0);
    }
}
