//! The reviewer UI in real headless Chromium: a task appears live, a person clicks a choice,
//! and the runner gets the decision; a tool call full of HTML, script, ANSI escapes and bidi
//! overrides executes nothing and shows everything; a task a monitor escalated shows why it is
//! here (the monitor's score and reason) and its conversation, collapsed until clicked; axe-core
//! finds nothing serious or critical on the login, pending and history pages; and Tab and Enter
//! alone reach and use a task's approve button, with the focus visible. A step that needs two
//! approvals shows the first approver and keeps them from approving again, and the runner gets
//! the approval of both; a step that offers modify lets a person edit the call's arguments as
//! JSON, checked in place, and the runner gets the modified call. A person answers a call and
//! every identical call of its sample, a later identical call is answered without anyone, and
//! once the standing decision is revoked on its page the next one waits again. A browser
//! signed in before the service restarts is still signed in after it and decides.

use airlock_contract::v1;
use airlock_reviewer::Service;
use airlock_tests::fleet::ReviewFleet;
use airlock_tests::webdriver::{Browser, in_browser, screenshot_path};
use airlock_tests::{BOB_TOKEN, REVIEWER_TOKEN, approval, decision_name, people, reviewer_config};
use airlock_transport::{Destination, MemoryTransport, Message, Topology, Transport};
use prost::Message as _;
use serde_json::json;

const POLICY: &str = "approvers:\n  - name: human\n    tools: \"*\"\n    pool: ops\n    timeout: 600\n";

/// A monitor step before the person.
const MONITORED: &str = "approvers:\n  - name: monitor\n    tools: \"*\"\n  - name: human\n    tools: \"*\"\n    pool: ops\n    timeout: 600\n";

/// A model monitor's answer, as `airlock monitor` gives it for a middle score: escalate, with
/// the score, the reason and the model in its metadata.
async fn serve_monitor(transport: &MemoryTransport, prefix: &str) {
    let topology = Topology::new(prefix).with_step("monitor");
    transport.declare(&topology).await.unwrap();
    let results = Destination::queue(topology.results_queue());
    let mut tasks = transport.consume(&topology.step_queue("monitor"), 8).await.unwrap();
    let transport = transport.clone();
    tokio::spawn(async move {
        while let Some(delivery) = tasks.next().await {
            let task = v1::StepTask::decode(delivery.message.body.as_ref()).unwrap();
            let answer = v1::StepAnswer {
                decision: v1::DecisionKind::Escalate.into(),
                explanation: Some("Score 5 is between approve_below 3 and escalate_below 8.".into()),
                metadata_json: json!({"monitor": "monitor-1", "provider": "openai", "model": "fake-openai",
                                      "score": 5, "reason": "removes a build directory"})
                .to_string(),
                decided_by: "monitor-1".into(),
                ..Default::default()
            };
            let result = v1::StepResult { task: Some(task), answer: Some(answer), ..Default::default() };
            transport.publish(&results, Message::new(result.encode_to_vec())).await.unwrap();
            delivery.ack().await.unwrap();
        }
    });
}

#[tokio::test]
async fn a_person_decides_in_the_browser() {
    in_browser(scenario).await;
}

