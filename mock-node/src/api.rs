//! JSON types of the admin HTTP API, shared with stampede's collector and chaos code.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

pub use crate::config::FailureCode;
pub use stampede_node_model::fault::{FaultKind, FaultName, FaultParamError, FaultParams};
pub use stampede_node_model::snapshot::ServiceStatus;

/// `POST /faults` body: `{"kind": "slow", "nodes": ["node-03"], "duration": "10s", "latency": "200ms"}`.
///
/// Unknown fields are refused (a misspelt `durration` would otherwise make a fault that
/// never heals); durations and latencies are at most
/// [`MAX_FAULT_DURATION`](crate::faults::MAX_FAULT_DURATION).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "FaultRequestWire", into = "FaultRequestWire")]
pub struct FaultRequest {
    /// What to do, with its parameters (flattened into the body on the wire).
    pub kind: FaultKind,
    /// Node ids it applies to (at least one).
    pub nodes: Vec<String>,
    /// Heals itself after this long; absent = until `DELETE /faults/{id}`.
    pub duration: Option<Duration>,
}

/// [`FaultRequest`] as the wire carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultRequestWire {
    kind: FaultName,
    nodes: Vec<String>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    duration: Option<Duration>,
    #[serde(flatten)]
    params: FaultParams,
}

impl TryFrom<FaultRequestWire> for FaultRequest {
    type Error = FaultParamError;
    fn try_from(w: FaultRequestWire) -> Result<Self, Self::Error> {
        Ok(FaultRequest {
            kind: FaultKind::from_wire(w.kind, &w.params)?,
            nodes: w.nodes,
            duration: w.duration,
        })
    }
}

impl From<FaultRequest> for FaultRequestWire {
    fn from(r: FaultRequest) -> Self {
        FaultRequestWire {
            kind: r.kind.name(),
            nodes: r.nodes,
            duration: r.duration,
            params: r.kind.params(),
        }
    }
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
#[serde(try_from = "FaultInfoWire", into = "FaultInfoWire")]
pub struct FaultInfo {
    /// Fault id.
    pub id: u64,
    /// Kind, with its parameters (flattened into the object on the wire).
    pub kind: FaultKind,
    /// Target node ids.
    pub nodes: Vec<String>,
    /// When it was applied.
    pub applied_at: SystemTime,
    /// When it heals by itself, if it has a duration.
    pub expires_at: Option<SystemTime>,
    /// Whether it is still in force.
    pub active: bool,
    /// Why the last attempt to heal it failed, while it is still in force because of
    /// that (a `kill` whose address was taken meanwhile); the heal is retried.
    pub heal_error: Option<String>,
}

/// [`FaultInfo`] as the wire carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct FaultInfoWire {
    id: u64,
    kind: FaultName,
    nodes: Vec<String>,
    #[serde(flatten)]
    params: FaultParams,
    #[serde(with = "humantime_serde")]
    applied_at: SystemTime,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    expires_at: Option<SystemTime>,
    active: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    heal_error: Option<String>,
}

impl TryFrom<FaultInfoWire> for FaultInfo {
    type Error = FaultParamError;
    fn try_from(w: FaultInfoWire) -> Result<Self, Self::Error> {
        Ok(FaultInfo {
            id: w.id,
            kind: FaultKind::from_wire(w.kind, &w.params)?,
            nodes: w.nodes,
            applied_at: w.applied_at,
            expires_at: w.expires_at,
            active: w.active,
            heal_error: w.heal_error,
        })
    }
}

impl From<FaultInfo> for FaultInfoWire {
    fn from(f: FaultInfo) -> Self {
        FaultInfoWire {
            id: f.id,
            kind: f.kind.name(),
            nodes: f.nodes,
            params: f.kind.params(),
            applied_at: f.applied_at,
            expires_at: f.expires_at,
            active: f.active,
            heal_error: f.heal_error,
        }
    }
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
    /// The seed the fleet was built from ([`crate::config::ClusterConfig::fleet_seed`]);
    /// absent from older fleets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet_seed: Option<u64>,
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
    /// Calls waiting for a starting slot (Creates from a snapshot, Checkpoints).
    #[serde(default)]
    pub waiting_for_slot: u64,
    /// Creates that stored a sandbox.
    pub creates_ok: u64,
    /// Creates refused, by reason.
    pub creates_rejected: BTreeMap<String, u64>,
    /// Creates failed (injected errors, aborted, lost to a restart).
    pub creates_failed: u64,
    /// Deletes and pauses that removed a sandbox.
    pub deletes_ok: u64,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_json_of_a_typed_fault_is_the_flat_one() {
        let req = FaultRequest {
            kind: FaultKind::Slow {
                latency: Duration::from_millis(200),
            },
            nodes: vec!["node-03".into()],
            duration: Some(Duration::from_secs(10)),
        };
        let json = serde_json::to_value(&req).expect("serialises");
        assert_eq!(
            json,
            serde_json::json!({"kind": "slow", "nodes": ["node-03"], "duration": "10s", "latency": "200ms"})
        );
        let back: FaultRequest = serde_json::from_value(json).expect("parses");
        assert_eq!(back, req);
        let errors: FaultRequest = serde_json::from_value(
            serde_json::json!({"kind": "errors", "nodes": ["n"], "probability": 0.5}),
        )
        .expect("parses");
        assert_eq!(
            errors.kind,
            FaultKind::Errors {
                probability: 0.5,
                code: FailureCode::Unavailable
            },
            "code defaults to unavailable"
        );
    }

    #[test]
    fn a_missing_or_out_of_range_parameter_is_refused_naming_it() {
        for (body, param) in [
            (
                serde_json::json!({"kind": "slow", "nodes": ["n"]}),
                "latency",
            ),
            (
                serde_json::json!({"kind": "errors", "nodes": ["n"], "probability": 1.5}),
                "probability",
            ),
            (
                serde_json::json!({"kind": "status", "nodes": ["n"]}),
                "status",
            ),
        ] {
            let e = serde_json::from_value::<FaultRequest>(body.clone()).unwrap_err();
            assert!(e.to_string().contains(param), "{body}: {e}");
        }
        for name in FaultName::ALL {
            let p = FaultParams {
                latency: Some(Duration::from_millis(1)),
                probability: Some(0.1),
                code: None,
                status: Some(ServiceStatus::Standby),
            };
            let kind = FaultKind::from_wire(name, &p).expect("every kind with its params");
            assert_eq!(kind.name(), name);
            assert_eq!(FaultKind::from_wire(name, &kind.params()), Ok(kind));
        }
    }
}
