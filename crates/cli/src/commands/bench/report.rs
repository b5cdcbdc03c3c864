//! The bench's report: readable text, or one JSON object for scripts.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::Settings;
use super::traffic::Phase;

/// Target: the fleet's throughput over the echo's.
pub const TARGET_RATIO: f64 = 0.8;
/// Target: the most the fleet may add to the echo's median latency, in milliseconds.
pub const TARGET_ADDED_P50_MS: f64 = 0.3;
/// Target: a worker's peak resident memory under full load, in MB.
pub const TARGET_WORKER_RSS_MB: f64 = 50.0;

const MB: f64 = 1024.0 * 1024.0;

/// One side of the comparison.
#[derive(Debug)]
pub struct Side {
    /// The measured window.
    pub phase: Phase,
    /// Replies that matched nothing pending.
    pub duplicates: u64,
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
    /// Through the bare echo.
    pub echo: Side,
    /// Peak resident memory of each worker started, in bytes.
    pub worker_rss: Vec<Option<u64>>,
    /// The first error a request met, if any.
    pub first_error: Option<String>,
}

impl Report {
    fn ratio(&self) -> f64 {
        let baseline = self.echo.phase.throughput();
        if baseline > 0.0 { self.fleet.phase.throughput() / baseline } else { 0.0 }
    }

    fn added_p50_ms(&self) -> f64 {
        self.fleet.phase.percentile_ms(0.5) - self.echo.phase.percentile_ms(0.5)
    }

    /// The largest peak among the workers, in MB.
    fn worker_rss_mb(&self) -> Option<f64> {
        self.worker_rss.iter().flatten().max().map(|&bytes| bytes as f64 / MB)
    }

    /// The report as one JSON object.
    pub fn json(&self) -> Value {
        let (fleet, echo) = (&self.fleet.phase, &self.echo.phase);
        let round = |value: f64, places: i32| {
            let scale = 10f64.powi(places);
            (value * scale).round() / scale
        };
        let rss = self.worker_rss_mb();
        json!({
            "requests": fleet.requests,
            "decided": fleet.answered,
            "lost": fleet.lost,
            "duplicates": self.fleet.duplicates,
            "throughput_rps": round(fleet.throughput(), 1),
            "p50_ms": round(fleet.percentile_ms(0.5), 3),
            "p99_ms": round(fleet.percentile_ms(0.99), 3),
            "elapsed_s": round(fleet.elapsed.as_secs_f64(), 3),
            "baseline_requests": echo.requests,
            "baseline_answered": echo.answered,
            "baseline_lost": echo.lost,
            "baseline_duplicates": self.echo.duplicates,
            "baseline_throughput_rps": round(echo.throughput(), 1),
            "baseline_p50_ms": round(echo.percentile_ms(0.5), 3),
            "baseline_p99_ms": round(echo.percentile_ms(0.99), 3),
            "baseline_elapsed_s": round(echo.elapsed.as_secs_f64(), 3),
            "ratio": round(self.ratio(), 3),
            "added_p50_ms": round(self.added_p50_ms(), 3),
            "worker_rss_mb": rss.map(|mb| round(mb, 1)),
            "workers_rss_mb": self.worker_rss.iter().map(|b| b.map(|b| round(b as f64 / MB, 1))).collect::<Vec<_>>(),
            "workers": self.workers,
            "inflight": self.settings.inflight,
            "size": self.settings.size,
            "request_bytes": self.request_bytes,
            "warmup": self.settings.warmup,
            "rounds": self.settings.rounds,
            "timeout_s": self.settings.timeout.as_secs_f64(),
            "prefix": self.prefix,
            "first_error": self.first_error,
            "targets": {
                "ratio": TARGET_RATIO,
                "added_p50_ms": TARGET_ADDED_P50_MS,
                "worker_rss_mb": TARGET_WORKER_RSS_MB,
            },
            "meets_targets": {
                "ratio": self.ratio() >= TARGET_RATIO,
                "added_p50_ms": self.added_p50_ms() <= TARGET_ADDED_P50_MS,
                "worker_rss_mb": rss.map(|mb| mb < TARGET_WORKER_RSS_MB),
            },
        })
    }

    /// The report for people.
    pub fn text(&self) -> String {
        let (fleet, echo) = (&self.fleet.phase, &self.echo.phase);
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
        let _ =
            writeln!(out, "  {:<16} {:>12} {:>10} {:>10} {:>8} {:>6}", "", "throughput", "p50", "p99", "lost", "dups");
        for (name, side) in [("airlock fleet", &self.fleet), ("bare AMQP echo", &self.echo)] {
            let phase = &side.phase;
            let _ = writeln!(
                out,
                "  {name:<16} {:>10.0}/s {:>7.3} ms {:>7.3} ms {:>8} {:>6}",
                phase.throughput(),
                phase.percentile_ms(0.5),
                phase.percentile_ms(0.99),
                phase.lost,
                side.duplicates
            );
        }
        let _ = writeln!(out);
        let (ratio, added) = (self.ratio(), self.added_p50_ms());
        let _ = writeln!(
            out,
            "  throughput ratio airlock/echo: {ratio:.3}  (target >= {TARGET_RATIO}: {})",
            mark(ratio >= TARGET_RATIO)
        );
        let _ = writeln!(
            out,
            "  added median latency:         {added:.3} ms  (target <= {TARGET_ADDED_P50_MS} ms: {})",
            mark(added <= TARGET_ADDED_P50_MS)
        );
        match self.worker_rss_mb() {
            Some(mb) => {
                let _ = writeln!(
                    out,
                    "  worker peak RSS:              {mb:.1} MB  (target < {TARGET_WORKER_RSS_MB} MB: {})",
                    mark(mb < TARGET_WORKER_RSS_MB)
                );
            }
            None => {
                let _ = writeln!(out, "  worker peak RSS:              not measured (workers not started here)");
            }
        }
        let _ = writeln!(
            out,
            "  decided {} of {} in {:.2}s; echo answered {} of {} in {:.2}s",
            fleet.answered,
            fleet.requests,
            fleet.elapsed.as_secs_f64(),
            echo.answered,
            echo.requests,
            echo.elapsed.as_secs_f64()
        );
        if let Some(error) = &self.first_error {
            let _ = writeln!(out, "  first error: {error}");
        }
        out
    }
}
