//! The bench's report: readable text, or one JSON object for scripts.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

use super::Settings;
use super::cpu::Cpu;
use super::traffic::Phase;

/// Target: the fleet's throughput over the bare echo's.
pub const TARGET_RATIO: f64 = 0.8;
/// Target: the most the fleet may add to the bare echo's median latency, in milliseconds.
pub const TARGET_ADDED_P50_MS: f64 = 0.3;
/// Target: a worker's peak resident memory under full load, in MB.
pub const TARGET_WORKER_RSS_MB: f64 = 50.0;
/// Target: the most CPU a worker may spend per decision beyond the bare responder's per
/// echo, in microseconds.
pub const TARGET_WORKER_ADDED_CPU_US: f64 = 15.0;
/// Target: the runner's CPU per round trip, in microseconds.
pub const TARGET_RUNNER_CPU_US: f64 = 30.0;

const MB: f64 = 1024.0 * 1024.0;

/// One side of the comparison.
#[derive(Debug, Default)]
pub struct Side {
    /// The measured rounds.
    pub phase: Phase,
    /// Replies that matched nothing pending.
    pub duplicates: u64,
    /// CPU time spent during the measured rounds.
    pub cpu: Cpu,
}

impl Side {
    /// Adds one measured round.
    pub fn add(&mut self, (phase, cpu): (Phase, Cpu)) {
        self.phase.merge(phase);
        self.cpu.add(cpu);
    }

    /// Microseconds of `spent` per answered round trip.
    fn per_round_trip(&self, spent: Option<Duration>) -> Option<f64> {
        let answered = self.phase.answered;
        spent.filter(|_| answered > 0).map(|spent| spent.as_secs_f64() * 1e6 / answered as f64)
    }

    /// CPU per round trip in the runner, the responder and the broker, in microseconds.
    fn cpu_us(&self) -> [Option<f64>; 3] {
        let cpu = &self.cpu;
        [self.per_round_trip(Some(cpu.runner)), self.per_round_trip(cpu.responder), self.per_round_trip(cpu.broker)]
    }

    fn json(&self) -> Value {
        let phase = &self.phase;
        let [runner, responder, broker] = self.cpu_us().map(|us| us.map(|us| round(us, 1)));
        json!({
            "requests": phase.requests,
            "answered": phase.answered,
            "lost": phase.lost,
            "duplicates": self.duplicates,
            "throughput_rps": round(phase.throughput(), 1),
            "p50_ms": round(phase.percentile_ms(0.5), 3),
            "p99_ms": round(phase.percentile_ms(0.99), 3),
            "elapsed_s": round(phase.elapsed.as_secs_f64(), 3),
            "cpu_us_per_round_trip": {"runner": runner, "responder": responder, "broker": broker},
        })
    }
}

/// Everything a bench run measured.
#[derive(Debug)]
pub struct Report {
    /// The fleet's prefix.
    pub prefix: String,
    /// What was sent.
    pub settings: Settings,
    /// Workers the bench started (0: it used running ones).
    pub workers: u16,
    /// The encoded size of a request.
    pub request_bytes: usize,
    /// Through the fleet.
    pub fleet: Side,
    /// Through the echo on Airlock's transport.
    pub echo: Side,
    /// Through the bare lapin echo: the denominator.
    pub bare: Side,
    /// Peak resident memory of each worker started, in bytes.
    pub worker_rss: Vec<Option<u64>>,
    /// Requests the runner published again, unanswered past their soft deadline.
    pub repeated: u64,
    /// The first error a request met, if any.
    pub first_error: Option<String>,
}

fn round(value: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (value * scale).round() / scale
}

impl Report {
    fn ratio(&self, baseline: &Side) -> f64 {
        let baseline = baseline.phase.throughput();
        if baseline > 0.0 { self.fleet.phase.throughput() / baseline } else { 0.0 }
    }

    fn added_p50_ms(&self) -> f64 {
        self.fleet.phase.percentile_ms(0.5) - self.bare.phase.percentile_ms(0.5)
    }

    /// The workers' CPU per decision beyond the bare responder's per echo, in microseconds.
    fn worker_added_cpu_us(&self) -> Option<f64> {
        Some(self.fleet.cpu_us()[1]? - self.bare.cpu_us()[1]?)
    }

    fn runner_cpu_us(&self) -> Option<f64> {
        self.fleet.cpu_us()[0]
    }

    /// The largest peak among the workers, in MB.
    fn worker_rss_mb(&self) -> Option<f64> {
        self.worker_rss.iter().flatten().max().map(|&bytes| bytes as f64 / MB)
    }

