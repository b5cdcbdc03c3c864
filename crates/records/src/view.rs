//! The JSON views of decisions: what `airlock request` and `airlock policy eval` print, and
//! the decision log's records, which `airlock audit` writes and `audit query` and
//! `airlock monitor calibrate` read.
//!
//! Field order is the output's order (the workspace keeps JSON maps in insertion order), so
//! these types print byte for byte what scripts and the Python suites already read. Reading
//! is lenient where older or hand-written logs leave fields out: every field but a
//! decision's `trail` has a default.

use std::borrow::Cow;

use airlock_contract::v1;
use airlock_policy::chain::{Outcome, POLICY, Policy, TrailEntry, Verdict};
use airlock_policy::{Decision, Kind};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::convert::{decision_from_wire, kind_from_wire};

/// A final decision as `airlock request` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionView {
    /// The decision; `unspecified` when the wire had none.
    #[serde(with = "decision_or_unspecified", default)]
    pub decision: Option<Decision>,
    /// Why.
    #[serde(default)]
    pub explanation: Option<String>,
    /// The deciding step's name, `policy`, or none when nothing matched a review.
    #[serde(default)]
    pub approver: Option<String>,
    /// The deciding step's index.
    #[serde(default)]
    pub step: Option<u32>,
    /// Every answer, in order.
    pub trail: Vec<TrailView<'static>>,
    /// Who decided: a worker, a plugin, a monitor, a person.
    #[serde(default)]
    pub decided_by: String,
    /// The decision's unique id.
    #[serde(default)]
    pub decision_id: String,
    /// The digest of the policy that decided.
    #[serde(default)]
    pub policy_digest: String,
    /// When the runner asked.
    #[serde(default)]
    pub requested_at_unix_ms: i64,
    /// When the decision was made.
    #[serde(default)]
    pub decided_at_unix_ms: i64,
    /// For `modify`: the call to run instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<ModifiedView>,
    /// The deciding answer's metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// One answer of a trail; `policy eval` borrows its names from the policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrailView<'a> {
    /// The step's name, or `policy`.
    pub approver: Cow<'a, str>,
    /// What it answered.
    #[serde(with = "decision_or_unspecified", default)]
    pub decision: Option<Decision>,
    /// Why.
    #[serde(default)]
    pub explanation: Option<Cow<'a, str>>,
    /// Who answered; recorded on the wire, so absent from `policy eval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The answer's metadata: a monitor's score and reason, which calibration reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// A modified call: the function and its new arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModifiedView {
    /// The function (the same as asked about).
    pub function: String,
    /// The arguments to run it with.
    pub arguments: Value,
}

/// What `airlock request` prints when the fleet refused the request (its `Error` reply).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedView {
    /// The refusal.
    pub error: Refusal,
}

/// A refusal's code and words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The wire `Error` code (see [`crate::code::ErrorCode`]).
    pub code: String,
    /// What went wrong.
    pub message: String,
}

/// A decision-log record: the decision as `airlock request` prints it, with the call's key,
/// its kind and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// The decision.
    #[serde(flatten)]
    pub decision: DecisionView,
    /// Approval or review.
    #[serde(with = "kind_name")]
    pub kind: Kind,
    /// The call decided.
    pub key: KeyView,
    /// The run, sample and runner the call came from.
    pub origin: OriginView,
}

/// A call's key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyView {
    /// The run.
    pub run_id: String,
    /// The sample.
    pub sample_id: String,
    /// The sample's epoch.
    pub epoch: u32,
    /// The tool call's id.
    pub tool_call_id: String,
}

/// Where a call came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginView {
    /// The run.
    pub run_id: String,
    /// The eval.
    pub eval_id: String,
    /// The task.
    pub task: String,
    /// The sample.
    pub sample_id: String,
    /// The sample's epoch.
    pub epoch: u32,
    /// The model under evaluation.
    pub model: String,
    /// The runner process.
    pub runner_id: String,
    /// The run's label for calibration (`honest`, `attack`); left out when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub eval_mode: String,
}

/// A run's label for calibration, as ControlArena's `EvalMode` names it: the wire's
/// `Origin.eval_mode`. An attack outranks an honest run (a trajectory with an attack step is an
/// attack's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EvalMode {
    /// The agent does its task.
    Honest,
    /// The agent also attempts a side task a monitor should catch.
    Attack,
}

