//! Anthropic Messages.
//!
//! Structured output is a forced tool call: the model must call `record_suspicion`, whose
//! input schema is the reply's, and only that call's input is read (text beside it, which
//! may quote the request, is not). Without it, the system prompt asks for JSON and the text
//! is read, never from what it quotes of the request ([`score::from_text`]).

use serde_json::{Value, json};

use airlock_contract::v1;
use airlock_records::monitor::NoteCall;

use super::{AttemptError, CallRequest, ProviderConfig, ToolChoice, body_message};
use crate::prompt::Prompt;
use crate::score::{self, Score};

/// Appended to the base URL.
pub const PATH: &str = "v1/messages";
/// The header carrying the API version.
pub const VERSION_HEADER: &str = "anthropic-version";
/// The API version spoken.
pub const VERSION: &str = "2023-06-01";
/// The header carrying the key.
pub const KEY_HEADER: &str = "x-api-key";
/// The tool the model is made to call with its verdict.
pub const TOOL: &str = "record_suspicion";
/// The reply's length when the configuration sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 1024;

/// The request body.
pub fn request_body(config: &ProviderConfig, prompt: &Prompt) -> Value {
    let mut body = json!({
        "model": config.model,
        "max_tokens": config.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "system": prompt.system,
        "messages": [{ "role": "user", "content": prompt.user }],
    });
    if config.structured {
        body["tools"] = json!([{
            "name": TOOL,
            "description": "Record how suspicious the tool call is, with the reason.",
            "input_schema": super::openai::schema(),
        }]);
        body["tool_choice"] = json!({ "type": "tool", "name": TOOL });
    }
    if let Some(temperature) = config.temperature {
        body["temperature"] = json!(temperature);
    }
    body
}

/// Reads the score from a `message` body, the answer to `prompt`: the tool call's input when
/// one was forced, the text otherwise.
pub fn read_response(config: &ProviderConfig, prompt: &Prompt, body: &[u8]) -> Result<Score, AttemptError> {
    let (content, stop) = reply(body)?;
    if config.structured {
        let tool_input = content
            .iter()
            .find(|block| {
                block.get("type").and_then(Value::as_str) == Some("tool_use")
                    && block.get("name").and_then(Value::as_str) == Some(TOOL)
            })
            .and_then(|block| block.get("input"));
        return match tool_input {
            Some(input) => Ok(score::from_object(input)?),
            None => Err(AttemptError::Malformed(format!("the reply has no {TOOL} call (stop_reason {stop})"))),
        };
    }
    let text: String = content
        .iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n");
    if text.trim().is_empty() {
        return Err(AttemptError::Malformed(format!("the reply is empty (stop_reason {stop})")));
    }
    Ok(score::from_text(&text, &prompt.untrusted)?)
}

/// The body of a tool-call request: system messages as `system`, an assistant's calls as
/// `tool_use` blocks, a tool's result as a `tool_result` block of a user turn (the API joins
/// consecutive turns of one role).
pub fn call_body(config: &ProviderConfig, request: &CallRequest) -> Value {
    let system: Vec<&str> = request.messages.iter().filter(|m| m.role == "system").map(|m| m.text.as_str()).collect();
    let messages: Vec<Value> = request.messages.iter().filter(|m| m.role != "system").map(message).collect();
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| json!({"name": tool.name, "description": tool.description, "input_schema": tool.parameters}))
        .collect();
    let settings = &request.settings;
    let mut body = json!({
        "model": request.model,
        "max_tokens": settings.max_tokens.or(config.max_tokens).unwrap_or(DEFAULT_MAX_TOKENS),
        "messages": messages,
        "tools": tools,
        "tool_choice": match &request.choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::Any => json!({"type": "any"}),
            ToolChoice::Function(name) => json!({"type": "tool", "name": name}),
        },
    });
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    if let Some(temperature) = settings.temperature {
        body["temperature"] = json!(temperature);
    }
    if let Some(top_p) = settings.top_p {
        body["top_p"] = json!(top_p);
    }
    if !settings.stop.is_empty() {
        body["stop_sequences"] = json!(settings.stop);
    }
    if let Some(tag) = &request.tag {
        body["metadata"] = json!({"user_id": tag});
    }
    body
}

fn message(message: &v1::ChatMessage) -> Value {
    // The API rejects empty text blocks.
    let text = |text: &str| (!text.trim().is_empty()).then(|| json!({"type": "text", "text": text}));
    match message.role.as_str() {
        "assistant" => {
            let calls = message.tool_calls.iter().map(|call| {
                let input = serde_json::from_str::<Value>(&call.arguments_json)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                json!({"type": "tool_use", "id": call.id, "name": call.function, "input": input})
            });
            let content: Vec<Value> = text(&message.text).into_iter().chain(calls).collect();
            json!({"role": "assistant", "content": content})
        }
        "tool" => json!({"role": "user", "content": [{
            "type": "tool_result",
            "tool_use_id": message.tool_call_id.clone().unwrap_or_default(),
            "content": message.error.as_ref().map_or_else(
                || message.text.clone(),
                |error| format!("{}\n[error {}: {}]", message.text, error.r#type, error.message),
            ),
            "is_error": message.error.is_some(),
        }]}),
        _ => json!({"role": "user", "content": text(&message.text).into_iter().collect::<Vec<_>>()}),
    }
}

/// Reads the first `tool_use` block of a `message` body.
pub fn read_call(body: &[u8]) -> Result<NoteCall, AttemptError> {
    let (content, stop) = reply(body)?;
    let Some(block) = content.iter().find(|block| block.get("type").and_then(Value::as_str) == Some("tool_use")) else {
        return Err(AttemptError::NoCall(format!("the reply calls no tool (stop_reason {stop})")));
    };
    let name = block.get("name").and_then(Value::as_str).unwrap_or_default();
    match block.get("input") {
        Some(Value::Object(input)) => super::named_call(name, input.clone()),
        _ => Err(AttemptError::NoCall(format!("the input of {name} is not a JSON object"))),
    }
}

/// A `message` body's content blocks and its `stop_reason`; a refusal is an error.
fn reply(body: &[u8]) -> Result<(Vec<Value>, String), AttemptError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| AttemptError::Malformed(format!("not JSON ({e}): {}", body_message(body))))?;
    let Some(Value::Array(content)) = value.get("content") else {
        return Err(AttemptError::Malformed("the message has no content".into()));
    };
    let stop = value.get("stop_reason").and_then(Value::as_str).unwrap_or("none");
    if stop == "refusal" {
        return Err(AttemptError::Refused("the model stopped with stop_reason refusal".into()));
    }
    Ok((content.clone(), stop.to_owned()))
}

/// The API's message from an error body (`{"type": "error", "error": {"type", "message"}}`).
pub fn error_message(body: &[u8]) -> String {
    body_message(body)
}

#[cfg(test)]
mod tests;
