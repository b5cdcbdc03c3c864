use serde_json::json;
use std::time::Duration;

use super::*;

fn call(function: &str, arguments: serde_json::Value) -> Call {
    Call::from_json(&json!({"id": "c1", "function": function, "arguments": arguments})).unwrap()
}

fn decide<'p>(policy: &'p Policy, call: &Call) -> Verdict<'p> {
    policy.evaluate(&Input { call, message: "", output: Some("out"), metadata: None }, ChainState::default())
}

fn decided(verdict: Verdict<'_>) -> Outcome {
    match verdict {
        Verdict::Decided(outcome) => outcome,
        other => panic!("expected a decision, got {other:?}"),
    }
}

fn names(outcome: &Outcome) -> Vec<(&str, Decision)> {
    outcome.trail.iter().map(|t| (&*t.approver, t.answer.decision)).collect()
}

const APPROVAL: &str = r#"
approvers:
  - name: auto
    tools: "computer(action='key'"
    decision: escalate
  - name: human
    tools: "computer"
  - name: auto
    tools: bash, python
    decision: escalate
  - name: auto
    tools: "read_file"
    decision: modify
"#;

#[test]
fn approval_defaults_are_inspects() {
    let policy = Policy::parse("p.yaml", APPROVAL, Kind::Approval).unwrap();
    let none = decided(decide(&policy, &call("web", json!({}))));
    assert_eq!(
        (none.decision, none.explanation.as_deref()),
        (Decision::Reject, Some("No approvers registered for tool web"))
    );
    assert_eq!(names(&none), [("policy", Decision::Reject)]);

    let escalated = decided(decide(&policy, &call("bash", json!({"cmd": "ls"}))));
    assert_eq!(escalated.explanation.as_deref(), Some("No approval granted for tool bash"));
    assert_eq!(names(&escalated), [("auto", Decision::Escalate), ("policy", Decision::Reject)]);
    assert_eq!(escalated.approver.as_deref(), Some("policy"));
}

#[test]
fn modify_without_a_call_is_a_reject_recorded_as_modify() {
    let policy = Policy::parse("p.yaml", APPROVAL, Kind::Approval).unwrap();
    let outcome = decided(decide(&policy, &call("read_file", json!({"path": "/etc"}))));
    assert_eq!((outcome.decision, outcome.explanation.as_deref()), (Decision::Reject, Some(MODIFY_WITHOUT_CALL)));
    assert_eq!(names(&outcome), [("auto", Decision::Modify)]);
}

#[test]
fn external_steps_suspend_and_resume_the_chain() {
    let policy = Policy::parse("p.yaml", APPROVAL, Kind::Approval).unwrap();
    let c = call("computer", json!({"action": "key", "text": "x"}));
    let input = Input { call: &c, message: "m", output: None, metadata: None };
    let Verdict::Pending { step, state } = policy.evaluate(&input, ChainState::default()) else { panic!() };
    assert_eq!(step.index(), 1);
    assert_eq!(state.trail.len(), 1);
    let outcome = decided(policy.resume(&input, state.clone(), step, Answer::new(Decision::Approve, "ok")));
    assert_eq!(
        (outcome.decision, outcome.approver.as_deref(), outcome.step),
        (Decision::Approve, Some("human"), Some(1))
    );
    assert_eq!(names(&outcome), [("auto", Decision::Escalate), ("human", Decision::Approve)]);

    // A human answer outside the offered choices fails closed to terminate.
    let outcome = decided(policy.resume(&input, state.clone(), step, Answer::new(Decision::Modify, "edit")));
    assert_eq!(outcome.decision, Decision::Terminate);
    // A human escalation not offered is terminate as well; offered, it goes on to policy's reject.
    let outcome = decided(policy.resume(&input, state, step, Answer::escalate("?")));
    assert_eq!(outcome.decision, Decision::Terminate);
}

#[test]
fn only_an_external_step_is_handed_out_to_take_an_answer() {
    let policy = Policy::parse("p.yaml", APPROVAL, Kind::Approval).unwrap();
    let human = policy.external_step(1).expect("the human step is external");
    assert_eq!((human.index(), &**human.name()), (1, "human"));
    assert!(matches!(human.external(), ExternalStep::Human(_)));
    assert!(policy.external_step(0).is_none(), "auto is built in");
    assert!(policy.external_step(4).is_none(), "there is no step 4");
}

