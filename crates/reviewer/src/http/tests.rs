//! The router through `oneshot`: API authorisation, choices, conflicts; the UI's login,
//! CSRF and escaping; sessions ending their event streams; the public URL; failed sign-ins.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use airlock_contract::v1;
use airlock_policy::Decision;
use airlock_records::time::now_ms;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, HeaderValue, Request, StatusCode, header};
use prost::Message as _;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use super::*;
use crate::auth::{CSRF_HEADER, Reviewer, Reviewers, SESSION_COOKIE, sha256_hex};
use crate::fixtures::{POLICY, explained, human, memory_store};
use crate::http::AppState;
use crate::site::Site;
use crate::store::Inserted;
use crate::task::DISMISSED_EXPLANATION;

pub(super) const ALICE: &str = "alice-token";
pub(super) const BOB: &str = "bob-token";

/// The address requests come from unless a test says otherwise.
const PEER: &str = "192.0.2.1:50000";

pub(super) type Outbox = tokio::sync::mpsc::UnboundedReceiver<crate::store::OutboxEntry>;

pub(super) async fn setup() -> (AppState, Outbox, Vec<String>) {
    with_tasks(AppState::new(memory_store().await, reviewers(), pools())).await
}

async fn setup_site(site: Site) -> (AppState, Outbox, Vec<String>) {
    with_tasks(AppState::observed(
        memory_store().await,
        reviewers(),
        pools(),
        site,
        Arc::default(),
        None,
        Default::default(),
    ))
    .await
}

fn reviewers() -> Reviewers {
    Reviewers::from_list(vec![
        Reviewer {
            name: "alice".into(),
            token_sha256: sha256_hex(ALICE),
            pools: vec!["ops".into()],
            admin: false,
            overrides: Vec::new(),
        },
        Reviewer {
            name: "bob".into(),
            token_sha256: sha256_hex(BOB),
            pools: vec!["security".into()],
            admin: false,
            overrides: Vec::new(),
        },
    ])
}

fn pools() -> Vec<String> {
    vec!["ops".into(), "security".into()]
}

pub(super) async fn with_tasks((shared, outbox): (AppState, Outbox)) -> (AppState, Outbox, Vec<String>) {
    let mut ids = Vec::new();
    for incoming in
        [human("ops", "s1", "c1", false, 0), human("ops", "s1", "c2", true, 0), human("security", "s2", "c1", false, 0)]
    {
        let Inserted::Created(id) = shared.desk.store().insert(&incoming, now_ms()).await.unwrap() else { panic!() };
        ids.push(id);
    }
    (shared, outbox, ids)
}

/// The router's response, its body not read yet; from [`PEER`] unless the request says.
async fn respond(shared: &AppState, mut request: Request<Body>) -> axum::response::Response {
    if request.extensions().get::<ConnectInfo<SocketAddr>>().is_none() {
        request.extensions_mut().insert(ConnectInfo(PEER.parse::<SocketAddr>().unwrap()));
    }
    app(shared.clone()).oneshot(request).await.unwrap()
}

pub(super) async fn send(shared: &AppState, request: Request<Body>) -> (StatusCode, HeaderMap, String) {
    let (parts, body) = respond(shared, request).await.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    (parts.status, parts.headers, String::from_utf8_lossy(&bytes).into_owned())
}

pub(super) fn api(method: &str, uri: &str, token: Option<&str>, body: Option<Value>) -> Request<Body> {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    match body {
        Some(body) => request.header(header::CONTENT_TYPE, "application/json").body(Body::from(body.to_string())),
        None => request.body(Body::empty()),
    }
    .unwrap()
}

