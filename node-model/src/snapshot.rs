//! Plain values a node model hands out: sandboxes, metric snapshots, counters, status.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use stampede_id::Id;

/// A sandbox running on a node. Times are offsets from fleet start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sandbox {
    /// Sandbox id, unique on the node.
    pub sandbox_id: Id,
    /// Template it was created from (echoed back by List).
    pub template_id: Id,
    /// Owning team (echoed back by List).
    pub team_id: Id,
    /// Execution id (echoed back by List).
    pub execution_id: Id,
    /// vCPUs it holds.
    pub vcpu: u32,
    /// Memory it holds, MiB.
    pub ram_mb: u64,
    /// When the create finished.
    pub start: Duration,
    /// When it expires; `None` = never.
    pub end: Option<Duration>,
}

/// A create as the node model sees it (transport-independent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateRequest {
    /// Sandbox id; empty or longer than [`MAX_ID_BYTES`](crate::model::MAX_ID_BYTES) is invalid.
    pub sandbox_id: Id,
    /// Requested vCPUs; must be > 0 and at most the node's `cpu_count`.
    pub vcpu: i64,
    /// Requested memory, MiB; must be > 0 and at most the node's `memory_mib`.
    pub ram_mb: i64,
    /// Expiry, as an offset from fleet start; `None` = never.
    pub end_time: Option<Duration>,
    /// Template id (opaque, at most [`MAX_ID_BYTES`](crate::model::MAX_ID_BYTES)).
    pub template_id: Id,
    /// Team id (opaque, at most [`MAX_ID_BYTES`](crate::model::MAX_ID_BYTES)).
    pub team_id: Id,
    /// Execution id (opaque, at most [`MAX_ID_BYTES`](crate::model::MAX_ID_BYTES)).
    pub execution_id: Id,
}

/// What a node reports about itself (E2B `ServiceInfoStatus`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceStatus {
    /// Accepting work.
    #[default]
    Healthy,
    /// Finishing work, taking none.
    Draining,
    /// Broken.
    Unhealthy,
    /// Idle spare.
    Standby,
}

impl ServiceStatus {
    /// Every status, in the order of the enum.
    pub const ALL: [ServiceStatus; 4] = [
        ServiceStatus::Healthy,
        ServiceStatus::Draining,
        ServiceStatus::Unhealthy,
        ServiceStatus::Standby,
    ];

    /// The `service_status` a `ServiceInfo` answer carries for it.
    pub fn wire(self) -> stampede_proto::ServiceInfoStatus {
        use stampede_proto::ServiceInfoStatus as W;
        match self {
            ServiceStatus::Healthy => W::Healthy,
            ServiceStatus::Draining => W::Draining,
            ServiceStatus::Unhealthy => W::Unhealthy,
            ServiceStatus::Standby => W::Standby,
        }
    }

    /// Lower-case name, as used in JSON and fault parameters.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceStatus::Healthy => "healthy",
            ServiceStatus::Draining => "draining",
            ServiceStatus::Unhealthy => "unhealthy",
            ServiceStatus::Standby => "standby",
        }
    }
}

/// The allocation metrics a node reports through `ServiceInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricsSnapshot {
    /// When the snapshot was taken (offset from fleet start).
    pub taken_at: Duration,
    /// Allocated vCPU: warm-up baseline + running sandboxes.
    pub allocated_vcpu: u32,
    /// vCPUs of the node.
    pub cpu_count: u32,
    /// Simulated CPU use, 0..=100.
    pub cpu_percent: u32,
    /// Memory held by running sandboxes, bytes.
    pub memory_allocated_bytes: u64,
    /// Simulated memory in use, bytes.
    pub memory_used_bytes: u64,
    /// Memory of the node, bytes.
    pub memory_total_bytes: u64,
    /// Running sandboxes.
    pub sandboxes_running: u32,
    /// Ids of the running sandboxes, sorted.
    pub sandbox_ids: Vec<String>,
}

/// What happened to the creates and deletes a node received.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Creates that stored a sandbox.
    pub creates_ok: u64,
    /// Creates refused, by reason (`max_sandboxes`, `max_starting`, `overcommit`, ...).
    pub creates_rejected: BTreeMap<String, u64>,
    /// Creates that failed after admission or by an injected fault.
    pub creates_failed: u64,
    /// Deletes (and pauses) that removed a sandbox.
    pub deletes_ok: u64,
    /// Restarts (each loses every sandbox).
    pub restarts: u64,
}

impl Counters {
    /// Counts `n` creates refused for `reason` (allocates only for a reason not seen yet).
    pub fn count_rejected(&mut self, reason: &str, n: u64) {
        match self.creates_rejected.get_mut(reason) {
            Some(c) => *c += n,
            None => {
                self.creates_rejected.insert(reason.to_string(), n);
            }
        }
    }
}
