//! The chaos client and schedule against a real in-process mock-node fleet on loopback.

use std::time::{Duration, Instant};

use mock_node::api::FaultKind;
use mock_node::config::ClusterConfig;
use mock_node::fleet::{self, FleetHandle, FleetOptions};
use stampede::chaos::{run_schedule, ChaosClient, ChaosError, FaultPlan, PlannedFault};
use stampede_proto::sandbox_service_client::SandboxServiceClient;
use tokio_util::sync::CancellationToken;
use tonic::Code;

async fn fleet(nodes: usize, opts: FleetOptions) -> FleetHandle {
    let cfg = ClusterConfig {
        nodes,
        seed: Some(1),
        ..Default::default()
    };
    fleet::start(cfg, opts).await.expect("fleet starts")
}

fn planned(kind: FaultKind, nodes: &[&str], at_ms: u64, dur_ms: Option<u64>) -> PlannedFault {
    PlannedFault {
        step: 0,
        at: Duration::from_millis(at_ms),
        kind,
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        duration: dur_ms.map(Duration::from_millis),
        through_api: false,
        command: None,
    }
}

/// `List` on the node at `addr` with a fresh lazy channel: the gRPC status code.
async fn list_code(addr: std::net::SocketAddr) -> Code {
    let ch = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect_timeout(Duration::from_millis(500))
        .timeout(Duration::from_secs(1))
        .connect_lazy();
    match SandboxServiceClient::new(ch).list(()).await {
        Ok(_) => Code::Ok,
        Err(e) => e.code(),
    }
}

