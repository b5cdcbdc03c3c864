//! Where the broker is: one URL, or the comma-separated URLs of a cluster's nodes.
//!
//! A dial tries the nodes in turn, each once, from a place picked at random when the transport
//! is made (so a fleet's roles spread over the nodes); after a connection is made, the next
//! dial starts at the node after it, so a role whose node stopped tries the others first and
//! that node last. Waiting between rounds is the callers' backoff, as with a single node.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};

use lapin::{tcp::OwnedTLSConfig, uri::AMQPUri};

use super::AmqpOptions;
use crate::TransportError;

/// One node: its URL, parsed, and the TLS settings to reach it with.
pub(super) struct Node {
    pub(super) uri: AMQPUri,
    pub(super) tls: OwnedTLSConfig,
    /// `host:port`, for logs (the URL carries the password).
    pub(super) label: String,
}

/// The nodes of the broker, and where the next dial starts.
pub(super) struct Nodes {
    nodes: Vec<Node>,
    next: AtomicUsize,
}

impl Nodes {
    /// The nodes `options.url` lists, each asking for `options.frame_max` and
    /// `options.heartbeat` unless its URL sets them. Every node must name the same user and vhost: the transport is one
    /// identity on one cluster.
    pub(super) fn parse(options: &AmqpOptions) -> Result<Self, TransportError> {
        let mut nodes: Vec<Node> = Vec::new();
        for (position, url) in options.url.split(',').map(str::trim).enumerate() {
            let mut uri: AMQPUri = url
                .parse()
                .map_err(|e| TransportError::Invalid(format!("AMQP URL {} of the list: {e}", position + 1)))?;
            uri.query.frame_max.get_or_insert(options.frame_max);
            uri.query.heartbeat.get_or_insert(options.heartbeat);
            if let Some(first) = nodes.first()
                && (first.uri.authority.userinfo.username != uri.authority.userinfo.username
                    || first.uri.vhost != uri.vhost)
            {
                return Err(TransportError::Invalid(
                    "every AMQP URL of the list must name the same user and vhost (the nodes of one cluster)".into(),
                ));
            }
            let tls = options.tls(&uri)?;
            let label = format!("{}:{}", uri.authority.host, uri.authority.port);
            nodes.push(Node { uri, tls, label });
        }
        let start = RandomState::new().hash_one(0u8) as usize % nodes.len();
        Ok(Nodes { nodes, next: AtomicUsize::new(start) })
    }

    /// The broker user every node is reached as.
    pub(super) fn user(&self) -> &str {
        &self.nodes[0].uri.authority.userinfo.username
    }

    /// Every node once, in the order to try them now, with its place in the list.
    pub(super) fn in_turn(&self) -> impl Iterator<Item = (usize, &Node)> {
        let start = self.next.load(Ordering::Relaxed);
        (0..self.nodes.len()).map(move |offset| {
            let index = (start + offset) % self.nodes.len();
            (index, &self.nodes[index])
        })
    }

    /// A connection was made to node `index`: the next dial starts after it.
    pub(super) fn connected(&self, index: usize) {
        self.next.store((index + 1) % self.nodes.len(), Ordering::Relaxed);
    }

    /// How many nodes there are.
    pub(super) fn len(&self) -> usize {
        self.nodes.len()
    }
}

impl fmt::Debug for Nodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.nodes.iter().map(|node| &node.label)).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::amqp::{DEFAULT_FRAME_MAX, DEFAULT_HEARTBEAT};

    fn nodes(url: &str) -> Result<Nodes, TransportError> {
        Nodes::parse(&AmqpOptions::new(url))
    }

    #[test]
    fn one_url_is_one_node_and_a_list_is_several() {
        let one = nodes("amqp://u:p@h1:5672/%2f").unwrap();
        assert_eq!((one.len(), one.user()), (1, "u"));
        let three = nodes("amqp://u:p@h1:5681/%2f, amqp://u:p@h2:5682/%2f,amqp://u:p@h3:5683/%2f").unwrap();
        assert_eq!(format!("{three:?}"), r#"["h1:5681", "h2:5682", "h3:5683"]"#);
    }

    #[test]
    fn a_node_asks_for_the_default_frame_size_unless_its_url_sets_one() {
        let listed = nodes("amqp://u:p@h1/%2f,amqp://u:p@h2/%2f?frame_max=131072").unwrap();
        let frame_max: Vec<_> = listed.in_turn().map(|(index, node)| (index, node.uri.query.frame_max)).collect();
        assert!(frame_max.contains(&(0, Some(DEFAULT_FRAME_MAX))));
        assert!(frame_max.contains(&(1, Some(131_072))));
        let listed = nodes("amqp://u:p@h1/%2f,amqp://u:p@h2/%2f?heartbeat=30").unwrap();
        let heartbeat: Vec<_> = listed.in_turn().map(|(index, node)| (index, node.uri.query.heartbeat)).collect();
        assert!(heartbeat.contains(&(0, Some(DEFAULT_HEARTBEAT))));
        assert!(heartbeat.contains(&(1, Some(30))));
    }

    #[test]
    fn every_node_is_tried_once_and_a_loss_moves_on_to_the_next() {
        let three = nodes("amqp://u:p@h1/%2f,amqp://u:p@h2/%2f,amqp://u:p@h3/%2f").unwrap();
        let mut order: Vec<usize> = three.in_turn().map(|(index, _)| index).collect();
        let first = order[0];
        assert_eq!(order, [first, (first + 1) % 3, (first + 2) % 3]);
        three.connected(1);
        order = three.in_turn().map(|(index, _)| index).collect();
        assert_eq!(order, [2, 0, 1], "after node 1, the others first and node 1 last");
    }

    #[test]
    fn nodes_of_other_users_or_vhosts_or_bad_urls_are_refused() {
        for list in [
            "amqp://u:p@h1/%2f,amqp://v:p@h2/%2f",
            "amqp://u:p@h1/%2f,amqp://u:p@h2/other",
            "amqp://u:p@h1/%2f,",
            "amqp://u:p@h1/%2f,http://h2",
        ] {
            assert!(matches!(nodes(list), Err(TransportError::Invalid(_))), "{list}");
        }
    }

    #[test]
    fn the_password_is_never_printed() {
        let listed = nodes("amqp://u:secret@h1/%2f,amqp://u:secret@h2/%2f").unwrap();
        assert!(!format!("{listed:?}").contains("secret"));
    }
}