#[test]
fn modify_to_another_function_fails_the_sample() {
    let text = "approvers:\n  - name: monitor\n    tools: bash\n";
    let policy = Policy::parse("p.yaml", text, Kind::Approval).unwrap();
    let c = call("bash", json!({"cmd": "rm -rf /"}));
    let input = Input { call: &c, message: "", output: None, metadata: None };
    let Verdict::Pending { step, state } = policy.evaluate(&input, ChainState::default()) else { panic!() };
    let mut answer = Answer::new(Decision::Modify, "safer");
    answer.modified = Some(call("python", json!({"code": "pass"})));
    assert!(matches!(
        policy.resume(&input, state.clone(), step, answer),
        Verdict::Failed(ChainError::ModifiedFunction { .. })
    ));
    let mut answer = Answer::new(Decision::Modify, "safer");
    answer.modified = Some(call("bash", json!({"cmd": "rm -ri /tmp/x"})));
    let outcome = decided(policy.resume(&input, state, step, answer));
    assert_eq!(outcome.modified.unwrap().arguments["cmd"], "rm -ri /tmp/x");
}

#[test]
fn review_defaults_are_inspects() {
    let text = "reviewers:\n  - name: auto\n    tools: bash\n    decision: escalate\n  - name: pattern\n    tools: python\n    output: true\n    regex: 'secret'\n";
    let policy = Policy::parse("p.yaml", text, Kind::Review).unwrap();
    let none = decided(decide(&policy, &call("web", json!({}))));
    assert_eq!((none.decision, none.approver.clone(), none.trail.len()), (Decision::Continue, None, 0));
    let escalated = decided(decide(&policy, &call("bash", json!({"cmd": "ls"}))));
    assert_eq!(escalated.explanation.as_deref(), Some("No reviewer took the escalation for tool bash"));
    assert_eq!(names(&escalated), [("auto", Decision::Escalate), ("policy", Decision::Continue)]);
    let caught = policy.evaluate(
        &Input {
            call: &call("python", json!({"code": "x"})),
            message: "",
            output: Some("the secret is 42"),
            metadata: None,
        },
        ChainState::default(),
    );
    assert_eq!(decided(caught).decision, Decision::Terminate);
}

#[test]
fn bad_steps_are_located() {
    let err = Policy::parse(
        "p.yaml",
        "approvers:\n  - name: human\n    tools: x\n    choices: [approve, maybe]\n",
        Kind::Approval,
    )
    .unwrap_err();
    assert_eq!((err.location.line, err.location.column), (4, 14), "{err}");
    assert!(err.message.contains("unknown decision 'maybe'"), "{err}");
    let policy =
        Policy::parse("p.yaml", "approvers:\n  - name: auto\n    tools: [ok, 'f(x=[b-a]']\n", Kind::Approval).unwrap();
    assert!(
        policy.warnings()[0].starts_with("p.yaml:3:17: glob 'f(x=[b-a]*' can never match"),
        "{:?}",
        policy.warnings()
    );
    let err = Policy::parse("p.yaml", "approvers:\n  - name: pattern\n    tools: x\n    regex: '('\n", Kind::Approval)
        .unwrap_err();
    assert!(err.message.contains("bad regular expression"), "{err}");
    let err =
        Policy::parse("p.yaml", "approvers:\n  - name: human\n    tools: x\n    choices: [modify]\n", Kind::Approval)
            .unwrap_err();
    assert!(err.message.contains("cannot have 'modify' as the only choice"), "{err}");
}

