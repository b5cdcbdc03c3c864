//! Incidents and run switches through `oneshot`: marked by reviewers on their own pools' tasks
//! (the API, the card, a decision), runs listed and switched by admins only.

use airlock_control::ControlLog;
use airlock_records::time::now_ms;
use airlock_transport::MemoryTransport;
use axum::body::Body;
use axum::http::{StatusCode, header};
use serde_json::{Value, json};

use crate::auth::{CSRF_HEADER, Reviewer, Reviewers, sha256_hex};
use crate::desk::control::Control;
use crate::fixtures::{control_log, human, memory_store, until};
use crate::http::AppState;
use crate::http::tests::{ALICE, BOB, Outbox, api, browser, csrf_of, login, send};
use crate::store::Inserted;

/// An admin of `ops`.
const CAROL: &str = "carol-token";

/// The service with alice (`ops`), bob (`security`) and carol (`ops`, an admin), three
/// pending tasks of run `run` (two of `ops`, one of `security`), following a control log;
/// and an operator's view of that log.
async fn controlled() -> (AppState, Outbox, Vec<String>, ControlLog<MemoryTransport>) {
    let reviewer = |name: &str, token: &str, pool: &str, admin| Reviewer {
        name: name.into(),
        token_sha256: sha256_hex(token),
        pools: vec![pool.into()],
        admin,
        overrides: Vec::new(),
    };
    let reviewers = Reviewers::from_list(vec![
        reviewer("alice", ALICE, "ops", false),
        reviewer("bob", BOB, "security", false),
        reviewer("carol", CAROL, "ops", true),
    ]);
    let (state, outbox) = AppState::new(memory_store().await, reviewers, vec!["ops".into(), "security".into()]);
    let mut ids = Vec::new();
    for incoming in
        [human("ops", "s1", "c1", false, 0), human("ops", "s1", "c2", true, 0), human("security", "s2", "c1", false, 0)]
    {
        let Inserted::Created(id) = state.desk.store().insert(&incoming, now_ms()).await.unwrap() else { panic!() };
        ids.push(id);
    }
    let transport = MemoryTransport::new();
    state.desk.follow(Control::new(control_log(&transport, "reviewer-1").await, "reviewer-1", None));
    let operator = control_log(&transport, "operator").await;
    (state, outbox, ids, operator)
}

/// Waits until `log`'s view holds exactly the incidents `marked` in run `run`.
async fn marked(log: &ControlLog<MemoryTransport>, run: &str, marked: &[&str]) {
    let mut want: Vec<&str> = marked.to_vec();
    want.sort();
    until(log.view(), |state| {
        let mut have: Vec<&str> =
            state.run("", run).map(|r| r.incidents.iter().map(String::as_str).collect()).unwrap_or_default();
        have.sort();
        have == want
    })
    .await;
}

