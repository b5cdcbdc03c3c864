//! Claims in real headless Chromium, on a service that claims the task a person opens
//! (`--claim-on-open`): the card alice opens becomes hers as the page loads; a claim bob takes
//! over the API reaches her page live, saying who holds the task until when, its decide
//! buttons disabled with the reason beside them, and opening that card claims nothing; once
//! bob releases it (live again), opening it claims it for alice, who releases it from the
//! card and decides it by keyboard. axe-core finds nothing serious or critical on the page
//! with both claims shown.

use airlock_reviewer::client::ApiClient;
use airlock_reviewer::desk::Claims;
use airlock_tests::fleet::ReviewFleet;
use airlock_tests::webdriver::{Browser, in_browser, screenshot_path};
use airlock_tests::{BOB_TOKEN, REVIEWER_TOKEN, approval, decision_name, pending, people, reviewer_config};
use serde_json::{Value, json};

const POLICY: &str = "approvers:\n  - name: human\n    tools: \"*\"\n    pool: ops\n    timeout: 600\n";

#[tokio::test]
async fn the_card_a_person_opens_is_claimed_and_anothers_claim_keeps_them_off() {
    in_browser(scenario).await;
}

/// Waits until the card of task `id` shows its claim as `held` (`none`, `you`, `other`);
/// returns the claim's text and how many of the card's decide buttons are disabled.
async fn held(browser: &Browser, id: &str, held: &str) -> Value {
    browser.wait_for(&format!("#task-{id} .claim[data-held={held}]")).await;
    browser
        .execute(&format!(
            "const card = document.getElementById('task-{id}');\
             return {{text: card.querySelector('.claim').textContent,\
               disabled: card.querySelectorAll('form.decide .choices button:disabled').length}};"
        ))
        .await
}

async fn scenario() {
    let mut config = reviewer_config("browser-claims", "sqlite::memory:", "reviewer");
    config.reviewers = people(&[("alice", REVIEWER_TOKEN, "ops"), ("bob", BOB_TOKEN, "ops")]);
    config.claims = Claims { on_open: true, ..Claims::default() };
    let fleet = ReviewFleet::start(config).await;
    let (url, client) = (fleet.url.clone(), fleet.client.clone());
    let ask = |sample: &str| {
        let (client, call) = (client.clone(), json!({"function": "bash", "arguments": {"cmd": "make deploy"}}));
        let request = approval(sample, "c1", call, POLICY);
        tokio::spawn(async move { client.approve(request).await })
    };
    let first = ask("s1");
    let bob = ApiClient::new(&url, BOB_TOKEN);
    pending(&bob, 1).await;
    let second = ask("s2");
    let tasks = pending(&bob, 2).await;
    let (mine, theirs) = (tasks[0]["id"].as_str().unwrap().to_owned(), tasks[1]["id"].as_str().unwrap().to_owned());

    // alice opens the page: the first card, selected, is claimed for her; the second is free.
    let browser = Browser::start().await;
    browser.sign_in(&url, REVIEWER_TOKEN).await;
    let own = held(&browser, &mine, "you").await;
    assert!(own["text"].as_str().unwrap().starts_with("You claim this task until"), "{own}");
    assert_eq!(own["disabled"], 0);
    let task = bob.get(&format!("/api/tasks/{mine}")).await.unwrap().json();
    assert_eq!(task["claim"]["by"], "alice", "{task}");
    assert_eq!(held(&browser, &theirs, "none").await["disabled"], 0);

    // bob claims the second over the API: alice's page shows it live, its buttons disabled.
    assert_eq!(bob.claim(&theirs, None).await.unwrap().claim.by, "bob");
    let other = held(&browser, &theirs, "other").await;
    assert!(other["text"].as_str().unwrap().starts_with("Claimed by bob until"), "{other}");
    assert_eq!(other["disabled"], 3, "{other}");
    browser.assert_accessible("the pending page with claims").await;
    let top = format!("document.getElementById('task-{theirs}').scrollIntoView(); window.scrollBy(0, -70)");
    browser.execute(&top).await;
    let shot = screenshot_path("reviewer-claims.png");
    browser.screenshot(&shot).await;
    eprintln!("screenshot: {}", shot.display());

    // Opening bob's card (j) leaves his claim; alice decides her own (k, then a).
    browser.press("j").await;
    browser.wait_for(&format!("#task-{theirs}.selected")).await;
    browser.press("k").await;
    browser.wait_for(&format!("#task-{mine}.selected")).await;
    browser.press("a").await;
    let decision = browser.answer(first).await.unwrap().unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("approve", "alice"));
    let task = bob.get(&format!("/api/tasks/{theirs}")).await.unwrap().json();
    assert_eq!(task["claim"]["by"], "bob", "opening another's task leaves their claim: {task}");

    // bob lets go (live again); the only card left is opened, and so claimed, for alice.
    browser.wait_gone(&format!("#task-{mine}")).await;
    bob.release(&theirs).await.unwrap();
    held(&browser, &theirs, "you").await;
    // alice releases it from the card: it is nobody's, and still hers to decide.
    browser.click(&browser.wait_for(&format!("#task-{theirs} .claim button.release")).await).await;
    let free = held(&browser, &theirs, "none").await;
    assert_eq!(free["disabled"], 0, "{free}");
    assert!(bob.get(&format!("/api/tasks/{theirs}")).await.unwrap().json().get("claim").is_none());
    browser.press("r").await;
    let decision = browser.answer(second).await.unwrap().unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("reject", "alice"));

    browser.quit().await;
    fleet.stop().await;
}
