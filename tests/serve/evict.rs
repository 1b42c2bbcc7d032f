//! The API kills sandboxes by itself as E2B's does: the evictor at their end time
//! (`packages/api/internal/orchestrator/evictor/evict.go`), a sync the orphans once a
//! minute old (`packages/api/internal/sandbox/store.go` `Reconcile`,
//! `storage/redis/main.go` `orphanGracePeriod`); both release the optimistic vCPU
//! (`packages/api/internal/orchestrator/delete_instance.go` `killSandboxOnNode`).

use crate::support::serve as serve_common;

use std::time::{Duration, Instant};

use serde_json::json;
use serve_common::{cluster, serve_config, Rig};
use stampede::placement::AccountingMode;
use stampede::serve::{NodeTarget, ServeConfig, DEFAULT_API_KEY};

async fn believed_cpu(rig: &Rig) -> u64 {
    rig.nodes()
        .await
        .values()
        .map(|n| n["metrics"]["allocatedCPU"].as_u64().unwrap())
        .sum()
}

/// With no sync to learn it (1 h period), the evictor alone removes an expired
/// sandbox: gone from the store and the node, its vCPU no longer believed, not before
/// its end time.
#[tokio::test]
async fn an_expired_sandbox_is_killed_at_its_end_time_and_its_vcpu_released() {
    let rig = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Optimistic)).await;
    let t0 = Instant::now();
    let (status, body) = rig
        .create(json!({"templateID": "base", "timeout": 1, "cpuCount": 2}))
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(believed_cpu(&rig).await, 2);
    let deadline = Instant::now() + Duration::from_secs(10);
    while rig.counter("stampede_serve_evictions_total").await < 1 {
        assert!(Instant::now() < deadline, "no eviction 10 s after creating");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(
        believed_cpu(&rig).await,
        0,
        "the optimistic vCPU is released"
    );
    let (status, listed) = rig.get_json("/sandboxes").await;
    assert_eq!(status, 200);
    assert_eq!(listed.as_array().map(Vec::len), Some(0), "{listed}");
    let on_nodes: usize = rig
        .fleet
        .truth()
        .nodes
        .iter()
        .map(|n| n.sandbox_ids.len())
        .sum();
    assert_eq!(on_nodes, 0);
    rig.stop().await;
}

/// `instance` (an independent one, its own store) places a sandbox; `rig`'s sync then
/// finds it unknown.
async fn orphan_from_another_instance(rig: &Rig) -> stampede::serve::ServiceHandle {
    let nodes = rig
        .fleet
        .nodes()
        .into_iter()
        .map(|n| NodeTarget {
            id: Some(n.id),
            addr: n.addr.to_string(),
        })
        .collect();
    let other = stampede::serve::start(
        ServeConfig {
            kill_orphans: false,
            ..serve_config(AccountingMode::Optimistic)
        },
        nodes,
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let r = rig
        .http
        .post(format!("{}/sandboxes", other.url()))
        .header("X-API-Key", DEFAULT_API_KEY)
        .json(&json!({"templateID": "base", "timeout": 300, "cpuCount": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    other
}

/// An orphan past the grace is killed at the sync that finds it, and its vCPU is
/// removed from the optimistic belief at once (the node's report still counted it).
#[tokio::test]
async fn an_old_enough_orphan_is_killed_with_an_optimistic_remove() {
    let cfg = ServeConfig {
        orphan_grace: Duration::ZERO,
        ..serve_config(AccountingMode::Optimistic)
    };
    let rig = Rig::start(cluster(1, &[]), cfg).await;
    let other = orphan_from_another_instance(&rig).await;
    rig.svc.sync_now().await;
    assert_eq!(rig.counter("stampede_serve_orphans_killed_total").await, 1);
    let on_nodes: usize = rig
        .fleet
        .truth()
        .nodes
        .iter()
        .map(|n| n.sandbox_ids.len())
        .sum();
    assert_eq!(on_nodes, 0, "the orphan was killed");
    assert_eq!(
        believed_cpu(&rig).await,
        0,
        "reported 2, optimistic remove of 2"
    );
    other.shutdown().await;
    rig.stop().await;
}

/// With E2B's 1 minute grace, a young unknown sandbox is counted but left alone (a
/// create may still be registering it).
#[tokio::test]
async fn a_young_orphan_is_left_alone() {
    let rig = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Optimistic)).await;
    assert_eq!(rig.svc.config().orphan_grace, Duration::from_secs(60));
    assert!(rig.svc.config().kill_orphans);
    let other = orphan_from_another_instance(&rig).await;
    rig.svc.sync_now().await;
    assert_eq!(rig.counter("stampede_serve_orphans_seen_total").await, 1);
    assert_eq!(rig.counter("stampede_serve_orphans_killed_total").await, 0);
    let on_nodes: usize = rig
        .fleet
        .truth()
        .nodes
        .iter()
        .map(|n| n.sandbox_ids.len())
        .sum();
    assert_eq!(on_nodes, 1);
    other.shutdown().await;
    rig.stop().await;
}
