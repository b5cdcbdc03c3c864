//! Two-person (or N-person) approval: the approving choice of a task whose step needs several
//! reviewers is counted, one per reviewer, and the approval that completes the count decides
//! the task, as decided by every approver (`alice+bob`) with each approval in its metadata.
//!
//! A modify on such a step is one approval of the modified call: it counts with the approvals
//! of that same call (the same arguments) only, never with those of the call as asked, so no
//! one person's edit runs a call that a second person did not approve.

use airlock_contract::v1;
use airlock_policy::Decision;
use airlock_records::review::ApprovalView;
use airlock_records::time::now_ms;

use super::{By, Desk, Refusal};
use crate::store::Approved;
use crate::task::{Task, Verdict, agreeing, approvers};

impl Desk {
    /// Records `reviewer`'s approval of `task` with `explanation`, of the `modified` call of a
    /// modify or else of the call as asked; the one that completes [`Task::approvals_needed`]
    /// approvals of that call decides the task (a modify's with that call) and hands its
    /// answer to the outbox. The task as it stands after it; a second approval by the same
    /// reviewer is refused.
    pub(super) async fn approve(
        &self,
        task: &Task,
        explanation: String,
        reviewer: &str,
        modified: Option<v1::ToolCall>,
    ) -> Result<Task, Refusal> {
        let now = now_ms();
        let modified_arguments = modified.as_ref().map(|call| call.arguments_json.clone());
        let approval = ApprovalView { reviewer: reviewer.to_owned(), at_unix_ms: now, explanation, modified_arguments };
        let mut drafted = None;
        let approved = self
            .store
            .approve(task, &approval, |approved| {
                let agreeing = agreeing(&approved.approvals, &approval);
                let verdict = Verdict {
                    decision: if modified.is_some() { Decision::Modify } else { approved.approving() },
                    explanation: approved_explanation(&agreeing),
                    decided_by: approvers(&agreeing),
                    decided_at: now,
                };
                let draft = self.draft(approved, verdict, modified.clone(), By::Approvals);
                let recording = draft.recording.clone();
                drafted = Some(draft);
                recording
            })
            .await?;
        match approved {
            Approved::Counted(task) => Ok(*task),
            Approved::Decided(entry) => {
                // The store drafts the decision of the approval that completes the count.
                let draft = drafted.ok_or(Refusal::Changed)?;
                self.recorded(&draft, entry, "person");
                Ok(draft.decided)
            }
            Approved::Again(task) => {
                Err(Refusal::ApprovedAlready { needed: task.approvals_needed(), so_far: task.approvals.len() })
            }
            Approved::NotPending(task) => Err(Refusal::not_pending(&task)),
            Approved::NotFound => Err(Refusal::NotFound),
        }
    }
}

/// The explanation of a decision by several approvals: their explanations in order, each
/// once (the names are in `decided_by` and the metadata).
fn approved_explanation(approvals: &[ApprovalView]) -> String {
    let mut explanations: Vec<&str> = Vec::new();
    for approval in approvals {
        if !explanations.contains(&approval.explanation.as_str()) {
            explanations.push(&approval.explanation);
        }
    }
    explanations.join("\n")
}
