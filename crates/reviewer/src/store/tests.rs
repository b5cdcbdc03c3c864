//! One suite of store behaviours, run on SQLite and on the running PostgreSQL.

use airlock_records::review::{ApprovalView, ApprovalsMetadata};
use airlock_testkit::database::with_pg;
use sqlx::sqlite::SqliteConnectOptions;

use super::open::{POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS, Schema, migrator};
use super::*;
use crate::fixtures::{approving, asked_by, human};
use crate::task::Incoming;

fn verdict(decision: Decision, by: &str, at: i64) -> Verdict {
    Verdict { decision, explanation: format!("{by} says {decision}"), decided_by: by.into(), decided_at: at }
}

fn hook(id: &str) -> NewWebhook {
    NewWebhook { id: id.into(), endpoint: "http://hooks.test/ops".into(), body: format!("{{\"id\":\"{id}\"}}").into() }
}

async fn suite(store: Store) {
    // A task is stored once per call, kind and step.
    let a = human("ops", "s1", "c1", false, 0);
    let Inserted::Created(id) = store.insert(&a, 1_000).await.unwrap() else { panic!("not created") };
    assert_eq!(store.insert(&a, 1_001).await.unwrap(), Inserted::Duplicate);
    let review = human("ops", "s1", "c1", true, 5_000);
    let Inserted::Created(review_id) = store.insert(&review, 1_002).await.unwrap() else {
        panic!("review not created")
    };
    let other_pool = human("security", "s2", "c1", false, 0);
    let Inserted::Created(_) = store.insert(&other_pool, 1_003).await.unwrap() else { panic!() };

    let ops = ["ops".to_owned()];
    let pending = store.pending(Some(&ops)).await.unwrap();
    assert_eq!(pending.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), [id.as_str(), review_id.as_str()]);
    assert_eq!(store.pending(None).await.unwrap().len(), 3);
    assert_eq!(store.pending(Some(&[])).await.unwrap().len(), 0);
    let task = store.task(&id).await.unwrap().unwrap();
    assert_eq!((task.pool.as_str(), task.step, task.received_at, task.is_pending()), ("ops", 2, 1_000, true));
    assert_eq!(task.human, a.human);
    assert_eq!(task.deadline, None);
    assert_eq!(store.task(&review_id).await.unwrap().unwrap().deadline, Some(5_000));

    // The first decision wins, with its answer leased in the outbox; a second changes nothing.
    let approve = verdict(Decision::Approve, "alice", 2_000);
    let answer = task.step_result(&approve).encode_to_vec();
    let Decided::Recorded(Some(entry)) =
        store.decide(&task, &sending(approve.clone(), answer, 2_000 + 30_000, Vec::new())).await.unwrap()
    else {
        panic!("not recorded")
    };
    let result = v1::StepResult::decode(entry.body.as_slice()).unwrap();
    let answer = result.answer.unwrap();
    assert_eq!((answer.decided_by.as_str(), answer.step, answer.approver.as_str()), ("alice", Some(2), "human"));
    assert_eq!(answer.decision, i32::from(v1::DecisionKind::Approve));
    assert_eq!(result.task, a.human.task);
    let Decided::NotPending(now) = store
        .decide(&task, &sending(verdict(Decision::Reject, "bob", 2_001), Vec::new(), 0, vec![hook("late")]))
        .await
        .unwrap()
    else {
        panic!("decided twice")
    };
    assert_eq!(now.state, State::Decided(verdict(Decision::Approve, "alice", 2_000)));
    let missing = Task { id: "nope".into(), ..task.clone() };
    assert_eq!(
        store.decide(&missing, &sending(verdict(Decision::Approve, "x", 1), Vec::new(), 0, Vec::new())).await.unwrap(),
        Decided::NotFound
    );

    // The outbox: leased rows wait for their lease; a released or expired one is claimed once.
    assert_eq!(store.unsent().await.unwrap(), 1);
    assert!(store.claim_unsent(2_500, 40_000, 10).await.unwrap().is_empty(), "the decider holds the lease");
    let claimed = store.claim_unsent(32_000, 70_000, 10).await.unwrap();
    assert_eq!(claimed, std::slice::from_ref(&entry));
    assert!(store.claim_unsent(32_001, 70_000, 10).await.unwrap().is_empty(), "claimed once");
    store.release(&entry.task_id).await.unwrap();
    assert_eq!(store.claim_unsent(32_002, 70_000, 10).await.unwrap().len(), 1);
    store.mark_sent(&entry.task_id, 33_000).await.unwrap();
    assert_eq!(store.unsent().await.unwrap(), 0);
    assert!(store.claim_unsent(200_000, 300_000, 10).await.unwrap().is_empty(), "sent answers are never resent");

    // Deadlines.
    assert_eq!(store.next_deadline().await.unwrap(), Some(5_000));
    assert!(store.expired(4_999).await.unwrap().is_empty());
    let expired = store.expired(5_000).await.unwrap();
    assert_eq!(expired.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), [review_id.as_str()]);
    assert_eq!(expired[0].on_timeout(), Decision::Terminate);

    // A cancel withdraws the call's pending tasks and drops a task that arrives after it (none
    // of these requests named a broker user, nor do these cancels).
    let withdrawn = store.cancel(&review.correlation, "", "sample ended", 6_000).await.unwrap();
    assert_eq!(withdrawn, Withdrawal { withdrawn: vec![review_id.clone()], kept: Vec::new() });
    assert!(store.expired(10_000).await.unwrap().is_empty());
    assert_eq!(store.next_deadline().await.unwrap(), None);
    let late = human("ops", "s3", "c9", false, 0);
    store.cancel(&late.correlation, "", "runner gave up", 6_100).await.unwrap();
    assert_eq!(store.insert(&late, 6_200).await.unwrap(), Inserted::Withdrawn);
    assert_eq!(store.prune_withdrawn(6_050).await.unwrap(), 1);

    // History: newest first, with who decided.
    let history = store.history(Some(&ops), 10).await.unwrap();
    assert_eq!(history.len(), 2);
    assert!(matches!(&history[0].state, State::Cancelled { reason, .. } if reason == "sample ended"));
    assert!(matches!(&history[1].state, State::Decided(v) if v.decided_by == "alice"));
    assert!(store.history(Some(&["security".to_owned()]), 10).await.unwrap().is_empty());
    let pending = store.pending_ids().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].received_at, 1_003);
    webhooks(&store).await;
    sessions(&store).await;
    cancels(&store).await;
    no_squatting(&store).await;
    moves_and_warnings(&store).await;
}

