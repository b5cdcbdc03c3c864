//! The reviewer service's Slack app, end to end: a real worker escalates calls to a reviewer
//! service whose Slack app posts them to a fake Slack Web API (retried when rate-limited); a
//! button press, signed as Slack
//! signs it, decides the task through the desk and the runner gets the answer, and the message
//! is updated naming who decided. A forged, stale, replayed or unmapped press decides nothing.
//! Slack's own SDK (`slack_sdk`, in `.venv`) is the oracle of the signatures and of the fake's
//! wire format.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use airlock_reviewer::Service;
use airlock_reviewer::auth::{Reviewer, Reviewers, sha256_hex};
use airlock_reviewer::client::ApiClient;
use airlock_reviewer::slack::signature::{Unsigned, verify};
use airlock_reviewer::slack::{Hidden, Slack};
use airlock_reviewer::webhooks::Webhooks;
use airlock_testkit::database::{with_pg, with_sqlite};
use airlock_testkit::unique_prefix;
use airlock_tests::slack::{ApiCall, FakeSlack, fake_slack, press, sign};
use airlock_tests::webhooks::quick_retries;
use airlock_tests::{
    BOB_TOKEN, InProcessWorker, REVIEWER_TOKEN, approval, broker, decision_name, guarded, pending, reviewer_config,
    runner, venv_python,
};
use airlock_transport::{AmqpTransport, Topology, Transport};
use airlock_webhook::unix_seconds;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const INSTANCE: &str = "reviewer-slack-test";
const BOT_TOKEN: &str = "xoxb-test-bot-token";
const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const CHANNEL: &str = "C0OPS";
const ALICE: &str = "U0ALICE";
const BOB: &str = "U0BOB";
const MALLORY: &str = "U0MALLORY";

const POLICY: &str = r#"
approvers:
  - name: human
    tools: "bash"
    pool: ops
  - name: human
    tools: "deploy"
    pool: ops
    approvals: 2
"#;

fn fleet(prefix: &str) -> Topology {
    Topology::new(prefix).with_human_pool("ops").with_reply_queue("runner").with_reply_queue(INSTANCE)
}

/// The Slack app of the fake: channel [`CHANNEL`] for `ops`, Alice and Bob mapped.
fn slack_app(fake: &FakeSlack) -> Slack {
    let channels = BTreeMap::from([("ops".to_owned(), CHANNEL.to_owned())]);
    let users = BTreeMap::from([(ALICE.to_owned(), "alice".to_owned()), (BOB.to_owned(), "bob".to_owned())]);
    Slack::new(&fake.api_url, Hidden::new(BOT_TOKEN), Hidden::new(SIGNING_SECRET), channels, users).unwrap()
}

/// The `value` of the button `action_id` in a posted message.
fn button(posted: &ApiCall, action_id: &str) -> Option<String> {
    let blocks = posted.arguments["blocks"].as_array()?;
    let actions = blocks.iter().find(|block| block["type"] == "actions")?;
    let button = actions["elements"].as_array()?.iter().find(|b| b["action_id"] == action_id)?;
    button["value"].as_str().map(str::to_owned)
}

/// Posts `body` to the service's interactivity endpoint with Slack's headers.
async fn deliver(http: &reqwest::Client, service: &str, body: &str, timestamp: i64, signature: &str) -> StatusCode {
    http.post(format!("{service}/slack/interactions"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", timestamp.to_string())
        .header("x-slack-signature", signature)
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
        .status()
}

async fn pending_count(api: &ApiClient) -> usize {
    api.get("/api/tasks").await.unwrap().json()["tasks"].as_array().unwrap().len()
}

#[tokio::test]
async fn a_slack_press_decides_end_to_end_and_a_forged_stale_replayed_or_unmapped_one_does_not_on_sqlite() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), with_sqlite("slack", move |store| pressed(transport, prefix, store))).await;
}

