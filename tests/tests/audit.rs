//! `airlock audit log`: every decision of a run recorded exactly once, masked as configured,
//! with the run's honest/attack label, across a restart of the auditor; `airlock audit query`
//! finds them.

use std::collections::HashMap;
use std::time::Duration;

use airlock_client::request::label;
use airlock_client::{Client, ClientConfig, Repeats};
use airlock_contract::v1;
use airlock_records::view::EvalMode;
use airlock_testkit::{amqp_url, unique_prefix};
use airlock_tests::{HANG_GUARD, TestKeys, WorkerProcess, airlock_bin, approval, broker, guarded, wait_for_consumers};
use airlock_transport::{Destination, Message, Topology, Transport};
use prost::Message as _;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

const POLICY: &str = "approvers:\n  - name: auto\n    tools: ls\n  - name: vault\n    tools: fetch\n";

fn auditor(prefix: &str, out: &std::path::Path) -> Child {
    airlock_tests::linked::auditor(&amqp_url(), prefix, out, &["--mask", "token,password"])
}

async fn stop(mut child: Child) {
    let pid = child.id().unwrap().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
    tokio::time::timeout(HANG_GUARD, child.wait()).await.unwrap().unwrap();
}

/// The complete records of the log so far (the auditor may be halfway through a line).
fn records(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.split_inclusive('\n').filter(|line| line.ends_with('\n')).map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[tokio::test]
async fn every_decision_is_recorded_once_and_masked() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    let fleet = Topology::new(prefix.as_str()).with_step("vault").with_reply_queue("runner").with_work_queue("audit");
    guarded(fleet.clone(), async move {
        let dir = std::env::temp_dir().join(&prefix);
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("decisions.jsonl");
        let _worker = WorkerProcess::start(&prefix, "w");
        let first = auditor(&prefix, &log);
        wait_for_consumers(&format!("{prefix}.audit"), 1).await;
        transport.declare(&fleet).await.unwrap();

        // A plugin step that hands back a call carrying a secret.
        let mut vault = transport.consume(&fleet.step_queue("vault"), 8).await.unwrap();
        let (t, results) = (transport.clone(), Destination::queue(fleet.results_queue()));
        tokio::spawn(async move {
            while let Some(delivery) = vault.next().await {
                let task = v1::StepTask::decode(delivery.message.body.as_ref()).unwrap();
                let modified = v1::ToolCall {
                    function: "fetch".into(),
                    arguments_json: json!({"url": "https://x", "token": "s3cr3t"}).to_string(),
                    ..Default::default()
                };
                let answer = v1::StepAnswer {
                    decision: v1::DecisionKind::Modify.into(),
                    modified: Some(modified),
                    metadata_json: json!({"password": "hunter2", "score": 1}).to_string(),
                    decided_by: "vault".into(),
                    ..Default::default()
                };
                let result = v1::StepResult { task: Some(task), answer: Some(answer), ..Default::default() };
                t.publish(&results, Message::new(result.encode_to_vec())).await.unwrap();
                delivery.ack().await.unwrap();
            }
        });

        let config = ClientConfig {
            prefix: prefix.clone(),
            runner_id: "runner".into(),
            default_timeout: HANG_GUARD,
            replies: TestKeys::get().replies(),
            repeats: Repeats::default(),
        };
        let client = Client::connect(transport.clone(), config).await.unwrap();
        let mut ids = Vec::new();
        let send = |i: usize| {
            let client = client.clone();
            async move {
                let function = if i.is_multiple_of(4) { "fetch" } else { "ls" };
                let mut request = approval(
                    &format!("sample-{}", i % 2),
                    &format!("c{i}"),
                    json!({"function": function, "arguments": {}}),
                    POLICY,
                );
                // Sample 1 is an attack run's, for calibration.
                if i % 2 == 1 {
                    label(&mut request, EvalMode::Attack);
                }
                client.approve(request).await.unwrap().decision_id
            }
        };
        for i in 0..20 {
            ids.push(send(i).await);
        }
        // The auditor restarts halfway; decisions wait for it in its queue.
        stop(first).await;
        let second = auditor(&prefix, &log);
        for i in 20..40 {
            ids.push(send(i).await);
        }
        let deadline = tokio::time::Instant::now() + HANG_GUARD;
        while records(&log).len() < ids.len() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let written = records(&log);
        let mut counts: HashMap<String, usize> = HashMap::new();
        for record in &written {
            *counts.entry(record["decision_id"].as_str().unwrap().to_owned()).or_default() += 1;
        }
        assert_eq!(written.len(), ids.len(), "one record per decision");
        assert!(ids.iter().all(|id| counts.get(id) == Some(&1)), "every decision exactly once");

        let modified: Vec<&Value> = written.iter().filter(|r| r["decision"] == "modify").collect();
        assert_eq!(modified.len(), 10);
        for record in &modified {
            assert_eq!(record["modified"]["arguments"]["token"], "***");
            assert_eq!(record["modified"]["arguments"]["url"], "https://x");
            assert_eq!(record["metadata"]["password"], "***");
            assert_eq!(record["key"]["tool_call_id"].as_str().unwrap().chars().next(), Some('c'));
        }
        assert!(!std::fs::read_to_string(&log).unwrap().contains("s3cr3t"));
        for record in &written {
            let attack = record["origin"]["sample_id"] == "sample-1";
            assert_eq!(
                record["origin"].get("eval_mode").and_then(Value::as_str),
                attack.then_some("attack"),
                "{record}"
            );
        }

        // The common questions.
        let query = |args: &[&str]| {
            let out = std::process::Command::new(airlock_bin())
                .args(["audit", "query", "--file"])
                .arg(&log)
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success());
            String::from_utf8(out.stdout).unwrap().lines().count()
        };
        assert_eq!(query(&["--sample", "sample-0"]), 20);
        assert_eq!(query(&["--decided-by", "vault"]), 10);
        let digest = written[0]["policy_digest"].as_str().unwrap().to_owned();
        assert_eq!(query(&["--digest", &digest]), 40);
        assert_eq!(query(&["--digest", "0000"]), 0);
        stop(second).await;
        std::fs::remove_dir_all(&dir).unwrap();
    })
    .await;
}