/// A task's move and warning are due at their times, the earliest first; a warning is written
/// once, and a moved task is one of its own in its next pool.
async fn moves_and_warnings(store: &Store) {
    assert_eq!(store.next_deadline().await.unwrap(), None);
    let mut moving = human("ops", "s4", "c1", false, 0);
    (moving.human.reroute_at_unix_ms, moving.human.reroute_to, moving.human.warn_at_unix_ms) =
        (8_000, "oncall".into(), 7_000);
    let Inserted::Created(moving_id) = store.insert(&moving, 6_300).await.unwrap() else { panic!() };
    assert_eq!(store.next_deadline().await.unwrap(), Some(7_000));
    assert!(store.expiring(6_999).await.unwrap().is_empty() && store.rerouting(7_999).await.unwrap().is_empty());
    let expiring = store.expiring(7_000).await.unwrap();
    assert_eq!(expiring.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), [moving_id.as_str()]);
    assert!(store.warn(&expiring[0], &[], 7_000).await.unwrap());
    assert!(!store.warn(&expiring[0], &[], 7_001).await.unwrap(), "once");
    assert_eq!(store.next_deadline().await.unwrap(), Some(8_000));
    assert_eq!(store.rerouting(8_000).await.unwrap()[0].id, moving_id);
    let mut moved = human("oncall", "s4", "c1", false, 0);
    moved.human.rerouted_from = "ops".into();
    assert!(matches!(store.insert(&moved, 8_100).await.unwrap(), Inserted::Created(_)));
    assert_eq!(store.insert(&moved, 8_200).await.unwrap(), Inserted::Duplicate);
    store.cancel(&moving.correlation, "", "sample ended", 8_300).await.unwrap();
    assert_eq!(store.next_deadline().await.unwrap(), None);
}

/// Cancels withdraw only the tasks whose request their publisher published, now and when a
/// task arrives after its cancel.
async fn cancels(store: &Store) {
    let mine = asked_by(human("runners", "r1", "c1", false, 0), "runner-a");
    let Inserted::Created(id) = store.insert(&mine, 7_000).await.unwrap() else { panic!("not created") };
    assert_eq!(store.task(&id).await.unwrap().unwrap().human, mine.human, "the body keeps who asked");
    for stranger in ["runner-b", ""] {
        let refused = store.cancel(&mine.correlation, stranger, "forged", 7_001).await.unwrap();
        assert_eq!(refused, Withdrawal { withdrawn: Vec::new(), kept: vec![id.clone()] }, "{stranger:?}");
    }
    assert!(store.task(&id).await.unwrap().unwrap().is_pending());
    assert!(store.forget_foreign_cancels(&mine.correlation, "runner-a").await.unwrap().is_empty(), "counted once");
    let withdrawn = store.cancel(&mine.correlation, "runner-a", "sample ended", 7_002).await.unwrap();
    assert_eq!(withdrawn, Withdrawal { withdrawn: vec![id.clone()], kept: Vec::new() });
    let task = store.task(&id).await.unwrap().unwrap();
    assert!(matches!(&task.state, State::Cancelled { reason, .. } if reason == "sample ended"), "{:?}", task.state);

    // A cancel that comes before its task drops it only when the same user asked for it.
    let forged_first = asked_by(human("runners", "r2", "c1", false, 0), "runner-a");
    store.cancel(&forged_first.correlation, "runner-b", "forged", 7_003).await.unwrap();
    let Inserted::Created(id) = store.insert(&forged_first, 7_004).await.unwrap() else { panic!("dropped") };
    assert!(store.task(&id).await.unwrap().unwrap().is_pending());
    // Those cancels are forgotten once, when the task is stored, and so counted once.
    let foreign = store.forget_foreign_cancels(&forged_first.correlation, "runner-a").await.unwrap();
    assert_eq!(foreign, ["runner-b"]);
    assert!(store.forget_foreign_cancels(&forged_first.correlation, "runner-a").await.unwrap().is_empty());
    let late = asked_by(human("runners", "r3", "c1", false, 0), "runner-a");
    store.cancel(&late.correlation, "runner-a", "runner gave up", 7_005).await.unwrap();
    assert_eq!(store.insert(&late, 7_006).await.unwrap(), Inserted::Withdrawn);
}

