//! The steps of a chain: built-in steps decide in process, the rest are external.
//!
//! Layout: one file per step, each with the same shape: `from_params` reads the step's
//! parameters (every key of the policy entry besides `name` and `tools`), `decide` answers
//! for one call, and `Display` names it in logs.
//!
//! - [`auto`]: a fixed decision, like Inspect's `auto` approver.
//! - [`bash_allowlist`]: approves shell command lines built only from allowed commands.
//! - [`claude_permissions`]: decides Claude Code tool calls as Claude Code's permission rules do.
//! - [`pattern`]: a regular expression over the call, one argument or a review's output.
//! - [`human`]: an external step bound for a human queue.
//! - [`external`]: any other name, an external step bound for that name's queue.
//!
//! One parameter belongs to every step and is read by the chain, never by the step:
//! [`MODEL_EXPLANATION`] ([`take_model_explanation`]).

pub mod auto;
pub mod bash_allowlist;
pub mod claude_permissions;
pub mod external;
pub mod human;
pub mod pattern;

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::call::{Answer, Call, Kind};
use crate::limits;

/// The parameter of any step that fixes what the model is shown when the step's answer
/// rejects or terminates the call, instead of the step's own explanation.
pub const MODEL_EXPLANATION: &str = "model_explanation";

/// A step's parameters: every key of its policy entry other than `name` and `tools`.
pub type Params = Map<String, Value>;

/// What a built-in step looks at.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The call, as executed for a review.
    pub call: &'a Call,
    /// The call rendered as Inspect's `format_function_call` renders it.
    pub rendered: &'a str,
    /// Approval or review.
    pub kind: Kind,
    /// The text of the assistant message that carries the call.
    pub message: &'a str,
    /// For a review, the raw output of the tool.
    pub output: Option<&'a str>,
    /// What the runner knows about the tool, such as an MCP server's tool annotations
    /// (`readOnlyHint`, `destructiveHint`, …); the model does not set it.
    pub metadata: Option<&'a Map<String, Value>>,
}

/// A step's parameters are wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ParamError {
    /// The parameter at fault, if one is.
    pub key: Option<String>,
    /// What is wrong, in words.
    pub message: String,
}

/// One step of a chain: it decides in process, or it runs elsewhere and the chain waits.
#[derive(Debug, Clone)]
pub enum Step {
    /// Answers at once, in the worker.
    BuiltIn(BuiltIn),
    /// Suspends the chain until its answer comes back.
    External(ExternalStep),
}

/// A step that decides in process.
#[derive(Debug, Clone)]
pub enum BuiltIn {
    /// A fixed decision.
    Auto(auto::Auto),
    /// Shell command allow-list.
    BashAllowlist(bash_allowlist::BashAllowlist),
    /// Claude Code's permission rules.
    ClaudePermissions(claude_permissions::ClaudePermissions),
    /// A regular expression.
    Pattern(pattern::Pattern),
}

/// A step that runs in a queue of its own.
#[derive(Debug, Clone, PartialEq)]
pub enum ExternalStep {
    /// A human queue.
    Human(human::Human),
    /// Any other name: a step queue served by a plugin or a model monitor.
    Named(external::External),
}

/// Where an external step runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// The human queue of a pool.
    Human {
        /// The pool.
        pool: String,
        /// The choices a person is offered.
        choices: Vec<crate::call::Decision>,
        /// How many distinct reviewers must approve.
        approvals: u32,
    },
    /// The queue of a named step.
    Step {
        /// The step's name.
        name: String,
    },
}

// === impl Step ===

impl Step {
    /// Builds the step named `name` of a chain of `kind` from its parameters.
    pub fn from_params(name: &str, kind: Kind, params: &Params) -> Result<Self, ParamError> {
        Ok(match name {
            auto::NAME => Step::BuiltIn(BuiltIn::Auto(auto::Auto::from_params(kind, params)?)),
            bash_allowlist::NAME => {
                Step::BuiltIn(BuiltIn::BashAllowlist(bash_allowlist::BashAllowlist::from_params(params)?))
            }
            claude_permissions::NAME => {
                Step::BuiltIn(BuiltIn::ClaudePermissions(claude_permissions::ClaudePermissions::from_params(params)?))
            }
            pattern::NAME => Step::BuiltIn(BuiltIn::Pattern(pattern::Pattern::from_params(kind, params)?)),
            human::NAME => Step::External(ExternalStep::Human(human::Human::from_params(kind, params)?)),
            _ => Step::External(ExternalStep::Named(external::External::from_params(name, kind, params)?)),
        })
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::BuiltIn(step) => step.fmt(f),
            Step::External(step) => step.fmt(f),
        }
    }
}

// === impl BuiltIn ===

