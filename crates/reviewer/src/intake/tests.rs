//! Cancels as the service takes them from its queue, on the in-process transport, where a
//! message names the broker user its publisher set, or none.

use std::sync::Arc;

use airlock_contract::v1;
use airlock_transport::{Destination, MemoryTransport, Message, Topology, Transport};
use prost::Message as _;

use super::withdraw;
use crate::auth::Reviewers;
use crate::fixtures::{asked_by, human, memory_store};
use crate::shared::Shared;
use crate::store::Inserted;
use crate::task::Incoming;

/// Publishes a cancel of `incoming`'s call, as `user` when given, to the service's queue,
/// and hands its delivery to [`withdraw`].
async fn cancel(shared: &Arc<Shared>, transport: &MemoryTransport, incoming: &Incoming, user: Option<&str>) {
    let key = incoming.human.task.as_ref().and_then(|t| t.request.as_ref()).and_then(|r| r.key.clone());
    let cancel = v1::Cancel { key, kind: v1::Kind::Approval.into(), reason: "the sample ended".into() };
    let message = Message { user_id: user.map(str::to_owned), ..Message::new(cancel.encode_to_vec()) };
    let queue = Topology::empty("t").reply_queue("rv");
    transport.publish(&Destination::queue(&queue), message).await.unwrap();
    let mut consumer = transport.consume(&queue, 1).await.unwrap();
    let delivery = consumer.next().await.expect("the cancel");
    withdraw(shared.clone(), delivery).await;
}

async fn stored(shared: &Shared, incoming: &Incoming) -> String {
    let Inserted::Created(id) = shared.store.insert(incoming, 1_000).await.unwrap() else { panic!("not stored") };
    id
}

async fn is_pending(shared: &Shared, id: &str) -> bool {
    shared.store.task(id).await.unwrap().unwrap().is_pending()
}

#[tokio::test]
async fn a_cancel_withdraws_only_tasks_its_publisher_asked_for_a_missing_user_matching_a_missing_one() {
    let (shared, _outbox) = Shared::new(memory_store().await, Reviewers::default(), vec!["ops".into()]);
    let transport = MemoryTransport::new();
    transport.declare(&Topology::new("t").with_reply_queue("rv")).await.unwrap();
    let unnamed = human("ops", "s1", "c1", false, 0);
    let named = asked_by(human("ops", "s1", "c2", false, 0), "runner-a");
    let (unnamed_id, named_id) = (stored(&shared, &unnamed).await, stored(&shared, &named).await);
    let dropped = || shared.metrics.review_cancels_dropped.get();

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
