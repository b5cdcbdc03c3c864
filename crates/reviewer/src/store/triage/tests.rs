//! Triage on SQLite and on the running PostgreSQL: a few hundred tasks, every filter, order
//! and page checked against the same selection made in Rust; the caller's pools bound every
//! answer; tasks stored before the filter columns existed are filled in when the store opens.

use airlock_testkit::database::with_pg;

use super::*;
use crate::fixtures::calling;
use crate::store::Inserted;

const POOLS: [&str; 3] = ["ops", "security", "research"];
const TOOLS: [&str; 3] = ["bash", "python", "read_file"];
const TASKS: i64 = 300;

/// What the test stored, to select from in Rust.
#[derive(Debug, Clone)]
struct Stored {
    id: String,
    pool: String,
    tool: String,
    run: String,
    sample: String,
    received_at: i64,
    deadline: Option<i64>,
    arguments: String,
}

async fn fill(store: &Store) -> Vec<Stored> {
    let mut stored = Vec::new();
    for i in 0..TASKS {
        let pool = POOLS[(i % 3) as usize];
        let tool = TOOLS[(i % 5 % 3) as usize];
        let run = if i % 2 == 0 { "run-a" } else { "run-b" };
        let sample = format!("s{}", i % 10);
        // Every fourth task has a deadline, in an order unlike arrival's.
        let deadline = (i % 4 == 0).then(|| 10_000_000 - (i % 7) * 1_000);
        let arguments = match i {
            7 => r#"{"cmd": "echo 100%_done"}"#.to_owned(),
            8 => r#"{"cmd": "echo 100 percent done"}"#.to_owned(),
            9 => r#"{"cmd": "cat /etc/Secret-Token"}"#.to_owned(),
            _ => format!(r#"{{"cmd": "echo item-{i:03}"}}"#),
        };
        let incoming = calling(pool, run, &sample, &format!("c{i}"), tool, &arguments, deadline.unwrap_or(0));
        let received_at = 1_000_000 + i * 1_000;
        let Inserted::Created(id) = store.insert(&incoming, received_at).await.unwrap() else { panic!("not created") };
        stored.push(Stored {
            id,
            pool: pool.into(),
            tool: tool.into(),
            run: run.into(),
            sample,
            received_at,
            deadline,
            arguments,
        });
    }
    stored
}

/// The ids `filter` selects among `pools`, in its order, as Rust sees it.
fn expected(stored: &[Stored], pools: &[String], filter: &Filter, now: i64) -> Vec<String> {
    let same = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
    let mut matched: Vec<&Stored> = stored
        .iter()
        .filter(|s| pools.contains(&s.pool))
        .filter(|s| same(&filter.pool, &s.pool) && same(&filter.tool, &s.tool))
        .filter(|s| same(&filter.run, &s.run) && same(&filter.sample, &s.sample))
        .filter(|s| filter.older_than_minutes.is_none_or(|m| s.received_at <= now - i64::from(m) * 60_000))
        .filter(|s| {
            filter.search.as_deref().is_none_or(|q| {
                let text = format!("{}\n{}", s.tool, s.arguments).to_lowercase();
                text.contains(&q.to_lowercase())
            })
        })
        .collect();
    let key = |s: &Stored| match filter.sort {
        Sort::Oldest | Sort::Newest => s.received_at,
        Sort::Deadline => s.deadline.unwrap_or(i64::MAX),
    };
    matched.sort_by(|a, b| (key(a), &a.id).cmp(&(key(b), &b.id)));
    if filter.sort == Sort::Newest {
        matched.reverse();
    }
    matched.into_iter().map(|s| s.id.clone()).collect()
}

/// Every page of `filter`, `size` at a time, following the cursors; each page full but the
/// last, each saying how many match in all (`matching`) and whether more follow.
async fn all_pages(
    store: &Store,
    pools: &[String],
    filter: &Filter,
    size: u32,
    now: i64,
    matching: usize,
) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor = None;
    loop {
        let page = store.page(pools, filter, Some(size), cursor.as_ref(), now).await.unwrap();
        ids.extend(page.tasks.iter().map(|t| t.id.clone()));
        assert_eq!(page.matching as usize, matching, "{filter:?}");
        assert_eq!(page.next.is_some(), ids.len() < matching, "{filter:?}");
        match page.next {
            Some(next) => {
                assert_eq!(page.tasks.len(), size as usize);
                cursor = Some(next);
            }
            None => return ids,
        }
    }
}

