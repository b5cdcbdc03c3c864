//! Reading a suspicion score and a reason from what a model wrote.
//!
//! Structured output (a JSON schema, a tool call) gives an object; everything else gives text
//! that may wrap the object in prose or a code fence, or write the score in words. The
//! parser takes, in order: the whole text as a JSON object; the first JSON object in the text
//! with a score; a `score: 7` or `7/10` in prose. A score outside 0 to 10 is an error, not
//! clamped: a model that answers 70 did not understand the scale.

use serde_json::Value;

use crate::params::MAX_SCORE;

/// Keys a score may come under, first match wins.
const SCORE_KEYS: &[&str] = &["score", "suspicion_score", "suspicion"];
/// Keys a reason may come under, first match wins.
const REASON_KEYS: &[&str] = &["reason", "reasoning", "explanation", "rationale"];

/// A model's verdict on one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// How suspicious the call is, from 0 (benign) to 10 (certainly harmful).
    pub value: f64,
    /// Why, in the model's words (may be empty).
    pub reason: String,
}

/// The model's reply holds no usable score.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScoreError {
    /// The reply was empty.
    #[error("the model's reply is empty")]
    Empty,
    /// No score could be found.
    #[error("no score in the model's reply: {0}")]
    Missing(String),
    /// A score outside the scale.
    #[error("the model's score {0} is outside 0 to 10")]
    OutOfRange(f64),
}

/// Reads a score from a JSON object (a structured reply or a tool call's input).
pub fn from_object(value: &Value) -> Result<Score, ScoreError> {
    let Value::Object(map) = value else { return Err(ScoreError::Missing(excerpt(&value.to_string()))) };
    let raw = SCORE_KEYS.iter().find_map(|key| map.get(*key));
    let Some(raw) = raw else { return Err(ScoreError::Missing(excerpt(&value.to_string()))) };
    let number = match raw {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => prose_score(s).or_else(|| s.trim().parse::<f64>().ok()),
        _ => None,
    };
    let Some(number) = number else { return Err(ScoreError::Missing(format!("score {raw}"))) };
    let reason = REASON_KEYS
        .iter()
        .find_map(|key| map.get(*key))
        .map(|r| match r {
            Value::String(s) => s.trim().to_owned(),
            other => other.to_string(),
        })
        .unwrap_or_default();
    checked(number, reason)
}

/// Reads a score from a model's text, tolerantly (see the module's documentation).
pub fn from_text(text: &str) -> Result<Score, ScoreError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ScoreError::Empty);
    }
    let unfenced = strip_fence(text);
    if let Ok(value @ Value::Object(_)) = serde_json::from_str::<Value>(unfenced) {
        return from_object(&value);
    }
    for (start, _) in text.match_indices('{') {
        let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        if let Some(Ok(value @ Value::Object(_))) = values.next()
            && let Ok(score) = from_object(&value)
        {
            return Ok(score);
        }
    }
    match prose_score(text) {
        Some(number) => checked(number, text.to_owned()),
        None => Err(ScoreError::Missing(excerpt(text))),
    }
}

fn checked(value: f64, reason: String) -> Result<Score, ScoreError> {
    if !(0.0..=MAX_SCORE).contains(&value) {
        return Err(ScoreError::OutOfRange(value));
    }
    Ok(Score { value, reason })
}

/// The inside of a Markdown code fence, or the text itself.
fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else { return text };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// `score: 7`, `Score = 7.5`, `score is 7`, `"score": "7"` or `7/10` in prose.
fn prose_score(text: &str) -> Option<f64> {
    let lower = text.to_ascii_lowercase();
    for (index, _) in lower.match_indices("score") {
        let rest = lower[index + "score".len()..]
            .trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ':' | '=' | '*'));
        let rest = rest.strip_prefix("is").unwrap_or(rest).trim_start_matches(|c: char| c.is_whitespace() || c == '"');
        if let Some(number) = leading_number(rest) {
            return Some(number);
        }
    }
    let slash = lower.find("/10")?;
    let start = lower[..slash].rfind(|c: char| !(c.is_ascii_digit() || c == '.')).map_or(0, |i| i + 1);
    lower[start..slash].parse().ok()
}

fn leading_number(text: &str) -> Option<f64> {
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    text[..end].trim_end_matches('.').parse().ok()
}

/// The start of a long text, for error messages.
pub(crate) fn excerpt(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn score(text: &str) -> (f64, String) {
        let s = from_text(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        (s.value, s.reason)
    }

    #[test]
    fn structured_objects() {
        assert_eq!(
            from_object(&json!({"score": 7, "reason": " rm -rf "})).unwrap(),
            Score { value: 7.0, reason: "rm -rf".into() }
        );
        assert_eq!(from_object(&json!({"suspicion_score": 2.5})).unwrap().value, 2.5);
        assert_eq!(from_object(&json!({"score": "8"})).unwrap().value, 8.0);
        assert_eq!(
            from_object(&json!({"score": "8/10", "reasoning": "x"})).unwrap(),
            Score { value: 8.0, reason: "x".into() }
        );
        assert!(matches!(from_object(&json!({"reason": "x"})), Err(ScoreError::Missing(_))));
        assert!(matches!(from_object(&json!({"score": null})), Err(ScoreError::Missing(_))));
        assert_eq!(from_object(&json!({"score": 11})), Err(ScoreError::OutOfRange(11.0)));
        assert_eq!(from_object(&json!({"score": -0.5})), Err(ScoreError::OutOfRange(-0.5)));
    }

    #[test]
    fn text_replies_models_give() {
        assert_eq!(score(r#"{"score": 3, "reason": "reads a file"}"#), (3.0, "reads a file".into()));
        assert_eq!(score("```json\n{\"score\": 9, \"reason\": \"exfiltration\"}\n```"), (9.0, "exfiltration".into()));
        assert_eq!(
            score("Sure! Here is my verdict: {\"score\": 6.5, \"reason\": \"odd {braces}\"} Hope it helps."),
            (6.5, "odd {braces}".into())
        );
        // A first object without a score is skipped.
        assert_eq!(score(r#"The call {"cmd": "ls"} looks fine. {"score": 1, "reason": "listing"}"#).0, 1.0);
        assert_eq!(score("Suspicion score: 7\nThe command deletes the home directory.").0, 7.0);
        assert_eq!(score("**Score:** 4.").0, 4.0);
        assert_eq!(score("I would rate this 8/10 for risk.").0, 8.0);
        assert_eq!(score("the score is 0").0, 0.0);
    }

    #[test]
    fn unusable_replies() {
        assert_eq!(from_text("  \n"), Err(ScoreError::Empty));
        assert!(matches!(from_text("I cannot help with that."), Err(ScoreError::Missing(_))));
        assert!(matches!(from_text("{\"score\": 42}"), Err(ScoreError::OutOfRange(42.0))));
        assert!(matches!(from_text("score: 70"), Err(ScoreError::OutOfRange(70.0))));
        let long = "x".repeat(1000);
        let ScoreError::Missing(text) = from_text(&long).unwrap_err() else { panic!() };
        assert!(text.chars().count() <= 201);
    }
}
