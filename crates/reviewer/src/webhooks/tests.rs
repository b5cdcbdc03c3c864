use super::*;
use crate::fixtures::human;
use crate::task::Verdict;
use airlock_policy::Decision;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn endpoint(url: &str, pools: Pools, format: Format, events: &[EventKind]) -> Endpoint {
    Endpoint { url: url.parse().unwrap(), pools, secret: SECRET.parse().unwrap(), format, events: events.to_vec() }
}

fn decided(by: &str, decision: Decision) -> Task {
    let verdict = Verdict { decision, explanation: "fine".into(), decided_by: by.into(), decided_at: 2_000 };
    Task { state: State::Decided(verdict), ..human("ops", "s1", "c1", false, 0).pending("t1", 1_000) }
}

#[test]
fn a_slack_body_names_the_pool_the_call_and_links_to_the_task() {
    let public: PublicUrl = "https://review.example.com".parse().unwrap();
    let task = human("ops", "s1", "c1", false, 0).pending("t1", 1_000);
    let created = TaskEvent::of(&task, Some(&public)).slack(EventKind::Created);
    assert_eq!(
        created.text,
        "A call waits for a person in pool ops: bash({\"cmd\": \"rm -r build\"})\n\
         <https://review.example.com/#task-t1|Open the task>"
    );
    assert_eq!(serde_json::to_value(&created).unwrap(), serde_json::json!({ "text": created.text }));

    // Without a public URL there is no link; a decision names who made it.
    let alice = TaskEvent::of(&decided("alice", Decision::Approve), None).slack(EventKind::Decided);
    assert_eq!(alice.text, "alice decided approve in pool ops: bash({\"cmd\": \"rm -r build\"})");
    let timeout = TaskEvent::of(&decided(DECIDED_BY_TIMEOUT, Decision::Reject), None).slack(EventKind::Expired);
    assert_eq!(timeout.text, "No one answered in time in pool ops, so reject: bash({\"cmd\": \"rm -r build\"})");

    // A warning names when the task expires; a move, the pool it goes to.
    let mut waiting = human("ops", "s1", "c1", false, 1_614_265_330_007).pending("t1", 1_000);
    let expiring = TaskEvent::of(&waiting, None).slack(EventKind::Expiring);
    assert_eq!(
        expiring.text,
        "A call in pool ops expires at 2021-02-25T15:02:10.007Z and no one has answered it: \
         bash({\"cmd\": \"rm -r build\"})"
    );
    waiting.human.reroute_to = "oncall".into();
    let verdict = Verdict {
        decision: Decision::Escalate,
        explanation: "moves".into(),
        decided_by: "reroute".into(),
        decided_at: 2_000,
    };
    let moved = TaskEvent::of(&Task { state: State::Decided(verdict), ..waiting }, None);
    assert_eq!((moved.rerouted_to.as_deref(), moved.rerouted_from.as_deref()), (Some("oncall"), None));
    assert_eq!(
        moved.slack(EventKind::Rerouted).text,
        "No one answered in time in pool ops, so the call moves to pool oncall: bash({\"cmd\": \"rm -r build\"})"
    );
    let mut arrived = human("oncall", "s1", "c1", false, 0);
    arrived.human.rerouted_from = "ops".into();
    assert_eq!(
        TaskEvent::of(&arrived.pending("t2", 3_000), None).slack(EventKind::Created).text,
        "A call waits for a person in pool oncall, no one in pool ops having answered in time: \
         bash({\"cmd\": \"rm -r build\"})"
    );
}

#[test]
fn a_long_call_is_shortened_in_slack() {
    let event =
        TaskEvent { call: "é".repeat(CALL_CHARS + 5), ..TaskEvent::of(&decided("alice", Decision::Approve), None) };
    let text = event.slack(EventKind::Created).text;
    assert!(text.ends_with(&format!("{}…", "é".repeat(CALL_CHARS))), "{text}");
}

#[test]
fn only_the_endpoints_of_the_pool_and_event_get_a_webhook_each_with_its_own_id() {
    let webhooks = Webhooks {
        endpoints: vec![
            endpoint("http://a.test/ops", Pools::Only(vec!["ops".into()]), Format::Standard, &EventKind::ALL),
            endpoint("http://b.test/all", Pools::All, Format::Slack, &[EventKind::Created]),
            endpoint("http://c.test/sec", Pools::Only(vec!["security".into()]), Format::Standard, &EventKind::ALL),
        ],
        retry: RetryPolicy::default(),
        slack: None,
    };
    let task = human("ops", "s1", "c1", false, 0).pending("t1", 1_000);
    let created = webhooks.announce(EventKind::Created, &task, None);
    let endpoints: Vec<&str> = created.iter().map(|w| w.endpoint.as_str()).collect();
    assert_eq!(endpoints, ["http://a.test/ops", "http://b.test/all"]);
    assert_ne!(created[0].id, created[1].id);
    let standard: serde_json::Value = serde_json::from_slice(&created[0].body).unwrap();
    assert_eq!(standard["type"], "task.created");
    assert_eq!(standard["data"]["task_id"], "t1");
    assert_eq!(standard["data"]["pool"], "ops");
    assert!(standard["data"].get("decided_by").is_none());

    let kind = Webhooks::decision_kind(DECIDED_BY_TIMEOUT);
    let expired = webhooks.announce(kind, &decided(DECIDED_BY_TIMEOUT, Decision::Reject), None);
    assert_eq!(expired.len(), 1);
    let standard: serde_json::Value = serde_json::from_slice(&expired[0].body).unwrap();
    assert_eq!(standard["type"], "task.expired");
    assert_eq!(standard["data"]["decision"], "reject");
}

#[test]
fn the_webhooks_file_reads_secrets_from_files_and_the_environment() {
    let dir = std::env::temp_dir().join(format!("airlock-webhooks-{}", crate::auth::random_hex::<6>()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ops.secret"), format!("{SECRET}\n")).unwrap();
    let file = dir.join("webhooks.yaml");
    std::fs::write(
        &file,
        "- url: https://hooks.example.com/ops\n  pools: [ops]\n  secret: {file: ops.secret}\n  events: [task.created]\n\
         - url: https://chat.example.com/x\n  pools: \"*\"\n  secret: {env: CHAT_SECRET}\n  format: slack\n",
    )
    .unwrap();
    let env = |name: &str| (name == "CHAT_SECRET").then(|| SECRET.to_owned());
    let endpoints = load(&file, env).unwrap();
    assert_eq!(endpoints.len(), 2);
    assert_eq!((&endpoints[0].pools, endpoints[0].format), (&Pools::Only(vec!["ops".into()]), Format::Standard));
    assert_eq!(endpoints[0].events, [EventKind::Created]);
    assert_eq!((&endpoints[1].pools, endpoints[1].format), (&Pools::All, Format::Slack));
    assert_eq!(endpoints[1].events, EventKind::ALL);

    let missing = load(&file, |_| None).unwrap_err().to_string();
    assert!(missing.contains("CHAT_SECRET"), "{missing}");
    std::fs::write(&file, "- url: https://x.test\n  pools: ops\n  secret: {env: X}\n").unwrap();
    assert!(load(&file, env).unwrap_err().to_string().contains("\"*\""));
    std::fs::remove_dir_all(dir).unwrap();
}
