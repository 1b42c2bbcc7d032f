//! Every RPC and every error code over real gRPC on loopback.

use crate::support as common;

use std::time::Duration;

use common::*;
use mock_node::config::{FailureCode, FailureRule, LatencyDist, RpcKind, VcpuRange};
use stampede_proto::{
    SandboxCreateRequest, SandboxDeleteRequest, SandboxPauseRequest, SandboxUpdateRequest,
    ServiceInfoRole, ServiceInfoStatus,
};
use tonic::Code;

#[tokio::test]
async fn create_list_update_delete_pause_roundtrip() {
    // A live CPU figure with no background load, to check the arithmetic.
    let f = fleet_with(2, |c| {
        c.node.idle_cpu_percent = VcpuRange { min: 0, max: 0 };
        c.node.cpu_percent_period = Duration::ZERO;
    })
    .await;
    let (mut sb, mut info) = clients(f.nodes()[1].addr).await;

    let r = sb.create(create("sb-1", 2, 512)).await.expect("create");
    assert_eq!(r.into_inner().client_id, "node-01");
    sb.create(create("sb-2", 1, 256)).await.expect("create 2");

    let list = sb.list(()).await.expect("list").into_inner().sandboxes;
    assert_eq!(list.len(), 2);
    let s1 = list
        .iter()
        .find(|s| s.sandbox_id == "sb-1")
        .expect("sb-1 listed");
    assert_eq!((s1.vcpu, s1.ram_mb), (2, 512));
    assert_eq!(s1.team_id, "team-1");
    assert!(s1.start_time.is_some() && s1.end_time.is_none());
    let cfg = s1.config.as_ref().expect("deprecated config still filled");
    assert_eq!(
        (cfg.sandbox_id.as_str(), cfg.vcpu, cfg.ram_mb),
        ("sb-1", 2, 512)
    );
    assert_eq!(cfg.template_id, "base");

    let end = ts_in(Duration::from_secs(3600));
    sb.update(SandboxUpdateRequest {
        sandbox_id: "sb-1".into(),
        end_time: Some(end),
    })
    .await
    .expect("update");
    let list = sb.list(()).await.expect("list").into_inner().sandboxes;
    let s1 = list.iter().find(|s| s.sandbox_id == "sb-1").expect("sb-1");
    assert_eq!(s1.end_time.map(|t| t.seconds), Some(end.seconds));

    let si = info.service_info(()).await.expect("info").into_inner();
    assert_eq!(si.node_id, "node-01");
    assert_eq!(si.metric_sandboxes_running, 2);
    assert_eq!(si.metric_cpu_allocated, 3);
    assert_eq!(si.metric_cpu_count, 16);
    assert_eq!(si.metric_memory_allocated_bytes, 768 << 20);
    // The default `host` model, as a real orchestrator: aggregate host percent,
    // 100 * (0.5 busy * 3 allocated) / 16 CPUs = 9.375.
    assert_eq!(si.metric_cpu_percent, 9);
    assert_eq!(si.service_status, ServiceInfoStatus::Healthy as i32);
    assert_eq!(si.service_roles, vec![ServiceInfoRole::Orchestrator as i32]);
    let mut ids = si.stampede_sandbox_ids.expect("extension filled").ids;
    ids.sort();
    assert_eq!(ids, vec!["sb-1", "sb-2"]);

    sb.delete(SandboxDeleteRequest {
        sandbox_id: "sb-1".into(),
    })
    .await
    .expect("delete");
    sb.pause(SandboxPauseRequest {
        sandbox_id: "sb-2".into(),
        ..Default::default()
    })
    .await
    .expect("pause removes like delete");
    assert!(sb
        .list(())
        .await
        .expect("list")
        .into_inner()
        .sandboxes
        .is_empty());
    let t = truth(&f, 1);
    assert_eq!((t.creates_ok, t.deletes_ok, t.sandbox_count), (2, 2, 0));
    assert_eq!(truth(&f, 0).creates_ok, 0, "other node untouched");
    f.shutdown().await;
}

fn code<T: std::fmt::Debug>(r: Result<T, tonic::Status>) -> Code {
    r.expect_err("must fail").code()
}