#[test]
fn human_approvals_are_a_whole_number_from_one() {
    let human = |extra: &str| {
        Policy::parse("p.yaml", &format!("approvers:\n  - name: human\n    tools: x\n{extra}"), Kind::Approval)
    };
    let approvals = |policy: &Policy| match &policy.steps()[0].step {
        Step::External(ExternalStep::Human(human)) => human.approvals,
        other => panic!("not a human step: {other}"),
    };
    let default = human("").unwrap();
    assert_eq!(approvals(&default), 1);
    assert!(!default.to_string().contains("approvals"), "{default}");
    let two = human("    approvals: 2\n").unwrap();
    assert_eq!(approvals(&two), 2);
    assert!(
        two.to_string().contains("human (pool: default, choices: approve, reject, terminate, approvals: 2)"),
        "{two}"
    );
    for (value, what) in
        [("0", "not 0"), ("-1", "not -1"), ("1.5", "not 1.5"), ("'2'", "not a string"), ("[2]", "not a list")]
    {
        let err = human(&format!("    approvals: {value}\n")).unwrap_err();
        assert_eq!((err.location.line, err.location.column), (4, 16), "{value}: {err}");
        assert!(err.message.contains("'approvals' must be a whole number of reviewers from 1"), "{err}");
        assert!(err.message.contains(what), "{value}: {err}");
    }
}

#[test]
fn a_human_offers_modify_only_when_listed_with_a_warning() {
    let human = |choices: &str| {
        Policy::parse("p.yaml", &format!("approvers:\n  - name: human\n    tools: bash\n{choices}"), Kind::Approval)
    };
    let choices = |policy: &Policy| match &policy.steps()[0].step {
        Step::External(ExternalStep::Human(human)) => human.choices.clone(),
        other => panic!("not a human step: {other}"),
    };
    let plain = human("").unwrap();
    assert!(!choices(&plain).contains(&Decision::Modify) && plain.warnings().is_empty());
    let editing = human("    choices: [approve, modify, reject]\n").unwrap();
    assert_eq!(choices(&editing), [Decision::Approve, Decision::Modify, Decision::Reject]);
    assert_eq!(editing.warnings().len(), 1, "{:?}", editing.warnings());
    assert!(editing.warnings()[0].starts_with("p.yaml:2:5: 'modify' lets a person edit"), "{:?}", editing.warnings());
    assert!(editing.warnings()[0].contains("Airlock extension"));
    let err = human("    choices: [modify, modify]\n").unwrap_err();
    assert!(err.message.contains("cannot have 'modify' as the only choice"), "{err}");
    let err = Policy::parse(
        "p.yaml",
        "reviewers:\n  - name: human\n    tools: bash\n    choices: [continue, modify]\n",
        Kind::Review,
    )
    .unwrap_err();
    assert!(err.message.contains("'modify' is not a choice review allows"), "{err}");
}

/// A person's modify resumes the chain with the modified call; one that names another function
/// (which the reviewer service never sends) fails the sample all the same.
#[test]
fn a_human_modify_resumes_with_the_arguments_and_never_another_function() {
    let text = "approvers:\n  - name: human\n    tools: bash\n    choices: [approve, modify]\n";
    let policy = Policy::parse("p.yaml", text, Kind::Approval).unwrap();
    let original = call("bash", json!({"cmd": "rm -rf /"}));
    let input = Input { call: &original, message: "", output: None, metadata: None };
    let Verdict::Pending { step, state } = policy.evaluate(&input, ChainState::default()) else { panic!() };
    let mut answer = Answer::new(Decision::Modify, "narrower");
    answer.modified = Some(call("bash", json!({"cmd": "rm -rf ./build"})));
    let outcome = decided(policy.resume(&input, state.clone(), step, answer));
    assert_eq!(outcome.decision, Decision::Modify);
    assert_eq!(outcome.modified.unwrap().arguments["cmd"], "rm -rf ./build");
    let mut answer = Answer::new(Decision::Modify, "another tool");
    answer.modified = Some(call("python", json!({"code": "print(1)"})));
    assert!(matches!(policy.resume(&input, state, step, answer), Verdict::Failed(ChainError::ModifiedFunction { .. })));
}

