//! Between the wire contract and the policy engine's types, and what a wire decision counts
//! as ([`counts_as_denial`]).

use std::sync::Arc;

use airlock_contract::v1;
use airlock_policy::chain::TrailEntry;
use airlock_policy::{Answer, Call, Decision, Kind};
use serde_json::{Map, Value};

/// Why a wire record cannot be read as the engine's.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConvertError {
    /// A tool call's `arguments_json` is not a JSON object.
    #[error("tool call arguments: {0}")]
    Arguments(ObjectError),
    /// A step answer's `metadata_json` is not a JSON object.
    #[error("step metadata: {0}")]
    Metadata(ObjectError),
    /// A tool call's `metadata_json` is not a JSON object.
    #[error("tool metadata: {0}")]
    ToolMetadata(ObjectError),
    /// A step answer without a decision (unspecified or unknown).
    #[error("the step answer has no decision")]
    NoDecision,
}

/// Why JSON text is not an object.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ObjectError {
    /// Not JSON at all.
    #[error("{0}")]
    Json(String),
    /// JSON, of another type.
    #[error("expected a JSON object, got {0}")]
    NotAnObject(Value),
}

/// Reads a wire `ToolCall`; its arguments must be a JSON object (empty text is no arguments).
pub fn call_from_wire(call: &v1::ToolCall) -> Result<Call, ConvertError> {
    let arguments = parse_object(&call.arguments_json).map_err(ConvertError::Arguments)?;
    Ok(Call { id: call.id.clone(), function: call.function.clone(), arguments })
}

/// The tool's metadata a wire `ToolCall` carries: a JSON object, or `None` for empty text.
pub fn call_metadata(call: &v1::ToolCall) -> Result<Option<Map<String, Value>>, ConvertError> {
    if call.metadata_json.is_empty() {
        return Ok(None);
    }
    parse_object(&call.metadata_json).map(Some).map_err(ConvertError::ToolMetadata)
}

/// A call as the wire carries it, arguments in their order.
pub fn call_to_wire(call: &Call) -> v1::ToolCall {
    v1::ToolCall {
        id: call.id.clone(),
        function: call.function.clone(),
        arguments_json: Value::Object(call.arguments.clone()).to_string(),
        r#type: "function".into(),
        ..Default::default()
    }
}

/// The engine's kind of a wire request.
pub fn kind_from_wire(kind: v1::Kind) -> Option<Kind> {
    match kind {
        v1::Kind::Approval => Some(Kind::Approval),
        v1::Kind::Review => Some(Kind::Review),
        v1::Kind::Unspecified => None,
    }
}

/// The wire's kind for the engine's.
pub fn kind_to_wire(kind: Kind) -> v1::Kind {
    match kind {
        Kind::Approval => v1::Kind::Approval,
        Kind::Review => v1::Kind::Review,
    }
}

/// A request's body read once: its kind and what it asks about.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestParts<'a> {
    /// Approval or review, as the body is.
    pub kind: Kind,
    /// The tool call asked about, when the body has one.
    pub call: Option<&'a v1::ToolCall>,
    /// The message the call came with.
    pub message: &'a str,
    /// The call's result: a review's alone.
    pub output: Option<&'a str>,
    /// The tool message the model will see, when a review's runner sent it.
    pub result: Option<&'a v1::ChatMessage>,
    /// How the call is shown to a person, when the runner sent a view.
    pub view: Option<&'a v1::ToolCallView>,
    /// The conversation, oldest first, ending with the assistant message with the call.
    pub history: &'a [v1::ChatMessage],
    /// How many earlier messages the runner left out of `history`.
    pub history_omitted: u32,
}

/// The parts of `request`'s body; `None` without a body.
pub fn request_parts(request: &v1::Request) -> Option<RequestParts<'_>> {
    Some(match request.body.as_ref()? {
        v1::request::Body::Approval(a) => RequestParts {
            kind: Kind::Approval,
            call: a.call.as_ref(),
            message: &a.message,
            output: None,
            result: None,
            view: a.view.as_ref(),
            history: &a.history,
            history_omitted: a.history_omitted,
        },
        v1::request::Body::Review(r) => RequestParts {
            kind: Kind::Review,
            call: r.call.as_ref(),
            message: &r.message,
            output: Some(&r.output),
            result: r.result.as_ref(),
            view: r.view.as_ref(),
            history: &r.history,
            history_omitted: r.history_omitted,
        },
    })
}

