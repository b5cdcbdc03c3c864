//! The worker's engine without a fleet: what `airlock policy check` and `airlock policy
//! eval` do with a policy file and calls.

use std::path::Path;

use airlock_policy::chain::{ChainState, Input, Policy};
use airlock_policy::document::{Document, PolicyError};
use airlock_policy::{Call, Kind, render};
use airlock_records::view::EvalView;

/// Why a policy file does not check.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckError {
    /// It does not parse or compile.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// It has no chain to compile.
    #[error("{0}: the policy has neither an 'approvers:' nor a 'reviewers:' list")]
    Empty(String),
}

/// Parses the policy document `text` (named `source_name` in errors), reads the settings files
/// it names relative to `dir` (see [`crate::policies::read_settings`]), and compiles each chain
/// it has, approval first.
pub fn check(source_name: &str, text: &str, dir: &Path) -> Result<Vec<Policy>, CheckError> {
    let document = load(source_name, text, dir)?;
    let kinds = [(Kind::Approval, document.approvers.is_some()), (Kind::Review, document.reviewers.is_some())];
    let policies = kinds
        .into_iter()
        .filter(|(_, present)| *present)
        .map(|(kind, _)| Policy::compile(&document, kind))
        .collect::<Result<Vec<_>, _>>()?;
    if policies.is_empty() {
        return Err(CheckError::Empty(source_name.to_owned()));
    }
    Ok(policies)
}

/// Parses a policy document read from a file in `dir` and reads the settings files it names.
pub fn load(source_name: &str, text: &str, dir: &Path) -> Result<Document, PolicyError> {
    let mut document = Document::parse(source_name, text)?;
    crate::policies::read_settings(&mut document, dir)?;
    Ok(document)
}

/// What the built-in steps of `policy` make of one line of Inspect ToolCall JSON: a decision,
/// the external step the chain would wait for, or an error.
pub fn eval_line<'a>(policy: &'a Policy, line: &str, output: Option<&str>) -> EvalView<'a> {
    let call = match Call::from_json_str(line) {
        Ok(call) => call,
        Err(e) => return EvalView::bad_call(e),
    };
    let rendered = render::format_function_call(&call);
    let input = Input { call: &call, message: "", output, metadata: None };
    let verdict = policy.evaluate_rendered(&input, &rendered, ChainState::default());
    EvalView::from_verdict(policy, verdict, rendered)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use airlock_records::view::PendingView;

    use super::*;

    const POLICY: &str = "approvers:\n  - name: auto\n    tools: ls\n  - name: human\n    tools: rm\n    pool: ops\n";

    #[test]
    fn check_compiles_each_chain_present_or_says_there_is_none() {
        let policies = check("p.yaml", POLICY, Path::new(".")).unwrap();
        assert_eq!(policies.iter().map(Policy::kind).collect::<Vec<_>>(), [Kind::Approval]);
        let error = check("p.yaml", "{}", Path::new(".")).unwrap_err();
        assert_eq!(error.to_string(), "p.yaml: the policy has neither an 'approvers:' nor a 'reviewers:' list");
        assert!(matches!(check("p.yaml", "approvers: 3", Path::new(".")), Err(CheckError::Policy(_))));
    }

    #[test]
    fn a_line_is_decided_pending_or_a_bad_call() {
        let policy = Policy::parse("p", POLICY, Kind::Approval).unwrap();
        let EvalView::Decided(decided) = eval_line(&policy, r#"{"function": "ls", "arguments": {}}"#, None) else {
            panic!("decided by auto")
        };
        assert_eq!((decided.decision, decided.approver.as_deref()), (airlock_policy::Decision::Approve, Some("auto")));
        // Names are the policy's, not copies.
        assert!(matches!(decided.approver, Some(Cow::Borrowed(_))));
        assert!(matches!(decided.trail[0].approver, Cow::Borrowed(_)));
        let EvalView::Pending { pending, .. } = eval_line(&policy, r#"{"function": "rm"}"#, None) else {
            panic!("waits for the human")
        };
        assert_eq!(pending, PendingView { step: 1, approver: "human".into() });
        assert!(eval_line(&policy, "[]", None).is_failure());
    }
}
