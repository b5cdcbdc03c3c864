//! The body of `POST /v1/approvals` and `POST /v1/reviews`, read and checked field by field
//! into a [`Submission`], and the wire request it becomes.
//!
//! Every malformed field is refused with its path and what it must be (`call.arguments must
//! be a JSON object`), never with a parser's guess. Pure: no I/O.

use std::time::Duration;

use airlock_client::request::build;
use airlock_contract::v1;
use airlock_policy::{Call, Kind};
use airlock_records::convert::call_to_wire;
use serde_json::{Map, Value};

/// The longest `callback_url`.
pub const MAX_URL: usize = 2048;

/// The longest `Idempotency-Key`.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

/// A request for one call, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    /// Approval or review.
    pub kind: Kind,
    /// The call.
    pub call: Call,
    /// The conversation, ending with the assistant message that carries the call.
    pub messages: Vec<v1::ChatMessage>,
    /// For a review: the tool's output.
    pub output: String,
    /// The policy, by name or inline.
    pub policy: PolicyChoice,
    /// Where the call comes from.
    pub origin: Origin,
    /// How long the fleet may take; `None`: the gateway's default.
    pub timeout: Option<Duration>,
    /// Where the decision is also posted.
    pub callback: Option<reqwest::Url>,
    /// What a person sees beside the call (the view's context), if anything.
    pub context: Option<v1::ToolCallContent>,
    /// What the caller knows about the tool, for `pattern`'s `metadata` to match.
    pub metadata: Option<Map<String, Value>>,
}

/// The policy a submission is decided by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyChoice {
    /// A policy the workers hold, by name.
    Named(String),
    /// A policy document sent with the request.
    Inline(String),
}

/// The run, sample and epoch a call belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The run.
    pub run: String,
    /// The sample (a number is taken as its text).
    pub sample: String,
    /// The epoch, from 1.
    pub epoch: u32,
}

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// Whether the body is not a JSON object at all (`400`) rather than a field being wrong
    /// (`422`).
    pub unreadable: bool,
    /// The field at fault, as a path (`call.id`), when one is.
    pub field: Option<String>,
    /// What is wrong, for people.
    pub message: String,
}

impl Invalid {
    pub(crate) fn body(message: impl Into<String>) -> Self {
        Invalid { unreadable: true, field: None, message: message.into() }
    }

    pub(crate) fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        let field = field.into();
        let message = format!("{field} {}", message.into());
        Invalid { unreadable: false, field: Some(field), message }
    }
}

/// What the gateway allows beyond the body's own rules.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// The longest `timeout`.
    pub max_timeout: Duration,
}

const FIELDS: [&str; 7] = ["call", "messages", "output", "policy", "origin", "timeout", "callback_url"];

/// Reads a body of `kind`.
pub fn parse(kind: Kind, body: &[u8], bounds: Bounds) -> Result<Submission, Invalid> {
    let value: Value = serde_json::from_slice(body).map_err(|e| Invalid::body(format!("the body is not JSON: {e}")))?;
    let Value::Object(object) = value else { return Err(Invalid::body("the body must be a JSON object")) };
    if let Some(unknown) = object.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(Invalid::field(unknown.as_str(), "is not a field of this request"));
    }
    let call = parse_call(object.get("call"))?;
    // Top-level fields are left out for none: `null` is no value the document allows.
    let messages = match object.get("messages") {
        None => Vec::new(),
        Some(Value::Array(list)) => list.iter().enumerate().map(|(i, m)| message(i, m)).collect::<Result<_, _>>()?,
        Some(_) => return Err(Invalid::field("messages", "must be an array of messages")),
    };
    let output = match (kind, object.get("output")) {
        (_, None) => String::new(),
        (Kind::Approval, Some(_)) => return Err(Invalid::field("output", "is only for reviews (POST /v1/reviews)")),
        (Kind::Review, Some(Value::String(output))) => output.clone(),
        (Kind::Review, Some(_)) => return Err(Invalid::field("output", "must be a string")),
    };
    let policy = parse_policy(object.get("policy"))?;
    let origin = parse_origin(object.get("origin"))?;
    let timeout = match object.get("timeout") {
        None => None,
        Some(value) => {
            let max = bounds.max_timeout.as_secs_f64();
            let seconds = value.as_f64().filter(|s| s.is_finite() && *s > 0.0 && *s <= max);
            let seconds = seconds.ok_or_else(|| {
                Invalid::field("timeout", format!("must be a number of seconds above 0 and at most {max}"))
            })?;
            Some(Duration::from_secs_f64(seconds))
        }
    };
    let callback = match object.get("callback_url") {
        None => None,
        Some(Value::String(url)) => Some(parse_callback(url)?),
        Some(_) => return Err(Invalid::field("callback_url", "must be a string")),
    };
    Ok(Submission { kind, call, messages, output, policy, origin, timeout, callback, context: None, metadata: None })
}