#[tokio::test]
async fn error_codes() {
    let f = fleet_with(1, |_| {}).await;
    let (mut sb, _) = clients(f.nodes()[0].addr).await;

    let missing = SandboxCreateRequest::default();
    assert_eq!(code(sb.create(missing).await), Code::InvalidArgument);
    assert_eq!(
        code(sb.create(create("", 1, 1)).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(sb.create(create("a", 0, 1)).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(sb.create(create("a", 1, -5)).await),
        Code::InvalidArgument
    );
    sb.create(create("a", 1, 1)).await.expect("create");
    assert_eq!(
        code(sb.create(create("a", 1, 1)).await),
        Code::AlreadyExists
    );
    let del = |id: &str| SandboxDeleteRequest {
        sandbox_id: id.into(),
    };
    assert_eq!(code(sb.delete(del("nope")).await), Code::NotFound);
    let upd = SandboxUpdateRequest {
        sandbox_id: "nope".into(),
        end_time: None,
    };
    assert_eq!(code(sb.update(upd).await), Code::NotFound);
    let pause = SandboxPauseRequest {
        sandbox_id: "nope".into(),
        ..Default::default()
    };
    assert_eq!(code(sb.pause(pause).await), Code::NotFound);
    let t = truth(&f, 0);
    assert_eq!(t.creates_rejected.get("invalid_argument"), Some(&4));
    assert_eq!(t.creates_rejected.get("already_exists"), Some(&1));
    f.shutdown().await;
}

#[tokio::test]
async fn admission_max_sandboxes() {
    let f = fleet_with(1, |c| c.node.max_sandboxes = 3).await;
    let (mut sb, _) = clients(f.nodes()[0].addr).await;
    for i in 0..3 {
        sb.create(create(&format!("s{i}"), 1, 1))
            .await
            .expect("under the limit");
    }
    let e = sb.create(create("s3", 1, 1)).await.expect_err("limit");
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert!(
        e.message().contains("max number of running sandboxes"),
        "{}",
        e.message()
    );
    assert_eq!(truth(&f, 0).creates_rejected.get("max_sandboxes"), Some(&1));
    f.shutdown().await;
}

#[tokio::test]
async fn admission_overcommit_counts_baseline() {
    let f = fleet_with(1, |c| {
        c.node.cpu_count = 4;
        c.node.overcommit = 2.0;
        c.node.baseline_vcpu = VcpuRange { min: 2, max: 2 };
        c.node.idle_cpu_percent = VcpuRange { min: 0, max: 0 };
        c.node.cpu_percent_period = Duration::ZERO;
    })
    .await;
    let (mut sb, mut info) = clients(f.nodes()[0].addr).await;
    sb.create(create("a", 4, 1)).await.expect("2 + 4 <= 8");
    let e = sb
        .create(create("b", 3, 1))
        .await
        .expect_err("2 + 4 + 3 > 8");
    assert_eq!(e.code(), Code::ResourceExhausted);
    sb.create(create("c", 2, 1)).await.expect("2 + 4 + 2 <= 8");
    let si = info.service_info(()).await.expect("info").into_inner();
    assert_eq!(
        si.metric_cpu_allocated, 8,
        "baseline is allocation, not sandboxes"
    );
    assert_eq!(si.metric_sandboxes_running, 2);
    // `host` model: 0.5 busy * 8 allocated = 4 busy CPUs of 4 = 100 %, the ceiling.
    assert_eq!(si.metric_cpu_percent, 100);
    assert_eq!(truth(&f, 0).creates_rejected.get("overcommit"), Some(&1));
    f.shutdown().await;
}

#[tokio::test]
async fn admission_max_starting() {
    let f = fleet_with(1, |c| {
        c.node.max_starting = 2;
        c.node.create_latency = LatencyDist::Constant {
            value: Duration::from_secs(30),
        };
    })
    .await;
    let addr = f.nodes()[0].addr;
    let mut slow = Vec::new();
    for i in 0..2 {
        let (mut sb, _) = clients(addr).await;
        slow.push(tokio::spawn(async move {
            sb.create(create(&format!("s{i}"), 1, 1)).await
        }));
    }
    assert!(eventually(Duration::from_secs(5), async || truth(&f, 0).starting == 2).await);
    let (mut sb, _) = clients(addr).await;
    let e = sb
        .create(create("third", 1, 1))
        .await
        .expect_err("too many starting");
    assert_eq!(e.code(), Code::ResourceExhausted);
    let e = sb
        .create(create("s0", 1, 1))
        .await
        .expect_err("id is starting");
    assert_eq!(e.code(), Code::AlreadyExists);
    assert_eq!(truth(&f, 0).creates_rejected.get("max_starting"), Some(&1));
    for h in &slow {
        h.abort();
    }
    // Abandoned creates release their slot (the RPC future is dropped server-side).
    assert!(eventually(Duration::from_secs(5), async || truth(&f, 0).starting == 0).await);
    f.shutdown().await;
}

/// E2B's orchestrator only reports `end_time` in List (`pkg/server/sandboxes.go`): the
/// sandbox stays until the API's evictor deletes it.
#[tokio::test]
async fn a_sandbox_past_its_end_time_is_listed_until_deleted() {
    let f = fleet_with(1, |_| {}).await;
    let (mut sb, _) = clients(f.nodes()[0].addr).await;
    // Started two hours ago, ended one hour ago: past its end time from the start.
    let mut req = create("ended", 1, 1);
    req.start_time = Some(ts_ago(Duration::from_secs(7200)));
    req.end_time = Some(ts_ago(Duration::from_secs(3600)));
    sb.create(req).await.expect("create");
    sb.create(create("open", 1, 1)).await.expect("create");
    let listed = sb.list(()).await.expect("list").into_inner().sandboxes;
    let mut ids: Vec<&str> = listed.iter().map(|s| s.sandbox_id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["ended", "open"], "past its end time, still running");
    let ended = listed
        .iter()
        .find(|s| s.sandbox_id == "ended")
        .expect("listed");
    assert!(ended.end_time.is_some(), "end time reported");
    assert_eq!(truth(&f, 0).sandbox_count, 2);
    sb.delete(SandboxDeleteRequest {
        sandbox_id: "ended".into(),
    })
    .await
    .expect("the evictor's delete");
    let listed = sb.list(()).await.expect("list").into_inner().sandboxes;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].sandbox_id, "open");
    f.shutdown().await;
}

