//! JSON-RPC 2.0 messages as MCP frames them, read once at the edge into [`Message`].
//!
//! Every transport turns what it reads (a line on stdio, a POST body or an SSE event over
//! HTTP) into messages with [`decode`], and writes them with [`Message::to_json`]; the
//! session looks only at these types. What the proxy passes through keeps every field of its
//! params and results, in order.

use std::fmt;

use serde_json::{Map, Value, json};

/// The JSON-RPC error code of a message that is not JSON.
pub const PARSE_ERROR: i64 = -32700;

/// The JSON-RPC error code of a message that is JSON but no JSON-RPC message.
pub const INVALID_REQUEST: i64 = -32600;

/// The JSON-RPC error code the proxy answers a call with when the fleet ends the session
/// (in the range JSON-RPC leaves to servers).
pub const TERMINATED: i64 = -32000;

/// One JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request: it has an id and awaits a response.
    Request(Request),
    /// A notification: no id, no response.
    Notification(Notification),
    /// A response: a result or an error, for a request's id.
    Response(Response),
}

/// A request id: a string or a number, kept as its JSON text (so `1` and `"1"` differ).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Id(String);

/// A request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Its id.
    pub id: Id,
    /// The method, e.g. `tools/call`.
    pub method: String,
    /// Its params, when it has any.
    pub params: Option<Value>,
}

/// A notification.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The method, e.g. `notifications/progress`.
    pub method: String,
    /// Its params, when it has any.
    pub params: Option<Value>,
}

/// A response: `Ok(result)` or `Err(error object)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id of the request it answers; `None` (JSON `null`) for an error about a message
    /// whose id could not be read.
    pub id: Option<Id>,
    /// The result, or the error object (`{"code", "message", "data"?}`).
    pub outcome: Result<Value, Value>,
}

/// Why bytes are no JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// Not JSON.
    #[error("not JSON: {0}")]
    Json(String),
    /// JSON, but no JSON-RPC message.
    #[error("not a JSON-RPC message: {0}")]
    Shape(&'static str),
}

impl Invalid {
    /// The JSON-RPC error response that tells the sender (id `null`).
    pub fn response(&self) -> Message {
        let code = match self {
            Invalid::Json(_) => PARSE_ERROR,
            Invalid::Shape(_) => INVALID_REQUEST,
        };
        Message::Response(Response { id: None, outcome: Err(json!({"code": code, "message": self.to_string()})) })
    }
}

/// Reads one JSON-RPC message, or a batch of them (a JSON array, as protocol versions before
/// 2025-06-18 allowed), from `bytes`.
pub fn decode(bytes: &[u8]) -> Result<Vec<Message>, Invalid> {
    match serde_json::from_slice(bytes).map_err(|e| Invalid::Json(e.to_string()))? {
        Value::Array(batch) if batch.is_empty() => Err(Invalid::Shape("an empty batch")),
        Value::Array(batch) => batch.into_iter().map(Message::from_value).collect(),
        value => Ok(vec![Message::from_value(value)?]),
    }
}

// === impl Id ===

impl Id {
    /// The id of a JSON value: a string or an integer.
    pub fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::String(_) | Value::Number(_) => Some(Id(value.to_string())),
            _ => None,
        }
    }

    /// A numeric id.
    pub fn number(n: u64) -> Self {
        Id(n.to_string())
    }

    /// The id as JSON.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.0).expect("an id is kept as valid JSON")
    }
}

impl fmt::Display for Id {
    /// A string id as its text, a number as its digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_value() {
            Value::String(text) => f.write_str(&text),
            _ => f.write_str(&self.0),
        }
    }
}

// === impl Message ===

