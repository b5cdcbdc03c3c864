//! A person's edit of a call: `modify`, offered only by a `human` step whose policy lists it (an
//! Airlock extension; Inspect never lets a person edit). A decision carries new arguments only,
//! never a function, so the modified call is the task's call with those arguments; the
//! worker's chain still fails the sample if an answer ever names another function.

use airlock_contract::v1;
use airlock_policy::Decision;
use airlock_policy::steps::type_name;
use serde_json::Value;

use crate::task::Task;

/// Why a decision's arguments are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModifyError {
    /// A modify without arguments.
    #[error("a modify needs 'arguments': the call's new arguments as a JSON object")]
    Missing,
    /// Arguments that are not a JSON object.
    #[error("'arguments' must be a JSON object of the call's arguments, not {0}")]
    NotAnObject(&'static str),
    /// Arguments that are not JSON at all (the UI's text field).
    #[error("the arguments are not valid JSON: {0}")]
    Invalid(String),
    /// Arguments with another decision than modify.
    #[error("'arguments' go only with a modify")]
    Unexpected,
    /// A task without a call.
    #[error("this task carries no call to modify")]
    NoCall,
}

/// Reads the UI's arguments field as JSON.
pub fn parse_arguments(text: &str) -> Result<Value, ModifyError> {
    serde_json::from_str(text).map_err(|e| ModifyError::Invalid(e.to_string()))
}

/// The call `decision` answers `task` with: for `modify`, the task's call with `arguments`,
/// which must be a JSON object; for any other decision none, and `arguments` must be absent.
pub fn modified_call(
    task: &Task,
    decision: Decision,
    arguments: Option<Value>,
) -> Result<Option<v1::ToolCall>, ModifyError> {
    if decision != Decision::Modify {
        return match arguments {
            Some(_) => Err(ModifyError::Unexpected),
            None => Ok(None),
        };
    }
    let arguments = match arguments.ok_or(ModifyError::Missing)? {
        Value::Object(arguments) => arguments,
        other => return Err(ModifyError::NotAnObject(type_name(&other))),
    };
    let call = task.call().ok_or(ModifyError::NoCall)?;
    let arguments_json = Value::Object(arguments).to_string();
    Ok(Some(v1::ToolCall { arguments_json, ..call.clone() }))
}

/// The call's arguments as the UI's editor starts with them: pretty JSON, or the text as sent
/// when it is not JSON.
pub fn editable_arguments(call: &v1::ToolCall) -> String {
    serde_json::from_str::<Value>(&call.arguments_json)
        .and_then(|value| serde_json::to_string_pretty(&value))
        .unwrap_or_else(|_| call.arguments_json.clone())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::fixtures::human;

    #[test]
    fn only_a_modify_carries_arguments_and_only_an_object() {
        let task = human("ops", "s1", "c1", false, 0).pending("t1", 0);
        let modified = modified_call(&task, Decision::Modify, Some(json!({"cmd": "ls"}))).unwrap().unwrap();
        assert_eq!((modified.function.as_str(), modified.arguments_json.as_str()), ("bash", r#"{"cmd":"ls"}"#));
        assert_eq!(modified.id, task.call().unwrap().id, "the same call, new arguments");
        assert_eq!(modified_call(&task, Decision::Modify, None), Err(ModifyError::Missing));
        for (value, what) in
            [(json!(["ls"]), "a list"), (json!("ls"), "a string"), (json!(null), "null"), (json!(3), "a number")]
        {
            assert_eq!(modified_call(&task, Decision::Modify, Some(value)), Err(ModifyError::NotAnObject(what)));
        }
        assert_eq!(modified_call(&task, Decision::Approve, Some(json!({}))), Err(ModifyError::Unexpected));
        assert_eq!(modified_call(&task, Decision::Approve, None), Ok(None));
        assert!(matches!(parse_arguments("{\"cmd\": "), Err(ModifyError::Invalid(_))));
        assert_eq!(editable_arguments(task.call().unwrap()), "{\n  \"cmd\": \"rm -r build\"\n}");
    }
}