async fn scenario() {
    let prefix = "browser";
    let fleet = ReviewFleet::start(reviewer_config(prefix, "sqlite::memory:", "reviewer")).await;
    serve_monitor(&fleet.transport, prefix).await;
    let (url, client) = (fleet.url.clone(), fleet.client.clone());

    let browser = Browser::start().await;
    browser.goto(&url).await;
    let token = browser.wait_for("input#token").await;
    browser.assert_accessible("the login page").await;
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
    // The person explains and rejects with the keyboard shortcut.
    browser.press("x").await;
    let explanation = browser.wait_for("article.task textarea").await;
    browser.type_into(&explanation, "Not with those escape sequences.").await;
    browser.press("\u{e00c}").await; // Escape leaves the field
    browser.press("r").await;
    let decision = browser.answer(asked).await.unwrap().unwrap();
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
    let decision = browser.answer(asked).await.unwrap().unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("approve", "alice"));
    assert_eq!(decision.explanation.as_deref(), Some("Human operator approved tool call."));
    browser.wait_gone("article.task").await;

    // A task the monitor escalated says why it is here; its conversation opens on a click.
    let mut request = approval("s3", "c1", json!({"function": "bash", "arguments": {"cmd": "rm -r build"}}), MONITORED);
    if let Some(v1::request::Body::Approval(body)) = request.body.as_mut() {
        body.message = "Removing the build directory.".into();
        body.history = vec![
            v1::ChatMessage { role: "user".into(), text: "Free some disk space.".into(), ..Default::default() },
            v1::ChatMessage {
                role: "assistant".into(),
                text: "Removing the build directory.".into(),
                tool_calls: body.call.clone().into_iter().collect(),
                ..Default::default()
            },
        ];
    }
    let asker = client.clone();
    let asked = tokio::spawn(async move { asker.approve(request).await });
    let trail = browser.text(&browser.wait_for("article.task section.trail").await).await;
    assert!(trail.contains("monitor") && trail.contains("escalate") && trail.contains("by monitor-1"), "{trail}");
    assert!(trail.contains("Score\n5") || trail.contains("Score 5"), "{trail}");
    assert!(trail.contains("Reason\nremoves a build directory") || trail.contains("Reason removes a build directory"));
    assert!(trail.contains("Model\nfake-openai") || trail.contains("Model fake-openai"), "{trail}");
    assert!(!trail.contains('{'), "metadata as fields, not JSON: {trail}");
    let conversation = browser.wait_for("article.task details.conversation").await;
    assert_eq!(browser.execute("return document.querySelector('article details.conversation').open").await, false);
    assert!(!browser.text(&conversation).await.contains("Free some disk space."), "collapsed");
    browser.assert_accessible("the pending page").await;
    let shot = screenshot_path("reviewer-task.png");
    browser.screenshot(&shot).await;
    eprintln!("screenshot: {}", shot.display());
    browser.click(&browser.wait_for("article.task details.conversation summary").await).await;
    browser.wait_for("article.task details.conversation[open]").await;
    let opened = browser.text(&conversation).await;
    assert!(opened.contains("Free some disk space.") && opened.contains("bash(cmd='rm -r build')"), "{opened}");

    // By keyboard alone, from a fresh load: Tab reaches the approve button, its focus shows,
    // and Enter approves. Each Tab moves on, so the page's controls bound the walk.
    browser.goto(&url).await;
    browser.wait_for("#live.on").await;
    let controls =
        browser.execute("return document.querySelectorAll('a, button, input, select, textarea, summary').length").await;
    let mut tabs = 0;
    while browser.focused().await != "button.btn.approve" {
        assert!(tabs <= controls.as_u64().unwrap(), "Tab never reached the approve button");
        browser.press("\u{e004}").await; // Tab
        tabs += 1;
    }
    let outline = browser.execute("return getComputedStyle(document.activeElement).outlineStyle").await;
    assert_eq!(outline, "solid", "the focused button shows the page's focus outline");
    browser.press("\u{e007}").await; // Enter
    let decision = browser.answer(asked).await.unwrap().unwrap();
    assert_eq!(decision_name(&decision), "approve");
    let approvers: Vec<&str> = decision.trail.iter().map(|t| t.approver.as_str()).collect();
    assert_eq!(approvers, ["monitor", "human"]);
    browser.wait_gone("article.task").await;

    browser.goto(&format!("{url}history")).await;
    let table = browser.text(&browser.wait_for("table.history").await).await;
    let lower = table.to_lowercase();
    assert!(lower.contains("alice") && lower.contains("reject") && lower.contains("approve"), "{table}");
    browser.assert_accessible("the history page").await;
    let shot = screenshot_path("reviewer-history.png");
    browser.screenshot(&shot).await;
    eprintln!("screenshot: {}", shot.display());

    browser.quit().await;
    fleet.stop().await;
}

