use airlock_records::view::Refusal;
use airlock_records::view::{ModifiedView, TrailView};

use super::*;
use crate::decisions::Failure;

fn pre_tool_use() -> Value {
    json!({
        "session_id": "sess-1",
        "transcript_path": "/home/u/.claude/projects/p/sess-1.jsonl",
        "cwd": "/work/project",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls -la", "description": "List"},
        "tool_use_id": "toolu_1",
        "effort": {"level": "high"},
    })
}

fn view(decision: Decision, explanation: Option<&str>) -> DecisionView {
    DecisionView {
        decision: Some(decision),
        explanation: explanation.map(str::to_owned),
        approver: Some("auto".into()),
        step: Some(0),
        trail: Vec::new(),
        decided_by: String::new(),
        decision_id: String::new(),
        policy_digest: String::new(),
        requested_at_unix_ms: 0,
        decided_at_unix_ms: 0,
        timed_out: false,
        modified: None,
        metadata: None,
    }
}

fn decided(view: DecisionView) -> Outcome {
    Outcome::Decided(Box::new(view))
}

fn entry(approver: &str, decision: Decision) -> TrailView<'static> {
    TrailView {
        approver: approver.to_owned().into(),
        decision: Some(decision),
        explanation: None,
        decided_by: None,
        timed_out: false,
        metadata: None,
    }
}

#[test]
fn a_pre_tool_use_input_is_an_approval_of_its_call_in_its_session() {
    let input = parse(pre_tool_use().to_string().as_bytes()).unwrap();
    assert_eq!(input.event, Event::PreToolUse);
    let submission = input.submission(PolicyChoice::Named("agents".into()), Duration::from_secs(7));
    assert_eq!(submission.kind, Kind::Approval);
    assert_eq!(submission.call.id, "toolu_1");
    assert_eq!(submission.call.function, "Bash");
    assert_eq!(submission.call.arguments, *json!({"command": "ls -la", "description": "List"}).as_object().unwrap());
    assert_eq!(submission.origin, Origin { run: "sess-1".into(), sample: MAIN_AGENT.into(), epoch: 1 });
    assert_eq!(submission.timeout, Some(Duration::from_secs(7)));
    let request = submission.to_request();
    let Some(v1::request::Body::Approval(approval)) = request.body else { panic!("an approval") };
    let metadata: Value = serde_json::from_str(&approval.call.unwrap().metadata_json).unwrap();
    assert_eq!(metadata, json!({"cwd": "/work/project", "permission_mode": "default"}));
    let context = approval.view.and_then(|v| v.context).unwrap().content;
    assert!(context.contains("cwd: /work/project") && context.contains("permission mode: default"), "{context}");
}

#[test]
fn a_post_tool_use_input_is_a_review_with_the_response_as_output_and_a_sub_agent_as_sample() {
    let mut input = pre_tool_use();
    input["hook_event_name"] = "PostToolUse".into();
    input["agent_id"] = "agent-7".into();
    input["tool_response"] = json!({"stdout": "a\nb", "stderr": "", "interrupted": false});
    let input = parse(input.to_string().as_bytes()).unwrap();
    let submission = input.submission(PolicyChoice::Named("agents".into()), Duration::from_secs(7));
    assert_eq!(submission.kind, Kind::Review);
    assert_eq!(submission.origin.sample, "agent-7");
    assert_eq!(serde_json::from_str::<Value>(&submission.output).unwrap()["stdout"], "a\nb");
}

#[test]
fn inputs_without_what_a_request_needs_are_refused_with_the_field() {
    let cases: [(&str, Value, &str); 6] = [
        ("hook_event_name", json!("Stop"), "hook_event_name"),
        ("hook_event_name", Value::Null, "hook_event_name"),
        ("tool_input", json!("ls"), "tool_input"),
        ("tool_use_id", json!(""), "tool_use_id"),
        ("session_id", json!(3), "session_id"),
        ("tool_name", Value::Null, "tool_name"),
    ];
    for (key, value, field) in cases {
        let mut input = pre_tool_use();
        input[key] = value;
        let invalid = parse(input.to_string().as_bytes()).unwrap_err();
        assert_eq!(invalid.field.as_deref(), Some(field), "{key}: {}", invalid.message);
    }
    assert!(parse(b"[1]").unwrap_err().unreadable);
    assert!(parse(b"{").unwrap_err().unreadable);
}

