use airlock_contract::v1;
use airlock_policy::Decision;
use serde_json::{Value, json};

use super::api::{POST_MESSAGE, UPDATE};
use super::blocks::{DECIDE_ACTION, OPEN_ACTION, decided, escape, pending};
use super::signature::{Unsigned, payload_id, verify};
use super::*;
use crate::auth::Reviewer;
use crate::fixtures::{calling, explained, human};
use crate::site::PublicUrl;
use crate::task::{DECIDED_BY_REROUTE, DECIDED_BY_TIMEOUT, State, Task, Verdict};
use crate::webhooks::{EventKind, Webhooks};
use std::sync::Arc;

// Slack's worked example of "Verifying requests from Slack".
const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const TIMESTAMP: &str = "1531420618";
const BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&\
                    channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&\
                    response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&\
                    trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
const SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

fn at(seconds: i64) -> i64 {
    TIMESTAMP.parse::<i64>().unwrap() + seconds
}

#[test]
fn slacks_worked_example_is_accepted_within_five_minutes_either_way() {
    let check = |now| verify(SECRET, Some(TIMESTAMP), Some(SIGNATURE), BODY.as_bytes(), now);
    assert_eq!(check(at(0)), Ok(()));
    assert_eq!(check(at(300)), Ok(()));
    assert_eq!(check(at(-300)), Ok(()));
    assert_eq!(check(at(301)), Err(Unsigned::Stale));
    assert_eq!(check(at(-301)), Err(Unsigned::Stale));
}

#[test]
fn a_changed_body_timestamp_secret_or_signature_is_refused() {
    let now = at(0);
    let changed = BODY.replace("roadrunner", "coyote");
    assert_eq!(verify(SECRET, Some(TIMESTAMP), Some(SIGNATURE), changed.as_bytes(), now), Err(Unsigned::Forged));
    assert_eq!(verify(SECRET, Some("1531420619"), Some(SIGNATURE), BODY.as_bytes(), now), Err(Unsigned::Forged));
    assert_eq!(verify("another", Some(TIMESTAMP), Some(SIGNATURE), BODY.as_bytes(), now), Err(Unsigned::Forged));
    let v1 = SIGNATURE.replacen("v0=", "v1=", 1);
    assert_eq!(verify(SECRET, Some(TIMESTAMP), Some(&v1), BODY.as_bytes(), now), Err(Unsigned::Forged));
    let upper = SIGNATURE.to_uppercase();
    assert_eq!(verify(SECRET, Some(TIMESTAMP), Some(&upper), BODY.as_bytes(), now), Err(Unsigned::Forged));
    assert_eq!(verify(SECRET, None, Some(SIGNATURE), BODY.as_bytes(), now), Err(Unsigned::Missing));
    assert_eq!(verify(SECRET, Some(TIMESTAMP), None, BODY.as_bytes(), now), Err(Unsigned::Missing));
    assert_eq!(verify(SECRET, Some("soon"), Some(SIGNATURE), BODY.as_bytes(), now), Err(Unsigned::BadTimestamp));
}

#[test]
fn a_payload_is_remembered_by_its_timestamp_and_body() {
    let id = payload_id(TIMESTAMP, BODY.as_bytes());
    assert_eq!(id, payload_id(TIMESTAMP, BODY.as_bytes()));
    assert_eq!(id.len(), 64);
    assert_ne!(id, payload_id("1531420619", BODY.as_bytes()));
    assert_ne!(id, payload_id(TIMESTAMP, b"payload=%7B%7D"));
}

fn public() -> PublicUrl {
    "https://review.example.com".parse().unwrap()
}

fn texts(message: &Value) -> String {
    message["blocks"].to_string()
}

fn buttons(message: &Value) -> Vec<Value> {
    let actions = message["blocks"].as_array().unwrap().iter().find(|b| b["type"] == "actions");
    actions.map(|a| a["elements"].as_array().unwrap().clone()).unwrap_or_default()
}

