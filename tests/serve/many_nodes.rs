//! The placement service syncs a fleet of thousands of virtual nodes (one mock-node
//! process, one listener per node) and places on them.

use std::net::SocketAddr;
use std::time::Duration;

use mock_node::config::ClusterConfig;
use mock_node::fleet::{self, FleetOptions};
use stampede::serve::{self, ServeConfig};

const NODES: usize = 2_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_syncs_two_thousand_virtual_nodes() {
    let mut cluster = ClusterConfig {
        nodes: NODES,
        seed: Some(3),
        ..ClusterConfig::default()
    };
    cluster.node.max_starting = 0;
    let fleet = tokio::time::timeout(
        Duration::from_secs(30),
        fleet::start(cluster, FleetOptions::default()),
    )
    .await
    .expect("the fleet starts within 30 s")
    .expect("fleet");
    let cfg = ServeConfig {
        sync_interval: Duration::from_secs(3600),
        ..ServeConfig::default()
    };
    let listen = SocketAddr::from(([127, 0, 0, 1], 0));
    // The first sync of every node completes inside `start`.
    let svc = tokio::time::timeout(
        Duration::from_secs(60),
        serve::start(cfg, stampede::serve_cmd::targets_of(&fleet), listen),
    )
    .await
    .expect("the first sync of 2,000 nodes ends within 60 s")
    .expect("service");
    let nodes = svc.nodes();
    assert_eq!(nodes.len(), NODES);
    let not_ready: Vec<_> = nodes.iter().filter(|n| n.status != "ready").collect();
    assert!(
        not_ready.is_empty(),
        "{} nodes not ready after the first sync, e.g. {:?}",
        not_ready.len(),
        not_ready.first().map(|n| (&n.id, &n.status))
    );
    // Every node reported its own capacity through its own endpoint.
    assert!(nodes.iter().all(|n| n.metrics.cpu_count > 0));
    svc.shutdown().await;
    fleet.shutdown().await;
}