impl Message {
    /// Reads a JSON-RPC message from its JSON value.
    pub fn from_value(value: Value) -> Result<Self, Invalid> {
        let Value::Object(mut object) = value else { return Err(Invalid::Shape("not an object")) };
        let id = object.remove("id");
        let params = object.remove("params");
        let method = match object.remove("method") {
            Some(Value::String(method)) => Some(method),
            Some(_) => return Err(Invalid::Shape("a method that is not a string")),
            None => None,
        };
        match (method, id) {
            (Some(method), None) => Ok(Message::Notification(Notification { method, params })),
            (Some(method), Some(id)) => {
                let id = Id::from_value(&id).ok_or(Invalid::Shape("an id that is neither a string nor a number"))?;
                Ok(Message::Request(Request { id, method, params }))
            }
            (None, id) => {
                let id = match id {
                    None | Some(Value::Null) => None,
                    Some(id) => Some(Id::from_value(&id).ok_or(Invalid::Shape("a response id of the wrong type"))?),
                };
                let outcome = match (object.remove("result"), object.remove("error")) {
                    (Some(result), None) => Ok(result),
                    (None, Some(error)) => Err(error),
                    _ => return Err(Invalid::Shape("neither a request nor one result or error")),
                };
                Ok(Message::Response(Response { id, outcome }))
            }
        }
    }

    /// The message as JSON.
    pub fn to_value(&self) -> Value {
        let mut object = Map::new();
        object.insert("jsonrpc".into(), "2.0".into());
        match self {
            Message::Request(request) => {
                object.insert("id".into(), request.id.to_value());
                object.insert("method".into(), request.method.clone().into());
                if let Some(params) = &request.params {
                    object.insert("params".into(), params.clone());
                }
            }
            Message::Notification(notification) => {
                object.insert("method".into(), notification.method.clone().into());
                if let Some(params) = &notification.params {
                    object.insert("params".into(), params.clone());
                }
            }
            Message::Response(response) => {
                object.insert("id".into(), response.id.as_ref().map_or(Value::Null, Id::to_value));
                match &response.outcome {
                    Ok(result) => object.insert("result".into(), result.clone()),
                    Err(error) => object.insert("error".into(), error.clone()),
                };
            }
        }
        Value::Object(object)
    }

    /// The message as one line of JSON (no newline inside, as stdio frames it).
    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }

    /// The id of a response, if this is one.
    pub fn response_id(&self) -> Option<&Id> {
        match self {
            Message::Response(response) => response.id.as_ref(),
            _ => None,
        }
    }
}

impl Response {
    /// An error response with `code` and `message`.
    pub fn error(id: Id, code: i64, message: impl Into<String>) -> Self {
        Response { id: Some(id), outcome: Err(json!({"code": code, "message": message.into()})) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_message_is_read_and_written_back_as_it_came() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"b":1,"a":2}}}"#,
            r#"{"jsonrpc":"2.0","id":"abc","method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}"#,
        ];
        for line in lines {
            let messages = decode(line.as_bytes()).unwrap();
            assert_eq!(messages.len(), 1);
            assert_eq!(messages[0].to_json(), line, "written back unchanged, argument order kept");
        }
    }

    #[test]
    fn string_and_number_ids_differ_and_print_as_their_text() {
        let number = Id::from_value(&json!(1)).unwrap();
        let text = Id::from_value(&json!("1")).unwrap();
        assert_ne!(number, text);
        assert_eq!((number.to_string(), text.to_string()), ("1".to_owned(), "1".to_owned()));
        assert_eq!(text.to_value(), json!("1"));
    }

    #[test]
    fn a_batch_is_read_as_its_messages() {
        let batch = br#"[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":2,"method":"b"}]"#;
        let messages = decode(batch).unwrap();
        assert!(matches!(&messages[..], [Message::Notification(_), Message::Request(_)]));
    }

    #[test]
    fn what_is_not_json_rpc_is_refused_with_the_code_that_says_so() {
        assert!(matches!(decode(b"{"), Err(Invalid::Json(_))));
        for bad in [&b"[]"[..], b"3", br#"{"id":{},"method":"m"}"#, br#"{"id":1}"#, br#"{"method":2}"#] {
            let error = decode(bad).unwrap_err();
            assert!(matches!(error, Invalid::Shape(_)), "{bad:?}");
            let Message::Response(Response { outcome: Err(e), .. }) = error.response() else { panic!() };
            assert_eq!(e["code"], INVALID_REQUEST);
        }
    }
}