/// Every limit of [`crate::limits`] is a policy error at the offending node, never a panic.
#[test]
fn values_past_the_limits_are_located_errors() {
    let long_glob = format!("\"{}\"", "?".repeat(crate::limits::MAX_GLOB_CHARS));
    let cases = [
        ("approvers:\n  - name: human\n    tools: x\n    timeout: 1e20\n", (4, 14), "'timeout' must be"),
        ("approvers:\n  - name: human\n    tools: x\n    timeout: .nan\n", (4, 14), "non-finite float"),
        ("approvers:\n  - name: human\n    tools: x\n    timeout: .inf\n", (4, 14), "non-finite float"),
        ("approvers:\n  - name: human\n    tools: x\n    timeout: -1\n", (4, 14), "'timeout' must be"),
        ("approvers:\n  - name: monitor\n    tools: x\n    timeout: 1e300\n", (4, 14), "'timeout' must be"),
        ("approvers:\n  - name: \"#\"\n    tools: x\n", (2, 11), "step name '#' must be"),
        ("approvers:\n  - name: a.b\n    tools: x\n", (2, 11), "step name 'a.b' must be"),
        ("approvers:\n  - name: human\n    tools: x\n    pool: \"*\"\n", (4, 11), "pool '*' must be"),
        ("approvers:\n  - name: human\n    tools: x\n    pool: a/b\n", (4, 11), "pool 'a/b' must be"),
        ("approvers:\n  - name: auto\n    tools: \"a\\0b\"\n", (3, 12), "NUL"),
        ("{\"approvers\": [{\"name\": \"auto\", \"tools\": \"x\", \"note\": \"\\u0000\"}]}", (1, 55), "NUL"),
    ];
    for (text, (line, column), message) in cases {
        let err = Policy::parse("p.yaml", text, Kind::Approval).unwrap_err();
        assert_eq!((err.location.line, err.location.column), (line, column), "{text}: {err}");
        assert!(err.message.contains(message), "{text}: {err}");
    }
    let text = format!("approvers:\n  - name: auto\n    tools: {long_glob}\n");
    let err = Policy::parse("p.yaml", &text, Kind::Approval).unwrap_err();
    assert_eq!(err.location.line, 3, "{err}");
    assert!(err.message.contains("longer than the 65536 allowed"), "{err}");
}

/// A call whose matching runs past the budget is rejected (a review terminated) by `policy`.
#[test]
fn matching_past_the_budget_fails_closed() {
    let slow = format!("*{}b", "[a]".repeat(4_000));
    for (kind, section, fail_closed) in
        [(Kind::Approval, "approvers", Decision::Reject), (Kind::Review, "reviewers", Decision::Terminate)]
    {
        let text = format!("{section}:\n  - name: auto\n    tools: \"{slow}\"\n    decision: approve\n");
        let text = if kind == Kind::Review { text.replace("approve", "continue") } else { text };
        let policy = Policy::parse("p.yaml", &text, kind).unwrap();
        let outcome = decided(decide(&policy, &call("f", json!({"x": "a".repeat(20_000)}))));
        assert_eq!(outcome.decision, fail_closed);
        assert_eq!(outcome.approver.as_deref(), Some(POLICY));
        assert!(outcome.explanation.unwrap().contains("ran past its budget"));
        assert!(policy.matching("f(x='b')").is_ok(), "a short call is judged");
    }
}

const SILENT: &str = r#"
approvers:
  - name: pattern
    tools: bash
    regex: "rm -rf"
    explanation: destructive command
    model_explanation: This action was not approved.
  - name: auto
    tools: "bash(cmd='ls"
    model_explanation: never shown, ls is approved
  - name: auto
    tools: "read_file"
    decision: modify
    model_explanation: Not approved.
  - name: human
    tools: bash
    model_explanation: A person did not approve this.
"#;

