//! TLS end to end: a RabbitMQ node of the test's own with a TLS listener (a CA made for the
//! test signed its certificate), a signed `airlock worker` on `amqps://` with `--ca-file`, and
//! two runners over TLS: `airlock request` and the Python package. Without the CA file the
//! runner is refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use airlock_testkit::node::{Node, NodeOptions};
use airlock_testkit::unreachable;
use airlock_tests::{TestKeys, airlock_bin};

const POLICY: &str = "approvers:\n  - name: auto\n    tools: \"*\"\n";

/// The repository's virtual environment with the Inspect integration, if set up.
fn python() -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    let ready = Command::new(&python).args(["-c", "import airlock"]).status().is_ok_and(|s| s.success());
    if ready {
        return Some(python);
    }
    assert!(std::env::var_os("CI").is_none(), "CI is set and there is no .venv with the Inspect integration");
    eprintln!("skipping the Python runner: no .venv with the Inspect integration");
    None
}

fn request(url: &str, prefix: &str, ca_file: Option<&Path>, dir: &Path) -> Output {
    let mut command = Command::new(airlock_bin());
    command.args(["request", "--amqp", url, "--prefix", prefix, "--kind", "approval", "--timeout", "60"]);
    command.arg("--policy").arg(dir.join("policy.yaml")).arg("--call").arg(dir.join("call.json"));
    command.arg("--verify-key").arg(TestKeys::get().dir.join("fleet.pub"));
    if let Some(ca_file) = ca_file {
        command.arg("--ca-file").arg(ca_file);
    }
    command.output().expect("airlock request runs")
}

#[tokio::test]
async fn every_role_speaks_amqps_verified_against_the_ca_file() {
    let node = match Node::start(NodeOptions { tls: true }).await {
        Ok(node) => node,
        Err(reason) => return unreachable(reason),
    };
    let url = node.amqps_url().expect("a TLS listener");
    let ca_file = node.ca_file().expect("the test's CA");
    let prefix = "tls";
    let dir = std::env::temp_dir().join(format!("airlock-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    std::fs::write(dir.join("call.json"), r#"{"id": "c1", "function": "ls", "arguments": {"path": "/"}}"#).unwrap();

    let _worker = tokio::process::Command::new(airlock_bin())
        .args(["worker", "--amqp", &url, "--prefix", prefix, "--id", "tls-worker"])
        .arg("--ca-file")
        .arg(&ca_file)
        .args(TestKeys::get().worker_args())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("airlock worker starts");

    // `airlock request` over TLS: the signed decision comes back and is verified.
    let asked = request(&url, prefix, Some(&ca_file), &dir);
    let stdout = String::from_utf8_lossy(&asked.stdout);
    assert!(asked.status.success(), "{stdout}{}", String::from_utf8_lossy(&asked.stderr));
    let decision: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(decision["decision"], "approve", "{decision}");

    // Without the CA file the broker's certificate is not trusted: no connection at all.
    let refused = request(&url, prefix, None, &dir);
    assert_eq!(refused.status.code(), Some(69), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("cannot reach the broker"));

    // The Python package over TLS, with its CA file and the fleet's public key.
    if let Some(python) = python() {
        let script = r#"
import asyncio, sys
from airlock._proto import airlock_pb2 as pb
from airlock.client import FleetClient
from airlock.proof import FleetPublicKeys

async def main(url, ca_file, fleet_pub, policy):
    client = FleetClient(url, "tls", ca_file=ca_file, verify_key=FleetPublicKeys.load(fleet_pub))
    request = pb.Request(
        key=pb.CallKey(run_id="py", sample_id="s", epoch=1, tool_call_id="c2"),
        approval=pb.ApprovalRequest(call=pb.ToolCall(id="c2", function="ls", arguments_json="{}")),
        policy=pb.Policy(inline=open(policy).read()),
    )
    reply = await client.decide(request, 60)
    await client.close()
    print(pb.DecisionKind.Name(reply.decision.decision))

asyncio.run(main(*sys.argv[1:]))
"#;
        let output = Command::new(python)
            .args(["-c", script, &url])
            .arg(&ca_file)
            .arg(TestKeys::get().dir.join("fleet.pub"))
            .arg(dir.join("policy.yaml"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
        assert_eq!(stdout.trim(), "DECISION_KIND_APPROVE");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
