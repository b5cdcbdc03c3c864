//! The fleet's side of the proxy: a tool call as an approval request before it runs and as a
//! review request after its result, and what each decision makes the proxy do
//! ([`Approval`], [`Review`]).
//!
//! A decision is read into what the proxy does by [`approval_of`] and [`review_of`], which
//! fail closed on anything else: a decision a chain of that kind cannot give, a modified call
//! that cannot be read, or no decision at all (the fleet refused the request, the broker
//! failed) refuses the call or withholds its result.

use std::time::Duration;

use airlock_client::{Client, ClientError};
use airlock_contract::v1;
use airlock_policy::{Call, Kind};
use airlock_records::convert::call_from_wire;
use airlock_transport::Transport;
use serde_json::{Map, Value};

use crate::tools::ToolCall;

/// What the model reads when the fleet rejected a call without saying why.
pub const REJECTED: &str = "The call was rejected by the Airlock policy.";

/// What the model reads when a review withheld a result without saying why.
pub const WITHHELD: &str = "The result was withheld by the Airlock policy.";

/// What the client is told when the fleet ended the session without saying why.
pub const TERMINATED: &str = "The Airlock policy ended the session.";

/// How the proxy asks the fleet.
pub struct Gate<T: Transport> {
    /// The runner's client.
    pub client: Client<T>,
    /// The policy the requests name or carry.
    pub policy: v1::policy::Source,
    /// How long a request waits before the client fails it closed.
    pub timeout: Duration,
    /// The sample id the requests carry.
    pub sample: String,
}

/// One tool call as the fleet is asked about it.
#[derive(Debug, Clone)]
pub struct Asked {
    /// The call's key: the session as run, the configured sample, the request id as call id.
    pub key: v1::CallKey,
    /// The call as the policy sees it.
    pub call: Call,
    /// The tool's annotations, from the server's listing.
    pub annotations: Option<Map<String, Value>>,
}

/// What the proxy does with a call the fleet has decided on.
#[derive(Debug, Clone, PartialEq)]
pub enum Approval {
    /// Forward it; with new arguments for a modify.
    Forward(Option<Map<String, Value>>),
    /// Answer it with an error result the model reads.
    Refuse(String),
    /// Answer it with a JSON-RPC error and end the session.
    Terminate(String),
}

/// What the proxy does with a call's result the fleet has reviewed.
#[derive(Debug, Clone, PartialEq)]
pub enum Review {
    /// Pass it to the client.
    Pass,
    /// Replace it with an error result the model reads.
    Replace(String),
    /// Answer the call with a JSON-RPC error and end the session.
    Terminate(String),
}

// === impl Gate ===

impl<T: Transport> Gate<T> {
    /// Asks whether `asked` may run.
    pub async fn approve(&self, asked: &Asked) -> Approval {
        approval_of(self.client.decide(self.request(asked, Kind::Approval, ""), Some(self.timeout)).await)
    }

    /// Asks whether the model may see `output`, the result of `asked` as it ran.
    pub async fn review(&self, asked: &Asked, output: &str) -> Review {
        review_of(self.client.decide(self.request(asked, Kind::Review, output), Some(self.timeout)).await)
    }

    /// Withdraws the approval request of a call the client cancelled.
    pub async fn withdraw(&self, key: &v1::CallKey) {
        self.client.cancel(key, v1::Kind::Approval, "the MCP client cancelled the call").await;
    }

    fn request(&self, asked: &Asked, kind: Kind, output: &str) -> v1::Request {
        let key = asked.key.clone();
        let origin = v1::Origin {
            run_id: key.run_id.clone(),
            sample_id: key.sample_id.clone(),
            epoch: key.epoch,
            ..Default::default()
        };
        let mut request = airlock_client::request::build(key, &asked.call, kind, self.policy.clone(), "", output);
        request.origin = Some(origin);
        let view = asked.annotations.as_ref().map(annotations_view);
        airlock_client::request::describe(&mut request, view, asked.annotations.as_ref());
        request
    }
}

/// The annotations shown to a person before the call.
fn annotations_view(annotations: &Map<String, Value>) -> v1::ToolCallView {
    let lines: Vec<String> = annotations.iter().map(|(key, value)| format!("{key}: {value}")).collect();
    v1::ToolCallView {
        context: Some(v1::ToolCallContent {
            title: Some("MCP tool annotations".into()),
            format: "text".into(),
            content: lines.join("\n"),
        }),
        call: None,
    }
}

impl Asked {
    /// The call `call` of request `id` in the session `run`.
    pub fn new(
        run: &str,
        sample: &str,
        id: &crate::message::Id,
        call: &ToolCall,
        annotations: Option<&Map<String, Value>>,
    ) -> Self {
        let key = v1::CallKey {
            run_id: run.to_owned(),
            sample_id: sample.to_owned(),
            epoch: 1,
            tool_call_id: id.to_string(),
            ..Default::default()
        };
        let call = Call { id: id.to_string(), function: call.name.clone(), arguments: call.arguments.clone() };
        Asked { key, call, annotations: annotations.cloned() }
    }

    /// The call as it runs after a modify.
    pub fn modified(mut self, arguments: &Map<String, Value>) -> Self {
        self.call.arguments = arguments.clone();
        self
    }
}

/// What an approval decision (or the failure to get one) makes the proxy do.
pub fn approval_of(decision: Result<v1::Decision, ClientError>) -> Approval {
    let decision = match decision {
        Ok(decision) => decision,
        Err(e) => {
            return Approval::Refuse(format!("Airlock could not get a decision for this call ({e}); it was not run."));
        }
    };
    let explanation = decision.explanation.clone();
    match decision.decision() {
        v1::DecisionKind::Approve => Approval::Forward(None),
        v1::DecisionKind::Modify => match decision.modified.as_ref().map(call_from_wire) {
            Some(Ok(modified)) => Approval::Forward(Some(modified.arguments)),
            _ => Approval::Refuse("The Airlock fleet's modified call is unreadable; it was not run.".into()),
        },
        v1::DecisionKind::Reject => Approval::Refuse(explanation.unwrap_or_else(|| REJECTED.into())),
        v1::DecisionKind::Terminate => Approval::Terminate(explanation.unwrap_or_else(|| TERMINATED.into())),
        other => Approval::Refuse(format!(
            "The Airlock fleet answered '{}', which is not an approval decision; the call was not run.",
            other.as_str_name()
        )),
    }
}

/// What a review decision (or the failure to get one) makes the proxy do.
pub fn review_of(decision: Result<v1::Decision, ClientError>) -> Review {
    let decision = match decision {
        Ok(decision) => decision,
        Err(e) => return Review::Replace(format!("Airlock could not review this result ({e}); it is withheld.")),
    };
    let explanation = decision.explanation.clone();
    match decision.decision() {
        v1::DecisionKind::Continue => Review::Pass,
        v1::DecisionKind::Terminate => Review::Terminate(explanation.unwrap_or_else(|| TERMINATED.into())),
        _ => Review::Replace(explanation.unwrap_or_else(|| WITHHELD.into())),
    }
}

#[cfg(test)]
mod tests;
