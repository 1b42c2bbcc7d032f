//! The status rule of E2B's `packages/api/internal/orchestrator/nodemanager/status.go`
//! (`StatusInfo`, `CanAcceptNewRequests`): the channel state overrides a reported
//! `ready` only, and only `ready` is routable.

use std::collections::BTreeSet;

use crate::{
    node_status, routable, ChannelState, NodeMetrics, NodeStatus, PlacementConfig, PlacementCore,
    SyncSnapshot,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const STATUSES: [NodeStatus; 5] = [
    NodeStatus::Ready,
    NodeStatus::Draining,
    NodeStatus::Connecting,
    NodeStatus::Unhealthy,
    NodeStatus::Standby,
];

/// E2B's table: Ready + Connecting/TransientFailure -> connecting, Ready + Shutdown ->
/// unhealthy, Ready + Idle/Ready -> ready; every other reported status stands.
#[test]
fn channel_state_overrides_a_reported_ready_only() {
    use ChannelState::*;
    for (channel, expected) in [
        (Idle, NodeStatus::Ready),
        (Ready, NodeStatus::Ready),
        (Connecting, NodeStatus::Connecting),
        (TransientFailure, NodeStatus::Connecting),
        (Shutdown, NodeStatus::Unhealthy),
    ] {
        assert_eq!(
            node_status(NodeStatus::Ready, channel),
            expected,
            "{channel:?}"
        );
    }
    for reported in STATUSES.into_iter().filter(|s| *s != NodeStatus::Ready) {
        for channel in [Idle, Ready, Connecting, TransientFailure, Shutdown] {
            assert_eq!(node_status(reported, channel), reported);
        }
    }
    for s in STATUSES {
        assert_eq!(routable(s), s == NodeStatus::Ready, "{s:?}");
    }
}

/// The core routes by the derived status: a synced, ready node whose channel is in
/// TransientFailure is never chosen, and is chosen again once the channel is Ready.
#[test]
fn the_core_does_not_route_to_a_node_whose_channel_failed() {
    let mut core = PlacementCore::new(PlacementConfig::default());
    for id in ["a", "b"] {
        core.add_node(id);
        core.apply_sync(
            id,
            SyncSnapshot {
                status: NodeStatus::Ready,
                metrics: NodeMetrics {
                    cpu_count: 16,
                    ..NodeMetrics::default()
                },
                sandboxes: None,
                listed_now: None,
            },
        );
    }
    core.set_channel("a", ChannelState::TransientFailure);
    assert_eq!(core.node("a").unwrap().status(), NodeStatus::Connecting);
    assert_eq!(core.node("a").unwrap().reported_status(), NodeStatus::Ready);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for _ in 0..50 {
        assert_eq!(
            core.choose(1, &BTreeSet::new(), &mut rng).as_deref(),
            Some("b")
        );
    }
    core.set_channel("a", ChannelState::Ready);
    let picks: BTreeSet<_> = (0..50)
        .filter_map(|_| core.choose(1, &BTreeSet::new(), &mut rng))
        .collect();
    assert!(picks.contains("a"), "{picks:?}");
}