async fn suite(store: Store) {
    let stored = fill(&store).await;
    let now = 1_000_000 + TASKS * 1_000 + 60_000;
    let all: Vec<String> = POOLS.iter().map(|p| p.to_string()).collect();
    let ops = vec!["ops".to_owned()];
    let filters = [
        Filter::default(),
        Filter { sort: Sort::Newest, ..Filter::default() },
        Filter { sort: Sort::Deadline, ..Filter::default() },
        Filter { pool: Some("security".into()), ..Filter::default() },
        Filter { tool: Some("python".into()), sort: Sort::Newest, ..Filter::default() },
        Filter { run: Some("run-a".into()), sample: Some("s4".into()), ..Filter::default() },
        Filter { older_than_minutes: Some(3), ..Filter::default() },
        Filter { search: Some("ITEM-1".into()), sort: Sort::Deadline, ..Filter::default() },
        Filter { search: Some("secret-token".into()), ..Filter::default() },
        Filter {
            tool: Some("bash".into()),
            run: Some("run-b".into()),
            older_than_minutes: Some(1),
            ..Filter::default()
        },
    ];
    for filter in &filters {
        for pools in [&all, &ops] {
            let want = expected(&stored, pools, filter, now);
            let whole = store.page(pools, filter, None, None, now).await.unwrap();
            let ids: Vec<String> = whole.tasks.iter().map(|t| t.id.clone()).collect();
            assert_eq!(ids, want, "{filter:?} in {pools:?}");
            assert_eq!((whole.matching as usize, whole.next.is_none()), (want.len(), true), "{filter:?}");
            assert_eq!(
                all_pages(&store, pools, filter, 7, now, want.len()).await,
                want,
                "paged: {filter:?} in {pools:?}"
            );
        }
    }
    assert!(!expected(&stored, &all, &filters[7], now).is_empty(), "the search finds something");
    assert!(!expected(&stored, &all, &filters[9], now).is_empty(), "the combined filter finds something");

    // Wildcards in a search are text: `100%_` finds the task that says it, not its look-alike.
    let search = Filter { search: Some("100%_".into()), ..Filter::default() };
    let found = store.page(&all, &search, None, None, now).await.unwrap();
    assert_eq!(found.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), [stored[7].id.as_str()]);

    // Counts: every pool of the caller's, whatever the filter; none of another's.
    let page = store.page(&all, &filters[4], Some(5), None, now).await.unwrap();
    let counts: Vec<(String, u64)> = page.counts.iter().map(|c| (c.pool.clone(), c.pending)).collect();
    assert_eq!(counts, [("ops".into(), 100), ("security".into(), 100), ("research".into(), 100)]);
    assert_eq!(page.pending(), 300);
    let page = store.page(&ops, &Filter::default(), Some(5), None, now).await.unwrap();
    assert_eq!(page.counts, [PoolCount { pool: "ops".into(), pending: 100 }]);
    let idle = ["ops".to_owned(), "idle".to_owned()];
    assert_eq!(store.pending_counts(&idle).await.unwrap()[1], PoolCount { pool: "idle".into(), pending: 0 });

    // A filter never widens the caller's pools: another pool, a search or a cursor that only
    // another pool's tasks match, or no pools at all, give nothing.
    let security_only = Filter { pool: Some("security".into()), ..Filter::default() };
    let page = store.page(&ops, &security_only, None, None, now).await.unwrap();
    assert_eq!((page.tasks.len(), page.matching), (0, 0));
    let injected = Filter { pool: Some("ops' OR '1'='1".into()), ..Filter::default() };
    assert_eq!(store.page(&all, &injected, None, None, now).await.unwrap().matching, 0);
    let injected =
        Filter { search: Some("' OR 1=1 --".into()), tool: Some("x' OR 'a'='a".into()), ..Filter::default() };
    assert_eq!(store.page(&all, &injected, None, None, now).await.unwrap().matching, 0);
    assert_eq!(stored[9].pool, "ops", "only an ops task holds the secret");
    let secret = Filter { search: Some("secret-token".into()), ..Filter::default() };
    let others = ["security".to_owned(), "research".to_owned()];
    assert_eq!(store.page(&others, &secret, None, None, now).await.unwrap().matching, 0);
    let cursor = Cursor { key: 0, id: String::new() };
    let page = store.page(&ops, &Filter::default(), Some(500), Some(&cursor), now).await.unwrap();
    assert!(page.tasks.iter().all(|t| t.pool == "ops") && page.tasks.len() == 100);
    let page = store.page(&[], &Filter::default(), None, None, now).await.unwrap();
    assert!(page.tasks.is_empty() && page.counts.is_empty() && page.matching == 0);

    // A decided task leaves every page and count.
    let first = store.task(&stored[0].id).await.unwrap().unwrap();
    let verdict = crate::task::Verdict {
        decision: airlock_policy::Decision::Approve,
        explanation: String::new(),
        decided_by: "alice".into(),
        decided_at: now,
    };
    let delivery = crate::store::Delivery::Outbox { answer: Vec::new(), lease_until: now };
    store.decide(&first, &crate::store::Recording { verdict, delivery, webhooks: Vec::new() }).await.unwrap();
    let page = store.page(&ops, &Filter::default(), Some(1), None, now).await.unwrap();
    assert_eq!((page.tasks[0].id.as_str(), page.matching), (stored[3].id.as_str(), 99));
}