#[tokio::test]
async fn a_slack_press_decides_end_to_end_and_a_forged_stale_replayed_or_unmapped_one_does_not_on_postgres() {
    let prefix = unique_prefix();
    let Some(transport) = broker(&prefix).await else { return };
    guarded(fleet(&prefix), with_pg("slack", move |store| pressed(transport, prefix, store))).await;
}

async fn pressed(transport: AmqpTransport, prefix: String, store: String) {
    // The first post is rate-limited: it is retried.
    let mut fake = fake_slack(BOT_TOKEN, 1).await;
    transport.declare(&fleet(&prefix)).await.unwrap();
    let worker = InProcessWorker::start(transport.clone(), &prefix, "worker", 16);
    let client = runner(transport.clone(), &prefix, Duration::from_secs(100)).await;
    let mut config = reviewer_config(&prefix, &store, INSTANCE);
    let alice = config.reviewers.by_name("alice").unwrap().clone();
    let bob = Reviewer {
        name: "bob".into(),
        token_sha256: sha256_hex(BOB_TOKEN),
        pools: vec!["ops".into()],
        admin: false,
        overrides: Vec::new(),
    };
    config.reviewers = Reviewers::from_list(vec![alice, bob]);
    let slack = Some(Arc::new(slack_app(&fake)));
    config.webhooks = Webhooks { retry: quick_retries(), slack, ..Webhooks::default() };
    let service = Service::start(transport.clone(), config.clone()).await.unwrap();
    let base = format!("http://{}", service.local_addr());
    let api = ApiClient::new(&base, REVIEWER_TOKEN);
    let http = airlock_webhook::http_client().unwrap();

    // A call waits for a person: posted to the pool's channel with the bot token, a button per
    // choice carrying the task's id.
    let asking = client.clone();
    let bash = json!({"function": "bash", "arguments": {"cmd": "rm -r build"}});
    let asked = tokio::spawn(async move { asking.approve(approval("s1", "c1", bash, POLICY)).await });
    let id = pending(&api, 1).await.remove(0)["id"].as_str().unwrap().to_owned();
    let limited = fake.calls.recv().await.unwrap();
    let posted = fake.calls.recv().await.unwrap();
    assert_eq!((limited.method.as_str(), &limited.arguments), ("chat.postMessage", &posted.arguments));
    assert_eq!(posted.method, "chat.postMessage");
    assert_eq!(posted.authorization, format!("Bearer {BOT_TOKEN}"));
    assert_eq!(posted.arguments["channel"], CHANNEL);
    assert!(posted.arguments["blocks"].to_string().contains("rm -r build"), "{}", posted.arguments);
    for choice in ["approve", "reject", "terminate"] {
        assert_eq!(button(&posted, &format!("airlock_decide_{choice}")).as_deref(), Some(id.as_str()));
    }
    let ts = "1700000000.000001";
    let approve = press(ALICE, "airlock_decide_approve", &id, CHANNEL, ts, &fake.response_url);

    // Forged (another secret), stale (six minutes old, correctly signed) and unsigned presses
    // are refused; an unmapped user is told so. None decides anything.
    let now = unix_seconds();
    let forged = sign("not-the-signing-secret", now, &approve);
    assert_eq!(deliver(&http, &base, &approve, now, &forged).await, StatusCode::UNAUTHORIZED);
    let stale = now - 360;
    assert_eq!(
        deliver(&http, &base, &approve, stale, &sign(SIGNING_SECRET, stale, &approve)).await,
        StatusCode::UNAUTHORIZED
    );
    let future = now + 360;
    assert_eq!(
        deliver(&http, &base, &approve, future, &sign(SIGNING_SECRET, future, &approve)).await,
        StatusCode::UNAUTHORIZED
    );
    let unmapped = press(MALLORY, "airlock_decide_approve", &id, CHANNEL, ts, &fake.response_url);
    assert_eq!(deliver(&http, &base, &unmapped, now, &sign(SIGNING_SECRET, now, &unmapped)).await, StatusCode::OK);
    let told = fake.responses.recv().await.unwrap();
    assert_eq!((told["response_type"].as_str(), told["replace_original"].as_bool()), (Some("ephemeral"), Some(false)));
    assert!(told["text"].as_str().unwrap().contains("not mapped"), "{told}");
    assert_eq!(pending_count(&api).await, 1);

    // Alice's press decides: the runner gets her answer, she is told, the message is updated.
    let signature = sign(SIGNING_SECRET, now, &approve);
    assert_eq!(deliver(&http, &base, &approve, now, &signature).await, StatusCode::OK);
    let decision = asked.await.unwrap().unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("approve", "alice"));
    assert_eq!(fake.responses.recv().await.unwrap()["text"], "You decided approve.");
    let updated = fake.calls.recv().await.unwrap();
    assert_eq!(updated.method, "chat.update");
    assert_eq!((updated.arguments["channel"].as_str(), updated.arguments["ts"].as_str()), (Some(CHANNEL), Some(ts)));
    assert!(updated.arguments["text"].as_str().unwrap().starts_with("alice decided approve"), "{}", updated.arguments);
    assert_eq!(button(&updated, "airlock_decide_approve"), None);

    // Two approvals: Alice's press counts one, and her replayed press is refused before the
    // desk sees it, even by the service restarted on the same store; Bob's press decides.
    let asking = client.clone();
    let deploy = json!({"function": "deploy", "arguments": {"env": "prod"}});
    let asked = tokio::spawn(async move { asking.approve(approval("s2", "c1", deploy, POLICY)).await });
    let posted = fake.calls.recv().await.unwrap();
    assert!(posted.arguments["blocks"].to_string().contains("needs 2 approvals"), "{}", posted.arguments);
    let second = button(&posted, "airlock_decide_approve").unwrap();
    let ts = "1700000000.000002";
    let first = press(ALICE, "airlock_decide_approve", &second, CHANNEL, ts, &fake.response_url);
    let now = unix_seconds();
    let signature = sign(SIGNING_SECRET, now, &first);
    assert_eq!(deliver(&http, &base, &first, now, &signature).await, StatusCode::OK);
    assert_eq!(fake.responses.recv().await.unwrap()["text"], "Your approval is recorded: 1 of 2.");
    assert_eq!(deliver(&http, &base, &first, now, &signature).await, StatusCode::CONFLICT);
    service.stop().await;
    let service = Service::start(transport.clone(), config).await.unwrap();
    let base = format!("http://{}", service.local_addr());
    assert_eq!(deliver(&http, &base, &first, now, &signature).await, StatusCode::CONFLICT);
    assert_eq!(pending_count(&ApiClient::new(&base, REVIEWER_TOKEN)).await, 1);
    let by_bob = press(BOB, "airlock_decide_approve", &second, CHANNEL, ts, &fake.response_url);
    assert_eq!(deliver(&http, &base, &by_bob, now, &sign(SIGNING_SECRET, now, &by_bob)).await, StatusCode::OK);
    assert_eq!(decision_name(&asked.await.unwrap().unwrap()), "approve");
    assert_eq!(fake.responses.recv().await.unwrap()["text"], "You decided approve.");
    let updated = fake.calls.recv().await.unwrap();
    assert_eq!((updated.method.as_str(), updated.arguments["ts"].as_str()), ("chat.update", Some(ts)));

    service.stop().await;
    worker.stop().await;
}