/// The model is shown a step's `model_explanation` when that step rejects or terminates; the
/// trail keeps the step's own reason, and nothing else changes.
#[test]
fn a_model_explanation_is_what_the_model_is_shown_of_a_step_s_reject() {
    let policy = Policy::parse("p.yaml", SILENT, Kind::Approval).unwrap();
    let rejected = decided(decide(&policy, &call("bash", json!({"cmd": "rm -rf /"}))));
    assert_eq!(
        (rejected.decision, rejected.explanation.as_deref()),
        (Decision::Reject, Some("This action was not approved."))
    );
    assert_eq!(rejected.trail[0].answer.explanation.as_deref(), Some("destructive command"));

    let approved = decided(decide(&policy, &call("bash", json!({"cmd": "ls /"}))));
    assert_eq!((approved.decision, approved.explanation.as_deref()), (Decision::Approve, Some("Automatic decision.")));

    // A modify without a call is the step's reject: the fixed text too.
    let modified = decided(decide(&policy, &call("read_file", json!({"path": "/etc"}))));
    assert_eq!((modified.decision, modified.explanation.as_deref()), (Decision::Reject, Some("Not approved.")));

    // A person's answer: a reject and a terminate are shown the fixed text, an approve its own.
    let c = call("bash", json!({"cmd": "make"}));
    let input = Input { call: &c, message: "", output: None, metadata: None };
    let Verdict::Pending { step, state } = policy.evaluate(&input, ChainState::default()) else { panic!() };
    for (answer, shown) in [
        (Decision::Reject, "A person did not approve this."),
        (Decision::Terminate, "A person did not approve this."),
        (Decision::Approve, "looks fine"),
    ] {
        let outcome = decided(policy.resume(&input, state.clone(), step, Answer::new(answer, "looks fine")));
        assert_eq!((outcome.decision, outcome.explanation.as_deref()), (answer, Some(shown)));
        assert_eq!(outcome.trail.last().unwrap().answer.explanation.as_deref(), Some("looks fine"));
    }
    // Inspect's defaults are the policy's, not a step's: they say what they always said.
    let none = decided(decide(&policy, &call("web", json!({}))));
    assert_eq!(none.explanation.as_deref(), Some("No approvers registered for tool web"));
    // `policy check` shows it beside its step.
    let shown = policy.to_string();
    assert!(shown.contains("tools: bash*  model_explanation: \"This action was not approved.\"\n"), "{shown}");
}

#[test]
fn a_model_explanation_ends_a_review_silently_and_is_no_step_s_parameter() {
    let text = "reviewers:\n  - name: pattern\n    tools: bash\n    output: true\n    regex: 'password='\n    \
                explanation: secret in output\n    model_explanation: Stopped.\n  - name: monitor\n    tools: python\n    \
                model_explanation: Stopped.\n    approve_below: 3\n    escalate_below: 8\n    above: terminate\n";
    let policy = Policy::parse("p.yaml", text, Kind::Review).unwrap();
    let input =
        Input { call: &call("bash", json!({"cmd": "env"})), message: "", output: Some("password=x"), metadata: None };
    let outcome = decided(policy.evaluate(&input, ChainState::default()));
    assert_eq!((outcome.decision, outcome.explanation.as_deref()), (Decision::Terminate, Some("Stopped.")));
    assert_eq!(outcome.trail[0].answer.explanation.as_deref(), Some("secret in output"));
    // The step's parameters (a monitor's task carries them) leave the chain's own out.
    let monitor = &policy.steps()[1];
    assert_eq!(monitor.model_explanation.as_deref(), Some("Stopped."));
    let keys: Vec<&str> = monitor.params.keys().map(String::as_str).collect();
    assert_eq!(keys, ["approve_below", "escalate_below", "above"], "the step's own, in their order");
}

#[test]
fn a_model_explanation_that_is_not_text_is_a_located_error() {
    for (step, value, message) in [
        ("auto", "42", "'model_explanation' must be a string, not a number"),
        ("human", "[a]", "'model_explanation' must be a string, not a list"),
        ("monitor", "''", "'model_explanation' must say something"),
        ("pattern", "'   '", "'model_explanation' must say something"),
        ("bash_allowlist", "{a: 1}", "'model_explanation' must be a string, not a mapping"),
    ] {
        let text = format!("approvers:\n  - name: {step}\n    tools: x\n    model_explanation: {value}\n");
        let err = Policy::parse("p.yaml", &text, Kind::Approval).unwrap_err();
        assert_eq!((err.location.line, err.location.column), (4, 24), "{step}: {err}");
        assert!(err.message.contains(&format!("step '{step}': {message}")), "{step}: {err}");
    }
    let long = "x".repeat(crate::limits::MAX_MODEL_EXPLANATION_CHARS + 1);
    let text = format!("approvers:\n  - name: auto\n    tools: x\n    model_explanation: {long}\n");
    let err = Policy::parse("p.yaml", &text, Kind::Approval).unwrap_err();
    assert!(err.message.contains("more than the 4000 allowed"), "{err}");
    // A misspelt parameter is told which ones the step takes, this one among them.
    let err = Policy::parse(
        "p.yaml",
        "approvers:\n  - name: auto\n    tools: x\n    model_explaination: x\n",
        Kind::Approval,
    )
    .unwrap_err();
    assert!(err.message.contains("(it takes: decision, model_explanation)"), "{err}");
}