#[test]
fn the_event_of_a_body_is_read_even_when_the_rest_is_unusable() {
    assert_eq!(Event::of(br#"{"hook_event_name": "PostToolUse"}"#), Some(Event::PostToolUse));
    assert_eq!(Event::of(br#"{"hook_event_name": "PreToolUse", "tool_input": 1}"#), Some(Event::PreToolUse));
    assert_eq!(Event::of(b"not json"), None);
    assert_eq!(Event::of(br#"{"hook_event_name": "Stop"}"#), None);
}

#[test]
fn approve_allows_and_reject_denies_with_the_explanation_the_model_may_see() {
    let allow = answer(Event::PreToolUse, &decided(view(Decision::Approve, None)), Escalated::Deny);
    assert_eq!(allow, json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}));
    let deny = answer(Event::PreToolUse, &decided(view(Decision::Reject, Some("Not here."))), Escalated::Deny);
    assert_eq!(
        deny,
        json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "Not here."
        }})
    );
}

#[test]
fn modify_allows_the_modified_input_and_a_modify_without_one_denies() {
    let mut modified = view(Decision::Modify, Some("Safer."));
    modified.modified = Some(ModifiedView { function: "Bash".into(), arguments: json!({"command": "ls"}) });
    let output = answer(Event::PreToolUse, &decided(modified), Escalated::Deny);
    assert_eq!(output["hookSpecificOutput"]["permissionDecision"], "allow");
    assert_eq!(output["hookSpecificOutput"]["updatedInput"], json!({"command": "ls"}));
    let output = answer(Event::PreToolUse, &decided(view(Decision::Modify, None)), Escalated::Deny);
    assert_eq!(output["hookSpecificOutput"]["permissionDecision"], "deny");
}

#[test]
fn terminate_denies_and_stops_the_session() {
    let output = answer(Event::PreToolUse, &decided(view(Decision::Terminate, Some("Enough."))), Escalated::Ask);
    assert_eq!(output["hookSpecificOutput"]["permissionDecision"], "deny");
    assert_eq!((&output["continue"], &output["stopReason"]), (&json!(false), &json!("Enough.")));
    let output = answer(Event::PostToolUse, &decided(view(Decision::Terminate, Some("Enough."))), Escalated::Deny);
    assert_eq!(output, json!({"decision": "block", "reason": "Enough.", "continue": false, "stopReason": "Enough."}));
}

#[test]
fn only_a_chain_whose_every_step_escalated_asks_and_only_when_the_hook_says_so() {
    let mut escalated = view(Decision::Reject, Some("No approval granted for tool Bash"));
    escalated.approver = Some(POLICY.into());
    escalated.trail = vec![entry("monitor", Decision::Escalate), entry(POLICY, Decision::Reject)];
    let ask = answer(Event::PreToolUse, &decided(escalated.clone()), Escalated::Ask);
    assert_eq!(ask["hookSpecificOutput"]["permissionDecision"], "ask");
    let deny = answer(Event::PreToolUse, &decided(escalated.clone()), Escalated::Deny);
    assert_eq!(deny["hookSpecificOutput"]["permissionDecision"], "deny");
    // Nothing matched: the policy's reject has no escalation behind it.
    let mut unmatched = escalated.clone();
    unmatched.trail = vec![entry(POLICY, Decision::Reject)];
    let deny = answer(Event::PreToolUse, &decided(unmatched), Escalated::Ask);
    assert_eq!(deny["hookSpecificOutput"]["permissionDecision"], "deny");
    // A step that rejected is a refusal, whatever the hook asks.
    let refused = view(Decision::Reject, Some("No."));
    let deny = answer(Event::PreToolUse, &decided(refused), Escalated::Ask);
    assert_eq!(deny["hookSpecificOutput"]["permissionDecision"], "deny");
}

#[test]
fn a_review_continues_silently_and_blocks_with_the_reason_otherwise() {
    assert_eq!(answer(Event::PostToolUse, &decided(view(Decision::Continue, None)), Escalated::Deny), json!({}));
    let block = answer(Event::PostToolUse, &decided(view(Decision::Reject, Some("Leaked."))), Escalated::Deny);
    assert_eq!(block, json!({"decision": "block", "reason": "Leaked."}));
}

#[test]
fn no_decision_fails_closed() {
    let failures = [
        Outcome::Refused(Refusal { code: "unknown_policy".into(), message: "no policy x".into() }),
        Outcome::Failed(Failure::Unavailable("the broker is away".into())),
        Outcome::Failed(Failure::Restarted),
    ];
    for failure in &failures {
        let deny = answer(Event::PreToolUse, failure, Escalated::Ask);
        assert_eq!(deny["hookSpecificOutput"]["permissionDecision"], "deny", "{failure:?}");
        let reason = deny["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap();
        assert!(reason.starts_with("Airlock could not decide this call ("), "{reason}");
        assert_eq!(answer(Event::PostToolUse, failure, Escalated::Deny)["decision"], "block");
    }
    let mut unspecified = view(Decision::Approve, None);
    unspecified.decision = None;
    let deny = answer(Event::PreToolUse, &decided(unspecified), Escalated::Deny);
    assert_eq!(deny["hookSpecificOutput"]["permissionDecision"], "deny");
    assert_eq!(fail_closed(None, "why"), json!({"decision": "block", "reason": "why"}));
}

#[test]
fn the_wait_is_the_query_s_timeout_or_the_default_and_never_past_the_longest() {
    let (default, max) = (Duration::from_secs(30), Duration::from_secs(60));
    let query = |timeout: Option<f64>| HookQuery { policy: "p".into(), timeout, escalated: Escalated::Deny };
    assert_eq!(query(None).wait(default, max), Ok(default));
    assert_eq!(query(Some(5.5)).wait(default, max), Ok(Duration::from_secs_f64(5.5)));
    assert_eq!(query(Some(1e300)).wait(default, max), Ok(max));
    for refused in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(query(Some(refused)).wait(default, max).unwrap_err().field.as_deref(), Some("timeout"));
    }
}
