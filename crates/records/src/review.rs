//! The reviewer API's views: a task as `GET /api/tasks/{id}` shows it, the pending list and
//! the history (`GET /api/tasks`, `GET /api/history`), the caller (`GET /api/me`), and the
//! body of a refused request, ([`standing`]) standing decisions, ([`canary`]) canaries' catch
//! rates for admins, ([`control`]) incidents and run switches, and ([`claim`]) claims. The
//! service builds them, the console and the tests read them.
//!
//! Field names and nesting are the wire's: the web UI's script, the Inspect suite and any
//! other API client read this JSON.

use std::collections::BTreeMap;

use airlock_contract::v1;
use airlock_policy::{Decision, Kind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use self::claim::ClaimView;
use crate::view::{KeyView, OriginView, TrailView};

pub mod canary;
pub mod claim;
pub mod control;
pub mod groups;
pub mod standing;

/// The pending list or the history: `{"tasks": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskList {
    /// The tasks: oldest first when pending, newest first in the history.
    pub tasks: Vec<TaskView>,
}

/// A page of the pending list (`GET /api/tasks` with or without triage parameters): its
/// tasks (read as a [`TaskList`] by clients that want only them), how many match the filter
/// on every page, the pending tasks of each of the caller's pools, and where the next page
/// starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskPage {
    /// The tasks, in the order asked for (oldest first by default).
    pub tasks: Vec<TaskView>,
    /// How many pending tasks match the filter, this page's and the others'.
    pub matching: u64,
    /// The pending tasks of each of the caller's pools, whatever the filter.
    pub counts: BTreeMap<String, u64>,
    /// Whether another page follows.
    pub more: bool,
    /// The `cursor` of the next page, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One human task, in any state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskView {
    /// The service's id for it, used in URLs.
    pub id: String,
    /// The call it is about.
    pub key: KeyView,
    /// The call's correlation id (`kind/run/sample/epoch/call`, then `/tenant` if any).
    pub correlation: String,
    /// Who asked.
    #[serde(default)]
    pub caller: Caller,
    /// Approval or review.
    #[serde(with = "kind_text")]
    pub kind: Kind,
    /// The pool it is for.
    pub pool: String,
    /// The pool it moved from, nobody there having answered in time (the step's
    /// `reroute_after`); none in the step's first pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerouted_from: Option<String>,
    /// The chain step it answers.
    pub step: u32,
    /// The answers offered, in order.
    #[serde(with = "decision_list")]
    pub choices: Vec<Decision>,
    /// The assistant message's text.
    pub message: String,
    /// The call under decision, if the request carries one.
    pub call: Option<CallView>,
    /// The view the runner sent, as sent.
    pub view: Option<ToolViewView>,
    /// What a person is shown: the view with placeholders filled, or the default view.
    pub shown: ShownView,
    /// For a review: the tool message the model will see.
    pub result: Option<ResultView>,
    /// For a review: the tool's raw output.
    pub output: Option<String>,
    /// Why the task is here: every answer of the chain before this step, in order.
    #[serde(default)]
    pub trail: Vec<TrailView<'static>>,
    /// The policy the call is decided by, if the request names one.
    #[serde(default)]
    pub policy: Option<PolicyView>,
    /// The recent conversation, ending with the assistant message that carries the call.
    #[serde(default)]
    pub history: Vec<MessageView>,
    /// How many earlier messages the runner left out of `history`.
    #[serde(default)]
    pub history_omitted: u32,
    /// Where the request comes from.
    pub origin: Option<OriginView>,
    /// When the service received it (unix ms).
    pub received_at_unix_ms: i64,
    /// When it must be answered (unix ms), if ever.
    pub deadline_unix_ms: Option<i64>,
    /// What a timeout answers.
    #[serde(with = "decision_text")]
    pub on_timeout: Decision,
    /// How many distinct reviewers must approve (a review: continue) before the step answers.
    #[serde(default = "one")]
    pub approvals_needed: u32,
    /// The approvals given so far, in order.
    #[serde(default)]
    pub approvals: Vec<ApprovalView>,
    /// Who holds the task, while a claim on it lasts (a pending task only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimView>,
    /// Where it stands (`state` and the fields of that state, beside the others).
    #[serde(flatten)]
    pub state: TaskState,
}

