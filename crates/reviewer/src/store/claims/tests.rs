//! Claims on SQLite and on the running PostgreSQL: one holder at a time, extended by its
//! holder, released by its holder or an override, gone at its time or with its task's
//! decision; and reviewers racing on two processes sharing a store, one winner per task.

use airlock_policy::Decision;
use airlock_testkit::database::with_pg;

use super::*;
use crate::fixtures::{human, memory_store};
use crate::store::{Decided, Delivery, Inserted, Recording};
use crate::task::{State, Verdict};

fn claim(by: &str, until_unix_ms: i64) -> ClaimView {
    ClaimView { by: by.into(), until_unix_ms }
}

async fn pending(store: &Store, call: &str) -> String {
    let Inserted::Created(id) = store.insert(&human("ops", "s1", call, false, 0), 1_000).await.unwrap() else {
        panic!("not created")
    };
    id
}

async fn suite(store: Store) {
    let (id, other) = (pending(&store, "c1").await, pending(&store, "c2").await);
    assert_eq!(store.claim_of(&id, 2_000).await.unwrap(), None);

    // alice holds it until 10 000; bob (whatever the case of names) is told so, and waits.
    assert_eq!(store.claim_task(&id, "alice", 2_000, 10_000).await.unwrap(), Claiming::Held(claim("alice", 10_000)));
    assert_eq!(store.claim_task(&id, "bob", 3_000, 20_000).await.unwrap(), Claiming::HeldBy(claim("alice", 10_000)));
    assert_eq!(store.claim_of(&id, 9_999).await.unwrap(), Some(claim("alice", 10_000)));
    // Her own claim is hers to extend, whatever the case of her name.
    assert_eq!(store.claim_task(&id, "Alice", 4_000, 12_000).await.unwrap(), Claiming::Held(claim("Alice", 12_000)));
    // bob cannot release it; an override can.
    assert_eq!(store.release_claim(&id, "bob", false, 5_000).await.unwrap(), Releasing::HeldBy(claim("Alice", 12_000)));
    assert_eq!(store.release_claim(&id, "carol", true, 5_000).await.unwrap(), Releasing::Released);
    assert_eq!(store.claim_of(&id, 5_000).await.unwrap(), None);
    assert_eq!(store.release_claim(&id, "bob", false, 5_000).await.unwrap(), Releasing::Released, "nothing held");

    // At its time a claim is gone: not read, and taken over by the next one.
    store.claim_task(&id, "alice", 6_000, 8_000).await.unwrap();
    assert_eq!(store.claim_of(&id, 8_000).await.unwrap(), None);
    assert_eq!(store.claim_task(&id, "bob", 8_000, 9_000).await.unwrap(), Claiming::Held(claim("bob", 9_000)));
    assert_eq!(store.release_claim(&id, "bob", false, 8_500).await.unwrap(), Releasing::Released);

    // Tasks read with their live claims only; the other task is nobody's.
    let now = airlock_records::time::now_ms();
    store.claim_task(&id, "alice", now, now + 60_000).await.unwrap();
    store.claim_task(&other, "bob", now - 60_000, now - 1).await.unwrap();
    let read = store.pending(None).await.unwrap();
    let claims: Vec<_> = read.iter().map(|t| (t.id.as_str(), t.claim.clone())).collect();
    assert_eq!(claims, [(id.as_str(), Some(claim("alice", now + 60_000))), (other.as_str(), None)]);
    assert_eq!(store.task(&id).await.unwrap().unwrap().claim, Some(claim("alice", now + 60_000)));

    // A decided task holds no claim and takes none.
    let task = store.task(&id).await.unwrap().unwrap();
    let verdict =
        Verdict { decision: Decision::Approve, explanation: "ok".into(), decided_by: "alice".into(), decided_at: now };
    let recording = Recording { verdict, delivery: Delivery::Canary { answerer: None }, webhooks: Vec::new() };
    assert!(matches!(store.decide(&task, &recording).await.unwrap(), Decided::Recorded(_)));
    let decided = store.task(&id).await.unwrap().unwrap();
    assert!(matches!(decided.state, State::Decided(_)) && decided.claim.is_none());
    assert_eq!(store.claim_of(&id, now).await.unwrap(), None);
    assert_eq!(store.claim_task(&id, "bob", now, now + 1_000).await.unwrap(), Claiming::NotPending);
    assert_eq!(store.claim_task("nope", "bob", now, now + 1_000).await.unwrap(), Claiming::NotPending);
}

#[tokio::test]
async fn claims_on_sqlite_memory() {
    suite(memory_store().await).await;
}

#[tokio::test]
async fn claims_on_postgres() {
    with_pg("claims", |url| async move {
        let store = Store::open(&url).await.unwrap();
        suite(store.clone()).await;
        store.close().await;
    })
    .await;
}

/// Two processes on one PostgreSQL store, alice on one and bob on the other, claiming the same
/// tasks at the same moment (fresh tasks, and tasks whose earlier claim just ended): each task
/// is held by exactly one of them, and the other is told who.
#[tokio::test]
async fn postgres_processes_racing_for_a_task_get_one_claim() {
    with_pg("claims_race", |url| async move {
        let (a, b) = tokio::join!(Store::open(&url), Store::open(&url));
        let (a, b) = (a.unwrap(), b.unwrap());
        for i in 0..40 {
            let id = pending(&a, &format!("c{i}")).await;
            if i % 2 == 1 {
                a.claim_task(&id, "carol", 1_000, 2_000).await.unwrap();
            }
            let (x, y) = tokio::join!(a.claim_task(&id, "alice", 2_000, 9_000), b.claim_task(&id, "bob", 2_000, 9_000));
            let outcomes = [x.unwrap(), y.unwrap()];
            let winner = match &outcomes {
                [Claiming::Held(won), Claiming::HeldBy(told)] | [Claiming::HeldBy(told), Claiming::Held(won)] => {
                    assert_eq!(won, told, "the loser is told who won");
                    won.by.clone()
                }
                other => panic!("not one winner: {other:?}"),
            };
            assert_eq!(b.claim_of(&id, 2_000).await.unwrap().map(|c| c.by), Some(winner));
        }
        a.close().await;
        b.close().await;
    })
    .await;
}
