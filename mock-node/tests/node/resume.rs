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

/// A node with one starting slot, creates that start in 30 s (so a slot frees only when
/// the test hangs up a call) and waits of 30 s.
async fn one_slot_node() -> FleetHandle {
    fleet_with(1, |c| {
        c.node.max_starting = 1;
        c.node.create_latency = LatencyDist::Constant {
            value: Duration::from_secs(30),
        };
        c.node.resume_acquire_timeout = Duration::from_secs(30);
    })
    .await
}

/// A client whose calls outlive the test (they end when the test hangs them up).
async fn patient(addr: std::net::SocketAddr) -> SandboxServiceClient<Channel> {
    SandboxServiceClient::new(channel(addr, Duration::from_secs(120)).await)
}

/// Sends `req` in a task of its own; aborting the task hangs the call up.
fn call(
    sb: &SandboxServiceClient<Channel>,
    req: SandboxCreateRequest,
) -> tokio::task::JoinHandle<
    Result<tonic::Response<stampede_proto::SandboxCreateResponse>, tonic::Status>,
> {
    let mut sb = sb.clone();
    tokio::spawn(async move { sb.create(req).await })
}

/// Waits (at most 10 s) until the node counts `starting` creates, `waiting` calls
/// queued for a slot and `failed` creates.
async fn node_at(f: &FleetHandle, starting: u64, waiting: u64, failed: u64, what: &str) {
    let reached = eventually(Duration::from_secs(10), async || {
        let t = truth(f, 0);
        (t.starting, t.waiting_for_slot, t.creates_failed) == (starting, waiting, failed)
    })
    .await;
    let t = truth(f, 0);
    assert!(
        reached,
        "{what}: starting {} waiting {} failed {}, expected {starting} {waiting} {failed}",
        t.starting, t.waiting_for_slot, t.creates_failed
    );
}

/// A slot freed while a resume waits goes to the resume, not to a fresh create that
/// arrives after the release: fresh creates sent back to back across the release are
/// all refused until the resume holds the slot. Five rounds, each with its own release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freed_slot_goes_to_the_waiting_resume_not_to_a_fresh_create_sent_after() {
    let f = one_slot_node().await;
    let addr = f.nodes()[0].addr;
    let sb = patient(addr).await;
    let storm = SandboxServiceClient::new(channel(addr, Duration::from_secs(2)).await);
    let mut holder = call(&sb, create("first", 1, 256));
    node_at(&f, 1, 0, 0, "the first create holds the slot").await;
    let mut sent = 0u32;
    for round in 0..5u64 {
        let resume = call(&sb, from_snapshot(&format!("resumed-{round}")));
        node_at(&f, 1, 1, round, "the resume waits").await;
        holder.abort();
        let t0 = Instant::now();
        // Until the resume is admitted: nobody waits and one create starts.
        loop {
            let t = truth(&f, 0);
            if t.waiting_for_slot == 0 && t.starting == 1 {
                break;
            }
            assert!(
                sent < 20_000 && t0.elapsed() < Duration::from_secs(10),
                "round {round}: the resume was not admitted ({sent} fresh creates sent)"
            );
            let r = storm
                .clone()
                .create(create(&format!("fresh-{sent}"), 1, 256))
                .await;
            sent += 1;
            match r {
                Err(s) if s.code() == Code::ResourceExhausted => {}
                other => panic!(
                    "round {round}: fresh create {sent} took the slot the resume waited for: {other:?}"
                ),
            }
        }
        holder = resume;
    }
    holder.abort();
    f.shutdown().await;
}

/// Waiters get freed slots oldest first: four resumes queue one after the other; each
/// hang-up of the call holding the slot lets the next one in, which is the oldest (a
/// hang-up of a call still waiting would count no failed create).
#[tokio::test]
async fn waiting_resumes_get_freed_slots_in_arrival_order() {
    let f = one_slot_node().await;
    let sb = patient(f.nodes()[0].addr).await;
    let mut holder = call(&sb, create("first", 1, 256));
    node_at(&f, 1, 0, 0, "the first create holds the slot").await;
    let mut queued = std::collections::VecDeque::new();
    for i in 0..4u64 {
        queued.push_back(call(&sb, from_snapshot(&format!("resumed-{i}"))));
        node_at(&f, 1, i + 1, 0, "the resumes queue").await;
    }
    for failed in 1..=4u64 {
        holder.abort();
        let waiting = 4 - failed;
        node_at(&f, 1, waiting, failed, "the next resume takes the slot").await;
        holder = queued.pop_front().expect("one per round");
    }
    holder.abort();
    node_at(&f, 0, 0, 5, "every call hung up").await;
    f.shutdown().await;
}

/// A resume that hangs up while it waits leaves the queue: the slot freed after it goes
/// to the next caller, and a kill of the node empties the queue the same way.
#[tokio::test]
async fn a_waiter_that_hangs_up_holds_no_slot() {
    let f = one_slot_node().await;
    let sb = patient(f.nodes()[0].addr).await;
    let holder = call(&sb, create("first", 1, 256));
    node_at(&f, 1, 0, 0, "the first create holds the slot").await;
    let gone = call(&sb, from_snapshot("gone"));
    node_at(&f, 1, 1, 0, "the resume waits").await;
    gone.abort();
    node_at(&f, 1, 0, 0, "the resume left the queue").await;
    holder.abort();
    node_at(&f, 0, 0, 1, "the slot is free").await;
    let next = call(&sb, create("next", 1, 256));
    node_at(&f, 1, 0, 1, "a fresh create takes the free slot").await;
    let waiting = call(&sb, from_snapshot("killed"));
    node_at(&f, 1, 1, 1, "a resume waits again").await;
    let id = fault(
        &f,
        serde_json::json!({"kind": "kill", "nodes": ["node-00"]}),
    )
    .await;
    // The kill answers both calls UNAVAILABLE and aborts the starting create.
    node_at(&f, 0, 0, 2, "the kill emptied the node").await;
    for h in [next, waiting] {
        let r = h.await.expect("task ran");
        assert_eq!(r.expect_err("killed").code(), Code::Unavailable);
    }
    assert_eq!(heal(&f, id).await, 204);
    f.shutdown().await;
}
