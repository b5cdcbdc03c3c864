//! Claude Code's hooks, mapped to the fleet once, for the gateway's hook route and for
//! `airlock hook`: a `PreToolUse` hook's input becomes an approval request and the decision
//! the hook's `permissionDecision`; a `PostToolUse` hook's input becomes a review request and
//! the decision a `block` or nothing. Pure: no I/O.
//!
//! The input is the JSON Claude Code writes (`session_id`, `transcript_path`, `cwd`,
//! `permission_mode`, `hook_event_name`, `tool_name`, `tool_input`, `tool_use_id`, and for
//! `PostToolUse` `tool_response`); fields it adds later are ignored. The call is `tool_name`
//! with `tool_input` as its arguments and `tool_use_id` as its id; the session is the run
//! (a sub-agent's `agent_id` the sample, else `main`); the working directory and permission
//! mode are the context a person sees beside the call, and its metadata (`pattern`'s
//! `metadata: permission_mode`).
//!
//! | decision | `PreToolUse` | `PostToolUse` |
//! |---|---|---|
//! | approve / continue | `allow` | `{}` |
//! | modify | `allow` with `updatedInput` | `block` |
//! | reject | `deny`, or `ask` when every matching step escalated and the hook asked for it ([`Escalated::Ask`]) | `block` |
//! | terminate | `deny`, `continue: false` | `block`, `continue: false` |
//! | none (refused, failed, timed out) | `deny` | `block` |
//!
//! The reason is the decision's explanation: the text the policy lets the model see.

use std::time::Duration;

use airlock_contract::v1;
use airlock_policy::chain::POLICY;
use airlock_policy::{Call, Decision, Kind};
use airlock_records::view::DecisionView;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::answer::ErrorBody;
use crate::decisions::Outcome;
use crate::submission::{Invalid, Origin, PolicyChoice, Submission};

/// The sample of a call made by the session's main agent (not a sub-agent).
pub const MAIN_AGENT: &str = "main";

/// The hook events the fleet answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Before a tool call runs: an approval.
    PreToolUse,
    /// After it returned: a review.
    PostToolUse,
}

impl Event {
    /// The event's name in `hook_event_name` and `hookEventName`.
    pub fn name(self) -> &'static str {
        match self {
            Event::PreToolUse => "PreToolUse",
            Event::PostToolUse => "PostToolUse",
        }
    }

    /// The chain the event asks.
    pub fn kind(self) -> Kind {
        match self {
            Event::PreToolUse => Kind::Approval,
            Event::PostToolUse => Kind::Review,
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [Event::PreToolUse, Event::PostToolUse].into_iter().find(|event| event.name() == name)
    }

    /// The event a body names, if it is a JSON object naming one: what a fail-closed answer
    /// to a body that is otherwise unusable is shaped by.
    pub fn of(body: &[u8]) -> Option<Self> {
        let value: Value = serde_json::from_slice(body).ok()?;
        Event::from_name(value.get("hook_event_name")?.as_str()?)
    }
}

/// What a reject is answered with when every step that matched the call escalated (Inspect's
/// default reject, "No approval granted", by `policy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Escalated {
    /// `deny`, as Inspect decides.
    #[default]
    Deny,
    /// `ask`: the person at Claude Code decides, in its own prompt.
    Ask,
}

/// The hook route's query: `?policy=NAME&timeout=SECONDS&escalated=deny|ask`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookQuery {
    /// The named policy the calls are decided by.
    pub policy: String,
    /// How long the fleet may take, in seconds; the gateway's default when absent, at most its
    /// longest wait.
    pub timeout: Option<f64>,
    /// What a chain whose every step escalated answers.
    #[serde(default)]
    pub escalated: Escalated,
}

impl HookQuery {
    /// The wait: `timeout` (a number of seconds above 0), else `default`, at most `max`.
    pub fn wait(&self, default: Duration, max: Duration) -> Result<Duration, Invalid> {
        match self.timeout {
            None => Ok(default.min(max)),
            Some(seconds) if seconds.is_finite() && seconds > 0.0 => {
                Ok(Duration::try_from_secs_f64(seconds).unwrap_or(max).min(max))
            }
            Some(_) => Err(Invalid::field("timeout", "must be a number of seconds above 0")),
        }
    }
}

/// One hook input, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct HookInput {
    /// Which hook.
    pub event: Event,
    /// The Claude Code session: the run.
    pub session_id: String,
    /// The sub-agent the call is made in, if any: the sample.
    pub agent_id: Option<String>,
    /// The session's working directory.
    pub cwd: String,
    /// The session's permission mode (`default`, `plan`, `acceptEdits`, …), if given.
    pub permission_mode: Option<String>,
    /// The call: `tool_name`, `tool_input`, `tool_use_id`.
    pub call: Call,
    /// For `PostToolUse`: what the tool returned.
    pub tool_response: Value,
}

