use airlock_policy::document::Document;

use super::*;
use crate::budget::Mode;

fn params(kind: Kind, text: &str) -> Result<StepParams, ParamsError> {
    StepParams::from_json("monitor", kind, text)
}

#[test]
fn reads_thresholds_and_defaults_above_to_fail_closed() {
    let p = params(Kind::Approval, r#"{"approve_below": 3, "escalate_below": 8}"#).unwrap();
    let thresholds = |p: StepParams| match p.rule {
        Rule::Thresholds(t) => t,
        Rule::Budget(b) => panic!("thresholds expected, not {b:?}"),
    };
    assert_eq!((p.fallback, p.share_across_epochs), (None, false));
    assert_eq!(thresholds(p), Thresholds { approve_below: 3.0, escalate_below: 8.0, above: Decision::Reject });
    let p = params(Kind::Review, r#"{"approve_below": 3, "escalate_below": 8}"#).unwrap();
    assert_eq!(thresholds(p).above, Decision::Terminate);
    let p = params(Kind::Approval, r#"{"approve_below": 2.5, "escalate_below": 8, "above": "terminate", "fallback": "reject", "share_across_epochs": true, "timeout": 5, "on_timeout": "escalate"}"#).unwrap();
    assert_eq!((p.fallback, p.share_across_epochs), (Some(Decision::Reject), true));
    let t = thresholds(p);
    assert_eq!((t.approve_below, t.above), (2.5, Decision::Terminate));
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
        (r#"{"approve_below": 3, "escalate_below": 8, "share_across_epochs": "yes"}"#, "expected true or false"),
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

#[test]
fn reads_an_audit_budget_paced_per_run_by_default_or_calibrated() {
    let p = params(Kind::Approval, r#"{"audit_budget": 0.05}"#).unwrap();
    assert_eq!(
        p.rule,
        Rule::Budget(AuditBudget {
            budget: 0.05,
            mode: Mode::Paced,
            scope: Scope::Run,
            reject_above: None,
            terminate_above: None
        })
    );
    let text = r#"{"audit_budget": 0.01, "audit_threshold": 6.31, "budget_scope": "step", "reject_above": 9, "terminate_above": 9.9, "fallback": "escalate", "timeout": 5}"#;
    let Rule::Budget(budget) = params(Kind::Approval, text).unwrap().rule else { panic!("a budget") };
    assert_eq!((budget.mode, budget.scope), (Mode::Calibrated { threshold: 6.31 }, Scope::Step));
    assert_eq!((budget.scope_key("run-1"), budget.scope.as_str()), ("*", "step"));
    // The worst end outright: terminate first, then reject; the rest is the budget's.
    assert_eq!(
        [9.95, 9.9, 9.0, 8.99].map(|s| budget.ends(s)),
        [Some(Decision::Terminate), Some(Decision::Terminate), Some(Decision::Reject), None]
    );
    let Rule::Budget(review) = params(Kind::Review, r#"{"audit_budget": 0.5, "terminate_above": 8}"#).unwrap().rule
    else {
        panic!("a budget")
    };
    assert_eq!((review.scope_key("run-1"), review.ends(8.0)), ("run-1", Some(Decision::Terminate)));
}

#[test]
fn refuses_budgets_out_of_range_and_mixed_with_thresholds() {
    let cases = [
        (r#"{"audit_budget": 0}"#, "audit_budget", "'audit_budget' is 0: it must be a share above 0 and below 1"),
        (r#"{"audit_budget": 1}"#, "audit_budget", "'audit_budget' is 1:"),
        (r#"{"audit_budget": "5%"}"#, "audit_budget", "'audit_budget' is \"5%\""),
        (r#"{"audit_budget": 0.05, "approve_below": 3}"#, "approve_below", "cannot be combined with 'audit_budget'"),
        (r#"{"audit_budget": 0.05, "above": "reject"}"#, "above", "'above' cannot be combined"),
        (
            r#"{"approve_below": 3, "escalate_below": 8, "reject_above": 9}"#,
            "reject_above",
            "'reject_above' needs 'audit_budget'",
        ),
        (r#"{"audit_threshold": 6}"#, "audit_threshold", "'audit_threshold' needs 'audit_budget'"),
        (
            r#"{"audit_budget": 0.05, "audit_threshold": 11}"#,
            "audit_threshold",
            "'audit_threshold' is 11: it must be a score",
        ),
        (r#"{"audit_budget": 0.05, "budget_scope": "sample"}"#, "budget_scope", "expected run or step"),
        (
            r#"{"audit_budget": 0.05, "reject_above": 9, "terminate_above": 8}"#,
            "terminate_above",
            "must not be below 'reject_above'",
        ),
        (
            r#"{"audit_budget": 0.05, "audit_threshold": 6, "reject_above": 6}"#,
            "reject_above",
            "must be above 'audit_threshold' (6): nothing would be escalated",
        ),
    ];
    for (text, key, expected) in cases {
        let error = params(Kind::Approval, text).unwrap_err();
        assert!(error.to_string().contains(expected), "{text}: {error}");
        assert_eq!(error.key.as_deref(), Some(key), "{text}");
    }
    let error = params(Kind::Review, r#"{"audit_budget": 0.05, "reject_above": 9}"#).unwrap_err();
    assert!(error.to_string().contains("a review cannot reject (use 'terminate_above')"), "{error}");
}

#[test]
fn policy_check_reads_monitor_steps_as_the_monitor_does_and_points_at_the_parameter() {
    let check = |text: &str| check_document(&Document::parse("policy.yaml", text).unwrap());
    let good =
        "approvers:\n  - name: monitor\n    tools: \"*\"\n    audit_budget: 0.01\n  - name: human\n    tools: \"*\"\n";
    assert_eq!(check(good), Ok(()));
    let bad = "approvers:\n  - name: monitor\n    tools: \"*\"\n    audit_budget: 0.01\n    escalate_below: 8\n";
    let error = check(bad).unwrap_err();
    assert_eq!((error.location.line, error.location.column), (5, 21), "{error}");
    assert!(
        error.message.contains("step 'monitor': monitor parameters: 'escalate_below' cannot be combined"),
        "{error}"
    );
    let review = "reviewers:\n  - name: judge\n    tools: \"*\"\n    audit_budget: 2\n";
    assert!(check(review).unwrap_err().message.contains("'audit_budget' is 2"));
    // A step named after a protocol is checked as one, at the parameter at fault.
    let protocol = "approvers:\n  - name: trusted_edit\n    tools: \"*\"\n    approve_below: 5\n    escalate_below: 8\n    edit_threshold: 6\n";
    let error = check(protocol).unwrap_err();
    assert_eq!(error.location.line, 6, "{error}");
    assert!(error.message.contains("'edit_threshold' (6) must be below 'approve_below' (5)"), "{error}");
    // The text a model sees of a reject is the policy engine's parameter, not an unknown one.
    let shown = "approvers:\n  - name: defer_to_trusted\n    tools: \"*\"\n    approve_below: 7\n    escalate_below: 9\n    defer_threshold: 4\n    different_tool: reject\n    model_explanation: \"Not run.\"\n";
    assert_eq!(check(shown), Ok(()));
    let missing = "approvers:\n  - name: resample\n    tools: \"*\"\n    audit_budget: 0.01\n";
    assert!(check(missing).unwrap_err().message.contains("'defer_threshold' is required by resample"));
    // A plugin with parameters of its own, and the built-in steps, are not monitors.
    let others = "approvers:\n  - name: scanner\n    tools: \"*\"\n    depth: 3\n  - name: auto\n    tools: \"*\"\n    decision: approve\n";
    assert_eq!(check(others), Ok(()));
}
