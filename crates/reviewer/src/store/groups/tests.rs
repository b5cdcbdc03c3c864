//! Groups of identical pending calls, on SQLite and on the running PostgreSQL.

use airlock_policy::Decision;
use airlock_testkit::database::with_pg;

use super::super::{Db, Delivery, Recording, Store};
use crate::fixtures::human;
use crate::store::Inserted;
use crate::task::{Incoming, Task, Verdict};

async fn stored(store: &Store, incoming: &Incoming, at: i64) -> String {
    let Inserted::Created(id) = store.insert(incoming, at).await.unwrap() else { panic!("not created") };
    id
}

async fn decide(store: &Store, id: &str) {
    let task: Task = store.task(id).await.unwrap().unwrap();
    let verdict =
        Verdict { decision: Decision::Reject, explanation: "no".into(), decided_by: "alice".into(), decided_at: 5_000 };
    let recording = Recording { verdict, delivery: Delivery::Canary { answerer: None }, webhooks: Vec::new() };
    store.decide(&task, &recording).await.unwrap();
}

async fn suite(store: Store) {
    let ops = ["ops".to_owned()];
    // Three identical approvals of three samples (their call ids differ), two identical
    // reviews, the same call in another pool, and on a two-person step.
    let mut same = Vec::new();
    for (n, sample) in ["s1", "s2", "s3"].into_iter().enumerate() {
        same.push(stored(&store, &human("ops", sample, &format!("c{n}"), false, 0), 1_000 + n as i64).await);
    }
    stored(&store, &human("ops", "s4", "c1", true, 0), 2_000).await;
    stored(&store, &human("ops", "s5", "c1", true, 0), 2_001).await;
    stored(&store, &human("security", "s6", "c1", false, 0), 900).await;
    let mut two = human("ops", "s7", "c1", false, 0);
    two.human.approvals = 2;
    stored(&store, &two, 800).await;

    let groups = store.groups(&ops, 10).await.unwrap();
    let counts: Vec<(u64, i64)> = groups.iter().map(|g| (g.count, g.oldest)).collect();
    assert_eq!(counts, [(3, 1_000), (2, 2_000)], "the largest first; the two-person task and the other pool apart");
    let tasks = store.group_tasks(&ops, &groups[0].group, 10).await.unwrap();
    assert_eq!(tasks.iter().map(|t| t.id.clone()).collect::<Vec<_>>(), same, "oldest first");
    assert_eq!(store.group_tasks(&ops, &groups[0].group, 2).await.unwrap().len(), 2, "at most the limit");
    let security = ["security".to_owned()];
    assert!(store.group_tasks(&security, &groups[0].group, 10).await.unwrap().is_empty(), "within the pools asked");
    assert!(store.group_tasks(&ops, "", 10).await.unwrap().is_empty(), "the tasks never grouped are no group");
    assert!(store.groups(&[], 10).await.unwrap().is_empty());

    // A decided task leaves its group; a group of one is no group.
    decide(&store, &same[0]).await;
    decide(&store, &same[1]).await;
    let left: Vec<u64> = store.groups(&ops, 10).await.unwrap().iter().map(|g| g.count).collect();
    assert_eq!(left, [2]);

    // Tasks stored before the column existed get their group when the store opens.
    on_db!(store, pool => { sqlx::query("UPDATE tasks SET call_group = NULL").execute(pool).await.unwrap(); });
    assert!(store.groups(&ops, 10).await.unwrap().is_empty());
    assert_eq!(store.fill_groups().await.unwrap(), 5, "the pending tasks");
    assert_eq!(store.groups(&ops, 10).await.unwrap().iter().map(|g| g.count).collect::<Vec<_>>(), [2]);
}

#[tokio::test]
async fn groups_on_sqlite_memory() {
    suite(crate::fixtures::memory_store().await).await;
}

#[tokio::test]
async fn groups_on_postgres() {
    with_pg("groups", |url| async move { suite(Store::open(&url).await.unwrap()).await }).await;
}
