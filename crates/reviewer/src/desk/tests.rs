//! The desk's approvals and deadlines together: a deadline after a partial approval.

use airlock_contract::v1;
use airlock_records::review::ApprovalsMetadata;
use prost::Message as _;

use super::*;
use crate::auth::Reviewers;
use crate::fixtures::{human, memory_store};
use crate::http::AppState;
use crate::store::Inserted;
use crate::task::{DECIDED_BY_TIMEOUT, timeout_explanation};

/// A deadline that passes after one approval of two applies `on_timeout`, and the answer
/// names the partial approver in its explanation and metadata.
#[tokio::test]
async fn a_deadline_after_a_partial_approval_names_the_approver() {
    let (state, mut outbox) = AppState::new(memory_store().await, Reviewers::default(), vec!["ops".into()]);
    let desk = &state.desk;
    let mut incoming = human("ops", "s1", "c1", false, 5_000);
    incoming.human.approvals = 2;
    let Inserted::Created(id) = desk.store().insert(&incoming, 1_000).await.unwrap() else { panic!() };
    let task = desk.store().task(&id).await.unwrap().unwrap();
    let counted = desk.approve(&task, "fine".into(), "alice", None).await.unwrap();
    assert!(counted.is_pending() && counted.approvals.len() == 1, "counted: {counted:?}");
    assert!(outbox.try_recv().is_err());

    let expired = desk.store().expired(5_000).await.unwrap();
    let task = &expired[0];
    let explanation = timeout_explanation(task.on_timeout(), &task.approvals);
    assert!(explanation.ends_with("Approved only by alice."), "{explanation}");
    let decided = desk.record(task, task.on_timeout(), explanation, DECIDED_BY_TIMEOUT).await.unwrap();
    assert!(matches!(decided, Recorded::Decided(_)));
    let entry = outbox.try_recv().unwrap();
    let answer = v1::StepResult::decode(entry.body.as_slice()).unwrap().answer.unwrap();
    assert_eq!((answer.decision, answer.decided_by.as_str()), (i32::from(v1::DecisionKind::Reject), "timeout"));
    let metadata: ApprovalsMetadata = serde_json::from_str(&answer.metadata_json).unwrap();
    assert_eq!(metadata.approvals.iter().map(|a| a.reviewer.as_str()).collect::<Vec<_>>(), ["alice"]);
}

/// The answer handed to the outbox carries the labels it is counted under: those its body
/// gives an answer read back from the store.
#[tokio::test]
async fn an_answer_carries_the_labels_its_body_gives() {
    let (state, mut outbox) = AppState::new(memory_store().await, Reviewers::default(), vec!["ops".into()]);
    let desk = &state.desk;
    let Inserted::Created(id) = desk.store().insert(&human("ops", "s1", "c1", false, 0), 1_000).await.unwrap() else {
        panic!()
    };
    let task = desk.store().task(&id).await.unwrap().unwrap();
    desk.record(&task, Decision::Approve, String::new(), "alice").await.unwrap();
    let entry = outbox.try_recv().unwrap();
    assert_eq!(entry.labels.as_ref().map(|l| l.decision.as_str()), Some("approve"));
    assert_eq!(entry.labels, crate::outbox::stored_labels(&entry.body));
}
