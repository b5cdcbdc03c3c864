//! Claims through `oneshot`: taken, shown to others, holding off their decisions and claims,
//! extended, released, ending by themselves; an override deciding over one and saying so;
//! reviewers racing for a task getting one claim; the card and the claim-on-open page.

use std::sync::Arc;

use airlock_records::time::now_ms;
use axum::body::Body;
use axum::http::{StatusCode, header};
use prost::Message as _;
use serde_json::{Value, json};

use crate::auth::{CSRF_HEADER, Reviewer, Reviewers, sha256_hex};
use crate::desk::Claims;
use crate::fixtures::{human, memory_store};
use crate::http::AppState;
use crate::http::tests::{ALICE, BOB, Outbox, api, browser, csrf_of, login, send, with_tasks};
use crate::site::Site;
use crate::store::Inserted;
use crate::web::Change;

/// Holds the override of `ops`.
const CAROL: &str = "carol-token";
/// Reviews `security` only.
const DAVE: &str = "dave-token";

/// alice, bob and carol (with the override) review `ops`, dave `security`; two pending tasks
/// of `ops` and one of `security`; claims as `claims` says.
async fn claimed(claims: Claims) -> (AppState, Outbox, Vec<String>) {
    let reviewer = |name: &str, token: &str, pool: &str, overrides: &[&str]| Reviewer {
        name: name.into(),
        token_sha256: sha256_hex(token),
        pools: vec![pool.into()],
        admin: false,
        overrides: overrides.iter().map(|p| p.to_string()).collect(),
    };
    let reviewers = Reviewers::from_list(vec![
        reviewer("alice", ALICE, "ops", &[]),
        reviewer("bob", BOB, "ops", &[]),
        reviewer("carol", CAROL, "ops", &["ops"]),
        reviewer("dave", DAVE, "security", &["*"]),
    ]);
    let site = Site { claims, ..Site::default() };
    let pools = vec!["ops".into(), "security".into()];
    with_tasks(AppState::observed(
        memory_store().await,
        reviewers,
        pools,
        site,
        Arc::default(),
        None,
        Default::default(),
    ))
    .await
}