/// Reads a hook's input: a JSON object naming `PreToolUse` or `PostToolUse`.
pub fn parse(body: &[u8]) -> Result<HookInput, Invalid> {
    let value: Value = serde_json::from_slice(body).map_err(|e| Invalid::body(format!("the body is not JSON: {e}")))?;
    let Value::Object(object) = value else { return Err(Invalid::body("the body must be a JSON object")) };
    let text = |key: &str| -> Result<String, Invalid> {
        match object.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(Value::String(_)) => Err(Invalid::field(key, "must not be empty")),
            None | Some(Value::Null) => Err(Invalid::field(key, "is required")),
            Some(_) => Err(Invalid::field(key, "must be a string")),
        }
    };
    let optional = |key: &str| -> Result<Option<String>, Invalid> {
        match object.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone()).filter(|s| !s.is_empty())),
            Some(_) => Err(Invalid::field(key, "must be a string")),
        }
    };
    let event = Event::from_name(&text("hook_event_name")?)
        .ok_or_else(|| Invalid::field("hook_event_name", "must be PreToolUse or PostToolUse"))?;
    let arguments = match object.get("tool_input") {
        Some(Value::Object(arguments)) => arguments.clone(),
        None | Some(Value::Null) => return Err(Invalid::field("tool_input", "is required (a JSON object)")),
        Some(_) => return Err(Invalid::field("tool_input", "must be a JSON object")),
    };
    let call = Call { id: text("tool_use_id")?, function: text("tool_name")?, arguments };
    Ok(HookInput {
        event,
        session_id: text("session_id")?,
        agent_id: optional("agent_id")?,
        cwd: optional("cwd")?.unwrap_or_default(),
        permission_mode: optional("permission_mode")?,
        call,
        tool_response: object.get("tool_response").cloned().unwrap_or(Value::Null),
    })
}

impl HookInput {
    /// The request for this hook's call, decided by `policy` within `timeout`.
    pub fn submission(&self, policy: PolicyChoice, timeout: Duration) -> Submission {
        let output = match &self.tool_response {
            Value::Null => String::new(),
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let mut context = format!("Claude Code session {}\ncwd: {}", self.session_id, self.cwd);
        if let Some(mode) = &self.permission_mode {
            context.push_str(&format!("\npermission mode: {mode}"));
        }
        Submission {
            kind: self.event.kind(),
            call: self.call.clone(),
            messages: Vec::new(),
            output,
            policy,
            origin: Origin {
                run: self.session_id.clone(),
                sample: self.agent_id.clone().unwrap_or_else(|| MAIN_AGENT.to_owned()),
                epoch: 1,
            },
            timeout: Some(timeout),
            callback: None,
            context: Some(v1::ToolCallContent { title: None, format: "text".into(), content: context }),
            metadata: Some(self.metadata()),
        }
    }

    /// The session's facts a policy may match with `pattern`'s `metadata`: `cwd` and
    /// `permission_mode` (when the hook gave one).
    fn metadata(&self) -> Map<String, Value> {
        let mut metadata = Map::new();
        metadata.insert("cwd".into(), Value::String(self.cwd.clone()));
        if let Some(mode) = &self.permission_mode {
            metadata.insert("permission_mode".into(), Value::String(mode.clone()));
        }
        metadata
    }
}

// === the hook's output ===

/// The hook's output for `outcome`: the decision mapped as the module's table says, or a
/// fail-closed answer with why nothing was decided.
pub fn answer(event: Event, outcome: &Outcome, escalated: Escalated) -> Value {
    match outcome {
        Outcome::Decided(view) => decided(event, view, escalated),
        other => {
            let why = ErrorBody::of_outcome(other).map_or_else(String::new, |e| format!("{}: {}", e.code, e.message));
            fail_closed(Some(event), &format!("Airlock could not decide this call ({why})"))
        }
    }
}

fn decided(event: Event, view: &DecisionView, escalated: Escalated) -> Value {
    let reason = view.explanation.clone().filter(|e| !e.trim().is_empty());
    let said = |default: &str| reason.clone().unwrap_or_else(|| default.to_owned());
    match (event, view.decision) {
        (Event::PreToolUse, Some(Decision::Approve)) => permission("allow", reason.as_deref()),
        (Event::PreToolUse, Some(Decision::Modify)) => match view.modified.as_ref().map(|m| &m.arguments) {
            Some(Value::Object(arguments)) => {
                let mut output = permission("allow", reason.as_deref());
                output["hookSpecificOutput"]["updatedInput"] = Value::Object(arguments.clone());
                output
            }
            _ => fail_closed(Some(event), "Airlock answered modify without the modified call"),
        },
        (Event::PreToolUse, Some(Decision::Reject)) if escalated == Escalated::Ask && every_step_escalated(view) => {
            permission("ask", reason.as_deref())
        }
        (Event::PostToolUse, Some(Decision::Continue | Decision::Approve)) => json!({}),
        (_, Some(Decision::Terminate)) => {
            let reason = said("Airlock ended the session.");
            let mut output = fail_closed(Some(event), &reason);
            output["continue"] = Value::Bool(false);
            output["stopReason"] = Value::String(reason);
            output
        }
        _ => fail_closed(Some(event), &said("Airlock did not approve this call.")),
    }
}

/// Whether the decision is the policy's default reject after every matching step escalated.
fn every_step_escalated(view: &DecisionView) -> bool {
    let mut steps = view.trail.iter().filter(|entry| entry.approver != POLICY).peekable();
    view.approver.as_deref() == Some(POLICY)
        && steps.peek().is_some()
        && steps.all(|entry| entry.decision == Some(Decision::Escalate))
}

fn permission(decision: &str, reason: Option<&str>) -> Value {
    let mut specific = Map::new();
    specific.insert("hookEventName".into(), Event::PreToolUse.name().into());
    specific.insert("permissionDecision".into(), decision.into());
    if let Some(reason) = reason {
        specific.insert("permissionDecisionReason".into(), reason.into());
    }
    json!({ "hookSpecificOutput": specific })
}

/// The output that keeps the call from running (`PreToolUse`: `deny`) or its result from
/// going on unblocked (`PostToolUse`, or an event not known: `block`), saying `reason`.
pub fn fail_closed(event: Option<Event>, reason: &str) -> Value {
    match event {
        Some(Event::PreToolUse) => permission("deny", Some(reason)),
        Some(Event::PostToolUse) | None => json!({ "decision": "block", "reason": reason }),
    }
}

#[cfg(test)]
mod tests;
