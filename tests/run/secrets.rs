//! Keys come only from the env vars a profile names and never reach output, logs or
//! reports: an external run against real servers on loopback, then a grep.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;

use mock_node::config::ClusterConfig;
use mock_node::fleet::{self, FleetOptions};
use stampede::serve::{self, ServeConfig};

const KEY: &str = "e2b_canary_key_5f1d2c3b4a";
const ADMIN: &str = "admin_canary_token_9e8d7c";

fn grep_dir(dir: &std::path::Path, needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    for e in std::fs::read_dir(dir).expect("dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            hits.extend(grep_dir(&p, needle));
        } else if let Ok(text) = std::fs::read_to_string(&p) {
            if text.contains(needle) {
                hits.push(p.display().to_string());
            }
        }
    }
    hits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_and_admin_token_never_leak() {
    let cluster = ClusterConfig {
        nodes: 3,
        seed: Some(3),
        ..ClusterConfig::default()
    };
    let fleet = fleet::start(cluster, FleetOptions::default())
        .await
        .expect("fleet");
    let nodes = stampede::serve_cmd::targets_of(&fleet);
    let cfg = ServeConfig {
        api_key: stampede_http_kit::Secret::new(KEY),
        admin_token: Some(stampede_http_kit::Secret::new(ADMIN)),
        ..ServeConfig::default()
    };
    let svc = serve::start(cfg, nodes, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .expect("serve");

    let dir = std::env::temp_dir().join(format!("stampede-secrets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("external.yaml");
    std::fs::write(
        &profile,
        format!(
            "name: secrets\nseed: 1\nplacement:\n  external:\n    url: {}\n    api_key_env: CANARY_KEY\n    admin_token_env: CANARY_ADMIN\n    mock_admin: [\"{}\"]\nworkload:\n  shape:\n    burst: {{count: 20}}\n  lifetime: {{dist: constant, value: 10ms}}\ncollect:\n  interval: 100ms\nchecks:\n  error_rate: {{max: 0.0}}\n",
            svc.url(),
            fleet.admin_url()
        ),
    )
    .unwrap();
    let reports = dir.join("reports");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(["run", "--report-dir"])
            .arg(&reports)
            .arg(&profile)
            .env("CANARY_KEY", KEY)
            .env("CANARY_ADMIN", ADMIN)
            .env("RUST_LOG", "debug")
            .output()
            .expect("stampede runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "run passes: {stderr}");
    assert!(stdout.contains("external"), "the run reported: {stdout}");
    for secret in [KEY, ADMIN] {
        assert!(!stdout.contains(secret), "secret on stdout");
        assert!(!stderr.contains(secret), "secret on stderr (logs)");
        let hits = grep_dir(&dir.join("reports"), secret);
        assert!(hits.is_empty(), "secret written into {hits:?}");
    }
    // The run really used the key: the service created and then deleted 20 sandboxes.
    let truth = fleet.truth();
    let ok: u64 = truth.nodes.iter().map(|n| n.creates_ok).sum();
    assert_eq!(ok, 20);
    svc.shutdown().await;
    fleet.shutdown().await;
}
