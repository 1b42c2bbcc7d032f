//! What happens to nodes: each replica's periodic sync (ServiceInfo + List into a
//! [`SyncSnapshot`]) and the chaos faults starting and healing.

use mock_node::api::FaultKind;
use mock_node::config::RpcKind;
use mock_node::model::ServiceStatus;

use super::engine::{Engine, Event};
use super::faults::effect_of;
use super::setup::to_duration;
use crate::placement::{NodeMetrics, NodeStatus, SyncSnapshot};

impl Engine<'_> {
    /// Replica `replica` syncs every node, in node order.
    pub(super) fn sync_all(&mut self, replica: u32) {
        let now = to_duration(self.now);
        // An id behind lagged metrics that List no longer shows: the service falls back
        // to the vCPU it recorded for it, which is the workload's for every sandbox.
        let vcpu = self.setup.sandbox.vcpu;
        self.events = self.events.saturating_add(self.nodes.len() as u64);
        let core = &mut self.cores[replica as usize];
        for n in &mut self.nodes {
            if n.effect.killed || n.effect.hung {
                // Connection refused or deadline: E2B marks the node unhealthy locally.
                core.set_status(&n.id, NodeStatus::Unhealthy);
                continue;
            }
            let m = &mut n.model;
            let mut failed = false;
            for rpc in [RpcKind::ServiceInfo, RpcKind::List] {
                let injected = n
                    .effect
                    .errors
                    .and_then(|(p, code)| m.chance(p).then_some(code))
                    .or_else(|| m.sample_failure(rpc));
                failed |= injected.is_some();
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
        let new = &n.effect;
        n.model.set_status(new.status.unwrap_or_default());
        if new.frozen && !old.frozen {
            n.model.freeze_metrics(now);
        } else if !new.frozen && old.frozen {
            n.model.unfreeze_metrics();
        }
        if new.killed && !old.killed {
            n.epoch += 1;
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
