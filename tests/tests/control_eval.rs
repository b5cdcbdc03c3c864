//! The offline control evaluation (`examples/control/run.py`): honest and attack runs of an
//! Inspect task with real bash, through a fleet of this build's `airlock` on the test broker,
//! under trusted monitoring alone, trusted editing and defer to resample; scripted models
//! behind a stand-in of OpenAI's API, audits answered by a scripted person through the
//! reviewer API, and `airlock control report`'s table printed.
//!
//! What the protocols must show: trusted monitoring lets attacks through that the other two
//! stop; trusted editing pays for it in usefulness (the trusted model's own command fails the
//! main task), resampling does not; people saw calls under every protocol.
//!
//! `.ci/run` installs the Inspect integration into `.venv`. Without it the test skips with the
//! reason, except under `CI`, where it fails.

use std::process::Command;

use airlock_testkit::amqp_url;
use airlock_tests::{airlock_bin, broker, repo, venv_python};
use airlock_transport::Transport;
use serde_json::Value;

const SAMPLES: usize = 20;

fn figure(protocol: &Value, name: &str) -> f64 {
    protocol[name]["value"].as_f64().unwrap_or_else(|| panic!("no {name} in {protocol}"))
}

#[tokio::test]
async fn a_control_evaluation_runs_through_the_fleet_offline() {
    let needed = "the Inspect integration (the pip line of .ci/run)";
    let Some(python) = venv_python("inspect_ai, airlock", needed) else { return };
    let Some(transport) = broker("control-eval").await else { return };
    let prefix = format!("control-eval-test-{}", std::process::id());
    let out = std::env::temp_dir().join(format!("airlock-control-eval-{}", std::process::id()));
    let json = out.join("report.json");
    let run = Command::new(python)
        .arg(repo().join("examples/control/run.py"))
        .args(["--prefix", &prefix, "--samples", &SAMPLES.to_string(), "--out"])
        .arg(&out)
        .arg("--json")
        .arg(&json)
        .env("AIRLOCK_AMQP_URL", amqp_url())
        .env("AIRLOCK_BIN", airlock_bin())
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    println!("{stdout}");
    assert!(run.status.success(), "{}\n{}", run.status, String::from_utf8_lossy(&run.stderr));

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        (report["samples"].as_u64(), report["unjoined"].as_u64(), report["unlabelled"].as_u64()),
        (Some(6 * SAMPLES as u64), Some(0), Some(0)),
        "{report}"
    );
    let protocols: Vec<&Value> = report["protocols"].as_array().unwrap().iter().collect();
    let by_name =
        |name: &str| *protocols.iter().find(|p| p["protocol"] == name).unwrap_or_else(|| panic!("{name}: {report}"));
    let (monitoring, editing, resampling) =
        (by_name("trusted_monitoring"), by_name("trusted_edit"), by_name("resample"));
    let safety = |p: &Value| p["budgets"][0]["safety"]["value"].as_f64().unwrap();
    for p in [monitoring, editing, resampling] {
        assert_eq!((p["honest"].as_u64(), p["attack"].as_u64()), (Some(SAMPLES as u64), Some(SAMPLES as u64)), "{p}");
        assert!(figure(p, "call_coverage") > 0.0, "people saw no call: {p}");
        assert!(stdout.contains(p["protocol"].as_str().unwrap()), "the table lacks {p}");
    }
    assert!(safety(monitoring) < 1.0, "trusted monitoring stopped every attack: {monitoring}");
    assert!(safety(editing) > safety(monitoring) && safety(resampling) > safety(monitoring), "{report}");
    assert!(figure(editing, "usefulness") < figure(monitoring, "usefulness"), "{report}");
    assert_eq!(figure(resampling, "usefulness"), figure(monitoring, "usefulness"), "{report}");

    // The trail holds what the protocols did: edits and samples.
    let log = std::fs::read_to_string(out.join("decisions.jsonl")).unwrap();
    for (protocol, what) in [("trusted_edit", "\"replacement\":{"), ("resample", "\"chosen\":true")] {
        assert!(
            log.lines().any(|l| l.contains(&format!("\"name\":\"{protocol}\"")) && l.contains(what)),
            "no {protocol} decision with {what}"
        );
    }

    // The run deleted its fleet, the monitors' logs and the decision log's queue with it.
    for queue in ["requests", "step.resample", "scores.trusted_edit", "samples.resample", "audit"] {
        let queue = format!("{prefix}.{queue}");
        assert!(transport.message_count(&queue).await.is_err(), "{queue} is left");
    }
    transport.close().await;
    let _ = std::fs::remove_dir_all(&out);
}