/// Checks, with Slack's own SDK: the tests sign as Slack signs; the service accepts exactly
/// the requests the SDK's verifier accepts (fresh, stale either way, forged, changed); and the
/// fake Web API answers the SDK's `WebClient` as Slack does.
#[tokio::test]
async fn slacks_own_sdk_signs_and_accepts_as_the_service_does() {
    let Some(python) = venv_python("slack_sdk", "slack_sdk (`.ci/run` installs it)") else { return };
    let mut fake = fake_slack(BOT_TOKEN, 0).await;
    let now = unix_seconds();
    let body = press(ALICE, "airlock_decide_approve", "t1", CHANNEL, "1.2", "https://hooks.slack.com/actions/T1/1/x");
    let cases: Vec<Value> = [
        (now, body.as_str()),
        (now - 200, "payload=%7B%7D"),
        (now + 200, ""),
        (now - 400, body.as_str()),
        (now + 400, "payload=%7B%7D"),
    ]
    .iter()
    .flat_map(|(timestamp, body)| {
        let good = sign(SIGNING_SECRET, *timestamp, body);
        let forged = sign("another-secret", *timestamp, body);
        [
            json!({"timestamp": timestamp, "body": body, "signature": good}),
            json!({"timestamp": timestamp, "body": body, "signature": forged}),
            json!({"timestamp": timestamp, "body": format!("{body}&x=1"), "signature": good}),
        ]
    })
    .collect();
    let script = r#"
import json, sys
from slack_sdk import WebClient
from slack_sdk.signature import SignatureVerifier
given = json.load(sys.stdin)
verifier = SignatureVerifier(given["secret"])
out = {"cases": []}
for case in given["cases"]:
    out["cases"].append({
        "signature": verifier.generate_signature(timestamp=str(case["timestamp"]), body=case["body"]),
        "valid": verifier.is_valid(body=case["body"], timestamp=str(case["timestamp"]), signature=case["signature"]),
    })
client = WebClient(token=given["token"], base_url=given["api_url"] + "/")
posted = client.chat_postMessage(channel="C1", text="hello", blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}])
updated = client.chat_update(channel=posted["channel"], ts=posted["ts"], text="bye")
out["posted"] = posted.data
out["updated"] = updated.data
json.dump(out, sys.stdout)
"#;
    let given = json!({"secret": SIGNING_SECRET, "token": BOT_TOKEN, "api_url": fake.api_url, "cases": cases});
    let mut child = tokio::process::Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(given.to_string().as_bytes()).await.unwrap();
    let output = child.wait_with_output().await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();

    let mut accepted = 0;
    for (case, sdk) in cases.iter().zip(out["cases"].as_array().unwrap()) {
        let (timestamp, body) = (case["timestamp"].as_i64().unwrap(), case["body"].as_str().unwrap());
        assert_eq!(sdk["signature"].as_str(), Some(sign(SIGNING_SECRET, timestamp, body).as_str()), "{case}");
        let ours =
            verify(SIGNING_SECRET, Some(&timestamp.to_string()), case["signature"].as_str(), body.as_bytes(), now);
        assert_eq!(ours.is_ok(), sdk["valid"].as_bool().unwrap(), "{case}: {ours:?}");
        if ours.is_ok() {
            accepted += 1;
        } else if (now - timestamp).abs() > 300 {
            assert_eq!(ours, Err(Unsigned::Stale), "{case}");
        } else {
            assert_eq!(ours, Err(Unsigned::Forged), "{case}");
        }
    }
    assert_eq!(accepted, 3, "one signed case per fresh timestamp");

    // The SDK's client reads the fake's answers as Slack's.
    assert_eq!((out["posted"]["ok"].as_bool(), out["posted"]["channel"].as_str()), (Some(true), Some("C1")));
    assert_eq!(out["updated"]["ts"], out["posted"]["ts"]);
    let posted = fake.calls.recv().await.unwrap();
    assert_eq!(
        (posted.method.as_str(), posted.authorization.as_str()),
        ("chat.postMessage", "Bearer xoxb-test-bot-token")
    );
    assert_eq!(posted.arguments["blocks"][0]["text"]["text"], "hi");
    assert_eq!(fake.calls.recv().await.unwrap().method, "chat.update");
}
