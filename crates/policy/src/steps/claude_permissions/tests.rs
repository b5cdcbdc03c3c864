use serde_json::{Value, json};

use super::*;
use crate::call::Call;

fn step(params: Value) -> ClaudePermissions {
    let Value::Object(params) = params else { panic!("params must be a mapping") };
    ClaudePermissions::from_params(&params).unwrap_or_else(|e| panic!("{e}"))
}

fn decide(step: &ClaudePermissions, tool: &str, input: Value) -> Decision {
    let Value::Object(arguments) = input else { panic!("input must be a mapping") };
    let call = Call { id: "toolu_1".into(), function: tool.into(), arguments };
    let subject = Subject { call: &call, rendered: "", kind: Kind::Approval, message: "", output: None };
    step.decide(&subject).decision
}

fn bash(step: &ClaudePermissions, line: &str) -> Decision {
    decide(step, "Bash", json!({ "command": line }))
}

#[test]
fn smoke() {
    let s = step(json!({"allow": ["Bash(git status:*)"], "deny": ["Bash(rm:*)"]}));
    assert_eq!(bash(&s, "git status"), Decision::Approve);
    assert_eq!(bash(&s, "git status; rm -rf /"), Decision::Reject);
}
