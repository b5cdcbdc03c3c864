//! What the proxy reads of MCP's tools: a `tools/call` request into a [`ToolCall`], the
//! server's tool annotations from `tools/list` results ([`Annotations`]), a result's text, and
//! the messages the proxy makes itself (an error result, a progress notification).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::message::{Message, Notification};

/// The method of a tool call.
pub const CALL: &str = "tools/call";

/// The method that lists a server's tools.
pub const LIST: &str = "tools/list";

/// The notification of a request's progress.
pub const PROGRESS: &str = "notifications/progress";

/// The notification that withdraws a request.
pub const CANCELLED: &str = "notifications/cancelled";

/// A `tools/call` request's params, read.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// Its arguments, in the order the client gave them.
    pub arguments: Map<String, Value>,
    /// The client's `_meta.progressToken`: progress notifications for this call carry it.
    pub progress_token: Option<Value>,
}

/// The annotations each of the server's tools declared (`readOnlyHint`, `destructiveHint`,
/// `idempotentHint`, `openWorldHint`, `title`), as its `tools/list` results gave them.
#[derive(Debug, Clone, Default)]
pub struct Annotations(HashMap<String, Map<String, Value>>);

// === impl ToolCall ===

impl ToolCall {
    /// Reads a `tools/call` request's params: a `name` and, if any, `arguments` (an object).
    pub fn from_params(params: Option<&Value>) -> Result<Self, &'static str> {
        let params = params.and_then(Value::as_object).ok_or("tools/call needs params")?;
        let name = params.get("name").and_then(Value::as_str).ok_or("tools/call needs a tool name")?;
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(arguments)) => arguments.clone(),
            Some(_) => return Err("tools/call arguments must be an object"),
        };
        let progress_token =
            params.get("_meta").and_then(|meta| meta.get("progressToken")).filter(|t| !t.is_null()).cloned();
        Ok(ToolCall { name: name.to_owned(), arguments, progress_token })
    }

    /// `params` with its arguments replaced by `arguments`, everything else kept.
    pub fn with_arguments(params: &Value, arguments: Map<String, Value>) -> Value {
        let mut params = params.clone();
        if let Some(object) = params.as_object_mut() {
            object.insert("arguments".into(), Value::Object(arguments));
        }
        params
    }
}

// === impl Annotations ===

impl Annotations {
    /// Remembers the annotations of every tool a `tools/list` result names (a page of it);
    /// a tool listed without annotations has none.
    pub fn learn(&mut self, result: &Value) {
        let Some(tools) = result.get("tools").and_then(Value::as_array) else { return };
        for tool in tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else { continue };
            let annotations = tool.get("annotations").and_then(Value::as_object).cloned().unwrap_or_default();
            self.0.insert(name.to_owned(), annotations);
        }
    }

    /// The annotations of the tool `name`, if it was listed with any.
    pub fn of(&self, name: &str) -> Option<&Map<String, Value>> {
        self.0.get(name).filter(|annotations| !annotations.is_empty())
    }
}

/// A tool result the model reads as an error: `text`, with `isError: true`.
pub fn error_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// The text of a tool result, as a review reads it: its text content joined by newlines, or,
/// without any, its structured content (or whole content) as JSON.
pub fn output_text(result: &Value) -> String {
    let content = result.get("content").and_then(Value::as_array);
    let texts: Vec<&str> = content
        .into_iter()
        .flatten()
        .filter(|item| item.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|item| item.get("text").and_then(Value::as_str))
        .collect();
    if !texts.is_empty() {
        return texts.join("\n");
    }
    match (result.get("structuredContent"), result.get("content")) {
        (Some(structured), _) => structured.to_string(),
        (None, Some(content)) => content.to_string(),
        (None, None) => String::new(),
    }
}

/// A progress notification for `token`: `progress` counts up with each one sent.
pub fn progress(token: &Value, progress: u64, message: &str) -> Message {
    Message::Notification(Notification {
        method: PROGRESS.into(),
        params: Some(json!({"progressToken": token, "progress": progress, "message": message})),
    })
}

/// The request id a `notifications/cancelled` withdraws.
pub fn cancelled_id(params: Option<&Value>) -> Option<crate::message::Id> {
    params.and_then(|p| p.get("requestId")).and_then(crate::message::Id::from_value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_read_with_its_arguments_in_order_and_its_progress_token() {
        let params = json!({"name": "rm", "arguments": {"z": 1, "a": "x"}, "_meta": {"progressToken": 5}});
        let call = ToolCall::from_params(Some(&params)).unwrap();
        assert_eq!(call.name, "rm");
        assert_eq!(call.arguments.keys().collect::<Vec<_>>(), ["z", "a"]);
        assert_eq!(call.progress_token, Some(json!(5)));
        let bare = ToolCall::from_params(Some(&json!({"name": "ls"}))).unwrap();
        assert!(bare.arguments.is_empty() && bare.progress_token.is_none());
    }

    #[test]
    fn a_call_without_a_name_or_with_arguments_not_an_object_is_refused() {
        for params in [json!({}), json!({"name": 3}), json!({"name": "x", "arguments": [1]})] {
            assert!(ToolCall::from_params(Some(&params)).is_err(), "{params}");
        }
        assert!(ToolCall::from_params(None).is_err());
    }

    #[test]
    fn modified_arguments_replace_only_the_arguments() {
        let params = json!({"name": "w", "arguments": {"path": "/etc"}, "_meta": {"progressToken": "t"}});
        let mut arguments = Map::new();
        arguments.insert("path".into(), "/tmp".into());
        let changed = ToolCall::with_arguments(&params, arguments);
        assert_eq!(changed, json!({"name": "w", "arguments": {"path": "/tmp"}, "_meta": {"progressToken": "t"}}));
    }

    #[test]
    fn annotations_are_learned_per_tool_from_each_page_of_a_listing() {
        let mut annotations = Annotations::default();
        annotations.learn(&json!({"tools": [
            {"name": "rm", "annotations": {"destructiveHint": true}},
            {"name": "ls", "annotations": {"readOnlyHint": true}},
            {"name": "plain"},
        ]}));
        annotations.learn(&json!({"tools": [{"name": "cat", "annotations": {"readOnlyHint": true}}]}));
        assert_eq!(annotations.of("rm").unwrap()["destructiveHint"], true);
        assert_eq!(annotations.of("cat").unwrap()["readOnlyHint"], true);
        assert!(annotations.of("plain").is_none() && annotations.of("unlisted").is_none());
        annotations.learn(&json!({"tools": [{"name": "rm"}]}));
        assert!(annotations.of("rm").is_none(), "a later listing replaces what a tool declared");
    }

    #[test]
    fn a_results_output_is_its_text_or_else_its_structured_content() {
        let text =
            json!({"content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]});
        assert_eq!(output_text(&text), "a\nb");
        assert_eq!(output_text(&json!({"content": [], "structuredContent": {"n": 1}})), r#"{"n":1}"#);
        assert_eq!(output_text(&json!({})), "");
    }

    #[test]
    fn an_error_result_carries_the_text_as_an_error() {
        let result = error_result("no");
        assert_eq!(result["isError"], true);
        assert_eq!(output_text(&result), "no");
    }
}
