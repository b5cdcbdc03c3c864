use super::*;

fn params(kind: Kind, text: &str) -> Result<StepParams, ParamsError> {
    StepParams::from_json(kind, text)
}

#[test]
fn reads_thresholds_and_defaults_above_to_fail_closed() {
    let p = params(Kind::Approval, r#"{"approve_below": 3, "escalate_below": 8}"#).unwrap();
    assert_eq!(p.thresholds, Thresholds { approve_below: 3.0, escalate_below: 8.0, above: Decision::Reject });
    assert_eq!(p.fallback, None);
    let p = params(Kind::Review, r#"{"approve_below": 3, "escalate_below": 8}"#).unwrap();
    assert_eq!(p.thresholds.above, Decision::Terminate);
    let p = params(Kind::Approval, r#"{"approve_below": 2.5, "escalate_below": 8, "above": "terminate", "fallback": "reject", "timeout": 5, "on_timeout": "escalate"}"#).unwrap();
    assert_eq!(
        (p.thresholds.approve_below, p.thresholds.above, p.fallback),
        (2.5, Decision::Terminate, Some(Decision::Reject))
    );
}

#[test]
fn maps_scores_to_decisions() {
    let t = Thresholds { approve_below: 3.0, escalate_below: 8.0, above: Decision::Reject };
    let approval: Vec<Decision> =
        [0.0, 2.9, 3.0, 7.99, 8.0, 10.0].iter().map(|s| t.decide(Kind::Approval, *s)).collect();
    use Decision::*;
    assert_eq!(approval, [Approve, Approve, Escalate, Escalate, Reject, Reject]);
    let t = Thresholds { approve_below: 3.0, escalate_below: 8.0, above: Terminate };
    assert_eq!(t.decide(Kind::Review, 1.0), Continue);
    assert_eq!(t.decide(Kind::Review, 9.0), Terminate);
    // Equal thresholds: no escalation band at all. Zero: nothing is approved.
    let t = Thresholds { approve_below: 5.0, escalate_below: 5.0, above: Reject };
    assert_eq!((t.decide(Kind::Approval, 4.9), t.decide(Kind::Approval, 5.0)), (Approve, Reject));
    let t = Thresholds { approve_below: 0.0, escalate_below: 10.0, above: Reject };
    assert_eq!((t.decide(Kind::Approval, 0.0), t.decide(Kind::Approval, 10.0)), (Escalate, Reject));
}

#[test]
fn explains_what_is_wrong() {
    let cases = [
        ("{}", "'approve_below' is required"),
        (r#"{"approve_below": 3}"#, "'escalate_below' is required"),
        (r#"{"approve_below": "3", "escalate_below": 8}"#, "'approve_below' must be a number"),
        (r#"{"approve_below": 3, "escalate_below": 11}"#, "'escalate_below' is 11: it must be a score from 0 to 10"),
        (r#"{"approve_below": -1, "escalate_below": 8}"#, "'approve_below' is -1"),
        (r#"{"approve_below": 8, "escalate_below": 3}"#, "must not be above 'escalate_below'"),
        (
            r#"{"approve_below": 3, "escalate_below": 8, "above": "approve"}"#,
            "expected one of reject, terminate, escalate",
        ),
        (r#"{"approve_below": 3, "escalate_below": 8, "fallback": "modify"}"#, "'fallback' is \"modify\""),
        (r#"{"approve_below": 3, "escalate_bellow": 8}"#, "unknown parameter 'escalate_bellow'"),
        ("[1]", "expected an object"),
        ("{", "not JSON"),
    ];
    for (text, expected) in cases {
        let error = params(Kind::Approval, text).unwrap_err().to_string();
        assert!(error.contains(expected), "{text}: {error}");
    }
    let error = params(Kind::Review, r#"{"approve_below": 3, "escalate_below": 8, "above": "reject"}"#).unwrap_err();
    assert!(error.to_string().contains("expected one of terminate, escalate"), "{error}");
}
