//! Cancels as the service takes them from its queue, on the in-process transport, where a
//! message names the broker user its publisher set, or none; and how long the intake retries
//! what the store fails to take.

use airlock_contract::v1;
use airlock_transport::message::HEADER_REASON;
use airlock_transport::{Destination, MemoryTransport, Message, Topology, Transport};
use prost::Message as _;

use super::{REFUSALS, Unstored, persist, withdraw};
use crate::auth::Reviewers;
use crate::fixtures::{asked_by, human, memory_store};
use crate::http::AppState;
use crate::store::{Inserted, StoreError};
use crate::task::Incoming;

/// Publishes a cancel of `incoming`'s call, as `user` when given, to the service's queue,
/// and hands its delivery to [`withdraw`].
async fn cancel(shared: &AppState, transport: &MemoryTransport, incoming: &Incoming, user: Option<&str>) {
    let key = incoming.human.task.as_ref().and_then(|t| t.request.as_ref()).and_then(|r| r.key.clone());
    let cancel = v1::Cancel { key, kind: v1::Kind::Approval.into(), reason: "the sample ended".into() };
    deliver(shared, transport, Message { user_id: user.map(str::to_owned), ..Message::new(cancel.encode_to_vec()) })
        .await;
}

/// Publishes `message` to the service's cancels queue and hands its delivery to [`withdraw`].
async fn deliver(shared: &AppState, transport: &MemoryTransport, message: Message) {
    let queue = Topology::empty("t").reply_queue("rv");
    transport.publish(&Destination::queue(&queue), message).await.unwrap();
    let mut consumer = transport.consume(&queue, 1).await.unwrap();
    let delivery = consumer.next().await.expect("the cancel");
    withdraw(shared.desk.clone(), shared.stop().clone(), transport.clone(), Topology::new("t"), delivery).await;
}

async fn stored(shared: &AppState, incoming: &Incoming) -> String {
    let Inserted::Created(id) = shared.desk.store().insert(incoming, 1_000).await.unwrap() else {
        panic!("not stored")
    };
    id
}

async fn is_pending(shared: &AppState, id: &str) -> bool {
    shared.desk.store().task(id).await.unwrap().unwrap().is_pending()
}

#[tokio::test]
async fn a_cancel_withdraws_only_tasks_its_publisher_asked_for_a_missing_user_matching_a_missing_one() {
    let (shared, _outbox) = AppState::new(memory_store().await, Reviewers::default(), vec!["ops".into()]);
    let transport = MemoryTransport::new();
    transport.declare(&Topology::new("t").with_reply_queue("rv")).await.unwrap();
    let unnamed = human("ops", "s1", "c1", false, 0);
    let named = asked_by(human("ops", "s1", "c2", false, 0), "runner-a");
    let (unnamed_id, named_id) = (stored(&shared, &unnamed).await, stored(&shared, &named).await);
    let dropped = || shared.desk.metrics.review_cancels_dropped.get();

    // A request that named no user: a named cancel is dropped, an unnamed one withdraws it.
    cancel(&shared, &transport, &unnamed, Some("runner-b")).await;
    assert!(is_pending(&shared, &unnamed_id).await);
    assert_eq!(dropped(), 1);
    cancel(&shared, &transport, &unnamed, None).await;
    assert!(!is_pending(&shared, &unnamed_id).await);
    assert_eq!(dropped(), 1);

    // A request runner-a published: a cancel naming no user, or another, is dropped.
    cancel(&shared, &transport, &named, None).await;
    cancel(&shared, &transport, &named, Some("runner-b")).await;
    assert!(is_pending(&shared, &named_id).await);
    assert_eq!(dropped(), 3);
    cancel(&shared, &transport, &named, Some("runner-a")).await;
    assert!(!is_pending(&shared, &named_id).await);
    assert_eq!(dropped(), 3);
}

