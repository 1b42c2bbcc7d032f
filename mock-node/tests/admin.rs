//! The admin endpoint: refusals, authentication, Prometheus text.

mod common;

use common::*;
use mock_node::fleet::{self, FleetError, FleetOptions};
use serde_json::json;

#[tokio::test]
async fn admin_rejects_bad_faults_with_400() {
    let f = fleet_with(1, |_| {}).await;
    for body in [
        json!({"kind": "explode", "nodes": ["node-00"]}),
        json!({"kind": "kill", "nodes": ["node-77"]}),
        json!({"kind": "kill", "nodes": []}),
        json!({"kind": "slow", "nodes": ["node-00"]}),
        json!({"kind": "errors", "nodes": ["node-00"], "probability": 2.0}),
        json!({"kind": "status", "nodes": ["node-00"], "status": "sleepy"}),
        json!({"kind": "kill", "nodes": ["node-00"], "duration": "soon"}),
    ] {
        let (status, v) = post_fault(&f, body.clone()).await;
        assert_eq!(status, 400, "{body}");
        assert!(v["error"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    }
    let (_, v) = post_fault(&f, json!({"kind": "kill", "nodes": ["node-77"]})).await;
    assert!(v["error"].as_str().unwrap_or("").contains("node-77"));
    assert_eq!(heal(&f, 999).await, 404);
    let r = http()
        .delete(format!("{}/faults/abc", f.admin_url()))
        .send()
        .await
        .expect("admin");
    assert_eq!(r.status().as_u16(), 404);
    f.shutdown().await;
}

#[tokio::test]
async fn admin_token_is_required_when_set_and_for_non_loopback() {
    let cfg = mock_node::config::ClusterConfig {
        nodes: 1,
        ..Default::default()
    };
    let exposed = FleetOptions {
        admin_addr: "0.0.0.0:0".parse().expect("addr"),
        ..Default::default()
    };
    let e = fleet::start(cfg.clone(), exposed)
        .await
        .expect_err("refused");
    assert!(matches!(e, FleetError::AdminNotLoopback(_)), "{e}");

    let opts = FleetOptions {
        admin_token: Some(mock_node::secret::AdminToken::new("s3cret")),
        ..Default::default()
    };
    let f = fleet::start(cfg, opts).await.expect("starts");
    let url = format!("{}/nodes", f.admin_url());
    let r = http().get(&url).send().await.expect("admin");
    assert_eq!(r.status().as_u16(), 401);
    let r = http()
        .get(&url)
        .bearer_auth("wrong")
        .send()
        .await
        .expect("admin");
    assert_eq!(r.status().as_u16(), 401);
    let r = http()
        .get(&url)
        .bearer_auth("s3cret")
        .send()
        .await
        .expect("admin");
    assert_eq!(r.status().as_u16(), 200);
    f.shutdown().await;
}

#[tokio::test]
async fn metrics_endpoint_labels_every_node() {
    let f = fleet_with(3, |_| {}).await;
    let (mut sb, _) = clients(f.nodes()[2].addr).await;
    sb.create(create("a", 1, 1)).await.expect("create");
    let text = http()
        .get(format!("{}/metrics", f.admin_url()))
        .send()
        .await
        .expect("admin")
        .text()
        .await
        .expect("text");
    assert!(
        text.contains("mock_node_sandboxes{node=\"node-02\"} 1"),
        "{text}"
    );
    assert!(text.contains("mock_node_sandboxes{node=\"node-00\"} 0"));
    let health = http()
        .get(format!("{}/health", f.admin_url()))
        .send()
        .await
        .expect("admin");
    assert_eq!(health.status().as_u16(), 200);
    f.shutdown().await;
}
