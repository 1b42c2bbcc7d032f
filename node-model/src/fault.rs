//! The faults a node accepts: the typed form and its flat wire form.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::FailureCode;
use crate::snapshot::ServiceStatus;

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
