//! Every fault kind through the admin API, observed over real gRPC.

use crate::support as common;

use std::time::{Duration, Instant};

use common::*;
use mock_node::config::LatencyDist;
use serde_json::json;
use stampede_proto::ServiceInfoStatus;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;

#[tokio::test]
async fn kill_resets_connections_then_heals_on_the_same_address() {
    let f = fleet_with(2, |c| {
        c.node.create_latency = LatencyDist::Constant {
            value: Duration::from_secs(20),
        };
        c.node.max_starting = 0;
    })
    .await;
    let addr = f.nodes()[0].addr;
    let (mut sb, _) = clients(addr).await;
    sb.list(()).await.expect("connection established");
    // An RPC in flight on the established connection when the node dies.
    let mut inflight = sb.clone();
    let pending = tokio::spawn(async move { inflight.create(create("doomed", 1, 1)).await });
    assert!(eventually(Duration::from_secs(5), async || truth(&f, 0).starting == 1).await);

    let mut raw = tokio::net::TcpStream::connect(addr)
        .await
        .expect("raw connection");
    raw.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .expect("preface");

    let id = fault(&f, json!({"kind": "kill", "nodes": ["node-00"]})).await;
    let t = Instant::now();
    let e = pending
        .await
        .expect("join")
        .expect_err("in-flight RPC fails");
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(3), "reset, not a timeout");
    let e = sb.list(()).await.expect_err("killed node");
    assert_eq!(e.code(), Code::Unavailable);
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "listener closed"
    );
    let mut buf = vec![0u8; 4096];
    let closed = tokio::time::timeout(Duration::from_secs(3), async {
        loop {
            match raw.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(_) => continue, // server SETTINGS frames sent before the kill
            }
        }
    })
    .await;
    assert_eq!(closed, Ok(true), "established connection dropped");
    assert_eq!(nodes(&f).await.nodes[0].status, "killed");
    let (mut other, _) = clients(f.nodes()[1].addr).await;
    other.list(()).await.expect("other nodes unaffected");

    assert_eq!(heal(&f, id).await, 204);
    let back = eventually(Duration::from_secs(5), async || serves(addr).await).await;
    assert!(back, "node reachable again on {addr}");
    assert_eq!(
        truth(&f, 0).starting,
        0,
        "the killed create released its slot"
    );
    assert_eq!(heal(&f, id).await, 404, "already healed");
    f.shutdown().await;
}

/// Runs an RPC under a client deadline, as a Go client's context would: no answer within
/// `limit` is DEADLINE_EXCEEDED.
async fn deadline<T>(
    limit: Duration,
    rpc: impl std::future::Future<Output = Result<T, tonic::Status>>,
) -> Result<(), Code> {
    match tokio::time::timeout(limit, rpc).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.code()),
        Err(_) => Err(Code::DeadlineExceeded),
    }
}

#[tokio::test]
async fn hang_is_a_deadline_exceeded_until_healed() {
    let f = fleet_with(1, |_| {}).await;
    let addr = f.nodes()[0].addr;
    let id = fault(&f, json!({"kind": "hang", "nodes": ["node-00"]})).await;
    let (mut sb, mut info) = clients(addr).await;
    let limit = Duration::from_millis(300);
    assert_eq!(
        deadline(limit, sb.list(())).await,
        Err(Code::DeadlineExceeded)
    );
    assert_eq!(
        deadline(limit, info.service_info(())).await,
        Err(Code::DeadlineExceeded)
    );
    assert_eq!(
        deadline(limit, sb.create(create("a", 1, 1))).await,
        Err(Code::DeadlineExceeded)
    );
    // tonic's own client timeout reports the same deadline as CANCELLED "Timeout expired".
    let ch = channel(addr, limit).await;
    let e = stampede_proto::sandbox_service_client::SandboxServiceClient::new(ch)
        .list(())
        .await
        .expect_err("hung");
    assert!(
        matches!(e.code(), Code::Cancelled | Code::DeadlineExceeded),
        "{e:?}"
    );
    assert_eq!(heal(&f, id).await, 204);
    sb.list(()).await.expect("answers after heal");
    f.shutdown().await;
}

#[tokio::test]
async fn hang_holds_health_checks_and_a_kill_answers_hung_rpcs_unavailable() {
    use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
    let f = fleet_with(1, |_| {}).await;
    let addr = f.nodes()[0].addr;
    fault(&f, json!({"kind": "hang", "nodes": ["node-00"]})).await;
    let ch = channel(addr, Duration::from_secs(5)).await;
    let mut health = HealthClient::new(ch.clone());
    let check = health.check(HealthCheckRequest::default());
    let limit = Duration::from_millis(300);
    assert_eq!(deadline(limit, check).await, Err(Code::DeadlineExceeded));
    let mut sb = stampede_proto::sandbox_service_client::SandboxServiceClient::new(ch);
    let hung = tokio::spawn(async move { sb.list(()).await });
    // Give the request time to reach the node; sent earlier or later, it must get UNAVAILABLE.
    tokio::time::sleep(Duration::from_millis(100)).await;
    fault(&f, json!({"kind": "kill", "nodes": ["node-00"]})).await;
    let r = tokio::time::timeout(Duration::from_secs(3), hung).await;
    let e = r
        .expect("answered, not left hanging")
        .expect("join")
        .expect_err("killed");
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    f.shutdown().await;
}