/// A step that needs two reviewers.
const TWO_PERSON: &str =
    "approvers:\n  - name: human\n    tools: \"*\"\n    pool: ops\n    timeout: 600\n    approvals: 2\n";

/// Bob's token, beside alice's [`REVIEWER_TOKEN`].

#[tokio::test]
async fn two_people_approve_in_the_browser() {
    in_browser(two_person_scenario).await;
}

async fn two_person_scenario() {
    let mut config = reviewer_config("browser-two", "sqlite::memory:", "reviewer");
    config.reviewers = people(&[("alice", REVIEWER_TOKEN, "ops"), ("bob", BOB_TOKEN, "ops")]);
    let fleet = ReviewFleet::start(config).await;
    let asker = fleet.client.clone();
    let request = approval("s1", "c1", json!({"function": "bash", "arguments": {"cmd": "make deploy"}}), TWO_PERSON);
    let asked = tokio::spawn(async move { asker.approve(request).await });

    // Alice approves: the card stays, says so, and her approve button is disabled with the reason.
    let browser = Browser::start().await;
    browser.sign_in(&fleet.url, REVIEWER_TOKEN).await;
    browser.type_into(&browser.wait_for("article.task textarea").await, "Deploys are fine today.").await;
    browser.click(&browser.wait_for("article.task button.approve").await).await;
    let note = browser.text(&browser.wait_for("article.task section.approvals .note").await).await;
    assert_eq!(note, "You approved this task; it needs one more approval from another reviewer.");
    let approvals = browser.text(&browser.wait_for("article.task section.approvals").await).await;
    assert!(
        approvals.contains("1 of 2 approvals: alice") && approvals.contains("Deploys are fine today."),
        "{approvals}"
    );
    assert_eq!(browser.execute("return document.querySelector('article.task button.approve').disabled").await, true);
    browser.assert_accessible("a half-approved task").await;
    browser.goto(&fleet.url).await;
    browser.wait_for("article.task section.approvals .note").await;
    assert_eq!(browser.execute("return document.querySelector('article.task button.approve').disabled").await, true);

    // Bob signs in on the same browser and gives the second approval.
    browser.click(&browser.wait_for("form[action='/logout'] button").await).await;
    // The sign-out's page first: a navigation begun before its post went out would cancel it.
    browser.wait_for("input#token").await;
    browser.sign_in(&fleet.url, BOB_TOKEN).await;
    let approvals = browser.text(&browser.wait_for("article.task section.approvals").await).await;
    assert!(approvals.contains("1 of 2 approvals: alice") && !approvals.contains("You approved"), "{approvals}");
    browser.click(&browser.wait_for("article.task button.approve:not([disabled])").await).await;
    let decision = browser.answer(asked).await.unwrap().unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("approve", "alice+bob"));
    let human = decision.trail.iter().find(|t| t.approver == "human").expect("the human step in the trail");
    assert_eq!(human.decided_by, "alice+bob");
    let metadata: serde_json::Value = serde_json::from_str(&human.metadata_json).unwrap();
    let names: Vec<&str> =
        metadata["approvals"].as_array().unwrap().iter().map(|a| a["reviewer"].as_str().unwrap()).collect();
    assert_eq!(names, ["alice", "bob"]);
    assert_eq!(metadata["approvals"][0]["explanation"], "Deploys are fine today.");
    browser.wait_gone("article.task").await;

    browser.quit().await;
    fleet.stop().await;
}

/// A step that lets a person edit the call's arguments.
const EDITABLE: &str = "approvers:\n  - name: human\n    tools: \"*\"\n    pool: ops\n    timeout: 600\n    choices: [approve, reject, modify]\n";

#[tokio::test]
async fn a_person_edits_the_call_in_the_browser() {
    in_browser(editing_scenario).await;
}

