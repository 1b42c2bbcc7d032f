//! Thousands of virtual nodes in one process share one server stack: each node is its
//! own listener and answers as itself.

use crate::support as common;

use std::time::Duration;

use common::*;
use futures::StreamExt;
use mock_node::fleet::FleetOptions;

/// Nodes of the fleet. Each costs three descriptors in this process (its listener, and
/// both ends of the test's connection), 6,000 in all.
const NODES: usize = 2_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_nodes_each_answer_service_info_as_themselves() {
    let started = std::time::Instant::now();
    let f = tokio::time::timeout(Duration::from_secs(30), async {
        let mut cfg = mock_node::config::ClusterConfig {
            nodes: NODES,
            seed: Some(7),
            ..Default::default()
        };
        cfg.node.cpu_count = 8;
        mock_node::fleet::start(cfg, FleetOptions::default())
            .await
            .expect("fleet starts")
    })
    .await
    .expect("a 2,000-node fleet starts within 30 s");
    eprintln!("{NODES} nodes ready in {:?}", started.elapsed());
    let nodes = f.nodes();
    assert_eq!(nodes.len(), NODES);
    let mut addrs: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    addrs.sort();
    addrs.dedup();
    assert_eq!(addrs.len(), NODES, "every node has its own address");

    // 64 at a time, each on its own connection, all within a deadline.
    let answered = tokio::time::timeout(Duration::from_secs(60), async {
        futures::stream::iter(nodes.iter().cloned())
            .map(|n| async move {
                let (_, mut info) = clients(n.addr).await;
                let si = info
                    .service_info(())
                    .await
                    .expect("ServiceInfo")
                    .into_inner();
                (n.id, si)
            })
            .buffer_unordered(64)
            .collect::<Vec<_>>()
            .await
    })
    .await
    .expect("every node answers within 60 s");
    assert_eq!(answered.len(), NODES);
    for (id, si) in &answered {
        assert_eq!(&si.node_id, id, "a node answered as another");
        assert_eq!(si.metric_cpu_count, 8);
    }
    f.shutdown().await;
}