/// An answer given by a deadline decides as timed out, in the outcome and in its trail entry;
/// a refusal does not.
#[test]
fn a_decision_from_a_deadline_is_timed_out_and_a_refusal_is_not() {
    let policy = Policy::parse("p.yaml", SILENT, Kind::Approval).unwrap();
    let c = call("bash", json!({"cmd": "make"}));
    let input = Input { call: &c, message: "", output: None, metadata: None };
    let Verdict::Pending { step, state } = policy.evaluate(&input, ChainState::default()) else { panic!() };
    let timed_out =
        Answer { timed_out: true, ..Answer::new(Decision::Reject, "No human decision before the deadline") };
    let outcome = decided(policy.resume(&input, state.clone(), step, timed_out.clone()));
    assert!(outcome.timed_out && outcome.trail.last().unwrap().answer.timed_out);
    assert_eq!(outcome.explanation.as_deref(), Some("A person did not approve this."));
    let refused = decided(policy.resume(&input, state.clone(), step, Answer::new(Decision::Reject, "no")));
    assert!(!refused.timed_out && !refused.trail.last().unwrap().answer.timed_out);
    assert!(!decided(decide(&policy, &call("bash", json!({"cmd": "rm -rf /"})))).timed_out);

    // A monitor whose timeout escalates leaves Inspect's default reject to say nobody answered.
    let monitored = Policy::parse("p.yaml", "approvers:\n  - name: monitor\n    tools: x\n", Kind::Approval).unwrap();
    let c = call("x", json!({}));
    let input = Input { call: &c, message: "", output: None, metadata: None };
    let Verdict::Pending { step, state } = monitored.evaluate(&input, ChainState::default()) else { panic!() };
    let escalated = Answer { decision: Decision::Escalate, ..timed_out.clone() };
    let outcome = decided(monitored.resume(&input, state.clone(), step, escalated));
    assert_eq!(
        (outcome.decision, outcome.approver.as_deref(), outcome.timed_out),
        (Decision::Reject, Some(POLICY), true)
    );
    let outcome = decided(monitored.resume(&input, state, step, Answer::escalate("not mine")));
    assert_eq!((outcome.decision, outcome.timed_out), (Decision::Reject, false));

    // An answer outside the choices fails closed, still marked as the timeout it was.
    let offered =
        Policy::parse("p.yaml", "approvers:\n  - name: human\n    tools: x\n    choices: [approve]\n", Kind::Approval)
            .unwrap();
    let c = call("x", json!({}));
    let input = Input { call: &c, message: "", output: None, metadata: None };
    let Verdict::Pending { step, state } = offered.evaluate(&input, ChainState::default()) else { panic!() };
    let outcome = decided(offered.resume(&input, state, step, timed_out));
    assert_eq!((outcome.decision, outcome.timed_out), (Decision::Terminate, true));
}

#[test]
fn a_pattern_matches_the_tools_metadata_and_escalates_without_it() {
    let text = "approvers:\n  - name: pattern\n    tools: '*'\n    metadata: readOnlyHint\n    regex: '^true$'\n    \
                decision: approve\n  - name: pattern\n    tools: '*'\n    metadata: destructiveHint\n    regex: '^true$'\n    \
                decision: reject\n    explanation: destructive\n";
    let policy = Policy::parse("p.yaml", text, Kind::Approval).unwrap();
    let asked = |annotations: serde_json::Value| {
        let call = call("tool", json!({"readOnlyHint": true}));
        let metadata = annotations.as_object().cloned();
        let input = Input { call: &call, message: "", output: None, metadata: metadata.as_ref() };
        decided(policy.evaluate(&input, ChainState::default())).decision
    };
    assert_eq!(asked(json!({"readOnlyHint": true})), Decision::Approve);
    assert_eq!(asked(json!({"readOnlyHint": false, "destructiveHint": true})), Decision::Reject);
    // An argument named like an annotation is the model's, not the tool's: nothing matches.
    assert_eq!(asked(serde_json::Value::Null), Decision::Reject);
    assert_eq!(asked(json!({"readOnlyHint": "true"})), Decision::Approve, "a string is matched as its text");
}