async fn json_of(shared: &AppState, method: &str, uri: &str, token: &str, body: Option<Value>) -> (StatusCode, Value) {
    let (status, _, text) = send(shared, api(method, uri, Some(token), body)).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_claim_holds_a_task_against_other_reviewers_until_its_holder_releases_it() {
    let (shared, mut outbox, ids) = claimed(Claims::default()).await;
    let (claim, task, decide) = (
        format!("/api/tasks/{}/claim", ids[0]),
        format!("/api/tasks/{}", ids[0]),
        format!("/api/tasks/{}/decision", ids[0]),
    );
    let before = now_ms();
    let (status, held) = json_of(&shared, "POST", &claim, ALICE, None).await;
    let after = now_ms();
    assert_eq!(status, StatusCode::OK, "{held}");
    assert_eq!((held["task"].as_str(), held["by"].as_str()), (Some(ids[0].as_str()), Some("alice")));
    let until = held["until_unix_ms"].as_i64().unwrap();
    assert!((before + 300_000..=after + 300_000).contains(&until), "the default claim lasts 300 s: {until}");

    // Others see who holds it and until when, in the task and in the pending list.
    let (_, shown) = json_of(&shared, "GET", &task, BOB, None).await;
    assert_eq!(shown["claim"], json!({"by": "alice", "until_unix_ms": until}));
    let (_, list) = json_of(&shared, "GET", "/api/tasks", BOB, None).await;
    let tasks = list["tasks"].as_array().unwrap();
    assert_eq!(tasks[0]["claim"]["by"], "alice");
    assert!(tasks[1].get("claim").is_none(), "an unclaimed task has no claim: {}", tasks[1]);

    // bob can neither claim it, nor decide it, nor release alice's claim: 409 naming her.
    for (method, uri, body) in
        [("POST", &claim, None), ("POST", &decide, Some(json!({"decision": "approve"}))), ("DELETE", &claim, None)]
    {
        let (status, refused) = json_of(&shared, method, uri, BOB, body).await;
        assert_eq!(status, StatusCode::CONFLICT, "{method} {uri}: {refused}");
        assert_eq!(refused["claim"], json!({"by": "alice", "until_unix_ms": until}), "{refused}");
        assert!(refused["error"].as_str().unwrap().starts_with("alice claims this task"), "{refused}");
    }
    assert!(shared.desk.store().task(&ids[0]).await.unwrap().unwrap().is_pending());
    assert!(outbox.try_recv().is_err(), "nothing decided");

    // A reviewer of another pool does not see the task at all.
    assert_eq!(json_of(&shared, "POST", &claim, DAVE, None).await.0, StatusCode::NOT_FOUND);
    // The time asked for is checked; alice's own claim is extended.
    for seconds in [0, 3601] {
        let (status, refused) = json_of(&shared, "POST", &claim, ALICE, Some(json!({"seconds": seconds}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
        assert_eq!(refused["error"], "a claim lasts 1 to 3600 seconds");
    }
    let (status, _) = json_of(&shared, "POST", &claim, ALICE, Some(json!({"minutes": 5}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, extended) = json_of(&shared, "POST", &claim, ALICE, Some(json!({"seconds": 3600}))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(extended["until_unix_ms"].as_i64().unwrap() > until, "{extended}");

    // Released, the task is anyone's: bob claims it, and now alice is the one kept off.
    assert_eq!(send(&shared, api("DELETE", &claim, Some(ALICE), None)).await.0, StatusCode::NO_CONTENT);
    assert!(json_of(&shared, "GET", &task, ALICE, None).await.1.get("claim").is_none());
    assert_eq!(send(&shared, api("DELETE", &claim, Some(ALICE), None)).await.0, StatusCode::NO_CONTENT, "idempotent");
    assert_eq!(json_of(&shared, "POST", &claim, BOB, None).await.1["by"], "bob");
    let (status, refused) = json_of(&shared, "POST", &decide, ALICE, Some(json!({"decision": "reject"}))).await;
    assert_eq!((status, refused["claim"]["by"].as_str()), (StatusCode::CONFLICT, Some("bob")));

    // The holder decides as themselves; a decided task cannot be claimed.
    let (status, decided) = json_of(&shared, "POST", &decide, BOB, Some(json!({"decision": "approve"}))).await;
    assert_eq!((status, decided["decided_by"].as_str()), (StatusCode::OK, Some("bob")), "{decided}");
    assert!(decided.get("claim").is_none(), "a decided task shows no claim: {decided}");
    assert!(outbox.try_recv().is_ok());
    let (status, refused) = json_of(&shared, "POST", &claim, ALICE, None).await;
    assert_eq!((status, refused["error"].as_str()), (StatusCode::CONFLICT, Some("already decided")));
}

#[tokio::test]
async fn the_pools_override_decides_and_releases_over_a_claim_and_says_so() {
    let (shared, mut outbox, ids) = claimed(Claims::default()).await;
    for id in &ids[..2] {
        assert_eq!(json_of(&shared, "POST", &format!("/api/tasks/{id}/claim"), ALICE, None).await.0, StatusCode::OK);
    }
    let decide = format!("/api/tasks/{}/decision", ids[0]);
    let (status, decided) = json_of(&shared, "POST", &decide, CAROL, Some(json!({"decision": "reject"}))).await;
    assert_eq!(status, StatusCode::OK, "{decided}");
    assert_eq!(decided["decided_by"], "carol (over alice's claim)");
    let entry = outbox.try_recv().expect("the answer went to the outbox");
    let answer = airlock_contract::v1::StepResult::decode(entry.body.as_slice()).unwrap().answer.unwrap();
    assert_eq!(answer.decided_by, "carol (over alice's claim)");

    let claim = format!("/api/tasks/{}/claim", ids[1]);
    assert_eq!(send(&shared, api("DELETE", &claim, Some(CAROL), None)).await.0, StatusCode::NO_CONTENT);
    assert!(json_of(&shared, "GET", &format!("/api/tasks/{}", ids[1]), BOB, None).await.1.get("claim").is_none());
    // An override of every pool covers only the pools one reviews.
    assert_eq!(json_of(&shared, "POST", &claim, DAVE, None).await.0, StatusCode::NOT_FOUND);
}

/// The watcher of the pending list tells browsers when a pending task's claim is taken,
/// released, or ends by itself.
#[tokio::test]
async fn the_change_feed_tells_of_claims_taken_released_and_ended() {
    let (shared, _outbox, ids) = claimed(Claims::default()).await;
    let mut changes = shared.web.changes.subscribe();
    tokio::spawn(crate::web::watch(shared.desk.clone(), shared.web.clone()));
    // The watcher tells of nothing at its first look: tasks added until one is told of.
    for i in 0.. {
        let incoming = human("ops", "s9", &format!("c{i}"), false, 0);
        shared.desk.store().insert(&incoming, now_ms()).await.unwrap();
        shared.desk.poke();
        if let Ok(change) = tokio::time::timeout(std::time::Duration::from_secs(1), changes.recv()).await {
            assert!(matches!(change.unwrap(), Change::Added { .. }));
            break;
        }
    }
    // The next claim change, past any task added late.
    async fn next(changes: &mut tokio::sync::broadcast::Receiver<Change>) -> Change {
        loop {
            match changes.recv().await.unwrap() {
                Change::Added { .. } => continue,
                change => return change,
            }
        }
    }
    let claimed = |id: &str| Change::Claimed { id: id.to_owned(), pool: "ops".into() };
    let claim = format!("/api/tasks/{}/claim", ids[0]);
    assert_eq!(send(&shared, api("POST", &claim, Some(ALICE), None)).await.0, StatusCode::OK);
    assert_eq!(next(&mut changes).await, claimed(&ids[0]), "taken");
    assert_eq!(send(&shared, api("DELETE", &claim, Some(ALICE), None)).await.0, StatusCode::NO_CONTENT);
    assert_eq!(next(&mut changes).await, claimed(&ids[0]), "released");
    // A claim whose time passes is told of when the watcher next looks.
    let now = now_ms();
    shared.desk.store().claim_task(&ids[1], "bob", now, now + 3_000).await.unwrap();
    shared.desk.poke();
    assert_eq!(next(&mut changes).await, claimed(&ids[1]), "taken");
    assert_eq!(next(&mut changes).await, claimed(&ids[1]), "ended");
    assert!(shared.desk.store().claim_of(&ids[1], now_ms()).await.unwrap().is_none());
    shared.web.stop.cancel();
}

/// A standing decision made while bob holds an identical task leaves that task to him; the
/// standing decision's own task obeys claims as any decision does.
#[tokio::test]
async fn a_standing_decision_leaves_a_task_another_reviewer_holds() {
    let (shared, _outbox, ids) = claimed(Claims::default()).await;
    let store = shared.desk.store();
    let Inserted::Created(twin) = store.insert(&human("ops", "s1", "c3", false, 0), now_ms()).await.unwrap() else {
        panic!("not created")
    };
    assert_eq!(json_of(&shared, "POST", &format!("/api/tasks/{twin}/claim"), BOB, None).await.0, StatusCode::OK);
    let standing = json!({"task": ids[0], "decision": "approve", "scope": "sample", "seconds": 600});
    let (status, created) = json_of(&shared, "POST", "/api/standing", ALICE, Some(standing.clone())).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["decided"], json!([]), "bob's task is left to him: {created}");
    assert!(store.task(&twin).await.unwrap().unwrap().is_pending());

    let standing = json!({"task": twin, "decision": "approve", "scope": "sample", "seconds": 600});
    let (status, refused) = json_of(&shared, "POST", "/api/standing", ALICE, Some(standing)).await;
    assert_eq!((status, refused["claim"]["by"].as_str()), (StatusCode::CONFLICT, Some("bob")), "{refused}");
}

/// A group decision answers the identical calls nobody else holds, and lists the one bob
/// claims as left, saying why.
#[tokio::test]
async fn a_group_decision_leaves_a_task_another_reviewer_holds() {
    let (shared, _outbox, ids) = claimed(Claims::default()).await;
    let store = shared.desk.store();
    let Inserted::Created(twin) = store.insert(&human("ops", "s2", "c3", false, 0), now_ms()).await.unwrap() else {
        panic!("not created")
    };
    assert_eq!(json_of(&shared, "POST", &format!("/api/tasks/{twin}/claim"), BOB, None).await.0, StatusCode::OK);
    let (_, groups) = json_of(&shared, "GET", "/api/groups", ALICE, None).await;
    let group = groups["groups"][0]["group"].as_str().unwrap().to_owned();
    assert_eq!(groups["groups"][0]["count"], 2, "{groups}");
    let body = json!({"decision": "reject", "count": 2});
    let (status, done) = json_of(&shared, "POST", &format!("/api/groups/{group}/decision"), ALICE, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["decided"], json!([ids[0]]), "{done}");
    assert_eq!(done["refused"][0]["task"], twin.as_str(), "{done}");
    assert!(done["refused"][0]["error"].as_str().unwrap().starts_with("bob claims this task"), "{done}");
    assert!(store.task(&twin).await.unwrap().unwrap().is_pending());
}

/// A claim whose time passed holds nothing: it is not shown, and others claim and decide the
/// task. (The claim is written as it stands after its time, so nothing waits for a clock.)
#[tokio::test]
async fn a_claim_ends_by_itself_at_its_time() {
    let (shared, _outbox, ids) = claimed(Claims::default()).await;
    let now = now_ms();
    shared.desk.store().claim_task(&ids[0], "alice", now - 2_000, now - 1).await.unwrap();
    let (_, shown) = json_of(&shared, "GET", &format!("/api/tasks/{}", ids[0]), BOB, None).await;
    assert!(shown.get("claim").is_none(), "{shown}");
    let (status, held) = json_of(&shared, "POST", &format!("/api/tasks/{}/claim", ids[0]), BOB, None).await;
    assert_eq!((status, held["by"].as_str()), (StatusCode::OK, Some("bob")));

    shared.desk.store().claim_task(&ids[1], "alice", now - 2_000, now - 1).await.unwrap();
    let decide = format!("/api/tasks/{}/decision", ids[1]);
    let (status, decided) = json_of(&shared, "POST", &decide, BOB, Some(json!({"decision": "continue"}))).await;
    assert_eq!((status, decided["decided_by"].as_str()), (StatusCode::OK, Some("bob")), "{decided}");
}

/// alice and bob claim the same tasks at once: each task gets exactly one holder, and the
/// other is told who.
#[tokio::test]
async fn reviewers_racing_for_a_task_get_one_claim() {
    let (shared, _outbox, ids) = claimed(Claims::default()).await;
    for id in &ids[..2] {
        let uri = format!("/api/tasks/{id}/claim");
        let (a, b) =
            tokio::join!(json_of(&shared, "POST", &uri, ALICE, None), json_of(&shared, "POST", &uri, BOB, None));
        let mut outcomes = [(a.0, a.1["by"].clone(), "alice"), (b.0, b.1["claim"]["by"].clone(), "bob")];
        if outcomes[0].0 != StatusCode::OK {
            outcomes = [(b.0, b.1["by"].clone(), "bob"), (a.0, a.1["claim"]["by"].clone(), "alice")];
        }
        let [(won, winner, name), (lost, holder, _)] = outcomes;
        assert_eq!((won, lost), (StatusCode::OK, StatusCode::CONFLICT), "{a:?} {b:?}");
        assert_eq!((winner.as_str(), holder.as_str()), (Some(name), Some(name)));
    }
}

#[tokio::test]
async fn the_card_shows_the_holder_and_keeps_others_buttons_disabled() {
    let (shared, _outbox, ids) = claimed(Claims { on_open: true, ..Claims::default() }).await;
    let id = &ids[0];
    let card = |cookie: String| {
        let shared = shared.clone();
        let uri = format!("/ui/tasks/{id}");
        async move { send(&shared, browser("GET", &uri, Some(&cookie), None, "").body(Body::empty()).unwrap()).await.2 }
    };
    let (alice, bob, carol) = (login(&shared, ALICE).await, login(&shared, BOB).await, login(&shared, CAROL).await);
    let free = card(bob.clone()).await;
    assert!(free.contains("data-held=\"none\"") && free.contains("/claim\"") && !free.contains("disabled"), "{free}");

    // alice claims from the card (as the script does), and holds it with Extend and Release.
    let csrf = csrf_of(&shared, &alice).await;
    let post = browser("POST", &format!("/ui/tasks/{id}/claim"), Some(&alice), Some("http://127.0.0.1:8080"), "x")
        .header(CSRF_HEADER, &csrf)
        .header(header::ACCEPT, "application/json")
        .body(Body::from("x=1"))
        .unwrap();
    let (status, _, text) = send(&shared, post).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["by"], "alice");
    let own = card(alice.clone()).await;
    assert!(own.contains("data-held=\"you\"") && own.contains("You claim this task until"), "{own}");
    assert!(own.contains(">Extend<") && own.contains(">Release<") && !own.contains("disabled"), "{own}");

    // bob sees who holds it, and every decide button is disabled, pointing at why.
    let other = card(bob.clone()).await;
    assert!(other.contains("data-held=\"other\"") && other.contains("Claimed by <b>alice</b> until"), "{other}");
    assert_eq!(other.matches(" disabled aria-describedby=\"claim-").count(), 3, "{other}");
    assert!(!other.contains(">Release<") && !other.contains(">Claim<"), "{other}");
    // carol, with the override, may decide and release.
    let overriding = card(carol).await;
    assert!(overriding.contains("You hold the pool's override") && overriding.contains(">Release<"), "{overriding}");
    assert!(!overriding.contains("disabled"), "{overriding}");

    // bob's form post of a decision gets a page saying who holds the task.
    let csrf = csrf_of(&shared, &bob).await;
    let post = browser("POST", &format!("/ui/tasks/{id}/decision"), Some(&bob), Some("http://127.0.0.1:8080"), "x")
        .body(Body::from(format!("decision=approve&csrf={csrf}")))
        .unwrap();
    let (status, _, page) = send(&shared, post).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(page.contains("alice claims this task"), "{page}");

    // The pending page tells its script to claim the task a person opens.
    let (_, _, page) = send(&shared, browser("GET", "/", Some(&bob), None, "").body(Body::empty()).unwrap()).await;
    assert!(page.contains("data-claim-on-open=\"true\""), "{page}");
}

#[tokio::test]
async fn without_claim_on_open_the_page_claims_nothing_by_itself() {
    let (shared, _outbox, _ids) = claimed(Claims::default()).await;
    let bob = login(&shared, BOB).await;
    let (_, _, page) = send(&shared, browser("GET", "/", Some(&bob), None, "").body(Body::empty()).unwrap()).await;
    assert!(page.contains("data-page=\"pending\"") && !page.contains("data-claim-on-open"), "{page}");
}