/// Polls `cond` every 20 ms for at most `limit`.
async fn eventually(limit: Duration, mut cond: impl AsyncFnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if cond().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn active(client: &ChaosClient) -> Vec<(u64, FaultKind)> {
    client
        .list()
        .await
        .expect("GET /faults")
        .into_iter()
        .filter(|(_, f)| f.active)
        .map(|(_, f)| (f.id, f.kind))
        .collect()
}

#[tokio::test]
async fn kill_is_listed_unavailable_and_healed_by_the_guard() {
    let f = fleet(3, FleetOptions::default()).await;
    let client = ChaosClient::new(&f.admin_url(), None);
    let victim = f.nodes()[1].addr;
    assert_eq!(list_code(victim).await, Code::Ok);

    let guard = client
        .apply(&planned(FaultKind::Kill, &["node-01"], 0, None))
        .await
        .expect("applied");
    assert_eq!(
        active(&client).await,
        vec![(guard.id().parse().unwrap(), FaultKind::Kill)]
    );
    assert_eq!(list_code(victim).await, Code::Unavailable);
    assert_eq!(
        list_code(f.nodes()[0].addr).await,
        Code::Ok,
        "others unaffected"
    );

    guard.heal().await.expect("healed");
    assert!(active(&client).await.is_empty());
    let back = eventually(Duration::from_secs(5), async || {
        list_code(victim).await == Code::Ok
    })
    .await;
    assert!(back, "node answers again after the heal");
    f.shutdown().await;
}

#[tokio::test]
async fn a_dropped_guard_heals_in_the_background() {
    let f = fleet(2, FleetOptions::default()).await;
    let client = ChaosClient::new(&f.admin_url(), None);
    let guard = client
        .apply(&planned(
            FaultKind::Exhaust,
            &["node-00", "node-01"],
            0,
            None,
        ))
        .await
        .expect("applied");
    assert_eq!(active(&client).await.len(), 1);
    drop(guard);
    let healed = eventually(Duration::from_secs(5), async || {
        active(&client).await.is_empty()
    })
    .await;
    assert!(healed, "drop healed the fault");
    f.shutdown().await;
}

#[tokio::test]
async fn bad_faults_and_bad_tokens_are_errors_not_panics() {
    let opts = FleetOptions {
        admin_token: Some(stampede_http_kit::Secret::new("s3cret")),
        ..Default::default()
    };
    let f = fleet(2, opts).await;
    let wrong = ChaosClient::new(&f.admin_url(), Some("nope".into()));
    let e = wrong
        .apply(&planned(FaultKind::Kill, &["node-00"], 0, None))
        .await
        .expect_err("401");
    assert!(matches!(e, ChaosError::Status { status: 401, .. }), "{e}");
    assert!(!format!("{wrong:?}").contains("nope"), "token not printed");

    let right = ChaosClient::new(&f.admin_url(), Some("s3cret".into()));
    let e = right
        .apply(&planned(FaultKind::Kill, &["node-77"], 0, None))
        .await
        .expect_err("unknown node");
    assert!(matches!(e, ChaosError::Status { status: 400, .. }), "{e}");
    assert!(e.to_string().contains("node-77"), "{e}");
    let g = right
        .apply(&planned(FaultKind::Hang, &["node-00"], 0, None))
        .await
        .expect("applied with the token");
    g.heal().await.expect("healed with the token");
    assert!(active(&right).await.is_empty());
    f.shutdown().await;
}

#[tokio::test]
async fn a_fault_spanning_two_fleets_is_split_and_healed_on_both() {
    let one = |id: &str| FleetOptions {
        node_id: Some(id.into()),
        ..Default::default()
    };
    let a = fleet(1, one("alpha")).await;
    let b = fleet(1, one("beta")).await;
    let client = ChaosClient::discover(&[a.admin_url(), b.admin_url()], None)
        .await
        .expect("discovered");
    let g = client
        .apply(&planned(FaultKind::Kill, &["alpha", "beta"], 0, None))
        .await
        .expect("applied");
    assert_eq!(g.ids().len(), 2);
    assert_eq!(list_code(a.nodes()[0].addr).await, Code::Unavailable);
    assert_eq!(list_code(b.nodes()[0].addr).await, Code::Unavailable);
    g.heal().await.expect("healed");
    assert!(active(&client).await.is_empty());
    let e = client
        .apply(&planned(FaultKind::Kill, &["gamma"], 0, None))
        .await
        .expect_err("no fleet has gamma");
    assert_eq!(e, ChaosError::UnknownNode("gamma".into()));
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn schedule_applies_on_time_heals_after_duration_and_at_stop() {
    let f = fleet(3, FleetOptions::default()).await;
    let client = ChaosClient::new(&f.admin_url(), None);
    let plan = FaultPlan {
        faults: vec![
            planned(FaultKind::Kill, &["node-00"], 100, Some(300)),
            planned(FaultKind::Hang, &["node-01"], 150, None),
            PlannedFault {
                step: 2,
                ..planned(FaultKind::Restart, &["node-02"], 50, None)
            },
            // Not due before the stop: never applied.
            planned(FaultKind::Exhaust, &["node-02"], 60_000, Some(1_000)),
        ],
    };
    let stop = CancellationToken::new();
    let gate = Instant::now();
    let run = tokio::spawn({
        let (client, stop) = (client.clone(), stop.clone());
        async move { run_schedule(&plan, &client, None, gate, stop).await }
    });
    let hung = eventually(Duration::from_secs(5), async || {
        active(&client)
            .await
            .iter()
            .any(|(_, k)| *k == FaultKind::Hang)
    })
    .await;
    assert!(hung, "hang applied");
    let kill_done = eventually(Duration::from_secs(5), async || {
        !active(&client)
            .await
            .iter()
            .any(|(_, k)| *k == FaultKind::Kill)
    })
    .await;
    assert!(kill_done, "kill healed after its duration");
    stop.cancel();
    let applied = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("schedule returns after stop")
        .expect("no panic");
    assert!(active(&client).await.is_empty(), "nothing left in force");
    assert_eq!(applied.len(), 3, "{applied:?}");
    for a in &applied {
        assert!(a.error.is_none(), "{a:?}");
        let healed = a.healed_at_ms.expect("healed");
        assert!(a.applied_at_ms >= a.planned.at.as_millis() as f64, "{a:?}");
        assert!(healed >= a.applied_at_ms);
    }
    let kill = &applied[0];
    let held = kill.healed_at_ms.unwrap() - kill.applied_at_ms;
    assert!((300.0..2_000.0).contains(&held), "kill held {held} ms");
    assert_eq!(applied[2].planned.kind, FaultKind::Restart);
    assert_eq!(applied[2].healed_at_ms, Some(applied[2].applied_at_ms));
    assert_eq!(f.truth().nodes[2].restarts, 1);
    f.shutdown().await;
}

/// A command fault has no fleet to list it: the client keeps it, with the program that
/// heals it, until it is healed (an abort by a second signal prints that list).
#[tokio::test]
async fn a_command_in_force_is_named_with_its_heal_until_healed() {
    let client = ChaosClient::without_fleet();
    let fault = PlannedFault {
        command: Some(stampede::profile::CommandAction {
            run: vec!["true".into()],
            heal: vec!["true".into(), "undo".into(), "n1".into()],
            timeout: Duration::from_secs(10),
        }),
        ..planned(
            FaultKind::Status {
                status: mock_node::api::ServiceStatus::Healthy,
            },
            &["n1"],
            0,
            Some(1_000),
        )
    };
    assert!(client.outside_active().is_empty());
    let guard = client.apply(&fault).await.expect("command applied");
    let active = client.outside_active();
    assert_eq!(active.len(), 1, "{active:?}");
    assert!(active[0].contains("command on n1"), "{active:?}");
    assert!(active[0].contains("true undo n1"), "{active:?}");
    guard.heal().await.expect("healed");
    assert!(client.outside_active().is_empty());
}