async fn editing_scenario() {
    let fleet = ReviewFleet::start(reviewer_config("browser-edit", "sqlite::memory:", "reviewer")).await;
    let asker = fleet.client.clone();
    let request = approval("s1", "c1", json!({"function": "bash", "arguments": {"cmd": "rm -rf /"}}), EDITABLE);
    let asked = tokio::spawn(async move { asker.approve(request).await });

    let browser = Browser::start().await;
    browser.sign_in(&fleet.url, REVIEWER_TOKEN).await;
    browser.wait_for("article.task textarea[name=arguments]").await;
    let shown = browser.execute("return document.querySelector('article.task textarea[name=arguments]').value").await;
    assert_eq!(shown, "{\n  \"cmd\": \"rm -rf /\"\n}");
    browser.assert_accessible("a task offering modify").await;

    // What does not parse as a JSON object is refused in place, and nothing is sent.
    let set = |text: &str| {
        format!("document.querySelector('article.task textarea[name=arguments]').value = {}; return true", json!(text))
    };
    browser.execute(&set("{\"cmd\": ")).await;
    browser.click(&browser.wait_for("article.task button.modify").await).await;
    let error = browser.text(&browser.wait_for("article.task .arguments-error:not(:empty)").await).await;
    assert!(error.starts_with("Not sent: the arguments are not valid JSON"), "{error}");
    assert_eq!(browser.execute("return document.activeElement.name").await, "arguments");
    assert_eq!(
        browser
            .execute(
                "return document.querySelector('article.task textarea[name=arguments]').getAttribute('aria-invalid')"
            )
            .await,
        "true"
    );
    browser.execute(&set("[\"rm\"]")).await;
    browser.click(&browser.wait_for("article.task button.modify").await).await;
    let error = browser.execute("return document.querySelector('article.task .arguments-error').textContent").await;
    assert!(error.as_str().unwrap().contains("must be a JSON object"), "{error}");
    assert!(!asked.is_finished(), "nothing decided");

    // A valid edit reaches the runner as a modify with the new arguments, the same function.
    browser.execute(&set("{\"cmd\": \"rm -rf ./build\"}")).await;
    browser
        .type_into(&browser.wait_for("article.task textarea[name=explanation]").await, "Only the build directory.")
        .await;
    browser.click(&browser.wait_for("article.task button.modify").await).await;
    let decision = browser.answer(asked).await.unwrap().unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("modify", "alice"));
    assert_eq!(decision.explanation.as_deref(), Some("Only the build directory."));
    let modified = decision.modified.expect("the modified call");
    assert_eq!(modified.function, "bash");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&modified.arguments_json).unwrap(),
        json!({"cmd": "rm -rf ./build"})
    );
    let human = decision.trail.iter().find(|t| t.approver == "human").expect("the human step in the trail");
    assert_eq!(human.decided_by, "alice");
    browser.wait_gone("article.task").await;

    browser.quit().await;
    fleet.stop().await;
}

#[tokio::test]
async fn a_standing_decision_answers_identical_calls_until_revoked() {
    in_browser(standing).await;
}