/// A cancel that can never be applied (not a `Cancel`, or a NUL in its call key or reason) is
/// dead-lettered with its reason and acknowledged; the cancels behind it are applied.
#[tokio::test]
async fn a_cancel_that_cannot_be_applied_is_dead_lettered_and_the_next_one_withdraws() {
    let (shared, _outbox) = AppState::new(memory_store().await, Reviewers::default(), vec!["ops".into()]);
    let transport = MemoryTransport::new();
    let topology = Topology::new("t").with_reply_queue("rv");
    transport.declare(&topology).await.unwrap();
    let incoming = human("ops", "s1", "c1", false, 0);
    let id = stored(&shared, &incoming).await;

    let asked = incoming.human.task.as_ref().and_then(|t| t.request.as_ref()).and_then(|r| r.key.clone()).unwrap();
    let key = |call: &str| v1::CallKey { tool_call_id: call.into(), ..asked.clone() };
    let poisoned = [
        Message::new(b"\xff not a cancel".to_vec()),
        Message::new(v1::Cancel { key: Some(key("c\0 1")), ..Default::default() }.encode_to_vec()),
        Message::new(
            v1::Cancel { key: Some(key("c1")), reason: "ended\0".into(), ..Default::default() }.encode_to_vec(),
        ),
    ];
    for message in poisoned {
        deliver(&shared, &transport, message).await;
    }
    assert!(is_pending(&shared, &id).await);
    let mut dead = transport.consume(&topology.dead_queue(), 8).await.unwrap();
    let mut reasons = Vec::new();
    for _ in 0..3 {
        let corpse = dead.next().await.expect("a dead-lettered cancel");
        reasons.push(corpse.message.headers[HEADER_REASON].clone());
        corpse.ack().await.unwrap();
    }
    assert!(reasons[0].starts_with("bad_message: not an airlock.v1.Cancel"), "{reasons:?}");
    assert_eq!(reasons[1], "bad_message: the Cancel's call key holds a NUL character, which the store cannot keep");
    assert_eq!(reasons[2], "bad_message: the Cancel's reason holds a NUL character, which the store cannot keep");
    assert_eq!(transport.message_count(&topology.reply_queue("rv")).await.unwrap(), 0, "each was acknowledged");

    cancel(&shared, &transport, &incoming, None).await;
    assert!(!is_pending(&shared, &id).await, "the cancel behind them withdrew its call");
}

/// The store refusing what it is given is tried [`REFUSALS`] times, then given up; a failure
/// that passes (the pool out of connections) is retried for as long as it lasts.
#[tokio::test]
async fn refusals_are_tried_a_bounded_number_of_times_and_transient_failures_until_they_pass() {
    let (shared, _outbox) = AppState::new(memory_store().await, Reviewers::default(), vec!["ops".into()]);
    tokio::time::pause();
    let refused = || StoreError::Corrupt { id: "t".into(), what: "refused".into() };
    let mut tries = 0;
    let outcome: Result<(), _> = persist(shared.stop(), "c1", || {
        tries += 1;
        std::future::ready(Err(refused()))
    })
    .await;
    assert!(matches!(outcome, Err(Unstored::Refused(StoreError::Corrupt { .. }))), "{outcome:?}");
    assert_eq!(tries, REFUSALS);

    let mut tries = 0;
    let outcome = persist(shared.stop(), "c1", || {
        tries += 1;
        std::future::ready(if tries < 50 { Err(StoreError::Database(sqlx::Error::PoolTimedOut)) } else { Ok(tries) })
    })
    .await;
    assert_eq!(outcome.unwrap(), 50, "a transient failure never dead-letters");

    // The service stopping ends the retries: the message goes back to its queue.
    shared.stop().cancel();
    let outcome: Result<(), _> =
        persist(shared.stop(), "c1", || std::future::ready(Err(StoreError::Database(sqlx::Error::PoolTimedOut)))).await;
    assert!(matches!(outcome, Err(Unstored::Stopping)), "{outcome:?}");
}
