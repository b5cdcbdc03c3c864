//! Triage in real headless Chromium: hundreds of pending tasks in three pools (one the
//! reviewer does not see), filtered, searched, sorted and paged from the form by keyboard,
//! the filter kept in the URL across a reload, the counts per pool shown, the current page
//! updated live (a matching task appears, a decided one leaves, a task the filter hides only
//! moves the count), a linked task shown though it is on another page, and axe-core content
//! with the filtered page.
//!
//! `measure_triage_with_10000_pending_tasks` (ignored; run it by name) prints, as JSON, how
//! long Chromium takes to show the first page and a filter's result with 10,000 pending tasks
//! in PostgreSQL, and how long the store's queries take: see BENCHMARKS.md.

use std::time::{Duration, Instant};

use airlock_contract::v1;
use airlock_reviewer::auth::{Reviewer, Reviewers, sha256_hex};
use airlock_reviewer::task::Incoming;
use airlock_reviewer::triage::Filter;
use airlock_reviewer::{ReviewerConfig, Service};
use airlock_testkit::database::PgDatabase;
use airlock_tests::webdriver::{Browser, browser_available, in_browser, screenshot_path};
use airlock_tests::{REVIEWER_TOKEN, approval, reviewer_config};
use airlock_transport::MemoryTransport;
use prost::Message as _;
use serde_json::{Value, json};

const POLICY: &str = "approvers:\n  - name: human\n    tools: \"*\"\n    pool: ops\n";
const TOOLS: [&str; 4] = ["bash", "python", "read_file", "web_search"];

/// A human approval task of `pool` for `function(arguments)`, from run `run`.
fn task(pool: &str, run: &str, sample: &str, call: &str, function: &str, arguments: Value, deadline: i64) -> Incoming {
    let mut request = approval(sample, call, json!({"function": function, "arguments": arguments}), POLICY);
    if let Some(key) = request.key.as_mut() {
        key.run_id = run.into();
    }
    if let Some(v1::request::Body::Approval(body)) = request.body.as_mut() {
        body.message = format!("Step {call} of sample {sample}.");
    }
    let step = v1::StepTask {
        request: Some(request),
        name: "human".into(),
        params_json: "{}".into(),
        deadline_unix_ms: deadline,
        on_timeout: v1::DecisionKind::Reject.into(),
        ..Default::default()
    };
    let choices = [v1::DecisionKind::Approve, v1::DecisionKind::Reject, v1::DecisionKind::Terminate];
    let human = v1::HumanTask {
        task: Some(step),
        choices: choices.map(Into::into).to_vec(),
        pool: pool.into(),
        ..Default::default()
    };
    Incoming::decode(&human.encode_to_vec(), pool).expect("a valid task")
}

/// The `i`th task of a load: pools, tools, runs and samples in rotation, every seventh with
/// a deadline, received `i` seconds after `start`.
fn nth(i: usize, pools: &[&str]) -> (Incoming, i64) {
    let pool = pools[i % pools.len()];
    let tool = TOOLS[i % TOOLS.len()];
    let arguments = match tool {
        "bash" => json!({"cmd": format!("tar czf backup-{i:05}.tgz /srv/data")}),
        "python" => json!({"code": format!("print(sum(range({i})))")}),
        "read_file" => json!({"path": format!("/etc/app/conf-{i:05}.yaml")}),
        _ => json!({"query": format!("release notes {i}")}),
    };
    let deadline = if i.is_multiple_of(7) { airlock_records::time::now_ms() + 86_400_000 - i as i64 * 1000 } else { 0 };
    let run = format!("run-{}", i % 3);
    (task(pool, &run, &format!("s{}", i % 40), &format!("call-{i}"), tool, arguments, deadline), i as i64 * 1000)
}

