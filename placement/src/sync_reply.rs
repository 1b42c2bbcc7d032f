//! A node's sync answer (`InfoService/ServiceInfo`, then `SandboxService/List`) turned
//! into the [`SyncSnapshot`] the core applies: decided here once, for the service (which
//! reads it off the wire) and the simulator (which reads it off the node model through
//! the same wire message).

use serde::{Deserialize, Serialize};
use stampede_proto::{ServiceInfoResponse, ServiceInfoStatus};

use super::accounting::NodeAccounting;
use super::node_view::{NodeMetrics, NodeStatus, SyncSnapshot};

/// E2B's status mapping of `service_status`: Healthy is ready, the others by name, and
/// anything unknown is unhealthy (`nodemanager/node.go`).
pub fn status_from_wire(raw: i32) -> NodeStatus {
    match ServiceInfoStatus::try_from(raw) {
        Ok(ServiceInfoStatus::Healthy) => NodeStatus::Ready,
        Ok(ServiceInfoStatus::Draining) => NodeStatus::Draining,
        Ok(ServiceInfoStatus::Standby) => NodeStatus::Standby,
        Ok(ServiceInfoStatus::Unhealthy) | Err(_) => NodeStatus::Unhealthy,
    }
}

/// What a `ServiceInfo` answer tells the placement: the status, the metrics and, with
/// the stampede extension, the ids behind those metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InfoReply {
    /// `service_status`, mapped ([`status_from_wire`]).
    pub status: NodeStatus,
    /// The `metric_*` fields.
    pub metrics: NodeMetrics,
    /// `stampede_sandbox_ids` (absent from E2B's nodes).
    pub ids: Option<Vec<String>>,
}

impl From<&ServiceInfoResponse> for InfoReply {
    fn from(info: &ServiceInfoResponse) -> Self {
        InfoReply {
            status: status_from_wire(info.service_status),
            metrics: NodeMetrics {
                cpu_allocated: info.metric_cpu_allocated,
                cpu_count: info.metric_cpu_count,
                cpu_percent: info.metric_cpu_percent,
                memory_allocated_bytes: info.metric_memory_allocated_bytes,
                memory_total_bytes: info.metric_memory_total_bytes,
                sandboxes_running: info.metric_sandboxes_running,
            },
            ids: info.stampede_sandbox_ids.as_ref().map(|l| l.ids.clone()),
        }
    }
}

/// One sandbox of a `List` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    /// Sandbox id.
    pub id: String,
    /// Its vCPU.
    pub vcpu: u32,
}

/// The core's view of one sync. With the extension, the ids are those behind the metrics
/// (consistent with them, possibly lagged) and their vCPU comes from `List`, else from
/// what this instance recorded for the id (`known`), else 0; without it, the ids are
/// `List`'s. `listed` is `None` when the `List` after the `ServiceInfo` failed.
pub(crate) fn snapshot(
    info: &InfoReply,
    listed: Option<&[Listed]>,
    known: &NodeAccounting,
) -> SyncSnapshot {
    let sandboxes = match (&info.ids, listed) {
        (Some(ids), listed) => {
            let vcpu_of: std::collections::HashMap<&str, u32, foldhash::fast::RandomState> = listed
                .unwrap_or_default()
                .iter()
                .map(|s| (s.id.as_str(), s.vcpu))
                .collect();
            Some(
                ids.iter()
                    .map(|id| {
                        let vcpu = vcpu_of
                            .get(id.as_str())
                            .copied()
                            .or_else(|| known.known_vcpu(id))
                            .unwrap_or(0);
                        (id.clone(), vcpu)
                    })
                    .collect(),
            )
        }
        (None, Some(l)) => Some(l.iter().map(|s| (s.id.clone(), s.vcpu)).collect()),
        (None, None) => None,
    };
    let listed_now = match (&info.ids, listed) {
        (Some(_), Some(l)) => Some(l.iter().map(|s| s.id.clone()).collect()),
        _ => None,
    };
    SyncSnapshot {
        status: info.status,
        metrics: info.metrics,
        sandboxes,
        listed_now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(ids: Option<&[&str]>) -> InfoReply {
        InfoReply {
            status: NodeStatus::Ready,
            metrics: NodeMetrics {
                cpu_allocated: 6,
                cpu_count: 8,
                ..NodeMetrics::default()
            },
            ids: ids.map(|i| i.iter().map(|s| (*s).to_string()).collect()),
        }
    }

    fn listed(items: &[(&str, u32)]) -> Vec<Listed> {
        items
            .iter()
            .map(|(id, vcpu)| Listed {
                id: (*id).to_string(),
                vcpu: *vcpu,
            })
            .collect()
    }

    #[test]
    fn extension_ids_take_list_vcpu_then_what_was_recorded_then_zero() {
        let mut known = NodeAccounting::default();
        known.create_succeeded("b", 4);
        let l = listed(&[("a", 2)]);
        let s = snapshot(&info(Some(&["a", "b", "c"])), Some(&l), &known);
        assert_eq!(
            s.sandboxes,
            Some(vec![("a".into(), 2), ("b".into(), 4), ("c".into(), 0)])
        );
        assert_eq!(s.listed_now, Some(vec!["a".to_string()]));
    }

    #[test]
    fn without_extension_the_list_is_the_truth_and_a_failed_list_gives_no_ids() {
        let known = NodeAccounting::default();
        let l = listed(&[("a", 2), ("b", 1)]);
        let s = snapshot(&info(None), Some(&l), &known);
        assert_eq!(s.sandboxes, Some(vec![("a".into(), 2), ("b".into(), 1)]));
        assert_eq!(s.listed_now, None);
        assert_eq!(snapshot(&info(None), None, &known).sandboxes, None);
        assert_eq!(s.metrics.cpu_allocated, 6);
    }

    #[test]
    fn statuses_map_as_e2b_does() {
        assert_eq!(
            status_from_wire(ServiceInfoStatus::Healthy as i32),
            NodeStatus::Ready
        );
        assert_eq!(
            status_from_wire(ServiceInfoStatus::Draining as i32),
            NodeStatus::Draining
        );
        assert_eq!(
            status_from_wire(ServiceInfoStatus::Standby as i32),
            NodeStatus::Standby
        );
        assert_eq!(
            status_from_wire(ServiceInfoStatus::Unhealthy as i32),
            NodeStatus::Unhealthy
        );
        assert_eq!(status_from_wire(999), NodeStatus::Unhealthy);
    }
}
