//! The call under decision and the answers steps give about it.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

/// A tool call as Inspect's `ToolCall` carries it: `arguments` keeps the order the model gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The tool call id (`ToolCall.id`).
    pub id: String,
    /// The tool's name.
    pub function: String,
    /// The arguments, in the order the model gave them.
    pub arguments: Map<String, Value>,
}

/// Whether a chain runs before the call (approval) or after it returned (review).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Inspect's `approvers:`: decides whether the call runs.
    Approval,
    /// Inspect's `reviewers:`: decides whether the sample goes on after the call ran.
    Review,
}

/// Every answer a step or a chain can give, approval and review together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Approval: run the call.
    Approve,
    /// Approval: run the call with the modified arguments.
    Modify,
    /// Approval: do not run the call; the model sees the explanation as an error.
    Reject,
    /// End the sample.
    Terminate,
    /// Let the next matching step decide.
    Escalate,
    /// Review: let the model see the result and go on.
    Continue,
}

/// The answer of one step, shaped like Inspect's `Approval` / `Review`.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// What the step decided.
    pub decision: Decision,
    /// The call to run instead, for `modify`.
    pub modified: Option<Call>,
    /// Why, in words the model or a person reads.
    pub explanation: Option<Cow<'static, str>>,
    /// Free-form data the step attaches (scores, reasons).
    pub metadata: Option<Map<String, Value>>,
    /// The answer came from a deadline (the step's `on_timeout`), not from the step: nobody
    /// answered.
    pub timed_out: bool,
}

// === impl Call ===

impl Call {
    /// Reads Inspect's ToolCall JSON (`{"id", "function", "arguments"}`), keeping argument order.
    pub fn from_json(value: &Value) -> Result<Self, CallError> {
        let object = value.as_object().ok_or(CallError::NotAnObject)?;
        let field = |key| object.get(key).cloned();
        Fields { id: field("id"), function: field("function"), arguments: field("arguments") }.into_call()
    }

    /// Reads the text of Inspect's ToolCall JSON: the call and the error [`Call::from_json`]
    /// gives for the text's JSON value, without building that value.
    pub fn from_json_str(text: &str) -> Result<Self, ReadError> {
        match serde_json::from_str::<Fields>(text) {
            Ok(fields) => Ok(fields.into_call()?),
            // Not an object, or not JSON: the value's reading has the words for it.
            Err(_) => Ok(Call::from_json(&serde_json::from_str(text)?)?),
        }
    }

    /// Inspect's ToolCall JSON for this call.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "id": self.id,
            "function": self.function,
            "arguments": Value::Object(self.arguments.clone()),
            "type": "function",
        })
    }
}

/// Why a ToolCall JSON document could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The document is not a JSON object.
    #[error("a tool call must be a JSON object with \"function\" and \"arguments\"")]
    NotAnObject,
    /// A required key is absent.
    #[error("a tool call needs \"{0}\"")]
    Missing(&'static str),
    /// A key holds the wrong JSON type.
    #[error("\"{key}\" must be {expected}")]
    WrongType {
        /// The key.
        key: &'static str,
        /// What it must be.
        expected: &'static str,
    },
}

/// Why the text of a ToolCall JSON document could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The text is not JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The JSON is not a call.
    #[error(transparent)]
    Call(#[from] CallError),
}

/// The keys of a ToolCall object that make the call, each as its last occurrence gave it
/// (as a JSON value keeps it); other keys are read and dropped.
#[derive(Debug, Default)]
struct Fields {
    id: Option<Value>,
    function: Option<Value>,
    arguments: Option<Value>,
}