/// The first of `fields`, each a name and its text, whose text holds a NUL character.
/// PostgreSQL's text refuses NUL, so a name a store keeps as text is refused with it where it
/// enters, on every store alike.
pub fn first_with_nul<'t, N>(fields: impl IntoIterator<Item = (N, &'t str)>) -> Option<(N, &'t str)> {
    fields.into_iter().find(|(_, text)| text.contains('\0'))
}

/// The engine's decision for a wire one; `None` for an unspecified or unknown value.
pub fn decision_from_wire(decision: i32) -> Option<Decision> {
    Some(match v1::DecisionKind::try_from(decision).ok()? {
        v1::DecisionKind::Approve => Decision::Approve,
        v1::DecisionKind::Modify => Decision::Modify,
        v1::DecisionKind::Reject => Decision::Reject,
        v1::DecisionKind::Terminate => Decision::Terminate,
        v1::DecisionKind::Escalate => Decision::Escalate,
        v1::DecisionKind::Continue => Decision::Continue,
        v1::DecisionKind::Unspecified => return None,
    })
}

/// The wire's decision for the engine's.
pub fn decision_to_wire(decision: Decision) -> v1::DecisionKind {
    match decision {
        Decision::Approve => v1::DecisionKind::Approve,
        Decision::Modify => v1::DecisionKind::Modify,
        Decision::Reject => v1::DecisionKind::Reject,
        Decision::Terminate => v1::DecisionKind::Terminate,
        Decision::Escalate => v1::DecisionKind::Escalate,
        Decision::Continue => v1::DecisionKind::Continue,
    }
}

/// An external step's answer as the engine takes it.
pub fn answer_from_wire(answer: &v1::StepAnswer) -> Result<Answer, ConvertError> {
    let decision = decision_from_wire(answer.decision).ok_or(ConvertError::NoDecision)?;
    let modified = answer.modified.as_ref().map(call_from_wire).transpose()?;
    let metadata = match answer.metadata_json.as_str() {
        "" => None,
        text => Some(parse_object(text).map_err(ConvertError::Metadata)?),
    };
    Ok(Answer {
        decision,
        modified,
        explanation: answer.explanation.clone().map(Into::into),
        metadata,
        timed_out: answer.timed_out,
    })
}

/// A recorded trail as the engine takes it.
pub fn trail_from_wire(trail: &[v1::StepAnswer]) -> Result<Vec<TrailEntry>, ConvertError> {
    trail
        .iter()
        .map(|entry| {
            Ok(TrailEntry {
                step: entry.step.map(|s| s as usize),
                approver: Arc::from(entry.approver.as_str()),
                answer: answer_from_wire(entry)?,
            })
        })
        .collect()
}

/// One trail entry on the wire.
pub fn entry_to_wire(entry: &TrailEntry, decided_by: &str, started_ms: i64, answered_ms: i64) -> v1::StepAnswer {
    v1::StepAnswer {
        step: entry.step.map(|s| s as u32),
        approver: entry.approver.to_string(),
        decision: decision_to_wire(entry.answer.decision).into(),
        modified: entry.answer.modified.as_ref().map(call_to_wire),
        explanation: entry.answer.explanation.as_deref().map(str::to_owned),
        metadata_json: metadata_to_wire(entry.answer.metadata.as_ref()),
        decided_by: decided_by.to_owned(),
        started_at_unix_ms: started_ms,
        answered_at_unix_ms: answered_ms,
        published_by: String::new(),
        timed_out: entry.answer.timed_out,
    }
}

/// Whether a decision counts as a denial, for whatever counts refusals (a breaker, say): it
/// rejected the call or terminated the sample, and not because nobody answered in time (a
/// decision `timed_out` is no refusal).
pub fn counts_as_denial(decision: &v1::Decision) -> bool {
    !decision.timed_out && decision_from_wire(decision.decision).is_some_and(Decision::denies)
}

/// Metadata as wire JSON text; empty when there is none.
pub fn metadata_to_wire(metadata: Option<&Map<String, Value>>) -> String {
    metadata.map(|m| Value::Object(m.clone()).to_string()).unwrap_or_default()
}

