//! What happens to nodes: each replica's periodic sync (ServiceInfo + List into a
//! [`SyncSnapshot`]) and the chaos faults starting and healing.

use stampede_node_model::config::RpcKind;
use stampede_node_model::effect::Listener;
use stampede_node_model::fault::FaultKind;
use stampede_node_model::gate::{on_send, Arrival, Sent};

use super::create::hang_heals_at;
use super::engine::{Engine, Event};
use super::faults::effect_of;
use super::queue::Nanos;
use super::setup::{to_duration, to_nanos};
use crate::placement::{
    status_from_wire, ChannelState, InfoReply, Input, Listed, NodeMetrics, Output,
};

/// How long one node's sync cycle may take: E2B bounds it by `cacheSyncTime`, 20 s
/// (`packages/api/internal/orchestrator/cache.go`); the reference service's cycle is
/// its 4 tries of 5 s (`SYNC_MAX_RETRIES` x the default `rpc_timeout`), also 20 s.
pub(super) const SYNC_CYCLE_DEADLINE: Nanos = 20_000_000_000;

impl Engine<'_> {
    /// Replica `replica` syncs every node, in node order.
    pub(super) fn sync_all(&mut self, replica: u32) {
        let now = to_duration(self.now);
        self.events = self.events.saturating_add(self.nodes.len() as u64);
        let placer = &mut self.placers[replica as usize];
        let mut failing = Vec::new();
        let mut arriving = Vec::new();
        for (k, n) in self.nodes.iter_mut().enumerate() {
            let sent = on_send(&n.effect);
            if sent == Sent::Refused {
                // The reconnect is refused (TransientFailure) and the cycle fails: E2B
                // marks the node unhealthy locally.
                let state = ChannelState::TransientFailure;
                placer.handle(now, channel(&n.id, state));
                placer.handle(now, sync_failed(&n.id));
                continue;
            }
            // The sync's RPCs go through: the channel is (or gets) connected.
            placer.handle(now, channel(&n.id, ChannelState::Ready));
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
                placer.handle(now, sync_failed(&n.id));
                continue;
            }
            // What the node's ServiceInfo and List answer, read as the service reads
            // them off the wire.
            let snap = m.metrics(now);
            let info = InfoReply {
                status: status_from_wire(m.status().wire() as i32),
                metrics: NodeMetrics {
                    cpu_allocated: snap.allocated_vcpu,
                    cpu_count: snap.cpu_count,
                    cpu_percent: snap.cpu_percent,
                    memory_allocated_bytes: snap.memory_allocated_bytes,
                    memory_total_bytes: snap.memory_total_bytes,
                    sandboxes_running: snap.sandboxes_running,
                },
                ids: Some(snap.sandbox_ids),
            };
            let listed = m
                .list(now)
                .into_iter()
                .map(|s| Listed {
                    id: s.sandbox_id.to_string(),
                    vcpu: s.vcpu,
                })
                .collect();
            let input = Input::Synced {
                node: n.id.clone(),
                info,
                listed: Some(listed),
            };
            // With a transit, the reply built now is applied when it reaches the placer.
            if let Some(Output::SyncAt { at, .. }) = placer.handle(now, input) {
                arriving.push((k as u32, to_nanos(at)));
            }
        }
        for (node, end) in failing {
            self.queue.push(end, Event::SyncCycleEnd { replica, node });
        }
        for (node, at) in arriving {
            self.queue.push(at, Event::SyncArrive { replica, node });
        }
    }

    /// `replica`'s oldest sync reply in transit from `node` reaches its placer.
    pub(super) fn sync_arrive(&mut self, replica: u32, node: u32) {
        let (Some(n), Some(placer)) = (
            self.nodes.get(node as usize),
            self.placers.get_mut(replica as usize),
        ) else {
            return;
        };
        let input = Input::SyncArrived { node: n.id.clone() };
        placer.handle(to_duration(self.now), input);
    }

    /// The sync cycle `replica` began on the hung node `node` ran out of time; if the
    /// node still hangs, the cycle failed and the node is unhealthy for that replica.
    pub(super) fn sync_cycle_end(&mut self, replica: u32, node: u32) {
        let now = to_duration(self.now);
        let Some(n) = self.nodes.get(node as usize) else {
            return;
        };
        if n.effect.hung {
            if let Some(placer) = self.placers.get_mut(replica as usize) {
                placer.handle(now, sync_failed(&n.id));
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
            _ if fault.kind.is_instant() => self.tally.fault_healed(f, self.now),
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
            for placer in &mut self.placers {
                placer.handle(now, channel(&n.id, ChannelState::Idle));
            }
        }
    }
}

fn channel(node: &str, state: ChannelState) -> Input {
    Input::Channel {
        node: node.into(),
        state,
    }
}

/// A failed cycle of a node that always answered before (every replica syncs at 0).
fn sync_failed(node: &str) -> Input {
    Input::SyncFailed {
        node: node.into(),
        answered: true,
    }
}
