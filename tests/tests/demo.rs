//! `airlock demo` as a newcomer runs it: in process, and over the broker.

use std::process::Output;

use airlock_testkit::{amqp_url, unique_prefix};
use airlock_tests::airlock_bin;
use airlock_transport::Transport;

async fn demo(args: &[&str]) -> Output {
    tokio::process::Command::new(airlock_bin()).arg("demo").args(args).output().await.expect("airlock demo runs")
}

/// Counts the decisions the summary reports for a deciding step and a decision.
fn count(summary: &str, step: &str, decision: &str) -> usize {
    summary
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.len() == 3 && fields[0] == step && fields[1] == decision)
                .then(|| fields[2].parse::<usize>().ok())?
        })
        .sum()
}

fn assert_every_kind_of_decision(output: &Output) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    for (step, decision) in [
        ("bash_allowlist", "approve"),
        ("demo/append_timeout", "modify"),
        ("human", "approve"),
        ("pattern", "reject"),
        ("pattern", "terminate"),
        ("policy", "reject"),
        ("auto", "continue"),
    ] {
        assert!(count(&stdout, step, decision) > 0, "no {decision} by {step} in:\n{stdout}");
    }
}

#[tokio::test]
async fn the_demo_runs_in_process() {
    let output = demo(&["--samples", "12", "--auto-human", "approve"]).await;
    assert_every_kind_of_decision(&output);
}

#[tokio::test]
async fn the_simulated_human_can_refuse() {
    let output = demo(&["--samples", "12", "--auto-human", "reject"]).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    assert_eq!(count(&stdout, "human", "approve"), 0, "{stdout}");
    assert!(count(&stdout, "human", "reject") > 0, "{stdout}");
}

#[tokio::test]
async fn the_demo_runs_over_rabbitmq() {
    let prefix = unique_prefix();
    let Some(probe) = airlock_tests::broker(&prefix).await else { return };
    probe.close().await;
    let output =
        demo(&["--amqp", &amqp_url(), "--prefix", &prefix, "--samples", "12", "--auto-human", "approve"]).await;
    assert_every_kind_of_decision(&output);
    let topology = airlock_transport::Topology::new(prefix.as_str())
        .with_step("demo/append_timeout")
        .with_human_pool("default")
        .with_reply_queue("demo-runner");
    airlock_tests::cleanup(&topology).await;
}
