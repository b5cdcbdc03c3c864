//! The example Python plugin (`examples/plugins/python/deny_words.py`) end to end: a policy
//! worker, the plugin as its own process, and a runner, over RabbitMQ. Also checks that the
//! committed protobuf code matches `proto/`.
//!
//! `.ci/run` creates `.venv` and installs the plugin's requirements. Without them the tests
//! skip with the reason, except under `CI`, where they fail.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use airlock_client::{Client, ClientConfig, Repeats};
use airlock_testkit::{amqp_url, unique_prefix};
use airlock_tests::{
    HANG_GUARD, InProcessWorker, TestKeys, approval, broker, decision_name, guarded, repo, review, venv_python,
    wait_for_consumers,
};
use airlock_transport::{Topology, Transport};
use serde_json::json;
use tokio::process::Command;

const POLICY: &str = r#"
approvers:
  - name: deny_words
    tools: "bash"
    words: ["rm -rf", "curl "]
  - name: auto
    tools: "bash"
    decision: approve
reviewers:
  - name: deny_words
    tools: "bash"
"#;

/// The virtual environment's Python, if it has the plugin's requirements.
fn python() -> Option<PathBuf> {
    let needed = "the plugin's requirements (python3 -m venv .venv && .venv/bin/pip install -r examples/plugins/python/requirements.txt)";
    venv_python("pika, google.protobuf, grpc_tools", needed)
}

fn plugin_dir() -> PathBuf {
    repo().join("examples/plugins/python")
}

#[test]
fn committed_protobuf_code_is_current() {
    let Some(python) = python() else { return };
    let scratch = std::env::temp_dir().join(format!("airlock-plugin-proto-{}", std::process::id()));
    let status = std::process::Command::new(python)
        .arg(plugin_dir().join("generate_proto.py"))
        .arg(&scratch)
        .status()
        .expect("the generator runs");
    assert!(status.success());
    let fresh = std::fs::read_to_string(scratch.join("airlock_pb2.py")).unwrap();
    let _ = std::fs::remove_dir_all(&scratch);
    let committed = std::fs::read_to_string(plugin_dir().join("airlock_pb2.py")).unwrap();
    assert!(fresh == committed, "examples/plugins/python/airlock_pb2.py is stale: run generate_proto.py");
}

#[tokio::test]
async fn python_plugin_end_to_end() {
    let Some(python) = python() else { return };
    let prefix = unique_prefix();
    let Some(transport) = broker(&format!("{prefix} worker")).await else { return };
    // The step stands before any call names it, as `airlock topology apply --steps deny_words`
    // makes it: a step only inline policies name gets no queue from a worker.
    let topology = Topology::new(&prefix).with_step("deny_words").with_reply_queue("runner");
    transport.declare(&topology).await.expect("the fleet's topology");
    guarded(topology, scenario(python, transport, prefix)).await;
}

async fn scenario(python: PathBuf, transport: airlock_transport::AmqpTransport, prefix: String) {
    let worker = InProcessWorker::start(transport, &prefix, "w", 16);
    let mut plugin = Command::new(python)
        .arg(plugin_dir().join("deny_words.py"))
        .args(["--amqp", &amqp_url(), "--prefix", &prefix, "--id", "py-plugin"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the plugin starts");
    wait_for_consumers(&Topology::new(&prefix).step_queue("deny_words"), 1).await;

    let runner = broker(&format!("{prefix} runner")).await.expect("the broker answered a moment ago");
    let client = Client::connect(
        runner.clone(),
        ClientConfig {
            prefix: prefix.clone(),
            runner_id: "runner".into(),
            default_timeout: Duration::from_secs(60),
            replies: TestKeys::get().replies(),
            repeats: Repeats::default(),
        },
    )
    .await
    .unwrap();
    let bash = |cmd: &str| json!({"function": "bash", "arguments": {"cmd": cmd}});
    let (denied, clean, leak, quiet) = tokio::join!(
        client.approve(approval("p", "c1", bash("rm -rf /"), POLICY)),
        client.approve(approval("p", "c2", bash("ls -la"), POLICY)),
        client.review(review("p", "c3", bash("cat x"), "root:x:0:0 from /etc/shadow", POLICY)),
        client.review(review("p", "c4", bash("cat y"), "hello", POLICY)),
    );
    let denied = denied.unwrap();
    assert_eq!(
        (decision_name(&denied), denied.approver.as_str(), denied.decided_by.as_str()),
        ("reject", "deny_words", "py-plugin")
    );
    assert_eq!(denied.explanation.as_deref(), Some("the call contains the denied word 'rm -rf'"));
    let metadata: serde_json::Value = serde_json::from_str(&denied.trail[0].metadata_json).unwrap();
    assert_eq!(metadata["word"], "rm -rf");
    let clean = clean.unwrap();
    let trail: Vec<(&str, &str)> = clean.trail.iter().map(|t| (t.approver.as_str(), t.decided_by.as_str())).collect();
    assert_eq!(trail, [("deny_words", "py-plugin"), ("auto", "w")]);
    assert_eq!(decision_name(&clean), "approve");
    // Reviews use the plugin's default words; nothing found: Inspect's default (continue).
    let leak = leak.unwrap();
    assert_eq!((decision_name(&leak), leak.approver.as_str()), ("terminate", "deny_words"));
    let quiet = quiet.unwrap();
    assert_eq!((decision_name(&quiet), quiet.approver.as_str()), ("continue", "policy"));

    // The plugin stops cleanly on SIGTERM.
    let pid = plugin.id().expect("running").to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().await.unwrap().success());
    let status = tokio::time::timeout(HANG_GUARD, plugin.wait()).await.expect("the plugin stops").unwrap();
    assert!(status.success(), "{status}");
    client.close().await;
    runner.close().await;
    worker.stop().await;
}