impl EvalMode {
    /// The label as the wire and the decision log spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            EvalMode::Honest => "honest",
            EvalMode::Attack => "attack",
        }
    }

    /// The label `text` names, if any.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "honest" => Some(EvalMode::Honest),
            "attack" => Some(EvalMode::Attack),
            _ => None,
        }
    }
}

/// What `airlock policy eval` prints for one call, with names borrowed from the policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EvalView<'a> {
    /// The built-in steps decided.
    Decided(EvalDecided<'a>),
    /// The chain waits for an external step.
    Pending {
        /// The step it waits for.
        pending: PendingView<'a>,
        /// The answers so far.
        trail: Vec<TrailView<'a>>,
        /// The call as Inspect's globs see it.
        rendered: String,
    },
    /// The call could not be read, or a step's answer fails the sample.
    Failed {
        /// What went wrong.
        error: String,
        /// The call as Inspect's globs see it, when it could be read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rendered: Option<String>,
    },
}

/// A decision of `airlock policy eval`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalDecided<'a> {
    /// The decision.
    #[serde(with = "decision_name")]
    pub decision: Decision,
    /// Why.
    pub explanation: Option<Cow<'a, str>>,
    /// The deciding step's name, `policy`, or none when nothing matched a review.
    pub approver: Option<Cow<'a, str>>,
    /// Every answer, in order.
    pub trail: Vec<TrailView<'a>>,
    /// The call as Inspect's globs see it.
    pub rendered: String,
    /// For `modify`: Inspect's ToolCall JSON of the call to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<Value>,
}

/// The external step a chain waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingView<'a> {
    /// The step's index.
    pub step: usize,
    /// The step's name.
    pub approver: Cow<'a, str>,
}

// === impl DecisionView ===

impl DecisionView {
    /// The view of a wire decision.
    pub fn from_wire(decision: &v1::Decision) -> Self {
        DecisionView {
            decision: decision_from_wire(decision.decision),
            explanation: decision.explanation.clone(),
            approver: (!decision.approver.is_empty()).then(|| decision.approver.clone()),
            step: decision.step,
            trail: decision.trail.iter().map(TrailView::from_wire).collect(),
            decided_by: decision.decided_by.clone(),
            decision_id: decision.decision_id.clone(),
            policy_digest: decision.policy_digest.clone(),
            requested_at_unix_ms: decision.requested_at_unix_ms,
            decided_at_unix_ms: decision.decided_at_unix_ms,
            modified: decision.modified.as_ref().map(|call| ModifiedView {
                function: call.function.clone(),
                arguments: json_or_null(&call.arguments_json),
            }),
            metadata: (!decision.metadata_json.is_empty()).then(|| json_or_null(&decision.metadata_json)),
        }
    }

    /// Whether `who` made the decision or gave any answer of its trail.
    pub fn involves(&self, who: &str) -> bool {
        self.decided_by == who || self.trail.iter().any(|entry| entry.decided_by.as_deref() == Some(who))
    }
}

// === impl TrailView ===

impl TrailView<'static> {
    /// The view of a wire trail entry.
    pub fn from_wire(entry: &v1::StepAnswer) -> Self {
        TrailView {
            approver: entry.approver.clone().into(),
            decision: decision_from_wire(entry.decision),
            explanation: entry.explanation.clone().map(Cow::Owned),
            decided_by: Some(entry.decided_by.clone()),
            metadata: (!entry.metadata_json.is_empty()).then(|| json_or_null(&entry.metadata_json)),
        }
    }
}

impl<'a> TrailView<'a> {
    /// The view of an engine trail entry of `policy`, as `policy eval` shows it (no decider,
    /// no metadata).
    pub fn from_engine(policy: &'a Policy, entry: TrailEntry) -> Self {
        TrailView {
            approver: name_in(policy, entry.step, &entry.approver),
            decision: Some(entry.answer.decision),
            explanation: entry.answer.explanation,
            decided_by: None,
            metadata: None,
        }
    }
}

// === impl DecisionRecord ===

