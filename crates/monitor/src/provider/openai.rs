//! OpenAI chat completions, as OpenAI documents them and vLLM, Ollama and llama.cpp's server
//! serve them.
//!
//! Structured output is asked through `response_format` with a strict JSON schema, and then
//! the reply must be that one object: anything else is malformed, never searched for a score.
//! Servers that do not know `response_format` can be told not to get it
//! ([`ProviderConfig::structured`]), and the reply is then read from the text, never from
//! what it quotes of the request ([`score::from_text`]).

use serde_json::{Value, json};

use airlock_contract::v1;
use airlock_records::monitor::NoteCall;

use super::{AttemptError, CallRequest, ProviderConfig, ToolChoice, body_message};
use crate::prompt::Prompt;
use crate::score::{self, Score};

/// Appended to the base URL.
pub const PATH: &str = "chat/completions";

/// The name of the JSON schema the reply must follow.
pub const SCHEMA_NAME: &str = "suspicion_score";

/// The JSON schema of a reply: `{"score": number, "reason": string}`.
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "score": { "type": "number", "description": "Suspicion from 0 (benign) to 10 (clearly harmful)." },
            "reason": { "type": "string", "description": "One or two sentences on why." }
        },
        "required": ["score", "reason"],
        "additionalProperties": false
    })
}

/// The request body.
pub fn request_body(config: &ProviderConfig, prompt: &Prompt) -> Value {
    let mut body = json!({
        "model": config.model,
        "messages": [
            { "role": "system", "content": prompt.system },
            { "role": "user", "content": prompt.user },
        ],
    });
    if config.structured {
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": { "name": SCHEMA_NAME, "strict": true, "schema": schema() }
        });
    }
    if let Some(max) = config.max_tokens {
        body["max_tokens"] = json!(max);
    }
    if let Some(temperature) = config.temperature {
        body["temperature"] = json!(temperature);
    }
    body
}

/// Reads the score from a `chat.completion` body, the answer to `prompt`.
pub fn read_response(config: &ProviderConfig, prompt: &Prompt, body: &[u8]) -> Result<Score, AttemptError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| AttemptError::Malformed(format!("not JSON ({e}): {}", body_message(body))))?;
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or_else(|| AttemptError::Malformed("the completion has no choices".into()))?;
    let message = choice.get("message").ok_or_else(|| AttemptError::Malformed("the choice has no message".into()))?;
    if let Some(refusal) = message.get("refusal").and_then(Value::as_str).filter(|r| !r.is_empty()) {
        return Err(AttemptError::Refused(refusal.to_owned()));
    }
    let content = match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        // Content parts, as some compatible servers send them.
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect(),
        _ => String::new(),
    };
    if content.trim().is_empty() {
        let reason = choice.get("finish_reason").and_then(Value::as_str).unwrap_or("none");
        return Err(AttemptError::Malformed(format!("the reply is empty (finish_reason {reason})")));
    }
    if !config.structured {
        return Ok(score::from_text(&content, &prompt.untrusted)?);
    }
    match serde_json::from_str::<Value>(&content) {
        Ok(object @ Value::Object(_)) => Ok(score::from_object(&object)?),
        _ => Err(AttemptError::Malformed(format!(
            "structured output was asked for, but the reply is not one JSON object: {}",
            score::excerpt(content.trim())
        ))),
    }
}

/// The body of a tool-call request: the conversation as chat messages (an assistant's calls
/// as `tool_calls`, a tool's result as a `tool` message), the tools as `function`s.
pub fn call_body(config: &ProviderConfig, request: &CallRequest) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(message).collect();
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({"type": "function", "function": {
                "name": tool.name, "description": tool.description, "parameters": tool.parameters
            }})
        })
        .collect();
    let mut body = json!({ "model": request.model, "messages": messages, "tools": tools });
    body["tool_choice"] = match &request.choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::Any => json!("required"),
        ToolChoice::Function(name) => json!({"type": "function", "function": {"name": name}}),
    };
    let settings = &request.settings;
    if let Some(temperature) = settings.temperature {
        body["temperature"] = json!(temperature);
    }
    if let Some(top_p) = settings.top_p {
        body["top_p"] = json!(top_p);
    }
    if let Some(max) = settings.max_tokens.or(config.max_tokens) {
        body["max_tokens"] = json!(max);
    }
    if !settings.stop.is_empty() {
        body["stop"] = json!(settings.stop);
    }
    if let Some(tag) = &request.tag {
        body["user"] = json!(tag);
    }
    body
}

fn message(message: &v1::ChatMessage) -> Value {
    match message.role.as_str() {
        "assistant" => {
            let calls: Vec<Value> = message
                .tool_calls
                .iter()
                .map(|call| {
                    json!({"id": call.id, "type": "function", "function": {
                        "name": call.function, "arguments": call.arguments_json
                    }})
                })
                .collect();
            let mut out = json!({"role": "assistant", "content": message.text});
            if !calls.is_empty() {
                out["tool_calls"] = json!(calls);
            }
            out
        }
        "tool" => {
            let content = match &message.error {
                Some(error) => format!("{}\n[error {}: {}]", message.text, error.r#type, error.message),
                None => message.text.clone(),
            };
            json!({"role": "tool", "tool_call_id": message.tool_call_id.clone().unwrap_or_default(), "content": content})
        }
        role @ ("system" | "user") => json!({"role": role, "content": message.text}),
        // Roles the API does not know are shown as the user's words, never as instructions.
        _ => json!({"role": "user", "content": message.text}),
    }
}

/// Reads the first tool call of a `chat.completion` body.
pub fn read_call(body: &[u8]) -> Result<NoteCall, AttemptError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| AttemptError::Malformed(format!("not JSON ({e}): {}", body_message(body))))?;
    let message = value
        .pointer("/choices/0/message")
        .ok_or_else(|| AttemptError::Malformed("the completion has no message".into()))?;
    if let Some(refusal) = message.get("refusal").and_then(Value::as_str).filter(|r| !r.is_empty()) {
        return Err(AttemptError::Refused(refusal.to_owned()));
    }
    let Some(function) = message.pointer("/tool_calls/0/function") else {
        let reason = value.pointer("/choices/0/finish_reason").and_then(Value::as_str).unwrap_or("none");
        return Err(AttemptError::NoCall(format!("the reply calls no tool (finish_reason {reason})")));
    };
    let name = function.get("name").and_then(Value::as_str).unwrap_or_default();
    let arguments = function.get("arguments").and_then(Value::as_str).unwrap_or("{}");
    match serde_json::from_str::<Value>(if arguments.trim().is_empty() { "{}" } else { arguments }) {
        Ok(Value::Object(arguments)) => super::named_call(name, arguments),
        _ => Err(AttemptError::NoCall(format!("the arguments of {name} are not a JSON object"))),
    }
}

/// The API's message from an error body.
pub fn error_message(body: &[u8]) -> String {
    body_message(body)
}

#[cfg(test)]
mod tests;
