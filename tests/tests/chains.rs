//! One suite of chain behaviours through a worker and a client, run on the in-process
//! transport and on RabbitMQ: built-in decisions, Inspect's defaults, a plugin step that
//! modifies, an escalation answered by a person, reviews, and refused requests.

use std::time::Duration;

use airlock_client::{Client, ClientConfig, ClientError, Repeats};
use airlock_contract::v1;
use airlock_testkit::unique_prefix;
use airlock_tests::{InProcessWorker, TestKeys, approval, broker, decision_name, guarded, review};
use airlock_transport::{Destination, MemoryTransport, Message, Topology, Transport};
use prost::Message as _;
use serde_json::json;

const POLICY: &str = r#"
approvers:
  - name: auto
    tools: "ls"
  - name: scan
    tools: "bash"
  - name: human
    tools: "bash"
    pool: ops
reviewers:
  - name: pattern
    tools: "bash, python"
    output: true
    regex: "password="
  - name: auto
    tools: bash
"#;

#[tokio::test]
async fn chains_in_process() {
    suite(MemoryTransport::new(), "suite".into()).await;
}

#[tokio::test]
async fn chains_over_rabbitmq() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), suite(transport, prefix.clone())).await;
}

fn fleet(prefix: &str) -> Topology {
    Topology::new(prefix).with_step("scan").with_human_pool("ops").with_reply_queue("runner")
}

