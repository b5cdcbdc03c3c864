//! Why a task is here, in parts: who asked, the policy, and every answer of the chain before
//! this step. The web UI's card and the console render the same parts, each in its own form
//! (HTML escaped, or display-safe terminal lines), so what one says the other can say too.

use airlock_records::review::{Caller, PolicyView, TaskView};

use super::protocol::Protocol;
use super::{Field, Metadata, read_metadata};
use crate::task::{Task, decision_from_wire};

/// What an answer without a decision is shown as.
const UNSPECIFIED: &str = "unspecified";

/// Why a task is here.
#[derive(Debug, Clone, PartialEq)]
pub struct WhyHere {
    /// Who asked, when the request names anyone.
    pub asked: Option<Asked>,
    /// The policy the call is decided by, when the request names one.
    pub policy: Option<Policy>,
    /// Every answer of the chain before this step, in order.
    pub answers: Vec<Answer>,
}

/// Who asked for the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// The broker user that published the request, or `a runner` when it named none.
    pub by: String,
    /// The tenant its key names within that user, if any.
    pub tenant: Option<String>,
}

/// The policy the call is decided by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Its name, or `inline document` for a document sent with the request.
    pub name: String,
    /// sha256 of its text, hex; empty when unknown.
    pub digest: String,
}

/// One answer of the chain before this step.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The step's position in the chain, when the answer names it.
    pub step: Option<u32>,
    /// The step's name, or `policy`.
    pub approver: String,
    /// What it answered: the decision's name, or `unspecified`.
    pub decision: &'static str,
    /// Who answered, when the answer says.
    pub decided_by: Option<String>,
    /// Why, when the answer says (as given, spaces and all).
    pub explanation: Option<String>,
    /// Its metadata as labelled values: a monitor's score, reason and model first.
    pub fields: Vec<Field>,
    /// What a control protocol step did, when its note says.
    pub protocol: Option<Protocol>,
}

impl WhyHere {
    /// Why a task is here, from the API's view of it (whose answers name no step).
    pub fn of_view(task: &TaskView) -> Self {
        let answers = task.trail.iter().map(|answer| {
            let Metadata { fields, protocol } =
                read_metadata(&answer.metadata.as_ref().map(ToString::to_string).unwrap_or_default());
            Answer {
                step: None,
                approver: answer.approver.to_string(),
                decision: answer.decision.map_or(UNSPECIFIED, |d| d.as_str()),
                decided_by: answer.decided_by.clone(),
                explanation: answer.explanation.as_deref().map(str::to_owned),
                fields,
                protocol,
            }
        });
        Self::new(&task.caller, task.policy.as_ref(), answers)
    }

    /// Why a stored task is here, from the request it holds.
    pub fn of_task(task: &Task) -> Self {
        let answers = task.trail().iter().map(|answer| {
            let Metadata { fields, protocol } = read_metadata(&answer.metadata_json);
            Answer {
                step: answer.step,
                approver: answer.approver.clone(),
                decision: decision_from_wire(answer.decision).map_or(UNSPECIFIED, |d| d.as_str()),
                decided_by: Some(answer.decided_by.clone()),
                explanation: answer.explanation.clone(),
                fields,
                protocol,
            }
        });
        Self::new(&task.caller(), task.policy().as_ref(), answers)
    }

    /// The parts, with what is empty left out.
    fn new(caller: &Caller, policy: Option<&PolicyView>, answers: impl Iterator<Item = Answer>) -> Self {
        let named = |text: &str| Some(text.to_owned()).filter(|text| !text.is_empty());
        let asked = (!caller.requested_by.is_empty() || !caller.tenant.is_empty()).then(|| Asked {
            by: named(&caller.requested_by).unwrap_or_else(|| "a runner".to_owned()),
            tenant: named(&caller.tenant),
        });
        let policy = policy.map(|policy| Policy {
            name: policy.name.clone().unwrap_or_else(|| "inline document".to_owned()),
            digest: policy.digest.clone(),
        });
        let answers = answers
            .map(|answer| Answer {
                decided_by: answer.decided_by.as_deref().and_then(named),
                explanation: answer.explanation.as_deref().and_then(named),
                ..answer
            })
            .collect();
        WhyHere { asked, policy, answers }
    }
}