/// Stores `count` tasks through the service's own store (as intake would), `start` being the
/// first's arrival time, eight at a time.
async fn load(service: &Service, pools: &[&str], count: usize, start: i64) {
    let mut inserts = tokio::task::JoinSet::new();
    for chunk in (0..count).collect::<Vec<_>>().chunks(count.div_ceil(8)) {
        let store = service.desk().store().clone();
        let chunk = chunk.to_vec();
        let pools: Vec<String> = pools.iter().map(|p| p.to_string()).collect();
        inserts.spawn(async move {
            let pools: Vec<&str> = pools.iter().map(String::as_str).collect();
            for i in chunk {
                let (incoming, at) = nth(i, &pools);
                store.insert(&incoming, start + at).await.expect("stored");
            }
        });
    }
    while let Some(done) = inserts.join_next().await {
        done.unwrap();
    }
    service.desk().poke();
}

/// The service: alice sees `ops` and `security`; it also serves `legal`, hers to never see.
fn config(store: &str) -> ReviewerConfig {
    let mut config = reviewer_config("triage", store, "reviewer");
    config.pools = vec!["ops".into(), "security".into(), "legal".into()];
    config.reviewers = Reviewers::from_list(vec![Reviewer {
        name: "alice".into(),
        token_sha256: sha256_hex(REVIEWER_TOKEN),
        pools: vec!["ops".into(), "security".into()],
        admin: false,
        overrides: Vec::new(),
    }]);
    config
}

async fn sign_in(browser: &Browser, url: &str) {
    browser.goto(url).await;
    let token = browser.wait_for("input#token").await;
    browser.type_into(&token, REVIEWER_TOKEN).await;
    browser.press("\u{e007}").await; // Enter
    browser.wait_for("#live.on").await;
}

/// What the page shows: the cards' functions, the header's count, the pool counts, the pager.
async fn shown(browser: &Browser) -> Value {
    browser
        .execute(
            "return {\
               functions: Array.from(document.querySelectorAll('#tasks article.task:not(.leaving) h2.fn')).map(e => e.textContent),\
               ids: Array.from(document.querySelectorAll('#tasks article.task:not(.leaving)')).map(e => e.dataset.id),\
               count: document.getElementById('count').textContent,\
               counts: Array.from(document.querySelectorAll('#counts a')).map(a => a.textContent),\
               pager: document.querySelector('#pager .shown').textContent,\
               search: location.search }",
        )
        .await
}