async fn suite<T: Transport>(transport: T, prefix: String) {
    let worker = InProcessWorker::start(transport.clone(), &prefix, "suite-worker", 32);
    transport.declare(&fleet(&prefix)).await.unwrap();
    serve_steps(&transport, &prefix).await;
    let client = Client::connect(
        transport.clone(),
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

    // A built-in step decides.
    let decision = client
        .approve(approval("s1", "c1", json!({"function": "ls", "arguments": {"path": "/"}}), POLICY))
        .await
        .unwrap();
    assert_eq!((decision_name(&decision), decision.approver.as_str()), ("approve", "auto"));
    assert_eq!((decision.decided_by.as_str(), decision.trail.len()), ("suite-worker", 1));
    assert_eq!(decision.key.unwrap().tool_call_id, "c1");

    // Inspect's default for a tool nothing covers.
    let decision =
        client.approve(approval("s1", "c2", json!({"function": "deploy", "arguments": {}}), POLICY)).await.unwrap();
    assert_eq!(decision_name(&decision), "reject");
    assert_eq!(decision.explanation.as_deref(), Some("No approvers registered for tool deploy"));
    assert_eq!(decision.approver, "policy");

    // A plugin step answers modify; the runner gets the modified call.
    let call = json!({"function": "bash", "arguments": {"cmd": "kubectl apply -f x.yaml"}});
    let decision = client.approve(approval("s2", "c1", call, POLICY)).await.unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("modify", "scanner"));
    let modified: serde_json::Value = serde_json::from_str(&decision.modified.unwrap().arguments_json).unwrap();
    assert_eq!(modified["cmd"], "kubectl apply -f x.yaml --dry-run=server");

    // The plugin escalates; a person in the `ops` pool decides.
    let call = json!({"function": "bash", "arguments": {"cmd": "rm -r build"}});
    let decision = client.approve(approval("s2", "c2", call, POLICY)).await.unwrap();
    assert_eq!(
        (decision_name(&decision), decision.approver.as_str(), decision.decided_by.as_str()),
        ("approve", "human", "alice")
    );
    let trail: Vec<(&str, &str)> =
        decision.trail.iter().map(|t| (t.approver.as_str(), t.decided_by.as_str())).collect();
    assert_eq!(trail, [("scan", "scanner"), ("human", "alice")]);

    // Reviews: a leaking output terminates, a clean one continues, an uncovered tool records nothing.
    let call = json!({"function": "bash", "arguments": {"cmd": "env"}});
    let decision = client.review(review("s3", "c1", call.clone(), "password=hunter2", POLICY)).await.unwrap();
    assert_eq!((decision_name(&decision), decision.approver.as_str()), ("terminate", "pattern"));
    let decision = client.review(review("s3", "c2", call, "PATH=/bin", POLICY)).await.unwrap();
    assert_eq!((decision_name(&decision), decision.approver.as_str()), ("continue", "auto"));
    let decision =
        client.review(review("s3", "c3", json!({"function": "web", "arguments": {}}), "ok", POLICY)).await.unwrap();
    assert_eq!((decision_name(&decision), decision.approver.as_str(), decision.trail.len()), ("continue", "", 0));

    // A policy that does not compile is refused with its location.
    let bad = "approvers:\n  - name: auto\n    tools: x\n    decision: maybe\n";
    match client.approve(approval("s4", "c1", json!({"function": "x", "arguments": {}}), bad)).await {
        Err(ClientError::Refused { code, message }) => {
            assert_eq!(code, "invalid_policy");
            assert!(message.contains("<inline>:4:15"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }

    // Many at once, each answered once.
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..200 {
        let client = client.clone();
        calls.spawn(async move {
            let function = if i % 2 == 0 { "ls" } else { "rm" };
            let request =
                approval("s5", &format!("c{i}"), json!({"function": function, "arguments": {"i": i}}), POLICY);
            decision_name(&client.approve(request).await.unwrap())
        });
    }
    let mut names = Vec::new();
    while let Some(name) = calls.join_next().await {
        names.push(name.unwrap());
    }
    assert_eq!(names.iter().filter(|n| **n == "approve").count(), 100);
    assert_eq!(names.iter().filter(|n| **n == "reject").count(), 100);
    assert_eq!(client.stats().pending, 0);

    worker.stop().await;
}

/// The plugin step `scan` and a person in the `ops` pool, answering over the transport.
async fn serve_steps<T: Transport>(transport: &T, prefix: &str) {
    let topology = Topology::new(prefix);
    let results = Destination::queue(topology.results_queue());
    let mut scan = transport.consume(&topology.step_queue("scan"), 8).await.unwrap();
    let (t, to) = (transport.clone(), results.clone());
    tokio::spawn(async move {
        while let Some(delivery) = scan.next().await {
            let task = v1::StepTask::decode(delivery.message.body.as_ref()).unwrap();
            let v1::request::Body::Approval(body) = task.request.as_ref().unwrap().body.clone().unwrap() else {
                panic!()
            };
            let mut call = body.call.unwrap();
            let mut answer = v1::StepAnswer { decided_by: "scanner".into(), ..Default::default() };
            if call.arguments_json.contains("kubectl") {
                call.arguments_json = json!({"cmd": "kubectl apply -f x.yaml --dry-run=server"}).to_string();
                answer.decision = v1::DecisionKind::Modify.into();
                answer.modified = Some(call);
            } else {
                answer.decision = v1::DecisionKind::Escalate.into();
                answer.explanation = Some("not a deployment".into());
            }
            let result = v1::StepResult { task: Some(task), answer: Some(answer), ..Default::default() };
            t.publish(&to, Message::new(result.encode_to_vec())).await.unwrap();
            delivery.ack().await.unwrap();
        }
    });
    let mut ops = transport.consume(&topology.human_queue("ops"), 8).await.unwrap();
    let t = transport.clone();
    tokio::spawn(async move {
        while let Some(delivery) = ops.next().await {
            let human = v1::HumanTask::decode(delivery.message.body.as_ref()).unwrap();
            assert_eq!(human.pool, "ops");
            let answer = v1::StepAnswer {
                decision: human.choices[0],
                explanation: Some("looks fine".into()),
                decided_by: "alice".into(),
                ..Default::default()
            };
            let mut result = v1::StepResult { task: human.task, answer: Some(answer), ..Default::default() };
            airlock_records::signed::sign_human_answer(&TestKeys::get().reviewer_key(), &mut result);
            t.publish(&results, Message::new(result.encode_to_vec())).await.unwrap();
            delivery.ack().await.unwrap();
        }
    });
}
