//! The retry rules and node health over the real wire, with mock-node faults.

use crate::support::serve as serve_common;

use std::time::Duration;

use mock_node::api::{FailureCode, FaultKind, ServiceStatus};
use serde_json::json;
use serve_common::{cluster, serve_config, Rig};
use stampede::placement::AccountingMode;

/// node-00 is idle and the others loaded: with K = 3 on 3 nodes and `reported` scoring,
/// every decision picks node-00 first.
fn attractive_node_00() -> mock_node::config::ClusterConfig {
    cluster(3, &[0, 20, 20])
}

#[tokio::test]
async fn unavailable_node_is_excluded_and_the_create_lands_elsewhere() {
    let rig = Rig::start(attractive_node_00(), serve_config(AccountingMode::Reported)).await;
    rig.fault(
        FaultKind::Errors {
            probability: 1.0,
            code: FailureCode::Unavailable,
        },
        "node-00",
    )
    .await;
    for _ in 0..5 {
        let (status, body) = rig
            .create(json!({"templateID": "base", "timeout": 300}))
            .await;
        assert_eq!(status, 201, "{body}");
        let id = body["sandboxID"].as_str().unwrap();
        let on = rig.truth_node_of(id).expect("the sandbox runs somewhere");
        assert_ne!(on, "node-00");
    }
    let nodes = rig.nodes().await;
    assert_eq!(
        nodes["node-00"]["createFails"].as_u64(),
        Some(5),
        "one failed try per request"
    );
    assert_eq!(nodes["node-00"]["createSuccesses"].as_u64(), Some(0));
    let metrics = rig.svc.metrics_text();
    assert!(
        metrics.contains("stampede_serve_create_attempt_failures_total{accounting=\"reported\"} 5"),
        "{metrics}"
    );
    rig.stop().await;
}

#[tokio::test]
async fn killed_node_is_excluded_then_marked_unhealthy_by_the_sync() {
    let rig = Rig::start(attractive_node_00(), serve_config(AccountingMode::Reported)).await;
    rig.fault(FaultKind::Kill, "node-00").await;
    let (status, body) = rig.create(json!({"templateID": "base"})).await;
    assert_eq!(status, 201, "{body}");
    assert_ne!(
        rig.truth_node_of(body["sandboxID"].as_str().unwrap())
            .as_deref(),
        Some("node-00")
    );
    rig.svc.sync_now().await;
    let nodes = rig.nodes().await;
    assert_eq!(nodes["node-00"]["status"], "unhealthy");
    assert_eq!(nodes["node-01"]["status"], "ready");
    assert!(nodes["node-00"]["stampede"]["syncFailures"].as_u64() >= Some(1));
    rig.stop().await;
}

