//! What happens to nodes: each replica's periodic sync (ServiceInfo + List into a
//! [`SyncSnapshot`]) and the chaos faults starting and healing.

use mock_node::api::FaultKind;
use mock_node::config::RpcKind;
use mock_node::effect::Listener;
use mock_node::gate::{on_send, Arrival, Sent};
use mock_node::model::ServiceStatus;

use super::create::hang_heals_at;
use super::engine::{Engine, Event};
use super::faults::effect_of;
use super::queue::Nanos;
use super::setup::to_duration;
use crate::placement::{ChannelState, NodeMetrics, NodeStatus, SyncSnapshot};

/// How long one node's sync cycle may take: E2B bounds it by `cacheSyncTime`, 20 s
/// (`packages/api/internal/orchestrator/cache.go`); the reference service's cycle is
/// its 4 tries of 5 s (`SYNC_MAX_RETRIES` x the default `rpc_timeout`), also 20 s.
pub(super) const SYNC_CYCLE_DEADLINE: Nanos = 20_000_000_000;

impl Engine<'_> {
    /// Replica `replica` syncs every node, in node order.
    pub(super) fn sync_all(&mut self, replica: u32) {
        let now = to_duration(self.now);
        // An id behind lagged metrics that List no longer shows: the service falls back
        // to the vCPU it recorded for it, which is the workload's for every sandbox.
        let vcpu = self.setup.sandbox.vcpu;
        self.events = self.events.saturating_add(self.nodes.len() as u64);
        let core = &mut self.cores[replica as usize];
        let mut failing = Vec::new();
        for (k, n) in self.nodes.iter_mut().enumerate() {
            let sent = on_send(&n.effect);
            if sent == Sent::Refused {
                // The reconnect is refused (TransientFailure) and the cycle fails: E2B
                // marks the node unhealthy locally.
                core.set_channel(&n.id, ChannelState::TransientFailure);
                core.set_status(&n.id, NodeStatus::Unhealthy);
                continue;
            }
            // The sync's RPCs go through: the channel is (or gets) connected.
            core.set_channel(&n.id, ChannelState::Ready);
            if sent == Sent::Held {
                // The connection stays up and the cycle's RPCs are held: the cycle
                // fails at its deadline (then E2B marks the node unhealthy locally)
                // unless the hang heals first and the held RPCs are answered.
                let end = self.now.saturating_add(SYNC_CYCLE_DEADLINE);
                if hang_heals_at(&self.setup.faults, &n.active) >= end {
                    failing.push((k as u32, end));
                }
                continue;
            }
            let m = &mut n.model;
            // Both RPCs are sent (and drawn for) whatever the first answers; a `slow`
            // delay is not modelled for them.
            let mut failed = false;
            for rpc in [RpcKind::ServiceInfo, RpcKind::List] {
                failed |= m.gate(&n.effect, rpc) != Arrival::Passed;
            }
            if failed {
                core.set_status(&n.id, NodeStatus::Unhealthy);
                continue;
            }
            // Like the reference service: ids behind the (possibly lagged or frozen)
            // metrics from ServiceInfo's extension, the live ids from List.
            let snap = m.metrics(now);
            let live: std::collections::BTreeMap<String, u32> = m
                .list(now)
                .into_iter()
                .map(|s| (s.sandbox_id, s.vcpu))
                .collect();
            let sandboxes = snap
                .sandbox_ids
                .iter()
                .map(|id| (id.clone(), live.get(id).copied().unwrap_or(vcpu)))
                .collect();
            let listed_now = Some(live.into_keys().collect());
            let snapshot = SyncSnapshot {
                status: node_status(m.status()),
                metrics: NodeMetrics {
                    cpu_allocated: snap.allocated_vcpu,
                    cpu_count: snap.cpu_count,
                    cpu_percent: snap.cpu_percent,
                    memory_allocated_bytes: snap.memory_allocated_bytes,
                    memory_total_bytes: snap.memory_total_bytes,
                    sandboxes_running: snap.sandboxes_running,
                },
                sandboxes: Some(sandboxes),
                listed_now,
            };
            core.apply_sync(&n.id, snapshot);
        }
        for (node, end) in failing {
            self.queue.push(end, Event::SyncCycleEnd { replica, node });
        }
    }

    /// The sync cycle `replica` began on the hung node `node` ran out of time; if the
    /// node still hangs, the cycle failed and the node is unhealthy for that replica.
    pub(super) fn sync_cycle_end(&mut self, replica: u32, node: u32) {
        let Some(n) = self.nodes.get(node as usize) else {
            return;
        };
        if n.effect.hung {
            if let Some(core) = self.cores.get_mut(replica as usize) {
                core.set_status(&n.id, NodeStatus::Unhealthy);
            }
        }
    }

    /// Chaos step `f` starts on its nodes.
    pub(super) fn fault_start(&mut self, f: usize) {
        let setup = self.setup;
        let Some(fault) = setup.faults.get(f) else {
            return;
        };
        self.tally.fault_applied(f, self.now);
        let now = to_duration(self.now);
        for &k in &fault.nodes {
            let n = &mut self.nodes[k as usize];
            if fault.kind == FaultKind::Restart {
                n.model.restart(now);
                continue;
            }

            n.active.push(f);
            self.refresh(k as usize);
        }
        match fault.until {
            // An instant fault: its window closes where it opens.
            _ if fault.kind == FaultKind::Restart => self.tally.fault_healed(f, self.now),
            Some(until) => self.queue.push(until, Event::FaultEnd { fault: f as u32 }),
            None => {}
        }
    }

    /// Chaos step `f` heals.
    pub(super) fn fault_end(&mut self, f: usize) {
        let setup = self.setup;
        let Some(fault) = setup.faults.get(f) else {
            return;
        };
        self.tally.fault_healed(f, self.now);
        for &k in &fault.nodes {
            self.nodes[k as usize].active.retain(|&a| a != f);
            self.refresh(k as usize);
        }
    }

    /// Recompute node `k`'s fault effect and apply its edges, as a mock node does.
    fn refresh(&mut self, k: usize) {
        let now = to_duration(self.now);
        let setup = self.setup;
        let n = &mut self.nodes[k];
        let new = effect_of(&setup.faults, &n.active);
        let old = std::mem::replace(&mut n.effect, new);
        if n.model.fault_edges(&old, &n.effect, now) == Listener::Close {
            n.epoch += 1;
            // Connections reset: each replica's channel goes Idle at once (grpc-go's
            // pick_first on a lost connection); the node stays `ready` until an RPC
            // tries to reconnect (a create or a sync).
            for core in &mut self.cores {
                core.set_channel(&n.id, ChannelState::Idle);
            }
        }
    }
}

/// `ServiceInfoStatus` as E2B's API maps it to a node status.
fn node_status(s: ServiceStatus) -> NodeStatus {
    match s {
        ServiceStatus::Healthy => NodeStatus::Ready,
        ServiceStatus::Draining => NodeStatus::Draining,
        ServiceStatus::Unhealthy => NodeStatus::Unhealthy,
        ServiceStatus::Standby => NodeStatus::Standby,
    }
}