async fn standing() {
    let fleet = ReviewFleet::start(reviewer_config("browser-standing", "sqlite::memory:", "reviewer")).await;
    let browser = Browser::start().await;
    browser.sign_in(&fleet.url, REVIEWER_TOKEN).await;
    let approve = |request: v1::Request| {
        let asker = fleet.client.clone();
        tokio::spawn(async move { asker.approve(request).await.unwrap() })
    };
    let clean = || json!({"function": "bash", "arguments": {"cmd": "rm -r build"}});

    // Alice approves a call and every identical call of its sample, for an hour.
    let asked = approve(approval("s1", "c1", clean(), POLICY));
    browser.click(&browser.wait_for("article.task details.standing summary").await).await;
    browser.wait_for("article.task details.standing input[name=pattern]").await;
    let prefilled =
        browser.execute("return document.querySelector('details.standing input[name=pattern]').value").await;
    assert_eq!(prefilled, "bash(cmd='rm -r build')");
    let explanation = browser.wait_for("article.task details.standing textarea").await;
    browser.type_into(&explanation, "Build output is disposable.").await;
    browser.click(&browser.wait_for("article.task details.standing button.approve").await).await;
    let decision = browser.answer(asked).await.unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("approve", "alice"));
    browser.wait_gone("article.task").await;

    // The same call later in the sample is answered without a person.
    let started = std::time::Instant::now();
    let decision = browser.answer(approve(approval("s1", "c2", clean(), POLICY))).await.unwrap();
    eprintln!("an identical call decided by the standing decision in {:?}", started.elapsed());
    assert_eq!(decision_name(&decision), "approve");
    assert_eq!(decision.decided_by, "alice (standing #1)");
    let human = decision.trail.last().expect("the human step's answer");
    assert_eq!((human.approver.as_str(), human.decided_by.as_str()), ("human", "alice (standing #1)"));
    assert!(decision.explanation.as_deref().is_some_and(|e| e.starts_with("Build output is disposable.")));

    // Another sample's identical call, and another call of the sample, wait for a person.
    for (sample, call) in [("s2", clean()), ("s1", json!({"function": "bash", "arguments": {"cmd": "rm -r src"}}))] {
        let asked = approve(approval(sample, "c3", call, POLICY));
        browser.click(&browser.wait_for("article.task button.reject").await).await;
        let decision = browser.answer(asked).await.unwrap();
        assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("reject", "alice"), "{sample}");
        browser.wait_gone("article.task").await;
    }

    // The standing page lists it; Revoke ends it.
    browser.click(&browser.wait_for("nav a[href='/standing']").await).await;
    let row = browser.text(&browser.wait_for("table.standing tr#standing-1").await).await;
    assert!(row.contains("alice") && row.contains("bash(cmd='rm -r build')") && row.contains("sample s1 of run run"));
    browser.assert_accessible("the standing page").await;
    let shot = screenshot_path("reviewer-standing.png");
    browser.screenshot(&shot).await;
    eprintln!("screenshot: {}", shot.display());
    browser.click(&browser.wait_for("tr#standing-1 button.revoke").await).await;
    browser.wait_for("main p.empty").await;

    // From then on the identical call waits for a person again.
    browser.goto(&fleet.url).await;
    browser.wait_for("#live.on").await;
    let asked = approve(approval("s1", "c4", clean(), POLICY));
    browser.click(&browser.wait_for("article.task button.approve").await).await;
    let decision = browser.answer(asked).await.unwrap();
    assert_eq!(decision.decided_by, "alice");

    browser.quit().await;
    fleet.stop().await;
}

#[tokio::test]
async fn a_browser_stays_signed_in_across_a_restart() {
    in_browser(restart_scenario).await;
}

async fn restart_scenario() {
    let dir = std::env::temp_dir().join(format!("airlock-browser-{}", airlock_testkit::unique_prefix()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = reviewer_config("browser-restart", &format!("sqlite:{}", dir.join("tasks.db").display()), "reviewer");
    let mut fleet = ReviewFleet::start(config.clone()).await;
    let browser = Browser::start().await;
    browser.sign_in(&fleet.url, REVIEWER_TOKEN).await;

    // The service stops and a new one starts on the same store (on another port: the cookie
    // is the host's, whatever the port).
    fleet.service.stop().await;
    fleet.service = Service::start(fleet.transport.clone(), config).await.expect("the service starts again");
    fleet.url = format!("http://{}/", fleet.service.local_addr());
    let asker = fleet.client.clone();
    let request = approval("s1", "c1", json!({"function": "bash", "arguments": {"cmd": "make test"}}), POLICY);
    let asked = tokio::spawn(async move { asker.approve(request).await });
    browser.goto(&fleet.url).await;
    browser.wait_for("#live.on").await;
    assert_eq!(browser.execute("return document.querySelector('input#token') === null").await, true, "no sign-in");
    browser.click(&browser.wait_for("article.task button.approve").await).await;
    let decision = browser.answer(asked).await.unwrap().unwrap();
    assert_eq!((decision_name(&decision), decision.decided_by.as_str()), ("approve", "alice"));

    browser.quit().await;
    fleet.stop().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
