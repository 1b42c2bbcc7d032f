//! `stampede collect`: the skew of a live (mock) cluster, read over its admin API and
//! over gRPC `List`, and refusal of non-loopback sources.

use std::process::Command;

use mock_node::config::ClusterConfig;
use mock_node::fleet::{self, FleetOptions};
use stampede_proto::sandbox_service_client::SandboxServiceClient;
use stampede_proto::{SandboxConfig, SandboxCreateRequest};

async fn create(addr: std::net::SocketAddr, id: &str) {
    let mut c = SandboxServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connect");
    c.create(SandboxCreateRequest {
        sandbox: Some(SandboxConfig {
            sandbox_id: id.into(),
            template_id: "base".into(),
            vcpu: 1,
            ram_mb: 256,
            ..Default::default()
        }),
        start_time: None,
        end_time: None,
    })
    .await
    .expect("create");
}

fn collect(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_stampede"))
        .arg("collect")
        .args(args)
        .output()
        .expect("stampede runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collect_prints_per_node_counts_and_skew() {
    let cluster = ClusterConfig {
        nodes: 2,
        seed: Some(1),
        ..ClusterConfig::default()
    };
    let fleet = fleet::start(cluster, FleetOptions::default())
        .await
        .expect("fleet");
    let nodes = fleet.nodes();
    for i in 0..3 {
        create(nodes[0].addr, &format!("a{i}")).await;
    }
    create(nodes[1].addr, "b0").await;

    let admin = fleet.admin_url();
    let out = tokio::task::spawn_blocking(move || collect(&["--mock-admin", &admin]))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // counts 3 and 1: mean 2, std 1, CV 0.5
    assert!(text.contains("CV 0.500"), "{text}");
    assert!(
        text.contains("node-00") && text.contains("node-01"),
        "{text}"
    );

    let grpc = nodes[0].addr.to_string();
    let out = tokio::task::spawn_blocking(move || collect(&["--orchestrator", &grpc]))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("nodes 1") && text.contains("max 3"), "{text}");

    let out = tokio::task::spawn_blocking(|| collect(&["--mock-admin", "http://10.9.8.7:9100"]))
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-target 10.9.8.7"));
    fleet.shutdown().await;
}
