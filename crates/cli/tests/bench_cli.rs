//! `airlock bench` against the real broker: a short run through its own worker and both echo
//! responders. Timings are printed, never asserted: only that everything was answered, once,
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

    for side in ["fleet", "bare_echo", "airlock_echo"] {
        let side = &report[side];
        assert_eq!(side["requests"], 300);
        assert_eq!(side["answered"], side["requests"], "every request answered: {side}");
        assert_eq!((side["lost"].as_u64(), side["duplicates"].as_u64()), (Some(0), Some(0)), "{side}");
        for key in ["throughput_rps", "p50_ms"] {
            assert!(side[key].as_f64().is_some_and(|v| v > 0.0), "{key}: {side}");
        }
        assert!(side["p99_ms"].is_number(), "{side}");
        assert!(side["cpu_us_per_round_trip"]["runner"].as_f64().is_some_and(|us| us > 0.0), "{side}");
    }
    for key in ["ratio", "ratio_to_airlock_echo"] {
        assert!(report[key].as_f64().is_some_and(|v| v > 0.0), "{key}: {}", report[key]);
    }
    for key in ["added_p50_ms", "worker_rss_mb", "runner_cpu_us"] {
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
