//! The service's gRPC client of a node: one HTTP/2 connection per node, over the real wire.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use mock_node::fleet::FleetOptions;
use stampede::placement::{ChannelCell, ChannelState};
use stampede::serve::{CreateSpec, NodeClient};

use crate::support::serve::cluster;

/// One answer larger than the stream's 64 KiB window (a `List` of 190 sandboxes whose
/// 120-byte ids it repeats four times each) arrives whole: the client hands each received part back to the
/// stream's window, or the node could send no more and the call would run out its
/// deadline.
#[tokio::test]
async fn an_answer_larger_than_one_flow_control_window_arrives() {
    let fleet = mock_node::fleet::start(cluster(1, &[]), FleetOptions::default())
        .await
        .expect("fleet starts");
    let node = fleet.nodes().remove(0);
    let cell = Arc::new(ChannelCell::default());
    let client = NodeClient::new(&node.addr.to_string(), Duration::from_secs(2), cell.clone())
        .expect("client");
    let limit = Duration::from_secs(5);
    let first = client.service_info(limit).await.expect("first answer");
    assert_eq!(first.node_id, node.id);
    assert_eq!(
        cell.get(),
        ChannelState::Ready,
        "connected through the watch"
    );
    let now = SystemTime::now();
    let count = 190;
    for k in 0..count {
        let spec = CreateSpec {
            sandbox_id: format!("{k:03}-{}", "x".repeat(116)),
            template_id: "base".to_string(),
            vcpu: 1,
            ram_mb: 128,
            metadata: BTreeMap::new(),
            start: now,
            end: now + Duration::from_secs(3600),
            envd_version: "0.2.0".to_string(),
            max_length_hours: 24,
            snapshot: false,
        };
        let r = client.create(&spec, limit).await;
        assert!(r.is_ok(), "create {k}: {r:?}");
    }
    let listed = client.list(limit).await.expect("the whole list arrives");
    assert_eq!(listed.len(), count);
    fleet.shutdown().await;
}
