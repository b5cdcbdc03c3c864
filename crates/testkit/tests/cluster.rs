//! The cluster fixture itself: it forms one cluster, a node stopped leaves it running on the
//! others and rejoins when started again, and nothing is left behind.

use std::time::Instant;

use airlock_testkit::cluster::Cluster;
use airlock_testkit::unreachable;

#[tokio::test]
async fn three_nodes_form_one_cluster_and_a_node_stops_and_rejoins() {
    let started = Instant::now();
    let mut cluster = match Cluster::start(3).await {
        Ok(cluster) => cluster,
        Err(reason) => return unreachable(reason),
    };
    eprintln!("a cluster of 3 started in {:?}", started.elapsed());
    assert_eq!(cluster.amqp_urls().split(',').count(), 3);
    assert_eq!(cluster.running_nodes(2).unwrap().len(), 3);

    let stopping = Instant::now();
    cluster.node_mut(1).stop().await.unwrap();
    eprintln!("a node stopped in {:?}", stopping.elapsed());
    assert!(!cluster.node(1).is_running());
    let others = cluster.running_nodes(0).unwrap();
    assert_eq!(others.len(), 2, "{others:?}");
    assert!(!others.iter().any(|name| name == cluster.node(1).name()));

    let starting = Instant::now();
    cluster.node_mut(1).start_again().await.unwrap();
    eprintln!("it started again in {:?}", starting.elapsed());
    assert_eq!(cluster.running_nodes(2).unwrap().len(), 3, "the node rejoined");

    let dirs: Vec<_> = cluster.nodes().iter().map(|node| node.dir().to_owned()).collect();
    drop(cluster);
    for dir in dirs {
        assert!(!dir.exists(), "{} is removed", dir.display());
    }
}