/// Reads an `Idempotency-Key`: 1 to [`MAX_IDEMPOTENCY_KEY`] visible ASCII characters.
pub fn idempotency_key(value: &[u8]) -> Result<String, Invalid> {
    let ok = !value.is_empty() && value.len() <= MAX_IDEMPOTENCY_KEY && value.iter().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(String::from_utf8_lossy(value).into_owned())
    } else {
        Err(Invalid::body(format!("Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters")))
    }
}

fn string<'a>(object: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a str, Invalid> {
    match object.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err(Invalid::field(path, "must not be empty")),
        None | Some(Value::Null) => Err(Invalid::field(path, "is required")),
        Some(_) => Err(Invalid::field(path, "must be a string")),
    }
}

fn object<'a>(value: Option<&'a Value>, path: &str) -> Result<&'a Map<String, Value>, Invalid> {
    match value {
        Some(Value::Object(object)) => Ok(object),
        None | Some(Value::Null) => Err(Invalid::field(path, "is required")),
        Some(_) => Err(Invalid::field(path, "must be a JSON object")),
    }
}

fn only(object: &Map<String, Value>, allowed: &[&str], path: &str) -> Result<(), Invalid> {
    match object.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(unknown) => Err(Invalid::field(format!("{path}.{unknown}"), "is not a field of this request")),
        None => Ok(()),
    }
}

fn parse_call(value: Option<&Value>) -> Result<Call, Invalid> {
    let call = object(value, "call")?;
    only(call, &["id", "function", "arguments"], "call")?;
    call_at(call, "call")
}

fn call_at(call: &Map<String, Value>, path: &str) -> Result<Call, Invalid> {
    let id = string(call, "id", &format!("{path}.id"))?;
    let function = string(call, "function", &format!("{path}.function"))?;
    let arguments = match call.get("arguments") {
        Some(Value::Object(arguments)) => arguments.clone(),
        None => return Err(Invalid::field(format!("{path}.arguments"), "is required (a JSON object)")),
        Some(_) => return Err(Invalid::field(format!("{path}.arguments"), "must be a JSON object")),
    };
    Ok(Call { id: id.to_owned(), function: function.to_owned(), arguments })
}

fn parse_policy(value: Option<&Value>) -> Result<PolicyChoice, Invalid> {
    let policy = object(value, "policy")?;
    only(policy, &["name", "inline"], "policy")?;
    match (policy.contains_key("name"), policy.contains_key("inline")) {
        (true, false) => Ok(PolicyChoice::Named(string(policy, "name", "policy.name")?.to_owned())),
        (false, true) => Ok(PolicyChoice::Inline(string(policy, "inline", "policy.inline")?.to_owned())),
        _ => Err(Invalid::field("policy", "must have exactly one of name or inline")),
    }
}

fn parse_origin(value: Option<&Value>) -> Result<Origin, Invalid> {
    let origin = object(value, "origin")?;
    only(origin, &["run", "sample", "epoch"], "origin")?;
    let run = string(origin, "run", "origin.run")?.to_owned();
    let sample = match origin.get("sample") {
        Some(Value::Number(n)) => {
            integer(n).ok_or_else(|| Invalid::field("origin.sample", "must be a string or an integer"))?
        }
        _ => string(origin, "sample", "origin.sample")?.to_owned(),
    };
    let epoch = match origin.get("epoch") {
        None => 1,
        Some(value) => value
            .as_number()
            .and_then(integer)
            .and_then(|e| e.parse::<u32>().ok())
            .filter(|e| *e >= 1)
            .ok_or_else(|| Invalid::field("origin.epoch", "must be an integer from 1 to 4294967295"))?,
    };
    Ok(Origin { run, sample, epoch })
}

/// A JSON integer as its digits: written as digits (kept as written, of any size, by
/// serde_json's arbitrary precision), or as a number JSON Schema also counts as an integer
/// (`816.0`, `8.16e2`) within the range a float holds exactly.
fn integer(number: &serde_json::Number) -> Option<String> {
    let text = number.to_string();
    let unsigned = text.strip_prefix('-').unwrap_or(&text);
    if !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return Some(text);
    }
    let value = number.as_f64().filter(|v| v.fract() == 0.0 && v.abs() <= 9_007_199_254_740_992.0)?;
    // Exact: a whole float of at most 2^53 converts without loss.
    Some(format!("{}", value as i64))
}

