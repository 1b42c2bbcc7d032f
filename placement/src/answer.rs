//! How a placement failure is answered over HTTP: decided here once, for the service
//! and the simulator alike.
//!
//! Facts from E2B's `packages/api/internal/orchestrator/placement_errors.go` (since
//! 2026-08-19) and, for [`FailureAnswers::Legacy`], the `create_instance.go` that
//! deployments before 2026-08-13 ran.

use serde::{Deserialize, Serialize};

use super::attempt::PlacementFailure;

/// Every message of a placement failure starts with this (clients match on it).
pub const FAILED_TO_PLACE: &str = "Failed to place sandbox";

/// Which generation of E2B's API the answers imitate.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum FailureAnswers {
    /// E2B today: 503 / 504 / 500 with an `error_code` per cause. The default.
    #[default]
    E2b,
    /// Deployments before 2026-08-13: every placement failure is a 500 "Failed to place
    /// sandbox" without `error_code`.
    Legacy,
}

impl FailureAnswers {
    /// Every generation, in the order a flag's help lists them.
    pub const ALL: [FailureAnswers; 2] = [FailureAnswers::E2b, FailureAnswers::Legacy];

    /// The name used in profiles and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureAnswers::E2b => "e2b",
            FailureAnswers::Legacy => "legacy",
        }
    }

    /// The answer to a request that could not be placed.
    pub fn answer(self, f: &PlacementFailure) -> FailureAnswer {
        if self == FailureAnswers::Legacy {
            return FailureAnswer {
                status: CreateStatus::InternalServerError,
                error_code: None,
                message: FAILED_TO_PLACE.to_string(),
            };
        }
        let (status, code, detail) = match f {
            PlacementFailure::Timeout { attempts: 0 } => (
                CreateStatus::GatewayTimeout,
                ErrorCode::PlacementTimeout,
                "placement timed out, please retry".to_string(),
            ),
            PlacementFailure::Timeout { attempts } => (
                CreateStatus::GatewayTimeout,
                ErrorCode::PlacementTimeout,
                format!("placement timed out after {attempts} attempt(s), please retry"),
            ),
            PlacementFailure::NoNodesAvailable => (
                CreateStatus::ServiceUnavailable,
                ErrorCode::CapacityUnavailable,
                "not enough capacity for the requested resources right now, please retry shortly"
                    .to_string(),
            ),
            PlacementFailure::NoCandidate(_) => (
                CreateStatus::ServiceUnavailable,
                ErrorCode::NoCompatibleNode,
                "no compatible node for this template's requirements".to_string(),
            ),
            PlacementFailure::CreateFailed {
                forwarded: Some(m), ..
            } => (
                CreateStatus::InternalServerError,
                ErrorCode::SandboxCreateFailed,
                m.clone(),
            ),
            PlacementFailure::CreateFailed { attempts, .. } => (
                CreateStatus::InternalServerError,
                ErrorCode::SandboxCreateFailed,
                format!(
                    "sandbox creation failed on {attempts} node(s), please retry; \
                     if the problem persists, contact us"
                ),
            ),
        };
        FailureAnswer {
            status,
            error_code: Some(code),
            message: format!("{FAILED_TO_PLACE}: {detail}"),
        }
    }
}

impl std::fmt::Display for FailureAnswers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The HTTP statuses a create answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CreateStatus {
    /// 201: placed.
    Created,
    /// 500: the creates failed (or any failure, in the legacy answers).
    InternalServerError,
    /// 503: no capacity, or no compatible node.
    ServiceUnavailable,
    /// 504: the request deadline passed while placing.
    GatewayTimeout,
}

impl CreateStatus {
    /// The numeric status.
    pub fn code(self) -> u16 {
        match self {
            CreateStatus::Created => 201,
            CreateStatus::InternalServerError => 500,
            CreateStatus::ServiceUnavailable => 503,
            CreateStatus::GatewayTimeout => 504,
        }
    }

    /// The status as reports key it (`"201"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            CreateStatus::Created => "201",
            CreateStatus::InternalServerError => "500",
            CreateStatus::ServiceUnavailable => "503",
            CreateStatus::GatewayTimeout => "504",
        }
    }
}

/// E2B's semantic `error_code` of a placement failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorCode {
    /// `sandbox_placement_timeout`.
    #[serde(rename = "sandbox_placement_timeout")]
    PlacementTimeout,
    /// `sandbox_capacity_unavailable`.
    #[serde(rename = "sandbox_capacity_unavailable")]
    CapacityUnavailable,
    /// `sandbox_no_compatible_node`.
    #[serde(rename = "sandbox_no_compatible_node")]
    NoCompatibleNode,
    /// `sandbox_create_failed`.
    #[serde(rename = "sandbox_create_failed")]
    SandboxCreateFailed,
}

impl ErrorCode {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::PlacementTimeout => "sandbox_placement_timeout",
            ErrorCode::CapacityUnavailable => "sandbox_capacity_unavailable",
            ErrorCode::NoCompatibleNode => "sandbox_no_compatible_node",
            ErrorCode::SandboxCreateFailed => "sandbox_create_failed",
        }
    }
}

/// Status, `error_code` and message of a failed create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureAnswer {
    /// HTTP status.
    pub status: CreateStatus,
    /// `error_code` (absent in the legacy answers).
    pub error_code: Option<ErrorCode>,
    /// `message`, starting with [`FAILED_TO_PLACE`].
    pub message: String,
}

/// How the node answered the Delete of a sandbox the instance tracks (E2B's
/// `packages/api/internal/orchestrator/delete_instance.go`, `handlers/sandbox_kill.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The node deleted it.
    Deleted,
    /// The node answered NotFound: already gone, which is a success.
    NotOnNode,
    /// Any other error (or the node is unknown).
    Failed,
}

impl DeleteOutcome {
    /// The HTTP status of the kill: 204, except 500 for [`DeleteOutcome::Failed`]. The
    /// store entry is removed in every case.
    pub fn status(self) -> u16 {
        match self {
            DeleteOutcome::Deleted | DeleteOutcome::NotOnNode => 204,
            DeleteOutcome::Failed => 500,
        }
    }

    /// Whether the sandbox's vCPU leaves the node's optimistic allocation.
    pub fn releases_vcpu(self) -> bool {
        self != DeleteOutcome::Failed
    }
}