#[test]
fn a_waiting_task_shows_the_call_why_and_a_button_per_choice_with_a_link() {
    let task = explained("ops", "s1", "c1").pending("t1", 1_000);
    let message = pending(&task, Some(&public()));
    assert_eq!(message["text"], "A call waits for a person in pool ops");
    let shown = texts(&message);
    // The call as Inspect's default view renders it, without the fence's language.
    assert!(shown.contains("```\\nbash(cmd='rm -r build')\\n```"), "{shown}");
    // Why it is here: the monitor's answer before, and what the model said.
    assert!(shown.contains("*monitor*"), "{shown}");
    assert!(shown.contains("The model said: Cleaning up."), "{shown}");
    let buttons = buttons(&message);
    let ids: Vec<&str> = buttons.iter().map(|b| b["action_id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            format!("{DECIDE_ACTION}approve").as_str(),
            &format!("{DECIDE_ACTION}reject"),
            &format!("{DECIDE_ACTION}terminate"),
            OPEN_ACTION
        ]
    );
    assert!(buttons[..3].iter().all(|b| b["value"] == "t1"));
    assert_eq!((buttons[0]["style"].as_str(), buttons[1]["style"].as_str()), (Some("primary"), Some("danger")));
    assert_eq!(buttons[3]["url"], "https://review.example.com/#task-t1");
    assert_eq!(buttons[3]["text"]["text"], "Open in Airlock");
}

#[test]
fn modify_is_left_to_the_ui_and_two_approvals_are_announced() {
    let mut incoming = human("ops", "s1", "c1", false, 0);
    incoming.human.choices.insert(1, v1::DecisionKind::Modify.into());
    incoming.human.approvals = 2;
    let task = incoming.pending("t1", 1_000);
    let message = pending(&task, Some(&public()));
    assert!(texts(&message).contains("needs 2 approvals"), "{message}");
    let offered = buttons(&message);
    assert!(offered.iter().all(|b| b["action_id"] != format!("{DECIDE_ACTION}modify")), "{message}");
    assert_eq!(offered.last().unwrap()["text"]["text"], "Modify or open in Airlock");
    // Without a public URL there is no link.
    assert!(buttons(&pending(&task, None)).iter().all(|b| b["action_id"] != OPEN_ACTION));
}

#[test]
fn text_from_the_task_is_escaped_for_mrkdwn_and_cut_once_escaped() {
    assert_eq!(escape("<!channel> & <@U1|x>\u{202e}", 100), "&lt;!channel&gt; &amp; &lt;@U1|x&gt;‹U+202E›");
    // Cut with `…` within the limit, never inside an escape.
    assert_eq!(escape("a<b", 6), "a&lt;b");
    assert_eq!(escape("a<bc", 6), "a&lt;…");
    assert_eq!(escape("a<bc", 5), "a…");
    let arguments = json!({"cmd": format!("echo <!here> && {}", "<".repeat(5000))}).to_string();
    let task = calling("ops", "run", "s1", "c1", "bash", &arguments, 0).pending("t1", 1_000);
    let message = pending(&task, None);
    let shown = texts(&message);
    assert!(!shown.contains("<!here>") && shown.contains("&lt;!here&gt; &amp;&amp;"), "{shown}");
    for block in message["blocks"].as_array().unwrap().iter().filter(|b| b["type"] == "section") {
        assert!(block["text"]["text"].as_str().unwrap().chars().count() <= 3000, "{block}");
    }
    assert!(shown.contains("&lt;…"), "{shown}");
}

fn decided_by(by: &str, decision: Decision) -> Task {
    let verdict = Verdict { decision, explanation: "a <b> dir".into(), decided_by: by.into(), decided_at: 2_000 };
    Task { state: State::Decided(verdict), ..human("ops", "s1", "c1", false, 0).pending("t1", 1_000) }
}

/// The message of a decided `task`.
fn decision(task: &Task, public_url: Option<&PublicUrl>) -> Value {
    let State::Decided(verdict) = &task.state else { panic!("{task:?}") };
    decided(task, verdict, public_url)
}

#[test]
fn a_decided_task_names_who_decided_how_and_why_without_decision_buttons() {
    let message = decision(&decided_by("alice", Decision::Approve), Some(&public()));
    assert_eq!(message["text"], "alice decided approve in pool `ops`");
    let shown = texts(&message);
    assert!(shown.contains("*alice* decided *approve*") && shown.contains("Why: a &lt;b&gt; dir"), "{shown}");
    let ids: Vec<Value> = buttons(&message).iter().map(|b| b["action_id"].clone()).collect();
    assert_eq!(ids, [json!(OPEN_ACTION)]);

    let expired = decision(&decided_by(DECIDED_BY_TIMEOUT, Decision::Reject), None);
    assert!(texts(&expired).contains("*No one answered in time* in pool `ops`, so *reject*"), "{expired}");
    assert!(buttons(&expired).is_empty());

    let mut moved = decided_by(DECIDED_BY_REROUTE, Decision::Escalate);
    (moved.human.reroute_at_unix_ms, moved.human.reroute_to) = (1_500, "oncall".into());
    let moved = decision(&moved, None);
    assert_eq!(moved["text"], "No one answered in time in pool `ops`, so the call moved to pool `oncall`");
    assert!(buttons(&moved).is_empty());
}