#[tokio::test]
async fn slow_adds_latency_and_heals_itself() {
    const SLOW: Duration = Duration::from_secs(1);
    let f = fleet_with(1, |_| {}).await;
    let (mut sb, _) = clients(f.nodes()[0].addr).await;
    sb.list(()).await.expect("list");
    fault(
        &f,
        json!({"kind": "slow", "nodes": ["node-00"], "latency": "1s", "duration": "1500ms"}),
    )
    .await;
    let t = Instant::now();
    sb.list(()).await.expect("slow list");
    assert!(t.elapsed() >= SLOW, "{:?}", t.elapsed());
    let healed = eventually(Duration::from_secs(5), async || {
        let faults: serde_json::Value = http()
            .get(format!("{}/faults", f.admin_url()))
            .send()
            .await
            .expect("admin")
            .json()
            .await
            .expect("json");
        faults["faults"][0]["active"] == json!(false)
    })
    .await;
    assert!(healed, "duration elapsed: fault inactive");
    let t = Instant::now();
    sb.list(()).await.expect("list");
    // Healed, the call no longer waits the fault's latency (whatever the machine's load,
    // an idle loopback List takes far less than a second).
    assert!(t.elapsed() < SLOW, "fast again: {:?}", t.elapsed());
    f.shutdown().await;
}

#[tokio::test]
async fn errors_fault_injects_the_chosen_code() {
    let f = fleet_with(1, |_| {}).await;
    let (mut sb, mut info) = clients(f.nodes()[0].addr).await;
    let id = fault(
        &f,
        json!({"kind": "errors", "nodes": ["node-00"], "probability": 1.0, "code": "internal"}),
    )
    .await;
    assert_eq!(
        sb.list(()).await.expect_err("injected").code(),
        Code::Internal
    );
    assert_eq!(
        info.service_info(()).await.expect_err("injected").code(),
        Code::Internal
    );
    let e = sb.create(create("a", 1, 1)).await.expect_err("injected");
    assert_eq!(e.code(), Code::Internal);
    assert_eq!(truth(&f, 0).creates_failed, 1);
    assert_eq!(heal(&f, id).await, 204);
    fault(
        &f,
        json!({"kind": "errors", "nodes": ["node-00"], "probability": 1.0, "code": "unavailable"}),
    )
    .await;
    assert_eq!(
        sb.list(()).await.expect_err("injected").code(),
        Code::Unavailable
    );
    f.shutdown().await;
}

#[tokio::test]
async fn exhaust_refuses_creates_only() {
    let f = fleet_with(1, |_| {}).await;
    let (mut sb, _) = clients(f.nodes()[0].addr).await;
    let id = fault(&f, json!({"kind": "exhaust", "nodes": ["node-00"]})).await;
    let e = sb.create(create("a", 1, 1)).await.expect_err("exhausted");
    assert_eq!(e.code(), Code::ResourceExhausted);
    sb.list(()).await.expect("list still works");
    assert_eq!(truth(&f, 0).creates_rejected.get("fault_exhaust"), Some(&1));
    assert_eq!(truth(&f, 0).active_faults, vec![id.to_string()]);
    heal(&f, id).await;
    sb.create(create("a", 1, 1))
        .await
        .expect("accepted after heal");
    f.shutdown().await;
}

#[tokio::test]
async fn freeze_metrics_keeps_the_snapshot_of_the_fault_start() {
    let f = fleet_with(1, |_| {}).await;
    let (mut sb, mut info) = clients(f.nodes()[0].addr).await;
    sb.create(create("a", 1, 1)).await.expect("create");
    let id = fault(&f, json!({"kind": "freeze-metrics", "nodes": ["node-00"]})).await;
    sb.create(create("b", 1, 1)).await.expect("create");
    sb.create(create("c", 1, 1)).await.expect("create");
    let si = info.service_info(()).await.expect("info").into_inner();
    assert_eq!(
        (si.metric_sandboxes_running, si.metric_cpu_allocated),
        (1, 1)
    );
    assert_eq!(si.stampede_sandbox_ids.expect("ids").ids, vec!["a"]);
    assert_eq!(truth(&f, 0).sandbox_count, 3, "truth is live");
    heal(&f, id).await;
    let si = info.service_info(()).await.expect("info").into_inner();
    assert_eq!(si.metric_sandboxes_running, 3);
    f.shutdown().await;
}

