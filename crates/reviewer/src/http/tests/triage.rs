//! Triage through the API and the UI: filters, orders, search, pages and counts on a few
//! hundred tasks, and every way of asking for another pool's tasks or counts, refused.

use std::collections::BTreeMap;

use super::*;
use crate::fixtures::calling;

/// Tasks per pool.
const PER_POOL: usize = 120;

/// `PER_POOL` tasks in each of ops and security, stored 15 s apart (ops's and security's
/// interleaved), with varied tools, runs, samples and arguments; bob's security tasks carry
/// a word of their own. Returns the ids in storing order.
async fn many(shared: &AppState) -> Vec<String> {
    let mut ids = Vec::new();
    let start = now_ms() - 3_600_000;
    for i in 0..PER_POOL * 2 {
        let pool = if i % 2 == 0 { "ops" } else { "security" };
        let tool = ["bash", "python", "read_file"][i % 3];
        let arguments = if pool == "security" {
            format!(r#"{{"cmd": "classified-{i}"}}"#)
        } else {
            format!(r#"{{"cmd": "Echo Task-{i:03}"}}"#)
        };
        let deadline = if i % 5 == 0 { now_ms() + 3_600_000 - i as i64 * 1000 } else { 0 };
        let run = if i % 4 < 2 { "run-a" } else { "run-b" };
        let incoming = calling(pool, run, &format!("s{}", i % 6), &format!("c{i}"), tool, &arguments, deadline);
        let Inserted::Created(id) = shared.desk.store().insert(&incoming, start + i as i64 * 15_000).await.unwrap()
        else {
            panic!()
        };
        ids.push(id);
    }
    ids
}

async fn get_page(shared: &AppState, token: &str, query: &str) -> (StatusCode, Value) {
    let (status, _, body) = send(shared, api("GET", &format!("/api/tasks?{query}"), Some(token), None)).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn ids_of(page: &Value) -> Vec<String> {
    page["tasks"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_owned()).collect()
}

/// Every page of `query`, `limit` at a time, by the cursors the API hands out.
async fn follow(shared: &AppState, token: &str, query: &str, limit: u32) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor = String::new();
    loop {
        let (status, page) = get_page(shared, token, &format!("{query}&limit={limit}&cursor={cursor}")).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        ids.extend(ids_of(&page));
        if page["more"] != true {
            assert!(page.get("next_cursor").is_none());
            return ids;
        }
        cursor = page["next_cursor"].as_str().unwrap().to_owned();
    }
}

#[tokio::test]
async fn the_api_filters_sorts_searches_pages_and_counts() {
    let (shared, _outbox, _) = setup().await;
    let ids = many(&shared).await;

    // Without parameters, as before: every pending task of the caller's pools, oldest first.
    let (status, page) = get_page(&shared, ALICE, "").await;
    assert_eq!(status, StatusCode::OK);
    let everything = ids_of(&page);
    assert_eq!(everything.len(), PER_POOL + 2, "the setup's two ops tasks and ours");
    let ours: Vec<String> = ids.iter().step_by(2).cloned().collect();
    assert_eq!(everything[..PER_POOL], ours[..], "ours are older than the setup's");
    assert_eq!((page["matching"].as_u64(), page["more"].as_bool()), (Some(PER_POOL as u64 + 2), Some(false)));
    assert_eq!(page["counts"], json!({"ops": PER_POOL + 2}));

    // Pages put together are the whole list, in each order.
    assert_eq!(follow(&shared, ALICE, "sort=oldest", 25).await, everything);
    let mut newest = everything.clone();
    newest.reverse();
    assert_eq!(follow(&shared, ALICE, "sort=newest", 16).await, newest);
    let by_deadline = follow(&shared, ALICE, "sort=deadline", 9).await;
    let (_, whole) = get_page(&shared, ALICE, "sort=deadline").await;
    assert_eq!(by_deadline, ids_of(&whole));
    let deadlines: Vec<i64> =
        whole["tasks"].as_array().unwrap().iter().map(|t| t["deadline_unix_ms"].as_i64().unwrap_or(i64::MAX)).collect();
    assert!(deadlines.windows(2).all(|w| w[0] <= w[1]), "soonest deadline first, none last: {deadlines:?}");
    assert!(deadlines[0] < i64::MAX && deadlines[deadlines.len() - 1] == i64::MAX);

    // Each filter, checked against the tasks it returns and the count it gives.
    let (_, page) = get_page(&shared, ALICE, "tool=python").await;
    let tasks = page["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), PER_POOL / 3);
    assert!(tasks.iter().all(|t| t["call"]["function"] == "python"));
    assert_eq!(page["matching"], tasks.len());
    let (_, page) = get_page(&shared, ALICE, "run=run-b&sample=s2").await;
    let tasks = page["tasks"].as_array().unwrap();
    assert!(!tasks.is_empty());
    assert!(tasks.iter().all(|t| t["correlation"].as_str().unwrap().starts_with("approval/run-b/s2/")), "{page}");
    let (_, page) = get_page(&shared, ALICE, "q=ECHO%20TASK-02").await;
    let found: Vec<&str> =
        page["tasks"].as_array().unwrap().iter().map(|t| t["call"]["arguments"]["cmd"].as_str().unwrap()).collect();
    assert_eq!(found.len(), 5, "{found:?}");
    assert!(found.iter().all(|cmd| cmd.starts_with("Echo Task-02")), "{found:?}");
    // Waiting at least 30 minutes: the first half of ours (stored within the last hour, 15 s apart).
    let (_, page) = get_page(&shared, ALICE, "older_than=30").await;
    let old = ids_of(&page);
    assert!(!old.is_empty() && old.len() < PER_POOL);
    assert_eq!(old[..], everything[..old.len()]);
    let (_, page) = get_page(&shared, ALICE, "tool=bash&older_than=30&sort=newest&limit=3").await;
    assert_eq!((ids_of(&page).len(), page["more"].as_bool()), (3, Some(true)));
    assert_eq!(page["counts"], json!({"ops": PER_POOL + 2}), "counts ignore the filter");

    // Unreadable parameters are refused, saying which.
    for bad in ["sort=random", "limit=many", "limit=0", "older_than=-5", "cursor=nonsense"] {
        let (status, page) = get_page(&shared, ALICE, bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {page}");
        assert!(page["error"].as_str().unwrap().contains("is not a valid"), "{page}");
    }
}

#[tokio::test]
async fn no_filter_shows_another_pools_tasks_or_counts() {
    let (shared, _outbox, setup_ids) = setup().await;
    let ids = many(&shared).await;
    let bobs: Vec<&String> = ids.iter().skip(1).step_by(2).chain([&setup_ids[2]]).collect();
    let (_, page) = get_page(&shared, BOB, "q=classified").await;
    assert_eq!(page["matching"], PER_POOL, "bob finds his own");

    let a_bob_cursor = {
        let (_, page) = get_page(&shared, BOB, "limit=3").await;
        page["next_cursor"].as_str().unwrap().to_owned()
    };
    let attempts = [
        "pool=security".to_owned(),
        "pool=security&q=classified".to_owned(),
        "q=classified".to_owned(),
        "q=classified-1".to_owned(),
        "pool=ops&pool=security".to_owned(),
        "pool=ops%27%20OR%20%271%27%3D%271".to_owned(),
        "q=%25".to_owned(),
        "q=%27%20OR%201%3D1%20--".to_owned(),
        "tool=bash%27%20OR%20%27a%27%3D%27a".to_owned(),
        format!("cursor={a_bob_cursor}"),
        format!("pool=security&cursor={a_bob_cursor}&sort=newest"),
        "sort=deadline&limit=1000".to_owned(),
    ];
    for attempt in &attempts {
        let (status, page) = get_page(&shared, ALICE, attempt).await;
        if status != StatusCode::OK {
            assert_eq!(status, StatusCode::BAD_REQUEST, "{attempt}");
            continue;
        }
        let seen = ids_of(&page);
        assert!(seen.iter().all(|id| !bobs.contains(&id)), "{attempt} showed a security task");
        let counts: BTreeMap<String, Value> = serde_json::from_value(page["counts"].clone()).unwrap();
        assert_eq!(counts.keys().collect::<Vec<_>>(), ["ops"], "{attempt}");
        let text = page.to_string();
        assert!(!text.contains("classified") && !text.contains("security"), "{attempt}: {text}");
    }

    // The page and the script's refresh obey the same bound.
    let cookie = login(&shared, ALICE).await;
    for uri in ["/?pool=security", "/?q=classified", "/ui/pending?pool=security", "/ui/pending?q=classified"] {
        let request = browser("GET", uri, Some(&cookie), None, "").body(Body::empty()).unwrap();
        let (status, _, html) = send(&shared, request).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
        assert!(!html.contains("<article"), "{uri} showed a card");
        assert!(!bobs.iter().any(|id| html.contains(id.as_str())), "{uri}");
        assert!(!html.contains("classified-"), "{uri}");
    }
}

#[tokio::test]
async fn the_pending_page_keeps_the_filter_and_escapes_it() {
    let (shared, _outbox, _) = setup().await;
    many(&shared).await;
    let cookie = login(&shared, ALICE).await;
    let page = |uri: &str| browser("GET", uri, Some(&cookie), None, "").body(Body::empty()).unwrap();

    // The form shows the filter as given, escaped, and the pager's links carry it on.
    let hostile = "/?tool=%22%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E&q=%3Cimg%20src%3Dx%3E&sort=newest&limit=10";
    let (status, _, html) = send(&shared, page(hostile)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("value=\"&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;\""), "{html}");
    assert!(html.contains("value=\"&lt;img src=x&gt;\""));
    assert!(!html.contains("<script>alert") && !html.contains("<img src=x>"));
    assert!(html.contains("<option value=\"newest\" selected>"));
    assert!(html.contains("No pending task matches these filters."));

    // Ten per page, the counts of the caller's pool, a link to the next page with the filter.
    let (_, _, html) = send(&shared, page("/?tool=bash&limit=10")).await;
    assert_eq!(html.matches("<article").count(), 10);
    assert!(html.contains(&format!("ops <span class=\"n\">{}</span>", PER_POOL + 2)), "the pool's count");
    assert!(html.contains(&format!("<span id=\"count\" class=\"count\">{}</span>", PER_POOL + 2)));
    let next = html.split("rel=\"next\" href=\"").nth(1).unwrap().split('"').next().unwrap().replace("&amp;", "&");
    assert!(next.starts_with("/?tool=bash&limit=10&cursor="), "{next}");
    let (_, _, second) = send(&shared, page(&next)).await;
    assert_eq!(second.matches("<article").count(), 10);
    assert!(second.contains(">First page</a>"));
    let first_ids: Vec<&str> = html.split("data-id=\"").skip(1).map(|s| s.split('"').next().unwrap()).collect();
    assert!(first_ids.iter().all(|id| !second.contains(&format!("data-id=\"{id}\""))), "pages do not overlap");

    // An unreadable filter is a page saying so.
    let (status, _, html) = send(&shared, page("/?sort=%3Cb%3E")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains("&#39;&lt;b&gt;&#39; is not a valid sort"), "{html}");
}