impl Fields {
    /// The call, checked in [`Call::from_json`]'s order: arguments, id, function.
    fn into_call(self) -> Result<Call, CallError> {
        let text = |value: Option<Value>, key: &'static str| match value {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(CallError::WrongType { key, expected: "a string" }),
            None => Err(CallError::Missing(key)),
        };
        let arguments = match self.arguments {
            Some(Value::Object(args)) => args,
            Some(Value::Null) | None => Map::new(),
            Some(_) => return Err(CallError::WrongType { key: "arguments", expected: "an object" }),
        };
        Ok(Call {
            id: self.id.map_or(Ok(String::new()), |id| text(Some(id), "id"))?,
            function: text(self.function, "function")?,
            arguments,
        })
    }
}

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FieldsVisitor)
    }
}

struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool call object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
        let mut fields = Fields::default();
        while let Some(key) = map.next_key::<Key>()? {
            let slot = match key {
                Key::Id => &mut fields.id,
                Key::Function => &mut fields.function,
                Key::Arguments => &mut fields.arguments,
                // Read as a value, so that what the value's reading refuses is refused here too.
                Key::Other => {
                    map.next_value::<Value>()?;
                    continue;
                }
                // serde_json reads an object whose first key is its private number marker as
                // a number (`arbitrary_precision`); leave such text to the value's reading.
                Key::Private => return Err(de::Error::custom("a serde_json private key")),
            };
            *slot = Some(map.next_value()?);
        }
        Ok(fields)
    }
}

/// A key of a ToolCall object, matched without allocating.
enum Key {
    Id,
    Function,
    Arguments,
    Other,
    /// serde_json's own markers (`$serde_json::private::…`).
    Private,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
        Ok(match key {
            "id" => Key::Id,
            "function" => Key::Function,
            "arguments" => Key::Arguments,
            key if key.starts_with("$serde_json::private::") => Key::Private,
            _ => Key::Other,
        })
    }
}

// === impl Kind ===

impl Kind {
    /// The top-level key of an Inspect policy file for this kind.
    pub fn section(self) -> &'static str {
        match self {
            Kind::Approval => "approvers",
            Kind::Review => "reviewers",
        }
    }

    /// The decisions a step of this kind may answer.
    pub fn decisions(self) -> &'static [Decision] {
        use Decision::*;
        match self {
            Kind::Approval => &[Approve, Modify, Reject, Terminate, Escalate],
            Kind::Review => &[Continue, Terminate, Escalate],
        }
    }

    /// The decision a request of this kind gets when nobody answered in time: fail closed.
    pub fn fail_closed(self) -> Decision {
        match self {
            Kind::Approval => Decision::Reject,
            Kind::Review => Decision::Terminate,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Kind::Approval => "approval",
            Kind::Review => "review",
        })
    }
}

impl FromStr for Kind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "approval" => Ok(Kind::Approval),
            "review" => Ok(Kind::Review),
            other => Err(format!("unknown kind '{other}': expected approval or review")),
        }
    }
}

// === impl Decision ===

impl Decision {
    /// Inspect's spelling of the decision.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Modify => "modify",
            Decision::Reject => "reject",
            Decision::Terminate => "terminate",
            Decision::Escalate => "escalate",
            Decision::Continue => "continue",
        }
    }

    /// Whether the decision stops the call or the sample: reject or terminate.
    pub fn denies(self) -> bool {
        matches!(self, Decision::Reject | Decision::Terminate)
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for Decision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "approve" => Decision::Approve,
            "modify" => Decision::Modify,
            "reject" => Decision::Reject,
            "terminate" => Decision::Terminate,
            "escalate" => Decision::Escalate,
            "continue" => Decision::Continue,
            other => return Err(format!("unknown decision '{other}'")),
        })
    }
}

// === impl Answer ===

impl Answer {
    /// An answer with a decision and an explanation, nothing else.
    pub fn new(decision: Decision, explanation: impl Into<Cow<'static, str>>) -> Self {
        Answer { decision, modified: None, explanation: Some(explanation.into()), metadata: None, timed_out: false }
    }

    /// An escalation: this step does not decide.
    pub fn escalate(explanation: impl Into<Cow<'static, str>>) -> Self {
        Answer::new(Decision::Escalate, explanation)
    }
}

#[cfg(test)]
mod tests;
