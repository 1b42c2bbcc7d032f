//! JSON types of the admin HTTP API, shared with stampede's collector and chaos code.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

pub use crate::config::FailureCode;
pub use crate::snapshot::ServiceStatus;

/// The fault verbs a node accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// Listener closed and connections reset: callers see UNAVAILABLE. Healing re-binds.
    Kill,
    /// Connections accepted, RPCs never answered (until healed).
    Hang,
    /// Every RPC is delayed by `latency`.
    Slow,
    /// Every RPC fails with `code` with `probability`.
    Errors,
    /// Every Create gets ResourceExhausted.
    Exhaust,
    /// ServiceInfo keeps returning the metrics of the fault's start.
    FreezeMetrics,
    /// ServiceInfo reports `status`.
    Status,
    /// Instant crash: every sandbox lost, new `service_id`. Has no duration.
    Restart,
}

impl FaultKind {
    /// The kebab-case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Hang => "hang",
            FaultKind::Slow => "slow",
            FaultKind::Errors => "errors",
            FaultKind::Exhaust => "exhaust",
            FaultKind::FreezeMetrics => "freeze-metrics",
            FaultKind::Status => "status",
            FaultKind::Restart => "restart",
        }
    }
}

/// Parameters of a fault; which ones apply depends on the kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultParams {
    /// `slow`: added latency per RPC, e.g. `"200ms"`.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub latency: Option<Duration>,
    /// `errors`: probability in `[0, 1]` that an RPC fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    /// `errors`: status code returned (default `unavailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<FailureCode>,
    /// `status`: what ServiceInfo reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ServiceStatus>,
}

/// `POST /faults` body: `{"kind": "slow", "nodes": ["node-03"], "duration": "10s", "latency": "200ms"}`.
///
/// Unknown fields are refused (a misspelt `durration` would otherwise make a fault that
/// never heals); durations and latencies are at most
/// [`MAX_FAULT_DURATION`](crate::faults::MAX_FAULT_DURATION).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRequest {
    /// What to do.
    pub kind: FaultKind,
    /// Node ids it applies to (at least one).
    pub nodes: Vec<String>,
    /// Heals itself after this long; absent = until `DELETE /faults/{id}`.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration: Option<Duration>,
    /// Kind-specific parameters, flattened into the body.
    #[serde(flatten)]
    pub params: FaultParams,
}

/// `POST /faults` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCreated {
    /// Id to pass to `DELETE /faults/{id}`.
    pub id: u64,
}

/// One fault as `GET /faults` lists it (healed ones stay listed, inactive, up to
/// [`MAX_HEALED_FAULTS_KEPT`](crate::faults::MAX_HEALED_FAULTS_KEPT)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultInfo {
    /// Fault id.
    pub id: u64,
    /// Kind.
    pub kind: FaultKind,
    /// Target node ids.
    pub nodes: Vec<String>,
    /// Parameters.
    #[serde(flatten)]
    pub params: FaultParams,
    /// When it was applied.
    #[serde(with = "humantime_serde")]
    pub applied_at: SystemTime,
    /// When it heals by itself, if it has a duration.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires_at: Option<SystemTime>,
    /// Whether it is still in force.
    pub active: bool,
}

/// `GET /faults` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultsResponse {
    /// Every fault in force and the most recently healed ones, by id.
    pub faults: Vec<FaultInfo>,
}

/// `GET /nodes` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodesResponse {
    /// One entry per node, in node order.
    pub nodes: Vec<NodeTruth>,
}

/// The ground truth of one node (never lagged, never frozen).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeTruth {
    /// Node id.
    pub id: String,
    /// Address of its gRPC endpoint.
    pub grpc_addr: SocketAddr,
    /// `healthy` | `draining` | `unhealthy` | `standby` as ServiceInfo reports it, or
    /// `killed` while a kill fault holds the listener closed.
    pub status: String,
    /// Current incarnation id (changes at restart).
    pub service_id: String,
    /// vCPUs of the node.
    pub cpu_count: u32,
    /// Running sandboxes.
    pub sandbox_count: u64,
    /// Allocated vCPU: baseline + running sandboxes.
    pub allocated_vcpu: u64,
    /// Warm-up baseline included in `allocated_vcpu`.
    pub baseline_vcpu: u64,
    /// Memory of running sandboxes, MiB.
    pub allocated_memory_mib: u64,
    /// Creates in progress.
    pub starting: u64,
    /// Creates that stored a sandbox.
    pub creates_ok: u64,
    /// Creates refused, by reason.
    pub creates_rejected: BTreeMap<String, u64>,
    /// Creates failed (injected errors, aborted, lost to a restart).
    pub creates_failed: u64,
    /// Deletes and pauses that removed a sandbox.
    pub deletes_ok: u64,
    /// Sandboxes expired at their end time.
    pub expired: u64,
    /// Restarts so far.
    pub restarts: u64,
    /// Ids of the faults in force on this node, as strings.
    pub active_faults: Vec<String>,
    /// Ids of the running sandboxes, sorted.
    pub sandbox_ids: Vec<String>,
}

/// Error body of every non-2xx admin answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    /// What went wrong.
    pub error: String,
}
