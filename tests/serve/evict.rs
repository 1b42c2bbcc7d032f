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
    let on_nodes = rig.sandboxes_on_nodes();
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
    let on_nodes = rig.sandboxes_on_nodes();
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
    let on_nodes = rig.sandboxes_on_nodes();
    assert_eq!(on_nodes, 1);
    other.shutdown().await;
    rig.stop().await;
}

/// Ids each node holds, by node id (the fleet's truth).
fn ids_on_nodes(rig: &Rig) -> Vec<String> {
    rig.fleet
        .truth()
        .nodes
        .into_iter()
        .flat_map(|n| n.sandbox_ids)
        .collect()
}

/// Without its evictor the service leaves an expired sandbox on its node (and in its
/// list): a service with the evictor, started alongside and given a sandbox with the
/// same timeout a little later, has already evicted its own when this is checked.
#[tokio::test]
async fn without_the_evictor_an_expired_sandbox_stays_on_its_node() {
    let off = Rig::start(
        cluster(1, &[]),
        ServeConfig {
            evictor: false,
            ..serve_config(AccountingMode::Optimistic)
        },
    )
    .await;
    let on = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Optimistic)).await;
    let body = json!({"templateID": "base", "timeout": 1, "cpuCount": 1});
    let (status, kept) = off.create(body.clone()).await;
    assert_eq!(status, 201, "{kept}");
    let (status, evicted) = on.create(body).await;
    assert_eq!(status, 201, "{evicted}");
    let deadline = Instant::now() + Duration::from_secs(15);
    while on.counter("stampede_serve_evictions_total").await < 1 {
        assert!(Instant::now() < deadline, "no eviction 15 s after creating");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let kept_id = kept["sandboxID"].as_str().unwrap().to_string();
    assert_eq!(ids_on_nodes(&off), vec![kept_id.clone()]);
    assert_eq!(off.counter("stampede_serve_evictions_total").await, 0);
    let (status, listed) = off.get_json("/sandboxes").await;
    assert_eq!(status, 200);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let (status, none) = off.get_json("/admin/evicted").await;
    assert_eq!(status, 200);
    assert_eq!(none["sandboxIDs"], json!([]));
    // A delete still removes it.
    assert_eq!(off.delete(&kept_id).await, 204);
    assert!(ids_on_nodes(&off).is_empty());
    off.stop().await;
    on.stop().await;
}