fn parse_callback(url: &str) -> Result<reqwest::Url, Invalid> {
    if url.len() > MAX_URL {
        return Err(Invalid::field("callback_url", format!("must be at most {MAX_URL} characters")));
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| Invalid::field("callback_url", format!("is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(Invalid::field("callback_url", "must be an http:// or https:// URL"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(Invalid::field("callback_url", "must name a host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(Invalid::field("callback_url", "must not carry credentials"));
    }
    Ok(parsed)
}

/// One message of `messages`: `{role, content, tool_calls?, tool_call_id?, function?, error?,
/// id?}`, `content` a string or a list of parts (`{type: "text", text}` and others, which
/// travel as the message's whole JSON).
fn message(index: usize, value: &Value) -> Result<v1::ChatMessage, Invalid> {
    let path = format!("messages[{index}]");
    let message = object(Some(value), &path)?;
    only(message, &["role", "content", "tool_calls", "tool_call_id", "function", "error", "id"], &path)?;
    let role = string(message, "role", &format!("{path}.role"))?;
    if !matches!(role, "system" | "user" | "assistant" | "tool") {
        return Err(Invalid::field(format!("{path}.role"), "must be system, user, assistant or tool"));
    }
    let mut wire = v1::ChatMessage { role: role.to_owned(), ..Default::default() };
    match message.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => wire.text.clone_from(text),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            let mut other = false;
            for (i, part) in parts.iter().enumerate() {
                let part = object(Some(part), &format!("{path}.content[{i}]"))?;
                let part_path = format!("{path}.content[{i}]");
                let text = match part.get("text") {
                    None => None,
                    Some(Value::String(text)) => Some(text.as_str()),
                    Some(_) => return Err(Invalid::field(format!("{part_path}.text"), "must be a string")),
                };
                match (part.get("type"), text) {
                    (Some(Value::String(kind)), Some(text)) if kind == "text" => texts.push(text),
                    (Some(Value::String(_)), _) => other = true,
                    (None, _) => return Err(Invalid::field(format!("{part_path}.type"), "is required")),
                    (Some(_), _) => return Err(Invalid::field(format!("{part_path}.type"), "must be a string")),
                }
            }
            wire.text = texts.join("\n");
            if other {
                wire.raw_json = value.to_string();
            }
        }
        Some(_) => return Err(Invalid::field(format!("{path}.content"), "must be a string or a list of parts")),
    }
    match message.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (i, call) in calls.iter().enumerate() {
                let call_path = format!("{path}.tool_calls[{i}]");
                let call = object(Some(call), &call_path)?;
                only(call, &["id", "function", "arguments"], &call_path)?;
                wire.tool_calls.push(call_to_wire(&call_at(call, &call_path)?));
            }
        }
        Some(_) => return Err(Invalid::field(format!("{path}.tool_calls"), "must be an array of calls")),
    }
    let optional = |key: &str| -> Result<Option<String>, Invalid> {
        match message.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(Invalid::field(format!("{path}.{key}"), "must be a string")),
        }
    };
    wire.tool_call_id = optional("tool_call_id")?;
    wire.function = optional("function")?;
    wire.id = optional("id")?;
    if let Some(error) = message.get("error").filter(|e| !e.is_null()) {
        let error_path = format!("{path}.error");
        let error = object(Some(error), &error_path)?;
        only(error, &["type", "message"], &error_path)?;
        wire.error = Some(v1::ToolCallError {
            r#type: string(error, "type", &format!("{error_path}.type"))?.to_owned(),
            message: match error.get("message") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(message)) => message.clone(),
                Some(_) => return Err(Invalid::field(format!("{error_path}.message"), "must be a string")),
            },
        });
    }
    Ok(wire)
}

// === impl Submission ===

impl Submission {
    /// The call's key as the caller gave it, naming no tenant: one record per caller, key and
    /// kind.
    pub fn call_key(&self) -> v1::CallKey {
        v1::CallKey {
            run_id: self.origin.run.clone(),
            sample_id: self.origin.sample.clone(),
            epoch: self.origin.epoch,
            tool_call_id: self.call.id.clone(),
            tenant: String::new(),
        }
    }

    /// The key a retry without an `Idempotency-Key` is recognised by: the kind and call key.
    pub fn default_idempotency_key(&self) -> String {
        self.call_key().correlation_id(airlock_records::convert::kind_to_wire(self.kind))
    }

    /// The wire request (the client fills the reply queue, the times and the runner), its key
    /// naming no tenant: [`crate::state::Shared::submit`] puts it in its caller's.
    pub fn to_request(&self) -> v1::Request {
        let policy = match &self.policy {
            PolicyChoice::Named(name) => v1::policy::Source::Name(name.clone()),
            PolicyChoice::Inline(text) => v1::policy::Source::Inline(text.clone()),
        };
        // The assistant message's text, when the conversation ends with it.
        let text = self.messages.last().filter(|m| m.role == "assistant").map_or("", |m| m.text.as_str());
        let mut request = build(self.call_key(), &self.call, self.kind, policy, text, &self.output);
        let view = self.context.clone().map(|context| v1::ToolCallView { context: Some(context), call: None });
        airlock_client::request::describe(&mut request, view, self.metadata.as_ref());
        match &mut request.body {
            Some(v1::request::Body::Approval(approval)) => approval.history.clone_from(&self.messages),
            Some(v1::request::Body::Review(review)) => review.history.clone_from(&self.messages),
            None => {}
        }
        request.origin = Some(v1::Origin {
            run_id: self.origin.run.clone(),
            sample_id: self.origin.sample.clone(),
            epoch: self.origin.epoch,
            ..Default::default()
        });
        request
    }
}

#[cfg(test)]
mod tests;
