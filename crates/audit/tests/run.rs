//! The auditor over the in-memory transport: decisions the workers copy under their decision
//! keys end up in the log once each, and a message that is no decision is dead-lettered.

use std::time::Duration;

use airlock_audit::{AUDIT_QUEUE, AuditConfig, DecisionLog};
use airlock_contract::v1;
use airlock_transport::{Destination, MemoryTransport, Message, Topology, Transport};
use prost::Message as _;

#[tokio::test]
async fn writes_each_published_decision_once_until_shutdown() {
    let transport = MemoryTransport::new();
    let path = std::env::temp_dir().join(format!("airlock-audit-run-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let config = AuditConfig { prefix: "t".into(), log: DecisionLog::open(&path, vec!["token".into()]).unwrap() };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let auditor = tokio::spawn(airlock_audit::run(transport.clone(), config, async move {
        let _ = stopped.await;
    }));

    let fleet = Topology::new("t");
    let decisions = Destination::exchange(fleet.route_exchange(), "approval.approve");
    while transport.message_count(&fleet.name(AUDIT_QUEUE)).await.is_err() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Not a protobuf message at all, and a bare decision that is no reply: dead-lettered, and
    // the auditor goes on.
    transport.publish(&decisions, Message::new(vec![0xff, 0xff])).await.unwrap();
    let decision = |id: &str| v1::Decision {
        decision_id: id.into(),
        decision: v1::DecisionKind::Approve.into(),
        ..Default::default()
    };
    transport.publish(&decisions, Message::new(decision("bare").encode_to_vec())).await.unwrap();
    for id in ["d1", "d2", "d1"] {
        let body = v1::ReplyBody { body: Some(v1::reply_body::Body::Decision(decision(id))) };
        let reply = v1::Reply { body: body.encode_to_vec(), ..Default::default() };
        transport.publish(&decisions, Message::new(reply.encode_to_vec())).await.unwrap();
    }
    let lines = || std::fs::read_to_string(&path).unwrap_or_default().lines().count();
    for _ in 0..200 {
        if lines() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(transport.message_count(&fleet.dead_queue()).await.unwrap(), 2, "the bad messages are dead-lettered");
    stop.send(()).unwrap();
    auditor.await.unwrap().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let ids: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["decision_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["d1", "d2"]);
    std::fs::remove_file(&path).unwrap();
}