fn one() -> u32 {
    1
}

/// One reviewer's approval of a task that needs several.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalView {
    /// The reviewer's name.
    pub reviewer: String,
    /// When (unix ms).
    pub at_unix_ms: i64,
    /// Why, as the reviewer said (Inspect's fixed text when they did not).
    pub explanation: String,
    /// A modify's: the arguments (JSON) of the modified call it approves; absent for the call
    /// as asked. Only approvals of the same call count together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_arguments: Option<String>,
}

/// The metadata of the answer of a step that needed several approvals: every approval given,
/// in order, so the trail the runner and the auditor see names each reviewer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalsMetadata {
    /// The approvals, in the order they were given.
    pub approvals: Vec<ApprovalView>,
}

/// The metadata of a human step's `escalate` that moves its task on, nobody in its pool having
/// answered within the step's `reroute_after`: the worker sends the task to `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReroutedMetadata {
    /// The move.
    pub rerouted: Rerouted,
}

/// A task's move from one pool to the next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rerouted {
    /// The pool nobody answered in.
    pub from: String,
    /// The pool it moves to.
    pub to: String,
}

/// Where a task stands, as the fields `state`, … of its view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum TaskState {
    /// Waiting for a person.
    Pending,
    /// Answered, by a person or by its deadline.
    Decided {
        /// What was decided.
        #[serde(with = "decision_text")]
        decision: Decision,
        /// Why.
        explanation: String,
        /// The reviewer's name, or `timeout`.
        decided_by: String,
        /// When (unix ms).
        decided_at_unix_ms: i64,
    },
    /// Withdrawn by its runner.
    Cancelled {
        /// Why, as the runner said.
        reason: String,
        /// When (unix ms).
        decided_at_unix_ms: i64,
    },
}

/// Who asked for a call: the broker user that published its request and the tenant its key
/// names within that user. Two callers' calls never meet: not in a task, a cancel or a
/// standing decision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    /// The broker user that published the request (`""` when it named none).
    pub requested_by: String,
    /// The caller's namespace within that user: the gateway token's name, `""` for a runner
    /// that asks directly.
    pub tenant: String,
}

/// The policy a task's call is decided by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyView {
    /// The policy's name, or none for a document sent with the request.
    pub name: Option<String>,
    /// sha256 of the document's text, hex; empty when neither the request nor the task holds it.
    pub digest: String,
}

/// One message of the conversation (Inspect's `ChatMessage`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageView {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The message's text.
    pub text: String,
    /// The calls an assistant message carries.
    #[serde(default)]
    pub tool_calls: Vec<CallView>,
    /// For a tool message: the tool's name.
    #[serde(default)]
    pub function: Option<String>,
    /// For a tool message: the error the tool returned, if any.
    #[serde(default)]
    pub error: Option<ToolErrorView>,
}

/// A tool call as Inspect writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallView {
    /// The call's id.
    pub id: String,
    /// The tool.
    pub function: String,
    /// The arguments (empty when the runner's JSON cannot be read).
    pub arguments: Map<String, Value>,
}

/// Inspect's `ToolCallView`: an optional context and an optional custom view of the call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolViewView {
    /// Context shown before the call.
    pub context: Option<ToolContentView>,
    /// The call, as the tool wants it shown.
    pub call: Option<ToolContentView>,
}

/// Inspect's `ToolCallContent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolContentView {
    /// An optional title.
    pub title: Option<String>,
    /// `text` or `markdown`.
    pub format: String,
    /// The content, with `{{argument}}` placeholders.
    pub content: String,
}

/// What a person is shown about a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShownView {
    /// The view's context, if any.
    pub context: Option<ShownContent>,
    /// The call (and, for a review, its result).
    pub call: ShownContent,
}

