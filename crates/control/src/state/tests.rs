use airlock_contract::v1::{self, ControlResponse, control_event::Event};
use airlock_policy::Kind;
use airlock_policy::chain::Policy;
use airlock_policy::control::{Control, Response};

use super::*;

fn control(sections: &str) -> Control {
    let text = format!("approvers:\n  - name: auto\n    tools: \"*\"\n{sections}");
    Policy::parse("p.yaml", &text, Kind::Approval).unwrap().control().clone()
}

fn key(run: &str, sample: &str, call: &str) -> v1::CallKey {
    v1::CallKey {
        run_id: run.into(),
        sample_id: sample.into(),
        epoch: 1,
        tool_call_id: call.into(),
        tenant: String::new(),
    }
}

fn entry(event: Event) -> v1::ControlEvent {
    v1::ControlEvent { at_unix_ms: 1, by: "alice".into(), event: Some(event) }
}

fn outcome(sample: &str, call: &str, denied: bool) -> v1::ControlEvent {
    entry(Event::Outcome(v1::CallOutcome { key: Some(key("r1", sample, call)), denied }))
}

fn switch(run: &str, tenant: &str, response: ControlResponse) -> v1::ControlEvent {
    entry(Event::RunSwitch(v1::RunSwitch {
        run: Some(v1::RunRef { run_id: run.into(), tenant: tenant.into() }),
        response: response.into(),
        reason: "caught exfiltration".into(),
        ..Default::default()
    }))
}

fn incident(run: &str, decision: &str) -> v1::ControlEvent {
    entry(Event::Incident(v1::Incident {
        key: Some(key(run, "s1", "c1")),
        marked: decision.into(),
        note: String::new(),
    }))
}

#[test]
fn nothing_applies_to_a_run_the_log_never_named() {
    let state = ControlState::new();
    assert_eq!(state.response(&key("r1", "s1", "c1"), &control("")), None);
}

#[test]
fn three_rejections_in_a_row_trip_the_breaker_of_that_sample_only() {
    let control = control("breaker:\n  rejections_in_a_row: 3\n");
    let mut state = ControlState::new();
    for call in ["c1", "c2"] {
        state.apply(&outcome("s1", call, true));
    }
    state.apply(&outcome("s1", "c3", false));
    for call in ["c4", "c5"] {
        state.apply(&outcome("s1", call, true));
    }
    assert_eq!(state.response(&key("r1", "s1", "c6"), &control), None, "an approval broke the run of rejections");
    // A decision sent again for the same call counts once.
    state.apply(&outcome("s1", "c5", true));
    assert_eq!(state.response(&key("r1", "s1", "c6"), &control), None);
    state.apply(&outcome("s1", "c6", true));
    let controlled = state.response(&key("r1", "s1", "c7"), &control).expect("tripped");
    assert_eq!(controlled.response, Response::Human { pool: "default".into() });
    assert!(controlled.why.contains("3 rejection(s) in a row, 5 in all"), "{}", controlled.why);
    assert_eq!(state.response(&key("r1", "s2", "c1"), &control), None, "another sample");
}

#[test]
fn rejections_per_sample_count_across_approvals() {
    let control = control("breaker:\n  rejections_per_sample: 2\n  then: terminate\n");
    let mut state = ControlState::new();
    for (call, denied) in [("c1", true), ("c2", false), ("c3", true)] {
        state.apply(&outcome("s1", call, denied));
    }
    assert_eq!(state.response(&key("r1", "s1", "c4"), &control).unwrap().response, Response::Terminate);
}

#[test]
fn incidents_bring_the_runs_response_once_enough_are_marked_and_a_resume_clears_them() {
    let control = control("incident:\n  after: 2\n  then: terminate\n");
    let mut state = ControlState::new();
    state.apply(&incident("r1", "d1"));
    state.apply(&incident("r1", "d1"));
    assert_eq!(state.response(&key("r1", "s9", "c1"), &control), None, "one decision marked twice is one incident");
    state.apply(&incident("r1", "d2"));
    assert_eq!(state.response(&key("r1", "s9", "c1"), &control).unwrap().response, Response::Terminate);
    assert_eq!(state.response(&key("r2", "s9", "c1"), &control), None, "another run");
    state.apply(&switch("r1", "", ControlResponse::None));
    assert_eq!(state.response(&key("r1", "s9", "c1"), &control), None);
}