/// Best-of-K keeps a strict order only if nodes differ: on a default fleet of 10 no two
/// nodes give a create the same score at t=0, from what each reports over the wire
/// (E2B's score, `placement_best_of_K.go`: `(requested + allocated + alpha * percent/100)
/// / (R * cpus)`, R 4, alpha 0.5).
#[tokio::test]
async fn no_two_default_nodes_score_the_same_at_start() {
    for seed in [0, 1, 42, 2201] {
        let f = mock_node::fleet::start(
            mock_node::config::ClusterConfig {
                seed: Some(seed),
                ..Default::default()
            },
            mock_node::fleet::FleetOptions::default(),
        )
        .await
        .expect("fleet starts");
        assert_eq!(f.nodes().len(), 10);
        let mut scores = Vec::new();
        for n in f.nodes() {
            let (_, mut info) = clients(n.addr).await;
            let si = info.service_info(()).await.expect("info").into_inner();
            let usage = f64::from(si.metric_cpu_percent) / 100.0;
            let s = (1.0 + f64::from(si.metric_cpu_allocated) + 0.5 * usage)
                / (4.0 * f64::from(si.metric_cpu_count));
            scores.push((s, si.node_id));
        }
        for (i, (a, na)) in scores.iter().enumerate() {
            for (b, nb) in &scores[i + 1..] {
                assert!(a != b, "seed {seed}: {na} and {nb} tie at {a}");
            }
        }
        f.shutdown().await;
    }
}

#[tokio::test]
async fn metrics_lag_serves_a_stale_snapshot() {
    let lag = Duration::from_millis(1500);
    let started = tokio::time::Instant::now();
    let f = fleet_with(1, |c| c.node.metrics_lag = lag).await;
    let (mut sb, mut info) = clients(f.nodes()[0].addr).await;
    let before = info.service_info(()).await.expect("info").into_inner();
    sb.create(create("a", 2, 1)).await.expect("create");
    let stale = info.service_info(()).await.expect("info").into_inner();
    // Snapshots are refreshed at multiples of the lag since fleet start: still period 0.
    if started.elapsed() < lag - Duration::from_millis(100) {
        assert_eq!(stale.metric_sandboxes_running, 0, "lagged snapshot");
        assert_eq!(stale.metric_cpu_allocated, 0);
    }
    assert_eq!(truth(&f, 0).sandbox_count, 1, "truth is never lagged");
    let fresh = eventually(Duration::from_secs(5), async || {
        info.service_info(())
            .await
            .expect("info")
            .into_inner()
            .metric_sandboxes_running
            == 1
    })
    .await;
    assert!(fresh, "snapshot refreshed after the lag");
    assert_eq!(before.metric_sandboxes_running, 0);
    f.shutdown().await;
}

