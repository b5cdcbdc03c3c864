use super::*;

fn wire_decision() -> v1::Decision {
    v1::Decision {
        decision_id: "d1".into(),
        key: Some(v1::CallKey {
            run_id: "r".into(),
            sample_id: "s".into(),
            epoch: 2,
            tool_call_id: "c".into(),
            ..Default::default()
        }),
        kind: v1::Kind::Review.into(),
        decision: v1::DecisionKind::Modify.into(),
        modified: Some(v1::ToolCall {
            function: "fetch".into(),
            arguments_json: r#"{"url":"https://x","n":1.50}"#.into(),
            ..Default::default()
        }),
        explanation: Some("rewritten".into()),
        metadata_json: r#"{"score":1}"#.into(),
        approver: "vault".into(),
        step: Some(1),
        trail: vec![
            v1::StepAnswer {
                approver: "auto".into(),
                decision: v1::DecisionKind::Escalate.into(),
                decided_by: "w".into(),
                ..Default::default()
            },
            v1::StepAnswer {
                step: Some(1),
                approver: "vault".into(),
                decision: v1::DecisionKind::Modify.into(),
                explanation: Some("rewritten".into()),
                metadata_json: r#"{"score":1}"#.into(),
                decided_by: "vault".into(),
                ..Default::default()
            },
        ],
        policy_digest: "abc".into(),
        decided_by: "vault".into(),
        requested_at_unix_ms: 10,
        decided_at_unix_ms: 20,
        origin: None,
    }
}

/// The bytes `airlock request` has always printed for this decision.
const PRINTED: &str = concat!(
    r#"{"decision":"modify","explanation":"rewritten","approver":"vault","step":1,"trail":["#,
    r#"{"approver":"auto","decision":"escalate","explanation":null,"decided_by":"w"},"#,
    r#"{"approver":"vault","decision":"modify","explanation":"rewritten","decided_by":"vault","metadata":{"score":1}}],"#,
    r#""decided_by":"vault","decision_id":"d1","policy_digest":"abc","requested_at_unix_ms":10,"decided_at_unix_ms":20,"#,
    r#""modified":{"function":"fetch","arguments":{"url":"https://x","n":1.50}},"metadata":{"score":1}}"#,
);

#[test]
fn a_decision_prints_as_it_always_has() {
    let view = DecisionView::from_wire(&wire_decision());
    assert_eq!(serde_json::to_string(&view).unwrap(), PRINTED);
    assert_eq!(serde_json::from_str::<DecisionView>(PRINTED).unwrap(), view);
}

#[test]
fn a_bare_decision_prints_nulls_and_leaves_out_what_it_lacks() {
    let view = DecisionView::from_wire(&v1::Decision::default());
    assert_eq!(
        serde_json::to_string(&view).unwrap(),
        concat!(
            r#"{"decision":"unspecified","explanation":null,"approver":null,"step":null,"trail":[],"decided_by":"","#,
            r#""decision_id":"","policy_digest":"","requested_at_unix_ms":0,"decided_at_unix_ms":0}"#
        )
    );
}

#[test]
fn a_record_is_the_decision_then_kind_key_and_origin() {
    let record = DecisionRecord::from_wire(&wire_decision());
    let text = serde_json::to_string(&record).unwrap();
    let expected = format!(
        "{},{}}}",
        &PRINTED[..PRINTED.len() - 1],
        concat!(
            r#""kind":"review","key":{"run_id":"r","sample_id":"s","epoch":2,"tool_call_id":"c"},"#,
            r#""origin":{"run_id":"","eval_id":"","task":"","sample_id":"","epoch":0,"model":"","runner_id":""}"#
        )
    );
    assert_eq!(text, expected);
    let read: DecisionRecord = serde_json::from_str(&text).unwrap();
    assert_eq!(read, record);
    assert!(read.decision.involves("vault") && read.decision.involves("w") && !read.decision.involves("x"));
}

#[test]
fn a_record_keeps_the_run_s_label_and_an_unlabelled_one_reads_as_before() {
    let mut wire = wire_decision();
    wire.origin = Some(v1::Origin { run_id: "run".into(), eval_mode: "attack".into(), ..Default::default() });
    let text = serde_json::to_string(&DecisionRecord::from_wire(&wire)).unwrap();
    assert!(text.ends_with(r#""model":"","runner_id":"","eval_mode":"attack"}}"#), "{text}");
    let read: DecisionRecord = serde_json::from_str(&text).unwrap();
    assert_eq!(EvalMode::parse(&read.origin.eval_mode), Some(EvalMode::Attack));
    assert_eq!((EvalMode::parse("honest"), EvalMode::parse("Attack")), (Some(EvalMode::Honest), None));
    assert_eq!(EvalMode::Honest.as_str(), "honest");
}

#[test]
fn a_log_line_without_a_trail_is_not_a_decision() {
    assert!(serde_json::from_str::<DecisionView>(r#"{"error":{"code":"x","message":"y"}}"#).is_err());
    let minimal: DecisionView =
        serde_json::from_str(r#"{"trail":[{"approver":"human","decision":"reject"}]}"#).unwrap();
    assert_eq!(minimal.trail[0].decision, Some(Decision::Reject));
}

#[test]
fn eval_views_print_in_policy_evals_shape() {
    let failed = EvalView::bad_call("missing function");
    assert_eq!(serde_json::to_string(&failed).unwrap(), r#"{"error":"bad call: missing function"}"#);
    assert!(failed.is_failure());
    let pending = EvalView::Pending {
        pending: PendingView { step: 1, approver: "human".into() },
        trail: vec![TrailView {
            approver: "auto".into(),
            decision: Some(Decision::Escalate),
            explanation: None,
            decided_by: None,
            metadata: None,
        }],
        rendered: "rm(p='/')".into(),
    };
    assert_eq!(
        serde_json::to_string(&pending).unwrap(),
        r#"{"pending":{"step":1,"approver":"human"},"trail":[{"approver":"auto","decision":"escalate","explanation":null}],"rendered":"rm(p='/')"}"#
    );
    assert!(!pending.is_failure());
}

#[test]
fn a_refusal_prints_its_code_and_message() {
    let refused = RefusedView { error: Refusal { code: "invalid_policy".into(), message: "bad".into() } };
    assert_eq!(serde_json::to_string(&refused).unwrap(), r#"{"error":{"code":"invalid_policy","message":"bad"}}"#);
}
