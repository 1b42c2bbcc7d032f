//! The API's drawn times inside and after a decision: the choice read at one time and
//! committed after a lag, a create's success learnt after its return time, a sync's
//! reply applied after its transit; each off (and drawing nothing) at zero.

use std::time::Duration;

use stampede_dist::LatencyDist;

use super::api_stage::{create, ms, placer};
use crate::{
    ApiStage, CreateReply, FailureKind, InfoReply, Input, NodeMetrics, NodeStatus, Output, Placer,
};

fn constant(value: Duration) -> LatencyDist {
    LatencyDist::Constant { value }
}

/// No stage before the decision, and only the given times after it.
fn times(commit_lag: Duration, create_return: Duration, sync_transit: Duration) -> ApiStage {
    ApiStage {
        commit_lag: constant(commit_lag),
        create_return: constant(create_return),
        sync_transit: constant(sync_transit),
        ..ApiStage::off()
    }
}

fn in_flight(p: &Placer) -> usize {
    p.core().nodes().map(|n| n.in_flight()).sum()
}

fn info(allocated: u32) -> InfoReply {
    InfoReply {
        status: NodeStatus::Ready,
        metrics: NodeMetrics {
            cpu_allocated: allocated,
            cpu_count: 16,
            cpu_percent: 0,
            memory_allocated_bytes: 0,
            memory_total_bytes: 1 << 36,
            sandboxes_running: 0,
        },
        ids: Some(Vec::new()),
    }
}

#[test]
fn a_choice_counts_nowhere_until_its_commit() {
    let mut p = placer(times(ms(30), Duration::ZERO, Duration::ZERO), ms(70_000));
    let Some(Output::CommitAt { req: 0, at }) = p.handle(Duration::ZERO, create(0)) else {
        panic!("a lagged decision is called back");
    };
    assert_eq!(at, ms(30));
    assert_eq!(in_flight(&p), 0, "nothing is held between read and commit");
    // Another request decides on the view as it was: nothing moved it.
    assert!(matches!(
        p.handle(ms(1), create(1)),
        Some(Output::CommitAt { req: 1, .. })
    ));
    let Some(Output::SendCreate { node, retry, .. }) = p.handle(at, Input::CommitDue { req: 0 })
    else {
        panic!("the commit sends the Create");
    };
    assert!(!retry);
    assert_eq!(p.core().in_flight(&node), Some(1));
    // A due time that finds nothing waiting gives nothing.
    assert_eq!(p.handle(at, Input::CommitDue { req: 0 }), None);
}