#[tokio::test]
async fn configured_failure_rules_inject_codes() {
    let f = fleet_with(1, |c| {
        c.node.failures = vec![FailureRule {
            rpc: RpcKind::Create,
            probability: 1.0,
            code: FailureCode::Unavailable,
        }]
    })
    .await;
    let (mut sb, mut info) = clients(f.nodes()[0].addr).await;
    let e = sb.create(create("a", 1, 1)).await.expect_err("injected");
    assert_eq!(e.code(), Code::Unavailable);
    info.service_info(()).await.expect("other RPCs unaffected");
    assert_eq!(truth(&f, 0).creates_failed, 1);
    f.shutdown().await;
}

#[tokio::test]
async fn health_reports_serving() {
    use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
    let f = fleet_with(1, |_| {}).await;
    let ch = channel(f.nodes()[0].addr, Duration::from_secs(5)).await;
    let mut h = HealthClient::new(ch);
    for service in ["", "SandboxService", "InfoService"] {
        let r = h
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("health");
        assert_eq!(r.into_inner().status, 1, "{service:?} SERVING");
    }
    f.shutdown().await;
}

/// E2B's orchestrator bounds each Create by its own 60 s `requestTimeout`
/// (`pkg/server/sandboxes.go`): a start that runs longer fails with INTERNAL at that
/// deadline (not when the start would have ended), holds no sandbox, and frees its
/// starting slot, so the node takes the next create.
#[tokio::test]
async fn a_create_longer_than_the_node_timeout_fails_internal_and_frees_its_slot() {
    assert_eq!(
        mock_node::config::NodeSpec::default().create_timeout,
        Duration::from_secs(60)
    );
    let timeout = Duration::from_millis(300);
    let f = fleet_with(1, |c| {
        c.node.max_starting = 1;
        c.node.create_timeout = timeout;
        c.node.create_latency = LatencyDist::Constant {
            value: Duration::from_secs(30),
        };
    })
    .await;
    let (mut sb, _) = clients(f.nodes()[0].addr).await;
    let t0 = std::time::Instant::now();
    let e = sb
        .create(create("long", 1, 1))
        .await
        .expect_err("past the node's deadline");
    let took = t0.elapsed();
    assert_eq!(e.code(), Code::Internal, "{e:?}");
    assert!(took >= timeout, "answered after {took:?}");
    assert!(took < Duration::from_secs(20), "answered after {took:?}");
    let t = truth(&f, 0);
    assert_eq!((t.sandbox_count, t.starting, t.creates_ok), (0, 0, 0));
    assert_eq!(t.creates_failed, 1);
    // The slot is free: the next create is admitted (and times out in turn).
    let e = sb.create(create("next", 1, 1)).await.expect_err("admitted");
    assert_eq!(e.code(), Code::Internal, "not refused: {e:?}");
    f.shutdown().await;
}

/// A `slow` fault delays the call inside the node, so its delay counts against the
/// node's Create deadline: a delay beyond it fails INTERNAL without reaching admission,
/// a shorter one plus a short start succeeds.
#[tokio::test]
async fn a_slow_fault_past_the_node_timeout_fails_the_create_internal() {
    let f = fleet_with(1, |c| {
        c.node.create_timeout = Duration::from_millis(400);
    })
    .await;
    let (mut sb, _) = clients(f.nodes()[0].addr).await;
    let id = fault(
        &f,
        serde_json::json!({"kind": "slow", "nodes": ["node-00"], "latency": "5s"}),
    )
    .await;
    let t0 = std::time::Instant::now();
    let e = sb
        .create(create("slowed", 1, 1))
        .await
        .expect_err("timed out");
    assert_eq!(e.code(), Code::Internal, "{e:?}");
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    assert_eq!(truth(&f, 0).sandbox_count, 0);
    assert_eq!(heal(&f, id).await, 204);
    let id = fault(
        &f,
        serde_json::json!({"kind": "slow", "nodes": ["node-00"], "latency": "50ms"}),
    )
    .await;
    sb.create(create("quick", 1, 1))
        .await
        .expect("within the deadline");
    assert_eq!(heal(&f, id).await, 204);
    f.shutdown().await;
}
