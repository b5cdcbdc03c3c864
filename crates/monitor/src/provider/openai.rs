//! OpenAI chat completions, as OpenAI documents them and vLLM, Ollama and llama.cpp's server
//! serve them.
//!
//! Structured output is asked through `response_format` with a strict JSON schema, and then
//! the reply must be that one object: anything else is malformed, never searched for a score.
//! Servers that do not know `response_format` can be told not to get it
//! ([`ProviderConfig::structured`]), and the reply is then read from the text, never from
//! what it quotes of the request ([`score::from_text`]).

use serde_json::{Value, json};

use super::{AttemptError, ProviderConfig, body_message};
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

/// The API's message from an error body.
pub fn error_message(body: &[u8]) -> String {
    body_message(body)
}

#[cfg(test)]
mod tests;
