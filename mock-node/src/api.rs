//! JSON types of the admin HTTP API, shared with stampede's collector and chaos code.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

pub use crate::config::FailureCode;
pub use crate::snapshot::ServiceStatus;

/// A fault a node accepts, with its parameters: the one typed form the admin API, the
/// fleet's fault book, stampede's profile and chaos client and the simulator all use.
/// On the wire it is a `kind` name ([`FaultName`]) and flat parameters ([`FaultParams`]);
/// [`FaultKind::from_wire`] is the one check of those.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FaultKind {
    /// Listener closed and connections reset: callers see UNAVAILABLE. Healing re-binds.
    Kill,
    /// Connections accepted, RPCs never answered (until healed).
    Hang,
    /// Every RPC is delayed by `latency`.
    Slow {
        /// Added latency per RPC.
        latency: Duration,
    },
    /// Every RPC fails with `code` with `probability`.
    Errors {
        /// Probability in `[0, 1]` that an RPC fails.
        probability: f64,
        /// Status code returned.
        code: FailureCode,
    },
    /// Every Create gets ResourceExhausted.
    Exhaust,
    /// ServiceInfo keeps returning the metrics of the fault's start.
    FreezeMetrics,
    /// ServiceInfo reports `status`.
    Status {
        /// What ServiceInfo reports.
        status: ServiceStatus,
    },
    /// Instant crash: every sandbox lost, new `service_id`. Has no duration.
    Restart,
}

/// The `kind` of a fault on the wire: [`FaultKind`] without its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultName {
    /// [`FaultKind::Kill`].
    Kill,
    /// [`FaultKind::Hang`].
    Hang,
    /// [`FaultKind::Slow`].
    Slow,
    /// [`FaultKind::Errors`].
    Errors,
    /// [`FaultKind::Exhaust`].
    Exhaust,
    /// [`FaultKind::FreezeMetrics`].
    FreezeMetrics,
    /// [`FaultKind::Status`].
    Status,
    /// [`FaultKind::Restart`].
    Restart,
}

impl FaultName {
    /// Every name, in declaration order.
    pub const ALL: [FaultName; 8] = [
        FaultName::Kill,
        FaultName::Hang,
        FaultName::Slow,
        FaultName::Errors,
        FaultName::Exhaust,
        FaultName::FreezeMetrics,
        FaultName::Status,
        FaultName::Restart,
    ];

    /// The kebab-case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultName::Kill => "kill",
            FaultName::Hang => "hang",
            FaultName::Slow => "slow",
            FaultName::Errors => "errors",
            FaultName::Exhaust => "exhaust",
            FaultName::FreezeMetrics => "freeze-metrics",
            FaultName::Status => "status",
            FaultName::Restart => "restart",
        }
    }
}

/// A required parameter of a fault is missing or out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FaultParamError {
    /// The parameter (`latency`, `probability`, `status`).
    pub param: &'static str,
    /// What is wrong.
    pub message: &'static str,
}

impl FaultKind {
    /// The fault's `kind` name.
    pub fn name(self) -> FaultName {
        match self {
            FaultKind::Kill => FaultName::Kill,
            FaultKind::Hang => FaultName::Hang,
            FaultKind::Slow { .. } => FaultName::Slow,
            FaultKind::Errors { .. } => FaultName::Errors,
            FaultKind::Exhaust => FaultName::Exhaust,
            FaultKind::FreezeMetrics => FaultName::FreezeMetrics,
            FaultKind::Status { .. } => FaultName::Status,
            FaultKind::Restart => FaultName::Restart,
        }
    }

    /// The kebab-case name used on the wire.
    pub fn as_str(self) -> &'static str {
        self.name().as_str()
    }

    /// An instant fault (`restart`): it happens once and is never in force.
    pub fn is_instant(self) -> bool {
        self == FaultKind::Restart
    }

    /// The fault `name` with the wire parameters `p`: those its kind needs must be
    /// there and in range (`errors`' `code` defaults to `unavailable`); the others are
    /// ignored.
    pub fn from_wire(name: FaultName, p: &FaultParams) -> Result<FaultKind, FaultParamError> {
        let missing = |param, message| FaultParamError { param, message };
        Ok(match name {
            FaultName::Kill => FaultKind::Kill,
            FaultName::Hang => FaultKind::Hang,
            FaultName::Slow => FaultKind::Slow {
                latency: p
                    .latency
                    .ok_or(missing("latency", "`slow` needs `latency`, e.g. \"200ms\""))?,
            },
            FaultName::Errors => {
                FaultKind::Errors {
                    probability: p.probability.filter(|x| (0.0..=1.0).contains(x)).ok_or(
                        missing("probability", "`errors` needs `probability` in [0, 1]"),
                    )?,
                    code: p.code.unwrap_or(FailureCode::Unavailable),
                }
            }
            FaultName::Exhaust => FaultKind::Exhaust,
            FaultName::FreezeMetrics => FaultKind::FreezeMetrics,
            FaultName::Status => FaultKind::Status {
                status: p.status.ok_or(missing(
                    "status",
                    "`status` needs `status`: draining | unhealthy | standby | healthy",
                ))?,
            },
            FaultName::Restart => FaultKind::Restart,
        })
    }

    /// The fault's parameters in their wire form.
    pub fn params(self) -> FaultParams {
        let mut p = FaultParams::default();
        match self {
            FaultKind::Slow { latency } => p.latency = Some(latency),
            FaultKind::Errors { probability, code } => {
                p.probability = Some(probability);
                p.code = Some(code);
            }
            FaultKind::Status { status } => p.status = Some(status),
            FaultKind::Kill
            | FaultKind::Hang
            | FaultKind::Exhaust
            | FaultKind::FreezeMetrics
            | FaultKind::Restart => {}
        }
        p
    }
}

/// A fault's parameters on the wire, flattened into its object; which ones apply
/// depends on the kind ([`FaultKind::from_wire`]).
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

/// A fault as the wire carries it: `{"kind": "slow", "latency": "200ms"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct FaultWire {
    kind: FaultName,
    #[serde(flatten)]
    params: FaultParams,
}

impl TryFrom<FaultWire> for FaultKind {
    type Error = FaultParamError;
    fn try_from(w: FaultWire) -> Result<Self, Self::Error> {
        FaultKind::from_wire(w.kind, &w.params)
    }
}

impl From<FaultKind> for FaultWire {
    fn from(k: FaultKind) -> Self {
        FaultWire {
            kind: k.name(),
            params: k.params(),
        }
    }
}

impl Serialize for FaultKind {
    /// As an object: `{"kind": "slow", "latency": "200ms"}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        FaultWire::from(*self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for FaultKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = FaultWire::deserialize(d)?;
        FaultKind::try_from(w).map_err(serde::de::Error::custom)
    }
}

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
