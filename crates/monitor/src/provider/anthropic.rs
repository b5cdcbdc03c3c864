//! Anthropic Messages.
//!
//! Structured output is a forced tool call: the model must call `record_suspicion`, whose
//! input schema is the reply's, and only that call's input is read (text beside it, which
//! may quote the request, is not). Without it, the system prompt asks for JSON and the text
//! is read, never from what it quotes of the request ([`score::from_text`]).

use serde_json::{Value, json};

use super::{AttemptError, ProviderConfig, body_message};
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
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| AttemptError::Malformed(format!("not JSON ({e}): {}", body_message(body))))?;
    let content = value
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| AttemptError::Malformed("the message has no content".into()))?;
    let stop = value.get("stop_reason").and_then(Value::as_str).unwrap_or("none");
    if stop == "refusal" {
        return Err(AttemptError::Refused("the model stopped with stop_reason refusal".into()));
    }
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

/// The API's message from an error body (`{"type": "error", "error": {"type", "message"}}`).
pub fn error_message(body: &[u8]) -> String {
    body_message(body)
}

#[cfg(test)]
mod tests;