#[tokio::test]
async fn run_switches_and_the_runs_are_for_admins_only() {
    let (shared, _outbox, _ids, operator) = controlled().await;
    let terminate = "/api/runs/run/terminate";
    assert_eq!(send(&shared, api("POST", terminate, None, None)).await.0, StatusCode::UNAUTHORIZED);
    for (method, uri) in
        [("POST", terminate), ("POST", "/api/runs/run/pause"), ("POST", "/api/runs/run/resume"), ("GET", "/api/runs")]
    {
        let (status, _, body) = send(&shared, api(method, uri, Some(ALICE), None)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {uri}: {body}");
        assert!(body.contains("only an admin may see this"), "{body}");
    }
    assert!(operator.view().read().run("", "run").is_none(), "nothing reached the log");

    let (status, _, body) = send(&shared, api("POST", terminate, Some(CAROL), Some(json!({"pool": "ops"})))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, _, body) = send(&shared, api("POST", terminate, Some(CAROL), Some(json!({"run": "r"})))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let body = json!({"reason": "caught exfiltration", "tenant": ""});
    let (status, _, text) = send(&shared, api("POST", terminate, Some(CAROL), Some(body))).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let switched: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(switched, json!({"run": "run", "tenant": "", "response": "terminate", "by": "carol"}));
    let (status, _, text) = send(&shared, api("POST", "/api/runs/calm/pause", Some(CAROL), None)).await;
    assert_eq!(status, StatusCode::OK, "no body is no reason: {text}");

    until(shared.desk.control().unwrap().view(), |state| state.run("", "calm").is_some()).await;
    let (status, _, text) = send(&shared, api("GET", "/api/runs", Some(CAROL), None)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let runs: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(runs["runs"][0]["run_id"], "calm");
    assert_eq!(
        runs["runs"][1]["switch"],
        json!({"response": "terminate", "by": "carol", "reason": "caught exfiltration"})
    );

    // The Runs page and its forms: an admin's only.
    let alice = login(&shared, ALICE).await;
    let carol = login(&shared, CAROL).await;
    let page = |cookie: &str| browser("GET", "/runs", Some(cookie), None, "").body(Body::empty()).unwrap();
    assert_eq!(send(&shared, page(&alice)).await.0, StatusCode::FORBIDDEN);
    let (_, _, pending) = send(&shared, browser("GET", "/", Some(&alice), None, "").body(Body::empty()).unwrap()).await;
    assert!(!pending.contains("href=\"/runs\""), "no Runs link for alice");
    let (status, _, listed) = send(&shared, page(&carol)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(listed.contains("href=\"/runs\" class=\"active\">Runs</a>"), "{listed}");
    assert!(listed.contains("<code>run</code>") && listed.contains("caught exfiltration"), "{listed}");
    let form = |cookie: &str, csrf: &str| {
        browser("POST", "/ui/runs", Some(cookie), None, "x")
            .header(CSRF_HEADER, csrf)
            .body(Body::from("run=run&tenant=&reason=a+false+alarm&pool=&action=resume"))
            .unwrap()
    };
    let alice_csrf = csrf_of(&shared, &alice).await;
    assert_eq!(send(&shared, form(&alice, &alice_csrf)).await.0, StatusCode::FORBIDDEN);
    let (status, headers, _) = send(&shared, form(&carol, &csrf_of(&shared, &carol).await)).await;
    assert_eq!((status, &headers[header::LOCATION]), (StatusCode::SEE_OTHER, &"/runs".parse().unwrap()));
    until(operator.view(), |state| state.run("", "run").is_some_and(|r| r.switch.is_none())).await;
}

#[tokio::test]
async fn an_incident_is_marked_with_the_reviewers_name_on_a_task_of_their_pools() {
    let (shared, _outbox, ids, operator) = controlled().await;
    let incident = |id: &str| format!("/api/tasks/{id}/incident");
    assert_eq!(send(&shared, api("POST", &incident(&ids[0]), None, None)).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(send(&shared, api("POST", &incident("nope"), Some(ALICE), None)).await.0, StatusCode::NOT_FOUND);
    assert_eq!(send(&shared, api("POST", &incident(&ids[2]), Some(ALICE), None)).await.0, StatusCode::NOT_FOUND);
    let (status, _, body) = send(&shared, api("POST", &incident(&ids[0]), Some(ALICE), Some(json!({"why": 1})))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, _, body) =
        send(&shared, api("POST", &incident(&ids[0]), Some(ALICE), Some(json!({"note": "a\u{0}b"})))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");

    let (status, _, text) =
        send(&shared, api("POST", &incident(&ids[0]), Some(ALICE), Some(json!({"note": "reads ~/.ssh"})))).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let marked_view: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        marked_view,
        json!({"task": ids[0], "run_id": "run", "tenant": "", "by": "alice", "note": "reads ~/.ssh"})
    );
    // Twice is harmless, and a task is still pending after it: marking decides nothing.
    assert_eq!(send(&shared, api("POST", &incident(&ids[0]), Some(ALICE), None)).await.0, StatusCode::OK);
    assert!(shared.desk.store().task(&ids[0]).await.unwrap().unwrap().is_pending());

    // A decided task can be marked, and a decision can mark its task.
    let decide = |id: &str| format!("/api/tasks/{id}/decision");
    let continued =
        send(&shared, api("POST", &decide(&ids[1]), Some(ALICE), Some(json!({"decision": "continue"})))).await;
    assert_eq!(continued.0, StatusCode::OK);
    assert_eq!(send(&shared, api("POST", &incident(&ids[1]), Some(ALICE), None)).await.0, StatusCode::OK);
    let body = json!({"decision": "reject", "explanation": "no", "incident": true, "note": "plants a key"});
    let (status, _, text) = send(&shared, api("POST", &decide(&ids[2]), Some(BOB), Some(body))).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["decision"], "reject");
    marked(&operator, "run", &[&ids[0], &ids[1], &ids[2]]).await;
}

#[tokio::test]
async fn the_card_and_the_history_offer_an_incident_mark_and_the_ui_posts_it() {
    let (shared, _outbox, ids, operator) = controlled().await;
    let cookie = login(&shared, ALICE).await;
    let csrf = csrf_of(&shared, &cookie).await;
    let card = browser("GET", &format!("/ui/tasks/{}", ids[0]), Some(&cookie), None, "").body(Body::empty()).unwrap();
    let (_, _, html) = send(&shared, card).await;
    assert!(html.contains(&format!("action=\"/ui/tasks/{}/incident\"", ids[0])), "{html}");
    assert!(html.contains("name=\"incident\" value=\"true\""), "the decide form's box: {html}");

    let post = |uri: String, body: &str| {
        browser("POST", &uri, Some(&cookie), None, "x")
            .header(CSRF_HEADER, &csrf)
            .body(Body::from(body.to_owned()))
            .unwrap()
    };
    let (status, headers, _) = send(&shared, post(format!("/ui/tasks/{}/incident", ids[0]), "note=exfiltrates")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[header::LOCATION].to_str().unwrap(), format!("/#task-{}", ids[0]), "back to the task");
    let decided =
        post(format!("/ui/tasks/{}/decision", ids[1]), "decision=terminate&explanation=plants+a+key&incident=true");
    assert_eq!(send(&shared, decided).await.0, StatusCode::SEE_OTHER);
    marked(&operator, "run", &[&ids[0], &ids[1]]).await;

    let (_, _, history) =
        send(&shared, browser("GET", "/history", Some(&cookie), None, "").body(Body::empty()).unwrap()).await;
    assert!(history.contains(&format!("action=\"/ui/tasks/{}/incident\"", ids[1])), "{history}");
    let (status, headers, _) = send(&shared, post(format!("/ui/tasks/{}/incident", ids[1]), "")).await;
    assert_eq!((status, headers[header::LOCATION].to_str().unwrap()), (StatusCode::SEE_OTHER, "/history"));
}
