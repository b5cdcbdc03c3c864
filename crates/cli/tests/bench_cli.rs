//! `airlock bench` against the real broker: a short run through its own worker and echo
//! responder. Timings are printed, never asserted: only that everything was answered, once,
//! and that the bench cleaned up after itself.

use std::process::Command;

use serde_json::Value;

/// `airlock bench`'s exit status when the broker cannot be reached.
const EXIT_UNAVAILABLE: i32 = 69;

#[test]
fn a_short_bench_answers_every_request_on_both_sides_and_cleans_up() {
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["bench", "--amqp", &airlock_testkit::amqp_url(), "--requests", "300", "--inflight", "16", "--json"])
        .args(["--warmup", "100", "--max-seconds", "120"])
        .output()
        .expect("airlock runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(EXIT_UNAVAILABLE) {
        airlock_testkit::unreachable(stderr);
        return;
    }
    assert!(out.status.success(), "bench failed: {stderr}");
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 output");
    let report: Value = serde_json::from_str(stdout.trim()).expect("exactly one JSON object on stdout");
    eprintln!("{report}");

    assert_eq!(report["requests"], 300);
    assert_eq!(report["decided"], report["requests"], "every request decided");
    assert_eq!(report["lost"], 0);
    assert_eq!(report["duplicates"], 0);
    assert_eq!(report["baseline_answered"], 300, "every echo answered");
    assert_eq!(report["baseline_lost"], 0);
    for key in ["throughput_rps", "baseline_throughput_rps", "ratio", "p50_ms", "baseline_p50_ms"] {
        assert!(report[key].as_f64().is_some_and(|v| v > 0.0), "{key}: {}", report[key]);
    }
    for key in ["p99_ms", "baseline_p99_ms", "added_p50_ms", "worker_rss_mb"] {
        assert!(report[key].is_number(), "{key}: {}", report[key]);
    }
    assert!(report["worker_rss_mb"].as_f64().unwrap() > 0.0);
    assert_eq!(
        (report["workers"].as_u64(), report["inflight"].as_u64(), report["size"].as_u64()),
        (Some(1), Some(16), Some(1500))
    );

    // The fresh prefix's queues are gone.
    let prefix = report["prefix"].as_str().expect("the report names its prefix");
    assert!(prefix.starts_with("airlock-bench-"), "{prefix}");
    if let Ok(listing) = Command::new("rabbitmqctl").args(["list_queues", "-q", "--no-table-headers", "name"]).output()
        && listing.status.success()
    {
        let left: Vec<&str> = std::str::from_utf8(&listing.stdout)
            .unwrap_or_default()
            .lines()
            .filter(|name| name.starts_with(&format!("{prefix}.")))
            .collect();
        assert!(left.is_empty(), "queues left behind: {left:?}");
    }
}