#[test]
fn a_switch_by_hand_wins_and_names_who_threw_it() {
    let control = control("breaker:\n  rejections_in_a_row: 1\n  then: terminate\n");
    let mut state = ControlState::new();
    state.apply(&outcome("s1", "c1", true));
    state.apply(&switch("r1", "", ControlResponse::Human));
    let controlled = state.response(&key("r1", "s1", "c2"), &control).unwrap();
    assert_eq!(controlled.response, Response::Human { pool: "default".into() });
    assert_eq!(controlled.why, "run r1 was switched by alice: caught exfiltration");
}

#[test]
fn the_stricter_of_incidents_and_breaker_applies() {
    let control = control("breaker:\n  rejections_in_a_row: 1\n  then: terminate\nincident:\n  then: human\n");
    let mut state = ControlState::new();
    state.apply(&incident("r1", "d1"));
    state.apply(&outcome("s1", "c1", true));
    assert_eq!(state.response(&key("r1", "s1", "c2"), &control).unwrap().response, Response::Terminate);
    assert_eq!(
        state.response(&key("r1", "s2", "c1"), &control).unwrap().response,
        Response::Human { pool: "default".into() }
    );
}

#[test]
fn a_switch_reaches_only_the_tenant_whose_run_it_names() {
    let control = control("");
    let mut state = ControlState::new();
    state.apply(&switch("r1", "acme", ControlResponse::Terminate));
    assert_eq!(state.response(&key("r1", "s1", "c1"), &control), None, "the same run id without a tenant");
    let theirs = v1::CallKey { tenant: "acme".into(), ..key("r1", "s1", "c1") };
    assert_eq!(state.response(&theirs, &control).unwrap().response, Response::Terminate);
}

#[test]
fn runs_read_back_their_switch_and_incidents_until_a_resume() {
    let mut state = ControlState::new();
    assert_eq!(state.runs().count(), 0);
    state.apply(&incident("r1", "t1"));
    state.apply(&incident("r1", "t1"));
    state.apply(&switch("r2", "acme", ControlResponse::Terminate));
    let r1 = state.run("", "r1").expect("named by an incident");
    assert_eq!((r1.tenant, r1.run_id, r1.switch), ("", "r1", None));
    assert_eq!(r1.incidents.iter().collect::<Vec<_>>(), ["t1"], "one task marked twice");
    let r2 = state.run("acme", "r2").expect("named by a switch");
    let switched = r2.switch.expect("a switch holds");
    assert_eq!((&switched.response, switched.by.as_str()), (&Switch::Terminate, "alice"));
    assert!(state.run("", "r2").is_none(), "another tenant's run of the same id");
    let mut named: Vec<_> = state.runs().map(|run| (run.tenant, run.run_id)).collect();
    named.sort();
    assert_eq!(named, [("", "r1"), ("acme", "r2")]);

    state.apply(&switch("r1", "", ControlResponse::None));
    let r1 = state.run("", "r1").expect("still named");
    assert!(r1.switch.is_none() && r1.incidents.is_empty(), "a resume clears both");
}

#[test]
fn a_switch_by_hand_answers_whatever_the_policy_and_a_pause_names_the_pool_given() {
    let mut state = ControlState::new();
    assert_eq!(state.switched(&key("r1", "s1", "c1"), "ops"), None);
    state.apply(&incident("r1", "t1"));
    assert_eq!(state.switched(&key("r1", "s1", "c1"), "ops"), None, "an incident is no switch");
    state.apply(&switch("r1", "", ControlResponse::Human));
    let paused = state.switched(&key("r1", "s1", "c1"), "ops").expect("paused");
    assert_eq!(paused.response, Response::Human { pool: "ops".into() });
    assert_eq!(paused.why, "run r1 was switched by alice: caught exfiltration");
    state.apply(&switch("r1", "", ControlResponse::Terminate));
    assert_eq!(state.switched(&key("r1", "s1", "c1"), "ops").unwrap().response, Response::Terminate);
}
