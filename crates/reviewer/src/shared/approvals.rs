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

use super::Shared;
use crate::store::{Approved, StoreError};
use crate::task::{Task, Verdict, agreeing, approvers};

impl Shared {
    /// Records `reviewer`'s approval of `task` with `explanation`, of the `modified` call of a
    /// modify or else of the call as asked; the one that completes [`Task::approvals_needed`]
    /// approvals of that call decides the task (a modify's with that call) and hands its
    /// answer to the outbox.
    pub async fn approve(
        &self,
        task: &Task,
        explanation: String,
        reviewer: &str,
        modified: Option<v1::ToolCall>,
    ) -> Result<Approved, StoreError> {
        let now = now_ms();
        let modified_arguments = modified.as_ref().map(|call| call.arguments_json.clone());
        let approval = ApprovalView { reviewer: reviewer.to_owned(), at_unix_ms: now, explanation, modified_arguments };
        let mut recorded = None;
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
                let recording = self.recording(approved, verdict, modified.clone());
                recorded = Some(recording.clone());
                recording
            })
            .await?;
        if let (Approved::Decided(entry), Some(recording)) = (&approved, &recorded) {
            self.recorded(task, recording, entry, "person");
        }
        Ok(approved)
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

#[cfg(test)]
mod tests {
    use airlock_contract::v1;
    use airlock_records::review::ApprovalsMetadata;
    use prost::Message as _;

    use super::*;
    use crate::auth::Reviewers;
    use crate::fixtures::{human, memory_store};
    use crate::store::{Decided, Inserted};
    use crate::task::{DECIDED_BY_TIMEOUT, timeout_explanation};

    /// A deadline that passes after one approval of two applies `on_timeout`, and the answer
    /// names the partial approver in its explanation and metadata.
    #[tokio::test]
    async fn a_deadline_after_a_partial_approval_names_the_approver() {
        let (shared, mut outbox) = Shared::new(memory_store().await, Reviewers::default(), vec!["ops".into()]);
        let mut incoming = human("ops", "s1", "c1", false, 5_000);
        incoming.human.approvals = 2;
        let Inserted::Created(id) = shared.store.insert(&incoming, 1_000).await.unwrap() else { panic!() };
        let task = shared.store.task(&id).await.unwrap().unwrap();
        assert!(matches!(shared.approve(&task, "fine".into(), "alice", None).await.unwrap(), Approved::Counted(_)));
        assert!(outbox.try_recv().is_err());

        let expired = shared.store.expired(5_000).await.unwrap();
        let task = &expired[0];
        let explanation = timeout_explanation(task.on_timeout(), &task.approvals);
        assert!(explanation.ends_with("Approved only by alice."), "{explanation}");
        let decided = shared.decide(task, task.on_timeout(), explanation, DECIDED_BY_TIMEOUT).await.unwrap();
        assert!(matches!(decided, Decided::Recorded(_)));
        let entry = outbox.try_recv().unwrap();
        let answer = v1::StepResult::decode(entry.body.as_slice()).unwrap().answer.unwrap();
        assert_eq!((answer.decision, answer.decided_by.as_str()), (i32::from(v1::DecisionKind::Reject), "timeout"));
        let metadata: ApprovalsMetadata = serde_json::from_str(&answer.metadata_json).unwrap();
        assert_eq!(metadata.approvals.iter().map(|a| a.reviewer.as_str()).collect::<Vec<_>>(), ["alice"]);
    }
}
