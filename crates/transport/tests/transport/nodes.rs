//! RabbitMQ only: a transport given several broker addresses, as for the nodes of a cluster.
//!
//! The nodes are TCP forwarders to the test broker: stopping one cuts its connections as a
//! stopped node would, while the broker keeps the queues, so what is tested is the client's
//! side of a failover (which address it dials, and that it moves on), not the cluster's.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use airlock_transport::{AmqpOptions, AmqpTransport, Destination, Message, Transport, TransportError};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::support::{HANG_GUARD, amqp_url, broker, broker_with, fixture, next, run, unique_prefix};

/// A stand-in for one node: forwards every connection to `upstream` until stopped.
struct Node {
    address: SocketAddr,
    open: Arc<AtomicUsize>,
    serving: JoinHandle<()>,
}

impl Node {
    async fn start(upstream: String) -> Node {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let open = Arc::new(AtomicUsize::new(0));
        let counter = open.clone();
        let serving = tokio::spawn(async move {
            // Dropped with this task when the node stops: every forwarded connection is cut.
            let mut connections = JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                let (upstream, open) = (upstream.clone(), counter.clone());
                connections.spawn(async move {
                    let Ok(mut broker) = TcpStream::connect(upstream).await else { return };
                    let _counted = Counted::new(open);
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut broker).await;
                });
            }
        });
        Node { address, open, serving }
    }

    fn connections(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    fn stop(&self) {
        self.serving.abort();
    }
}

/// Where `host:port` is in `url`.
fn authority(url: &str) -> std::ops::Range<usize> {
    let start = url.find('@').map_or_else(|| url.find("://").unwrap() + 3, |at| at + 1);
    let end = url[start..].find('/').map_or(url.len(), |slash| start + slash);
    start..end
}

/// One open connection of a node, counted until it ends or is cut.
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(open: Arc<AtomicUsize>) -> Self {
        open.fetch_add(1, Ordering::SeqCst);
        Counted(open)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The test broker's URL with its `host:port` replaced by `address`.
fn url_via(address: SocketAddr) -> String {
    let mut url = amqp_url();
    url.replace_range(authority(&url), &address.to_string());
    url
}

/// An address nothing listens on.
async fn dead_address() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

#[tokio::test]
async fn a_stopped_node_moves_the_transport_to_another_and_nothing_is_lost() {
    let prefix = unique_prefix();
    let Some(cleanup) = broker(&format!("{prefix}-cleanup")).await else { return };
    let url = amqp_url();
    let broker_address = url[authority(&url)].to_owned();
    let nodes = [Node::start(broker_address.clone()).await, Node::start(broker_address).await];
    let dead = dead_address().await;
    let list = [url_via(dead), url_via(nodes[0].address), url_via(nodes[1].address)].join(",");
    let options = AmqpOptions::new(list).with_connection_name(&prefix);
    let transport = broker_with(options).await.expect("a listed node answers");
    run(transport, cleanup, fixture(&prefix), move |transport, topology| async move {
        let queue = topology.requests_queue();
        let mut consumer = transport.consume(&queue, 10).await.unwrap();
        let mut reconnects = transport.reconnects();
        transport.publish(&Destination::queue(&queue), Message::new("before")).await.unwrap();
        let delivery = next(&mut consumer).await;
        assert_eq!(&delivery.message.body[..], b"before");
        delivery.ack().await.unwrap();

        let serving = nodes.iter().position(|node| node.connections() == 1).expect("one node carries the connection");
        assert_eq!(nodes[1 - serving].connections(), 0, "one connection per transport");
        nodes[serving].stop();

        // The publish rides out the loss on the other node; the consumer resubscribes there.
        // An acknowledgement cut off with the node leaves "before" to come again, marked so.
        transport.publish(&Destination::queue(&queue), Message::new("after")).await.unwrap();
        let mut delivery = next(&mut consumer).await;
        if &delivery.message.body[..] == b"before" {
            assert!(delivery.redelivered, "only a redelivery comes twice");
            delivery.ack().await.unwrap();
            delivery = next(&mut consumer).await;
        }
        assert_eq!(&delivery.message.body[..], b"after");
        delivery.ack().await.unwrap();
        tokio::time::timeout(HANG_GUARD, reconnects.wait_for(|&count| count >= 1)).await.unwrap().unwrap();
        assert_eq!(nodes[1 - serving].connections(), 1, "the transport moved to the node still up");
        assert_eq!(nodes[serving].connections(), 0);
    })
    .await;
}

#[tokio::test]
async fn with_every_node_down_connecting_fails_after_one_try_of_each() {
    let list = [url_via(dead_address().await), url_via(dead_address().await)].join(",");
    let options = AmqpOptions { connect_timeout: Duration::from_secs(5), ..AmqpOptions::new(list) };
    let result = tokio::time::timeout(HANG_GUARD, AmqpTransport::connect_with(options)).await.expect("hung");
    assert!(matches!(result, Err(TransportError::Unavailable(_))), "{result:?}");
}
