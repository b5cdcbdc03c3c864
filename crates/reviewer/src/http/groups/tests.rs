//! Grouped calls through `oneshot`: listed within one's own pools, decided only with the count
//! the reviewer confirmed and with one of the group's choices, each task on its own; the UI's
//! groups page, its confirmation and the confirmed form.

use airlock_records::time::now_ms;
use airlock_telemetry::metrics::ReviewerLabels;
use axum::body::Body;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::fixtures::human;
use crate::http::tests::{ALICE, BOB, api, browser, csrf_of, login, send, setup};
use crate::store::Inserted;

/// The test setup's tasks and four more calls identical to its first, of other samples.
async fn grouped() -> (crate::http::AppState, crate::http::tests::Outbox, Vec<String>) {
    let (shared, outbox, mut ids) = setup().await;
    for sample in ["s2", "s3", "s4", "s5"] {
        let Inserted::Created(id) = shared
            .desk
            .store()
            .insert(&human("ops", sample, &format!("call-{sample}"), false, 0), now_ms())
            .await
            .unwrap()
        else {
            panic!("not created")
        };
        ids.push(id);
    }
    (shared, outbox, ids)
}

async fn groups_of(shared: &crate::http::AppState, token: &str) -> Vec<Value> {
    let (status, _, text) = send(shared, api("GET", "/api/groups", Some(token), None)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    serde_json::from_str::<Value>(&text).unwrap()["groups"].as_array().unwrap().clone()
}

#[tokio::test]
async fn one_confirmed_decision_answers_every_identical_call_each_on_its_own() {
    let (shared, mut outbox, ids) = grouped().await;
    let groups = groups_of(&shared, ALICE).await;
    assert_eq!(groups.len(), 1, "the review and bob's pool's task are no part of it: {groups:?}");
    let (group, count) = (groups[0]["group"].as_str().unwrap().to_owned(), groups[0]["count"].as_u64());
    assert_eq!(count, Some(5));
    assert_eq!(groups[0]["task"]["id"].as_str(), Some(ids[0].as_str()), "the oldest shows the call");
    assert!(groups_of(&shared, BOB).await.is_empty(), "bob serves another pool");

    let decide = |token: &'static str, body: Value| {
        let (shared, uri) = (shared.clone(), format!("/api/groups/{group}/decision"));
        async move { send(&shared, api("POST", &uri, Some(token), Some(body))).await }
    };
    // Refused, and nothing decided: another pool's reviewer, a count other than the group's,
    // modify, a choice the group lacks, no count.
    assert_eq!(decide(BOB, json!({"decision": "reject", "count": 5})).await.0, StatusCode::NOT_FOUND);
    let (status, _, text) = decide(ALICE, json!({"decision": "reject", "count": 4})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(text.contains("5 pending tasks now"), "{text}");
    for decision in ["modify", "continue"] {
        let (status, _, text) = decide(ALICE, json!({"decision": decision, "count": 5})).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{decision}: {text}");
    }
    assert_eq!(decide(ALICE, json!({"decision": "reject"})).await.0, StatusCode::BAD_REQUEST);
    assert!(outbox.try_recv().is_err(), "nothing decided");

    // One decided meanwhile is listed as left; the others are alice's, each with its answer.
    send(
        &shared,
        api("POST", &format!("/api/tasks/{}/decision", ids[4]), Some(ALICE), Some(json!({"decision": "approve"}))),
    )
    .await;
    assert_eq!(outbox.try_recv().unwrap().task_id, ids[4]);
    let (status, _, text) = decide(ALICE, json!({"decision": "reject", "explanation": "Not here.", "count": 4})).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let done: Value = serde_json::from_str(&text).unwrap();
    let decided: Vec<&str> = done["decided"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(decided, [&ids[0], &ids[3], &ids[5], &ids[6]].map(String::as_str));
    assert_eq!(done["refused"], json!([]));
    let mut answered: Vec<String> = std::iter::from_fn(|| outbox.try_recv().ok()).map(|e| e.task_id).collect();
    answered.sort();
    let mut expected: Vec<String> = decided.iter().map(|id| (*id).to_owned()).collect();
    expected.sort();
    assert_eq!(answered, expected, "one answer per task");
    for id in &decided {
        let (_, _, task) = send(&shared, api("GET", &format!("/api/tasks/{id}"), Some(ALICE), None)).await;
        let task: Value = serde_json::from_str(&task).unwrap();
        assert_eq!((task["decision"].as_str(), task["decided_by"].as_str()), (Some("reject"), Some("alice")));
        assert_eq!(task["explanation"].as_str(), Some("Not here."));
    }
    assert!(groups_of(&shared, ALICE).await.is_empty());
    assert_eq!(decide(ALICE, json!({"decision": "reject", "count": 0})).await.0, StatusCode::NOT_FOUND);
    // Each task counts as one of alice's decisions (her reviewer-hour).
    let alice = ReviewerLabels { pool: "ops".into(), reviewer: "alice".into() };
    assert_eq!(shared.desk.metrics.review_decisions.get_or_create(&alice).get(), 5);
}

#[tokio::test]
async fn the_ui_shows_the_count_and_decides_only_once_confirmed() {
    let (shared, mut outbox, _) = grouped().await;
    let cookie = login(&shared, ALICE).await;
    let get = |uri: String| {
        let (shared, cookie) = (shared.clone(), cookie.clone());
        async move { send(&shared, browser("GET", &uri, Some(&cookie), None, "").body(Body::empty()).unwrap()).await }
    };
    let (status, _, page) = get("/groups".into()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("<span class=\"count\">5</span> identical calls"), "{page}");
    assert!(page.contains("reject all 5…") && !page.contains("modify all"), "{page}");
    let group = groups_of(&shared, ALICE).await[0]["group"].as_str().unwrap().to_owned();

    // The confirmation shows the count now, also when it changed since the page was read.
    let (_, _, confirm) = get(format!("/groups/{group}/confirm?decision=reject&explanation=No&count=3")).await;
    assert!(confirm.contains("it held 3, it holds 5 now") && confirm.contains("Confirm: reject 5"), "{confirm}");
    assert!(outbox.try_recv().is_err(), "reading the confirmation decides nothing");

    let csrf = csrf_of(&shared, &cookie).await;
    let post = |count: u64| {
        let (shared, cookie, csrf) = (shared.clone(), cookie.clone(), csrf.clone());
        let uri = format!("/ui/groups/{group}/decision");
        async move {
            let body = format!("csrf={csrf}&decision=reject&explanation=No&count={count}");
            let request = browser("POST", &uri, Some(&cookie), Some("http://127.0.0.1:8080"), &body);
            send(&shared, request.body(Body::from(body)).unwrap()).await
        }
    };
    assert_eq!(post(3).await.0, StatusCode::CONFLICT, "not the count confirmed");
    let (status, _, done) = post(5).await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert!(done.contains("Decided <span class=\"count\">5</span> tasks"), "{done}");
    assert_eq!(std::iter::from_fn(|| outbox.try_recv().ok()).count(), 5);
}
