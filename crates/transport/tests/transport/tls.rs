//! TLS: a RabbitMQ node of the test's own with a TLS listener whose certificate a CA made for
//! the test signed. Verified against that CA the connection works; without it, it is refused.

use std::error::Error as _;

use airlock_testkit::node::{Node, NodeOptions};
use airlock_testkit::unreachable;
use airlock_transport::{AmqpOptions, AmqpTransport, Destination, Message, Topology, Transport, TransportError};

use crate::support::{HANG_GUARD, unique_prefix};

#[tokio::test]
async fn amqps_is_verified_against_the_ca_file() {
    let node = match Node::start(NodeOptions { tls: true }).await {
        Ok(node) => node,
        Err(reason) => return unreachable(reason),
    };
    let url = node.amqps_url().expect("a TLS listener");
    let ca_file = node.ca_file();
    tokio::time::timeout(HANG_GUARD, async {
        // Verified with the CA: a message makes the round trip over TLS.
        let options = AmqpOptions::new(&url).with_connection_name("tls-test").with_ca_file(ca_file.clone());
        let transport = AmqpTransport::connect_with(options).await.expect("TLS with the CA connects");
        let topology = Topology::new(unique_prefix());
        transport.declare(&topology).await.unwrap();
        let queue = topology.requests_queue();
        let mut consumer = transport.consume(&queue, 1).await.unwrap();
        transport.publish(&Destination::queue(&queue), Message::new("over tls").with_message_id("m-1")).await.unwrap();
        let delivery = consumer.next().await.expect("a delivery");
        assert_eq!(&delivery.message.body[..], b"over tls");
        delivery.ack().await.unwrap();
        transport.close().await;

        // Without the CA the broker's certificate chains to nothing trusted.
        let error = AmqpTransport::connect_with(AmqpOptions::new(&url)).await.unwrap_err();
        assert!(matches!(error, TransportError::Unavailable(_)), "{error:?}");
        let mut chain = Vec::new();
        let mut cause: Option<&dyn std::error::Error> = error.source();
        while let Some(e) = cause {
            chain.push(e.to_string());
            cause = e.source();
        }
        assert!(chain.iter().any(|e| e.contains("UnknownIssuer")), "refused for another reason: {chain:?}");
    })
    .await
    .expect("hung");

    // A CA file beside a plain URL, or one that is not there, is refused before connecting.
    let plain = AmqpOptions::new(node.amqp_url()).with_ca_file(ca_file);
    let error = AmqpTransport::connect_with(plain).await.unwrap_err();
    assert!(error.to_string().contains("not amqps://"), "{error}");
    let missing = AmqpOptions::new(&url).with_ca_file(Some("/nonexistent/ca.pem".into()));
    let error = AmqpTransport::connect_with(missing).await.unwrap_err();
    assert!(error.to_string().contains("/nonexistent/ca.pem"), "{error}");
}
