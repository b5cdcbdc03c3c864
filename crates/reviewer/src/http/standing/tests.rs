//! The standing API through `oneshot`: made only on one's own pools with the task's choices,
//! a pattern that matches the task's call, a sane duration; listed and revoked per pool.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::http::tests::{ALICE, BOB, api, send, setup};

#[tokio::test]
async fn a_reviewer_answers_every_identical_call_of_their_pools_only() {
    let (shared, _outbox, ids) = setup().await;
    let stand = |body: Value, token: &'static str| {
        let shared = shared.clone();
        async move { send(&shared, api("POST", "/api/standing", Some(token), Some(body))).await }
    };
    let body = |task: &str, decision: &str, extra: Value| {
        let mut body = json!({"task": task, "decision": decision, "scope": "sample", "seconds": 900});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    // Refused, and the task left pending: another pool's task, modify, a choice the task
    // lacks, dismiss, no or too long a duration, an empty run, a pattern that misses the
    // task's own call or does not compile.
    assert_eq!(stand(body(&ids[2], "approve", json!({})), ALICE).await.0, StatusCode::NOT_FOUND);
    for (decision, extra) in [
        ("modify", json!({})),
        ("continue", json!({})),
        ("dismiss", json!({})),
        ("approve", json!({"seconds": 0})),
        ("approve", json!({"seconds": 24 * 3600 + 1})),
        ("approve", json!({"pattern": "bash(cmd='ls')"})),
        ("approve", json!({"pattern": "rm -r build"})),
        ("approve", json!({"pattern": "[z-a]"})),
    ] {
        let (status, _, text) = stand(body(&ids[0], decision, extra.clone()), ALICE).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{decision} {extra}: {text}");
    }
    assert_eq!(stand(json!({"task": ids[0], "decision": "approve"}), ALICE).await.0, StatusCode::BAD_REQUEST);
    assert!(shared.desk.store().task(&ids[0]).await.unwrap().unwrap().is_pending());
    assert!(shared.desk.store().active_standing(&["ops".to_owned()], 0).await.unwrap().is_empty());

    // Made: the task is alice's own decision, the standing decision is listed for her pool.
    let (status, _, text) =
        stand(body(&ids[0], "approve", json!({"explanation": "Builds are disposable."})), ALICE).await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
    let created: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(created["pattern"], "bash(cmd='rm -r build')");
    assert_eq!(
        (created["scope"].as_str(), created["run_id"].as_str(), created["sample_id"].as_str()),
        (Some("sample"), Some("run"), Some("s1"))
    );
    assert_eq!((created["decision"].as_str(), created["kind"].as_str()), (Some("approve"), Some("approval")));
    assert_eq!(created["decided"], json!([]), "the review task is another kind");
    let (_, _, task) = send(&shared, api("GET", &format!("/api/tasks/{}", ids[0]), Some(ALICE), None)).await;
    let task: Value = serde_json::from_str(&task).unwrap();
    assert_eq!(
        (task["decided_by"].as_str(), task["explanation"].as_str()),
        (Some("alice"), Some("Builds are disposable."))
    );
    assert_eq!(stand(body(&ids[0], "approve", json!({})), ALICE).await.0, StatusCode::CONFLICT, "decided already");

    let list = |token: &'static str| {
        let shared = shared.clone();
        async move {
            let (status, _, text) = send(&shared, api("GET", "/api/standing", Some(token), None)).await;
            assert_eq!(status, StatusCode::OK);
            serde_json::from_str::<Value>(&text).unwrap()["standing"].as_array().unwrap().len()
        }
    };
    assert_eq!((list(ALICE).await, list(BOB).await), (1, 0), "bob serves another pool");
    let revoke = format!("/api/standing/{}/revoke", created["id"]);
    assert_eq!(send(&shared, api("POST", &revoke, Some(BOB), None)).await.0, StatusCode::NOT_FOUND);
    assert_eq!(send(&shared, api("POST", &revoke, None, None)).await.0, StatusCode::UNAUTHORIZED);
    let (status, _, text) = send(&shared, api("POST", &revoke, Some(ALICE), None)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let revoked: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(revoked["revoked_by"], "alice");
    assert_eq!(send(&shared, api("POST", &revoke, Some(ALICE), None)).await.0, StatusCode::CONFLICT);
    assert_eq!(list(ALICE).await, 0);
}

#[tokio::test]
async fn no_standing_approval_stands_in_for_two_people() {
    let (shared, _outbox, ids) = crate::http::tests::two_person().await;
    let stand = |decision: &str| {
        let body = json!({"task": ids[0], "decision": decision, "scope": "pool", "seconds": 900});
        send(&shared, api("POST", "/api/standing", Some("alice"), Some(body)))
    };
    let (status, _, text) = stand("approve").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{text}");
    assert!(text.contains("needs several approvals"), "{text}");
    let task = shared.desk.store().task(&ids[0]).await.unwrap().unwrap();
    assert!(task.is_pending() && task.approvals.is_empty(), "not even alice's own approval is counted");
    let (status, _, text) = stand("reject").await;
    assert_eq!(status, StatusCode::CREATED, "one person may reject for all: {text}");
    let created: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(created["decided"], json!([ids[1]]), "the other approval task of the pool, by alice's standing reject");
}
