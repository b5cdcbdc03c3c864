//! The fleet's control in the reviewer UI, in real headless Chromium: a person marks a task as
//! an incident from its card, the run's `incident:` rule ends it and every other pending call
//! of the run (the runner gets `terminate` from `control` for each, the cards leave); an admin
//! sees the run on the Runs page, which axe-core finds nothing serious or critical on, and
//! pauses another run from its form.

use airlock_reviewer::auth::{Reviewer, Reviewers, sha256_hex};
use airlock_tests::fleet::ReviewFleet;
use airlock_tests::webdriver::{Browser, in_browser};
use airlock_tests::{REVIEWER_TOKEN, approval, decision_name, reviewer_config};
use serde_json::json;

/// A person decides every call; one incident ends the run.
const POLICY: &str = "approvers:\n  - name: human\n    tools: \"*\"\n    pool: ops\n    timeout: 600\n\
                      incident:\n  then: terminate\n";

#[tokio::test]
async fn an_incident_marked_in_the_browser_ends_its_run_and_an_admin_switches_runs() {
    in_browser(scenario).await;
}

async fn scenario() {
    let mut config = reviewer_config("browser-control", "sqlite::memory:", "reviewer");
    config.reviewers = Reviewers::from_list(vec![Reviewer {
        name: "alice".into(),
        token_sha256: sha256_hex(REVIEWER_TOKEN),
        pools: vec!["ops".into()],
        admin: true,
        overrides: Vec::new(),
    }]);
    let fleet = ReviewFleet::start(config).await;
    let (url, client) = (fleet.url.clone(), fleet.client.clone());
    let ask = |sample: &str| {
        let (client, call) = (client.clone(), json!({"function": "bash", "arguments": {"cmd": "cat ~/.ssh/id_rsa"}}));
        let request = approval(sample, "c1", call, POLICY);
        tokio::spawn(async move { client.approve(request).await })
    };
    let asked = [ask("s1"), ask("s2")];

    let browser = Browser::start().await;
    browser.goto(&url).await;
    browser.type_into(&browser.wait_for("input#token").await, REVIEWER_TOKEN).await;
    browser.click(&browser.wait_for("section.login button").await).await;
    browser.wait_for("article.task + article.task").await;

    // The first card's incident form, opened, with a note.
    browser.click(&browser.wait_for("article.task details.incident summary").await).await;
    let note = browser.wait_for("article.task details.incident[open] textarea").await;
    browser.type_into(&note, "Reads the private key.").await;
    browser.click(&browser.wait_for("article.task details.incident[open] button").await).await;
    for asked in asked {
        let decision = browser.answer(asked).await.unwrap().unwrap();
        assert_eq!((decision_name(&decision), decision.approver.as_str()), ("terminate", "control"));
    }
    browser.wait_gone("article.task").await;

    // The admin's Runs page: the run, its incident, and a form for any run.
    browser.goto(&format!("{url}runs")).await;
    let row = browser.text(&browser.wait_for("table.runs tbody tr").await).await;
    assert!(row.contains("run") && row.contains("1:"), "{row}");
    browser.assert_accessible("the runs page").await;
    browser.type_into(&browser.wait_for("form.switch input[name=run]").await, "other").await;
    browser.type_into(&browser.wait_for("form.switch input[name=reason]").await, "looks odd").await;
    browser.click(&browser.wait_for("form.switch button[value=pause]").await).await;
    let paused = browser.wait_for("table.runs tbody tr:first-child td .badge.human").await;
    assert_eq!(browser.text(&paused).await.to_lowercase(), "human");

    browser.quit().await;
    fleet.stop().await;
}