#[test]
fn a_pattern_takes_one_of_argument_metadata_and_output() {
    for extra in ["argument: a\n    metadata: b", "metadata: b\n    output: true"] {
        let text = format!("reviewers:\n  - name: pattern\n    tools: '*'\n    regex: x\n    {extra}\n");
        let error = Policy::parse("p.yaml", &text, Kind::Review).unwrap_err().to_string();
        assert!(error.contains("give one of 'argument', 'metadata' and 'output'"), "{error}");
    }
}

#[test]
fn a_human_step_reroutes_to_each_pool_of_to_in_order_before_its_timeout() {
    let human = |extra: &str| {
        Policy::parse(
            "p.yaml",
            &format!("approvers:\n  - name: human\n    tools: x\n    pool: ops\n{extra}"),
            Kind::Approval,
        )
    };
    let step = |policy: &Policy| match &policy.steps()[0].step {
        Step::External(ExternalStep::Human(human)) => human.clone(),
        other => panic!("not a human step: {other}"),
    };
    let plain = step(&human("").unwrap());
    assert_eq!((plain.reroute.is_none(), plain.warn_before, plain.next_pool("ops")), (true, None, None));
    let policy =
        human("    timeout: 30\n    reroute_after: 10\n    to: [oncall, leads]\n    warn_before: 2\n").unwrap();
    let moving = step(&policy);
    let reroute = moving.reroute.clone().unwrap();
    assert_eq!((reroute.after, reroute.to), (Duration::from_secs(10), vec!["oncall".to_owned(), "leads".to_owned()]));
    assert_eq!(moving.warn_before, Some(Duration::from_secs(2)));
    assert_eq!(
        [moving.next_pool("ops"), moving.next_pool("oncall"), moving.next_pool("leads"), moving.next_pool("elsewhere")],
        [Some("oncall"), Some("leads"), None, None]
    );
    assert!(policy.to_string().contains("then after 10s each: oncall, leads"), "{policy}");
    let one = step(&human("    reroute_after: 1.5\n    to: oncall\n").unwrap());
    assert_eq!(
        one.next_pool("ops"),
        Some("oncall"),
        "a lone pool is a list of one, and no timeout leaves the deadline"
    );

    for (extra, (line, column), says) in [
        ("    to: oncall\n", (5, 9), "'to' needs 'reroute_after'"),
        ("    reroute_after: 5\n", (5, 20), "'reroute_after' needs 'to'"),
        ("    reroute_after: 0\n    to: oncall\n", (5, 20), "'reroute_after' must be a number of seconds above 0"),
        ("    reroute_after: 5\n    to: []\n", (6, 9), "'to' must name at least one pool"),
        ("    reroute_after: 5\n    to: ['']\n", (6, 9), "pool"),
        ("    reroute_after: 5\n    to: [on.call]\n", (6, 9), "letters, digits"),
        ("    reroute_after: 5\n    to: [oncall, ops]\n", (6, 9), "pool 'ops' is on the step's route twice"),
        ("    reroute_after: 5\n    to: [oncall, oncall]\n", (6, 9), "pool 'oncall' is on the step's route twice"),
        ("    timeout: 10\n    reroute_after: 10\n    to: oncall\n", (6, 20), "must be shorter than the 'timeout'"),
        ("    timeout: 10\n    reroute_after: 5\n    to: [a, b]\n", (6, 20), "the 2 pool(s) of 'to'"),
        ("    timeout: 10\n    warn_before: 10\n", (6, 18), "'warn_before' must be shorter than the 'timeout'"),
        ("    warn_before: x\n", (5, 18), "'warn_before' must be a number"),
    ] {
        let err = human(extra).unwrap_err();
        assert_eq!((err.location.line, err.location.column), (line, column), "{extra}: {err}");
        assert!(err.message.contains(says), "{extra}: {err}");
    }
}
