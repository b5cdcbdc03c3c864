//! The role loop on the in-process transport: drain, grace, order, failure, a closed transport.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::{Order, Serve};
use crate::{Consumer, Destination, MemoryTransport, Message, Topology, Transport};

/// A transport with the fleet `t` declared and `count` messages (`0`, `1`, …) in `queue`.
async fn fleet(queues: &[&str], count: usize) -> (MemoryTransport, Topology) {
    let transport = MemoryTransport::new();
    let topology = queues.iter().fold(Topology::new("t"), |topology, queue| topology.with_work_queue(queue));
    transport.declare(&topology).await.unwrap();
    for queue in queues {
        for i in 0..count {
            transport.publish(&Destination::queue(topology.name(queue)), Message::new(i.to_string())).await.unwrap();
        }
    }
    (transport, topology)
}

async fn consumer(transport: &MemoryTransport, topology: &Topology, queue: &str, prefetch: u16) -> Consumer {
    transport.consume(&topology.name(queue), prefetch).await.unwrap()
}

fn body(message: &Message) -> String {
    String::from_utf8(message.body.to_vec()).unwrap()
}

#[tokio::test]
async fn stopping_lets_the_deliveries_in_hand_finish() {
    let (transport, topology) = fleet(&["a", "b"], 2).await;
    let (started, mut starts) = mpsc::unbounded_channel();
    let done = Arc::new(Mutex::new(Vec::new()));
    let serve = Serve::new()
        .consume("a", consumer(&transport, &topology, "a", 8).await)
        .consume("b", consumer(&transport, &topology, "b", 8).await);
    let handle = |source: &'static str, delivery: crate::Delivery| {
        let (started, done) = (started.clone(), done.clone());
        async move {
            started.send(()).unwrap();
            // Still working when shutdown comes.
            tokio::time::sleep(Duration::from_millis(50)).await;
            done.lock().unwrap().push(format!("{source}{}", body(&delivery.message)));
            delivery.ack().await.unwrap();
        }
    };
    let shutdown = async {
        for _ in 0..4 {
            starts.recv().await.unwrap();
        }
    };
    serve.run(handle, shutdown).await;

    let mut done = done.lock().unwrap().clone();
    done.sort();
    assert_eq!(done, ["a0", "a1", "b0", "b1"]);
    for queue in ["a", "b"] {
        assert_eq!(transport.message_count(&topology.name(queue)).await.unwrap(), 0);
    }
}

#[tokio::test]
async fn past_the_grace_unsettled_deliveries_go_back_to_their_queue() {
    let (transport, topology) = fleet(&["a"], 3).await;
    let (started, mut starts) = mpsc::unbounded_channel();
    let held = Arc::new(Mutex::new(Vec::new()));
    let serve =
        Serve::new().consume((), consumer(&transport, &topology, "a", 8).await).grace(Duration::from_millis(50));
    let handle = |(), delivery| {
        let (started, held) = (started.clone(), held.clone());
        async move {
            started.send(()).unwrap();
            // Never settles: a handler stuck past the grace period.
            held.lock().unwrap().push(delivery);
            std::future::pending::<()>().await;
        }
    };
    let shutdown = async {
        for _ in 0..3 {
            starts.recv().await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(5), serve.run(handle, shutdown)).await.expect("stops after the grace");

    assert_eq!(transport.message_count(&topology.name("a")).await.unwrap(), 3);
    let late = held.lock().unwrap().pop().unwrap();
    assert!(late.ack().await.is_err(), "the consumer is gone, so is its delivery");
}

#[tokio::test]
async fn in_order_a_failure_stops_serving_and_is_returned() {
    let (transport, topology) = fleet(&["a"], 5).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let serve = Serve::new().consume((), consumer(&transport, &topology, "a", 8).await).order(Order::InOrder);
    let handle = |(), delivery: crate::Delivery| {
        let seen = seen.clone();
        async move {
            let text = body(&delivery.message);
            seen.lock().unwrap().push(text.clone());
            if text == "2" {
                return Err(format!("cannot write {text}"));
            }
            delivery.ack().await.map_err(|e| e.to_string())
        }
    };
    let result = serve.try_run(handle, std::future::pending()).await;

    assert_eq!(result, Err("cannot write 2".to_owned()));
    assert_eq!(*seen.lock().unwrap(), ["0", "1", "2"]);
    // The failed delivery and the two never handled are back in the queue.
    assert_eq!(transport.message_count(&topology.name("a")).await.unwrap(), 3);
}

#[tokio::test]
async fn a_closed_transport_ends_serving() {
    let (transport, topology) = fleet(&["a"], 0).await;
    let serve = Serve::new().consume((), consumer(&transport, &topology, "a", 8).await);
    let closing = transport.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        closing.close().await;
    });
    let handle = |(), _delivery| async {};
    tokio::time::timeout(Duration::from_secs(5), serve.run(handle, std::future::pending()))
        .await
        .expect("serving ends with the transport");
}
