//! `--replicas N`: independent instances, each with its own state, on one fleet; and the
//! `serve` flags.

use crate::support::serve as serve_common;

use clap::Parser;
use serde_json::{json, Value};
use serve_common::{cluster, serve_config};
use stampede::placement::AccountingMode;
use stampede::serve::{start_replicas, NodeTarget, ServeArgs, DEFAULT_API_KEY};

#[tokio::test]
async fn replicas_keep_their_own_state() {
    let fleet = mock_node::fleet::start(cluster(3, &[]), Default::default())
        .await
        .unwrap();
    let nodes: Vec<NodeTarget> = stampede::serve_cmd::targets_of(&fleet);
    let mut cfg = serve_config(AccountingMode::Optimistic);
    cfg.kill_orphans = true;
    cfg.orphan_grace = std::time::Duration::ZERO;
    let replicas = start_replicas(cfg, nodes, "127.0.0.1:0".parse().unwrap(), 2)
        .await
        .unwrap();
    assert_eq!(replicas.len(), 2);
    assert_ne!(replicas[0].addr(), replicas[1].addr());
    assert_eq!(replicas[1].config().seed, replicas[0].config().seed + 1);
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{}/sandboxes", replicas[0].url()))
        .header("X-API-Key", DEFAULT_API_KEY)
        .json(&json!({"templateID": "base", "timeout": 300, "cpuCount": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let believed = |i: usize| -> u64 {
        replicas[i]
            .nodes()
            .iter()
            .map(|n| n.metrics.allocated_cpu)
            .sum()
    };
    assert_eq!(believed(0), 2, "replica 0 counts its own create");
    assert_eq!(believed(1), 0, "replica 1 cannot see it before a sync");
    let listed: Vec<Value> = http
        .get(format!("{}/sandboxes", replicas[1].url()))
        .header("X-API-Key", DEFAULT_API_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(listed.is_empty());

    // With kill_orphans, replica 1 takes replica 0's sandbox for an orphan and kills it:
    // the reason replicas run with it off.
    replicas[1].sync_now().await;
    let on_nodes: usize = fleet
        .truth()
        .nodes
        .iter()
        .map(|n| n.sandbox_ids.len())
        .sum();
    assert_eq!(on_nodes, 0);
    assert!(replicas[1]
        .metrics_text()
        .contains("stampede_serve_orphans_killed_total{accounting=\"optimistic\"} 1"));
    for h in replicas {
        h.shutdown().await;
    }
    fleet.shutdown().await;
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    serve: ServeArgs,
}

#[test]
fn flags_map_to_settings() {
    let cli = Cli::try_parse_from([
        "serve",
        "--node",
        "10.0.0.1:5008",
        "--node",
        "n7=10.0.0.2:5008",
        "--accounting",
        "reconciled",
        "--k",
        "5",
        "--max-starting-per-node",
        "3",
        "--sync-interval",
        "1s",
        "--seed",
        "9",
        "--api-key",
        "e2b_x",
    ])
    .unwrap();
    let cfg = cli.serve.config();
    assert_eq!(cfg.placement.mode, AccountingMode::Reconciled);
    assert_eq!(cfg.placement.k, 5);
    assert_eq!(cfg.placement.r, 4.0);
    assert_eq!(cfg.placement.max_starting_per_node, Some(3));
    assert_eq!(cfg.sync_interval, std::time::Duration::from_secs(1));
    assert_eq!(cfg.request_timeout, std::time::Duration::from_secs(70));
    assert_eq!((cfg.seed, cfg.api_key.expose()), (9, "e2b_x"));
    let targets = cli.serve.node_targets();
    assert_eq!(targets[0], NodeTarget::addr("10.0.0.1:5008"));
    assert_eq!(targets[1].id.as_deref(), Some("n7"));
    assert!(Cli::try_parse_from(["serve", "--accounting", "psychic"]).is_err());
}
