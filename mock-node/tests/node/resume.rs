//! A Create from a snapshot (a resume or a fork) and a Checkpoint wait for a starting
//! slot as E2B's orchestrator does; a fresh create and any create at `max_sandboxes`
//! are refused at once; a pause frees the sandbox's vCPU in ServiceInfo.

use crate::support as common;

use std::time::{Duration, Instant};

use common::*;
use mock_node::config::{LatencyDist, NodeSpec};
use mock_node::fleet::FleetHandle;
use stampede_proto::sandbox_service_client::SandboxServiceClient;
use stampede_proto::{SandboxCheckpointRequest, SandboxCreateRequest, SandboxPauseRequest};
use tonic::transport::Channel;
use tonic::Code;

fn from_snapshot(id: &str) -> SandboxCreateRequest {
    let mut r = create(id, 1, 256);
    if let Some(s) = r.sandbox.as_mut() {
        s.snapshot = true;
    }
    r
}

/// Starts a create that holds the node's only starting slot, and waits (at most 10 s)
/// until the node counts it starting; then checks that a fresh create is refused at
/// once for it.
async fn occupy_the_slot(f: &FleetHandle, sb: &SandboxServiceClient<Channel>) {
    let mut slow = sb.clone();
    tokio::spawn(async move {
        let _ = slow.create(create("slow", 1, 256)).await;
    });
    let started = eventually(Duration::from_secs(10), async || truth(f, 0).starting == 1).await;
    assert!(started, "the slow create never reached the node");
    let t0 = Instant::now();
    let s = sb
        .clone()
        .create(create("fresh", 1, 256))
        .await
        .expect_err("the only slot is taken");
    assert_eq!(s.code(), Code::ResourceExhausted);
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "a fresh create waited"
    );
}

#[test]
fn the_default_wait_is_e2bs_acquire_timeout() {
    assert_eq!(
        NodeSpec::default().resume_acquire_timeout,
        Duration::from_secs(15)
    );
}

#[tokio::test]
async fn resume_waits_for_a_starting_slot_then_is_refused() {
    let wait = Duration::from_millis(500);
    let f = fleet_with(1, |c| {
        c.node.max_starting = 1;
        c.node.create_latency = LatencyDist::Constant {
            value: Duration::from_secs(30),
        };
        c.node.resume_acquire_timeout = wait;
    })
    .await;
    let (sb, _) = clients(f.nodes()[0].addr).await;
    occupy_the_slot(&f, &sb).await;
    let t0 = Instant::now();
    let r = sb.clone().create(from_snapshot("resumed")).await;
    let took = t0.elapsed();
    let s = r.expect_err("no slot frees within the wait");
    assert_eq!(s.code(), Code::ResourceExhausted);
    assert!(s.message().contains("resuming"), "{}", s.message());
    assert!(
        took >= wait,
        "answered after {took:?}, before the {wait:?} wait"
    );
    assert!(
        took < Duration::from_secs(20),
        "held {took:?}: past the wait"
    );
    f.shutdown().await;
}

#[tokio::test]
async fn resume_takes_the_slot_that_frees_while_it_waits() {
    let f = fleet_with(1, |c| {
        c.node.max_starting = 1;
        c.node.create_latency = LatencyDist::Constant {
            value: Duration::from_millis(600),
        };
        c.node.resume_acquire_timeout = Duration::from_secs(30);
    })
    .await;
    let (sb, _) = clients(f.nodes()[0].addr).await;
    occupy_the_slot(&f, &sb).await;
    let t0 = Instant::now();
    sb.clone()
        .create(from_snapshot("resumed"))
        .await
        .expect("the slot frees well within the wait");
    assert!(t0.elapsed() < Duration::from_secs(30));
    f.shutdown().await;
}

#[tokio::test]
async fn resume_at_max_sandboxes_is_refused_at_once() {
    let f = fleet_with(1, |c| {
        c.node.max_sandboxes = 1;
        c.node.resume_acquire_timeout = Duration::from_secs(60);
    })
    .await;
    let (mut sb, _) = clients(f.nodes()[0].addr).await;
    sb.create(create("only", 1, 256)).await.expect("first fits");
    let t0 = Instant::now();
    let s = sb
        .create(from_snapshot("resumed"))
        .await
        .expect_err("the node is full");
    assert_eq!(s.code(), Code::ResourceExhausted);
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "held {:?}",
        t0.elapsed()
    );
    f.shutdown().await;
}

#[tokio::test]
async fn pause_frees_the_sandbox_vcpu_in_service_info() {
    let f = fleet_with(1, |_| {}).await;
    let (mut sb, mut info) = clients(f.nodes()[0].addr).await;
    let before = info.service_info(()).await.expect("info").into_inner();
    sb.create(create("p", 4, 512)).await.expect("create");
    let running = info.service_info(()).await.expect("info").into_inner();
    assert_eq!(
        running.metric_cpu_allocated,
        before.metric_cpu_allocated + 4
    );
    let r = sb
        .pause(SandboxPauseRequest {
            sandbox_id: "p".into(),
            build_id: "b-1".into(),
            ..Default::default()
        })
        .await
        .expect("pause")
        .into_inner();
    let meta = r.scheduling_metadata.expect("E2B's answer carries it");
    assert_eq!(meta.build_id, "b-1");
    let paused = info.service_info(()).await.expect("info").into_inner();
    assert_eq!(paused.metric_cpu_allocated, before.metric_cpu_allocated);
    assert_eq!(
        paused.metric_sandboxes_running,
        before.metric_sandboxes_running
    );
    f.shutdown().await;
}

#[tokio::test]
async fn checkpoint_keeps_the_sandbox_running() {
    let f = fleet_with(1, |_| {}).await;
    let (mut sb, _) = clients(f.nodes()[0].addr).await;
    sb.create(create("c", 1, 256)).await.expect("create");
    sb.checkpoint(SandboxCheckpointRequest {
        sandbox_id: "c".into(),
        build_id: "b".into(),
        ..Default::default()
    })
    .await
    .expect("checkpoint");
    let listed = sb.list(()).await.expect("list").into_inner().sandboxes;
    assert_eq!(listed.len(), 1, "still running");
    let s = sb
        .checkpoint(SandboxCheckpointRequest {
            sandbox_id: "nope".into(),
            ..Default::default()
        })
        .await
        .expect_err("unknown id");
    assert_eq!(s.code(), Code::NotFound);
    f.shutdown().await;
}