impl DecisionRecord {
    /// The log record of a wire decision.
    pub fn from_wire(decision: &v1::Decision) -> Self {
        DecisionRecord {
            decision: DecisionView::from_wire(decision),
            // The log has always written an unspecified kind as approval.
            kind: kind_from_wire(decision.kind()).unwrap_or(Kind::Approval),
            key: decision.key.as_ref().map(KeyView::from).unwrap_or_default(),
            origin: decision.origin.as_ref().map(OriginView::from).unwrap_or_default(),
        }
    }
}

impl From<&v1::CallKey> for KeyView {
    fn from(key: &v1::CallKey) -> Self {
        KeyView {
            run_id: key.run_id.clone(),
            sample_id: key.sample_id.clone(),
            epoch: key.epoch,
            tool_call_id: key.tool_call_id.clone(),
        }
    }
}

impl From<&v1::Origin> for OriginView {
    fn from(origin: &v1::Origin) -> Self {
        OriginView {
            run_id: origin.run_id.clone(),
            eval_id: origin.eval_id.clone(),
            task: origin.task.clone(),
            sample_id: origin.sample_id.clone(),
            epoch: origin.epoch,
            model: origin.model.clone(),
            runner_id: origin.runner_id.clone(),
            eval_mode: origin.eval_mode.clone(),
        }
    }
}

// === impl EvalView ===

impl<'a> EvalView<'a> {
    /// The view of what `policy`'s chain did with a call, `rendered` as Inspect's globs see it.
    pub fn from_verdict(policy: &'a Policy, verdict: Verdict<'a>, rendered: String) -> Self {
        let trail =
            |trail: Vec<TrailEntry>| trail.into_iter().map(|entry| TrailView::from_engine(policy, entry)).collect();
        match verdict {
            Verdict::Decided(Outcome { decision, modified, explanation, approver, step, trail: answers, .. }) => {
                EvalView::Decided(EvalDecided {
                    decision,
                    explanation,
                    approver: approver.map(|name| name_in(policy, step, &name)),
                    trail: trail(answers),
                    rendered,
                    modified: modified.map(|call| call.to_json()),
                })
            }
            Verdict::Pending { step, state } => EvalView::Pending {
                pending: PendingView { step: step.index(), approver: Cow::Borrowed(step.name()) },
                trail: trail(state.trail),
                rendered,
            },
            Verdict::Failed(error) => EvalView::Failed { error: error.to_string(), rendered: Some(rendered) },
        }
    }

    /// A line that is not a call.
    pub fn bad_call(message: impl std::fmt::Display) -> Self {
        EvalView::Failed { error: format!("bad call: {message}"), rendered: None }
    }

    /// Whether the call failed (and `policy eval` exits non-zero).
    pub fn is_failure(&self) -> bool {
        matches!(self, EvalView::Failed { .. })
    }
}

/// `name`, borrowed from `policy` when it is the name of its step `step` or the chain's own.
fn name_in<'a>(policy: &'a Policy, step: Option<usize>, name: &str) -> Cow<'a, str> {
    match step.and_then(|index| policy.steps().get(index)) {
        Some(policy_step) if *policy_step.name == *name => Cow::Borrowed(&policy_step.name),
        _ if name == POLICY => Cow::Borrowed(POLICY),
        _ => Cow::Owned(name.to_owned()),
    }
}

/// JSON text as a value; text that is not JSON reads as `null` (the views show, they do not
/// validate: the worker checked what it decided on).
fn json_or_null(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// A decision as Inspect spells it.
mod decision_name {
    use airlock_policy::Decision;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(decision: &Decision, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(decision.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Decision, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

/// A decision as Inspect spells it, or `unspecified` for none.
mod decision_or_unspecified {
    use airlock_policy::Decision;
    use serde::{Deserialize, Deserializer, Serializer};

    const UNSPECIFIED: &str = "unspecified";

    pub fn serialize<S: Serializer>(decision: &Option<Decision>, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(decision.map_or(UNSPECIFIED, Decision::as_str))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Decision>, D::Error> {
        match String::deserialize(deserializer)?.as_str() {
            UNSPECIFIED => Ok(None),
            name => name.parse().map(Some).map_err(serde::de::Error::custom),
        }
    }
}

/// A kind as the policy file's sections spell it.
mod kind_name {
    use airlock_policy::Kind;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(kind: &Kind, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(kind)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Kind, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
