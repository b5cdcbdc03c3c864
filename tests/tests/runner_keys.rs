//! Runners are secure by default: `airlock request`, `airlock bench --workers 0` and `airlock
//! gateway`, run as a user runs them, refuse to start without the fleet's public key and say
//! what to pass; told `--insecure` they start, ask, and warn that decisions are not proved.
//! (The Rust client's own refusal is in `crates/client/tests`, the Inspect package's in its
//! Python suite.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use airlock_testkit::{amqp_url, unique_prefix};
use airlock_tests::{HANG_GUARD, WorkerProcess, airlock_bin, broker, wait_for_consumers};
use airlock_transport::{Topology, Transport};
use tokio::io::{AsyncBufReadExt as _, BufReader};

const POLICY: &str = "approvers:\n  - name: auto\n    tools: \"*\"\n";

/// What a runner with neither --verify-key nor --insecure is told, in the words that matter.
fn assert_refused(what: &str, output: &Output) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{what} exits as a bad configuration: {stderr}");
    assert!(stderr.contains("--verify-key <fleet.pub>"), "{what} says what to pass: {stderr}");
    assert!(stderr.contains("AIRLOCK_VERIFY_KEY"), "{what} names the variable: {stderr}");
    assert!(stderr.contains("--insecure accepts forged decisions"), "{what} says what --insecure means: {stderr}");
    assert!(output.stdout.is_empty(), "{what} printed nothing: {}", String::from_utf8_lossy(&output.stdout));
}

/// A directory of this test's own, with the call and the policy `airlock request` sends.
fn files(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("airlock-{name}-{}", unique_prefix()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("call.json"), r#"{"id": "c1", "function": "ls", "arguments": {"path": "/"}}"#).unwrap();
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    dir
}

/// `airlock <args…> --amqp <test broker> --prefix <prefix>`, without AIRLOCK_VERIFY_KEY from
/// the environment.
fn airlock(prefix: &str, args: &[&str]) -> Command {
    let mut command = Command::new(airlock_bin());
    command.args(args).args(["--amqp", &amqp_url(), "--prefix", prefix]).env_remove("AIRLOCK_VERIFY_KEY");
    command
}

fn request(prefix: &str, dir: &Path, more: &[&str]) -> Output {
    airlock(prefix, &["request", "--kind", "approval", "--timeout", "60"])
        .arg("--call")
        .arg(dir.join("call.json"))
        .arg("--policy")
        .arg(dir.join("policy.yaml"))
        .args(more)
        .output()
        .expect("airlock request runs")
}

#[tokio::test]
async fn airlock_request_without_the_fleets_key_refuses_to_ask_and_with_insecure_asks_and_warns() {
    let Some(transport) = broker("runner keys: request").await else { return };
    let prefix = unique_prefix();
    let dir = files("request-keys");
    let worker = WorkerProcess::start(&prefix, "keys-worker");
    wait_for_consumers(&format!("{prefix}.requests"), 1).await;

    let refused = request(&prefix, &dir, &[]);
    assert_refused("airlock request", &refused);
    // It never asked: no reply queue of a runner appeared on the prefix.
    let queues = airlock_testkit::rabbitmqctl(&["list_queues", "-q", "--no-table-headers", "name"]).await;
    let reply_queue = format!("{prefix}.reply.");
    assert!(!queues.lines().any(|queue| queue.starts_with(&reply_queue)), "a runner's queue: {queues}");

    // Told --insecure, it asks the (signed) fleet and takes its decision unproved, warning.
    let asked = request(&prefix, &dir, &["--insecure"]);
    let stderr = String::from_utf8_lossy(&asked.stderr);
    assert!(asked.status.success(), "{stderr}");
    assert!(stderr.contains("warning: --insecure: decisions are not proved"), "{stderr}");
    let decision: serde_json::Value = serde_json::from_slice(&asked.stdout).unwrap();
    assert_eq!((decision["decision"].as_str(), decision["approver"].as_str()), (Some("approve"), Some("auto")));

    // A key and --insecure at once is a contradiction, refused as usage.
    let both = request(&prefix, &dir, &["--insecure", "--verify-key", "fleet.pub"]);
    assert_eq!(both.status.code(), Some(2), "{}", String::from_utf8_lossy(&both.stderr));

    assert!(worker.stop().await.success());
    transport.delete(&Topology::new(prefix.as_str())).await.unwrap();
    transport.close().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn airlock_bench_on_running_workers_needs_their_key_or_insecure() {
    let Some(transport) = broker("runner keys: bench").await else { return };
    let prefix = unique_prefix();
    let worker = WorkerProcess::start(&prefix, "keys-bench-worker");
    wait_for_consumers(&format!("{prefix}.requests"), 1).await;
    let small = ["--requests", "8", "--warmup", "4", "--rounds", "1", "--inflight", "4", "--json"];

    let refused = airlock(&prefix, &["bench", "--workers", "0"]).args(small).output().unwrap();
    assert_refused("airlock bench --workers 0", &refused);

    let ran = airlock(&prefix, &["bench", "--workers", "0", "--insecure"]).args(small).output().unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(ran.status.success(), "{stderr}");
    assert!(stderr.contains("warning: --insecure: decisions are not proved"), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert!(report.is_object(), "{report}");

    // Its own workers run with a key made for the run: neither option means anything then.
    let own = airlock(&prefix, &["bench", "--workers", "1", "--insecure"]).args(small).output().unwrap();
    let stderr = String::from_utf8_lossy(&own.stderr);
    assert_eq!(own.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("--verify-key and --insecure are for --workers 0"), "{stderr}");

    assert!(worker.stop().await.success());
    transport.delete(&Topology::new(prefix.as_str())).await.unwrap();
    transport.close().await;
}

#[tokio::test]
async fn airlock_gateway_without_the_fleets_key_refuses_to_start_and_with_insecure_warns() {
    let Some(transport) = broker("runner keys: gateway").await else { return };
    let prefix = unique_prefix();
    let dir = files("gateway-keys");
    let tokens = dir.join("tokens.yaml");
    airlock_gateway::tokens::add_token(&tokens, "keys", &["default".to_owned()], false).unwrap();
    let gateway = |more: &[&str]| {
        let mut command = airlock(&prefix, &["gateway", "--listen", "127.0.0.1:0"]);
        command.arg("--tokens").arg(&tokens).args(more);
        command
    };

    let refused = gateway(&[]).output().expect("airlock gateway runs");
    assert_refused("airlock gateway", &refused);

    let mut child = tokio::process::Command::from(gateway(&["--insecure"]))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("airlock gateway starts");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = Vec::new();
    let started = tokio::time::timeout(HANG_GUARD, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            eprintln!("gateway: {line}");
            let ready = line.contains("Gateway ready.");
            log.push(line);
            if ready {
                return true;
            }
        }
        false
    })
    .await
    .expect("the gateway starts in time");
    assert!(started, "the gateway exited before serving: {log:#?}");
    assert!(
        log.iter().any(|line| line.contains("Running insecure: decisions are not proved")),
        "the gateway warned: {log:#?}"
    );
    // SIGTERM: a clean stop, which deletes the gateway's reply queue.
    let pid = child.id().expect("a running gateway").to_string();
    assert!(tokio::process::Command::new("kill").args(["-TERM", &pid]).status().await.unwrap().success());
    let status = tokio::time::timeout(HANG_GUARD, child.wait()).await.expect("the gateway stops").unwrap();
    assert!(status.success(), "{status}");

    transport.delete(&Topology::new(prefix.as_str())).await.unwrap();
    transport.close().await;
    let _ = std::fs::remove_dir_all(dir);
}
