//! The effect of the faults in force on one node, and its edges: what changes on the
//! node when a fault starts or heals.
//!
//! Pure (no clock, no I/O): the fleet's fault book and the simulator both recompute a
//! node's [`FaultEffect`] with [`FaultEffect::add`] and apply the change with
//! [`NodeModel::fault_edges`], then do what it returns to the node's connections.

use std::time::Duration;

use crate::config::FailureCode;
use crate::fault::FaultKind;
use crate::model::{NodeModel, ServiceStatus};

/// The effect of every fault in force on one node, recomputed whenever one changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultEffect {
    /// Listener closed.
    pub killed: bool,
    /// RPCs never answered.
    pub hung: bool,
    /// Added latency per RPC.
    pub slow: Option<Duration>,
    /// Probability and code of injected errors.
    pub errors: Option<(f64, FailureCode)>,
    /// Every create refused.
    pub exhaust: bool,
    /// ServiceInfo frozen.
    pub frozen: bool,
    /// Reported status override.
    pub status: Option<ServiceStatus>,
    /// Ids of the faults in force.
    pub fault_ids: Vec<u64>,
}

impl FaultEffect {
    /// Adds fault `id` of `kind`; a later fault wins on conflicts. The one rule both
    /// the fleet's fault book and the simulator apply.
    pub fn add(&mut self, id: u64, kind: FaultKind) {
        self.fault_ids.push(id);
        match kind {
            FaultKind::Kill => self.killed = true,
            FaultKind::Hang => self.hung = true,
            FaultKind::Slow { latency } => self.slow = Some(latency),
            FaultKind::Errors { probability, code } => self.errors = Some((probability, code)),
            FaultKind::Exhaust => self.exhaust = true,
            FaultKind::FreezeMetrics => self.frozen = true,
            FaultKind::Status { status } => self.status = Some(status),
            FaultKind::Restart => {}
        }
    }
}

/// What a fault edge asks of the node's connections, which the model does not own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// Nothing changes.
    Keep,
    /// A kill started: close the listener and reset every connection.
    Close,
    /// A kill healed: listen again.
    Reopen,
}

impl NodeModel {
    /// Applies the change of fault effect from `old` to `new` at `now`: the reported
    /// status, the metrics freeze starting or ending. Returns what the driver must do to
    /// the node's listener (a kill starting or healing). The `hang`, `slow`, `errors`
    /// and `exhaust` effects have no edge: the [gate](crate::gate) reads them per RPC.
    pub fn fault_edges(&mut self, old: &FaultEffect, new: &FaultEffect, now: Duration) -> Listener {
        self.set_status(new.status.unwrap_or_default());
        if new.frozen && !old.frozen {
            self.freeze_metrics(now);
        } else if !new.frozen && old.frozen {
            self.unfreeze_metrics();
        }
        match (old.killed, new.killed) {
            (false, true) => Listener::Close,
            (true, false) => Listener::Reopen,
            _ => Listener::Keep,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NodeSpec;

    fn node() -> NodeModel {
        NodeModel::new("node-00".into(), NodeSpec::default(), 1)
    }

    #[test]
    fn kill_edges_close_then_reopen_and_nothing_else_touches_the_listener() {
        let mut m = node();
        let none = FaultEffect::default();
        let killed = FaultEffect {
            killed: true,
            ..FaultEffect::default()
        };
        let t = Duration::from_secs(1);
        assert_eq!(m.fault_edges(&none, &killed, t), Listener::Close);
        assert_eq!(m.fault_edges(&killed, &killed, t), Listener::Keep);
        assert_eq!(m.fault_edges(&killed, &none, t), Listener::Reopen);
        let hung = FaultEffect {
            hung: true,
            slow: Some(Duration::from_millis(5)),
            exhaust: true,
            ..FaultEffect::default()
        };
        assert_eq!(m.fault_edges(&none, &hung, t), Listener::Keep);
    }

    #[test]
    fn status_follows_the_effect_and_healing_restores_healthy() {
        let mut m = node();
        let none = FaultEffect::default();
        let draining = FaultEffect {
            status: Some(ServiceStatus::Draining),
            ..FaultEffect::default()
        };
        m.fault_edges(&none, &draining, Duration::ZERO);
        assert_eq!(m.status(), ServiceStatus::Draining);
        m.fault_edges(&draining, &none, Duration::ZERO);
        assert_eq!(m.status(), ServiceStatus::Healthy);
    }

    #[test]
    fn freeze_starts_and_ends_on_its_edges_only() {
        let mut m = node();
        let none = FaultEffect::default();
        let frozen = FaultEffect {
            frozen: true,
            ..FaultEffect::default()
        };
        m.fault_edges(&none, &frozen, Duration::ZERO);
        assert!(m.metrics_frozen());
        m.fault_edges(&frozen, &frozen, Duration::from_secs(1));
        assert!(m.metrics_frozen());
        m.fault_edges(&frozen, &none, Duration::from_secs(2));
        assert!(!m.metrics_frozen());
    }
}