    /// The report as one JSON object.
    pub fn json(&self) -> Value {
        let rss = self.worker_rss_mb();
        let (ratio, added) = (self.ratio(&self.bare), self.added_p50_ms());
        let (worker_cpu, runner_cpu) = (self.worker_added_cpu_us(), self.runner_cpu_us());
        json!({
            "fleet": self.fleet.json(),
            "bare_echo": self.bare.json(),
            "airlock_echo": self.echo.json(),
            "ratio": round(ratio, 3),
            "ratio_to_airlock_echo": round(self.ratio(&self.echo), 3),
            "added_p50_ms": round(added, 3),
            "worker_added_cpu_us": worker_cpu.map(|us| round(us, 1)),
            "runner_cpu_us": runner_cpu.map(|us| round(us, 1)),
            "worker_rss_mb": rss.map(|mb| round(mb, 1)),
            "workers_rss_mb": self.worker_rss.iter().map(|b| b.map(|b| round(b as f64 / MB, 1))).collect::<Vec<_>>(),
            "workers": self.workers,
            "inflight": self.settings.inflight,
            "size": self.settings.size,
            "request_bytes": self.request_bytes,
            "warmup": self.settings.warmup,
            "rounds": self.settings.rounds,
            "timeout_s": self.settings.timeout.as_secs_f64(),
            "repeats": self.settings.repeats.at_most,
            "repeated": self.repeated,
            "prefix": self.prefix,
            "first_error": self.first_error,
            "targets": {
                "ratio": TARGET_RATIO,
                "added_p50_ms": TARGET_ADDED_P50_MS,
                "worker_rss_mb": TARGET_WORKER_RSS_MB,
                "worker_added_cpu_us": TARGET_WORKER_ADDED_CPU_US,
                "runner_cpu_us": TARGET_RUNNER_CPU_US,
            },
            "meets_targets": {
                "ratio": ratio >= TARGET_RATIO,
                "added_p50_ms": added <= TARGET_ADDED_P50_MS,
                "worker_rss_mb": rss.map(|mb| mb < TARGET_WORKER_RSS_MB),
                "worker_added_cpu_us": worker_cpu.map(|us| us <= TARGET_WORKER_ADDED_CPU_US),
                "runner_cpu_us": runner_cpu.map(|us| us <= TARGET_RUNNER_CPU_US),
            },
        })
    }

    /// The report for people.
    pub fn text(&self) -> String {
        let settings = &self.settings;
        let mark = |ok: bool| if ok { "met" } else { "MISSED" };
        let mut out = String::new();
        let workers = match self.workers {
            0 => "workers already running".to_owned(),
            1 => "1 worker".to_owned(),
            n => format!("{n} workers"),
        };
        let _ = writeln!(
            out,
            "airlock bench: {} requests in {} rounds per side ({} warm-up), {} in flight, {}-byte requests, {workers}, prefix '{}'",
            settings.requests, settings.rounds, settings.warmup, settings.inflight, self.request_bytes, self.prefix
        );
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "  {:<22} {:>10} {:>10} {:>10} {:>6} {:>6}   {:>25}",
            "", "throughput", "p50", "p99", "lost", "dups", "CPU µs per round trip in"
        );
        let _ = writeln!(out, "  {:<70} {:>8} {:>9} {:>7}", "", "runner", "responder", "broker");
        let us = |value: Option<f64>| value.map_or_else(|| "-".to_owned(), |us| format!("{us:.1}"));
        let sides =
            [("airlock fleet", &self.fleet), ("bare lapin echo", &self.bare), ("airlock-transport echo", &self.echo)];
        for (name, side) in sides {
            let phase = &side.phase;
            let [runner, responder, broker] = side.cpu_us();
            let _ = writeln!(
                out,
                "  {name:<22} {:>8.0}/s {:>7.3} ms {:>7.3} ms {:>6} {:>6}   {:>8} {:>9} {:>7}",
                phase.throughput(),
                phase.percentile_ms(0.5),
                phase.percentile_ms(0.99),
                phase.lost,
                side.duplicates,
                us(runner),
                us(responder),
                us(broker)
            );
        }
        let _ = writeln!(out);
        let (ratio, added) = (self.ratio(&self.bare), self.added_p50_ms());
        let _ = writeln!(
            out,
            "  throughput ratio fleet/bare echo:  {ratio:.3}  (target >= {TARGET_RATIO}: {}; fleet/airlock echo {:.3})",
            mark(ratio >= TARGET_RATIO),
            self.ratio(&self.echo)
        );
        let _ = writeln!(
            out,
            "  added median latency:              {added:.3} ms  (target <= {TARGET_ADDED_P50_MS} ms: {})",
            mark(added <= TARGET_ADDED_P50_MS)
        );
        let _ = writeln!(
            out,
            "  requests published again:          {}  (unanswered past their soft deadline; at most {} each)",
            self.repeated, settings.repeats.at_most
        );
        let cpu_line = |what: &str, value: Option<f64>, target: f64| match value {
            Some(us) => format!("  {what:<35}{us:.1} µs  (target <= {target} µs: {})", mark(us <= target)),
            None => format!("  {what:<35}not measured"),
        };
        let _ = writeln!(
            out,
            "{}",
            cpu_line("worker CPU beyond the bare echo:", self.worker_added_cpu_us(), TARGET_WORKER_ADDED_CPU_US)
        );
        let _ = writeln!(out, "{}", cpu_line("runner CPU per round trip:", self.runner_cpu_us(), TARGET_RUNNER_CPU_US));
        match self.worker_rss_mb() {
            Some(mb) => {
                let _ = writeln!(
                    out,
                    "  worker peak RSS:                   {mb:.1} MB  (target < {TARGET_WORKER_RSS_MB} MB: {})",
                    mark(mb < TARGET_WORKER_RSS_MB)
                );
            }
            None => {
                let _ = writeln!(out, "  worker peak RSS:                   not measured (workers not started here)");
            }
        }
        if let Some(error) = &self.first_error {
            let _ = writeln!(out, "  first error: {error}");
        }
        out
    }
}