#[tokio::test]
async fn status_fault_changes_the_reported_status() {
    let f = fleet_with(2, |_| {}).await;
    let (_, mut info) = clients(f.nodes()[1].addr).await;
    let id = fault(
        &f,
        json!({"kind": "status", "nodes": ["node-01"], "status": "draining"}),
    )
    .await;
    let si = info.service_info(()).await.expect("info").into_inner();
    assert_eq!(si.service_status, ServiceInfoStatus::Draining as i32);
    assert_eq!(nodes(&f).await.nodes[1].status, "draining");
    let id2 = fault(
        &f,
        json!({"kind": "status", "nodes": ["node-01"], "status": "unhealthy"}),
    )
    .await;
    let si = info.service_info(()).await.expect("info").into_inner();
    assert_eq!(si.service_status, ServiceInfoStatus::Unhealthy as i32);
    heal(&f, id2).await;
    let si = info.service_info(()).await.expect("info").into_inner();
    assert_eq!(
        si.service_status,
        ServiceInfoStatus::Draining as i32,
        "older fault still holds"
    );
    heal(&f, id).await;
    let si = info.service_info(()).await.expect("info").into_inner();
    assert_eq!(si.service_status, ServiceInfoStatus::Healthy as i32);
    f.shutdown().await;
}

#[tokio::test]
async fn restart_loses_sandboxes_and_changes_service_id() {
    let f = fleet_with(1, |_| {}).await;
    let (mut sb, mut info) = clients(f.nodes()[0].addr).await;
    sb.create(create("a", 1, 1)).await.expect("create");
    sb.create(create("b", 1, 1)).await.expect("create");
    let before = info
        .service_info(())
        .await
        .expect("info")
        .into_inner()
        .service_id;
    fault(&f, json!({"kind": "restart", "nodes": ["node-00"]})).await;
    let after = info.service_info(()).await.expect("info").into_inner();
    assert_ne!(after.service_id, before);
    assert_eq!(after.metric_sandboxes_running, 0);
    assert!(sb
        .list(())
        .await
        .expect("list")
        .into_inner()
        .sandboxes
        .is_empty());
    let t = truth(&f, 0);
    assert_eq!((t.restarts, t.sandbox_count), (1, 0));
    f.shutdown().await;
}

/// Whether a fresh connection to `addr` answers a `List`.
async fn serves(addr: std::net::SocketAddr) -> bool {
    let ch = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("uri")
        .timeout(Duration::from_secs(1));
    match ch.connect().await {
        Ok(ch) => stampede_proto::sandbox_service_client::SandboxServiceClient::new(ch)
            .list(())
            .await
            .is_ok(),
        Err(_) => false,
    }
}

/// `GET /faults` over HTTP: the fault with `id`.
async fn fault_info(f: &mock_node::fleet::FleetHandle, id: u64) -> serde_json::Value {
    let all: serde_json::Value = http()
        .get(format!("{}/faults", f.admin_url()))
        .send()
        .await
        .expect("admin answers")
        .json()
        .await
        .expect("JSON");
    all["faults"]
        .as_array()
        .expect("faults")
        .iter()
        .find(|x| x["id"] == id)
        .cloned()
        .expect("fault listed")
}

/// A heal of `kill` whose address was taken meanwhile answered 500 but marked the fault
/// healed, and `GET /nodes` said healthy while every RPC got UNAVAILABLE. The fault
/// stays in force (node `killed`), says why, and its heal is retried until the address
/// is free again.
#[tokio::test]
async fn a_kill_whose_address_is_taken_stays_in_force_and_heals_once_it_is_free() {
    let f = fleet_with(2, |_| {}).await;
    let addr = f.nodes()[0].addr;
    let id = fault(&f, json!({"kind": "kill", "nodes": ["node-00"]})).await;
    assert_eq!(nodes(&f).await.nodes[0].status, "killed");
    // Another process takes the port while the node is down.
    let squatter = std::net::TcpListener::bind(addr).expect("the freed port can be taken");

    assert_eq!(heal(&f, id).await, 500, "the heal could not happen");
    let info = fault_info(&f, id).await;
    assert_eq!(info["active"], true, "{info}");
    assert!(
        info["heal_error"]
            .as_str()
            .is_some_and(|e| e.contains("node-00")),
        "{info}"
    );
    assert_eq!(nodes(&f).await.nodes[0].status, "killed");
    let (mut other, _) = clients(f.nodes()[1].addr).await;
    other.list(()).await.expect("other nodes unaffected");

    drop(squatter);
    let back = eventually(Duration::from_secs(10), async || {
        fault_info(&f, id).await["active"] == false && serves(addr).await
    })
    .await;
    assert!(back, "healed by the retry once the port was free");
    assert_ne!(nodes(&f).await.nodes[0].status, "killed");
    assert!(fault_info(&f, id).await.get("heal_error").is_none());
    // A heal of the healed fault is a 404, as for any fault no longer in force.
    assert_eq!(heal(&f, id).await, 404);
    f.shutdown().await;
}