/// A broker user that asks first for another's call key makes a task of its own: the other's
/// request is no duplicate of it, and each one's redelivery is a duplicate of its own.
async fn no_squatting(store: &Store) {
    let squatter = asked_by(human("runners", "r9", "c1", false, 0), "runner-b");
    let Inserted::Created(theirs) = store.insert(&squatter, 8_000).await.unwrap() else { panic!("not created") };
    let victim = asked_by(human("runners", "r9", "c1", false, 0), "runner-a");
    assert_eq!(victim.correlation, squatter.correlation, "the same call key");
    let Inserted::Created(mine) = store.insert(&victim, 8_001).await.unwrap() else { panic!("taken by another") };
    assert_ne!(mine, theirs);
    assert_eq!(store.insert(&victim, 8_002).await.unwrap(), Inserted::Duplicate);
    assert_eq!(store.insert(&squatter, 8_003).await.unwrap(), Inserted::Duplicate);
    // Joined unencoded, user `u` with this key and user `u/approval` with that one would make
    // one dedup key, `u/approval/approval/7/1/5/t#2`.
    let keyed = |user: &str, run: &str, sample: &str, epoch: u32, call: &str, tenant: &str| {
        let mut human = asked_by(human("runners", sample, call, false, 0), user).human;
        let key = human.task.as_mut().and_then(|t| t.request.as_mut()).and_then(|r| r.key.as_mut()).unwrap();
        (key.run_id, key.epoch, key.tenant) = (run.into(), epoch, tenant.into());
        Incoming::decode(&human.encode_to_vec(), "runners").unwrap()
    };
    let first = keyed("u", "approval", "7", 1, "5", "t");
    let second = keyed("u/approval", "7", "1", 5, "t", "");
    assert!(matches!(store.insert(&first, 8_004).await.unwrap(), Inserted::Created(_)));
    assert!(matches!(store.insert(&second, 8_005).await.unwrap(), Inserted::Created(_)), "a user's name is encoded");
}

/// A store made before cancels named their publisher (schema step 6), with a pending task
/// and a withdrawn call: after the migration both name no broker user, so only a cancel
/// naming none withdraws the task, and the withdrawn call drops only a task whose request
/// named none.
async fn cancels_after_migration(old: Store, url: &str) {
    let legacy = human("ops", "old", "c1", false, 0);
    let withdrawn = human("ops", "old", "c2", false, 0);
    const TASK: &str = "INSERT INTO tasks (id, dedup_key, correlation, pool, step, body, received_at, deadline_at, \
                        state) VALUES ('legacy', $1, $2, 'ops', 2, $3, 1, 0, 'pending')";
    const WITHDRAWN: &str = "INSERT INTO withdrawn (correlation, withdrawn_at, reason) VALUES ($1, 1, 'gone')";
    on_db!(old, pool => {
        migrator(&schema_of(&old)[..6]).run(pool).await.unwrap();
        sqlx::query(TASK)
            .bind(format!("{}#{}", legacy.correlation, legacy.step()))
            .bind(&legacy.correlation)
            .bind(legacy.human.encode_to_vec())
            .execute(pool)
            .await
            .unwrap();
        sqlx::query(WITHDRAWN).bind(&withdrawn.correlation).execute(pool).await.unwrap();
    });
    old.close().await;

    let store = Store::open(url).await.unwrap();
    assert_eq!(store.insert(&legacy, 2).await.unwrap(), Inserted::Duplicate, "redelivered after the upgrade");
    let refused = store.cancel(&legacy.correlation, "runner-a", "named", 2).await.unwrap();
    assert_eq!(refused.kept, ["legacy"]);
    let cancelled = store.cancel(&legacy.correlation, "", "unnamed", 3).await.unwrap();
    assert_eq!(cancelled.withdrawn, ["legacy"]);
    assert_eq!(store.insert(&withdrawn, 4).await.unwrap(), Inserted::Withdrawn);
    let named = asked_by(withdrawn, "runner-a");
    assert!(matches!(store.insert(&named, 5).await.unwrap(), Inserted::Created(_)));
    store.close().await;
}

fn schema_of(store: &Store) -> &'static [Schema] {
    match store.db {
        Db::Sqlite(_) => SQLITE_MIGRATIONS,
        Db::Postgres(_) => POSTGRES_MIGRATIONS,
    }
}