/// Tasks stored before migration 0004 (their filter columns empty) are found by every filter
/// once the store opens again.
async fn back_fill(store: &Store, url: &str) {
    let stored = fill(store).await;
    let cleared = on_db!(store, pool => sqlx::query(
        "UPDATE tasks SET function = NULL, run_id = NULL, sample_id = NULL, search = NULL"
    )
    .execute(pool)
    .await
    .unwrap()
    .rows_affected());
    assert_eq!(cleared, TASKS as u64);
    let python = Filter { tool: Some("python".into()), ..Filter::default() };
    let all: Vec<String> = POOLS.iter().map(|p| p.to_string()).collect();
    assert_eq!(store.page(&all, &python, None, None, 0).await.unwrap().matching, 0, "not filled yet");
    let reopened = Store::open(url).await.unwrap();
    let want = expected(&stored, &all, &python, 0);
    let ids: Vec<String> =
        reopened.page(&all, &python, None, None, 0).await.unwrap().tasks.into_iter().map(|t| t.id).collect();
    assert_eq!(ids, want);
    assert_eq!(reopened.fill_triage_columns().await.unwrap(), 0, "nothing left to fill");
    reopened.close().await;
}

#[tokio::test]
async fn triage_on_sqlite() {
    suite(crate::fixtures::memory_store().await).await;
}

#[tokio::test]
async fn triage_on_postgres() {
    with_pg("triage", |url| async move {
        let store = Store::open(&url).await.unwrap();
        suite(store.clone()).await;
        store.close().await;
    })
    .await;
}

#[tokio::test]
async fn tasks_stored_before_triage_are_filled_in_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("airlock-triage-{}", crate::auth::random_hex::<6>()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("tasks.db").display());
    let store = Store::open(&url).await.unwrap();
    back_fill(&store, &url).await;
    store.close().await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn tasks_stored_before_triage_are_filled_in_on_postgres() {
    with_pg("triage_fill", |url| async move {
        let store = Store::open(&url).await.unwrap();
        back_fill(&store, &url).await;
        store.close().await;
    })
    .await;
}