impl BuiltIn {
    /// The step's answer for one call.
    pub fn decide(&self, subject: &Subject<'_>) -> Answer {
        match self {
            BuiltIn::Auto(step) => step.decide(subject),
            BuiltIn::BashAllowlist(step) => step.decide(subject),
            BuiltIn::ClaudePermissions(step) => step.decide(subject),
            BuiltIn::Pattern(step) => step.decide(subject),
        }
    }
}

impl fmt::Display for BuiltIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuiltIn::Auto(step) => step.fmt(f),
            BuiltIn::BashAllowlist(step) => step.fmt(f),
            BuiltIn::ClaudePermissions(step) => step.fmt(f),
            BuiltIn::Pattern(step) => step.fmt(f),
        }
    }
}

// === impl ExternalStep ===

impl ExternalStep {
    /// Where the step runs.
    pub fn route(&self) -> Route {
        match self {
            ExternalStep::Human(step) => {
                Route::Human { pool: step.pool.clone(), choices: step.choices.clone(), approvals: step.approvals }
            }
            ExternalStep::Named(step) => Route::Step { name: step.name.clone() },
        }
    }

    /// The step's deadline settings.
    pub fn timeout(&self) -> &external::Timeout {
        match self {
            ExternalStep::Human(step) => &step.timeout,
            ExternalStep::Named(step) => &step.timeout,
        }
    }
}

impl fmt::Display for ExternalStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExternalStep::Human(step) => step.fmt(f),
            ExternalStep::Named(step) => step.fmt(f),
        }
    }
}

// === params helpers ===

impl ParamError {
    /// An error about one parameter.
    pub fn at(key: &str, message: impl Into<String>) -> Self {
        ParamError { key: Some(key.to_owned()), message: message.into() }
    }
}

/// Reads an optional string parameter.
pub fn opt_str<'a>(params: &'a Params, key: &str) -> Result<Option<&'a str>, ParamError> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ParamError::at(key, format!("'{key}' must be a string, not {}", type_name(other)))),
    }
}

/// Reads an optional boolean parameter.
pub fn opt_bool(params: &Params, key: &str) -> Result<Option<bool>, ParamError> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(ParamError::at(key, format!("'{key}' must be true or false, not {}", type_name(other)))),
    }
}

/// Reads an optional number parameter.
pub fn opt_f64(params: &Params, key: &str) -> Result<Option<f64>, ParamError> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            n.as_f64().map(Some).ok_or_else(|| ParamError::at(key, format!("'{key}' is not a usable number")))
        }
        Some(other) => Err(ParamError::at(key, format!("'{key}' must be a number, not {}", type_name(other)))),
    }
}

/// Reads an optional list of strings; a lone string counts as a list of one.
pub fn opt_str_list(params: &Params, key: &str) -> Result<Option<Vec<String>>, ParamError> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(vec![s.clone()])),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                other => Err(ParamError::at(key, format!("'{key}' must list strings, not {}", type_name(other)))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(ParamError::at(key, format!("'{key}' must be a list of strings, not {}", type_name(other)))),
    }
}

/// Reads an optional decision parameter and checks that `kind` allows it.
pub fn opt_decision(params: &Params, key: &str, kind: Kind) -> Result<Option<crate::call::Decision>, ParamError> {
    let Some(text) = opt_str(params, key)? else { return Ok(None) };
    let decision: crate::call::Decision = text.parse().map_err(|e: String| ParamError::at(key, e))?;
    if !kind.decisions().contains(&decision) {
        return Err(ParamError::at(
            key,
            format!("'{decision}' is not an answer {kind} allows (expected one of {})", list(kind.decisions())),
        ));
    }
    Ok(Some(decision))
}

/// Takes [`MODEL_EXPLANATION`] out of a step's parameters (the chain applies it; the step
/// never sees it): a string with something besides spaces, at most
/// [`limits::MAX_MODEL_EXPLANATION_CHARS`] characters.
pub fn take_model_explanation(params: &mut Params) -> Result<Option<Arc<str>>, ParamError> {
    let text = opt_str(params, MODEL_EXPLANATION)?.map(Arc::from);
    // The others keep their written order, which a step's task carries on.
    params.shift_remove(MODEL_EXPLANATION);
    if let Some(text) = &text {
        limits::check_model_explanation(text).map_err(|message| ParamError::at(MODEL_EXPLANATION, message))?;
    }
    Ok(text)
}

/// Fails on any parameter not in `known`, so a typo does not silently change a policy.
pub fn deny_unknown(step: &str, params: &Params, known: &[&str]) -> Result<(), ParamError> {
    match params.keys().find(|key| !known.contains(&key.as_str())) {
        None => Ok(()),
        Some(key) => Err(ParamError::at(
            key,
            format!(
                "unknown parameter '{key}' for step '{step}' (it takes: {}, {MODEL_EXPLANATION})",
                known.join(", ")
            ),
        )),
    }
}

/// The JSON type of a value, in words.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Decisions as a comma-separated list.
pub fn list(decisions: &[crate::call::Decision]) -> String {
    decisions.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(", ")
}
