//! The reviewer UI in real headless Chromium: a task appears live, a person clicks a choice,
//! and the runner gets the decision; a tool call full of HTML, script, ANSI escapes and bidi
//! overrides executes nothing and shows everything.

use std::time::Duration;

use airlock_client::{Client, ClientConfig};
use airlock_reviewer::Service;
use airlock_tests::webdriver::{Browser, browser_available};
use airlock_tests::{HANG_GUARD, REVIEWER_TOKEN, TestKeys, approval, decision_name, reviewer_config};
use airlock_transport::MemoryTransport;
use airlock_worker::WorkerConfig;
use serde_json::json;

const POLICY: &str = "approvers:\n  - name: human\n    tools: \"*\"\n    pool: ops\n    timeout: 600\n";

#[tokio::test]
async fn a_person_decides_in_the_browser() {
    if !browser_available() {
        return;
    }
    tokio::time::timeout(HANG_GUARD, scenario()).await.expect("the browser test hung");
}

async fn scenario() {
    let transport = MemoryTransport::new();
    let prefix = "browser";
    let (stop_worker, stopped) = tokio::sync::oneshot::channel::<()>();
    let config = WorkerConfig {
        prefix: prefix.into(),
        concurrency: 8,
        policy_dir: None,
        worker_id: "worker".into(),
        metrics: Default::default(),
        trust: TestKeys::get().trust(),
    };
    let worker = tokio::spawn(airlock_worker::run(transport.clone(), config, async {
        let _ = stopped.await;
    }));
    let config = reviewer_config(prefix, "sqlite::memory:", "reviewer");
    let service = Service::start(transport.clone(), config).await.unwrap();
    let url = format!("http://{}/", service.local_addr());
    let client = Client::connect(
        transport.clone(),
        ClientConfig {
            prefix: prefix.into(),
            runner_id: "runner".into(),
            default_timeout: Duration::from_secs(600),
            fleet_keys: TestKeys::get().fleet_public(),
        },
    )
    .await
    .unwrap();

    let browser = Browser::start().await;
    browser.goto(&url).await;
    let token = browser.wait_for("input#token").await;
    browser.type_into(&token, REVIEWER_TOKEN).await;
    browser.click(&browser.wait_for("section.login button").await).await;
    browser.wait_for("#empty").await;
    let live = browser.wait_for("#live.on").await;
    assert_eq!(browser.text(&live).await, "live");

    // The runner asks while the page is open: the task appears without a reload.
    let hostile = json!({"function": "bash", "arguments": {
        "cmd": "echo '<script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">' \
                \u{1b}[2J\u{1b}]0;owned\u{7} \u{202e}fdp.exe",
        "note": "<b onmouseover=\"window.pwned = 3\">bold</b> zero\u{200b}width"
    }});
    let mut request = approval("s1", "c1", hostile, POLICY);
    if let Some(airlock_contract::v1::request::Body::Approval(body)) = request.body.as_mut() {
        body.message = "I will clean up. <iframe src=\"https://example.com\"></iframe> **not bold**".into();
    }
    if let Some(origin) = request.origin.as_mut() {
        origin.task = "cleanup".into();
        origin.model = "mockllm/model".into();
    }
    let asker = client.clone();
    let asked = tokio::spawn(async move { asker.approve(request).await });
    let card = browser.wait_for("article.task").await;

    // Nothing executed, nothing injected, everything visible.
    assert_eq!(browser.execute("return window.pwned === undefined").await, true);
    assert_eq!(browser.execute("return document.scripts.length").await, 1, "only app.js");
    assert_eq!(browser.execute("return document.querySelectorAll('article img, article iframe, article section b, [onerror], [onmouseover]').length").await, 0);
    let text = browser.text(&card).await;
    assert!(text.contains("<script>window.pwned = 1</script>"), "{text}");
    assert!(text.contains("<img src=x onerror=\"window.pwned = 2\">"), "{text}");
    assert!(text.contains("<iframe src=\"https://example.com\"></iframe>"), "{text}");
    assert!(text.contains("‹U+001B›[2J‹U+001B›]0;owned‹U+0007›"), "{text}");
    assert!(text.contains("‹U+202E›fdp.exe") && text.contains("zero‹U+200B›width"), "{text}");
    assert!(text.contains("cleanup") && text.contains("mockllm/model") && text.contains("s1"), "{text}");
    let controls = browser.execute("return document.querySelectorAll('article .ctl').length").await;
    assert!(controls.as_u64().unwrap() >= 6, "{controls}");
    let shot = std::env::temp_dir().join("airlock-reviewer-ui.png");
    browser.screenshot(&shot).await;
    eprintln!("screenshot: {}", shot.display());

    // The person explains and rejects with the keyboard shortcut.
    browser.press("x").await;
    let explanation = browser.wait_for("article.task textarea").await;
    browser.type_into(&explanation, "Not with those escape sequences.").await;
    browser.press("\u{e00c}").await; // Escape leaves the field
    browser.press("r").await;
    let decision = asked.await.unwrap().unwrap();
    assert_eq!((decision_name(&decision), decision.approver.as_str()), ("reject", "human"));
    assert_eq!(decision.decided_by, "alice");
    assert_eq!(decision.explanation.as_deref(), Some("Not with those escape sequences."));
    browser.wait_gone("article.task").await;

    // A second task, decided with the mouse.
    let asker = client.clone();
    let asked = tokio::spawn(async move {
        asker.approve(approval("s2", "c1", json!({"function": "ls", "arguments": {"path": "/"}}), POLICY)).await
    });
    browser.click(&browser.wait_for("article.task button.approve").await).await;
    let decision = asked.await.unwrap().unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("approve", "alice"));
    assert_eq!(decision.explanation.as_deref(), Some("Human operator approved tool call."));
    browser.wait_gone("article.task").await;

    browser.goto(&format!("{url}history")).await;
    let table = browser.text(&browser.wait_for("table.history").await).await;
    let lower = table.to_lowercase();
    assert!(lower.contains("alice") && lower.contains("reject") && lower.contains("approve"), "{table}");

    browser.quit().await;
    service.stop().await;
    client.close().await;
    let _ = stop_worker.send(());
    worker.await.unwrap().unwrap();
}