/// Waits until the page (as [`shown`] reads it) satisfies `done`; returns it.
async fn until(browser: &Browser, done: impl Fn(&Value) -> bool) -> Value {
    loop {
        let now = shown(browser).await;
        if done(&now) {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Types `text` into the field `css` (cleared first) and submits the form with Enter.
async fn filter_by(browser: &Browser, css: &str, text: &str) {
    let field = browser.wait_for(css).await;
    browser.execute(&format!("document.querySelector('{css}').value = ''")).await;
    browser.type_into(&field, text).await;
    browser.press("\u{e007}").await;
}

#[tokio::test]
async fn a_person_triages_hundreds_of_tasks() {
    in_browser(triage).await;
}

async fn triage() {
    let service = Service::start(MemoryTransport::new(), config("sqlite::memory:")).await.unwrap();
    let url = format!("http://{}/", service.local_addr());
    let start = airlock_records::time::now_ms() - 3_600_000;
    // 360 tasks, 120 per pool, one second apart, an hour ago.
    load(&service, &["ops", "security", "legal"], 360, start).await;
    let browser = Browser::start().await;
    sign_in(&browser, &url).await;

    // The first page: 50 cards, all of alice's 240, each pool's count, none of legal's.
    let page = until(&browser, |p| p["ids"].as_array().unwrap().len() == 50).await;
    assert_eq!(page["count"], "240");
    assert_eq!(page["counts"], json!(["ops 120", "security 120"]));
    assert_eq!(page["pager"], "50 shown of 240 matching");
    let first_page = page["ids"].clone();

    // A tool, by keyboard: type it and press Enter; the URL keeps it.
    filter_by(&browser, "#f-tool", "python").await;
    let page = until(&browser, |p| p["search"] == "?tool=python").await;
    let functions = page["functions"].as_array().unwrap();
    assert_eq!(functions.len(), 50);
    assert!(functions.iter().all(|f| f == "python"), "{page}");
    assert_eq!(page["pager"], "50 shown of 60 matching", "a quarter of 240 call python");
    assert_eq!(page["count"], "240", "the header counts every pending task");

    // The next page holds the other ten, and a reload keeps filter and page.
    browser.click(&browser.wait_for("#pager a[rel=next]").await).await;
    let page = until(&browser, |p| p["search"].as_str().unwrap().contains("cursor=")).await;
    assert_eq!(page["pager"], "10 shown of 60 matching");
    assert!(page["functions"].as_array().unwrap().iter().all(|f| f == "python"));
    let second_page = page["ids"].clone();
    let here = browser.execute("return location.href").await;
    browser.goto(here.as_str().unwrap()).await;
    let reloaded = until(&browser, |p| p["ids"] == second_page).await;
    assert_eq!(reloaded["search"], page["search"]);
    let tool = browser.execute("return document.getElementById('f-tool').value").await;
    assert_eq!(tool, "python");

    // A link to one task (as a webhook sends) shows it on the first page, though it is not
    // among the first page's tasks.
    let linked = second_page[0].as_str().unwrap();
    assert!(!first_page.as_array().unwrap().contains(&second_page[0]));
    browser.goto(&format!("{url}#task-{linked}")).await;
    let page = until(&browser, |p| p["ids"][0] == linked).await;
    assert_eq!(page["ids"].as_array().unwrap().len(), 51);

    // A search in the calls, in another case, and a pool from the select, newest first.
    browser.click(&browser.wait_for("#filters a.clear").await).await;
    until(&browser, |p| p["search"] == "" && p["ids"] == first_page).await;
    filter_by(&browser, "#f-q", "BACKUP-001").await;
    let page = until(&browser, |p| p["search"] == "?q=BACKUP-001").await;
    // bash is every fourth task (i = 0, 4, 8 …), backup-001xx for i in 100..=199, legal's left out.
    let found = page["ids"].as_array().unwrap().len();
    assert_eq!(found, (100..200).filter(|i| i % 4 == 0 && i % 3 != 2).count(), "{page}");
    assert!(page["functions"].as_array().unwrap().iter().all(|f| f == "bash"));
    browser.goto(&format!("{url}?pool=security&sort=newest&older_than=30")).await;
    let page = until(&browser, |p| p["search"] == "?pool=security&sort=newest&older_than=30").await;
    assert_eq!(page["ids"].as_array().unwrap().len(), 50);
    let pool_field = browser.execute("return document.getElementById('f-pool').value").await;
    assert_eq!(pool_field, "security");

    // Live: on the filtered page, a new python task in ops appears at the top (newest first),
    // a decided one leaves, and a bash task only moves the count.
    browser.goto(&format!("{url}?tool=python&sort=newest")).await;
    let before = until(&browser, |p| p["search"] == "?tool=python&sort=newest").await;
    let now = airlock_records::time::now_ms();
    let store = service.desk().store();
    let Ok(airlock_reviewer::store::Inserted::Created(fresh)) = store
        .insert(&task("ops", "run-live", "s-live", "live-1", "python", json!({"code": "print('live')"}), 0), now)
        .await
    else {
        panic!("not stored")
    };
    store.insert(&task("ops", "run-live", "s-live", "live-2", "bash", json!({"cmd": "true"}), 0), now).await.unwrap();
    service.desk().poke();
    let page = until(&browser, |p| p["ids"][0] == fresh.as_str() && p["count"] == "242").await;
    assert_eq!(page["ids"].as_array().unwrap().len(), 50);
    assert_eq!(page["pager"], "50 shown of 61 matching");
    assert_eq!(page["ids"][1], before["ids"][0], "the rest moved down");
    let gone = before["ids"][3].as_str().unwrap().to_owned();
    let decided = store.task(&gone).await.unwrap().unwrap();
    service.desk().record(&decided, airlock_policy::Decision::Approve, String::new(), "bob").await.unwrap();
    let page = until(&browser, |p| p["count"] == "241" && !p["ids"].as_array().unwrap().contains(&json!(gone))).await;
    assert_eq!(page["pager"], "50 shown of 60 matching");

    browser.assert_accessible("the filtered pending page").await;
    let shot = screenshot_path("reviewer-triage.png");
    browser.screenshot(&shot).await;
    eprintln!("screenshot: {}", shot.display());
    browser.quit().await;
    service.stop().await;
}

#[tokio::test]
async fn the_views_show_the_selected_task_first_and_a_decision_moves_on_at_once() {
    in_browser(views).await;
}

/// The tasks shown in the list (laid out), and the selected one's id.
async fn visible(browser: &Browser) -> (u64, String) {
    let shown = browser
        .execute(
            "return [Array.from(document.querySelectorAll('#tasks article.task')).filter(c => c.offsetHeight > 0).length,\
             document.querySelector('#tasks article.task.selected').dataset.id]",
        )
        .await;
    (shown[0].as_u64().unwrap(), shown[1].as_str().unwrap().to_owned())
}

async fn views() {
    let service = Service::start(MemoryTransport::new(), config("sqlite::memory:")).await.unwrap();
    let url = format!("http://{}/", service.local_addr());
    load(&service, &["ops"], 12, airlock_records::time::now_ms() - 3_600_000).await;
    let browser = Browser::start().await;
    sign_in(&browser, &url).await;
    browser.wait_for("#tasks article.task.selected").await;
    assert_eq!(browser.text(&browser.wait_for("#view").await).await, "View: cards");
    assert_eq!(visible(&browser).await.0, 12);

    // Compact: the other tasks are their heading and call; the selected one is whole.
    browser.press("v").await;
    assert_eq!(browser.text(&browser.wait_for("#view").await).await, "View: compact");
    let hidden = browser
        .execute("return Array.from(document.querySelectorAll('#tasks article.task:not(.selected) form.decide')).every(f => f.offsetHeight === 0)")
        .await;
    assert_eq!(hidden, true);
    browser.assert_accessible("the compact list").await;

    // Focus: the selected task alone; a decision shows the next at once, and the view is kept.
    browser.press("v").await;
    let (shown, first) = visible(&browser).await;
    assert_eq!(shown, 1);
    browser.press("a").await;
    let (shown, next) = visible(&browser).await;
    assert_ne!(next, first, "the next task is selected as the decision is sent");
    assert_eq!(shown, 1);
    browser.wait_gone(&format!("#task-{first}")).await;
    let decided = service.desk().store().task(&first).await.unwrap().unwrap();
    assert!(!decided.is_pending(), "the first task was decided");
    browser.assert_accessible("one task at a time").await;
    browser.goto(&url).await;
    assert_eq!(browser.text(&browser.wait_for("#view").await).await, "View: focus");
    browser.press("v").await;
    assert_eq!(browser.text(&browser.wait_for("#view").await).await, "View: cards");
    browser.quit().await;
    service.stop().await;
}

/// Milliseconds of `since`, for the printed figures.
fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// How many times each figure is taken; the median is printed.
const ROUNDS: usize = 5;

/// The median of `samples`, with the range, for the printed figures.
fn spread(mut samples: Vec<f64>) -> Value {
    samples.sort_by(f64::total_cmp);
    json!({"median": samples[samples.len() / 2], "min": samples[0], "max": samples[samples.len() - 1]})
}

/// The page's last navigation as the browser timed it: until the response ended, and until
/// the document was parsed and its deferred script run.
async fn navigation(browser: &Browser) -> (f64, f64, u64) {
    let timing = browser
        .execute(
            "const n = performance.getEntriesByType('navigation')[0];\
             return [n.responseEnd - n.startTime, n.domContentLoadedEventEnd - n.startTime, n.transferSize];",
        )
        .await;
    (timing[0].as_f64().unwrap(), timing[1].as_f64().unwrap(), timing[2].as_u64().unwrap_or(0))
}

#[tokio::test]
#[ignore = "a measurement (10,000 tasks in PostgreSQL, Chromium): run it by name"]
async fn measure_triage_with_10000_pending_tasks() {
    if !browser_available() {
        return;
    }
    let Some(db) = PgDatabase::create("triage_bench").await else { return };
    let outcome = tokio::spawn(measure(db.url.clone())).await;
    db.drop_now().await;
    if let Err(error) = outcome {
        std::panic::resume_unwind(error.into_panic());
    }
}

async fn measure(store_url: String) {
    const TASKS: usize = 10_000;
    let service = Service::start(MemoryTransport::new(), config(&store_url)).await.unwrap();
    let url = format!("http://{}/", service.local_addr());
    let loading = Instant::now();
    load(&service, &["ops", "security", "legal"], TASKS, airlock_records::time::now_ms() - 86_400_000).await;
    let load_ms = ms(loading);

    // The store's queries: the watcher's full scan, a first page, a search.
    let store = service.desk().store();
    let pools = ["ops".to_owned(), "security".to_owned()];
    let search = Filter { search: Some("backup-0999".into()), ..Filter::default() };
    let (mut scan, mut first, mut searched) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let timed = Instant::now();
        assert_eq!(store.pending_ids().await.unwrap().len(), TASKS);
        scan.push(ms(timed));
        let timed = Instant::now();
        let page = store.page(&pools, &Filter::default(), Some(50), None, airlock_records::time::now_ms()).await;
        first.push(ms(timed));
        assert_eq!(page.unwrap().tasks.len(), 50);
        let timed = Instant::now();
        let found = store.page(&pools, &search, Some(50), None, airlock_records::time::now_ms()).await;
        searched.push(ms(timed));
        assert!(!found.unwrap().tasks.is_empty());
    }

    let browser = Browser::start().await;
    sign_in(&browser, &url).await;
    // The first page, fresh loads: wall time around the driver's navigation until the first
    // card is found, and the browser's own timing of the navigation.
    let (mut wall, mut response, mut ready, mut bytes) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for _ in 0..ROUNDS {
        browser.goto("about:blank").await;
        let timed = Instant::now();
        browser.goto(&url).await;
        browser.wait_for("#tasks article.task").await;
        wall.push(ms(timed));
        let (until_response, until_ready, size) = navigation(&browser).await;
        response.push(until_response);
        ready.push(until_ready);
        bytes = size;
    }
    let cards = browser.execute("return document.querySelectorAll('article.task').length").await;
    assert_eq!(cards, 50, "one page, never the whole list");
    let first_page = json!({"wall_ms": spread(wall), "response_ms": spread(response), "dom_ready_ms": spread(ready),
                            "bytes": bytes});

    // A filter change: a search typed into the form and submitted with Enter, until its
    // result shows.
    let (mut wall, mut response, mut ready) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        browser.goto(&url).await;
        let text = format!("backup-099{round}");
        let timed = Instant::now();
        filter_by(&browser, "#f-q", &text).await;
        let query = format!("?q={text}");
        until(&browser, |p| p["search"] == query.as_str() && !p["ids"].as_array().unwrap().is_empty()).await;
        wall.push(ms(timed));
        let (until_response, until_ready, _) = navigation(&browser).await;
        response.push(until_response);
        ready.push(until_ready);
    }
    let filter_change =
        json!({"wall_ms": spread(wall), "response_ms": spread(response), "dom_ready_ms": spread(ready)});

    // The live refresh of the first page (what an event triggers), timed in the page.
    browser.goto(&url).await;
    browser.wait_for("#live.on").await;
    let mut refresh = Vec::new();
    let mut refresh_bytes = 0;
    for _ in 0..ROUNDS {
        let timed = browser
            .execute_async(
                "const done = arguments[arguments.length - 1]; const t = performance.now();\
                 fetch('/ui/pending' + location.search).then(r => r.text()).then(html =>\
                   done([performance.now() - t, html.length]));",
            )
            .await;
        refresh.push(timed[0].as_f64().unwrap());
        refresh_bytes = timed[1].as_u64().unwrap();
    }
    let report = json!({
        "tasks": TASKS,
        "store": store.backend(),
        "load_ms": load_ms.round(),
        "store_pending_ids_ms": spread(scan),
        "store_first_page_ms": spread(first),
        "store_search_page_ms": spread(searched),
        "first_page": first_page,
        "filter_change": filter_change,
        "live_refresh": {"ms": spread(refresh), "bytes": refresh_bytes},
    });
    println!("{report}");
    browser.quit().await;
    service.stop().await;
}

#[tokio::test]
#[ignore = "a measurement (10,000 tasks in PostgreSQL, Chromium, 200 decisions): run it by name"]
async fn measure_decisions_with_10000_pending_tasks() {
    if !browser_available() {
        return;
    }
    let Some(db) = PgDatabase::create("decisions_bench").await else { return };
    let outcome = tokio::spawn(measure_decisions(db.url.clone())).await;
    db.drop_now().await;
    if let Err(error) = outcome {
        std::panic::resume_unwind(error.into_panic());
    }
}

/// In the page, after `const before = <the selected task's id>;`: the time from the last key
/// down to the selected task being another, laid out, its call inside the window; `null`
/// when its call is still not in the window a second later (the person would have to scroll).
const NEXT_READABLE: &str = "const done = arguments[arguments.length - 1]; \
    const readable = () => { const card = document.querySelector('#tasks article.task.selected:not(.leaving)'); \
      if (!card || card.dataset.id === before) return false; \
      const box = card.querySelector('section.call').getBoundingClientRect(); \
      return box.height > 0 && box.top >= 0 && box.top + Math.min(box.height, 120) <= window.innerHeight; }; \
    const look = () => { const waited = performance.now() - window.airlockKeyDown; \
      if (readable()) done(waited); else if (waited > 1000) done(null); else requestAnimationFrame(look); }; look();";

/// A person deciding 200 tasks in a row with the keyboard alone in each view of the pending
/// list, 10,000 pending: per decision, from the key press to the next task selected and its
/// call readable in the window.
async fn measure_decisions(store_url: String) {
    const TASKS: usize = 10_000;
    let service = Service::start(MemoryTransport::new(), config(&store_url)).await.unwrap();
    let url = format!("http://{}/", service.local_addr());
    load(&service, &["ops", "security", "legal"], TASKS, airlock_records::time::now_ms() - 86_400_000).await;
    let browser = Browser::start().await;
    sign_in(&browser, &url).await;
    for (n, view) in ["cards", "compact", "focus"].into_iter().enumerate() {
        browser.execute(&format!("localStorage.setItem('airlock-view', '{view}')")).await;
        browser.goto(&url).await;
        let report = decisions_in_view(&browser, &service, view, 200 * (n + 1)).await;
        println!("{}", json!({"pending": TASKS - 200 * n, "decisions": report}));
    }
    browser.quit().await;
    service.stop().await;
}

/// 200 decisions in a row with `a` and `r`, the list shown as `view`, `decided` in all after.
async fn decisions_in_view(browser: &Browser, service: &Service, view: &str, decided: usize) -> Value {
    const DECISIONS: usize = 200;
    browser.wait_for("#tasks article.task.selected").await;
    browser.execute("document.addEventListener('keydown', e => { window.airlockKeyDown = e.timeStamp; }, true)").await;
    let (mut latencies, mut unreadable) = (Vec::with_capacity(DECISIONS), 0);
    let started = Instant::now();
    for n in 0..DECISIONS {
        let before = browser.execute("return document.querySelector('#tasks article.task.selected').dataset.id").await;
        browser.press(if n % 2 == 0 { "a" } else { "r" }).await;
        match browser.execute_async(&format!("const before = {before};\n{NEXT_READABLE}")).await.as_f64() {
            Some(ms) => latencies.push(ms),
            None => {
                unreadable += 1;
                // The person scrolls to the task.
                browser.execute("document.querySelector('#tasks article.task.selected').scrollIntoView()").await;
            }
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let history = service.desk().store().history(None, 1000).await.unwrap().len();
    assert_eq!(history, decided, "every key press decided one task");
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies.get(((latencies.len() as f64 * q).ceil() as usize).max(1) - 1).copied();
    json!({
        "decisions": DECISIONS,
        "view": view,
        "store": service.desk().store().backend(),
        "key_to_next_readable_ms": {"p50": at(0.5), "p99": at(0.99), "max": latencies.last()},
        "not_readable_without_scrolling": unreadable,
        "ui_decisions_per_hour": at(0.5).map(|p50| (3600.0 * 1000.0 / p50).round()),
        "driven_decisions_per_hour": (DECISIONS as f64 * 3600.0 / wall).round(),
    })
}
