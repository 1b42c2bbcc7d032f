//! The node sync cycle as E2B's `nodemanager/sync.go` runs it, over the real wire.

use crate::support::serve as serve_common;

use mock_node::config::{FailureCode, FailureRule, RpcKind};
use serve_common::{cluster, serve_config, Rig};
use stampede::placement::AccountingMode;
use stampede::serve::SYNC_MAX_RETRIES;

/// E2B's `nodemanager/sync.go`: each cycle tries ServiceInfo then List up to 4 times;
/// ServiceInfo's metrics are applied even when every List fails, and a cycle that never
/// completes marks the node unhealthy.
#[tokio::test]
async fn service_info_applies_when_list_fails_and_the_node_goes_unhealthy() {
    assert_eq!(SYNC_MAX_RETRIES, 4);
    let mut c = cluster(2, &[]);
    let mut bad = c.overrides.remove("node-01").unwrap_or_default();
    bad.failures = Some(vec![FailureRule {
        rpc: RpcKind::List,
        probability: 1.0,
        code: FailureCode::Internal,
    }]);
    c.overrides.insert("node-01".into(), bad);
    let rig = Rig::start(c, serve_config(AccountingMode::Optimistic)).await;
    let before = rig.nodes().await["node-01"]["stampede"].clone();
    rig.svc.sync_now().await;
    let nodes = rig.nodes().await;
    assert_eq!(nodes["node-00"]["status"], "ready");
    let n1 = &nodes["node-01"];
    assert_eq!(n1["status"], "unhealthy", "{n1}");
    assert_eq!(n1["metrics"]["cpuCount"], 16, "ServiceInfo applied: {n1}");
    assert!(n1["serviceInstanceID"]
        .as_str()
        .is_some_and(|s| !s.is_empty()));
    let count = |v: &serde_json::Value, f: &str| v[f].as_u64().unwrap();
    assert_eq!(
        count(&n1["stampede"], "syncFailures"),
        count(&before, "syncFailures") + 1,
        "one failed cycle: {n1}"
    );
    assert_eq!(
        count(&n1["stampede"], "syncs"),
        count(&before, "syncs") + SYNC_MAX_RETRIES as u64,
        "ServiceInfo applied on each of the 4 tries: {n1}"
    );
    let truth = rig
        .fleet
        .truth()
        .nodes
        .into_iter()
        .find(|n| n.id == "node-01")
        .expect("node-01");
    assert!(truth.status == "healthy", "{}", truth.status);
    rig.stop().await;
}