/// `GET /admin/evicted` names exactly the sandboxes the evictor killed (not the ones a
/// client deleted), and only to an admin.
#[tokio::test]
async fn admin_evicted_names_the_evictors_kills_only() {
    let rig = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Optimistic)).await;
    let (status, short) = rig
        .create(json!({"templateID": "base", "timeout": 1}))
        .await;
    assert_eq!(status, 201, "{short}");
    let (status, deleted) = rig
        .create(json!({"templateID": "base", "timeout": 300}))
        .await;
    assert_eq!(status, 201, "{deleted}");
    assert_eq!(
        rig.delete(deleted["sandboxID"].as_str().unwrap()).await,
        204
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while rig.counter("stampede_serve_evictions_total").await < 1 {
        assert!(Instant::now() < deadline, "no eviction 15 s after creating");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, body) = rig.get_json("/admin/evicted").await;
    assert_eq!(status, 200);
    assert_eq!(body["sandboxIDs"], json!([short["sandboxID"]]));
    let anonymous = rig
        .http
        .get(rig.url("/admin/evicted"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    rig.stop().await;
}

/// The store's end time counts from placement success, as E2B's store does
/// (`create_instance.go`): a create that takes 2 s on its node still lives its whole
/// timeout after the 201, where counting from the request shortened it by those 2 s.
#[tokio::test]
async fn stored_end_time_counts_from_placement_success_not_the_request() {
    let mut fleet = cluster(1, &[]);
    fleet.node.create_latency = mock_node::config::LatencyDist::Constant {
        value: Duration::from_secs(2),
    };
    let rig = Rig::start(fleet, serve_config(AccountingMode::Optimistic)).await;
    let sent = std::time::SystemTime::now();
    let (status, created) = rig
        .create(json!({"templateID": "base", "timeout": 30}))
        .await;
    assert_eq!(status, 201, "{created}");
    let answered = std::time::SystemTime::now();
    let id = created["sandboxID"].as_str().unwrap();
    let (status, got) = rig.get_json(&format!("/sandboxes/{id}")).await;
    assert_eq!(status, 200, "{got}");
    let parse = |k: &str| humantime::parse_rfc3339(got[k].as_str().unwrap()).unwrap();
    let (started, end) = (parse("startedAt"), parse("endAt"));
    // Millisecond timestamps: allow 1 ms of rounding.
    let slack = Duration::from_millis(1);
    assert!(
        started + slack >= sent + Duration::from_secs(2),
        "started {started:?}, sent {sent:?}: the start is the request's, not the placement's"
    );
    assert!(started <= answered + slack);
    assert_eq!(end.duration_since(started).unwrap().as_secs(), 30);
    rig.stop().await;
}

/// A burst whose client vanishes mid-way (its connections all closed at once, as when
/// the process is killed): each create in flight is cancelled, and the node aborts it
/// (its Create RPC is reset). A create the node finished just as its cancel crossed it
/// is on the node and unknown to the service: E2B's API has the same race (the
/// request's context cancels the RPC) and the same cure, the orphan rule. After the
/// starts settle, one sync past the grace leaves the nodes holding exactly what the
/// service lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_burst_leaves_nothing_unknown_once_the_orphan_grace_has_passed() {
    use tokio::io::AsyncWriteExt;
    let mut cl = cluster(3, &[]);
    cl.node.create_latency = mock_node::config::LatencyDist::Uniform {
        min: Duration::from_millis(20),
        max: Duration::from_millis(800),
    };
    let cfg = ServeConfig {
        orphan_grace: Duration::ZERO,
        ..serve_config(AccountingMode::Optimistic)
    };
    let rig = Rig::start(cl, cfg).await;
    let addr = rig.svc.addr();
    let body = r#"{"templateID":"base","timeout":600}"#;
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..60 {
        clients.spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let req = format!(
                "POST /sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: {DEFAULT_API_KEY}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            s.write_all(req.as_bytes()).await.unwrap();
            // Held open until the task is aborted: the client "dies" mid-burst.
            std::future::pending::<()>().await;
        });
    }
    // Some creates finished, most in flight; then every connection closes at once.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let started: u64 = rig.fleet.truth().nodes.iter().map(|n| n.starting).sum();
        let done = rig.sandboxes_on_nodes();
        if started > 0 && done > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the burst never got going");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    clients.shutdown().await;
    // Every start the nodes still run ends (finished or aborted) within its latency.
    while rig.fleet.truth().nodes.iter().any(|n| n.starting > 0) {
        assert!(Instant::now() < deadline, "starts still running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let on_nodes = |rig: &Rig| -> std::collections::BTreeSet<String> {
        rig.fleet
            .truth()
            .nodes
            .into_iter()
            .flat_map(|n| n.sandbox_ids)
            .collect()
    };
    let listed = |v: serde_json::Value| -> std::collections::BTreeSet<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s["sandboxID"].as_str().unwrap().to_string())
            .collect()
    };
    let (_, before) = rig.get_json("/sandboxes").await;
    let known = listed(before);
    let held = on_nodes(&rig);
    assert!(
        known.is_subset(&held),
        "listed {known:?}, on nodes {held:?}"
    );
    rig.svc.sync_now().await;
    let (_, after) = rig.get_json("/sandboxes").await;
    assert_eq!(listed(after), known, "a sync forgets nothing it placed");
    assert_eq!(
        on_nodes(&rig),
        known,
        "the unknown ones were killed as orphans"
    );
    let killed = rig.counter("stampede_serve_orphans_killed_total").await;
    assert_eq!(killed as usize, held.len() - known.len());
    rig.stop().await;
}