fn slack(channels: &[(&str, &str)], users: &[(&str, &str)]) -> Slack {
    let map = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Slack::new("http://127.0.0.1:9/api/", Hidden::new("xoxb-1"), Hidden::new("s"), map(channels), map(users)).unwrap()
}

#[test]
fn tasks_of_a_pool_with_a_channel_are_posted_then_updated_with_ids_of_their_own() {
    let webhooks = Webhooks { slack: Some(Arc::new(slack(&[("ops", "C1")], &[]))), ..Webhooks::default() };
    assert!(!webhooks.is_empty());
    let task = human("ops", "s1", "c1", false, 0).pending("t1", 1_000);
    let created = webhooks.announce(EventKind::Created, &task, None);
    assert_eq!(created.len(), 1);
    assert_eq!((created[0].id.as_str(), created[0].endpoint.as_str()), ("slack_post_t1", POST_MESSAGE));
    let owed: Value = serde_json::from_slice(&created[0].body).unwrap();
    assert_eq!((owed["task_id"].as_str(), owed["message"]["channel"].as_str()), (Some("t1"), Some("C1")));

    let updated = webhooks.announce(EventKind::Decided, &decided_by("alice", Decision::Approve), None);
    assert_eq!((updated[0].id.as_str(), updated[0].endpoint.as_str()), ("slack_update_t1", UPDATE));
    let owed: Value = serde_json::from_slice(&updated[0].body).unwrap();
    assert!(owed["message"]["text"].as_str().unwrap().starts_with("alice decided approve"));

    // Another pool has no channel: nothing is owed to Slack.
    let security = human("security", "s1", "c1", false, 0).pending("t2", 1_000);
    assert!(webhooks.announce(EventKind::Created, &security, None).is_empty());
}

#[test]
fn the_slack_file_reads_its_secrets_from_the_environment_or_files() {
    let dir = std::env::temp_dir().join(format!("airlock-slack-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("signing"), "abc123\n").unwrap();
    let path = dir.join("slack.yaml");
    std::fs::write(
        &path,
        "bot_token: {env: BOT}\nsigning_secret: {file: signing}\nchannels: {ops: C1}\nusers: {U1: alice}\n",
    )
    .unwrap();
    let env = |name: &str| (name == "BOT").then(|| "xoxb-2".to_owned());
    let slack = Slack::load(&path, env).unwrap();
    assert_eq!(slack.api_url, DEFAULT_API_URL);
    assert_eq!((slack.bot_token.expose(), slack.signing_secret.expose()), ("xoxb-2", "abc123"));
    assert_eq!((slack.channel("ops"), slack.reviewer("U1"), slack.reviewer("U2")), (Some("C1"), Some("alice"), None));
    assert!(!format!("{slack:?}").contains("xoxb-2"));

    // Secrets are never inline, and a variable must be set.
    std::fs::write(&path, "bot_token: xoxb-3\nsigning_secret: {env: BOT}\nchannels: {}\n").unwrap();
    assert!(Slack::load(&path, env).is_err());
    std::fs::write(&path, "bot_token: {env: NONE}\nsigning_secret: {env: BOT}\nchannels: {}\n").unwrap();
    assert!(Slack::load(&path, env).unwrap_err().to_string().contains("NONE"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_channel_for_a_pool_not_served_or_a_user_mapped_to_nobody_is_a_problem() {
    let alice = Reviewer {
        name: "alice".into(),
        token_sha256: "0".repeat(64),
        pools: vec!["*".into()],
        admin: false,
        overrides: Vec::new(),
    };
    let reviewers = Reviewers::from_list(vec![alice]);
    let pools = vec!["ops".to_owned()];
    assert_eq!(slack(&[("ops", "C1")], &[("U1", "alice")]).problem(&pools, &reviewers), None);
    let problem = slack(&[("security", "C1")], &[]).problem(&pools, &reviewers).unwrap();
    assert!(problem.contains("security"), "{problem}");
    let problem = slack(&[], &[("U1", "bob")]).problem(&pools, &reviewers).unwrap();
    assert!(problem.contains("bob"), "{problem}");
}