/// E2B derives `connecting` from the gRPC channel, not from the sync
/// (`packages/api/internal/orchestrator/nodemanager/status.go`, `client.go`): a killed
/// node's connection is lost at once (grpc-go's channel goes Idle, the node still
/// `ready`); the first RPC fails to reconnect (TransientFailure), and from then on the
/// node is `connecting` and gets no create, with no sync in between.
#[tokio::test]
async fn a_killed_node_is_unroutable_from_its_channel_state_before_any_sync() {
    let rig = Rig::start(attractive_node_00(), serve_config(AccountingMode::Reported)).await;
    assert_eq!(rig.nodes().await["node-00"]["stampede"]["channel"], "ready");
    rig.fault(FaultKind::Kill, "node-00").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let nodes = rig.nodes().await;
        if nodes["node-00"]["stampede"]["channel"] == "idle" {
            assert_eq!(nodes["node-00"]["status"], "ready", "{nodes:?}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{nodes:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for _ in 0..10 {
        let (status, body) = rig.create(json!({"templateID": "base"})).await;
        assert_eq!(status, 201, "{body}");
        assert_ne!(
            rig.truth_node_of(body["sandboxID"].as_str().unwrap())
                .as_deref(),
            Some("node-00")
        );
    }
    let nodes = rig.nodes().await;
    assert_eq!(nodes["node-00"]["status"], "connecting", "{nodes:?}");
    assert_eq!(nodes["node-00"]["stampede"]["channel"], "transient_failure");
    // K=3 of 3 nodes: every draw holds node-00, the best score, so without the channel
    // rule all ten creates would fail there first. One found the connection gone; a
    // slow run may see one more, if a reconnect attempt left TransientFailure between
    // two creates (grpc-go retries a failed channel after a backoff too).
    let fails = nodes["node-00"]["createFails"].as_u64().unwrap_or(0);
    assert!(
        (1..=3).contains(&fails),
        "{fails} creates failed there: {nodes:?}"
    );
    assert_eq!(
        nodes["node-00"]["stampede"]["syncFailures"].as_u64(),
        Some(0)
    );
    rig.stop().await;
}

/// E2B puts no deadline on one Create RPC, only the request's (`packages/api/main.go`
/// requestTimeout, `packages/api/internal/orchestrator/placement/placement.go` stops on
/// `ctx.Done()`): a hung node holds the request until that deadline, answered 504, and
/// the hung create leaves no sandbox once the node wakes up.
#[tokio::test]
async fn hung_node_holds_the_request_until_its_deadline() {
    let mut cfg = serve_config(AccountingMode::Reported);
    cfg.request_timeout = Duration::from_millis(700);
    let rig = Rig::start(cluster(1, &[]), cfg).await;
    let hang = rig.fault(FaultKind::Hang, "node-00").await;
    let t0 = std::time::Instant::now();
    let (status, body) = rig.create(json!({"templateID": "base"})).await;
    let took = t0.elapsed();
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error_code"], "sandbox_placement_timeout", "{body}");
    assert!(
        took >= Duration::from_millis(700),
        "answered after {took:?}"
    );
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    rig.fleet.heal_fault(hang).await.expect("hang healed");
    // The node works again; the hung create was cancelled, so it is the only sandbox.
    let (status, body) = rig.create(json!({"templateID": "base"})).await;
    assert_eq!(status, 201, "{body}");
    assert_no_other_sandbox(&rig, body["sandboxID"].as_str().unwrap()).await;
    rig.stop().await;
}

/// A client that hung up while its create was held by a hung node left, once the node
/// woke up, a sandbox running there that serve never recorded. The create carries on
/// without its client: after the heal, every sandbox on the node is one serve lists.
/// Over the wire: the client drops its connection.
#[tokio::test]
async fn a_client_hanging_up_leaves_no_sandbox_serve_does_not_list() {
    let mut cfg = serve_config(AccountingMode::Reported);
    cfg.request_timeout = Duration::from_secs(60);
    let rig = Rig::start(cluster(1, &[]), cfg).await;
    let hang = rig.fault(FaultKind::Hang, "node-00").await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let sent = impatient
        .post(rig.url("/sandboxes"))
        .header("X-API-Key", stampede::serve::DEFAULT_API_KEY)
        .json(&json!({"templateID": "base"}))
        .send()
        .await;
    assert!(sent.is_err(), "the client gave up: {sent:?}");
    drop(impatient);
    rig.fleet.heal_fault(hang).await.expect("hang healed");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let on_nodes: Vec<String> = rig
            .fleet
            .truth()
            .nodes
            .into_iter()
            .flat_map(|n| n.sandbox_ids)
            .collect();
        let (status, listed) = rig.get_json("/sandboxes").await;
        assert_eq!(status, 200, "{listed}");
        let known: Vec<&str> = listed
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(|s| s["sandboxID"].as_str())
            .collect();
        if !on_nodes.is_empty() && on_nodes.iter().all(|id| known.contains(&id.as_str())) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "on the node {on_nodes:?}, listed by serve {known:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rig.stop().await;
}

/// Over 1 s after the node woke up, no sandbox but `only` appears on the fleet (a
/// create released by the heal lands within milliseconds on a mock node).
async fn assert_no_other_sandbox(rig: &Rig, only: &str) {
    let until = std::time::Instant::now() + Duration::from_secs(1);
    while std::time::Instant::now() < until {
        let ids: Vec<String> = rig
            .fleet
            .truth()
            .nodes
            .into_iter()
            .flat_map(|n| n.sandbox_ids)
            .collect();
        assert!(
            ids.iter().all(|id| id == only),
            "sandboxes {ids:?}, expected only {only}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn resource_exhausted_is_retried_on_the_same_node() {
    let rig = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Reported)).await;
    let fault = rig.fleet.apply_fault(mock_node::api::FaultRequest {
        kind: FaultKind::Exhaust,
        nodes: vec!["node-00".into()],
        duration: Some(Duration::from_millis(300)),
    });
    fault.await.expect("fault applied");
    let (status, body) = rig.create(json!({"templateID": "base"})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        rig.truth_node_of(body["sandboxID"].as_str().unwrap())
            .as_deref(),
        Some("node-00")
    );
    let node = &rig.nodes().await["node-00"];
    let refusals = node["stampede"]["createRefusals"].as_u64().unwrap();
    assert!(refusals >= 1, "{node}");
    assert_eq!(
        node["createFails"].as_u64(),
        Some(0),
        "refusals are not failures"
    );
    let metrics = rig.svc.metrics_text();
    assert!(metrics.contains(&format!(
        "stampede_serve_create_refusals_total{{accounting=\"reported\"}} {refusals}"
    )));
    rig.stop().await;
}

/// E2B's `orchestrator/placement/placement.go`: node-00 always scores best and always
/// refuses; without exclusion the loop retries it until the deadline. A deadline reached
/// between refusals is a lack of capacity (503); one reached during a refusing RPC makes
/// that RPC a DeadlineExceeded attempt, so a 504 after exactly 1 attempt. Which of the
/// two happens depends on timing, in E2B too; nothing else may.
#[tokio::test]
async fn endless_resource_exhausted_ends_at_the_deadline_as_e2b_answers() {
    let mut cfg = serve_config(AccountingMode::Reported);
    cfg.request_timeout = Duration::from_millis(500);
    let rig = Rig::start(attractive_node_00(), cfg).await;
    rig.fault(FaultKind::Exhaust, "node-00").await;
    let (status, body) = rig.create(json!({"templateID": "base"})).await;
    let expected = match status {
        503 => json!({"code": 503, "error_code": "sandbox_capacity_unavailable",
            "message": "Failed to place sandbox: not enough capacity for the requested \
                resources right now, please retry shortly"}),
        _ => json!({"code": 504, "error_code": "sandbox_placement_timeout",
            "message": "Failed to place sandbox: placement timed out after 1 attempt(s), \
                please retry"}),
    };
    assert_eq!(body, expected);
    rig.stop().await;
}

#[tokio::test]
async fn three_failures_end_in_create_failed() {
    let mut cfg = serve_config(AccountingMode::Reported);
    cfg.placement.max_retries = 3;
    let rig = Rig::start(cluster(4, &[]), cfg).await;
    for k in 0..4 {
        rig.fault(
            FaultKind::Errors {
                probability: 1.0,
                code: FailureCode::Internal,
            },
            &format!("node-0{k}"),
        )
        .await;
    }
    let (status, body) = rig.create(json!({"templateID": "base"})).await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["error_code"], "sandbox_create_failed");
    assert_eq!(
        body["message"],
        "Failed to place sandbox: sandbox creation failed on 3 node(s), please retry; \
         if the problem persists, contact us"
    );
    let fails: u64 = rig
        .nodes()
        .await
        .values()
        .map(|n| n["createFails"].as_u64().unwrap())
        .sum();
    assert_eq!(fails, 3, "exactly max_retries attempts");
    rig.stop().await;
}

