//! `pattern`: a regular expression over the rendered call, one argument, one key of the tool's
//! metadata (an MCP server's tool annotations), or a review's output.

use std::fmt;

use regex::Regex;
use serde_json::Value;

use super::{ParamError, Params, Subject, deny_unknown, opt_bool, opt_decision, opt_str};
use crate::call::{Answer, Decision, Kind};
use crate::render;

/// The step's name in a policy file.
pub const NAME: &str = "pattern";

/// What the expression is matched against.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    /// The call as Inspect renders it: `name(k='v', …)`.
    Call,
    /// The value of one argument: a string as it is, anything else rendered as Inspect renders it.
    Argument(String),
    /// The value of one key of the tool's metadata (an MCP tool annotation such as
    /// `destructiveHint`), rendered as JSON unless a string.
    Metadata(String),
    /// The raw output of the tool (review only).
    Output,
}

/// Answers `decision` when `regex` is found in the target, and escalates otherwise.
#[derive(Debug, Clone)]
pub struct Pattern {
    regex: Regex,
    target: Target,
    decision: Decision,
    explanation: Option<String>,
}

impl Pattern {
    /// Reads `regex` (required), `argument`, `metadata` or `output: true` (review only), `decision`
    /// (default: reject for approval, terminate for review) and `explanation`.
    pub fn from_params(kind: Kind, params: &Params) -> Result<Self, ParamError> {
        deny_unknown(NAME, params, &["regex", "argument", "metadata", "output", "decision", "explanation"])?;
        let source = opt_str(params, "regex")?.ok_or_else(|| ParamError::at("regex", "'pattern' needs a 'regex'"))?;
        let regex = Regex::new(source).map_err(|e| ParamError::at("regex", format!("bad regular expression: {e}")))?;
        let output = opt_bool(params, "output")?.unwrap_or(false);
        let argument = opt_str(params, "argument")?;
        let metadata = opt_str(params, "metadata")?;
        if usize::from(argument.is_some()) + usize::from(metadata.is_some()) + usize::from(output) > 1 {
            let key = if output { "output" } else { "metadata" };
            return Err(ParamError::at(key, "give one of 'argument', 'metadata' and 'output', not several"));
        }
        let target = match (argument, metadata, output) {
            (Some(name), _, _) => Target::Argument(name.to_owned()),
            (_, Some(key), _) => Target::Metadata(key.to_owned()),
            (_, _, true) if kind == Kind::Approval => {
                return Err(ParamError::at(
                    "output",
                    "'output' exists only for reviews: an approval runs before the tool",
                ));
            }
            (_, _, true) => Target::Output,
            (None, None, false) => Target::Call,
        };
        let decision = opt_decision(params, "decision", kind)?.unwrap_or(kind.fail_closed());
        if decision == Decision::Escalate {
            return Err(ParamError::at(
                "decision",
                "a pattern escalates anyway when it does not match; give a decision",
            ));
        }
        Ok(Pattern { regex, target, decision, explanation: opt_str(params, "explanation")?.map(str::to_owned) })
    }

    /// The configured decision on a match; escalation otherwise.
    pub fn decide(&self, subject: &Subject<'_>) -> Answer {
        let rendered_argument;
        let text = match &self.target {
            Target::Call => subject.rendered,
            Target::Output => subject.output.unwrap_or(""),
            Target::Argument(name) => match subject.call.arguments.get(name) {
                None => return Answer::escalate(format!("The call has no argument '{name}'.")),
                Some(Value::String(s)) => s.as_str(),
                Some(other) => {
                    rendered_argument = render::format_value(other);
                    rendered_argument.as_str()
                }
            },
            Target::Metadata(key) => match subject.metadata.and_then(|metadata| metadata.get(key)) {
                None => return Answer::escalate(format!("The tool's metadata has no '{key}'.")),
                Some(Value::String(s)) => s.as_str(),
                Some(other) => {
                    rendered_argument = other.to_string();
                    rendered_argument.as_str()
                }
            },
        };
        if self.regex.is_match(text) {
            match &self.explanation {
                Some(explanation) => Answer::new(self.decision, explanation.clone()),
                None => Answer::new(self.decision, format!("Matched /{}/ in the {}.", self.regex, self.target)),
            }
        } else {
            Answer::escalate(format!("No match for /{}/ in the {}.", self.regex, self.target))
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pattern (/{}/ in the {}: {})", self.regex, self.target, self.decision)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Call => f.write_str("call"),
            Target::Argument(name) => write!(f, "argument '{name}'"),
            Target::Metadata(key) => write!(f, "tool's '{key}'"),
            Target::Output => f.write_str("output"),
        }
    }
}
