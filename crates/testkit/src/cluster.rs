//! A RabbitMQ cluster of a test's own: several [`Node`]s on their own ports and directories,
//! formed into one cluster while they boot, each with the management API. The test stops and
//! starts its nodes; dropping the cluster stops every node and removes their directories.
//!
//! The nodes list each other in their configuration (`classic_config` peer discovery) and are
//! started together: the first to take the backend's lock forms the cluster and the others
//! join it during their own boot, so the cluster is ready when every node is, with no
//! `join_cluster` round afterwards. Three nodes take about 20 seconds on two cores.

use std::thread;

use crate::node::{Node, NodeOptions};

/// A running cluster; see the module documentation.
#[derive(Debug)]
pub struct Cluster {
    nodes: Vec<Node>,
}

impl Cluster {
    /// Starts `size` nodes as one cluster and checks that every node runs in it, or says why
    /// it cannot (no RabbitMQ server on this machine, a node that did not boot or join): the
    /// caller gates on it as on an unreachable broker.
    ///
    /// A cluster that fails to form is started once more, on new names, ports and
    /// directories: what most often stops a node booting on a busy machine is a port taken
    /// between being picked and being bound.
    pub async fn start(size: usize) -> Result<Self, String> {
        assert!(size >= 1, "a cluster has at least one node");
        tokio::task::spawn_blocking(move || {
            Self::start_blocking(size).or_else(|first| {
                eprintln!("a test cluster did not form; starting another: {first}");
                Self::start_blocking(size)
            })
        })
        .await
        .map_err(|e| e.to_string())?
    }

    fn start_blocking(size: usize) -> Result<Self, String> {
        let mut cluster = Cluster { nodes: Vec::with_capacity(size) };
        for _ in 0..size {
            cluster.nodes.push(Node::prepare(NodeOptions::default(), true)?);
        }
        let names: Vec<String> = cluster.nodes.iter().map(|node| node.name().to_owned()).collect();
        // Booting is mostly waiting on each other: every node at once.
        thread::scope(|scope| {
            let boots: Vec<_> = (cluster.nodes.iter_mut())
                .map(|node| {
                    let names = &names;
                    scope.spawn(move || {
                        node.configure(names)?;
                        node.launch()?;
                        node.wait_blocking()
                    })
                })
                .collect();
            boots.into_iter().try_for_each(|boot| boot.join().map_err(|_| "a node's boot panicked".to_owned())?)
        })?;
        cluster.check_formed()?;
        Ok(cluster)
    }

    /// Fails unless every node runs as a member of one cluster (peer discovery that gave up
    /// would leave a node on its own, which boots just the same). Any member's view will do:
    /// one that formed a cluster of its own would not list the others.
    fn check_formed(&self) -> Result<(), String> {
        let running = self.running_nodes(0)?;
        match self.nodes.iter().find(|node| !running.iter().any(|name| name == node.name())) {
            Some(missing) => Err(format!("{} is not running in the cluster: {running:?}", missing.name())),
            None => Ok(()),
        }
    }

    /// The Erlang names of the nodes that node `asking` sees running in its cluster
    /// (`rabbitmqctl cluster_status`); it must run itself.
    fn running_nodes(&self, asking: usize) -> Result<Vec<String>, String> {
        let output = self.nodes[asking]
            .ctl()
            .args(["cluster_status", "--formatter", "json"])
            .output()
            .map_err(|e| format!("rabbitmqctl: {e}"))?;
        let status = String::from_utf8_lossy(&output.stdout);
        // `..."running_nodes":["a@localhost","b@localhost"],...`: names hold no quotes.
        let list = status.split("\"running_nodes\":[").nth(1).and_then(|rest| rest.split(']').next());
        let list = list.ok_or_else(|| format!("no running nodes in {status}"))?;
        Ok(list
            .split(',')
            .map(|name| name.trim().trim_matches('"').to_owned())
            .filter(|name| !name.is_empty())
            .collect())
    }

    /// The nodes, in a fixed order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Node `index`.
    pub fn node(&self, index: usize) -> &Node {
        &self.nodes[index]
    }

    /// Node `index`, to stop or start it again ([`Node::stop`], [`Node::start_again`]).
    pub fn node_mut(&mut self, index: usize) -> &mut Node {
        &mut self.nodes[index]
    }

    /// Every node's AMQP URL, comma-separated: what `--amqp` takes for a cluster.
    pub fn amqp_urls(&self) -> String {
        self.nodes.iter().map(Node::amqp_url).collect::<Vec<_>>().join(",")
    }

    /// The index of the node whose Erlang name is `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|node| node.name() == name)
    }
}

impl Drop for Cluster {
    /// Ends every node at once, without the orderly stop a test asks for (its data goes
    /// anyway); each node's own drop then removes its directory.
    fn drop(&mut self) {
        thread::scope(|scope| {
            for node in &mut self.nodes {
                scope.spawn(|| node.end_blocking());
            }
        });
    }
}
