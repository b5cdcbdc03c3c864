use airlock_contract::v1;
use serde_json::json;

use super::*;
use crate::message::Id;

fn decision(kind: v1::DecisionKind, explanation: Option<&str>) -> Result<v1::Decision, ClientError> {
    let mut decision = v1::Decision { explanation: explanation.map(str::to_owned), ..Default::default() };
    decision.set_decision(kind);
    Ok(decision)
}

#[test]
fn approve_forwards_the_call_as_asked() {
    assert_eq!(approval_of(decision(v1::DecisionKind::Approve, None)), Approval::Forward(None));
}

#[test]
fn modify_forwards_the_modified_arguments() {
    let mut modified = decision(v1::DecisionKind::Modify, None).unwrap();
    modified.modified =
        Some(v1::ToolCall { function: "w".into(), arguments_json: r#"{"path":"/tmp"}"#.into(), ..Default::default() });
    let Approval::Forward(Some(arguments)) = approval_of(Ok(modified)) else { panic!("a forward") };
    assert_eq!(arguments["path"], "/tmp");
}

#[test]
fn a_modify_without_a_readable_call_fails_closed() {
    assert!(matches!(approval_of(decision(v1::DecisionKind::Modify, None)), Approval::Refuse(_)));
    let mut bad = decision(v1::DecisionKind::Modify, None).unwrap();
    bad.modified = Some(v1::ToolCall { arguments_json: "[1]".into(), ..Default::default() });
    assert!(matches!(approval_of(Ok(bad)), Approval::Refuse(_)));
}

#[test]
fn reject_refuses_with_the_explanation_the_model_may_see() {
    let refused = approval_of(decision(v1::DecisionKind::Reject, Some("Not this one.")));
    assert_eq!(refused, Approval::Refuse("Not this one.".into()));
    assert_eq!(approval_of(decision(v1::DecisionKind::Reject, None)), Approval::Refuse(REJECTED.into()));
}

#[test]
fn terminate_ends_the_session_and_says_why() {
    let ended = approval_of(decision(v1::DecisionKind::Terminate, Some("Stop.")));
    assert_eq!(ended, Approval::Terminate("Stop.".into()));
}

#[test]
fn an_answer_no_approval_chain_gives_or_no_answer_at_all_refuses_the_call() {
    for kind in [v1::DecisionKind::Continue, v1::DecisionKind::Escalate, v1::DecisionKind::Unspecified] {
        assert!(matches!(approval_of(decision(kind, None)), Approval::Refuse(_)), "{kind:?}");
    }
    assert!(matches!(approval_of(Err(ClientError::Closed)), Approval::Refuse(_)));
}

#[test]
fn a_review_passes_on_continue_and_withholds_or_ends_otherwise() {
    assert_eq!(review_of(decision(v1::DecisionKind::Continue, None)), Review::Pass);
    assert_eq!(review_of(decision(v1::DecisionKind::Terminate, Some("Leak."))), Review::Terminate("Leak.".into()));
    assert_eq!(review_of(decision(v1::DecisionKind::Reject, None)), Review::Replace(WITHHELD.into()));
    assert!(matches!(review_of(Err(ClientError::Closed)), Review::Replace(_)));
}

#[test]
fn a_call_is_asked_as_the_sessions_run_with_the_request_id_as_call_id() {
    let call = crate::tools::ToolCall::from_params(Some(&json!({"name": "rm", "arguments": {"p": "/"}}))).unwrap();
    let annotations = json!({"destructiveHint": true});
    let asked = Asked::new("mcp-1", "s", &Id::number(4), &call, annotations.as_object());
    assert_eq!((asked.key.run_id.as_str(), asked.key.sample_id.as_str(), asked.key.epoch), ("mcp-1", "s", 1));
    assert_eq!((asked.key.tool_call_id.as_str(), asked.call.function.as_str()), ("4", "rm"));
    assert_eq!(asked.call.arguments["p"], "/");
    let view = annotations_view(asked.annotations.as_ref().unwrap());
    assert_eq!(view.context.unwrap().content, "destructiveHint: true");
}
