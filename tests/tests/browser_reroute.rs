//! A re-routed task in real headless Chromium: nobody in `ops` answers within the step's
//! `reroute_after`, so the task's card appears in `oncall`'s pending page saying which pool it
//! moved from; a person there approves it, and the runner's trail names both pools in order.
//! The person of `ops` no longer sees it pending.

use airlock_records::review::ReroutedMetadata;
use airlock_tests::fleet::ReviewFleet;
use airlock_tests::webdriver::{Browser, in_browser};
use airlock_tests::{BOB_TOKEN, REVIEWER_TOKEN, approval, decision_name, people, reviewer_config, trail};
use serde_json::json;

const POLICY: &str = "approvers:\n  - name: human\n    tools: \"*\"\n    pool: ops\n    timeout: 600\n    \
                      reroute_after: 1\n    to: [oncall]\n";

#[tokio::test]
async fn a_rerouted_task_shows_the_pool_it_came_from_and_is_decided_there() {
    in_browser(rerouted).await;
}

async fn rerouted() {
    let mut config = reviewer_config("browser-reroute", "sqlite::memory:", "reviewer");
    config.pools = vec!["ops".into(), "oncall".into()];
    config.reviewers = people(&[("alice", REVIEWER_TOKEN, "ops"), ("bob", BOB_TOKEN, "oncall")]);
    let fleet = ReviewFleet::start(config).await;
    let asker = fleet.client.clone();
    let request = approval("s1", "c1", json!({"function": "bash", "arguments": {"cmd": "make deploy"}}), POLICY);
    let asked = tokio::spawn(async move { asker.approve(request).await });

    // Bob, of `oncall`, sees the task arrive live once nobody in `ops` answered.
    let browser = Browser::start().await;
    browser.sign_in(&fleet.url, BOB_TOKEN).await;
    let moved = browser.text(&browser.wait_for("article.task .title .pool .rerouted").await).await;
    assert_eq!(moved, "moved from ops");
    let pool = browser.text(&browser.wait_for("article.task .title .pool").await).await;
    assert!(pool.starts_with("pool oncall"), "{pool}");
    browser.assert_accessible("a re-routed task").await;
    browser.click(&browser.wait_for("article.task button.approve").await).await;
    let decision = browser.answer(asked).await.unwrap().unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("approve", "bob"));
    assert_eq!(trail(&decision), [("human".to_owned(), "escalate"), ("human".to_owned(), "approve")]);
    let ReroutedMetadata { rerouted } = serde_json::from_str(&decision.trail[0].metadata_json).unwrap();
    assert_eq!((rerouted.from.as_str(), rerouted.to.as_str()), ("ops", "oncall"));
    browser.wait_gone("article.task").await;

    // Alice, of `ops`, has nothing pending: the task left her pool.
    browser.click(&browser.wait_for("form[action='/logout'] button").await).await;
    browser.wait_for("input#token").await;
    browser.sign_in(&fleet.url, REVIEWER_TOKEN).await;
    browser.wait_for("#empty").await;

    browser.quit().await;
    fleet.stop().await;
}