#[test]
fn a_commit_past_the_deadline_times_out_holding_nothing() {
    let mut p = placer(times(ms(500), Duration::ZERO, Duration::ZERO), ms(80));
    let Some(Output::CommitAt { at, .. }) = p.handle(Duration::ZERO, create(0)) else {
        panic!("lagged");
    };
    assert_eq!(at, ms(80), "clamped to the deadline");
    match p.handle(at, Input::CommitDue { req: 0 }) {
        Some(Output::Answer(a)) => {
            assert_eq!(a.failure.map(|f| f.kind), Some(FailureKind::TimedOut));
            assert_eq!(a.rpcs, 0);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(in_flight(&p), 0);
    // A hang-up during the lag is answered; its due time then finds nothing.
    let _ = p.handle(ms(100), create(1));
    assert!(matches!(
        p.handle(ms(110), Input::Cancel { req: 1 }),
        Some(Output::Answer(_))
    ));
    assert_eq!(p.handle(ms(600), Input::CommitDue { req: 1 }), None);
    assert_eq!(in_flight(&p), 0);
}

#[test]
fn a_success_is_learnt_after_its_return_time_holding_the_mark() {
    let mut p = placer(times(Duration::ZERO, ms(40), Duration::ZERO), ms(70_000));
    let Some(Output::SendCreate { node, .. }) = p.handle(Duration::ZERO, create(0)) else {
        panic!("no lag: sent at once");
    };
    let replied = Input::CreateReplied {
        req: 0,
        reply: CreateReply::Created,
    };
    assert_eq!(
        p.handle(ms(3), replied),
        Some(Output::ReplyAt { req: 0, at: ms(43) })
    );
    assert_eq!(p.core().in_flight(&node), Some(1), "still in progress here");
    match p.handle(ms(43), Input::ReplyDue { req: 0 }) {
        Some(Output::Answer(a)) => assert_eq!(a.node.as_ref(), Some(&node)),
        other => panic!("{other:?}"),
    }
    assert_eq!(in_flight(&p), 0);
    // A refusal is learnt at once: the retry is decided then.
    let _ = p.handle(ms(50), create(1));
    let refused = Input::CreateReplied {
        req: 1,
        reply: CreateReply::Refused,
    };
    assert!(matches!(
        p.handle(ms(52), refused),
        Some(Output::SendCreate { retry: true, .. })
    ));
}

#[test]
fn a_sync_reply_applies_after_its_transit_in_the_order_built() {
    let mut p = placer(times(Duration::ZERO, Duration::ZERO, ms(10)), ms(70_000));
    // The set-up's syncs were in transit too: they arrive first.
    for i in 0..6 {
        let node = format!("node-{i}").as_str().into();
        assert_eq!(p.handle(ms(10), Input::SyncArrived { node }), None);
    }
    let node: crate::NodeId = "node-5".into();
    let before = p.core().node(&node).map(|n| n.metrics().cpu_allocated);
    let sync = |allocated| Input::Synced {
        node: node.clone(),
        info: info(allocated),
        listed: Some(Vec::new()),
    };
    assert_eq!(
        p.handle(ms(100), sync(7)),
        Some(Output::SyncAt {
            node: node.clone(),
            at: ms(110)
        })
    );
    assert_eq!(
        p.core().node(&node).map(|n| n.metrics().cpu_allocated),
        before,
        "not applied in transit"
    );
    // A second reply built before the first arrived arrives after it.
    assert!(matches!(p.handle(ms(105), sync(9)), Some(Output::SyncAt { at, .. }) if at == ms(115)));
    let arrived = Input::SyncArrived { node: node.clone() };
    assert_eq!(p.handle(ms(110), arrived.clone()), None);
    assert_eq!(
        p.core().node(&node).map(|n| n.metrics().cpu_allocated),
        Some(7)
    );
    assert_eq!(p.handle(ms(115), arrived.clone()), None);
    assert_eq!(
        p.core().node(&node).map(|n| n.metrics().cpu_allocated),
        Some(9)
    );
    // Nothing in transit: an arrival changes nothing.
    assert_eq!(p.handle(ms(120), arrived), None);
}

#[test]
fn the_lag_draws_from_a_stream_of_its_own() {
    let lag = ApiStage {
        commit_lag: LatencyDist::Uniform {
            min: ms(1),
            max: ms(50),
        },
        ..ApiStage::off()
    };
    let mut off = placer(ApiStage::off(), ms(70_000));
    let mut on = placer(lag, ms(70_000));
    let mut lags = Vec::new();
    for req in 0..20 {
        let Some(Output::SendCreate { node: direct, .. }) = off.handle(Duration::ZERO, create(req))
        else {
            panic!("off sends at once");
        };
        let Some(Output::CommitAt { at, .. }) = on.handle(Duration::ZERO, create(req)) else {
            panic!("on lags");
        };
        lags.push(at);
        // Committed before the next decision: the same view, so the same draws.
        let Some(Output::SendCreate { node, .. }) = on.handle(at, Input::CommitDue { req }) else {
            panic!("committed");
        };
        assert_eq!(node, direct);
    }
    assert!(lags.iter().any(|l| *l != lags[0]), "the lag is drawn");
}
