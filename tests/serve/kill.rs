//! `DELETE /sandboxes/{id}` as E2B answers it, and the legacy failure answers, over the
//! real wire.

use crate::support::serve as serve_common;

use std::time::Duration;

use mock_node::api::{FailureCode, FaultKind};
use serde_json::json;
use serve_common::{cluster, serve_config, Rig};
use stampede::placement::{AccountingMode, FailureAnswers};

/// E2B's `orchestrator/delete_instance.go` (`killSandboxOnNode`): a sandbox the node no
/// longer has (a restart lost it) is killed with 204, and a second kill is a 404.
#[tokio::test]
async fn kill_of_a_sandbox_the_node_lost_is_204() {
    let rig = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Optimistic)).await;
    let (status, body) = rig
        .create(json!({"templateID": "base", "timeout": 300}))
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["sandboxID"].as_str().unwrap().to_string();
    rig.fault(FaultKind::Restart, "node-00").await;
    assert_eq!(rig.truth_node_of(&id), None, "the restart lost it");
    assert_eq!(rig.delete(&id).await, 204);
    assert_eq!(rig.delete(&id).await, 404);
    rig.stop().await;
}

/// E2B's `orchestrator/delete_instance.go` (`RemoveSandbox` removes the store entry in a
/// defer) and `handlers/sandbox_kill.go`: a node error is a 500, and the sandbox is gone
/// from the API all the same.
#[tokio::test]
async fn kill_with_a_node_error_is_500_and_forgets_the_sandbox() {
    let rig = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Optimistic)).await;
    let (status, body) = rig
        .create(json!({"templateID": "base", "timeout": 300}))
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["sandboxID"].as_str().unwrap().to_string();
    rig.fault(
        FaultKind::Errors {
            probability: 1.0,
            code: FailureCode::Internal,
        },
        "node-00",
    )
    .await;
    assert_eq!(rig.delete(&id).await, 500);
    assert_eq!(rig.get_json(&format!("/sandboxes/{id}")).await.0, 404);
    let (_, listed) = rig.get_json("/sandboxes").await;
    assert_eq!(listed.as_array().map(Vec::len), Some(0), "{listed}");
    assert_eq!(rig.truth_node_of(&id).as_deref(), Some("node-00"));
    rig.stop().await;
}

/// E2B's `orchestrator/create_instance.go` before 2026-08-13: with `legacy` answers a
/// placement failure is a 500 "Failed to place sandbox" without `error_code`.
#[tokio::test]
async fn legacy_answers_are_500_failed_to_place() {
    let mut cfg = serve_config(AccountingMode::Reported);
    cfg.placement.failure_answers = FailureAnswers::Legacy;
    cfg.request_timeout = Duration::from_millis(400);
    let rig = Rig::start(cluster(1, &[]), cfg).await;
    rig.fault(FaultKind::Exhaust, "node-00").await;
    let (status, body) = rig.create(json!({"templateID": "base"})).await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["message"], "Failed to place sandbox");
    assert!(body.get("error_code").is_none(), "{body}");
    rig.stop().await;
}

/// Silent connections a flood keeps open against a node port at once (it opens a new one
/// and drops its oldest, over and over): well over the port's cap in the test below.
const SILENT_HELD: usize = 96;

/// How long serve's pooled connection sits idle between two kills: longer than the
/// flood's oldest connection has been open (a new one every millisecond, 16 places), so
/// that it is the longest waiting when the cap is full.
const IDLE_BETWEEN_KILLS: Duration = Duration::from_millis(40);

/// A node port capped at a few connections under a renewing flood of silent ones: the
/// cap, when full, closed the connection that had waited longest on its client, which
/// between two RPCs was serve's own pooled HTTP/2 connection; a Delete in flight on it
/// answered 500 (`connection reset`) and the sandbox stayed on its node. Now the cap
/// closes connections that never had a request answered first, and a Delete whose
/// connection was lost is sent once more on a fresh one: every kill answers 204 and the
/// node runs nothing after. Bounded: 120 sandboxes, one kill at a time, the flood
/// stopped with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_on_a_node_port_never_fails_a_kill_on_serves_pooled_connection() {
    const SANDBOXES: usize = 120;
    let opts = mock_node::fleet::FleetOptions {
        node_limits: stampede_http_kit::HttpLimits {
            max_connections: 16,
            ..mock_node::NODE_LIMITS
        },
        ..mock_node::fleet::FleetOptions::default()
    };
    let rig = Rig::start_with(
        cluster(1, &[]),
        serve_config(AccountingMode::Optimistic),
        opts,
    )
    .await;
    let mut ids = Vec::with_capacity(SANDBOXES);
    for _ in 0..SANDBOXES {
        let (status, body) = rig
            .create(json!({"templateID": "base", "timeout": 300}))
            .await;
        assert_eq!(status, 201, "{body}");
        ids.push(body["sandboxID"].as_str().expect("an id").to_string());
    }
    let port = rig.fleet.nodes()[0].addr;
    let stop = tokio_util::sync::CancellationToken::new();
    let flood = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut held = std::collections::VecDeque::with_capacity(SILENT_HELD);
            let mut opened = 0u64;
            while !stop.is_cancelled() {
                let connect = tokio::net::TcpStream::connect(port);
                if let Ok(Ok(c)) = tokio::time::timeout(Duration::from_secs(1), connect).await {
                    opened += 1;
                    if held.len() == SILENT_HELD {
                        held.pop_front();
                    }
                    held.push_back(c);
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            opened
        }
    });
    let mut failed = Vec::new();
    for id in &ids {
        // Idle between kills, as a pooled channel is between RPCs.
        tokio::time::sleep(IDLE_BETWEEN_KILLS).await;
        let status = rig.delete(id).await;
        if status != 204 {
            failed.push(format!("{id}: {status}"));
        }
    }
    stop.cancel();
    let opened = flood.await.expect("flood task");
    assert!(
        opened > 16 * 4,
        "the flood renewed its connections past the cap ({opened} opened)"
    );
    assert!(failed.is_empty(), "kills that failed: {failed:?}");
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while rig.sandboxes_on_nodes() > 0 {
        assert!(
            std::time::Instant::now() < until,
            "{} sandboxes still on the node",
            rig.sandboxes_on_nodes()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rig.stop().await;
}
