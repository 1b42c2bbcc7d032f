//! The placer through its API stage: a request opens at arrival, waits for the stage's
//! schedule, then decides; its deadline runs from arrival; the Best-of-K draws are the
//! same with the stage on or off.

use std::time::Duration;

use stampede_dist::LatencyDist;

use crate::{ApiStage, FailureKind, InfoReply, Input, NodeMetrics, NodeStatus, Output, Placer};

pub(super) fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

pub(super) fn placer(stage: ApiStage, timeout: Duration) -> Placer {
    let cfg = crate::PlacerConfig {
        placement: crate::PlacementConfig::default(),
        seed: 11,
        request_timeout: timeout,
        retry_backoff: None,
        defer_retries: false,
        api_stage: stage,
    };
    let ids: Vec<String> = (0..6).map(|i| format!("node-{i}")).collect();
    let mut p = Placer::new(cfg, ids.iter().map(Into::into));
    for (i, id) in ids.iter().enumerate() {
        let info = InfoReply {
            status: NodeStatus::Ready,
            metrics: NodeMetrics {
                cpu_allocated: 3 * i as u32,
                cpu_count: 16,
                cpu_percent: 0,
                memory_allocated_bytes: 0,
                memory_total_bytes: 1 << 36,
                sandboxes_running: 0,
            },
            ids: Some(Vec::new()),
        };
        let listed = Some(Vec::new());
        let node = id.as_str().into();
        p.handle(Duration::ZERO, Input::Synced { node, info, listed });
    }
    p
}

fn stage(value: Duration, workers: u32) -> ApiStage {
    ApiStage {
        time: LatencyDist::Constant { value },
        workers: Some(workers),
        ..ApiStage::off()
    }
}

pub(super) fn create(req: u64) -> Input {
    Input::Create {
        req,
        sandbox_id: format!("sb-{req}").as_str().into(),
        vcpu: 1,
    }
}

#[test]
fn a_staged_burst_decides_on_the_stages_schedule_with_the_same_draws() {
    let mut off = placer(ApiStage::off(), ms(70_000));
    let mut on = placer(stage(ms(10), 2), ms(70_000));
    let mut direct = Vec::new();
    let mut staged = Vec::new();
    for req in 0..6 {
        match off.handle(Duration::ZERO, create(req)) {
            Some(Output::SendCreate { node, .. }) => direct.push(node),
            other => panic!("no stage: {other:?}"),
        }
        match on.handle(Duration::ZERO, create(req)) {
            Some(Output::DecideAt { at, .. }) => staged.push((req, at)),
            other => panic!("stage: {other:?}"),
        }
    }
    let times: Vec<_> = staged.iter().map(|&(_, at)| at).collect();
    assert_eq!(times, [10, 10, 20, 20, 30, 30].map(ms));
    let nodes: Vec<_> = staged
        .iter()
        .map(|&(req, at)| match on.handle(at, Input::DecideDue { req }) {
            Some(Output::SendCreate { node, .. }) => node,
            other => panic!("decision: {other:?}"),
        })
        .collect();
    assert_eq!(nodes, direct, "the stage draws from a stream of its own");
}

#[test]
fn the_deadline_runs_from_arrival_through_the_stage() {
    let mut p = placer(stage(ms(50), 1), ms(80));
    let first = p.handle(Duration::ZERO, create(0));
    let second = p.handle(Duration::ZERO, create(1));
    assert_eq!(first, Some(Output::DecideAt { req: 0, at: ms(50) }));
    // Its worker frees at 100 ms, past its 80 ms deadline: it is called back then.
    assert_eq!(second, Some(Output::DecideAt { req: 1, at: ms(80) }));
    match p.handle(ms(80), Input::DecideDue { req: 1 }) {
        Some(Output::Answer(a)) => {
            assert_eq!(a.failure.map(|f| f.kind), Some(FailureKind::TimedOut));
            assert_eq!(a.rpcs, 0);
        }
        other => panic!("{other:?}"),
    }
    // A client that hangs up in the stage is answered, and its due time finds nothing.
    let _ = p.handle(ms(60), create(2));
    assert!(matches!(
        p.handle(ms(70), Input::Cancel { req: 2 }),
        Some(Output::Answer(_))
    ));
    assert_eq!(p.handle(ms(150), Input::DecideDue { req: 2 }), None);
}