#[tokio::test]
async fn cancels_on_a_sqlite_store_made_before_they_named_their_publisher() {
    let dir = std::env::temp_dir().join(format!("airlock-store-{}", crate::auth::random_hex::<6>()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tasks.db");
    let options = SqliteConnectOptions::new().filename(&path).create_if_missing(true);
    let old = Store { db: Db::Sqlite(SqlitePool::connect_with(options).await.unwrap()) };
    cancels_after_migration(old, &format!("sqlite:{}", path.display())).await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn cancels_on_a_postgres_store_made_before_they_named_their_publisher() {
    with_pg("legacy_cancels", |url| async move {
        let old = Store { db: Db::Postgres(PgPool::connect(&url).await.unwrap()) };
        cancels_after_migration(old, &url).await;
    })
    .await;
}

/// Sessions: found by their id's hash while live; refused once logged out or expired; pruned
/// after expiry.
async fn sessions(store: &Store) {
    let session = |id: &str, expires_at: i64| StoredSession {
        id_sha256: crate::auth::sha256_hex(id),
        reviewer: "alice".into(),
        token_sha256: crate::auth::sha256_hex("alice's token"),
        csrf: format!("csrf-of-{id}"),
        created_at: 1_000,
        expires_at,
    };
    let (live, other) = (session("live", 10_000), session("other", 20_000));
    store.open_session(&live).await.unwrap();
    store.open_session(&other).await.unwrap();
    assert_eq!(store.session(&live.id_sha256, 9_999).await.unwrap(), Some(live.clone()));
    assert_eq!(store.session(&live.id_sha256, 10_000).await.unwrap(), None, "expired");
    assert_eq!(store.session(&crate::auth::sha256_hex("unknown"), 1_000).await.unwrap(), None);

    store.log_out(&other.id_sha256, 2_000).await.unwrap();
    assert_eq!(store.session(&other.id_sha256, 2_001).await.unwrap(), None, "logged out");
    store.log_out(&other.id_sha256, 3_000).await.unwrap();
    assert_eq!(store.session(&live.id_sha256, 2_001).await.unwrap(), Some(live.clone()), "the other one lives");

    // Pruning forgets the expired sessions only, logged out or not.
    assert_eq!(store.prune_sessions(10_000).await.unwrap(), 1);
    assert_eq!(store.prune_sessions(19_999).await.unwrap(), 0);
    assert_eq!(store.prune_sessions(20_000).await.unwrap(), 1);
}

/// Webhooks: written with their change only, leased for one attempt at a time, rescheduled,
/// then over.
async fn webhooks(store: &Store) {
    assert_eq!(store.webhooks_owed().await.unwrap(), 0, "a decision that changed nothing wrote none");
    let incoming = human("ops", "s4", "c4", false, 0);
    let created = insert_at(store, "t4", &incoming, 7_000, &[hook("w1"), hook("w2")]).await;
    assert_eq!(created, Stored { inserted: Inserted::Created("t4".into()), covered_by: None });
    let duplicate = insert_at(store, "t5", &incoming, 7_001, &[hook("w3")]).await;
    assert_eq!(duplicate, Stored { inserted: Inserted::Duplicate, covered_by: None });
    assert_eq!(store.webhooks_owed().await.unwrap(), 2, "a duplicate task wrote none");

    let claimed = store.claim_webhooks(7_000, 17_000, 10).await.unwrap();
    let first = OwedWebhook {
        id: "w1".into(),
        endpoint: "http://hooks.test/ops".into(),
        body: hook("w1").body,
        created_at: 7_000,
        attempts: 0,
    };
    assert_eq!(claimed.len(), 2);
    assert!(claimed.contains(&first));
    assert!(store.claim_webhooks(7_001, 17_000, 10).await.unwrap().is_empty(), "leased once");

    // A failed attempt waits for its next one, whoever claims it; the other is delivered.
    store.webhook_retry("w1", 1, 9_000).await.unwrap();
    store.webhook_done("w2", 1, "delivered", 7_100).await.unwrap();
    assert!(store.claim_webhooks(8_999, 20_000, 10).await.unwrap().is_empty(), "not due yet");
    let again = store.claim_webhooks(9_000, 20_000, 10).await.unwrap();
    assert_eq!(again, [OwedWebhook { attempts: 1, ..first }]);
    assert_eq!(store.webhooks_owed().await.unwrap(), 1);
    store.webhook_done("w1", 2, "given_up", 9_100).await.unwrap();
    assert_eq!(store.webhooks_owed().await.unwrap(), 0);
    assert!(store.claim_webhooks(100_000, 200_000, 10).await.unwrap().is_empty(), "over is never resent");
    assert_eq!(store.prune_webhooks(9_100).await.unwrap(), 1);
    assert_eq!(store.prune_webhooks(9_101).await.unwrap(), 1);

    // Webhooks written after their change are due at once, like those written with it.
    store.add_webhooks(&[hook("w6"), hook("w7")], 10_000).await.unwrap();
    let mut due: Vec<_> =
        store.claim_webhooks(10_000, 20_000, 10).await.unwrap().into_iter().map(|w| (w.id, w.created_at)).collect();
    due.sort();
    assert_eq!(due, [("w6".to_owned(), 10_000), ("w7".to_owned(), 10_000)]);
}

/// A task's `task.created` webhooks are written in the transaction that stores it, unless a
/// standing decision covers it: that one is read in the same transaction and handed back, and
/// the task stays pending for it to decide.
async fn covered(store: Store) {
    let waits = insert_at(&store, "t1", &human("ops", "s1", "c1", false, 0), 1_000, &[hook("w1")]).await;
    assert_eq!(waits, Stored { inserted: Inserted::Created("t1".into()), covered_by: None });
    assert_eq!(store.webhooks_owed().await.unwrap(), 1, "written with the task");

    let standing = store.add_standing(&approving("s2", 1_500, 61_000)).await.unwrap();
    let decided = insert_at(&store, "t2", &human("ops", "s2", "c2", false, 0), 2_000, &[hook("w2")]).await;
    assert_eq!(decided, Stored { inserted: Inserted::Created("t2".into()), covered_by: Some(standing.clone()) });
    assert_eq!(store.webhooks_owed().await.unwrap(), 1, "nobody is paged about a covered task");
    assert!(store.task("t2").await.unwrap().unwrap().is_pending(), "the standing decision's to decide");
    let again = insert_at(&store, "t3", &human("ops", "s2", "c2", false, 0), 2_001, &[hook("w3")]).await;
    assert_eq!(again, Stored { inserted: Inserted::Duplicate, covered_by: None });

    // Another sample's task, and the same sample's once the standing decision expired, wait.
    let other = insert_at(&store, "t4", &human("ops", "s3", "c3", false, 0), 3_000, &[hook("w4")]).await;
    assert_eq!(other.covered_by, None);
    let late = insert_at(&store, "t5", &human("ops", "s2", "c5", false, 0), 61_000, &[hook("w5")]).await;
    assert_eq!(late, Stored { inserted: Inserted::Created("t5".into()), covered_by: None });
    assert_eq!(store.webhooks_owed().await.unwrap(), 3);
    store.close().await;
}

#[tokio::test]
async fn a_covered_task_is_stored_without_its_webhooks_on_sqlite() {
    covered(crate::fixtures::memory_store().await).await;
}

#[tokio::test]
async fn a_covered_task_is_stored_without_its_webhooks_on_postgres() {
    with_pg("covered", |url| async move { covered(Store::open(&url).await.unwrap()).await }).await;
}

#[tokio::test]
async fn store_on_sqlite_memory() {
    suite(crate::fixtures::memory_store().await).await;
}

#[tokio::test]
async fn store_on_a_sqlite_file_survives_a_reopen() {
    let dir = std::env::temp_dir().join(format!("airlock-store-{}", crate::auth::random_hex::<6>()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("tasks.db").display());
    let store = Store::open(&url).await.unwrap();
    suite(store.clone()).await;
    let (pending, history) = (store.pending(None).await.unwrap(), store.history(None, 10).await.unwrap());
    // Two of the history are the moving task of `moves_and_warnings`, in its two pools.
    assert_eq!((pending.len(), history.len()), (7, 5));
    store.close().await;
    // Migrations run again without harm, and everything is still there.
    let store = Store::open(&url).await.unwrap();
    assert_eq!(store.pending(None).await.unwrap(), pending);
    assert_eq!(store.history(None, 10).await.unwrap(), history);
    store.close().await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn store_on_postgres() {
    with_pg("store", |url| async move {
        let store = Store::open(&url).await.unwrap();
        suite(store.clone()).await;
        store.close().await;
    })
    .await;
}

/// What the store refuses is told apart from a failure that passes: PostgreSQL refusing a NUL
/// in a text column (past the intake's check) is no transient failure, a closed pool is one;
/// SQLite keeps the NUL.
#[tokio::test]
async fn a_refused_value_is_not_transient_and_a_closed_pool_is() {
    let mut incoming = human("ops", "s1", "c1", false, 0);
    incoming.correlation.push('\0');
    let refusals = |url: String, refused: bool| {
        let incoming = incoming.clone();
        async move {
            let store = Store::open(&url).await.unwrap();
            match store.insert(&incoming, 1_000).await {
                Err(error) => assert!(refused && !error.is_transient(), "{error}"),
                Ok(inserted) => assert!(!refused && matches!(inserted, Inserted::Created(_))),
            }
            store.close().await;
            let error = store.insert(&human("ops", "s1", "c2", false, 0), 1_000).await.unwrap_err();
            assert!(error.is_transient(), "{error}");
        }
    };
    refusals("sqlite::memory:".into(), false).await;
    with_pg("refusals", |url| refusals(url, true)).await;
}

/// Several processes on one PostgreSQL store: the same pending list, each task decided once,
/// and one schema migration whichever starts first.
#[tokio::test]
async fn postgres_processes_share_tasks_and_the_first_answer_wins() {
    with_pg("shared", |url| async move { first_answer_wins(url).await }).await;
}

async fn first_answer_wins(url: String) {
    let (a, b) = tokio::join!(Store::open(&url), Store::open(&url));
    let (a, b) = (a.unwrap(), b.unwrap());
    let mut ids = Vec::new();
    for i in 0..20 {
        let Inserted::Created(id) = a.insert(&human("ops", "s", &format!("c{i}"), false, 0), i).await.unwrap() else {
            panic!()
        };
        ids.push(id);
        assert_eq!(b.insert(&human("ops", "s", &format!("c{i}"), false, 0), i).await.unwrap(), Inserted::Duplicate);
    }
    assert_eq!(b.pending(None).await.unwrap().len(), 20);
    let mut races = tokio::task::JoinSet::new();
    for id in &ids {
        for (store, who) in [(a.clone(), "alice"), (b.clone(), "bob")] {
            let id = id.clone();
            races.spawn(async move {
                let task = store.task(&id).await.unwrap().unwrap();
                matches!(
                    store
                        .decide(&task, &sending(verdict(Decision::Approve, who, 1), Vec::new(), 1, Vec::new()))
                        .await
                        .unwrap(),
                    Decided::Recorded(_)
                )
            });
        }
    }
    let mut recorded = 0;
    while let Some(won) = races.join_next().await {
        recorded += usize::from(won.unwrap());
    }
    assert_eq!(recorded, 20, "each task decided exactly once");
    assert_eq!(a.unsent().await.unwrap(), 20);
    assert!(a.pending(None).await.unwrap().is_empty() && b.pending(None).await.unwrap().is_empty());
    a.close().await;
    b.close().await;
}

/// A task of [`human`]'s whose step needs `approvals` reviewers.
fn needing(approvals: u32, sample: &str, call: &str) -> Incoming {
    let mut incoming = human("ops", sample, call, false, 0);
    incoming.human.approvals = approvals;
    incoming
}

fn approval(reviewer: &str, at: i64) -> ApprovalView {
    ApprovalView {
        reviewer: reviewer.into(),
        at_unix_ms: at,
        explanation: format!("{reviewer} approves"),
        modified_arguments: None,
    }
}

/// `reviewer`'s modify, at `at`, as an approval of the call with `arguments`.
fn modifying(reviewer: &str, at: i64, arguments: &str) -> ApprovalView {
    ApprovalView { modified_arguments: Some(arguments.into()), ..approval(reviewer, at) }
}

/// The decision of the approvals a task holds, as the service records it.
fn approved(task: &Task) -> Recording {
    let verdict = Verdict {
        decision: Decision::Approve,
        explanation: "approved".into(),
        decided_by: crate::task::approvers(&task.approvals),
        decided_at: task.approvals.last().map_or(0, |a| a.at_unix_ms),
    };
    sending(verdict.clone(), task.step_result(&verdict).encode_to_vec(), 0, Vec::new())
}

/// `verdict` recorded with `answer` in the outbox, leased until `lease_until`, announced by
/// `webhooks`.
fn sending(verdict: Verdict, answer: Vec<u8>, lease_until: i64, webhooks: Vec<NewWebhook>) -> Recording {
    Recording { verdict, delivery: Delivery::Outbox { answer, lease_until }, webhooks }
}

fn never(_: &Task) -> Recording {
    panic!("decided before the count was complete")
}

async fn created(store: &Store, incoming: &Incoming) -> Task {
    let Inserted::Created(id) = store.insert(incoming, 1_000).await.unwrap() else { panic!("not created") };
    store.task(&id).await.unwrap().unwrap()
}

/// Approvals: counted once per reviewer, kept in order, the one completing the count decides
/// with every approver; any other decision ends the count.
async fn approvals_suite(store: Store) {
    let task = created(&store, &needing(2, "s1", "c1")).await;
    assert_eq!((task.approvals_needed(), task.approvals.len()), (2, 0));
    let Approved::Counted(counted) = store.approve(&task, &approval("alice", 2_000), never).await.unwrap() else {
        panic!("not counted")
    };
    assert_eq!(counted.approvals, [approval("alice", 2_000)]);
    assert_eq!(store.task(&task.id).await.unwrap().unwrap().approvals, [approval("alice", 2_000)]);
    assert_eq!(store.pending(None).await.unwrap()[0].approvals, [approval("alice", 2_000)]);

    // The same reviewer again changes nothing, whatever they say.
    let Approved::Again(again) = store.approve(&task, &approval("alice", 2_500), never).await.unwrap() else {
        panic!("approved twice")
    };
    assert_eq!(again.approvals, [approval("alice", 2_000)]);

    let Approved::Decided(Some(entry)) = store.approve(&task, &approval("bob", 3_000), approved).await.unwrap() else {
        panic!("not decided")
    };
    let answer = v1::StepResult::decode(entry.body.as_slice()).unwrap().answer.unwrap();
    assert_eq!(answer.decided_by, "alice+bob");
    let metadata: ApprovalsMetadata = serde_json::from_str(&answer.metadata_json).unwrap();
    assert_eq!(metadata.approvals, [approval("alice", 2_000), approval("bob", 3_000)]);
    let decided = store.task(&task.id).await.unwrap().unwrap();
    assert!(matches!(&decided.state, State::Decided(v) if v.decided_by == "alice+bob"), "{:?}", decided.state);
    assert_eq!(decided.approvals.len(), 2);
    assert!(matches!(store.approve(&task, &approval("carol", 4_000), never).await.unwrap(), Approved::NotPending(_)));
    assert_eq!(store.history(None, 10).await.unwrap()[0].approvals.len(), 2);
    let missing = Task { id: "nope".into(), ..task.clone() };
    assert_eq!(store.approve(&missing, &approval("alice", 1), never).await.unwrap(), Approved::NotFound);

    // A reject after one approval decides at once; a later approval finds it decided.
    let rejected = created(&store, &needing(2, "s2", "c1")).await;
    store.approve(&rejected, &approval("alice", 5_000), never).await.unwrap();
    let reject = verdict(Decision::Reject, "carol", 5_100);
    let Decided::Recorded(_) =
        store.decide(&rejected, &sending(reject.clone(), Vec::new(), 0, Vec::new())).await.unwrap()
    else {
        panic!()
    };
    assert!(matches!(store.approve(&rejected, &approval("bob", 5_200), never).await.unwrap(), Approved::NotPending(_)));
    let rejected = store.task(&rejected.id).await.unwrap().unwrap();
    assert_eq!(rejected.state, State::Decided(reject));
    assert_eq!(rejected.approvals, [approval("alice", 5_000)], "the partial approval stays on record");

    // Three needed: two are counted, the third decides.
    let three = created(&store, &needing(3, "s3", "c1")).await;
    for (i, who) in ["alice", "bob"].into_iter().enumerate() {
        assert!(matches!(
            store.approve(&three, &approval(who, 6_000 + i as i64), never).await.unwrap(),
            Approved::Counted(_)
        ));
    }
    assert!(matches!(store.approve(&three, &approval("carol", 6_002), approved).await.unwrap(), Approved::Decided(_)));

    // A name in another case is the same reviewer: `Alice` after `alice` is not a second one.
    let cased = created(&store, &needing(2, "s4", "c1")).await;
    store.approve(&cased, &approval("alice", 7_000), never).await.unwrap();
    let Approved::Again(again) = store.approve(&cased, &approval("Alice", 7_001), never).await.unwrap() else {
        panic!("Alice counted beside alice")
    };
    assert_eq!(again.approvals, [approval("alice", 7_000)]);
    assert!(again.approved_by("ALICE"));

    // A modify is one approval of the modified call: an approval of the call as asked, or of
    // another modified call, does not complete it; the same arguments (in any order) do.
    let edited = created(&store, &needing(2, "s5", "c1")).await;
    let narrower = r#"{"cmd":"rm -r build/tmp","cwd":"/src"}"#;
    store.approve(&edited, &modifying("alice", 8_000, narrower), never).await.unwrap();
    store.approve(&edited, &approval("bob", 8_001), never).await.unwrap();
    let Approved::Counted(counted) =
        store.approve(&edited, &modifying("carol", 8_002, r#"{"cmd":"rm -r /"}"#), never).await.unwrap()
    else {
        panic!("another modified call completed the count")
    };
    assert_eq!(counted.approvals[0], modifying("alice", 8_000, narrower), "the modified call is kept");
    let reordered = r#"{"cwd":"/src","cmd":"rm -r build/tmp"}"#;
    let Approved::Decided(_) = store.approve(&edited, &modifying("dave", 8_003, reordered), approved).await.unwrap()
    else {
        panic!("two approvals of the same modified call did not decide")
    };
}

#[tokio::test]
async fn approvals_on_sqlite_memory() {
    approvals_suite(crate::fixtures::memory_store().await).await;
}

#[tokio::test]
async fn approvals_on_postgres() {
    with_pg("approvals", |url| async move {
        let store = Store::open(&url).await.unwrap();
        approvals_suite(store.clone()).await;
        store.close().await;
    })
    .await;
}

/// Two processes on one PostgreSQL store, two reviewers racing to approve a task that needs
/// two: each task is decided exactly once, by both, in the order they were counted; and
/// racing to give the last approval of a task one reviewer approved: exactly one decides.
#[tokio::test]
async fn postgres_processes_racing_approvals_decide_once() {
    with_pg("approvals_race", |url| async move {
        let (a, b) = tokio::join!(Store::open(&url), Store::open(&url));
        let (a, b) = (a.unwrap(), b.unwrap());
        racing_approvals(&a, &b).await;
        a.close().await;
        b.close().await;
    })
    .await;
}

async fn racing_approvals(a: &Store, b: &Store) {
    const TASKS: usize = 20;
    let mut fresh = Vec::new();
    let mut half = Vec::new();
    for i in 0..TASKS {
        fresh.push(created(a, &needing(2, "fresh", &format!("c{i}"))).await);
        let task = created(a, &needing(2, "half", &format!("c{i}"))).await;
        a.approve(&task, &approval("alice", 1_500), never).await.unwrap();
        half.push(task);
    }
    let race = |task: &Task, first: &str, second: &str| {
        let (one, two) = (task.clone(), task.clone());
        let (first, second) = (approval(first, 2_000), approval(second, 2_000));
        let (a, b) = (a.clone(), b.clone());
        async move {
            let (x, y) = tokio::join!(a.approve(&one, &first, approved), b.approve(&two, &second, approved));
            [x.unwrap(), y.unwrap()]
        }
    };
    let started = std::time::Instant::now();
    for task in &fresh {
        let outcomes = race(task, "alice", "bob").await;
        let decided = outcomes.iter().filter(|o| matches!(o, Approved::Decided(_))).count();
        let counted = outcomes.iter().filter(|o| matches!(o, Approved::Counted(_))).count();
        assert_eq!((decided, counted), (1, 1), "{outcomes:?}");
        let State::Decided(verdict) = a.task(&task.id).await.unwrap().unwrap().state else { panic!("undecided") };
        assert!(["alice+bob", "bob+alice"].contains(&verdict.decided_by.as_str()), "{}", verdict.decided_by);
    }
    for task in &half {
        let outcomes = race(task, "bob", "carol").await;
        let decided = outcomes.iter().filter(|o| matches!(o, Approved::Decided(_))).count();
        let late = outcomes.iter().filter(|o| matches!(o, Approved::NotPending(_))).count();
        assert_eq!((decided, late), (1, 1), "{outcomes:?}");
        let stored = b.task(&task.id).await.unwrap().unwrap();
        assert_eq!(stored.approvals.len(), 2, "the late approval is not kept");
    }
    eprintln!("{} racing pairs of approvals on two processes in {:?}", 2 * TASKS, started.elapsed());
    assert_eq!(a.unsent().await.unwrap(), 2 * TASKS as u64, "one answer per task");
    assert!(b.pending(None).await.unwrap().is_empty());
}

/// Two processes on one PostgreSQL store, a task's insert racing a cancel of its call: the
/// runner's own cancel always withdraws the task (now or when it arrives), and another user's
/// is always counted once, whichever commits first. A store error that passes is tried again,
/// as the intake does.
#[tokio::test]
async fn postgres_processes_racing_an_insert_and_its_cancel_settle_the_task() {
    with_pg("cancel_race", |url| async move {
        let (a, b) = tokio::join!(Store::open(&url), Store::open(&url));
        let (a, b) = (a.unwrap(), b.unwrap());
        for i in 0..100 {
            let cancelled_by = if i % 2 == 0 { "runner-a" } else { "runner-b" };
            let incoming = asked_by(human("ops", "race", &format!("c{i}"), false, 0), "runner-a");
            let inserting = again(|| a.insert(&incoming, 9_000));
            let cancelling = again(|| b.cancel(&incoming.correlation, cancelled_by, "race", 9_000));
            let (inserted, withdrawal) = tokio::join!(inserting, cancelling);
            let foreign = a.forget_foreign_cancels(&incoming.correlation, "runner-a").await.unwrap();
            match (cancelled_by, inserted) {
                ("runner-a", Inserted::Withdrawn) => {}
                ("runner-a", Inserted::Created(id)) => {
                    assert!(!a.task(&id).await.unwrap().unwrap().is_pending(), "call {i}: the task outlived its cancel")
                }
                ("runner-b", Inserted::Created(id)) => {
                    assert!(a.task(&id).await.unwrap().unwrap().is_pending(), "call {i}");
                    let counted = usize::from(!withdrawal.kept.is_empty()) + foreign.len();
                    assert_eq!(counted, 1, "call {i}: the foreign cancel counted {counted} times");
                }
                (_, other) => panic!("call {i}: {other:?}"),
            }
        }
        a.close().await;
        b.close().await;
    })
    .await;
}

/// `attempt` until it does not fail in a way that passes.
async fn again<T, F: Future<Output = Result<T, StoreError>>>(attempt: impl Fn() -> F) -> T {
    loop {
        match attempt().await {
            Err(e) if e.is_transient() => tokio::task::yield_now().await,
            done => return done.unwrap(),
        }
    }
}

/// Stores `incoming` as task `id`, received at `now`, with the `webhooks` announcing it
/// ([`Store::insert_as`]).
async fn insert_at(store: &Store, id: &str, incoming: &Incoming, now: i64, webhooks: &[NewWebhook]) -> Stored {
    store.insert_as(incoming, &incoming.pending(id, now), webhooks).await.unwrap()
}

/// What canaries of [`canaries_suite`] are, and why.
fn curl() -> CanaryMark {
    CanaryMark {
        name: "curl".into(),
        explanation: "pipes a script from the internet into a shell".into(),
        expected: vec![Decision::Reject, Decision::Terminate],
    }
}

/// Plants `incoming` as canary task `id` at `now`, with the `webhooks` announcing it.
async fn plant_at(store: &Store, id: &str, incoming: &Incoming, now: i64, webhooks: &[NewWebhook]) -> Task {
    let task = Task { canary: true, ..incoming.pending(id, now) };
    let stored = store.plant(incoming, &task, &curl(), webhooks).await.unwrap();
    assert_eq!(stored.inserted, Inserted::Created(id.into()));
    task
}

/// `verdict` on a canary, counted for `answerer`.
fn kept(verdict: Verdict, answerer: Option<&str>, standing: Option<i64>) -> Recording {
    let answerer = answerer.map(|reviewer| Answerer { reviewer: reviewer.into(), standing });
    Recording { verdict, delivery: Delivery::Canary { answerer }, webhooks: vec![hook(&format!("d{}", now_id()))] }
}

/// A fresh webhook id.
fn now_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// Canaries: stored with their mark in the task's insert, pending among real tasks, never a
/// template; their decisions (a person's, a deadline's, approvals completing a count) write
/// no outbox row and keep whom they count for; read back newest first with their approvals.
async fn canaries_suite(store: Store) {
    let real = human("ops", "s1", "c1", false, 0);
    let real_task = insert_at(&store, "real", &real, 1_000, &[]).await;
    assert_eq!(real_task.inserted, Inserted::Created("real".into()));
    let k1 = plant_at(&store, "k1", &human("ops", "s1", "k1", false, 0), 1_100, &[hook("c1")]).await;
    let k2 = plant_at(&store, "k2", &human("ops", "s1", "k2", false, 5_000), 1_200, &[hook("c2")]).await;
    let k3 = plant_at(&store, "k3", &needing(2, "s1", "k3"), 1_300, &[hook("c3")]).await;
    assert_eq!(store.webhooks_owed().await.unwrap(), 3, "a canary's task.created is written as any task's");
    let ops = ["ops".to_owned()];
    assert_eq!(store.pending(Some(&ops)).await.unwrap().len(), 4, "canaries wait among real tasks");
    let templates = store.templates("ops", 10).await.unwrap();
    assert_eq!(templates.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), ["real"]);
    assert!(!templates[0].canary && store.task("k1").await.unwrap().unwrap().canary);
    // A real call that gets a canary's key later is a task of its own: a canary never takes its place.
    let k4 = plant_at(&store, "k4", &human("ops", "s1", "later", false, 0), 1_400, &[]).await;
    let later = insert_at(&store, "later", &human("ops", "s1", "later", false, 0), 1_500, &[]).await;
    assert_eq!(later.inserted, Inserted::Created("later".into()));
    assert_eq!(store.task("later").await.unwrap().unwrap().correlation, k4.correlation);

    // A person's decision, a deadline's, and approvals completing a count: none in the outbox.
    let reject = verdict(Decision::Reject, "alice", 2_000);
    assert_eq!(store.decide(&k1, &kept(reject.clone(), Some("alice"), None)).await.unwrap(), Decided::Recorded(None));
    let Decided::NotPending(_) = store.decide(&k1, &kept(reject.clone(), Some("bob"), None)).await.unwrap() else {
        panic!("a canary decided twice")
    };
    let timeout = verdict(Decision::Reject, crate::task::DECIDED_BY_TIMEOUT, 5_000);
    assert_eq!(store.decide(&k2, &kept(timeout, None, None)).await.unwrap(), Decided::Recorded(None));
    let Approved::Counted(_) = store.approve(&k3, &approval("bob", 3_000), never).await.unwrap() else { panic!() };
    let completing = |task: &Task| Recording {
        delivery: Delivery::Canary { answerer: None },
        webhooks: vec![hook("d3")],
        ..approved(task)
    };
    let Approved::Decided(None) = store.approve(&k3, &approval("carol", 3_100), completing).await.unwrap() else {
        panic!("the approvals of a canary left an answer to send")
    };
    assert_eq!(store.unsent().await.unwrap(), 0, "no answer of a canary is ever sent");
    assert!(store.claim_unsent(i64::MAX - 1, i64::MAX, 10).await.unwrap().is_empty());
    assert_eq!(store.webhooks_owed().await.unwrap(), 6, "a canary's decisions are announced as any task's");
    let real_task = store.task("real").await.unwrap().unwrap();
    let approve = verdict(Decision::Approve, "alice", 4_000);
    let answer = real_task.step_result(&approve).encode_to_vec();
    let Decided::Recorded(Some(_)) = store.decide(&real_task, &sending(approve, answer, 0, Vec::new())).await.unwrap()
    else {
        panic!("a real task's answer not in the outbox")
    };
    assert_eq!(store.unsent().await.unwrap(), 1);

    // Read back newest first, each with its verdict, whom it counts for and its approvals.
    let canaries = store.canaries(&ops, 10).await.unwrap();
    assert_eq!(canaries.iter().map(|c| c.task_id.as_str()).collect::<Vec<_>>(), ["k4", "k3", "k2", "k1"]);
    let [k3, k2, k1] = [&canaries[1], &canaries[2], &canaries[3]];
    assert_eq!((k1.mark.clone(), k1.planted_at, k1.pool.as_str()), (curl(), 1_100, "ops"));
    assert_eq!(k1.state, State::Decided(reject));
    assert_eq!(k1.answerer, Some(Answerer { reviewer: "alice".into(), standing: None }));
    assert!(matches!(&k2.state, State::Decided(v) if v.decided_by == "timeout") && k2.answerer.is_none());
    assert_eq!(k3.approvals, [approval("bob", 3_000), approval("carol", 3_100)]);
    assert!(matches!(&k3.state, State::Decided(v) if v.decision == Decision::Approve) && k3.answerer.is_none());
    assert_eq!(store.canaries(&ops, 2).await.unwrap().len(), 2);
    assert!(canaries[0].state == State::Pending && canaries[0].answerer.is_none());
    assert!(store.canaries(&["security".to_owned()], 10).await.unwrap().is_empty());
    store.close().await;
}

#[tokio::test]
async fn canaries_on_sqlite_memory() {
    canaries_suite(crate::fixtures::memory_store().await).await;
}

#[tokio::test]
async fn canaries_on_postgres() {
    with_pg("canaries", |url| async move { canaries_suite(Store::open(&url).await.unwrap()).await }).await;
}
