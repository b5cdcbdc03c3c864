//! The desk's approvals and deadlines together: a deadline after a partial approval; and a
//! task taken in, paged about with its insert or decided at once by a standing decision.

use airlock_contract::v1;
use airlock_records::review::{ApprovalsMetadata, ReroutedMetadata};
use airlock_webhook::RetryPolicy;
use prost::Message as _;

use super::*;
use crate::auth::Reviewers;
use crate::fixtures::{approving, human, memory_store};
use crate::http::AppState;
use crate::store::{Inserted, Stored};
use crate::task::{DECIDED_BY_TIMEOUT, timeout_explanation};
use crate::webhooks::{Endpoint, EventKind, Format, Pools};

/// A desk of pool `ops` on a memory store, whose one endpoint hears of `events`; and its outbox.
async fn paging(events: &[EventKind]) -> (Arc<Desk>, mpsc::UnboundedReceiver<OutboxEntry>) {
    let endpoint = Endpoint {
        url: "http://hooks.test/ops".parse().unwrap(),
        pools: Pools::All,
        secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse().unwrap(),
        format: Format::Standard,
        events: events.to_vec(),
    };
    let webhooks = Webhooks { endpoints: vec![endpoint], retry: RetryPolicy::default(), slack: None };
    Desk::new(memory_store().await, vec!["ops".into()], None, webhooks, Arc::default(), None, Claims::default())
}

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
    assert!(answer.timed_out, "the deadline answered, nobody else");
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
    assert!(!v1::StepResult::decode(entry.body.as_slice()).unwrap().answer.unwrap().timed_out, "alice answered");
    assert_eq!(entry.labels, crate::outbox::stored_labels(&entry.body));
}

/// A task taken in has its `task.created` webhooks written with it, before it is admitted;
/// one a standing decision covers has none, and is decided at once when admitted.
#[tokio::test]
async fn a_task_is_stored_with_its_webhooks_unless_a_standing_decision_covers_it() {
    let (desk, mut outbox) = paging(&[EventKind::Created]).await;
    let now = now_ms();
    let waiting = human("ops", "s1", "c1", false, 0);
    let waiting_task = waiting.pending("t1", now);
    let stored = desk.insert(&waiting, &waiting_task).await.unwrap();
    assert_eq!(stored, Stored { inserted: Inserted::Created("t1".into()), covered_by: None });
    assert_eq!(desk.store().webhooks_owed().await.unwrap(), 1, "written with the task");
    assert!(desk.admit(&waiting_task, None).await, "it waits for a person");
    assert_eq!(desk.store().webhooks_owed().await.unwrap(), 1, "admitting it writes no more");

    let standing = desk.store().add_standing(&approving("s2", now, now + 60_000)).await.unwrap();
    let covered = human("ops", "s2", "c2", false, 0);
    let covered_task = covered.pending("t2", now);
    let stored = desk.insert(&covered, &covered_task).await.unwrap();
    assert_eq!(stored.covered_by.as_ref(), Some(&standing));
    assert!(!desk.admit(&covered_task, stored.covered_by.as_ref()).await, "decided at once");
    let State::Decided(verdict) = desk.store().task("t2").await.unwrap().unwrap().state else { panic!() };
    assert_eq!(verdict.decided_by, format!("alice (standing #{})", standing.id));
    assert_eq!(outbox.try_recv().unwrap().task_id, "t2");
    assert_eq!(desk.store().webhooks_owed().await.unwrap(), 1, "nobody is paged about a covered task");
}

/// A task due to move on is answered `escalate` by `reroute`, naming the pool it leaves and the
/// next one, leaves the pending list and is announced `task.rerouted`; one due a warning is
/// warned once (`task.expiring`), and the times due wake the deadline loop.
#[tokio::test]
async fn a_task_due_to_move_is_answered_with_its_move_and_a_warning_goes_out_once() {
    let (desk, mut outbox) = paging(&[EventKind::Expiring, EventKind::Rerouted]).await;
    let mut incoming = human("ops", "s1", "c1", false, 30_000);
    (incoming.human.reroute_at_unix_ms, incoming.human.reroute_to) = (10_000, "oncall".into());
    incoming.human.warn_at_unix_ms = 8_000;
    let Inserted::Created(id) = desk.store().insert(&incoming, 1_000).await.unwrap() else { panic!() };
    assert_eq!(desk.store().next_deadline().await.unwrap(), Some(8_000), "the warning is due first");
    assert!(desk.store().expiring(7_999).await.unwrap().is_empty());
    assert!(desk.store().rerouting(9_999).await.unwrap().is_empty());

    let expiring = desk.store().expiring(8_000).await.unwrap();
    assert_eq!(expiring.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), [id.as_str()]);
    assert!(desk.warn(&expiring[0]).await.unwrap());
    assert!(!desk.warn(&expiring[0]).await.unwrap(), "a task is warned once");
    assert!(desk.store().expiring(20_000).await.unwrap().is_empty());
    assert_eq!(desk.store().webhooks_owed().await.unwrap(), 1);
    assert_eq!(desk.store().next_deadline().await.unwrap(), Some(10_000), "then the move");

    let due = desk.store().rerouting(10_000).await.unwrap();
    assert!(matches!(desk.reroute(&due[0]).await.unwrap(), Recorded::Decided(_)));
    let answer = v1::StepResult::decode(outbox.try_recv().unwrap().body.as_slice()).unwrap().answer.unwrap();
    assert_eq!((answer.decision(), answer.decided_by.as_str()), (v1::DecisionKind::Escalate, "reroute"));
    let metadata: ReroutedMetadata = serde_json::from_str(&answer.metadata_json).unwrap();
    assert_eq!((metadata.rerouted.from.as_str(), metadata.rerouted.to.as_str()), ("ops", "oncall"));
    assert!(desk.store().pending(None).await.unwrap().is_empty(), "the task left this pool");
    assert_eq!(desk.store().next_deadline().await.unwrap(), None);
    let sent = desk.store().claim_webhooks(now_ms(), now_ms() + 1_000, 10).await.unwrap();
    let kinds: Vec<String> = sent
        .iter()
        .map(|w| serde_json::from_slice::<Value>(&w.body).unwrap()["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["task.expiring", "task.rerouted"]);
    let moved: Value = serde_json::from_slice(&sent[1].body).unwrap();
    assert_eq!((&moved["data"]["pool"], &moved["data"]["rerouted_to"]), (&"ops".into(), &"oncall".into()));

    // The task that arrives in the next pool is one of its own, also in a store both pools share.
    let mut next = human("oncall", "s1", "c1", false, 30_000);
    next.human.rerouted_from = "ops".into();
    assert!(matches!(desk.store().insert(&next, 11_000).await.unwrap(), Inserted::Created(_)));
    assert_eq!(desk.store().insert(&next, 11_500).await.unwrap(), Inserted::Duplicate, "once per pool");
}