#[tokio::test]
async fn the_api_shows_and_decides_only_the_callers_pools() {
    let (shared, mut outbox, ids) = setup().await;
    let (status, headers, _) = send(&shared, api("GET", "/api/tasks", None, None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(headers[header::CONTENT_SECURITY_POLICY], CSP);
    assert_eq!(send(&shared, api("GET", "/api/tasks", Some("wrong"), None)).await.0, StatusCode::UNAUTHORIZED);

    let (status, _, body) = send(&shared, api("GET", "/api/tasks", Some(ALICE), None)).await;
    assert_eq!(status, StatusCode::OK);
    let list: Value = serde_json::from_str(&body).unwrap();
    let tasks = list["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0]["id"], ids[0].as_str());
    assert_eq!(tasks[0]["kind"], "approval");
    assert_eq!(tasks[0]["choices"], json!(["approve", "reject", "terminate"]));
    assert_eq!(tasks[0]["call"]["function"], "bash");
    assert_eq!(tasks[0]["call"]["arguments"]["cmd"], "rm -r build");
    assert_eq!(tasks[0]["correlation"], "approval/run/s1/1/c1");
    assert_eq!(tasks[0]["state"], "pending");
    assert_eq!(tasks[1]["choices"], json!(["continue", "terminate"]));
    assert!(tasks[1]["shown"]["call"]["text"].as_str().unwrap().contains("**Result**"));

    // Another pool's task does not exist for alice.
    let uri = format!("/api/tasks/{}", ids[2]);
    assert_eq!(send(&shared, api("GET", &uri, Some(ALICE), None)).await.0, StatusCode::NOT_FOUND);
    let decide = format!("/api/tasks/{}/decision", ids[2]);
    let approve = json!({"decision": "approve"});
    assert_eq!(send(&shared, api("POST", &decide, Some(ALICE), Some(approve.clone()))).await.0, StatusCode::NOT_FOUND);

    // Choices are checked; a bad body says what is expected.
    let decide = format!("/api/tasks/{}/decision", ids[0]);
    let (status, _, body) = send(&shared, api("POST", &decide, Some(ALICE), Some(json!({"decision": "modify"})))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body.contains("'modify' is not one of this task's choices (approve, reject, terminate)"), "{body}");
    let (status, _, body) = send(&shared, api("POST", &decide, Some(ALICE), Some(json!({"decision": "maybe"})))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, _, body) = send(&shared, api("POST", &decide, Some(ALICE), Some(json!({"verdict": "approve"})))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(outbox.try_recv().is_err(), "nothing decided yet");

    // A decision is recorded once, with the reviewer's name; the second is a conflict.
    let body = json!({"decision": "reject", "explanation": "not on a Friday"});
    let (status, _, text) = send(&shared, api("POST", &decide, Some(ALICE), Some(body))).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let task: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (task["state"].as_str(), task["decision"].as_str(), task["decided_by"].as_str()),
        (Some("decided"), Some("reject"), Some("alice"))
    );
    let entry = outbox.try_recv().expect("the answer went to the outbox");
    let answer = airlock_contract::v1::StepResult::decode(entry.body.as_slice()).unwrap().answer.unwrap();
    assert_eq!((answer.decided_by.as_str(), answer.explanation.as_deref()), ("alice", Some("not on a Friday")));
    let (status, _, text) = send(&shared, api("POST", &decide, Some(ALICE), Some(approve))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let conflict: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((conflict["error"].as_str(), conflict["decided_by"].as_str()), (Some("already decided"), Some("alice")));
    assert!(outbox.try_recv().is_err(), "nothing sent twice");

    // A dismissed review fails closed to terminate, with Inspect's default explanation text.
    let dismiss = format!("/api/tasks/{}/decision", ids[1]);
    let (status, _, text) =
        send(&shared, api("POST", &dismiss, Some(ALICE), Some(json!({"decision": "dismiss"})))).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let task: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(task["decision"], "terminate");
    assert_eq!(task["explanation"], DISMISSED_EXPLANATION);

    let (_, _, text) = send(&shared, api("GET", "/api/history", Some(ALICE), None)).await;
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["tasks"].as_array().unwrap().len(), 2);
    let (_, _, text) = send(&shared, api("GET", "/api/me", Some(BOB), None)).await;
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), json!({"name": "bob", "pools": ["security"]}));
}

pub(super) fn browser(
    method: &str,
    uri: &str,
    cookie: Option<&str>,
    origin: Option<&str>,
    body: &str,
) -> axum::http::request::Builder {
    let mut request = Request::builder().method(method).uri(uri).header(header::HOST, "127.0.0.1:8080");
    if let Some(cookie) = cookie {
        request = request.header(header::COOKIE, format!("{SESSION_COOKIE}={cookie}"));
    }
    if let Some(origin) = origin {
        request = request.header(header::ORIGIN, origin);
    }
    if !body.is_empty() {
        request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    }
    request
}

pub(super) async fn login(shared: &AppState, token: &str) -> String {
    let request = browser("POST", "/login", None, Some("http://127.0.0.1:8080"), "x")
        .body(Body::from(format!("token={token}")))
        .unwrap();
    let (status, headers, _) = send(shared, request).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let cookie = headers[header::SET_COOKIE].to_str().unwrap().to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    cookie.trim_start_matches("airlock_session=").split(';').next().unwrap().to_owned()
}

/// The CSRF token a page carries in its `csrf-token` meta element.
fn csrf_token(page: &str) -> String {
    page.split("name=\"csrf-token\" content=\"").nth(1).unwrap().split('"').next().unwrap().to_owned()
}

/// The CSRF token of the session `cookie`, read from its pending list.
pub(super) async fn csrf_of(shared: &AppState, cookie: &str) -> String {
    let (_, _, page) = send(shared, browser("GET", "/", Some(cookie), None, "").body(Body::empty()).unwrap()).await;
    csrf_token(&page)
}

#[tokio::test]
async fn the_ui_needs_a_session_and_a_csrf_token() {
    let (shared, _outbox, ids) = setup().await;
    let (status, headers, page) = send(&shared, browser("GET", "/", None, None, "").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Sign in"));
    assert_eq!(headers[header::CONTENT_SECURITY_POLICY], CSP);

    // Login from another site, or with a wrong token, fails.
    let cross = browser("POST", "/login", None, Some("http://evil.example"), "x")
        .body(Body::from(format!("token={ALICE}")))
        .unwrap();
    assert_eq!(send(&shared, cross).await.0, StatusCode::FORBIDDEN);
    let wrong = browser("POST", "/login", None, None, "x").body(Body::from("token=nope")).unwrap();
    assert_eq!(send(&shared, wrong).await.0, StatusCode::UNAUTHORIZED);

    let cookie = login(&shared, ALICE).await;
    let (status, _, page) =
        send(&shared, browser("GET", "/", Some(&cookie), None, "").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains(&format!("id=\"task-{}\"", ids[0])), "{page}");
    assert!(!page.contains(&format!("id=\"task-{}\"", ids[2])), "bob's pool is not shown to alice");
    assert!(page.contains("data-key=\"a\""));
    let csrf = csrf_token(&page);

    // A decision without the CSRF token, or from another origin, is refused.
    let uri = format!("/ui/tasks/{}/decision", ids[0]);
    let no_token = browser("POST", &uri, Some(&cookie), None, "x").body(Body::from("decision=approve")).unwrap();
    assert_eq!(send(&shared, no_token).await.0, StatusCode::FORBIDDEN);
    // The same host under another scheme is another origin: the service speaks plain HTTP.
    for origin in ["http://evil.example", "https://127.0.0.1:8080", "ws://127.0.0.1:8080"] {
        let cross = browser("POST", &uri, Some(&cookie), Some(origin), "x")
            .header(CSRF_HEADER, &csrf)
            .body(Body::from("decision=approve"))
            .unwrap();
        assert_eq!(send(&shared, cross).await.0, StatusCode::FORBIDDEN, "{origin}");
    }
    assert!(shared.desk.store().task(&ids[0]).await.unwrap().unwrap().is_pending());

    let good = browser("POST", &uri, Some(&cookie), Some("http://127.0.0.1:8080"), "x")
        .header(CSRF_HEADER, &csrf)
        .header(header::ACCEPT, "application/json")
        .body(Body::from("decision=approve&explanation="))
        .unwrap();
    let (status, _, text) = send(&shared, good).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let task: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (task["decided_by"].as_str(), task["explanation"].as_str()),
        (Some("alice"), Some("Human operator approved tool call."))
    );

    // A plain form post (no script) works with the form's token and redirects.
    let uri = format!("/ui/tasks/{}/decision", ids[1]);
    let form = browser("POST", &uri, Some(&cookie), None, "x")
        .body(Body::from(format!("decision=continue&csrf={csrf}")))
        .unwrap();
    assert_eq!(send(&shared, form).await.0, StatusCode::SEE_OTHER);

    let (status, _, page) =
        send(&shared, browser("GET", "/history", Some(&cookie), None, "").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("<td>alice</td>"), "{page}");
    assert_eq!(
        send(&shared, browser("GET", "/events", None, None, "").body(Body::empty()).unwrap()).await.0,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn model_text_is_escaped_and_invisible_characters_are_shown() {
    let (shared, _outbox, _) = setup().await;
    let mut incoming = human("ops", "s9", "c9", false, 0);
    let request = incoming.human.task.as_mut().unwrap().request.as_mut().unwrap();
    let Some(airlock_contract::v1::request::Body::Approval(body)) = request.body.as_mut() else { panic!() };
    body.message = "Ignore this: <img src=x onerror=alert(1)>\u{1b}[2J".into();
    body.call.as_mut().unwrap().arguments_json =
        json!({"cmd": "echo '<script>alert(1)</script>' \u{202e}txt.exe"}).to_string();
    let Inserted::Created(id) = shared.desk.store().insert(&incoming, now_ms()).await.unwrap() else { panic!() };
    let cookie = login(&shared, ALICE).await;
    let (status, _, card) =
        send(&shared, browser("GET", &format!("/ui/tasks/{id}"), Some(&cookie), None, "").body(Body::empty()).unwrap())
            .await;
    assert_eq!(status, StatusCode::OK);
    assert!(!card.contains("<script>") && !card.contains("<img"), "{card}");
    assert!(card.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{card}");
    assert!(card.contains("&lt;img src=x onerror=alert(1)&gt;"), "{card}");
    assert!(card.contains("‹U+001B›</span>[2J") && card.contains("‹U+202E›</span>txt.exe"), "{card}");
    assert!(card.contains("class=\"warn\""), "{card}");
}

#[tokio::test]
async fn the_task_json_carries_the_trail_the_policy_and_the_conversation() {
    let (shared, _outbox, _) = setup().await;
    let Inserted::Created(id) = shared.desk.store().insert(&explained("ops", "s7", "c7"), now_ms()).await.unwrap()
    else {
        panic!()
    };
    let (status, _, body) = send(&shared, api("GET", &format!("/api/tasks/{id}"), Some(ALICE), None)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let task: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        task["trail"],
        json!([{
            "approver": "monitor",
            "decision": "escalate",
            "explanation": "Score 5 is between approve_below 3 and escalate_below 8.",
            "decided_by": "monitor-1",
            "metadata": {"monitor": "monitor-1", "model": "fake-openai", "score": 5, "reason": "deletes a directory",
                         "attempts": 1},
        }])
    );
    assert_eq!(task["policy"], json!({"name": null, "digest": airlock_policy::document::digest(POLICY)}));
    assert_eq!(task["history_omitted"], 2);
    let history = task["history"].as_array().unwrap();
    assert_eq!(history.iter().map(|m| m["role"].as_str().unwrap()).collect::<Vec<_>>(), ["user", "tool", "assistant"]);
    assert_eq!(history[1]["function"], "df");
    assert_eq!(history[2]["tool_calls"][0]["arguments"]["cmd"], "rm -r build");
    // The run's honest/attack label is the one part of the origin a person is not shown.
    assert_eq!((task["origin"]["run_id"].as_str(), task["origin"]["task"].as_str()), (Some("run"), Some("cleanup")));
    assert!(task["origin"].get("eval_mode").is_none(), "{}", task["origin"]);
}

#[tokio::test]
async fn every_api_route_needs_a_token() {
    let (shared, mut outbox, ids) = setup().await;
    let task = format!("/api/tasks/{}", ids[0]);
    let decide = format!("/api/tasks/{}/decision", ids[0]);
    let approve = || Some(json!({"decision": "approve"}));
    for (method, uri, body) in [
        ("GET", "/api/tasks", None),
        ("GET", task.as_str(), None),
        ("POST", decide.as_str(), approve()),
        ("GET", "/api/history", None),
        ("GET", "/api/me", None),
    ] {
        for token in [None, Some("wrong")] {
            let (status, headers, body) = send(&shared, api(method, uri, token, body.clone())).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {uri} with {token:?}: {body}");
            assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
            assert!(body.contains("a valid token is required"), "{body}");
        }
    }
    // A session cookie is no token: the API takes bearers only.
    let cookie = login(&shared, ALICE).await;
    let request = browser("GET", "/api/tasks", Some(&cookie), None, "").body(Body::empty()).unwrap();
    assert_eq!(send(&shared, request).await.0, StatusCode::UNAUTHORIZED);
    // The lower-case scheme is accepted as well.
    let request = Request::builder()
        .uri("/api/me")
        .header(header::AUTHORIZATION, format!("bearer {ALICE}"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&shared, request).await.0, StatusCode::OK);
    assert!(outbox.try_recv().is_err(), "nothing decided");
}

#[tokio::test]
async fn every_ui_route_needs_a_session() {
    let (shared, _outbox, ids) = setup().await;
    let get = |uri: &str| browser("GET", uri, Some("not-a-session"), None, "").body(Body::empty()).unwrap();
    for uri in ["/events", "/ui/pending", &format!("/ui/tasks/{}", ids[0])] {
        assert_eq!(send(&shared, get(uri)).await.0, StatusCode::UNAUTHORIZED, "{uri}");
    }
    let (status, headers, _) = send(&shared, get("/history")).await;
    assert_eq!((status, &headers[header::LOCATION]), (StatusCode::SEE_OTHER, &HeaderValue::from_static("/")));
    let (status, _, page) = send(&shared, get("/")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Sign in"), "{page}");
    // A bearer token is no session.
    let decide = format!("/ui/tasks/{}/decision", ids[0]);
    let request = api("POST", &decide, Some(ALICE), None);
    assert_eq!(send(&shared, request).await.0, StatusCode::UNAUTHORIZED);

    // With a session: the cards of the caller's pools, a card of its pool, nothing of another.
    let cookie = login(&shared, ALICE).await;
    let signed = |uri: &str| browser("GET", uri, Some(&cookie), None, "").body(Body::empty()).unwrap();
    let (status, _, listed) = send(&shared, signed("/ui/pending")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(listed.contains(&format!("id=\"task-{}\"", ids[0])) && listed.contains(&format!("id=\"task-{}\"", ids[1])));
    assert!(!listed.contains(&ids[2]), "{listed}");
    assert_eq!(send(&shared, signed(&format!("/ui/tasks/{}", ids[0]))).await.0, StatusCode::OK);
    assert_eq!(send(&shared, signed(&format!("/ui/tasks/{}", ids[2]))).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn ui_posts_check_origin_form_and_token_in_order() {
    let (shared, _outbox, ids) = setup().await;
    let cookie = login(&shared, ALICE).await;
    let csrf = csrf_of(&shared, &cookie).await;
    let uri = format!("/ui/tasks/{}/decision", ids[0]);
    let post = |origin: Option<&str>, site: Option<&str>, body: String| {
        let mut request = browser("POST", &uri, Some(&cookie), origin, "x");
        if let Some(site) = site {
            request = request.header("sec-fetch-site", site);
        }
        request.body(Body::from(body)).unwrap()
    };
    // An unreadable form is refused before the origin is looked at.
    let (status, _, body) = send(&shared, post(Some("http://evil.example"), None, "explanation=x".into())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("cannot read the form"), "{body}");
    // Without an Origin, the browser's Sec-Fetch-Site decides.
    let cross = post(None, Some("cross-site"), format!("decision=approve&csrf={csrf}"));
    let (status, _, body) = send(&shared, cross).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("cross-site request refused"), "{body}");
    // A wrong token in the form is no token.
    let (status, _, body) = send(&shared, post(None, Some("same-origin"), "decision=approve&csrf=guess".into())).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("CSRF"), "{body}");
    assert!(shared.desk.store().task(&ids[0]).await.unwrap().unwrap().is_pending());
    // A decision that is not a choice: an error page for a form, JSON for the script.
    let (status, _, page) = send(&shared, post(None, None, format!("decision=continue&csrf={csrf}"))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.contains("is not one of this task"), "{page}");

    // Login, too, refuses another site.
    let request = browser("POST", "/login", None, None, "x")
        .header("sec-fetch-site", "cross-site")
        .body(Body::from(format!("token={ALICE}")))
        .unwrap();
    assert_eq!(send(&shared, request).await.0, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn logout_needs_the_token_and_ends_the_session() {
    let (shared, _outbox, _) = setup().await;
    let cookie = login(&shared, ALICE).await;
    let csrf = csrf_of(&shared, &cookie).await;
    let logout = |body: String| browser("POST", "/logout", Some(&cookie), None, "x").body(Body::from(body)).unwrap();
    let signed_in = |cookie: &str| {
        let request = browser("GET", "/ui/pending", Some(cookie), None, "").body(Body::empty()).unwrap();
        let shared = shared.clone();
        async move { send(&shared, request).await.0 == StatusCode::OK }
    };

    // Without the token the session stays: a cross-site page cannot log a reviewer out.
    assert_eq!(send(&shared, logout("csrf=guess".into())).await.0, StatusCode::FORBIDDEN);
    assert!(signed_in(&cookie).await);

    let (status, headers, _) = send(&shared, logout(format!("csrf={csrf}"))).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(headers[header::SET_COOKIE].to_str().unwrap().contains("Max-Age=0"));
    assert!(!signed_in(&cookie).await, "the session ended");

    // Without a session there is nothing to check: the cookie is cleared all the same.
    let request = browser("POST", "/logout", None, None, "").body(Body::empty()).unwrap();
    let (status, headers, _) = send(&shared, request).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(headers[header::SET_COOKIE].to_str().unwrap().starts_with("airlock_session=;"));
}

/// Replacing a reviewer's token (the tokens file changed, the service restarted on the same
/// store) ends the browser sessions opened with the old one; the new token signs in.
#[tokio::test]
async fn a_rotated_token_ends_the_sessions_opened_with_the_old_one() {
    let (shared, _outbox, ids) = setup().await;
    let cookie = login(&shared, ALICE).await;
    let status = |shared: &AppState, cookie: &str| {
        let request = browser("GET", "/ui/pending", Some(cookie), None, "").body(Body::empty()).unwrap();
        let shared = shared.clone();
        async move { send(&shared, request).await.0 }
    };
    assert_eq!(status(&shared, &cookie).await, StatusCode::OK);
    let csrf = csrf_of(&shared, &cookie).await;

    const ROTATED: &str = "alice-new-token";
    let reviewers = Reviewers::from_list(vec![Reviewer {
        name: "alice".into(),
        token_sha256: sha256_hex(ROTATED),
        pools: vec!["ops".into()],
        admin: false,
        overrides: Vec::new(),
    }]);
    let (restarted, mut outbox) = AppState::new(shared.desk.store().clone(), reviewers, pools());
    assert_eq!(status(&restarted, &cookie).await, StatusCode::UNAUTHORIZED, "the old session is refused");
    let form = browser("POST", &format!("/ui/tasks/{}/decision", ids[0]), Some(&cookie), None, "x")
        .body(Body::from(format!("csrf={csrf}&decision=approve")))
        .unwrap();
    assert_eq!(send(&restarted, form).await.0, StatusCode::UNAUTHORIZED, "and decides nothing");
    assert!(outbox.try_recv().is_err());
    assert_eq!(send(&restarted, api("GET", "/api/me", Some(ALICE), None)).await.0, StatusCode::UNAUTHORIZED);

    let fresh = login(&restarted, ROTATED).await;
    assert_eq!(status(&restarted, &fresh).await, StatusCode::OK);
}

/// Opens the event stream of session `cookie`; the task ends when the stream does.
async fn open_events(shared: &AppState, cookie: &str) -> tokio::task::JoinHandle<()> {
    let response =
        respond(shared, browser("GET", "/events", Some(cookie), None, "").body(Body::empty()).unwrap()).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()[header::CONTENT_TYPE], "text/event-stream");
    tokio::spawn(async move {
        axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    })
}

/// How long a stream may take to notice its session ended.
const PROMPTLY: Duration = Duration::from_secs(5);

#[tokio::test]
async fn logout_ends_the_sessions_event_stream() {
    let (shared, _outbox, _) = setup().await;
    let cookie = login(&shared, ALICE).await;
    let other = login(&shared, ALICE).await;
    let stream = open_events(&shared, &cookie).await;
    let other_stream = open_events(&shared, &other).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!stream.is_finished(), "the stream stays open while the session lasts");

    // As the page's sign-out button posts it.
    let csrf = csrf_of(&shared, &cookie).await;
    let logout = browser("POST", "/logout", Some(&cookie), Some("http://127.0.0.1:8080"), "x")
        .body(Body::from(format!("csrf={csrf}")))
        .unwrap();
    assert_eq!(send(&shared, logout).await.0, StatusCode::SEE_OTHER);
    tokio::time::timeout(PROMPTLY, stream).await.expect("the stream ended with its session").unwrap();
    let reconnect = browser("GET", "/events", Some(&cookie), None, "").body(Body::empty()).unwrap();
    assert_eq!(send(&shared, reconnect).await.0, StatusCode::UNAUTHORIZED, "the browser cannot reconnect");

    // Another session of the same reviewer goes on.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!other_stream.is_finished());
    shared.stop().cancel();
    tokio::time::timeout(PROMPTLY, other_stream).await.expect("the service stopped").unwrap();
}

#[tokio::test]
async fn expiry_ends_the_sessions_event_stream() {
    let ttl = Duration::from_millis(300);
    let (shared, _outbox, _) = setup_site(Site { session_ttl: ttl, ..Site::default() }).await;
    let cookie = login(&shared, ALICE).await;
    let opened = tokio::time::Instant::now();
    let stream = open_events(&shared, &cookie).await;
    tokio::time::timeout(PROMPTLY, stream).await.expect("the stream ended at expiry").unwrap();
    assert!(opened.elapsed() >= ttl - Duration::from_millis(50), "not before the session expired");
    let reconnect = browser("GET", "/events", Some(&cookie), None, "").body(Body::empty()).unwrap();
    assert_eq!(send(&shared, reconnect).await.0, StatusCode::UNAUTHORIZED);
}

/// A browser's request for `uri` sent to `host`, with `cookie` as its `Cookie` header.
fn public(method: &str, uri: &str, host: &str, cookie: Option<&str>) -> axum::http::request::Builder {
    let mut request = Request::builder().method(method).uri(uri).header(header::HOST, host);
    if let Some(cookie) = cookie {
        request = request.header(header::COOKIE, cookie);
    }
    request
}

#[tokio::test]
async fn an_https_public_url_fixes_cookies_host_and_origin() {
    let site = Site { public_url: Some("https://review.example.com".parse().unwrap()), ..Site::default() };
    let (shared, _outbox, ids) = setup_site(site).await;
    let host = "review.example.com";
    let sign_in = |origin: &str| {
        public("POST", "/login", host, None)
            .header(header::ORIGIN, origin)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(format!("token={ALICE}")))
            .unwrap()
    };

    // The origin is the public URL's, scheme included.
    assert_eq!(send(&shared, sign_in("http://review.example.com")).await.0, StatusCode::FORBIDDEN);
    let (status, headers, _) = send(&shared, sign_in("https://review.example.com")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let set = headers[header::SET_COOKIE].to_str().unwrap();
    assert!(set.starts_with("__Host-airlock_session="), "{set}");
    let attributes: Vec<&str> = set.split("; ").skip(1).collect();
    assert_eq!(attributes, ["Path=/", "Secure", "HttpOnly", "SameSite=Strict", "Max-Age=43200"]);
    let id = set.split(';').next().unwrap().trim_start_matches("__Host-airlock_session=");

    // Only the prefixed cookie names the session.
    let page = |cookie: String| public("GET", "/", host, Some(&cookie)).body(Body::empty()).unwrap();
    let (status, _, signed_in) = send(&shared, page(format!("__Host-airlock_session={id}"))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(signed_in.contains(&format!("id=\"task-{}\"", ids[0])), "{signed_in}");
    let (_, _, plain) = send(&shared, page(format!("{SESSION_COOKIE}={id}"))).await;
    assert!(plain.contains("Sign in"), "{plain}");

    // Any other Host is refused, for the UI and the API alike; the health check answers.
    for (uri, other) in [("/", "127.0.0.1:8080"), ("/api/me", "evil.example"), ("/", "review.example.com:8443")] {
        let request = public("GET", uri, other, None)
            .header(header::AUTHORIZATION, format!("Bearer {ALICE}"))
            .body(Body::empty())
            .unwrap();
        let (status, headers, body) = send(&shared, request).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{uri} for {other}: {body}");
        assert_eq!(headers[header::CONTENT_SECURITY_POLICY], CSP);
    }
    let no_host = Request::builder().uri("/api/me").body(Body::empty()).unwrap();
    assert_eq!(send(&shared, no_host).await.0, StatusCode::MISDIRECTED_REQUEST);
    let probe = public("GET", "/healthz", "10.0.0.7:8080", None).body(Body::empty()).unwrap();
    assert_eq!(send(&shared, probe).await.0, StatusCode::OK);
    let explicit_port = public("GET", "/api/me", "review.example.com:443", None)
        .header(header::AUTHORIZATION, format!("Bearer {ALICE}"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&shared, explicit_port).await.0, StatusCode::OK);

    // Logout clears the prefixed cookie (a browser ignores a `__Host-` cookie without Secure).
    let csrf = csrf_token(&signed_in);
    let logout = public("POST", "/logout", host, Some(&format!("__Host-airlock_session={id}")))
        .header(header::ORIGIN, "https://review.example.com")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("csrf={csrf}")))
        .unwrap();
    let (status, headers, _) = send(&shared, logout).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let cleared = headers[header::SET_COOKIE].to_str().unwrap();
    assert!(cleared.starts_with("__Host-airlock_session=; Path=/; Secure;") && cleared.ends_with("Max-Age=0"));
    assert!(shared.web.sessions.get(id).await.unwrap().is_none());
}

#[tokio::test]
async fn without_a_public_url_any_host_is_served_over_plain_http() {
    let (shared, _outbox, _) = setup().await;
    let host = "10.0.0.5:8080";
    let request = public("POST", "/login", host, None)
        .header(header::ORIGIN, "http://10.0.0.5:8080")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("token={ALICE}")))
        .unwrap();
    let (status, headers, _) = send(&shared, request).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let set = headers[header::SET_COOKIE].to_str().unwrap();
    assert!(set.starts_with("airlock_session=") && !set.contains("Secure"), "{set}");
    let id = set.split(';').next().unwrap().trim_start_matches("airlock_session=");
    let page = public("GET", "/", "anything.example", Some(&format!("airlock_session={id}"))).body(Body::empty());
    let (status, _, page) = send(&shared, page.unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Pending tasks"), "{page}");
}

#[tokio::test]
async fn failed_sign_ins_are_limited_per_address() {
    let (shared, _outbox, _) = setup().await;
    let sign_in = |token: &str, peer: &str| {
        let mut request = browser("POST", "/login", None, Some("http://127.0.0.1:8080"), "x")
            .body(Body::from(format!("token={token}")))
            .unwrap();
        request.extensions_mut().insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
        request
    };
    let other = "198.51.100.7:40000";
    for _ in 0..crate::auth::LOGIN_FAILURES {
        assert_eq!(send(&shared, sign_in("guess", PEER)).await.0, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(send(&shared, sign_in("guess", other)).await.0, StatusCode::UNAUTHORIZED);

    // Past the limit even the right token waits, from any port of that address.
    for peer in [PEER, "192.0.2.1:50001"] {
        let (status, headers, page) = send(&shared, sign_in(ALICE, peer)).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{page}");
        let wait: u64 = headers[header::RETRY_AFTER].to_str().unwrap().parse().unwrap();
        assert!((1..=60).contains(&wait), "{wait}");
        assert!(page.contains("Too many failed sign-ins"), "{page}");
        assert!(!headers.contains_key(header::SET_COOKIE));
    }

    // Another address signs in, and that frees nobody else.
    assert_eq!(send(&shared, sign_in(ALICE, other)).await.0, StatusCode::SEE_OTHER);
    assert_eq!(send(&shared, sign_in(ALICE, PEER)).await.0, StatusCode::TOO_MANY_REQUESTS);
}

/// Alice, Bob and Carol, all in `ops`, and three tasks of `ops` that need two approvals.
pub(super) async fn two_person() -> (AppState, Outbox, Vec<String>) {
    let reviewers = Reviewers::from_list(
        ["alice", "bob", "carol"]
            .map(|name| Reviewer {
                name: name.into(),
                token_sha256: sha256_hex(name),
                pools: vec!["ops".into()],
                admin: false,
                overrides: Vec::new(),
            })
            .to_vec(),
    );
    let (shared, outbox) = AppState::new(memory_store().await, reviewers, pools());
    let mut ids = Vec::new();
    for (call, review) in [("c1", false), ("c2", false), ("c3", true)] {
        let mut incoming = human("ops", "s1", call, review, 0);
        incoming.human.approvals = 2;
        let Inserted::Created(id) = shared.desk.store().insert(&incoming, now_ms()).await.unwrap() else { panic!() };
        ids.push(id);
    }
    (shared, outbox, ids)
}

async fn decide_json(shared: &AppState, id: &str, who: &str, body: Value) -> (StatusCode, Value) {
    let (status, _, text) =
        send(shared, api("POST", &format!("/api/tasks/{id}/decision"), Some(who), Some(body))).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn two_distinct_reviewers_must_approve_and_anyone_else_decides_at_once() {
    let (shared, mut outbox, ids) = two_person().await;
    let (status, task) =
        decide_json(&shared, &ids[0], "alice", json!({"decision": "approve", "explanation": "ok"})).await;
    assert_eq!(status, StatusCode::OK, "{task}");
    assert_eq!((task["state"].as_str(), task["approvals_needed"].as_u64()), (Some("pending"), Some(2)));
    assert_eq!(task["approvals"][0]["reviewer"], "alice");
    assert_eq!(task["approvals"][0]["explanation"], "ok");
    assert!(outbox.try_recv().is_err(), "one approval of two decides nothing");

    // Alice cannot approve twice, through the API or the UI's form.
    let (status, refused) = decide_json(&shared, &ids[0], "alice", json!({"decision": "approve"})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(refused["error"].as_str().unwrap().contains("you approved this task already"), "{refused}");
    let cookie = login(&shared, "alice").await;
    let csrf = csrf_of(&shared, &cookie).await;
    let form = browser("POST", &format!("/ui/tasks/{}/decision", ids[0]), Some(&cookie), None, "x")
        .body(Body::from(format!("csrf={csrf}&decision=approve")))
        .unwrap();
    let (status, _, page) = send(&shared, form).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(page.contains("you approved this task already"), "{page}");
    assert!(outbox.try_recv().is_err());

    // What Alice and Bob see: one of two, by Alice; only Alice's approve button is disabled.
    let (_, _, listed) = send(&shared, api("GET", "/api/tasks", Some("bob"), None)).await;
    assert_eq!(serde_json::from_str::<Value>(&listed).unwrap()["tasks"][0]["approvals"][0]["reviewer"], "alice");
    let card_of = |cookie: &str| {
        browser("GET", &format!("/ui/tasks/{}", ids[0]), Some(cookie), None, "").body(Body::empty()).unwrap()
    };
    let (_, _, card) = send(&shared, card_of(&cookie)).await;
    assert!(card.contains("1 of 2 approvals</b>: alice"), "{card}");
    assert!(card.contains("You approved this task; it needs one more approval from another reviewer."), "{card}");
    assert!(card.contains("value=\"approve\" class=\"btn approve\" data-key=\"a\" disabled"), "{card}");
    assert!(!card.contains("value=\"reject\" class=\"btn reject\" data-key=\"r\" disabled"), "{card}");
    let bob = login(&shared, "bob").await;
    let (_, _, card) = send(&shared, card_of(&bob)).await;
    assert!(card.contains("1 of 2 approvals</b>: alice") && !card.contains("disabled"), "{card}");

    // Bob's approval completes the count: decided by both, each in the answer's metadata.
    let (status, task) = decide_json(&shared, &ids[0], "bob", json!({"decision": "approve"})).await;
    assert_eq!(status, StatusCode::OK, "{task}");
    assert_eq!((task["state"].as_str(), task["decision"].as_str()), (Some("decided"), Some("approve")));
    assert_eq!(task["decided_by"], "alice+bob");
    let entry = outbox.try_recv().expect("the answer went to the outbox");
    let answer = airlock_contract::v1::StepResult::decode(entry.body.as_slice()).unwrap().answer.unwrap();
    assert_eq!(answer.decided_by, "alice+bob");
    assert_eq!(answer.explanation.as_deref(), Some("ok\nHuman operator approved tool call."));
    let metadata: Value = serde_json::from_str(&answer.metadata_json).unwrap();
    assert_eq!(metadata["approvals"].as_array().unwrap().len(), 2);
    assert_eq!(
        (&metadata["approvals"][0]["reviewer"], &metadata["approvals"][1]["reviewer"]),
        (&json!("alice"), &json!("bob"))
    );
    let (status, late) = decide_json(&shared, &ids[0], "carol", json!({"decision": "approve"})).await;
    assert_eq!((status, late["decided_by"].as_str()), (StatusCode::CONFLICT, Some("alice+bob")));

    // A reject after one approval decides at once, by the rejecter alone.
    decide_json(&shared, &ids[1], "alice", json!({"decision": "approve"})).await;
    let (status, task) = decide_json(&shared, &ids[1], "carol", json!({"decision": "reject"})).await;
    assert_eq!(
        (status, task["decision"].as_str(), task["decided_by"].as_str()),
        (StatusCode::OK, Some("reject"), Some("carol"))
    );
    let entry = outbox.try_recv().expect("the reject went to the outbox");
    let answer = airlock_contract::v1::StepResult::decode(entry.body.as_slice()).unwrap().answer.unwrap();
    assert_eq!(answer.decided_by, "carol");
    let (status, _) = decide_json(&shared, &ids[1], "bob", json!({"decision": "approve"})).await;
    assert_eq!(status, StatusCode::CONFLICT);

    // A review counts `continue`; `terminate` by the first reviewer decides at once.
    let (status, task) = decide_json(&shared, &ids[2], "bob", json!({"decision": "continue"})).await;
    assert_eq!((status, task["state"].as_str()), (StatusCode::OK, Some("pending")));
    let (status, task) = decide_json(&shared, &ids[2], "bob", json!({"decision": "terminate"})).await;
    assert_eq!((status, task["decided_by"].as_str()), (StatusCode::OK, Some("bob")));
    assert!(outbox.try_recv().is_ok() && outbox.try_recv().is_err());
}

/// Alice, Bob and Carol in `ops`; an approval task that offers modify, one that also needs two
/// approvals, and one that does not offer modify.
async fn editable() -> (AppState, Outbox, Vec<String>) {
    let (shared, outbox, _) = two_person().await;
    let mut ids = Vec::new();
    for (call, approvals, choices) in [
        ("m1", 1, vec![Decision::Approve, Decision::Modify, Decision::Reject]),
        ("m2", 2, vec![Decision::Approve, Decision::Modify, Decision::Reject]),
        ("m3", 1, vec![Decision::Approve, Decision::Reject]),
    ] {
        let mut incoming = human("ops", "s9", call, false, 0);
        incoming.human.approvals = approvals;
        incoming.human.choices = choices.iter().map(|c| crate::task::decision_to_wire(*c).into()).collect();
        let Inserted::Created(id) = shared.desk.store().insert(&incoming, now_ms()).await.unwrap() else { panic!() };
        ids.push(id);
    }
    (shared, outbox, ids)
}

fn modified_answer(outbox: &mut Outbox) -> airlock_contract::v1::StepAnswer {
    let entry = outbox.try_recv().expect("the answer went to the outbox");
    airlock_contract::v1::StepResult::decode(entry.body.as_slice()).unwrap().answer.unwrap()
}

#[tokio::test]
async fn a_person_modifies_only_the_arguments_of_a_call_that_offers_it() {
    let (shared, mut outbox, ids) = editable().await;
    let (_, task) = decide_json(&shared, &ids[0], "alice", json!({"decision": "approve", "arguments": {}})).await;
    assert!(task["error"].as_str().unwrap().contains("'arguments' go only with a modify"), "{task}");

    // Anything but a JSON object of arguments is refused, and a function cannot be named.
    for arguments in [json!(["ls"]), json!("ls"), json!(3)] {
        let body = json!({"decision": "modify", "arguments": arguments});
        let (status, refused) = decide_json(&shared, &ids[0], "alice", body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{arguments}");
        assert!(refused["error"].as_str().unwrap().contains("must be a JSON object"), "{refused}");
    }
    let (status, refused) = decide_json(&shared, &ids[0], "alice", json!({"decision": "modify"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    let (status, refused) =
        decide_json(&shared, &ids[0], "alice", json!({"decision": "modify", "arguments": null})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    let renamed = json!({"decision": "modify", "function": "python", "arguments": {"code": "print(1)"}});
    let (status, refused) = decide_json(&shared, &ids[0], "alice", renamed).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(refused["error"].as_str().unwrap().contains("unknown field `function`"), "{refused}");
    // Arguments past the request body limit never reach the decision.
    let huge = json!({"decision": "modify", "arguments": {"cmd": "x".repeat(3 << 20)}});
    let (status, _) = decide_json(&shared, &ids[0], "alice", huge).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // A task that does not offer modify refuses it.
    let (status, refused) =
        decide_json(&shared, &ids[2], "alice", json!({"decision": "modify", "arguments": {"cmd": "ls"}})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused["error"].as_str().unwrap().contains("not one of this task's choices"), "{refused}");
    assert!(outbox.try_recv().is_err(), "nothing decided");

    // A modify: the same call (id, function) with the new arguments, decided by the person.
    let body = json!({"decision": "modify", "arguments": {"cmd": "rm -r build/tmp"}, "explanation": "narrower"});
    let (status, task) = decide_json(&shared, &ids[0], "alice", body).await;
    assert_eq!(status, StatusCode::OK, "{task}");
    assert_eq!((task["decision"].as_str(), task["decided_by"].as_str()), (Some("modify"), Some("alice")));
    let answer = modified_answer(&mut outbox);
    assert_eq!(
        (answer.decision, answer.explanation.as_deref()),
        (i32::from(v1::DecisionKind::Modify), Some("narrower"))
    );
    let modified = answer.modified.expect("the modified call");
    assert_eq!((modified.id.as_str(), modified.function.as_str()), ("m1", "bash"));
    assert_eq!(serde_json::from_str::<Value>(&modified.arguments_json).unwrap(), json!({"cmd": "rm -r build/tmp"}));

    assert_eq!(shared.desk.store().task(&ids[1]).await.unwrap().unwrap().choices()[1], Decision::Modify);
}

/// On a step that needs two approvals, one reviewer's modify runs nothing, even with the
/// arguments unchanged: it is one approval of the modified call, an approval of the call as
/// asked does not complete it, and a second reviewer's approval of that same call does.
#[tokio::test]
async fn a_modify_on_a_two_person_step_needs_a_second_person_to_approve_the_modified_call() {
    let (shared, mut outbox, ids) = editable().await;
    let modify = |arguments: Value| json!({"decision": "modify", "arguments": arguments});
    let (status, task) = decide_json(&shared, &ids[1], "alice", modify(json!({"cmd": "rm -r build"}))).await;
    assert_eq!((status, task["state"].as_str()), (StatusCode::OK, Some("pending")), "{task}");
    assert_eq!(task["approvals"][0]["modified_arguments"], r#"{"cmd":"rm -r build"}"#);
    let (status, again) = decide_json(&shared, &ids[1], "alice", modify(json!({"cmd": "ls"}))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");
    assert!(outbox.try_recv().is_err(), "one person's modify sends no answer");

    // Bob approves the call as asked: not the call Alice modified, so nothing is decided.
    let (status, task) = decide_json(&shared, &ids[1], "bob", json!({"decision": "approve"})).await;
    assert_eq!((status, task["state"].as_str()), (StatusCode::OK, Some("pending")), "{task}");
    assert!(outbox.try_recv().is_err(), "approvals of different calls do not add up");

    // What Carol sees: Alice's modified call, with a button that approves that very call.
    let carol = login(&shared, "carol").await;
    let card = browser("GET", &format!("/ui/tasks/{}", ids[1]), Some(&carol), None, "").body(Body::empty()).unwrap();
    let (_, _, card) = send(&shared, card).await;
    assert!(card.contains("1 of 2 approvals</b>: alice, bob"), "approvals of different calls count apart: {card}");
    assert!(card.contains("<code>{&quot;cmd&quot;:&quot;rm -r build&quot;}</code>"), "{card}");
    assert!(card.contains("Approve this modified call"), "{card}");

    // Carol approves Alice's modified call: decided by both, the answer carries that call.
    let (status, task) = decide_json(&shared, &ids[1], "carol", modify(json!({"cmd": "rm -r build"}))).await;
    assert_eq!(
        (status, task["decision"].as_str(), task["decided_by"].as_str()),
        (StatusCode::OK, Some("modify"), Some("alice+carol")),
        "{task}"
    );
    let answer = modified_answer(&mut outbox);
    assert_eq!((answer.decision, answer.decided_by.as_str()), (i32::from(v1::DecisionKind::Modify), "alice+carol"));
    let modified = answer.modified.expect("the modified call");
    assert_eq!(serde_json::from_str::<Value>(&modified.arguments_json).unwrap(), json!({"cmd": "rm -r build"}));
    assert!(outbox.try_recv().is_err());
}

#[tokio::test]
async fn the_ui_edits_arguments_as_json_and_refuses_what_does_not_parse() {
    let (shared, mut outbox, ids) = editable().await;
    let cookie = login(&shared, "alice").await;
    let csrf = csrf_of(&shared, &cookie).await;
    let (_, _, card) = send(
        &shared,
        browser("GET", &format!("/ui/tasks/{}", ids[0]), Some(&cookie), None, "").body(Body::empty()).unwrap(),
    )
    .await;
    assert!(card.contains("name=\"arguments\""), "{card}");
    assert!(card.contains("{\n  &quot;cmd&quot;: &quot;rm -r build&quot;\n}</textarea>"), "{card}");
    assert!(card.contains("value=\"modify\""), "{card}");
    let (_, _, plain) = send(
        &shared,
        browser("GET", &format!("/ui/tasks/{}", ids[2]), Some(&cookie), None, "").body(Body::empty()).unwrap(),
    )
    .await;
    assert!(!plain.contains("name=\"arguments\"") && !plain.contains("value=\"modify\""), "{plain}");

    let post = |form: String| {
        browser("POST", &format!("/ui/tasks/{}/decision", ids[0]), Some(&cookie), None, "x")
            .body(Body::from(form))
            .unwrap()
    };
    let (status, _, page) = send(&shared, post(format!("csrf={csrf}&decision=modify&arguments=%7B%22cmd%22%3A"))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.contains("the arguments are not valid JSON"), "{page}");
    let (status, _, page) = send(&shared, post(format!("csrf={csrf}&decision=modify&arguments=%5B%5D"))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.contains("must be a JSON object"), "{page}");
    assert!(outbox.try_recv().is_err());
    // Every button sends the editor; only a modify reads it.
    let (status, _, _) = send(&shared, post(format!("csrf={csrf}&decision=reject&arguments=%5B%5D"))).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(modified_answer(&mut outbox).modified.is_none());
}

mod canaries;
mod slack;
mod triage;