/// One piece of what is shown: text or markdown, with an optional title.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShownContent {
    /// The title, if any.
    pub title: Option<String>,
    /// Whether `text` is markdown.
    pub markdown: bool,
    /// The content, placeholders filled.
    pub text: String,
}

/// The tool message a review is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultView {
    /// The message's text.
    pub text: String,
    /// The tool's error, if it failed.
    pub error: Option<ToolErrorView>,
}

/// A tool's error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolErrorView {
    /// Inspect's error type (`timeout`, `permission`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// What went wrong.
    pub message: String,
}

/// The caller of the API: `GET /api/me`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewerView {
    /// The name recorded as `decided_by` of the caller's answers.
    pub name: String,
    /// The caller's pools among those the service serves.
    pub pools: Vec<String>,
}

/// The body of a decision: `POST /api/tasks/{id}/decision`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// A choice of the task (`approve`, `reject`, …), or `dismiss`.
    pub decision: String,
    /// Why; Inspect's fixed text when absent or blank.
    #[serde(default)]
    pub explanation: Option<String>,
    /// For `modify` only: the call's new arguments, a JSON object (the function never changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
    /// Whether the call is an attack: the task is marked as an incident once it is decided.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub incident: bool,
    /// The incident's note (default: the explanation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The body of a refused request: why, and for a conflict where the task stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorView {
    /// What went wrong, in words.
    pub error: String,
    /// For a decision that came too late: who answered first, or why the task was withdrawn.
    #[serde(flatten)]
    pub settled: Option<Settled>,
    /// For a task another reviewer holds: who, and until when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimView>,
}

/// How a task that can no longer be answered was settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Settled {
    /// Someone (or the deadline) answered first.
    Decided {
        /// What was decided.
        #[serde(with = "decision_text")]
        decision: Decision,
        /// Who decided.
        decided_by: String,
        /// When (unix ms).
        decided_at_unix_ms: i64,
    },
    /// The runner withdrew the call.
    Withdrawn {
        /// Why, as the runner said.
        reason: String,
    },
}

// === impl CallView ===

impl From<&v1::ToolCall> for CallView {
    fn from(call: &v1::ToolCall) -> Self {
        CallView {
            id: call.id.clone(),
            function: call.function.clone(),
            arguments: serde_json::from_str(&call.arguments_json).unwrap_or_default(),
        }
    }
}

// === impl MessageView ===

impl From<&v1::ChatMessage> for MessageView {
    fn from(message: &v1::ChatMessage) -> Self {
        MessageView {
            role: message.role.clone(),
            text: message.text.clone(),
            tool_calls: message.tool_calls.iter().map(CallView::from).collect(),
            function: message.function.clone(),
            error: message.error.as_ref().map(|e| ToolErrorView { kind: e.r#type.clone(), message: e.message.clone() }),
        }
    }
}

/// A [`Decision`] as its name (`approve`, …).
mod decision_text {
    use std::str::FromStr as _;

    use airlock_policy::Decision;
    use serde::{Deserialize as _, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(decision: &Decision, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(decision.as_str())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Decision, D::Error> {
        let name = String::deserialize(deserializer)?;
        Decision::from_str(&name).map_err(serde::de::Error::custom)
    }
}

/// A list of [`Decision`]s as their names.
mod decision_list {
    use std::str::FromStr as _;

    use airlock_policy::Decision;
    use serde::{Deserialize as _, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(decisions: &[Decision], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(decisions.iter().map(|d| d.as_str()))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Decision>, D::Error> {
        let names = Vec::<String>::deserialize(deserializer)?;
        names.iter().map(|name| Decision::from_str(name).map_err(serde::de::Error::custom)).collect()
    }
}

/// A [`Kind`] as its name (`approval`, `review`).
mod kind_text {
    use std::str::FromStr as _;

    use airlock_policy::Kind;
    use serde::{Deserialize as _, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(kind: &Kind, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(kind)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Kind, D::Error> {
        let name = String::deserialize(deserializer)?;
        Kind::from_str(&name).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