fn parse_object(text: &str) -> Result<Map<String, Value>, ObjectError> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text).map_err(|e| ObjectError::Json(e.to_string()))? {
        Value::Object(map) => Ok(map),
        other => Err(ObjectError::NotAnObject(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_part_that_is_wrong() {
        let call = v1::ToolCall { function: "ls".into(), arguments_json: "[1]".into(), ..Default::default() };
        let error = call_from_wire(&call).unwrap_err();
        assert_eq!(error, ConvertError::Arguments(ObjectError::NotAnObject(serde_json::json!([1]))));
        assert_eq!(error.to_string(), "tool call arguments: expected a JSON object, got [1]");

        let answer = v1::StepAnswer {
            decision: v1::DecisionKind::Approve.into(),
            metadata_json: "{".into(),
            ..Default::default()
        };
        assert!(matches!(answer_from_wire(&answer), Err(ConvertError::Metadata(ObjectError::Json(_)))));
        assert_eq!(answer_from_wire(&v1::StepAnswer::default()), Err(ConvertError::NoDecision));
    }

    #[test]
    fn a_refusal_counts_as_a_denial_and_a_timeout_does_not() {
        let decided = |decision: v1::DecisionKind, timed_out| v1::Decision {
            decision: decision.into(),
            timed_out,
            ..Default::default()
        };
        assert!(counts_as_denial(&decided(v1::DecisionKind::Reject, false)));
        assert!(counts_as_denial(&decided(v1::DecisionKind::Terminate, false)));
        for (decision, timed_out) in [
            (v1::DecisionKind::Reject, true),
            (v1::DecisionKind::Terminate, true),
            (v1::DecisionKind::Approve, false),
            (v1::DecisionKind::Modify, false),
            (v1::DecisionKind::Continue, false),
            (v1::DecisionKind::Escalate, false),
            (v1::DecisionKind::Unspecified, false),
        ] {
            assert!(!counts_as_denial(&decided(decision, timed_out)), "{decision:?}, timed out: {timed_out}");
        }
    }

    #[test]
    fn a_timed_out_answer_stays_timed_out_through_the_engine() {
        let wire = v1::StepAnswer {
            step: Some(2),
            approver: "human".into(),
            decision: v1::DecisionKind::Reject.into(),
            timed_out: true,
            ..Default::default()
        };
        let [entry] = trail_from_wire(std::slice::from_ref(&wire)).unwrap().try_into().unwrap();
        assert!(entry.answer.timed_out);
        assert!(entry_to_wire(&entry, "timeout", 1, 2).timed_out);
        let answered = TrailEntry { answer: Answer::new(Decision::Reject, "no"), ..entry };
        assert!(!entry_to_wire(&answered, "alice", 1, 2).timed_out);
    }

    #[test]
    fn a_call_survives_the_wire_with_its_argument_order() {
        let mut arguments = Map::new();
        arguments.insert("z".into(), 1.into());
        arguments.insert("a".into(), "x".into());
        let call = Call { id: "c1".into(), function: "f".into(), arguments };
        assert_eq!(call_from_wire(&call_to_wire(&call)).unwrap(), call);
    }

    #[test]
    fn the_first_field_with_a_nul_is_named() {
        let fields = [("pool", "runners"), ("user", "a\0b"), ("function", "\0")];
        assert_eq!(first_with_nul(fields), Some(("user", "a\0b")));
        assert_eq!(first_with_nul([("pool", "runners"), ("function", "")]), None);
    }

    #[test]
    fn a_review_body_reads_as_its_parts() {
        let result = v1::ChatMessage { role: "tool".into(), text: "ok".into(), ..Default::default() };
        let review = v1::ReviewRequest {
            message: "running it".into(),
            call: Some(v1::ToolCall { function: "ls".into(), ..Default::default() }),
            history: vec![v1::ChatMessage { role: "user".into(), ..Default::default() }],
            history_omitted: 2,
            result: Some(result.clone()),
            output: "a b".into(),
            ..Default::default()
        };
        let request = v1::Request { body: Some(v1::request::Body::Review(review.clone())), ..Default::default() };
        let parts = request_parts(&request).unwrap();
        assert_eq!(parts.kind, Kind::Review);
        assert_eq!(parts.call.map(|c| c.function.as_str()), Some("ls"));
        assert_eq!((parts.message, parts.output, parts.result), ("running it", Some("a b"), Some(&result)));
        assert_eq!((parts.view, parts.history, parts.history_omitted), (None, review.history.as_slice(), 2));
        assert_eq!(request_parts(&v1::Request::default()), None);
    }
}