#[tokio::test]
async fn no_ready_node_is_503_no_compatible_node() {
    let rig = Rig::start(cluster(2, &[]), serve_config(AccountingMode::Optimistic)).await;
    for node in ["node-00", "node-01"] {
        rig.fault(
            FaultKind::Status {
                status: ServiceStatus::Draining,
            },
            node,
        )
        .await;
    }
    rig.svc.sync_now().await;
    assert_eq!(rig.nodes().await["node-00"]["status"], "draining");
    let (status, body) = rig.create(json!({"templateID": "base"})).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error_code"], "sandbox_no_compatible_node");
    rig.stop().await;
}

#[tokio::test]
async fn orphans_are_reported_not_killed() {
    // Two independent instances on one fleet: each sees the other's sandboxes as orphans.
    let mut cfg = serve_config(AccountingMode::Reconciled);
    cfg.kill_orphans = false;
    cfg.orphan_grace = Duration::ZERO;
    let rig = Rig::start(cluster(2, &[]), cfg).await;
    let other_nodes = rig
        .fleet
        .nodes()
        .into_iter()
        .map(|n| stampede::serve::NodeTarget {
            id: Some(n.id),
            addr: n.addr.to_string(),
        })
        .collect();
    let other = stampede::serve::start(
        serve_config(AccountingMode::Reconciled),
        other_nodes,
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let r = rig
        .http
        .post(format!("{}/sandboxes", other.url()))
        .header("X-API-Key", stampede::serve::DEFAULT_API_KEY)
        .json(&json!({"templateID": "base", "timeout": 300}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    rig.svc.sync_now().await;
    let orphans: u64 = rig
        .nodes()
        .await
        .values()
        .map(|n| n["stampede"]["orphans"].as_u64().unwrap())
        .sum();
    assert_eq!(orphans, 1);
    let on_nodes = rig.sandboxes_on_nodes();
    assert_eq!(on_nodes, 1, "not killed without kill_orphans");
    other.shutdown().await;
    rig.stop().await;
}

/// `GET /admin/counters` gives the counters a harness reads as typed JSON, the same
/// values `/metrics` renders for Prometheus, and only with the admin token.
#[tokio::test]
async fn admin_counters_are_the_metrics_as_typed_json() {
    let rig = Rig::start(attractive_node_00(), serve_config(AccountingMode::Reported)).await;
    rig.fault(
        FaultKind::Errors {
            probability: 1.0,
            code: FailureCode::Unavailable,
        },
        "node-00",
    )
    .await;
    for _ in 0..3 {
        let (status, body) = rig
            .create(json!({"templateID": "base", "timeout": 300}))
            .await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, body) = rig.get_json("/admin/counters").await;
    assert_eq!(status, 200, "{body}");
    let c: stampede::aggregate::ServiceCounters =
        serde_json::from_value(body.clone()).expect("typed counters");
    assert_eq!(c.creates_ok, 3, "{body}");
    assert!(
        c.attempt_failures >= 1,
        "node-00 failed at least once: {body}"
    );
    for (name, value) in [
        ("stampede_serve_creates_ok_total", c.creates_ok),
        (
            "stampede_serve_create_attempt_failures_total",
            c.attempt_failures,
        ),
        ("stampede_serve_create_retries_total", c.retries),
        ("stampede_serve_create_refusals_total", c.refusals),
        ("stampede_serve_creates_failed_total", c.creates_failed),
    ] {
        assert_eq!(rig.counter(name).await, value, "{name}");
    }
    let anonymous = reqwest::get(rig.url("/admin/counters"))
        .await
        .expect("answered");
    assert_eq!(anonymous.status().as_u16(), 401);
    rig.stop().await;
}

/// A node whose creates outlast the orchestrator's own Create deadline (a `slow` fault
/// here, on a node whose deadline is 400 ms instead of E2B's 60 s) answers INTERNAL when
/// it fires; the API excludes the node for that request and places it elsewhere,
/// long before its own 10 s request deadline.
#[tokio::test]
async fn a_create_past_the_node_deadline_is_retried_on_another_node() {
    let mut fleet = attractive_node_00();
    fleet.node.create_timeout = Duration::from_millis(400);
    let rig = Rig::start(fleet, serve_config(AccountingMode::Reported)).await;
    rig.fault(
        FaultKind::Slow {
            latency: Duration::from_secs(5),
        },
        "node-00",
    )
    .await;
    for _ in 0..3 {
        let t0 = std::time::Instant::now();
        let (status, body) = rig
            .create(json!({"templateID": "base", "timeout": 300}))
            .await;
        assert_eq!(status, 201, "{body}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        let id = body["sandboxID"].as_str().unwrap();
        assert_ne!(rig.truth_node_of(id).as_deref(), Some("node-00"));
    }
    let nodes = rig.nodes().await;
    assert_eq!(
        nodes["node-00"]["createFails"].as_u64(),
        Some(3),
        "one timed-out try per request"
    );
    assert_eq!(
        rig.counter("stampede_serve_create_attempt_failures_total")
            .await,
        3
    );
    rig.stop().await;
}
