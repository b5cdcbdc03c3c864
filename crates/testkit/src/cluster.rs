//! A RabbitMQ cluster of a test's own: several [`Node`]s on their own ports and directories,
//! formed into one cluster while they boot, each with the management API. The test stops and
//! starts its nodes; dropping the cluster stops every node and removes their directories.
//!
//! The nodes list each other in their configuration (`classic_config` peer discovery) and are
//! started together: the first to take the backend's lock forms the cluster and the others
//! join it during their own boot, so the cluster is ready when every node is, with no
//! `join_cluster` round afterwards. Three nodes take about 20 seconds on two cores.
//!
//! The nodes run with `cluster_partition_handling = pause_minority` and a `net_ticktime` of 10 s
//! (see the node's configuration for why): a node cut off from the other two by
//! [`Cluster::partition`], or frozen ([`Node::freeze`]), is seen gone by its peers within about
//! 10 s, and a partitioned node then pauses and drops its clients, who move to the majority.

use std::net::Ipv4Addr;
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
        Ok(running_nodes(&String::from_utf8_lossy(&output.stdout)))
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

/// The Erlang names of the running nodes in `status`, the output of `rabbitmqctl
/// cluster_status --formatter json` (none when it lists none).
pub fn running_nodes(status: &str) -> Vec<String> {
    // `..."running_nodes":["a@localhost","b@localhost"],...`: names hold no quotes.
    let list = status.split("\"running_nodes\":[").nth(1).and_then(|rest| rest.split(']').next());
    list.unwrap_or_default()
        .split(',')
        .map(|name| name.trim().trim_matches('"').to_owned())
        .filter(|name| !name.is_empty())
        .collect()
}

// === partitions ===

/// A node cut off from the other nodes of its cluster: packet filter rules (an nftables table
/// of its own) drop the distribution traffic between it and its peers, both ways, on
/// loopback. Clients still reach every node, and `rabbitmqctl` still reaches the cut-off node
/// (it connects from `127.0.0.1`). Dropping the partition removes its rules, also when the
/// test panics.
#[derive(Debug)]
#[must_use = "the partition heals when dropped"]
pub struct Partition {
    table: String,
}

impl Cluster {
    /// Cuts node `index` off from the others (see [`Partition`]), or says why it cannot: no
    /// `nft` on this machine (Debian's `nftables`), or no right to change the packet filter.
    /// The rules name only this cluster's nodes' distribution ports and addresses: never the
    /// shared node's or an AMQP port.
    pub async fn partition(&self, index: usize) -> Result<Partition, String> {
        let end = |node: &Node| (node.dist_address(), node.dist_port());
        let peers: Vec<_> = (self.nodes.iter().enumerate()).filter(|(i, _)| *i != index).map(|(_, n)| end(n)).collect();
        let (table, rules) = partition_rules(end(&self.nodes[index]), &peers);
        let partition = Partition { table };
        // A table left by a test that was killed before it could heal goes first.
        partition.remove();
        load_rules(&rules).await?;
        Ok(partition)
    }
}

impl Partition {
    /// Heals the partition: the same as dropping it.
    pub fn heal(self) {}

    fn remove(&self) {
        if let Ok(mut child) = std::process::Command::new("nft")
            .args(["delete", "table", "inet", &self.table])
            .stderr(std::process::Stdio::null())
            .spawn()
        {
            let _ = child.wait();
        }
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.remove();
    }
}

/// The nftables table and script that cut the node whose distribution connections leave from
/// `cut.0` and whose listener is on port `cut.1` off from `peers` (each the same pair).
fn partition_rules(cut: (Ipv4Addr, u16), peers: &[(Ipv4Addr, u16)]) -> (String, String) {
    let set = |items: Vec<String>| format!("{{ {} }}", items.join(", "));
    let peer_ports = set(peers.iter().map(|(_, port)| port.to_string()).collect());
    let peer_addresses = set(peers.iter().map(|(address, _)| address.to_string()).collect());
    let (address, port) = cut;
    let table = format!("airlock_partition_{port}");
    // Loopback packets pass the output hook once: one chain sees both directions.
    let rules = format!(
        "table inet {table} {{\n\
           chain output {{\n\
             type filter hook output priority 0; policy accept;\n\
             oifname \"lo\" ip saddr {address} tcp dport {peer_ports} drop\n\
             oifname \"lo\" ip daddr {address} tcp sport {peer_ports} drop\n\
             oifname \"lo\" ip saddr {peer_addresses} tcp dport {port} drop\n\
             oifname \"lo\" ip daddr {peer_addresses} tcp sport {port} drop\n\
           }}\n\
         }}\n"
    );
    (table, rules)
}

/// Loads `rules` (an nftables script) with `nft -f -`.
async fn load_rules(rules: &str) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new("nft")
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("nft (Debian's nftables) cannot run here: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(rules.as_bytes()).await.map_err(|e| format!("nft: {e}"))?;
    }
    let output = child.wait_with_output().await.map_err(|e| format!("nft: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!("nft refused the partition's rules: {}\n{rules}", String::from_utf8_lossy(&output.stderr)))
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

#[cfg(test)]
mod tests;
