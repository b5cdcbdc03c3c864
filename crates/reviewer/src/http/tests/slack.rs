//! Slack's interactivity endpoint through the router: refused without a Slack app, a
//! signature, or above its body limit; a press decided by the desk within its reviewer's pools.

use std::collections::BTreeMap;

use super::*;
use crate::slack::interactions::{BODY_LIMIT, PATH};
use crate::slack::signature::sign;
use crate::slack::{Hidden, Slack};
use crate::task::State;
use crate::webhooks::Webhooks;

const SECRET: &str = "signing-secret";

/// The state of [`setup`]'s tasks with a Slack app mapping `U1` to alice (who reviews `ops`).
async fn with_slack() -> (AppState, Outbox, Vec<String>) {
    let users = BTreeMap::from([("U1".to_owned(), "alice".to_owned())]);
    let channels = BTreeMap::from([("ops".to_owned(), "C1".to_owned())]);
    let slack = Slack::new("http://127.0.0.1:9/api", Hidden::new("xoxb-1"), Hidden::new(SECRET), channels, users);
    let webhooks = Webhooks { slack: Some(Arc::new(slack.unwrap())), ..Webhooks::default() };
    let store = memory_store().await;
    with_tasks(AppState::observed(store, reviewers(), pools(), Site::default(), Arc::default(), None, webhooks)).await
}

/// `user`'s press of `decision` on `task`, signed with `secret` now.
fn press(user: &str, decision: &str, task: &str, secret: &str) -> Request<Body> {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": user},
        "actions": [{"type": "button", "action_id": format!("airlock_decide_{decision}"), "value": task}],
    });
    let body = serde_urlencoded::to_string([("payload", payload.to_string())]).unwrap();
    signed(body, secret)
}

fn signed(body: String, secret: &str) -> Request<Body> {
    let timestamp = (now_ms() / 1000).to_string();
    Request::post(PATH)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", &timestamp)
        .header("x-slack-signature", sign(secret, &timestamp, body.as_bytes()))
        .body(Body::from(body))
        .unwrap()
}

async fn pending(shared: &AppState, id: &str) -> bool {
    shared.desk.store().task(id).await.unwrap().unwrap().is_pending()
}

#[tokio::test]
async fn a_press_is_refused_without_a_slack_app_or_a_signature_and_above_the_body_limit() {
    let (shared, _outbox, ids) = setup().await;
    let (status, _, _) = send(&shared, press("U1", "approve", &ids[0], SECRET)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (shared, _outbox, ids) = with_slack().await;
    let unsigned = Request::post(PATH).body(Body::from("payload=%7B%7D")).unwrap();
    assert_eq!(send(&shared, unsigned).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(send(&shared, press("U1", "approve", &ids[0], "another")).await.0, StatusCode::UNAUTHORIZED);
    let large = format!("payload={}", "x".repeat(BODY_LIMIT));
    assert_eq!(send(&shared, signed(large, SECRET)).await.0, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(pending(&shared, &ids[0]).await);
}

#[tokio::test]
async fn a_press_is_decided_by_the_desk_within_the_pools_of_its_reviewer() {
    let (shared, mut outbox, ids) = with_slack().await;
    // The security task is not in alice's pools: nothing is decided.
    assert_eq!(send(&shared, press("U1", "approve", &ids[2], SECRET)).await.0, StatusCode::OK);
    assert!(pending(&shared, &ids[2]).await);
    // A choice the task does not offer is refused by the desk.
    assert_eq!(send(&shared, press("U1", "continue", &ids[0], SECRET)).await.0, StatusCode::OK);
    assert!(pending(&shared, &ids[0]).await);

    assert_eq!(send(&shared, press("U1", "reject", &ids[0], SECRET)).await.0, StatusCode::OK);
    let task = shared.desk.store().task(&ids[0]).await.unwrap().unwrap();
    let State::Decided(verdict) = task.state else { panic!("{task:?}") };
    assert_eq!((verdict.decision, verdict.decided_by.as_str()), (Decision::Reject, "alice"));
    assert_eq!(outbox.recv().await.unwrap().task_id, ids[0]);
}
