//! The `drain` chaos step: `POST /nodes/{nodeID}` on the placement API, as an operator
//! drains a node in E2B (`handlers/admin.go`, `PostNodesNodeID`).

use crate::support::serve as serve_common;

use std::time::Duration;

use mock_node::api::{FaultKind, ServiceStatus};
use serde_json::json;
use serve_common::{cluster, serve_config, Rig, TEST_ADMIN_TOKEN};
use stampede::api_key::ApiKey;
use stampede::chaos::{ChaosClient, FaultPlan};
use stampede::placement::AccountingMode;
use stampede::profile::{ChaosFault, ChaosStep, NodeSelector, ProfileError, Source};

fn drain_step() -> ChaosStep {
    ChaosStep {
        at: Duration::ZERO,
        fault: ChaosFault::Drain,
        nodes: NodeSelector::Ids(vec!["node-00".into()]),
        duration: Some(Duration::from_secs(60)),
    }
}

/// A drain resolves to the status the node then reports (`draining`), marked to go
/// through the API; it takes no parameters.
#[test]
fn drain_plans_a_draining_status_through_the_api() {
    let ids = vec!["node-00".to_string(), "node-01".to_string()];
    let plan = FaultPlan::resolve(&[drain_step()], &ids, 1).expect("plan");
    let f = &plan.faults[0];
    assert!(f.through_api);
    assert_eq!(f.name(), "drain");
    assert_eq!(
        f.kind,
        FaultKind::Status {
            status: ServiceStatus::Draining
        }
    );
    let text = "name: t\nworkload: {shape: {burst: {count: 1}}}\nchaos:\n  \
        - {at: 1s, fault: drain, nodes: [node-00], params: {status: standby}}\n";
    let Err(ProfileError::Parse(e)) = stampede::profile::parse(&Source::inline("t.yaml", text))
    else {
        panic!("a drain with parameters parsed");
    };
    assert_eq!(e.field, "chaos[0].params.status", "{e}");
}

/// Applied, the drained node takes no new sandbox from the next sync on; healed, it is
/// `ready` again (E2B's `nodemanager/status.go`: draining cannot accept).
#[tokio::test]
async fn drain_through_post_nodes_then_ready_at_heal() {
    let rig = Rig::start(cluster(2, &[]), serve_config(AccountingMode::Optimistic)).await;
    let ids = vec!["node-00".to_string(), "node-01".to_string()];
    let plan = FaultPlan::resolve(&[drain_step()], &ids, 1).expect("plan");
    let client = ChaosClient::new(&rig.fleet.admin_url(), None).with_api(
        vec![rig.svc.url().to_string()],
        Some(ApiKey::new(TEST_ADMIN_TOKEN)),
    );
    let guard = client.apply(&plan.faults[0]).await.expect("drain applied");
    rig.svc.sync_now().await;
    assert_eq!(rig.nodes().await["node-00"]["status"], "draining");
    for _ in 0..6 {
        let (status, body) = rig.create(json!({"templateID": "base"})).await;
        assert_eq!(status, 201, "{body}");
        let id = body["sandboxID"].as_str().unwrap();
        assert_eq!(rig.truth_node_of(id).as_deref(), Some("node-01"));
    }
    guard.heal().await.expect("healed");
    rig.svc.sync_now().await;
    assert_eq!(rig.nodes().await["node-00"]["status"], "ready");
    rig.stop().await;
}

/// Without a placement API to send it to, a drain fails to apply instead of silently
/// doing nothing.
#[tokio::test]
async fn drain_without_an_api_is_an_error() {
    let rig = Rig::start(cluster(2, &[]), serve_config(AccountingMode::Optimistic)).await;
    let ids = vec!["node-00".to_string(), "node-01".to_string()];
    let plan = FaultPlan::resolve(&[drain_step()], &ids, 1).expect("plan");
    let client = ChaosClient::new(&rig.fleet.admin_url(), None);
    assert!(client.apply(&plan.faults[0]).await.is_err());
    rig.stop().await;
}

/// The simulator models a drain as what the node then reports (`draining` from the
/// next sync on) and reports the window under the step's name.
#[test]
fn a_drain_step_simulates_as_a_draining_window() {
    let text = "name: sim-drain
seed: 3
cluster:
  nodes: 3
  node: {cpu_count: 64}
placement:
  embedded:
    sync_interval: 1s
workload:
  shape:
    rate: {per_second: 20, duration: 10s}
  sandbox: {template: base, vcpu: 1, ram_mb: 512, timeout: 300s}
chaos:
  - at: 2s
    fault: drain
    nodes: [node-00]
    duration: 5s
checks:
  lost: {max: 0}
  duplicated: {max: 0}
";
    let p = stampede::profile::parse(&stampede::profile::Source {
        file: "sim-drain.yaml".into(),
        text: text.into(),
    })
    .expect("parses");
    assert!(stampede::profile::validate(
        &p,
        &stampede::profile::Source {
            file: "sim-drain.yaml".into(),
            text: text.into(),
        }
    )
    .is_empty());
    let report = stampede::sim::simulate_profile(&p).expect("simulates");
    let run = &report.runs[0];
    assert_eq!(run.faults.len(), 1);
    assert_eq!(run.faults[0].kind, "drain");
    let c = run.set_audit.as_ref().expect("audited");
    assert_eq!((c.lost.count, c.duplicated.count), (0, 0));
    assert_eq!(
        run.ok, run.requests,
        "two nodes stay ready: {:?}",
        run.statuses
    );
}
